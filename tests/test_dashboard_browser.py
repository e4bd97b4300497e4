"""The dashboard in a real headless Chromium, against `emq dashboard` processes on a real Valkey
holding jobs in every state: every page loads and shows what the API answers; each action,
clicked, changes the keyspace exactly as its API call does; markup in job data, ids, errors,
lane and queue names renders as text; a POST without this browser's CSRF token, and every
POST in read-only mode, is refused and writes nothing; the login modes refuse whoever has
no credentials; the live parts refresh without a reload, and not while the tab is hidden.

One browser and one set of dashboard processes serve the whole module (one xdist group).
`EMQ_SCREENSHOTS=1` makes `test_screenshots` write the pages' screenshots into
`docs/screenshots/` (`EMQ_SCREENSHOTS=1 ./dev test tests/test_dashboard_browser.py -m screenshots`).
"""

from __future__ import annotations

import base64
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

import emq
from emq.dashboard.source import counts_by_state
from emq.embedded import Server

from dashboard_browser import (
    MOUNTING_APP,
    XSS_DATA,
    XSS_ERROR,
    XSS_LANE,
    XSS_QUEUE,
    Dashboard,
    browser,
    fill_queue,
    http,
    keyspace,
    restore,
    snapshot,
)
from servers import SERVERS

pytestmark = pytest.mark.xdist_group("dashboard_browser")

QUEUE = "orders"
TOKEN = "tok-" + "s3cret" * 4
PASSWORD = "pw with spaces ü"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


@dataclass
class Seeded:
    url: str
    ids: dict[str, str]
    saved: dict
    r: redis.Redis
    client: emq.Client

    def queue(self, name: str = QUEUE) -> emq.Queue:
        return emq.Queue(self.client, name)


@pytest.fixture(scope="module")
def seeded():
    server = Server(SERVERS["valkey"]()).start()
    r = redis.Redis.from_url(server.url)
    client = emq.connect(server.url)
    ids = fill_queue(client, QUEUE)
    emq.Queue(client, XSS_QUEUE).add(XSS_DATA[0], lane=XSS_LANE)
    yield Seeded(server.url, ids, snapshot(r), r, client)
    client.close()
    r.close()
    server.stop()


@pytest.fixture
def state(seeded) -> Seeded:
    """The seeded keyspace, as it was before any test acted on it."""
    restore(seeded.r, seeded.saved)
    return seeded


def _started(*args: str):
    d = Dashboard(list(args)).start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def dashboard(seeded):
    """Acts, no login (loopback only); pages refresh hourly, so nothing moves under a click."""
    yield from _started("--url", seeded.url, "--queue", QUEUE, "--queue", XSS_QUEUE, "--refresh", "3600")


@pytest.fixture(scope="module")
def read_only(seeded):
    """Read-only; the live parts refresh every half second."""
    yield from _started("--url", seeded.url, "--queue", QUEUE, "--read-only", "--refresh", "0.5")


@pytest.fixture(scope="module")
def with_token(seeded):
    yield from _started("--url", seeded.url, "--queue", QUEUE, "--token", TOKEN)


@pytest.fixture(scope="module")
def with_password(seeded):
    yield from _started("--url", seeded.url, "--queue", QUEUE, "--password", PASSWORD)


@pytest.fixture(scope="module")
def mounted(seeded):
    """A host application with the dashboard mounted at /emq (auth=None) and /guarded (auth=callable)."""
    d = Dashboard([seeded.url], script=MOUNTING_APP, ready_path="/").start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def chrome():
    driver = browser()
    yield driver
    driver.quit()


@pytest.fixture
def page(chrome):
    """The module's browser, without the cookies or the console of an earlier test."""
    chrome.delete_all_cookies()
    chrome.get_log("browser")
    return chrome


# -- helpers ------------------------------------------------------------------------


def open_page(driver, url: str) -> None:
    """Loads `url` and checks that nothing on it tried to run: no dialog, no CSP violation."""
    driver.get(url)
    assert_clean(driver)


def assert_clean(driver) -> None:
    watch = driver.execute_script("return window.__emq")
    assert watch is not None, "the page watch did not run"
    assert watch["alerts"] == [], f"a dialog was opened: {watch['alerts']}"
    assert watch["csp"] == [], f"the page broke its Content-Security-Policy: {watch['csp']}"
    # The page's own status (a 404 for a job not found) is logged too: every other error counts.
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and not e["message"].startswith(driver.current_url + " ")]
    assert errors == [], f"the browser logged errors: {errors}"


