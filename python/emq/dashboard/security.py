"""Who may use the dashboard and how its writes are guarded: the login, the CSRF token of every form, and the headers of every response.

**Login** (`Guard`), one of:

- `password=`: HTTP basic authentication (any user name, this password);
- `token=`: `Authorization: Bearer <token>`, or a session cookie that the
  login page (`/login`) sets once the token is typed in; the cookie holds no
  token, only its issue time signed with a key made from the token and the
  app's secret, and it lasts `SESSION_S`;
- `auth=callable`: the host application's check, `auth(request) -> bool`
  (or an awaitable bool);
- `auth=None`: no check of the dashboard's own (the host application guards it);
- none of these: the dashboard answers only requests that reach it on a
  loopback address and name a loopback host (`127.0.0.1`, `localhost`,
  `[::1]`), so that neither another machine nor a web page that rebinds its
  name to 127.0.0.1 can use it.

**CSRF**: a signed double-submit cookie. The first page a browser gets sets
`emq_csrf` (a random nonce and its HMAC under the app's secret; `HttpOnly`,
`SameSite=Strict`) and every form carries the same value in `csrf_token`. A
POST is refused with 403, before anything is read or written, unless the
field equals the cookie and its signature holds, and unless the browser says
it came from this origin (`Sec-Fetch-Site`, `Origin`). A forged pair fails
the signature; another site can neither read the cookie nor send it.

**Headers** (`SecurityHeaders`): a strict `Content-Security-Policy` (only the
app's own scripts, styles and images; no inline script or style, no frames),
`X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`,
`X-Frame-Options: DENY` on every response, and `Cache-Control: no-store` on
every one but the static files'.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import inspect
import ipaddress
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # only types: `emq dashboard`'s checks and `LOOPBACK_ONLY` need no Starlette
    from starlette.requests import HTTPConnection, Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

AuthCheck = Callable[["Request"], "bool | Awaitable[bool]"]


class _LoopbackOnly:
    """`create_app`'s default `auth`: no login of its own, and loopback requests only."""

    def __repr__(self) -> str:
        return "LOOPBACK_ONLY"


LOOPBACK_ONLY: Any = _LoopbackOnly()

CSRF_COOKIE = "emq_csrf"
CSRF_FIELD = "csrf_token"
SESSION_COOKIE = "emq_session"
SESSION_S = 12 * 3600
"""How long a token login lasts."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
PAGE_CACHE = (b"cache-control", b"no-store")
STATIC_CACHE = (b"cache-control", b"private, max-age=86400")
"""The static files' URLs carry the version (`?v=`): a browser may keep them a day."""

LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost"}


class AuthMode(str, Enum):
    """How the dashboard checks who asks."""

    LOOPBACK = "loopback"
    """Nothing configured: loopback requests only."""
    NONE = "none"
    """`auth=None`: the host application guards it."""
    PASSWORD = "password"
    TOKEN = "token"
    CALLABLE = "callable"


def is_loopback_host(host: str) -> bool:
    """`127.0.0.1`, `::1`, `localhost` and the like (a host name other than these is not)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host part of a `Host` header (`name:port`, `[v6]:port`)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: its status, a one-line reason, and whether to offer the login page."""

    status: int
    reason: str
    login_page: bool = False
    basic_challenge: bool = False


