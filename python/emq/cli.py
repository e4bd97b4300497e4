"""The `emq` command."""

from __future__ import annotations

import argparse
import sys


def _server_line(client) -> str:
    info = client.info("server")
    name = info.get("server_name") or "redis"
    version = info.get("valkey_version") or info.get("redis_version", "?")
    return f"{name} {version} at {client.address}, clock {client.time_ms()} ms"


def demo(args) -> int:
    import emq

    client = emq.connect(args.url)
    print(_server_line(client))
    return 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="emq", description="emq: move time in a Redis/Valkey job queue")
    sub = parser.add_subparsers(dest="verb", required=True)
    d = sub.add_parser("demo", help="run the demo (an embedded Valkey unless --url)")
    d.add_argument("--url", default=None)
    d.set_defaults(run=demo)
    args = parser.parse_args(argv)
    sys.exit(args.run(args))