def by_css(driver, css: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def text(driver) -> str:
    return driver.execute_script("return document.body.innerText")


def queue_url(base: str, name: str = QUEUE) -> str:
    return f"{base}/queues/{quote(name, safe='')}"


def job_url(base: str, id: str, queue: str = QUEUE) -> str:
    return f"{base}/job?{urlencode({'queue': queue, 'id': id})}"


def lane_row(driver, lane: str):
    """The lanes table's row of `lane` (its name read as text, as a user reads it)."""
    for row in by_css(driver, "table.lanes tbody tr"):
        if row.find_element("css selector", "th").text == lane:
            return row
    raise AssertionError(f"no row for lane {lane!r}: {[r.text for r in by_css(driver, 'table.lanes tbody tr')]}")


def wait_for_notice(driver, expected: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    # Read in one script: an htmx swap between finding a notice and reading it would make it stale.
    WebDriverWait(driver, 10).until(
        lambda d: any(expected in t for t in d.execute_script("return [...document.querySelectorAll('.notice')].map(n => n.innerText)"))
    )


def wait_for_text(driver, expected: str) -> None:
    """Waits until the page says `expected`: an htmx swap or a form's navigation lands after the click returns."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: expected in text(d))


def wait_for_css(driver, css: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: by_css(d, css))


def injected_elements(driver) -> list[str]:
    """Elements no page of the dashboard has: any with an event-handler attribute, an img, an
    svg other than the state bars and the throughput charts, a script other than its two."""
    return driver.execute_script(
        """
        const out = [];
        for (const el of document.querySelectorAll("*")) {
          for (const a of el.attributes) if (a.name.startsWith("on")) out.push(el.tagName + "[" + a.name + "]");
        }
        for (const el of document.querySelectorAll("img, iframe, object, embed")) out.push(el.tagName);
        for (const el of document.querySelectorAll("svg:not(.state-bar):not(.throughput-chart)")) out.push("svg");
        for (const el of document.querySelectorAll("script")) {
          const src = el.getAttribute("src") || "";
          if (!/\\/static\\/(htmx\\.min|dashboard)\\.js\\?v=/.test(src)) out.push("script " + src);
        }
        return out;
        """
    )


def job_ids_shown(driver) -> list[str]:
    """The ids of the jobs table's rows, in order, as a user reads them."""
    return [row.find_element("css selector", "th").text for row in by_css(driver, "table.jobs tbody tr")]


def job_row(driver, id: str):
    for row in by_css(driver, "table.jobs tbody tr"):
        if row.find_element("css selector", "th").text == id:
            return row
    raise AssertionError(f"no row for job {id!r}: {job_ids_shown(driver)}")


def without_due(space: dict, ids) -> dict:
    """The keyspace with the `due` of rows `ids` left out: a retry sets it to the server's
    clock at the call, which two calls never share (the test checks it apart)."""
    out = dict(space)
    for id in ids:
        key = f"emq:{{{QUEUE}}}:job:{id}".encode()
        kind, row = out[key]
        out[key] = (kind, {f: v for f, v in row.items() if f != b"due"})
    return out


def without_cancel_clock(space: dict, ids) -> dict:
    """The keyspace with the clock a cancel writes left out: the `finished` of rows `ids`
    and the scores of `P cancelled` and `P cancels` (the server's clock at the call)."""
    out = dict(space)
    for id in ids:
        key = f"emq:{{{QUEUE}}}:job:{id}".encode()
        kind, row = out[key]
        out[key] = (kind, {f: v for f, v in row.items() if f != b"finished"})
    for index in (b"cancelled", b"cancels"):
        key = f"emq:{{{QUEUE}}}:".encode() + index
        if key in out:
            out[key] = (out[key][0], [(member, 0) for member, _ in out[key][1]])
    return out


def as_api_would(state: Seeded, act) -> dict:
    """The keyspace the API call `act(queue)` makes from the seeded one."""
    restore(state.r, state.saved)
    act(state.queue())
    return keyspace(state.r)


# -- pages ----------------------------------------------------------------------------


CHART_SEEDED = {"completed": 1, "failed": 1, "retried": 0, "dead": 1, "cancelled": 0, "recovered": 0}
"""What the seeded queue settled (`fill_queue`): one job completed, one dead."""


def chart_totals(driver) -> list[dict[str, int]]:
    """Each throughput chart's totals, as its caption says them."""
    out = []
    for fig in by_css(driver, "#throughput figure.chart"):
        out.append({k: int(fig.find_element("css selector", f".total-{k}").text) for k in CHART_SEEDED})
    return out


def test_every_page_loads_and_shows_what_the_api_answers(page, dashboard, state):
    """Each page loads clean (no dialog, no CSP violation, no console error) and shows the
    counts, lanes, retention and job rows `emq.Queue` answers. A page that failed, showed
    stale or invented numbers, or needed an inline script or style would fail here."""
    counts = counts_by_state(state.queue().counts())

    open_page(page, dashboard.base + "/")
    rows = {r.find_element("css selector", "th").text: r for r in by_css(page, "#queues tbody tr")}
    assert set(rows) == {QUEUE, XSS_QUEUE}
    cells = [c.text.replace("\u202f", "") for c in rows[QUEUE].find_elements("css selector", "td.num")]
    assert cells == [str(counts[s]) for s in ("scheduled", "pending", "active", "dead", "done", "cancelled")] + ["3"]
    # The seeded queue completed one job and lost one (dead): the hour's and the day's charts
    # total them, with a bar each, as `Queue.throughput` counts them.
    assert chart_totals(page) == [CHART_SEEDED, CHART_SEEDED]
    assert len(by_css(page, "#throughput svg rect.completed")) == 2 and len(by_css(page, "#throughput svg rect.failed")) == 2

    open_page(page, queue_url(dashboard.base))
    cards = {c.find_element("css selector", ".label").text: c.find_element("css selector", ".value").text for c in by_css(page, ".card")}
    assert {k.lower(): int(v) for k, v in cards.items()} == counts
    lanes = {
        r.find_element("css selector", "th").text: r.find_element("css selector", "td.num").text
        for r in by_css(page, "table.lanes tbody tr")
    }
    assert lanes == {"eu": "3", "us": "1", XSS_LANE: "1"}  # ready, as counts().lanes says
    controls = state.queue().lane_controls(["eu", "us", XSS_LANE])
    for lane, c in controls.items():
        cells = [td.text for td in lane_row(page, lane).find_elements("css selector", "td.num")]
        assert cells[1:] == [str(c.active), str(c.limit) if c.limit else "none"], lane
        assert lane_row(page, lane).find_element("css selector", ".badge").text == ("paused" if c.paused else "running")
    assert "1 h" in text(page) and "30 d" in text(page)  # keep_done 3600 s; keep_dead's default
    assert chart_totals(page) == [CHART_SEEDED, CHART_SEEDED]
    hour = state.queue().throughput(60)
    assert sum(m.completed for m in hour) == 1 and sum(m.dead for m in hour) == 1
    # The jobs open on the dead ones (there is one): the page `Queue.jobs` gives.
    assert job_ids_shown(page) == [j.id for j in state.queue().jobs("dead").jobs]
    for s in ("scheduled", "pending", "active", "done", "cancelled"):
        open_page(page, queue_url(dashboard.base) + f"?state={s}")
        assert job_ids_shown(page) == [j.id for j in state.queue().jobs(s).jobs], s

    for what in ("json", "dead", "active", "scheduled", "done", "binary"):
        job = state.queue().get(state.ids[what])
        open_page(page, job_url(dashboard.base, job.id))
        assert by_css(page, "h1")[0].text == job.id
        badge = by_css(page, "#job-live h2 .badge")[0].text
        assert badge == job.state, what
        assert f"{job.attempts} of {job.max_attempts}" in text(page)
    open_page(page, job_url(dashboard.base, state.ids["json"]))
    pretty = by_css(page, "pre.data-json")[0].text
    assert '"order": 1042' in pretty and "\n" in pretty and "livrée à Zürich" in pretty  # indented, not escaped to \\u
    open_page(page, job_url(dashboard.base, state.ids["binary"]))
    assert by_css(page, "pre.data-hex")[0].text.startswith("00000000  00 05 0a 0f")

    open_page(page, job_url(dashboard.base, "no-such-job"))
    assert "no longer kept" in text(page)
    open_page(page, dashboard.base + "/workers")
    assert "No worker alive" in text(page)
    open_page(page, dashboard.base + "/job")
    assert by_css(page, "form.search input[name=id]")


def test_search_box_finds_a_job(page, dashboard, state):
    """The queue page's search box opens the job by id (a search that lost the queue, or
    the id, would land elsewhere)."""
    open_page(page, queue_url(dashboard.base))
    box = by_css(page, "#find-job")[0]
    box.send_keys(state.ids["dead"])
    box.submit()
    assert by_css(page, "h1")[0].text == state.ids["dead"]
    assert_clean(page)
    assert "dead" == by_css(page, "#job-live h2 .badge")[0].text


def test_pause_and_resume_clicked_change_the_keyspace_as_the_api_does(page, dashboard, state):
    """Pause, then Resume, clicked on lane `eu`: the keyspace after each click equals the one
    `Queue.pause_lane` / `resume_lane` makes. An action that wrote something else, wrote
    nothing, or acted on another lane would differ."""
    before = keyspace(state.r)
    open_page(page, queue_url(dashboard.base))
    lane_row(page, "eu").find_element("css selector", "button[data-action=pause]").click()
    wait_for_notice(page, "Lane eu paused.")
    assert_clean(page)
    clicked = keyspace(state.r)
    assert clicked != before
    assert clicked == as_api_would(state, lambda q: q.pause_lane("eu"))

    paused = snapshot(state.r)
    lane_row(page, "eu").find_element("css selector", "button[data-action=resume]").click()
    wait_for_notice(page, "Lane eu resumed.")
    clicked = keyspace(state.r)
    restore(state.r, paused)
    state.queue().resume_lane("eu")
    assert clicked == keyspace(state.r)


def test_set_limit_clicked_changes_the_keyspace_as_the_api_does(page, dashboard, state):
    """A limit typed and set on lane `us` writes what `Queue.set_lane_limit` writes; a limit
    that is not a whole number is refused with 400 and writes nothing."""
    open_page(page, queue_url(dashboard.base))
    field = lane_row(page, "us").find_element("css selector", "input[name=limit]")
    field.clear()
    field.send_keys("7")
    lane_row(page, "us").find_element("css selector", "button[data-action=limit]").click()
    wait_for_notice(page, "Lane us: at most 7 active.")
    clicked = keyspace(state.r)
    assert clicked == as_api_would(state, lambda q: q.set_lane_limit("us", 7))

    before = keyspace(state.r)
    field = lane_row(page, XSS_LANE).find_element("css selector", "input[name=limit]")
    page.execute_script("arguments[0].type = 'text'; arguments[0].removeAttribute('min');", field)  # past the browser's own check
    field.clear()
    field.send_keys("-3")
    lane_row(page, XSS_LANE).find_element("css selector", "button[data-action=limit]").click()
    wait_for_text(page, "a lane's limit is a whole number of jobs")
    assert_clean(page)
    assert keyspace(state.r) == before


def test_promote_clicked_moves_due_jobs_as_the_api_does(page, dashboard, state):
    """Promote due jobs, clicked: the keyspace equals the one `Queue.promote` makes from the
    same state, and the notice says how many moved."""
    q = state.queue()
    for i in range(2):
        q.add(f"due {i}", delay=0.05)
    time.sleep(0.2)  # due now, and still in `schedule` until a promote
    due = snapshot(state.r)
    open_page(page, queue_url(dashboard.base))
    by_css(page, "#promote")[0].click()
    wait_for_notice(page, "Promoted 2 due jobs.")
    clicked = keyspace(state.r)
    restore(state.r, due)
    assert q.promote() == 2
    assert clicked == keyspace(state.r)


def add_schedules(q: emq.Queue) -> None:
    """Two schedules: one daily (running), one hourly (paused); neither ticks during a test."""
    q.schedule("nightly-report", cron="0 3 * * *", data=b'{"report": "daily"}')
    q.schedule("heartbeat", every=3600, data=b"beat")
    q.pause_schedule("heartbeat")


def schedule_row(driver, name: str):
    for row in by_css(driver, "table.schedules tbody tr"):
        if row.find_element("css selector", "th").text == name:
            return row
    raise AssertionError(f"no row for schedule {name!r}")


def test_schedules_shown_and_paused_resumed_and_run_now_clicked_as_the_api_does(page, dashboard, state):
    """The queue page lists its schedules with their next and last tick and whether paused, as
    `Queue.schedules` answers; Pause, Resume and Run now, clicked, change the keyspace as
    `Queue.pause_schedule`, `resume_schedule` and `run_schedule_now` (what `App.pause_schedule`
    and its kin call) do; the same POST without the CSRF token is refused and writes nothing.
    An action that acted on another schedule, or wrote other than the API writes, would differ."""
    from emq.dashboard.present import epoch_ms, utc_time

    q = state.queue()
    add_schedules(q)
    infos = {s.name: s for s in q.schedules()}
    open_page(page, queue_url(dashboard.base))
    assert [r.find_element("css selector", "th").text for r in by_css(page, "table.schedules tbody tr")] == ["heartbeat", "nightly-report"]
    nightly = schedule_row(page, "nightly-report")
    assert nightly.find_element("css selector", ".badge").text == "running"
    assert nightly.find_element("css selector", ".next-tick").text.startswith(utc_time(epoch_ms(infos["nightly-report"].next_tick)))
    assert nightly.find_element("css selector", ".last-tick").text == "none yet"
    assert schedule_row(page, "heartbeat").find_element("css selector", ".badge").text == "paused"
    assert schedule_row(page, "heartbeat").find_element("css selector", ".next-tick").text == "none"

    before = snapshot(state.r)
    field, _ = _token_and_cookie(dashboard.base)
    unchanged = keyspace(state.r)
    for action in ("pause-schedule", "resume-schedule", "run-schedule-now"):
        form = {"queue": QUEUE, "schedule": "nightly-report"}
        assert http(dashboard.base + "/actions/" + action, data=form).status == 403, action
        assert http(dashboard.base + "/actions/" + action, data={**form, "csrf_token": field}).status == 403, action
    assert keyspace(state.r) == unchanged

    schedule_row(page, "nightly-report").find_element("css selector", "button[data-action=pause-schedule]").click()
    wait_for_notice(page, "Schedule nightly-report paused.")
    assert_clean(page)
    clicked = keyspace(state.r)
    restore(state.r, before)
    assert q.pause_schedule("nightly-report") is True
    assert clicked == keyspace(state.r) != unchanged
    assert schedule_row(page, "nightly-report").find_element("css selector", ".badge").text == "paused"

    before = snapshot(state.r)
    schedule_row(page, "heartbeat").find_element("css selector", "button[data-action=resume-schedule]").click()
    wait_for_notice(page, "Schedule heartbeat resumed.")
    clicked = keyspace(state.r)
    restore(state.r, before)
    assert q.resume_schedule("heartbeat") is True
    assert clicked == keyspace(state.r)

    before_run = keyspace(state.r)
    schedule_row(page, "nightly-report").find_element("css selector", "button[data-action=run-schedule-now]").click()
    wait_for_notice(page, "Schedule nightly-report: job schedule:nightly-report:")
    assert_clean(page)
    after_run = keyspace(state.r)
    (new_row,) = [k for k in after_run if k not in before_run]
    id = new_row.decode().removeprefix(f"emq:{{{QUEUE}}}:job:")
    assert id.startswith("schedule:nightly-report:")  # the id `run_schedule_now` gives its job
    job = q.get(id)
    assert job.data == b'{"report": "daily"}' and job.state == "pending"
    assert after_run[f"emq:{{{QUEUE}}}:pending".encode()][1][-1] == id.encode()
    assert [(s.name, s.paused) for s in q.schedules()] == [("heartbeat", False), ("nightly-report", True)]  # run now left both as they were


@pytest.mark.parametrize(
    ("listed", "action", "which", "api"),
    [
        ("dead", "retry", "dead", lambda q, ids: q.retry(ids)),
        ("dead", "delete", "dead", lambda q, ids: q.delete(ids)),
        ("scheduled", "promote-now", "scheduled", lambda q, ids: q.promote_now(ids)),
        ("scheduled", "delete", "scheduled", lambda q, ids: q.delete(ids)),
        ("pending", "delete", "json", lambda q, ids: q.delete(ids)),
        ("done", "delete", "done", lambda q, ids: q.delete(ids)),
    ],
)
def test_a_job_action_clicked_changes_the_keyspace_as_the_api_does(page, dashboard, state, listed, action, which, api):
    """Each row's action (retry, delete, promote now), clicked on the job's row of its state's
    page: the keyspace after it equals the one the API call makes from the same state, and the
    notice says what was done. An action that wrote something else, or acted on another job
    or queue, would differ."""
    id = state.ids[which]
    open_page(page, queue_url(dashboard.base) + f"?state={listed}")
    job_row(page, id).find_element("css selector", f"button[data-action={action}]").click()
    wait_for_notice(page, " 1 of 1 job.")
    assert_clean(page)
    clicked = keyspace(state.r)
    t0 = state.client.time_ms()
    wanted = as_api_would(state, lambda q: api(q, [id]))
    if action == "retry":
        assert int(clicked[f"emq:{{{QUEUE}}}:job:{id}".encode()][1][b"due"]) <= t0
        clicked, wanted = without_due(clicked, [id]), without_due(wanted, [id])
    assert clicked == wanted
    assert f"state={listed}" in page.current_url  # back on the page it was clicked on


@pytest.mark.parametrize(
    ("listed", "which", "notice"),
    [
        ("pending", "json", "Cancelled 1 of 1 job."),
        ("scheduled", "scheduled", "Cancelled 1 of 1 job."),
        ("active", "active", "Cancelled 0 of 1 job (1 stopping)."),
    ],
)
def test_cancel_clicked_changes_the_keyspace_as_the_api_does(page, dashboard, state, listed, which, notice):
    """Cancel, clicked on a waiting job's row, cancels it (out of its list, the row
    `cancelled`, listed in `P cancelled`); on a running one it asks it to stop (`cancel 1`,
    `P cancels`): each keyspace equals the one `Queue.cancel` makes (the clock it writes
    aside), and the cancelled job is then listed under `cancelled`, with Delete. An action
    that wrote something else, or cancelled another job, would differ."""
    id = state.ids[which]
    before = keyspace(state.r)
    open_page(page, queue_url(dashboard.base) + f"?state={listed}")
    job_row(page, id).find_element("css selector", "button[data-action=cancel]").click()
    wait_for_notice(page, notice)
    assert_clean(page)
    clicked = keyspace(state.r)
    wanted = as_api_would(state, lambda q: q.cancel(id))
    assert clicked != before
    assert without_cancel_clock(clicked, [id]) == without_cancel_clock(wanted, [id])
    if listed != "active":
        open_page(page, queue_url(dashboard.base) + "?state=cancelled")
        assert job_ids_shown(page) == [id] == [j.id for j in state.queue().jobs("cancelled").jobs]
        assert job_row(page, id).find_elements("css selector", "button[data-action=delete]")
        assert not job_row(page, id).find_elements("css selector", "button[data-action=cancel]")


def test_cancel_of_a_selection_and_from_a_jobs_page_is_the_apis(page, dashboard, state):
    """Two pending jobs ticked and "Cancel selected": the keyspace is the one two
    `Queue.cancel` calls make; then the scheduled job's own page offers Cancel, and the
    click writes what `Queue.cancel` writes, back on the queue's page of its state."""
    chosen = [state.ids["script"], state.ids["img"]]
    open_page(page, queue_url(dashboard.base) + "?state=pending")
    for id in chosen:
        job_row(page, id).find_element("css selector", "input[type=checkbox]").click()
    by_css(page, "button[data-bulk=cancel]")[0].click()
    wait_for_notice(page, "Cancelled 2 of 2 jobs.")
    clicked = keyspace(state.r)
    wanted = as_api_would(state, lambda q: [q.cancel(id) for id in chosen])
    assert without_cancel_clock(clicked, chosen) == without_cancel_clock(wanted, chosen)

    restore(state.r, state.saved)
    id = state.ids["scheduled"]
    open_page(page, job_url(dashboard.base, id))
    by_css(page, ".job-actions button[data-action=cancel]")[0].click()
    wait_for_notice(page, "Cancelled 1 of 1 job.")
    clicked = keyspace(state.r)
    wanted = as_api_would(state, lambda q: q.cancel(id))
    assert without_cancel_clock(clicked, [id]) == without_cancel_clock(wanted, [id])
    assert "state=scheduled" in page.current_url


def test_a_dead_job_read_and_retried_from_its_own_page(page, dashboard, state):
    """The newcomer's path: the dead job's page shows its traceback and a Retry; clicked, the
    keyspace is the one `Queue.retry` makes, and the browser is back on the queue's dead jobs.
    An active job's page offers Cancel only (a worker holds it: nothing else acts on it)."""
    id = state.ids["dead"]
    open_page(page, job_url(dashboard.base, id))
    assert "Traceback (most recent call last)" in by_css(page, "pre.error-text")[0].text
    by_css(page, ".job-actions button[data-action=retry]")[0].click()
    wait_for_notice(page, "Retried 1 of 1 job.")
    assert_clean(page)
    clicked = keyspace(state.r)
    assert without_due(clicked, [id]) == without_due(as_api_would(state, lambda q: q.retry([id])), [id])
    assert "state=dead" in page.current_url
    open_page(page, job_url(dashboard.base, state.ids["active"]))
    assert [b.get_attribute("data-action") for b in by_css(page, ".job-actions button")] == ["cancel"]


def test_bulk_actions_on_a_selection_change_the_keyspace_as_the_api_does(page, dashboard, state):
    """Two pending jobs ticked and "Delete selected", then every dead job retried: each equals
    its API call (`delete` of the two ids, `retry_dead`); an active job is offered Cancel
    only (delete refuses it: it runs)."""
    q = state.queue()
    open_page(page, queue_url(dashboard.base) + "?state=pending")
    chosen = [state.ids["script"], state.ids["img"]]
    for id in chosen:
        job_row(page, id).find_element("css selector", "input[type=checkbox]").click()
    by_css(page, "button[data-bulk=delete]")[0].click()
    wait_for_notice(page, "Deleted 2 of 2 jobs.")
    assert keyspace(state.r) == as_api_would(state, lambda q: q.delete(chosen))

    restore(state.r, state.saved)
    open_page(page, queue_url(dashboard.base) + "?state=dead")
    by_css(page, "button[data-bulk=retry-dead]")[0].click()
    wait_for_notice(page, "Retried 1 dead job.")
    clicked = keyspace(state.r)
    assert without_due(clicked, [state.ids["dead"]]) == without_due(as_api_would(state, lambda q: q.retry_dead()), [state.ids["dead"]])
    assert q.counts().dead == 0

    open_page(page, queue_url(dashboard.base) + "?state=active")
    assert job_ids_shown(page) == [state.ids["active"]]
    offered = {b.get_attribute("data-action") or b.get_attribute("data-bulk") for b in by_css(page, "table.jobs button, button[data-bulk]")}
    assert offered == {"cancel"}


def test_a_bulk_action_with_no_job_or_a_bad_id_is_refused_and_writes_nothing(dashboard, state):
    """A retry that names no job, or an id emq refuses (a control character), answers 400
    with emq's own message and writes nothing: the same check as `Queue.retry`."""
    token, cookie = _token_and_cookie(dashboard.base)
    before = keyspace(state.r)
    form = {"csrf_token": token, "queue": QUEUE, "state": "dead", "offset": "0"}
    r = http(dashboard.base + "/actions/retry", data=form, cookies={"emq_csrf": cookie})
    assert r.status == 400 and "no job was chosen" in r.body
    r = http(dashboard.base + "/actions/retry", data={**form, "id": "a\x01b"}, cookies={"emq_csrf": cookie})
    assert r.status == 400 and "Queue.retry: ids must each be" in r.body
    assert keyspace(state.r) == before


WORKER_SCRIPT = """
import sys, time
import emq, emq.worker.registry as registry
registry.PERIOD_S = 0.3
q = emq.Queue(emq.connect(sys.argv[1]), sys.argv[2])
emq.Worker(q, lambda job: time.sleep(60), concurrency=3, ttl=120).run()
"""


def test_workers_appear_and_a_killed_one_drops_out(page, dashboard, state):
    """A worker started on the queue shows on the workers page with its queue, concurrency and
    the job it runs (a link to it); SIGKILLed, it is gone from the page within its heartbeat's
    expiry (three beats), with no one removing it."""
    from selenium.webdriver.support.ui import WebDriverWait

    proc = subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT, state.url, QUEUE], env={**os.environ})
    try:

        def row(d):
            d.get(dashboard.base + "/workers")
            rows = [r for r in by_css(d, "#workers tr[data-worker]") if f"pid {proc.pid}" in r.text]
            return rows[0] if rows and by_css(d, "#workers tr.current a") else False

        found = WebDriverWait(page, 20, poll_frequency=0.3).until(row)
        assert QUEUE in found.text
        assert by_css(page, "#workers tr.current a")  # what it runs, linked to the job
        assert_clean(page)
        proc.kill()
        proc.wait()
        WebDriverWait(page, 10, poll_frequency=0.3).until(lambda d: d.get(dashboard.base + "/workers") or f"pid {proc.pid}" not in text(d))
    finally:
        proc.kill()
        proc.wait()


