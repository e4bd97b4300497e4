"""The dashboard's ASGI application: its pages, their live fragments, the actions, `/metrics` and the login.

`create_app` checks its arguments, makes a `Source` (the reads and actions
through `emq.Queue`) and a `Guard` (the login and the CSRF tokens), and
returns a Starlette app to serve with uvicorn (`emq dashboard`) or to mount in
a host application (`app.mount("/emq", create_app(...))`).

Pages are rendered on the server from Jinja2 templates with autoescape on.
The parts of a page that change are fragments of their own, which htmx
(vendored in `static/`) fetches again every `refresh` seconds while the tab is
visible (`static/dashboard.js` ticks them). Actions are plain HTML forms that
POST and are redirected back (303), so they work without JavaScript. Every
call to the server runs in a worker thread: the event loop never waits on it.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .._core import Client
from ..errors import ArgumentError, ConnectionError, EmqError
from . import present
from .charts import Chart, chart, grouped
from .metrics import metrics_response
from .security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    LOOPBACK_ONLY,
    SESSION_COOKIE,
    SESSION_S,
    AuthCheck,
    AuthMode,
    Guard,
    Refusal,
    SecurityHeaders,
    app_path,
)
from .source import STATES, Source

log = logging.getLogger("emq.dashboard")

HERE = Path(__file__).parent
MAX_FORM_BYTES = 64 * 1024
"""The largest form body accepted: a few fields, and the ids of a page's jobs selected."""
PAGE = 50
"""Jobs a page of the queue page shows."""
MAX_FORM_FIELDS = 16 + PAGE
"""A form's fields at most: its own few, and an `id` for each job of a page."""
JOB_ACTIONS = {"retry": "Retried", "cancel": "Cancelled", "delete": "Deleted", "promote-now": "Promoted"}
"""The actions on chosen jobs, and the word the notice says of each."""
SCHEDULE_ACTIONS = ("pause-schedule", "resume-schedule", "run-schedule-now")
"""The actions on one of the queue's schedules (`Queue.pause_schedule`, `resume_schedule`, `run_schedule_now`)."""
FLASH_COOKIE = "emq_flash"
NAV = {"overview.html": "overview", "queue.html": "overview", "job.html": "job", "workers.html": "workers", "_workers_live.html": "workers"}
"""The header's link each page lights up."""
PUBLIC_PREFIXES = ("/static/", "/login")
"""What a browser gets before it logs in: the login page and its stylesheet."""