class Guard:
    """The login check, the CSRF tokens and the session cookies of one dashboard."""

    def __init__(self, *, mode: AuthMode, password: str | None, token: str | None, check: AuthCheck | None, secret: bytes):
        self.mode = mode
        self._password = password.encode() if password is not None else None
        self._token = token.encode() if token is not None else None
        self._check = check
        self._secret = secret
        self._session_key = hmac.new(secret, b"session:" + (self._token or b""), hashlib.sha256).digest()

    # -- who asks ----------------------------------------------------------------

    async def refusal(self, request: Request) -> Refusal | None:
        """None when the request may go on; else why not."""
        if self.mode is AuthMode.NONE:
            return None
        if self.mode is AuthMode.LOOPBACK:
            server = request.scope.get("server")
            host = _host_of(request.headers.get("host", ""))
            if not (server and is_loopback_host(str(server[0])) and is_loopback_host(host)):
                return Refusal(403, "emq dashboard: no password, token or auth= is configured, so it answers only on a loopback address")
            return None
        if self.mode is AuthMode.PASSWORD:
            if self._basic_ok(request.headers.get("authorization", "")):
                return None
            return Refusal(401, "emq dashboard: a password is required", basic_challenge=True)
        if self.mode is AuthMode.TOKEN:
            if self._bearer_ok(request.headers.get("authorization", "")) or self.session_ok(request.cookies.get(SESSION_COOKIE)):
                return None
            return Refusal(401, "emq dashboard: a token is required", login_page=True)
        assert self._check is not None
        answer = self._check(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return None if answer else Refusal(401, "emq dashboard: not authorised")

    def _basic_ok(self, header: str) -> bool:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic" or self._password is None:
            return False
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        _, sep, password = decoded.partition(b":")
        return bool(sep) and hmac.compare_digest(password, self._password)

    def _bearer_ok(self, header: str) -> bool:
        scheme, _, value = header.partition(" ")
        return scheme.lower() == "bearer" and self.token_ok(value.strip())

    def token_ok(self, given: str) -> bool:
        return self._token is not None and hmac.compare_digest(given.encode(), self._token)

    def new_session(self) -> str:
        """A session cookie's value for a token login: its issue time, signed."""
        issued = str(int(time.time()))
        return issued + "." + hmac.new(self._session_key, issued.encode(), hashlib.sha256).hexdigest()

    def session_ok(self, value: str | None) -> bool:
        if self._token is None or not value or "." not in value:
            return False
        issued, _, signature = value.partition(".")
        if not issued.isdigit() or not 0 <= time.time() - int(issued) < SESSION_S:
            return False
        expected = hmac.new(self._session_key, issued.encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(signature, expected)

    # -- CSRF --------------------------------------------------------------------

    def _csrf_signature(self, nonce: str) -> str:
        return hmac.new(self._secret, b"csrf:" + nonce.encode(), hashlib.sha256).hexdigest()[:32]

    def csrf_valid(self, value: str | None) -> bool:
        """A token this app signed (whatever browser holds it)."""
        if not value or "." not in value:
            return False
        nonce, _, signature = value.partition(".")
        return hmac.compare_digest(signature, self._csrf_signature(nonce))

    def csrf_token(self, request: HTTPConnection) -> tuple[str, bool]:
        """The browser's CSRF token, and whether it is new (to be set as its cookie)."""
        held = request.cookies.get(CSRF_COOKIE)
        if held and self.csrf_valid(held):
            return held, False
        nonce = secrets.token_urlsafe(18)
        return nonce + "." + self._csrf_signature(nonce), True

    def csrf_refusal(self, request: Request, field: str | None) -> str | None:
        """None when a POST carries this browser's token and comes from this origin; else why not."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"a request from another site ({site})"
        origin = request.headers.get("origin")
        if origin is not None and origin != "null" and urlsplit(origin).netloc != request.headers.get("host", ""):
            return "a request from another origin"
        cookie = request.cookies.get(CSRF_COOKIE)
        if not field:
            return "the form carries no CSRF token"
        if not cookie or not hmac.compare_digest(field.encode(), cookie.encode()) or not self.csrf_valid(field):
            return "the form's CSRF token is not this browser's"
        return None


def app_path(scope: Scope) -> str:
    """The request's path inside the app, past the mount's (`root_path`)."""
    root, path = str(scope.get("root_path", "")), str(scope["path"])
    return path[len(root) :] if root and path.startswith(root) else path


class SecurityHeaders:
    """ASGI middleware: the headers of the module's docstring, on every response."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        headers = [*HEADERS, STATIC_CACHE if app_path(scope).startswith("/static/") else PAGE_CACHE]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in headers if n not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