# -- escaping -----------------------------------------------------------------------


def test_markup_in_jobs_lanes_and_queue_names_renders_as_text(page, dashboard, state):
    """Job data `<script>…` and `<img onerror=…>`, an id, an error, a lane and a queue name
    made of markup show as their text: no injected element in the DOM, no dialog, no CSP
    violation (nothing even tried to run). An unescaped value would add an element, and a
    lax policy would let it run."""
    for what, payload in (("script", XSS_DATA[0]), ("img", XSS_DATA[1])):
        open_page(page, job_url(dashboard.base, state.ids[what]))
        assert by_css(page, "pre.data-text")[0].text == payload
        assert injected_elements(page) == []
    open_page(page, job_url(dashboard.base, "<img src=x onerror=alert(4)>"))
    assert by_css(page, "h1")[0].text == "<img src=x onerror=alert(4)>"
    assert injected_elements(page) == []
    open_page(page, job_url(dashboard.base, state.ids["dead"]))
    assert by_css(page, "pre.error-text")[0].text == XSS_ERROR
    assert injected_elements(page) == []

    open_page(page, queue_url(dashboard.base))
    assert lane_row(page, XSS_LANE)
    assert injected_elements(page) == []
    # The jobs tables: an id that is markup (pending), an error that is markup (dead).
    open_page(page, queue_url(dashboard.base) + "?state=pending")
    assert "<img src=x onerror=alert(4)>" in job_ids_shown(page)
    assert injected_elements(page) == []
    open_page(page, queue_url(dashboard.base) + "?state=dead")
    assert "ValueError: <b>not bold</b>" in job_row(page, state.ids["dead"]).text
    assert injected_elements(page) == []
    open_page(page, dashboard.base + "/")
    assert XSS_QUEUE in [a.text for a in by_css(page, "#queues tbody th a")]
    assert injected_elements(page) == []
    by_css(page, "#queues tbody th a")[[a.text for a in by_css(page, "#queues tbody th a")].index(XSS_QUEUE)].click()
    assert by_css(page, "h1")[0].text == XSS_QUEUE
    assert lane_row(page, XSS_LANE)
    assert injected_elements(page) == []
    assert_clean(page)


