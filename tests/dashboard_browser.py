"""The parts of the dashboard's browser tests: a headless Chromium driven by Selenium, `emq dashboard`
processes, the keyspace as values, and a queue that holds jobs in every state.

The browser is Debian's `chromium` with its `chromedriver` (`./dev test` installs both
as root); where neither can be had, `browser()` skips with the reason, and as root, where
`./dev test` would have installed them, it fails instead. Every page the browser opens
runs a watch first (`WATCH_JS`): `alert`, `confirm` and `prompt` are recorded instead of
shown, and so is every Content-Security-Policy violation, so a test can assert that no
injected script ran and that the pages break none of their own policy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

import emq
from emq.embedded import free_port

WATCH_JS = """
window.__emq = {alerts: [], csp: []};
["alert", "confirm", "prompt"].forEach(function (name) {
  window[name] = function (message) { window.__emq.alerts.push(name + ": " + String(message)); };
});
document.addEventListener("securitypolicyviolation", function (e) {
  window.__emq.csp.push(e.violatedDirective + " " + e.blockedURI);
});
"""

MOUNTING_APP = """
# A host application that mounts two dashboards: /emq guarded by the host (auth=None),
# /guarded by the host's own check (auth=callable: the header X-User: ops).
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

import emq
from emq.dashboard import create_app

url, port = sys.argv[1], int(sys.argv[2])
client = emq.connect(url)


async def home(request):
    return PlainTextResponse("the host application")


def ops_only(request):
    return request.headers.get("x-user") == "ops"


app = Starlette(
    routes=[
        Route("/", home),
        Mount("/emq", create_app(client, queues=["orders"], auth=None, refresh=3600)),
        Mount("/guarded", create_app(client, queues=["orders"], auth=ops_only)),
    ]
)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
"""

XSS_DATA = ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>")
XSS_LANE = '"><svg onload=alert(1)>'
XSS_QUEUE = '"><svg/onload=alert(3)>'  # a queue name has no whitespace (SPEC §1)
XSS_ERROR = "<img src=x onerror=alert(2)>\nTraceback (most recent call last):\n  ValueError: <b>not bold</b>"


def chromium() -> tuple[str, str] | None:
    """The system's Chromium and chromedriver, or None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def browser(width: int = 1280, height: int = 900):
    """A headless Chromium, with the watch of the module's docstring on every page."""
    found = chromium()
    if found is None:
        reason = "the dashboard's browser tests need Debian's chromium and chromium-driver (./dev test installs them as root)"
        if os.geteuid() == 0:
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root, in a container: Chromium's sandbox needs user namespaces
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
        "--lang=en-US",
        f"--window-size={width},{height}",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Selenium Manager would look for a driver on the internet: the system's is given.
    os.environ.setdefault("SE_OFFLINE", "true")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=found[1]))
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_JS})
    driver.set_page_load_timeout(30)
    return driver


@dataclass
class Dashboard:
    """An `emq dashboard` process on 127.0.0.1, its base URL and what it printed."""

    args: list[str]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    script: str | None = None
    """Python source run instead of `emq dashboard`, with argv `[url-args..., port]` (a host app that mounts it)."""
    ready_path: str = "/static/dashboard.css"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> Dashboard:
        self.log = Path(tempfile.mkstemp(prefix="emq-dashboard-", suffix=".log")[1])
        with self.log.open("wb") as out:
            if self.script is None:
                command = [sys.executable, "-m", "emq", "dashboard", "--port", str(self.port), *self.args]
            else:
                command = [sys.executable, "-c", self.script, *self.args, str(self.port)]
            self.proc = subprocess.Popen(command, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"emq dashboard exited {self.proc.returncode}: {self.output()}")
            try:
                urllib.request.urlopen(self.base + self.ready_path, timeout=1).close()
                return self
            except urllib.error.HTTPError:  # up, and asking for a login
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"emq dashboard did not answer within {timeout} s: {self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.unlink(missing_ok=True)


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    cookies: dict[str, str]
    """What its `Set-Cookie` headers set (name -> value)."""
    body: str