class Dashboard:
    """One dashboard: its source, guard, templates and settings; the routes' endpoints are its methods."""

    def __init__(self, source: Source, guard: Guard, *, read_only: bool, refresh: float):
        self.source = source
        self.guard = guard
        self.read_only = read_only
        self.refresh = refresh
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every template, whatever its name: no value reaches a page unescaped
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(
            path=lambda s: quote(str(s), safe=""),
            query=lambda s: quote(str(s), safe=""),
            count=present.count,
            duration=present.duration,
            utc=present.utc_time,
            ms=present.epoch_ms,
            relative=present.relative,
        )
        from .. import __version__

        self.version = __version__

    # -- rendering -------------------------------------------------------------

    def render(self, request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        """The page `template` with the context every page has; sets the CSRF cookie on a browser's first page."""
        csrf, new = self.guard.csrf_token(request)
        root = request.scope.get("root_path", "")
        flash = request.cookies.get(FLASH_COOKIE)
        page = not template.startswith("_")  # a whole page, not a live fragment
        html = self.templates.get_template(template).render(
            root=root,
            csrf=csrf,
            read_only=self.read_only,
            refresh=f"{self.refresh:g}",
            version=self.version,
            address=self.source.client.address,
            logged_in=self.guard.mode is AuthMode.TOKEN and self.guard.session_ok(request.cookies.get(SESSION_COOKIE)),
            flash=unquote(flash)[:300] if flash and page else None,
            states=STATES,
            nav=NAV.get(template, ""),
            **context,
        )
        response = HTMLResponse(html, status)
        secure = request.url.scheme == "https"
        if new:
            response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict", path=root or "/", secure=secure)
        if flash and page:
            response.delete_cookie(FLASH_COOKIE, path=root or "/")
        return response

    def refused(self, request: Request, refusal: Refusal) -> Response:
        if refusal.login_page and request.method == "GET" and "hx-request" not in request.headers:
            return self.render(request, "login.html", status=refusal.status, wrong=False)
        headers = {"WWW-Authenticate": 'Basic realm="emq dashboard", charset="UTF-8"'} if refusal.basic_challenge else None
        return PlainTextResponse(refusal.reason + "\n", refusal.status, headers=headers)

    def failed(self, request: Request, error: EmqError, *, status: int | None = None) -> HTMLResponse:
        """An error page for a call emq refused (bad input: 400) or could not make (the server: 503, 502)."""
        if status is None:
            status = 400 if isinstance(error, ArgumentError) else 503 if isinstance(error, ConnectionError) else 502
        return self.render(request, "error.html", status=status, kind=type(error).__name__, message=str(error))

    async def call(self, request: Request, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a worker thread: the server's answer, or the `EmqError` it raised."""
        try:
            return await run_in_threadpool(fn, *args)
        except EmqError as e:
            log.warning("%s %s: %s: %s", request.method, request.url.path, type(e).__name__, e)
            return e

    # -- pages -----------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        summaries = await self.call(request, self.source.overview)
        if isinstance(summaries, EmqError):
            return self.failed(request, summaries)
        fragment = request.url.path.endswith("/fragments/overview")
        workers = await self.call(request, self.source.workers)
        if isinstance(workers, EmqError):
            return self.failed(request, workers)
        charts = None
        if not fragment:  # the live fragment is the queues' table: the charts load with the page
            charts = await self.call(request, self.throughput_charts, None)
            if isinstance(charts, EmqError):
                return self.failed(request, charts)
        return self.render(
            request,
            "_overview_queues.html" if fragment else "overview.html",
            summaries=summaries,
            charts=charts,
            workers=workers,
        )

    def throughput_charts(self, queue: str | None) -> tuple[Chart, Chart]:
        """The last hour's chart (a bar a minute) and the last day's (a bar an hour), from one day's read."""
        day = self.source.throughput(queue)
        return (
            chart("Last hour", day[-60:], span_label="minute"),
            chart("Last day", grouped(day[len(day) % 60 :], 60), span_label="hour"),
        )

    async def open_queue(self, request: Request) -> Response:
        name = request.query_params.get("name", "").strip()
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}/queues/{quote(name, safe='')}" if name else f"{root}/", status_code=303)

    async def queue(self, request: Request) -> Response:
        name = request.path_params["name"]
        view = await self.call(request, self.source.queue_view, name)
        if isinstance(view, EmqError):
            return self.failed(request, view)
        state = request.query_params.get("state") or ("dead" if view.by_state["dead"] else "pending")
        offset_text = request.query_params.get("offset", "0")
        if state not in STATES or not (offset_text.isascii() and offset_text.isdigit()) or len(offset_text) > 15:
            message = f"state must be one of {', '.join(STATES)} and offset a whole number of jobs"
            return self.render(request, "error.html", status=400, kind="ArgumentError", message=message)
        offset = int(offset_text)
        jobs = await self.call(request, self.source.jobs_by_state, name, state, offset, PAGE)
        if isinstance(jobs, EmqError):
            return self.failed(request, jobs)
        fragment = request.url.path.startswith(request.scope.get("root_path", "") + "/fragments/")
        charts = None
        if not fragment:
            charts = await self.call(request, self.throughput_charts, name)
            if isinstance(charts, EmqError):
                return self.failed(request, charts)
        template = "_queue_live.html" if fragment else "queue.html"
        return self.render(request, template, view=view, jobs=jobs, state=state, offset=offset, charts=charts)

    async def job(self, request: Request) -> Response:
        queue = request.query_params.get("queue", "").strip()
        id = request.query_params.get("id", "")  # as given: an id may hold spaces
        fragment = request.url.path.endswith("/fragments/job")
        if not queue or not id:
            return self.render(request, "job.html", queue=queue, id=id, view=None, shown=None, missing=False)
        view = await self.call(request, self.source.job, queue, id)
        if isinstance(view, EmqError):
            return self.failed(request, view)
        if view is None:
            return self.render(request, "job.html", status=404, queue=queue, id=id, view=None, shown=None, missing=True)
        shown = present.show_data(view.job.data)
        error = present.show_data(view.job.error.encode()) if view.job.error else None
        return self.render(
            request,
            "_job_live.html" if fragment else "job.html",
            queue=queue,
            id=id,
            view=view,
            shown=shown,
            error=error,
            missing=False,
            relative=lambda ms: present.relative(ms, view.now_ms),
        )

    async def workers(self, request: Request) -> Response:
        workers = await self.call(request, self.source.workers)
        if isinstance(workers, EmqError):
            return self.failed(request, workers)
        now_ms = await self.call(request, self.source.now_ms)
        if isinstance(now_ms, EmqError):
            return self.failed(request, now_ms)
        fragment = request.url.path.endswith("/fragments/workers")
        return self.render(request, "_workers_live.html" if fragment else "workers.html", workers=workers, now_ms=now_ms)

    async def metrics(self, request: Request) -> Response:
        body = await self.call(request, metrics_response, self.source)
        if isinstance(body, EmqError):
            return PlainTextResponse(f"# emq: {type(body).__name__}: {body}\n", 503)
        content, content_type = body
        return Response(content, media_type=content_type)

    # -- login -------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        root = request.scope.get("root_path", "")
        if self.guard.mode is not AuthMode.TOKEN:
            return RedirectResponse(f"{root}/", status_code=303)
        if request.method == "GET":
            return self.render(request, "login.html", wrong=False)
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        if not self.guard.token_ok(form.get("token", "")):
            return self.render(request, "login.html", status=401, wrong=True)
        response = RedirectResponse(f"{root}/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self.guard.new_session(),
            max_age=SESSION_S,
            httponly=True,
            samesite="strict",
            path=root or "/",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        root = request.scope.get("root_path", "")
        response = RedirectResponse(f"{root}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=root or "/")
        return response

    # -- actions -----------------------------------------------------------------

    async def form(self, request: Request) -> dict[str, str] | Response:
        """A POST's form fields, once its CSRF token holds; else the refusal (403, 413, 415, 400)."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            return PlainTextResponse("emq dashboard: a form (application/x-www-form-urlencoded) is expected\n", 415)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return PlainTextResponse("emq dashboard: the form is too large\n", 413)
        try:
            parsed = parse_qs(body.decode("ascii"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS, errors="strict")
        except (UnicodeDecodeError, ValueError):
            return PlainTextResponse("emq dashboard: the form could not be read\n", 400)
        fields = {name: values[0] for name, values in parsed.items()}
        request.state.ids = parsed.get("id", [])  # the jobs an action on chosen jobs acts on
        why = self.guard.csrf_refusal(request, fields.get(CSRF_FIELD))
        if why is not None:
            log.warning("refused %s %s: %s", request.method, request.url.path, why)
            return PlainTextResponse(f"emq dashboard: refused: {why} (reload the page and try again)\n", 403)
        return fields

    async def action(self, request: Request) -> Response:
        if self.read_only:
            return PlainTextResponse("emq dashboard: read-only: no action is taken\n", 403)
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        name = request.path_params["action"]
        queue, lane = form.get("queue", ""), form.get("lane", "")
        if not queue:
            return self.render(request, "error.html", status=400, kind="ArgumentError", message="the form names no queue")
        back = ""
        if name in JOB_ACTIONS or name == "retry-dead":
            state, offset = form.get("state", ""), form.get("offset", "0")
            if state in STATES and offset.isascii() and offset.isdigit():
                back = f"?state={state}&offset={offset}"
        if name == "promote":
            result = await self.call(request, self.source.promote, queue)
            notice = f"Promoted {result} due job{'s' if result != 1 else ''}." if isinstance(result, int) else ""
        elif name == "retry-dead":
            result = await self.call(request, self.source.retry_dead, queue)
            notice = f"Retried {result} dead job{'s' if result != 1 else ''}." if isinstance(result, int) else ""
        elif name in JOB_ACTIONS:
            ids = request.state.ids
            if not ids:
                return self.render(request, "error.html", status=400, kind="ArgumentError", message="no job was chosen")
            act = {
                "retry": self.source.retry,
                "cancel": self.source.cancel,
                "delete": self.source.delete,
                "promote-now": self.source.promote_now,
            }[name]
            result = await self.call(request, act, queue, ids)
            notice = "" if isinstance(result, EmqError) else present.outcomes(JOB_ACTIONS[name], result)
        elif name in SCHEDULE_ACTIONS:
            schedule = form.get("schedule", "")
            if not schedule:
                return self.render(request, "error.html", status=400, kind="ArgumentError", message="the form names no schedule")
            on_schedule: Callable[[str, str], object] = {
                "pause-schedule": self.source.pause_schedule,
                "resume-schedule": self.source.resume_schedule,
                "run-schedule-now": self.source.run_schedule_now,
            }[name]
            result = await self.call(request, on_schedule, queue, schedule)
            if name == "run-schedule-now":
                notice = f"Schedule {schedule}: job {result} enqueued."
            else:
                changed = "paused" if name == "pause-schedule" else "resumed"
                notice = f"Schedule {schedule} {changed}." if result is True else f"Schedule {schedule} was {changed} already."
        elif name not in ("pause-lane", "resume-lane", "set-lane-limit"):
            return self.render(request, "error.html", status=404, kind="ArgumentError", message=f"no action {name!r}")
        else:
            if not lane:
                return self.render(request, "error.html", status=400, kind="ArgumentError", message="the form names no lane")
            if name == "pause-lane":
                result, notice = await self.call(request, self.source.pause_lane, queue, lane), f"Lane {lane} paused."
            elif name == "resume-lane":
                result, notice = await self.call(request, self.source.resume_lane, queue, lane), f"Lane {lane} resumed."
            else:
                text = form.get("limit", "").strip()
                if not (text.isascii() and text.isdigit()):
                    return self.render(
                        request,
                        "error.html",
                        status=400,
                        kind="ArgumentError",
                        message=f"a lane's limit is a whole number of jobs (0: no limit), not {text!r}",
                    )
                limit = int(text)
                result = await self.call(request, self.source.set_lane_limit, queue, lane, limit)
                notice = f"Lane {lane}: at most {limit} active." if limit else f"Lane {lane}: no limit."
        if isinstance(result, EmqError):
            return self.failed(request, result)
        root = request.scope.get("root_path", "")
        response = RedirectResponse(f"{root}/queues/{quote(queue, safe='')}{back}", status_code=303)
        response.set_cookie(FLASH_COOKIE, quote(notice), max_age=30, httponly=True, samesite="strict", path=root or "/")
        return response


class GuardMiddleware:
    """ASGI middleware: every request but the public ones (`PUBLIC_PREFIXES`) passes the dashboard's login check."""

    def __init__(self, app: ASGIApp, dashboard: Dashboard):
        self.app = app
        self.dashboard = dashboard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        public = any(app_path(scope).startswith(p) for p in PUBLIC_PREFIXES)
        refusal = await self.dashboard.guard.refusal(request)
        # The login page is public only where there is a login: never past the loopback check.
        if refusal is not None and not (public and self.dashboard.guard.mode is AuthMode.TOKEN):
            await self.dashboard.refused(request, refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _routes(d: Dashboard) -> list[BaseRoute]:
    return [
        Route("/", d.overview, methods=["GET"]),
        Route("/fragments/overview", d.overview, methods=["GET"]),
        Route("/queues", d.open_queue, methods=["GET"]),
        Route("/queues/{name:path}", d.queue, methods=["GET"]),
        Route("/fragments/queue/{name:path}", d.queue, methods=["GET"]),
        Route("/job", d.job, methods=["GET"]),
        Route("/fragments/job", d.job, methods=["GET"]),
        Route("/workers", d.workers, methods=["GET"]),
        Route("/fragments/workers", d.workers, methods=["GET"]),
        Route("/metrics", d.metrics, methods=["GET"]),
        Route("/login", d.login, methods=["GET", "POST"]),
        Route("/logout", d.logout, methods=["POST"]),
        Route("/actions/{action:str}", d.action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


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
    `/metrics` list first; every other queue in emq's registry (`emq.queues`)
    follows them, and any queue can be opened by name. `read_only`: no action is offered, and every action's POST
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
    call = "emq.dashboard.create_app"
    if client is not None and url is not None:
        raise ArgumentError(f"{call}: give client= or url=, not both")
    if client is not None and not isinstance(client, Client):
        raise ArgumentError(f"{call}: client must be an emq.Client, not {type(client).__name__}")
    given = [name for name, value in (("password", password), ("token", token)) if value is not None]
    if auth is not LOOPBACK_ONLY:
        given.append("auth")
    if len(given) > 1:
        raise ArgumentError(f"{call}: give one of password=, token= and auth=, not {' and '.join(given)}")
    for name, value in (("password", password), ("token", token)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ArgumentError(f"{call}: {name} must be a non-empty str")
    if auth is not LOOPBACK_ONLY and auth is not None and not callable(auth):
        raise ArgumentError(f"{call}: auth must be a callable (request -> bool) or None, not {type(auth).__name__}")
    if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or not 0.5 <= refresh <= 3600:
        raise ArgumentError(f"{call}: refresh must be a number of seconds from 0.5 to 3600, not {refresh!r}")
    if isinstance(queues, str):
        raise ArgumentError(f"{call}: queues must be a list of names, not a str")
    if isinstance(secret, str):
        secret = secret.encode()
    if secret is not None and len(secret) < 16:
        raise ArgumentError(f"{call}: secret must be at least 16 bytes")

    if password is not None:
        mode = AuthMode.PASSWORD
    elif token is not None:
        mode = AuthMode.TOKEN
    elif auth is LOOPBACK_ONLY:
        mode = AuthMode.LOOPBACK
    elif auth is None:
        mode = AuthMode.NONE
    else:
        mode = AuthMode.CALLABLE
    if client is None:
        from ..client import connect

        client = connect(url)
    source = Source(client, list(queues))
    for name in queues:  # a bad name fails here, as emq.Queue checks it, not on the first page
        source.queue(name)
    guard = Guard(
        mode=mode,
        password=password,
        token=token,
        check=None if auth is LOOPBACK_ONLY else auth,
        secret=secret if secret is not None else secrets.token_bytes(32),
    )
    dashboard = Dashboard(source, guard, read_only=read_only, refresh=float(refresh))
    app = Starlette(routes=_routes(dashboard))
    app.add_middleware(GuardMiddleware, dashboard=dashboard)
    app.add_middleware(SecurityHeaders)
    app.state.dashboard = dashboard
    return app