def test_pages_send_a_strict_policy_and_the_safety_headers(dashboard, state):
    """Every response (pages, fragments, static files, errors, /metrics) carries the CSP and
    the safety headers; a page missing one would be framable, sniffable, leak referrers, or
    be kept in a cache."""
    for path in ("/", "/fragments/overview", "/queues/orders", "/job", "/static/htmx.min.js", "/queues/bad%20name", "/metrics"):
        r = http(dashboard.base + path)
        assert r.status in (200, 400), path
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "style-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        # Pages never cached (they show the live queue); the versioned static files a day.
        assert r.headers["cache-control"] == ("private, max-age=86400" if path.startswith("/static/") else "no-store"), path
    bad = http(dashboard.base + "/queues/bad%20name")
    assert bad.status == 400 and "emq.Queue: name must have no" in bad.body


# -- CSRF -------------------------------------------------------------------------------


def _token_and_cookie(base: str) -> tuple[str, str]:
    """A page's CSRF field (read-only pages have no form: the cookie's value) and the cookie that came with it."""
    import re

    r = http(queue_url(base))
    found = re.search(r'name="csrf_token" value="([^"]+)"', r.body)
    return (found.group(1) if found else r.cookies["emq_csrf"]), r.cookies["emq_csrf"]


def test_a_post_without_this_browsers_csrf_token_is_refused_and_writes_nothing(dashboard, state):
    """A POST with no token, a token but no cookie, a cookie but no field, two different
    tokens, a forged (unsigned) pair, or a valid pair sent from another site is refused with
    403 and the keyspace stays as it was; the same POST with the browser's own pair acts
    (so the refusals are the CSRF check's, not a broken action)."""
    field, cookie = _token_and_cookie(dashboard.base)
    other_field, _ = _token_and_cookie(dashboard.base)
    assert field == cookie and other_field != field
    url = dashboard.base + "/actions/pause-lane"
    form = {"queue": QUEUE, "lane": "eu"}
    forged = "forged." + "0123456789abcdef" * 2  # the right shape, signed by no one
    before = keyspace(state.r)
    attempts = [
        dict(data=form),
        dict(data={**form, "csrf_token": field}),
        dict(data=form, cookies={"emq_csrf": cookie}),
        dict(data={**form, "csrf_token": other_field}, cookies={"emq_csrf": cookie}),
        dict(data={**form, "csrf_token": forged}, cookies={"emq_csrf": forged}),
        dict(data={**form, "csrf_token": field}, cookies={"emq_csrf": cookie}, headers={"Sec-Fetch-Site": "cross-site"}),
        dict(data={**form, "csrf_token": field}, cookies={"emq_csrf": cookie}, headers={"Origin": "http://evil.example"}),
    ]
    for attempt in attempts:
        r = http(url, **attempt)
        assert r.status == 403, (attempt, r.status, r.body)
        assert "refused" in r.body
    for action in ("resume-lane", "set-lane-limit", "promote", "retry", "cancel", "delete", "promote-now", "retry-dead"):
        id = state.ids["json" if action == "cancel" else "dead"]  # a job each action would change
        assert http(dashboard.base + "/actions/" + action, data={**form, "limit": "1", "id": id}).status == 403
        forged_pair = {"csrf_token": forged}
        assert http(dashboard.base + "/actions/" + action, data={**form, **forged_pair, "id": id}).status == 403
    assert keyspace(state.r) == before

    r = http(url, data={**form, "csrf_token": field}, cookies={"emq_csrf": cookie}, headers={"Origin": dashboard.base})
    assert r.status == 303 and r.headers["location"] == "/queues/orders"
    assert keyspace(state.r) == as_api_would(state, lambda q: q.pause_lane("eu"))


