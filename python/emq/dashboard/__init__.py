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

from typing import TYPE_CHECKING, Any

from ..errors import check_extra
from .security import LOOPBACK_ONLY

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["LOOPBACK_ONLY", "create_app"]


def __getattr__(name: str) -> Any:
    # `create_app` is imported on first use, so that `emq dashboard --help` and the CLI's
    # other verbs work without the extra, and a missing one is named.
    if name == "create_app":
        try:
            from .app import create_app
        except ModuleNotFoundError as e:
            for module in ("starlette", "jinja2", "prometheus_client"):
                check_extra(e, module, "dashboard", "emq.dashboard")
            raise
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
