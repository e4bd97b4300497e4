"""The production-condition fixtures (tests/servers.py), checked with redis-py:
a password, narrow ACL users with `default` off, TLS with a CA of its own (and
how a subprocess's OpenSSL comes to trust it), a replica."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import redis

from emq.embedded import Server

from servers import ADMIN_USER, no_retry

# -- requirepass ----------------------------------------------------------------------------


def test_a_server_with_requirepass_starts_and_refuses_strangers():
    """Server._wait_ready takes -NOAUTH for ready."""
    with Server(extra=["--requirepass", "pw"]) as s:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=s.port, retry=no_retry()).ping()
        assert redis.Redis(port=s.port, password="pw").ping()


def test_protected_server(protected_server):
    p = protected_server
    assert "@" not in p.url and p.password
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(p.url, retry=no_retry()).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(p.url_for(password="wrong"), retry=no_retry()).ping()
    c = redis.Redis.from_url(p.url_for(password=p.password, db=2))  # a space in it, quoted
    c.set("k", "v")
    admin = p.admin()
    assert admin.acl_whoami() == ADMIN_USER
    assert admin.get("k") is None and redis.Redis.from_url(p.url_for(password=p.password)).get("k") is None
    admin.select(2)
    assert admin.get("k") == b"v"


def test_protected_server_is_reset_between_tests(protected_server):
    """What the test above and the ACL tests leave behind is gone."""
    admin = protected_server.admin()
    assert admin.dbsize() == 0
    assert set(admin.acl_users()) == {"default", ADMIN_USER}
    assert "on" in admin.acl_getuser("default")["flags"]


# -- ACL ---------------------------------------------------------------------------------------


def _setinfo(server) -> list[str]:
    """CLIENT SETINFO (lib-name): Valkey 8+ and Redis 7.2+; Redis 7.0 knows no such command."""
    return ["client|setinfo"] if server.kind in ("valkey", "valkey8") else []


def test_acl_user_is_held_to_its_commands_and_keys(acl, protected_server):
    url = acl.restrict("emq-app", "app-pw", ["ping", "get", "set", *_setinfo(protected_server)])
    app = redis.Redis.from_url(url, retry=no_retry())
    assert app.ping()
    app.set("emq:{q}:x", "1")
    assert app.get("emq:{q}:x") == b"1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.get("other")
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.eval("return 1", 0)
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.delete("emq:{q}:x")  # not in its command list
    # `default` is off: no password, or default's own, gets nothing
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(protected_server.url, retry=no_retry()).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(protected_server.url_for(password=protected_server.password), retry=no_retry()).ping()
    assert any(e["reason"] == "command" for e in acl.log())


def test_acl_lists_who_is_connected_as_whom(acl, protected_server):
    url = acl.restrict("emq-app", "app-pw", ["ping", *_setinfo(protected_server)])
    conns = [redis.Redis.from_url(url) for _ in range(2)]
    for c in conns:
        c.ping()
    clients = acl.clients()
    assert len(clients) == 2 and acl.users() == {"emq-app"}
    assert {c["lib-name"] for c in clients} == ({"redis-py"} if _setinfo(protected_server) else {None})
    assert {c["user"] for c in acl.clients(include_admin=True)} == {"emq-app", ADMIN_USER}


# -- TLS ----------------------------------------------------------------------------------------


def test_tls_with_the_ca_and_not_without(tls_server):
    t = tls_server
    assert t.url.startswith("rediss://127.0.0.1:")
    c = t.client()
    c.set("k", "over tls")
    assert t.admin().get("k") == b"over tls"
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        t.client(trust=False).ping()
    assert redis.Redis.from_url(t.url, ssl_ca_certs=str(t.ca)).ping()
    assert redis.Redis.from_url(t.url_for(host="localhost"), ssl_ca_certs=str(t.ca)).ping()
    with pytest.raises(redis.ConnectionError):  # plain RESP on the TLS port
        redis.Redis(port=t.tls_port, retry=no_retry(), socket_timeout=2).ping()


_CONNECT = """
import sys, emq
try:
    print("ok" if emq.connect(sys.argv[1], connect_timeout=3).ping() else "no")
except emq.ConnectionError as e:
    print("refused:", e)
"""


def _emq_connects(url: str, env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", _CONNECT, url], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_ssl_cert_file_makes_the_rust_core_trust_the_ca(tls_server, tls_env):
    """emq's core (native-tls on OpenSSL) trusts what SSL_CERT_FILE names; run in
    subprocesses, because native-tls keeps the first file it was given for the
    rest of a process."""
    bare = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    assert tls_env["SSL_CERT_FILE"] == str(tls_server.ca)
    assert _emq_connects(tls_server.url, tls_env) == "ok"
    assert _emq_connects(tls_server.url_for(host="localhost"), tls_env) == "ok"
    assert "certificate verify failed" in _emq_connects(tls_server.url, bare)
    assert _emq_connects(tls_server.insecure_url, bare) == "ok"


# -- replication --------------------------------------------------------------------------------


def test_replica_follows_and_is_read_only(replica):
    primary = redis.Redis.from_url(replica.primary_url)
    rep = redis.Redis.from_url(replica.url, retry=no_retry())
    assert rep.info("replication")["role"] == "slave"
    assert replica.link_up()
    primary.set("emq:{q}:k", "v")
    replica.sync()
    assert rep.get("emq:{q}:k") == b"v"
    with pytest.raises(redis.exceptions.ReadOnlyError):
        rep.set("emq:{q}:k", "w")


def test_replica_is_reset_between_tests(replica):
    assert redis.Redis.from_url(replica.url).dbsize() == 0