def test_a_host_that_is_not_loopback_is_refused_without_auth(dashboard, state):
    """Without a login, a request naming another host (a DNS-rebinding page that points its
    name at 127.0.0.1) is refused with 403; a dashboard that trusted any Host would serve it."""
    assert http(dashboard.base + "/", headers={"Host": "evil.example:8000"}).status == 403
    assert http(dashboard.base + "/", headers={"Host": f"localhost:{dashboard.port}"}).status == 200


# -- read-only ----------------------------------------------------------------------------


def test_read_only_offers_no_action_and_refuses_every_post(page, read_only, state):
    """Read-only: the queue page has no form that POSTs and no action button, and a POST
    with a valid CSRF pair is refused with 403, the keyspace unchanged."""
    add_schedules(state.queue())
    open_page(page, queue_url(read_only.base))
    assert lane_row(page, "eu")
    assert schedule_row(page, "nightly-report") and schedule_row(page, "heartbeat")
    assert by_css(page, "form[method=post]") == []
    assert by_css(page, "button[data-action], #promote") == []
    assert by_css(page, ".badge-read-only")[0].text == "read-only"
    for which in ("dead", "json", "active"):  # a job's page: no action, Cancel included
        open_page(page, job_url(read_only.base, state.ids[which]))
        assert by_css(page, "form[method=post]") == [], which
    for s in ("scheduled", "pending", "active", "dead", "done"):  # the jobs tables: no selection, no action
        open_page(page, queue_url(read_only.base) + f"?state={s}")
        assert job_ids_shown(page), s
        assert by_css(page, "form[method=post], input[type=checkbox], button[data-bulk], button[data-action]") == [], s

    field, cookie = _token_and_cookie(read_only.base)
    before = keyspace(state.r)
    for action in (
        "pause-lane",
        "resume-lane",
        "set-lane-limit",
        "promote",
        "retry",
        "cancel",
        "delete",
        "promote-now",
        "retry-dead",
        "pause-schedule",
        "resume-schedule",
        "run-schedule-now",
    ):
        r = http(
            read_only.base + "/actions/" + action,
            data={
                "queue": QUEUE,
                "lane": "eu",
                "schedule": "nightly-report",
                "limit": "1",
                "id": state.ids["json" if action == "cancel" else "dead"],
                "csrf_token": field,
            },
            cookies={"emq_csrf": cookie},
        )
        assert r.status == 403 and "read-only" in r.body, action
    assert keyspace(state.r) == before


