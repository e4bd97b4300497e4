"""Connecting: a connection owned by the Rust core."""

from __future__ import annotations

from datetime import timedelta

from ._core import Client


def connect(
    url: str | None = None,
    *,
    connect_timeout: float | timedelta = 5.0,
    read_timeout: float | timedelta | None = 30.0,
    spin: float | timedelta = 0.000150,
    wait_replicas: int = 0,
    wait_timeout: float | timedelta = 1.0,
) -> Client:
    """A connection owned by the Rust core.

    `url` is `redis://[user:password@]host:port/db`, `rediss://…` (TLS; the
    system's trusted certificates, or `SSL_CERT_FILE`; `#insecure` skips the
    check) or `unix:///path?db=N&user=U&pass=P`; with no URL, `EMQ_URL` when
    set, else the per-user development server: a valkey-server on a Unix socket
    that every process of the user finds, started on first use and running on
    until `emq server stop` (`emq.devserver`). Durations are seconds (an int or a float) or a
    `datetime.timedelta`. `read_timeout=None` waits as long as the server takes.
    Credentials the server refuses, or a server that wants a password the URL
    does not give, raise `emq.AuthenticationError` here, saying which.

    `spin`: how long a read polls the socket for the server's answer before it
    sleeps until woken (0: sleep at once; at most 0.01 s; kept to the
    microsecond). The default, 150 µs, is about twice what a wake-up costs on a
    virtual machine (an idle core takes about 60 µs to wake): a round trip of a
    small command drops from about 90 µs to 30 on loopback, and the server,
    whose answers then find the reader awake, spends less on waking it
    (benches/JOURNAL.md, "The client's wait"); a sweep waits on three round trips. The poll yields the
    core to any other thread that wants it, and a longer wait sleeps after it.
    TCP and Unix sockets; a TLS connection always sleeps. `emq.promote` and
    `emq.stalled_check` poll longer: a quarter more than the longest wait of the
    connection's last sweep of the same backend and kind (a backlog's calls take
    about as long as each other), up to 10 ms; with 0, they sleep at once too. A
    worker's beat keeps `spin`.

    `wait_replicas`: every call that writes returns only once this many replicas
    have acknowledged its writes (`WAIT`), within `wait_timeout` (kept to the
    millisecond); else it raises `emq.NotReplicatedError` (the writes are
    applied on the primary, and a failover now may lose them). 0 (the default):
    no wait. A write acknowledged by the primary alone can be lost when the
    primary dies before its replicas have it (a `SIGKILL`ed primary in the
    tests lost up to a few such adds).

    Every connection emq opens for this client's work (a worker's, a sweeper's)
    is a `client.sibling()`: the same address, credentials, TLS, database,
    timeouts, spin and replica wait. No string emq shows holds the password.
    """
    if url is None:
        from .devserver import default_url

        url = default_url()
    return Client(
        url,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        spin=spin,
        wait_replicas=wait_replicas,
        wait_timeout=wait_timeout,
    )
