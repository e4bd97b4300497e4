"""Connecting: a connection owned by the Rust core."""

from __future__ import annotations

import math

from ._core import Client
from .errors import ArgumentError


def _seconds(name: str, value: object, *, none_ok: bool) -> float:
    if value is None and none_ok:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(f"emq.connect: {name} must be a number of seconds, not {type(value).__name__}")
    return value


def connect(
    url: str | None = None,
    *,
    connect_timeout: float = 5.0,
    read_timeout: float | None = 30.0,
    spin_us: int | None = None,
    wait_replicas: int = 0,
    wait_timeout: float = 1.0,
) -> Client:
    """A connection owned by the Rust core.

    `url` is `redis://[user:password@]host:port/db`, `rediss://…` (TLS; the
    system's trusted certificates, or `SSL_CERT_FILE`; `#insecure` skips the
    check) or `unix:///path?db=N&user=U&pass=P`; with no URL, `EMQ_URL` when
    set, else a private valkey-server started on 127.0.0.1 (stopped when the
    process exits). Timeouts are in seconds; `read_timeout=None` waits as long
    as the server takes. Credentials the server refuses (or a server that wants
    some) raise `emq.AuthenticationError` here.

    `spin_us`: how long a read polls the socket for the server's answer before
    it sleeps until woken (None: 150 µs; 0: sleep at once; at most 10,000).
    Waking a sleeping reader is slow on virtual machines (about 60 µs of a
    90 µs round trip on loopback), and a sweep waits on three round trips; the
    poll yields the core to any other thread that wants it, and a longer wait
    sleeps after it. TCP and Unix sockets; a TLS connection always sleeps.
    `emq.promote` and `emq.stalled_check` poll longer: a quarter more than the
    longest wait of the connection's last sweep of the same backend and kind
    (a backlog's calls take about as long as each other), up to 10 ms; with 0,
    they sleep at once too. A worker's beat keeps `spin_us`.

    `wait_replicas`: every call that writes returns only once this many replicas
    have acknowledged its writes (`WAIT`), within `wait_timeout` seconds; else it
    raises `emq.NotReplicatedError` (the writes are applied on the primary, and a
    failover now may lose them). 0 (the default): no wait. A write acknowledged
    by the primary alone can be lost when the primary dies before its replicas
    have it (a `SIGKILL`ed primary in the tests lost up to a few such adds).

    Every connection emq opens for this client's work (a worker's, a sweeper's)
    is a `client.sibling()`: the same address, credentials, TLS, database,
    timeouts, spin and replica wait. No string emq shows holds the password.
    """
    if url is None:
        from .embedded import default_url

        url = default_url()
    if not isinstance(url, str):
        raise ArgumentError(f"emq.connect: url must be a str, not {type(url).__name__}")
    return Client(
        url,
        connect_timeout=_seconds("connect_timeout", connect_timeout, none_ok=False),
        read_timeout=_seconds("read_timeout", read_timeout, none_ok=True),
        spin_us=spin_us,
        wait_replicas=wait_replicas,
        wait_timeout=_seconds("wait_timeout", wait_timeout, none_ok=False),
    )