# -- live parts -----------------------------------------------------------------------------


def test_live_parts_refresh_without_a_reload_and_pause_while_hidden(page, read_only, state):
    """A job added through the API shows on the open queue page without a reload; while the
    tab says it is hidden no fragment is fetched, and it refreshes at once when shown again."""
    from selenium.webdriver.support.ui import WebDriverWait

    open_page(page, queue_url(read_only.base))
    page.execute_script(
        "window.__loaded = true; window.__fetches = 0;"
        "document.body.addEventListener('htmx:beforeRequest', function () { window.__fetches += 1; });"
    )
    scheduled = counts_by_state(state.queue().counts())["scheduled"]
    state.queue().add("later", delay=3600)

    def card(d, name):
        return next(c.find_element("css selector", ".value").text for c in by_css(d, ".card") if c.text.lower().startswith(name))

    WebDriverWait(page, 10).until(lambda d: card(d, "scheduled") == str(scheduled + 1))
    assert page.execute_script("return window.__loaded") is True  # the same document: no reload

    page.execute_script(
        "Object.defineProperty(document, 'visibilityState', {configurable: true, get: function () { return 'hidden'; }});"
        "document.dispatchEvent(new Event('visibilitychange'));"
    )
    time.sleep(0.6)  # a fetch already under way finishes
    hidden_from = page.execute_script("return window.__fetches")
    time.sleep(2.0)  # four periods of 0.5 s
    assert page.execute_script("return window.__fetches") == hidden_from

    page.execute_script(
        "Object.defineProperty(document, 'visibilityState', {configurable: true, get: function () { return 'visible'; }});"
        "document.dispatchEvent(new Event('visibilitychange'));"
    )
    WebDriverWait(page, 5).until(lambda d: d.execute_script("return window.__fetches") > hidden_from)
    assert_clean(page)