def _response(status: int, headers, body: bytes) -> Response:
    from http.cookies import SimpleCookie

    jar: SimpleCookie = SimpleCookie()
    for line in headers.get_all("Set-Cookie") or []:
        jar.load(line)
    return Response(status, {k.lower(): v for k, v in headers.items()}, {k: m.value for k, m in jar.items()}, body.decode(errors="replace"))


def http(
    url: str, *, data: dict[str, str] | bytes | None = None, headers: dict[str, str] | None = None, cookies: dict[str, str] | None = None
) -> Response:
    """One request with urllib (no redirect followed); a POST when `data` is given."""
    from urllib.parse import urlencode

    body = urlencode(data).encode() if isinstance(data, dict) else data
    request = urllib.request.Request(url, data=body, headers=dict(headers or {}), method="POST" if body is not None else "GET")
    if body is not None and not request.has_header("Content-type"):
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    if cookies:
        request.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()))

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as r:
            return _response(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return _response(e.code, e.headers, e.read())


# -- the keyspace -------------------------------------------------------------------


def keyspace(r: redis.Redis) -> dict[bytes, tuple[str, object]]:
    """Every key with its type and value as values (not DUMP's encoding): two keyspaces that
    hold the same data compare equal, whatever order their hashes were written in."""
    out: dict[bytes, tuple[str, object]] = {}
    for key in r.scan_iter(count=1000):
        kind = r.type(key).decode()
        if kind == "string":
            value: object = r.get(key)
        elif kind == "hash":
            value = r.hgetall(key)
        elif kind == "list":
            value = r.lrange(key, 0, -1)
        elif kind == "zset":
            value = r.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            value = r.smembers(key)
        else:
            value = r.dump(key)
        out[key] = (kind, value)
    return out


def snapshot(r: redis.Redis) -> dict[bytes, tuple[bytes, int]]:
    """Every key's DUMP and time to live, for `restore`."""
    return {key: (r.dump(key), max(r.pttl(key), 0)) for key in r.scan_iter(count=1000)}


def restore(r: redis.Redis, saved: dict[bytes, tuple[bytes, int]]) -> None:
    """The keyspace `snapshot` saved, and nothing else."""
    r.flushall()
    for key, (dumped, ttl) in saved.items():
        r.restore(key, ttl, dumped, replace=True)


# -- a queue with jobs in every state ----------------------------------------------------


def fill_queue(client: emq.Client, name: str) -> dict[str, str]:
    """Jobs in every state in queue `name`, lanes (one limited, one paused, one with an XSS
    name) and the XSS payloads; the ids by what they are."""
    q = emq.Queue(client, name)
    q.set_retention(keep_done=3600)
    ids: dict[str, str] = {}
    ids["done"] = q.add('{"report": "weekly", "pages": 12}')
    (job,) = q.claim(1)
    assert q.complete(job)
    ids["dead"] = q.add('{"charge": "card-4242", "amount_cents": 1999}', max_attempts=1)
    (job,) = q.claim(1)
    assert q.fail(job, XSS_ERROR) == emq.FailOutcome.DEAD
    ids["active"] = q.add('{"email": "welcome", "to": "ada@example.com"}')
    (job,) = q.claim(1, lease=3600)
    ids["scheduled"] = q.add('{"reminder": "renewal"}', delay=3600)
    ids["json"] = q.add('{"order": 1042, "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "note": "livrée à Zürich"}')
    ids["script"] = q.add(XSS_DATA[0])
    ids["img"] = q.add(XSS_DATA[1])
    ids["binary"] = q.add(bytes(range(0, 256, 5)))
    ids["xss_id"] = q.add("an id that is markup", id="<img src=x onerror=alert(4)>")
    for i in range(3):
        q.add(f'{{"invoice": {i}}}', lane="eu")
    q.add('{"invoice": "us-1"}', lane="us")
    q.add("lane job", lane=XSS_LANE)
    q.set_lane_limit("eu", 4)
    q.pause_lane("us")
    return ids
