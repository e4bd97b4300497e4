"""Connecting: a connection owned by the Rust core."""

from __future__ import annotations

from ._core import Client
from .errors import ArgumentError


def connect(
    url: str | None = None,
    *,
    connect_timeout: float = 5.0,
    read_timeout: float | None = 30.0,
) -> Client:
    """A connection owned by the Rust core.

    `url` is `redis://[user:password@]host:port/db` or `rediss://…` (TLS); with no
    URL, `EMQ_URL` when set, else a private valkey-server started on 127.0.0.1
    (stopped when the process exits). Timeouts are in seconds; `read_timeout=None`
    waits as long as the server takes.
    """
    if url is None:
        from .embedded import default_url

        url = default_url()
    if not isinstance(url, str):
        raise ArgumentError(f"emq.connect: url must be a str, not {type(url).__name__}")
    return Client(url, connect_timeout=connect_timeout, read_timeout=read_timeout)