# -- login ----------------------------------------------------------------------------------


def test_with_a_token_whoever_has_none_gets_401(page, with_token, state):
    """With --token: no credentials, a wrong bearer or a forged session get 401 on pages,
    fragments, /metrics and actions; the bearer token passes; the login page, given the
    token, sets a session that the browser then uses, and logging out ends it."""
    base = with_token.base
    for path in ("/", "/fragments/overview", "/queues/orders", "/metrics", "/workers"):
        assert http(base + path).status == 401, path
        assert http(base + path, headers={"Authorization": "Bearer wrong"}).status == 401, path
        assert http(base + path, cookies={"emq_session": "9999999999.00"}).status == 401, path
        assert http(base + path, headers={"Authorization": f"Bearer {TOKEN}"}).status == 200, path
    before = keyspace(state.r)
    assert http(base + "/actions/pause-lane", data={"queue": QUEUE, "lane": "eu"}).status == 401
    assert keyspace(state.r) == before

    open_page(page, base + "/")
    assert by_css(page, "input#token")
    by_css(page, "input#token")[0].send_keys("not the token")
    by_css(page, ".login button")[0].click()
    wait_for_text(page, "That is not the token.")
    assert_clean(page)
    by_css(page, "input#token")[0].send_keys(TOKEN)
    by_css(page, ".login button")[0].click()
    wait_for_css(page, "#queues tbody th a")
    # The queue given (--queue) first, then the registry's others.
    assert [a.text for a in by_css(page, "#queues tbody th a")] == [QUEUE, XSS_QUEUE]
    assert_clean(page)
    session = page.get_cookie("emq_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert TOKEN not in session["value"]

    by_css(page, "button.link")[0].click()  # log out
    open_page(page, base + "/")
    assert by_css(page, "input#token")


def test_with_a_password_whoever_has_none_gets_401(with_password, state):
    """With --password: HTTP basic, any user name; no or a wrong password gets 401 with a
    Basic challenge, the right one passes."""
    base = with_password.base

    def basic(user: str, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    r = http(base + "/")
    assert r.status == 401 and r.headers["www-authenticate"].startswith("Basic ")
    assert http(base + "/", headers=basic("admin", "wrong")).status == 401
    assert http(base + "/metrics", headers=basic("admin", PASSWORD[:-1])).status == 401
    assert http(base + "/", headers=basic("admin", PASSWORD)).status == 200
    assert http(base + "/metrics", headers=basic("", PASSWORD)).status == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "dashboard.example"])
