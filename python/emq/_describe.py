"""One line about a server, for the CLI and the demo: its name, version,
address (without a password) and clock."""

from __future__ import annotations

from ._core import Client


def server_line(client: Client) -> str:
    info = client.info("server")
    name = info.get("server_name") or "redis"
    version = info.get("valkey_version") or info.get("redis_version", "?")
    return f"{name} {version} at {client.address}, server clock {client.time_ms()} ms"
