"""The dashboard without a browser: how job data and times are shown, `create_app`'s checks
of its arguments, and the loopback guard for a request that reached it on another address
(an ASGI request made by hand: no socket of this machine can be one)."""

from __future__ import annotations

import asyncio
import json

import pytest

import emq
from emq.dashboard import create_app
from emq.dashboard.present import SHOWN_BYTES, duration, hex_dump, relative, show_data, utc_time


def test_json_data_is_pretty_printed_and_keeps_its_characters():
    """JSON is indented and its non-ASCII text shown as itself (not `\\u` escapes); a
    broken version would show the compact bytes or mangle them."""
    shown = show_data('{"a": [1, {"b": "Zürich"}], "c": null}'.encode())
    assert shown.kind == "json" and not shown.cut
    assert shown.text == json.dumps({"a": [1, {"b": "Zürich"}], "c": None}, indent=2, ensure_ascii=False)
    assert shown.size == len('{"a": [1, {"b": "Zürich"}], "c": null}'.encode())


@pytest.mark.parametrize(
    "data, kind",
    [
        (b"", "empty"),
        (b"plain text\twith a tab\nand lines", "text"),
        (b"<script>alert(1)</script>", "text"),
        (b"\xff\xfe not UTF-8", "hex"),
        (b"UTF-8 with a NUL \x00 inside", "hex"),
        (b"an escape \x1b[31m sequence", "hex"),
        ("a C1 control \u0085 char".encode(), "hex"),
        (b"\x80\x04\x95pickled", "hex"),
    ],
)
def test_data_is_shown_as_text_only_when_it_is_plain_text(data, kind):
    """Text only when it is UTF-8 without control characters (tab and line ends aside);
    anything else, a pickle included, as a hex dump: never decoded into something else."""
    assert show_data(data).kind == kind


def test_large_data_is_cut_and_a_split_character_does_not_make_it_binary():
    """Data over SHOWN_BYTES shows its first SHOWN_BYTES, says so, and stays text when the
    cut falls inside a multi-byte character."""
    data = b"a" + ("é" * SHOWN_BYTES).encode()  # 2 bytes each, after one: the cut splits an é
    shown = show_data(data)
    assert shown.cut and shown.kind == "text" and shown.size == 1 + 2 * SHOWN_BYTES
    assert shown.text == "a" + "é" * ((SHOWN_BYTES - 1) // 2)
    assert show_data(b"\xff" + data[1:]).kind == "hex"  # only the cut's own split is excused
    assert show_data(b"{" + b" " * SHOWN_BYTES + b"}").kind == "text"  # a cut JSON is not parsed


def test_hex_dump_has_offsets_bytes_and_printable_ascii():
    assert hex_dump(bytes(range(0x41, 0x41 + 18))) == (
        "00000000  41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50  |ABCDEFGHIJKLMNOP|\n"
        "00000010  51 52                                            |QR|"
    )
    assert hex_dump(b"\x00<\x7f") == "00000000  00 3c 7f" + " " * 39 + "  |.<.|"


def test_times_and_durations_in_words():
    assert utc_time(0) == "1970-01-01 00:00:00.000 UTC"
    assert utc_time(1_700_000_000_123) == "2023-11-14 22:13:20.123 UTC"
    assert utc_time(None) == "—"
    assert [duration(s) for s in (0.25, 1.5, 42, 303, 3600, 7500, 2_592_000, None)] == [
        "250 ms",
        "1.5 s",
        "42 s",
        "5 min 3 s",
        "1 h",
        "2 h 5 min",
        "30 d",
        "forever",
    ]
    assert relative(10_000, 5_000) == "in 5 s" and relative(5_000, 10_000) == "5 s ago" and relative(5_100, 5_000) == "now"


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(url="redis://127.0.0.1:1", client="c"), "give client= or url=, not both"),
        (dict(client="redis://127.0.0.1:1"), "client must be an emq.Client"),
        (dict(password="p", token="t"), "give one of password=, token= and auth=, not password and token"),
        (dict(token="t", auth=None), "not token and auth"),
        (dict(password=""), "password must be a non-empty str"),
        (dict(auth="yes"), "auth must be a callable"),
        (dict(refresh=0), "refresh must be a number of seconds"),
        (dict(refresh=True), "refresh must be a number of seconds"),
        (dict(queues="orders"), "queues must be a list of names"),
        (dict(secret=b"short"), "secret must be at least 16 bytes"),
    ],
)
def test_create_app_refuses_bad_arguments_before_connecting(kwargs, says):
    """Each bad argument raises emq.ArgumentError naming the call and the argument, before
    any connection is made (the URL here has no server)."""
    with pytest.raises(emq.ArgumentError, match="^emq.dashboard.create_app: ") as e:
        create_app(**kwargs)
    assert says in str(e.value)


def test_create_app_checks_queue_names_as_emq_queue_does(client):
    with pytest.raises(emq.ArgumentError, match="emq.Queue: name must have no"):
        create_app(client, queues=["ok", "not ok"])


def _get(app, *, server: tuple[str, int], host: str, path: str = "/") -> int:
    """The status `app` answers a GET of `path` that reached it on `server`, naming `host`."""
    statuses: list[int] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", host.encode())],
        "client": ("203.0.113.9", 50000),
        "server": server,
    }
    asyncio.run(app(scope, receive, send))
    return statuses[0]


def test_without_auth_only_loopback_addresses_and_names_are_served(client):
    """No password, token or auth=: a request that arrived on a non-loopback address, or
    names a host that is not a loopback one, gets 403, even for static files; on
    127.0.0.1 or ::1 naming localhost it is served. With auth=None the host app decides."""
    app = create_app(client, queues=["orders"])
    assert _get(app, server=("127.0.0.1", 8000), host="127.0.0.1:8000") == 200
    assert _get(app, server=("::1", 8000), host="[::1]:8000") == 200
    assert _get(app, server=("127.0.0.1", 8000), host="localhost:8000") == 200
    assert _get(app, server=("10.1.2.3", 8000), host="10.1.2.3:8000") == 403
    assert _get(app, server=("10.1.2.3", 8000), host="127.0.0.1:8000") == 403
    assert _get(app, server=("10.1.2.3", 8000), host="10.1.2.3:8000", path="/static/dashboard.css") == 403
    assert _get(app, server=("127.0.0.1", 8000), host="rebound.example:8000") == 403
    open_app = create_app(client, queues=["orders"], auth=None)
    assert _get(open_app, server=("10.1.2.3", 8000), host="dashboard.internal") == 200