def test_listening_beyond_loopback_without_auth_is_refused(host, seeded):
    """`emq dashboard --host H` for a non-loopback H, without --password or --token, exits 2
    with one line saying why, before it listens or connects anywhere."""
    done = subprocess.run(
        [sys.executable, "-m", "emq", "dashboard", "--host", host, "--port", "1", "--url", "redis://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"emq dashboard: refusing to listen on {host} without --password or --token")


def test_mounted_in_a_host_app_it_serves_and_acts_under_its_path(page, mounted, state):
    """Mounted at /emq: its links, static files, fragments and actions live under /emq (a
    link or a stylesheet that lost the prefix would 404 and show in the console); the
    host's own route is untouched; with auth= a callable, the host's check decides (401
    without the header it wants)."""
    base = mounted.base + "/emq"
    open_page(page, base + "/")
    link = by_css(page, "#queues tbody th a")[0]
    assert link.get_attribute("href") == base + "/queues/orders"
    assert http(base + "/fragments/overview").status == 200
    link.click()
    assert_clean(page)
    lane_row(page, "eu").find_element("css selector", "button[data-action=pause]").click()
    wait_for_notice(page, "Lane eu paused.")
    assert page.current_url == base + "/queues/orders"
    assert_clean(page)
    assert keyspace(state.r) == as_api_would(state, lambda q: q.pause_lane("eu"))
    assert http(mounted.base + "/").body == "the host application"

    assert http(mounted.base + "/guarded/").status == 401
    assert http(mounted.base + "/guarded/metrics").status == 401
    assert http(mounted.base + "/guarded/", headers={"X-User": "ops"}).status == 200


# -- metrics -----------------------------------------------------------------------------------


def test_metrics_are_the_counts_by_state(dashboard, state):
    """`/metrics` is the Prometheus text format, and `emq_jobs{queue,state}` equals
    `counts()` of each queue listed (a markup queue name, quoted, included); no series is
    invented beyond the documented ones (`emq_lateness_seconds` is tested apart, in
    tests/test_dashboard_metrics.py). The settled jobs'
    counters are the per-minute counters summed: the seeded queue completed one job and
    lost one, the markup-named queue settled none."""
    r = http(dashboard.base + "/metrics")
    assert r.status == 200 and r.headers["content-type"].startswith("text/plain; version=")
    families = {f.name: f for f in text_string_to_metric_families(r.body)}
    settled = {f"emq_jobs_{k}" for k in ("completed", "retried", "dead", "cancelled", "recovered")}
    assert set(families) == {"emq_jobs", "emq_workers", "emq_oldest_waiting_seconds", "emq_lateness_seconds"} | settled
    for name in settled:
        assert families[name].type == "counter", name
        got_settled = {(s.name, s.labels["queue"]): s.value for s in families[name].samples}
        want_n = {"emq_jobs_completed": 1, "emq_jobs_dead": 1}.get(name, 0)
        assert got_settled == {(name + "_total", QUEUE): want_n, (name + "_total", XSS_QUEUE): 0}, name
    assert families["emq_workers"].samples[0].value == len(emq.workers(state.client))
    oldest = {s.labels["queue"]: s.value for s in families["emq_oldest_waiting_seconds"].samples}
    assert set(oldest) == {QUEUE, XSS_QUEUE} and all(v >= 0 for v in oldest.values())
    heads = [j for j in state.queue().jobs("pending", limit=1).jobs]
    assert oldest[QUEUE] >= (state.client.time_ms() - 60_000 - heads[0].due_ms) / 1000  # the flat head waited at least that
    got = {(s.labels["queue"], s.labels["state"]): s.value for s in families["emq_jobs"].samples}
    want = {}
    for name in (QUEUE, XSS_QUEUE):
        for s, n in counts_by_state(state.queue(name).counts()).items():
            want[(name, s)] = n
    assert got == want


# -- screenshots ---------------------------------------------------------------------------------


@pytest.mark.screenshots
def test_screenshots(page, seeded, state, tmp_path):
    """Each page, whole, as a PNG under 200 KB, light and (the queue's) dark; into
    docs/screenshots/ with EMQ_SCREENSHOTS=1. A dashboard of its own shows the default refresh."""
    out = SCREENSHOTS if os.environ.get("EMQ_SCREENSHOTS") == "1" else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    add_schedules(state.queue())
    # A day of settled jobs in the per-minute counters, so the charts show a working day
    # (the seeded queue settled two jobs); the test's own keyspace, restored after it.
    now_minute = state.client.time_ms() // 60_000
    pipe = state.r.pipeline(transaction=False)
    for ago in range(1, 1440):
        m = now_minute - ago
        busy = 40 + int(35 * math.sin(m / 90)) + (m * 7919) % 17
        pipe.hset(f"emq:{{{QUEUE}}}:stats:{m}", mapping={"completed": busy, "retried": (m % 9 == 0) * 3, "dead": int(m % 37 == 0)})
    pipe.execute()
    shown = Dashboard(["--url", seeded.url, "--queue", QUEUE, "--queue", XSS_QUEUE]).start()
    shots = {
        "overview": shown.base + "/",
        "queue": queue_url(shown.base),
        "job": job_url(shown.base, state.ids["json"]),
        "job-dead": job_url(shown.base, state.ids["dead"]),
        "job-binary": job_url(shown.base, state.ids["binary"]),
        "workers": shown.base + "/workers",
        "queue-scheduled": queue_url(shown.base) + "?state=scheduled",
    }
    try:
        for scheme in ("light", "dark"):
            page.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
            for name, url in shots.items():
                if scheme == "dark" and name != "queue":
                    continue
                open_page(page, url)
                # The whole page, not the window: the viewport made as tall as the document.
                page.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 600, "deviceScaleFactor": 1, "mobile": False}
                )
                height = page.execute_script("return document.documentElement.scrollHeight")
                page.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride",
                    {"width": 1280, "height": min(height, 2000), "deviceScaleFactor": 1, "mobile": False},
                )
                path = out / (f"{name}-dark.png" if scheme == "dark" else f"{name}.png")
                assert page.save_screenshot(str(path))
                size = path.stat().st_size
                assert 2_000 < size < 200_000, (path, size)
    finally:
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        page.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        shown.stop()
