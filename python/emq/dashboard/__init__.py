"""emq's web dashboard: the queues, their lanes and jobs in a browser, live, with the actions an operator takes.

    emq dashboard --queue orders            # http://127.0.0.1:8000/, this machine only
    emq dashboard --host 0.0.0.0 --token    # elsewhere: a password or a token is required

or mounted in a Starlette or FastAPI application:

    from emq.dashboard import create_app
    app.mount("/emq", create_app(client, queues=["orders"], auth=None))  # the host app's auth guards it

It needs the `dashboard` extra (`pip install 'emq[dashboard]'`). The modules:
`app` (the ASGI app and its routes), `source` (the reads and actions, through
`emq.Queue`), `security` (login, CSRF, headers), `present` (how values are
shown), `metrics` (`/metrics`), `serve` (the `emq dashboard` command).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import check_extra

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from .._core import Client
    from .security import AuthCheck

__all__ = ["LOOPBACK_ONLY", "create_app"]


class _LoopbackOnly:
    """`create_app`'s default `auth`: no login of its own, and loopback requests only."""

    def __repr__(self) -> str:
        return "LOOPBACK_ONLY"


LOOPBACK_ONLY: Any = _LoopbackOnly()


def create_app(
    client: Client | None = None,
    *,
    url: str | None = None,
    queues: Sequence[str] = (),
    read_only: bool = False,
    password: str | None = None,
    token: str | None = None,
    auth: AuthCheck | None = LOOPBACK_ONLY,
    secret: bytes | str | None = None,
    refresh: float = 3.0,
) -> Starlette:
    """The dashboard as an ASGI application (Starlette).

    `client`: an `emq.Client`; else `emq.connect(url)` (`url` left out:
    `EMQ_URL`, else an embedded Valkey). `queues`: the queues the overview and
    `/metrics` list (until emq keeps a registry of queues); any queue can be
    opened by name. `read_only`: no action is offered, and every action's POST
    is refused (403).

    Who may use it, one of: `password` (HTTP basic, any user name), `token`
    (`Authorization: Bearer`, or the login page's session cookie), `auth` a
    callable `auth(request) -> bool` (or an awaitable bool) that the host
    application supplies, or `auth=None`: no check of its own, the host
    application guards the mount. With none of them (`LOOPBACK_ONLY`, the
    default), it answers only requests that reach it on a loopback address and
    name a loopback host.

    `secret`: the key that signs its CSRF tokens and login sessions (at least 16
    bytes); give every process that serves the dashboard the same one. Left out:
    a random key per process, so a restart logs everyone out. `refresh`: how
    often (s) an open page fetches its live parts again.

    A bad argument raises `emq.ArgumentError` naming it. Without the
    `dashboard` extra, `emq.MissingExtraError`.
    """
    try:
        from . import app
    except ModuleNotFoundError as e:
        for module in ("starlette", "jinja2", "prometheus_client"):
            check_extra(e, module, "dashboard", "emq.dashboard")
        raise
    return app.create_app(
        client,
        url=url,
        queues=queues,
        read_only=read_only,
        password=password,
        token=token,
        secret=secret,
        refresh=refresh,
        auth=auth,
    )
