"""The `emq dashboard` command: the dashboard served by uvicorn, on 127.0.0.1 unless a password or a token guards it.

`--password` and `--token` take their value from the command line, or, given
alone, from `EMQ_DASHBOARD_PASSWORD` / `EMQ_DASHBOARD_TOKEN` (a command line is
visible to every user of the machine); a password is then asked for on the
terminal, and a token made at random and printed once. Listening on any
address but a loopback one without either is refused before anything starts.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import os
import secrets
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import check_extra
from .security import is_loopback_host

if TYPE_CHECKING:
    from .._core import Client

ENV_PASSWORD = "EMQ_DASHBOARD_PASSWORD"
ENV_TOKEN = "EMQ_DASHBOARD_TOKEN"
FROM_ENVIRONMENT = "\0from the environment"  # `--password` given without a value; no typed value is this


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`emq dashboard`'s options."""
    p.add_argument(
        "--url",
        default=None,
        help="redis://, rediss:// or unix:// URL of the server (default: EMQ_URL, else an embedded Valkey); "
        "prefer EMQ_URL for a URL with a password",
    )
    p.add_argument("--queue", "-q", action="append", default=[], help="a queue the overview and /metrics list; repeat it for several")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--password",
        nargs="?",
        const=FROM_ENVIRONMENT,
        help=f"HTTP basic authentication with this password (any user name); alone: {ENV_PASSWORD}, else asked for",
    )
    who.add_argument(
        "--token",
        nargs="?",
        const=FROM_ENVIRONMENT,
        help=f"a token to log in with (the login page, or Authorization: Bearer); alone: {ENV_TOKEN}, else a random one, printed",
    )
    p.add_argument("--read-only", action="store_true", help="show, never act: no action is offered, and every action is refused")
    p.add_argument("--refresh", type=float, default=3.0, help="how often (s) an open page fetches its live parts again")


def _password(given: str | None) -> str | None:
    if given != FROM_ENVIRONMENT:
        return given
    if os.environ.get(ENV_PASSWORD):
        return os.environ[ENV_PASSWORD]
    if not sys.stdin.isatty():
        raise SystemExit(f"emq dashboard: --password alone reads {ENV_PASSWORD}, which is not set, and there is no terminal to ask on")
    return getpass.getpass("emq dashboard: password: ") or None


def _token(given: str | None) -> str | None:
    if given != FROM_ENVIRONMENT:
        return given
    if os.environ.get(ENV_TOKEN):
        return os.environ[ENV_TOKEN]
    token = secrets.token_urlsafe(24)
    print(f"emq dashboard: log in with the token {token}", file=sys.stderr)
    return token


def run(args: argparse.Namespace, connect: Callable[[str | None], Client]) -> int:
    """Serves the dashboard until stopped (Ctrl-C); 2 when the options are refused.
    `connect` is the CLI's: it says first which server the dashboard reads."""
    if not 0 < args.port < 65536:
        print(f"emq dashboard: --port must be from 1 to 65535, not {args.port}", file=sys.stderr)
        return 2
    if not is_loopback_host(args.host) and args.password is None and args.token is None:
        print(
            f"emq dashboard: refusing to listen on {args.host} without --password or --token "
            "(anyone who reaches it could act on the queues)",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from .app import create_app
    except ModuleNotFoundError as e:
        for module in ("uvicorn", "starlette", "jinja2", "prometheus_client"):
            check_extra(e, module, "dashboard", "emq dashboard")
        raise
    password, token = _password(args.password), _token(args.token)
    if args.password is not None and not password:
        print("emq dashboard: the password is empty", file=sys.stderr)
        return 2
    client = connect(args.url)
    app = create_app(client=client, queues=args.queue, read_only=args.read_only, password=password, token=token, refresh=args.refresh)
    address = app.state.dashboard.source.client.address
    guard = "password" if password else "token" if token else "this machine only"
    shown = f"[{args.host}]" if ":" in args.host else args.host
    mode = ", read-only" if args.read_only else ""
    print(f"emq dashboard: http://{shown}:{args.port}/ ({guard}{mode}) on {address}", file=sys.stderr, flush=True)
    verbose = logging.getLogger().isEnabledFor(logging.INFO)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info" if verbose else "warning", access_log=verbose)
    return 0
