"""A fault-injecting TCP proxy for tests against real servers.

    with FaultProxy("127.0.0.1", server.port) as proxy:
        c = emq.connect(proxy.url)                  # or proxy.url_for("app", "pw", db=3)
        proxy.arm("drop_after_exec")                # the next EXEC runs, its reply is lost
        ...
        assert [f.exec_forwarded for f in proxy.faults("drop_after_exec")] == [True]

One thread runs an event loop (`selectors`) for the listener and every
connection; each client connection gets its own upstream connection. The proxy
splits both byte streams into whole RESP messages (RESP2 and RESP3, inline
commands, pipelines, messages split across reads) and pairs each reply with the
command it answers, so a fault can hit one command, or one reply:

| fault | what the client sees | what the server did |
|---|---|---|
| `drop_before_exec` | the connection closes instead of EXEC's reply | never got EXEC: the transaction is discarded |
| `drop_after_exec` | the connection closes instead of EXEC's reply | ran EXEC (the proxy waits for its reply, then drops it) |
| `reset_mid_reply` | a part of one reply, then a TCP reset | ran the command |
| `drop` | the connection closes (FIN) inside a command (`where="request"`: a prefix of it went out, never the whole) or inside its reply (`where="reply"`) | request: never got the whole command; reply: ran it |
| `stall` | nothing moves on that connection, either way, for `seconds`; then everything is delivered | the same, later |
| `kill` (`kill_all()`, `kill(conn)`) | the connection closes now (FIN, or RST with `reset=True`) | whatever it had got |

Every fault injected is recorded in `proxy.events` (a `Fault` each), with the
connection id and, when the fault lost a reply to an EXEC the server got
(`exec_forwarded=True`: the transaction ran or may have run, the outcome is
unknown to the client) or kept an EXEC from the server (`False`: nothing was
written). The record is made before the client can see the fault.

Faults are armed one-shot (`arm`, first matching command on any connection, or
on one connection), by a seeded schedule (`chaos`), or applied at once
(`stall`, `kill_all`, `kill`); `calm()` disarms everything and releases holds.
`refuse()` closes new connections at once; `retarget()` sends new connections
elsewhere (a failover).

Limits: a reply is paired with the command it answers by order, which holds
for every command but those that answer more or less than once (SUBSCRIBE and
the pub/sub family in RESP2, MONITOR, CLIENT REPLY OFF/SKIP); RESP3 push
messages (`>`) are passed and never paired. A stream that is not RESP (TLS, for
one) is relayed as it comes; only `stall` and the kills apply to it.
"""

from __future__ import annotations

import collections
import fcntl
import random
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import quote

__all__ = ["FaultProxy", "Fault", "KINDS"]

KINDS = ("drop_before_exec", "drop_after_exec", "reset_mid_reply", "drop", "stall")

_READ_CHUNK = 256 * 1024
_MAX_LINE = 64 * 1024  # a RESP header line longer than this is not RESP
_BACKPRESSURE = 16 * 1024 * 1024  # stop reading a side while this much waits to go to the other
_CLOSE_GRACE = 2.0  # seconds a closing connection gets to hand over what it must
_DRAIN_POLL = 0.005  # before a reset: how often to look whether the client has taken the bytes


@dataclass
class Fault:
    """One fault the proxy injected."""

    kind: str  # one of KINDS, or "kill" / "refuse"
    conn: int | None  # the connection (None: a proxy-wide stall)
    command: str | None = None  # the command it hit, upper case (a reply fault: the command answered)
    seq: int | None = None  # that command's index on its connection, from 0
    exec_forwarded: bool | None = None  # an EXEC was involved: True = the server got it and the client
    #                                     never sees its reply (unknown outcome); False = the server never
    #                                     got it (nothing written); None = no EXEC involved
    source: str = "call"  # "armed", "chaos" or "call"
    detail: dict = field(default_factory=dict)  # seconds, where, forwarded bytes, unanswered commands
    at: float = field(default_factory=time.monotonic)

    def key(self) -> tuple:
        """What a run with the same seed and traffic reproduces (no times)."""
        d = {k: v for k, v in self.detail.items() if k != "unanswered"}
        return (self.kind, self.conn, self.command, self.seq, self.exec_forwarded, self.source, tuple(sorted(d.items())))


# ---------------------------------------------------------------------------
# RESP framing


class _NotResp(Exception):
    pass


_LINE_TYPES = frozenset(b"+-:_,#(")
_BULK_TYPES = frozenset(b"$!=")
_AGG_TYPES = {ord("*"): 1, ord("~"): 1, ord(">"): 1, ord("%"): 2, ord("|"): 2}
_ATTR = ord("|")
_STAR = ord("*")


class _Scanner:
    """Splits a RESP2/RESP3 byte stream into whole messages; a feed resumes
    where the last one stopped (a large array arriving in many reads is parsed
    once). `commands=True` also takes inline commands (a line not starting
    with `*`), as servers do."""

    def __init__(self, commands: bool):
        self.commands = commands
        self.buf = bytearray()
        self.pos = 0
        self.stack: list[list] = []  # [elements left, is an attribute]

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        start = 0
        while True:
            end = self._message(start)
            if end is None:
                break
            out.append(bytes(self.buf[start:end]))
            start = end
        if start:
            del self.buf[:start]
            self.pos -= start
        return out

    def take_rest(self) -> bytes:
        rest = bytes(self.buf)
        self.buf.clear()
        self.pos = 0
        self.stack.clear()
        return rest

    def _message(self, start: int) -> int | None:
        buf, stack = self.buf, self.stack
        n = len(buf)
        pos = self.pos
        while pos < n:
            t = buf[pos]
            if self.commands and pos == start and not stack and t != _STAR:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if n - pos > _MAX_LINE:
                        raise _NotResp("inline command too long")
                    break
                self.pos = nl + 1
                return self.pos
            cr = buf.find(b"\r\n", pos + 1)
            if cr < 0:
                if n - pos > _MAX_LINE:
                    raise _NotResp("header line too long")
                break
            try:
                if t in _BULK_TYPES:
                    size = int(buf[pos + 1 : cr])
                    end = cr + 2
                    if size >= 0:
                        end += size + 2
                        if end > n:
                            break
                        if buf[end - 2 : end] != b"\r\n":
                            raise _NotResp("bulk string without its CRLF")
                elif t in _AGG_TYPES:
                    count = int(buf[pos + 1 : cr]) * _AGG_TYPES[t]
                    end = cr + 2
                    if count > 0:
                        stack.append([count, t == _ATTR])
                        pos = end
                        continue
                elif t in _LINE_TYPES:
                    end = cr + 2
                else:
                    raise _NotResp(f"type byte {t:#x}")
            except ValueError:
                raise _NotResp("bad length") from None
            pos = end
            complete = True
            while stack:
                top = stack[-1]
                top[0] -= 1
                if top[0] > 0:
                    complete = False
                    break
                stack.pop()
                if top[1]:  # an attribute ended: the value it annotates comes next
                    complete = False
                    break
            if complete:
                self.pos = pos
                return pos
        self.pos = pos
        return None


def _command_name(msg: bytes) -> str | None:
    """The command a client message carries, upper case; None for one the
    server answers with nothing (an empty line, `*0`)."""
    try:
        if msg[:1] == b"*":
            cr = msg.index(b"\r\n")
            if int(msg[1:cr]) <= 0:
                return None
            p = cr + 2
            if msg[p : p + 1] != b"$":
                return "?"
            cr2 = msg.index(b"\r\n", p)
            size = int(msg[p + 1 : cr2])
            return msg[cr2 + 2 : cr2 + 2 + size].decode("latin-1").upper()
    except ValueError:
        return "?"
    words = msg.split()
    return words[0].decode("latin-1").upper() if words else None


# ---------------------------------------------------------------------------
# plans: what happens to one command and its reply


@dataclass
class _Plan:
    kind: str | None = None  # a KINDS entry, or None
    source: str = ""
    fraction: float = 0.5  # where a cut falls, in (0, 1)
    where: str = "request"  # drop: "request" or "reply"
    stall: float = 0.0  # seconds to hold the connection before this command goes out


@dataclass
class _Armed:
    kind: str
    command: str | None
    conn: int | None
    times: int
    seconds: float
    fraction: float
    where: str

    def matches(self, conn: int, name: str) -> bool:
        return (self.conn is None or self.conn == conn) and (self.command is None or self.command == name)


@dataclass
class _Chaos:
    seed: object
    base: int
    p_drop_before: float
    p_drop_after: float
    p_reset: float
    p_drop: float
    p_stall: float
    max_stall: float
    commands: frozenset | None


def _cut(size: int, fraction: float) -> int:
    """A prefix length strictly inside a message of `size` bytes (0 for one byte)."""
    if size <= 1:
        return 0
    return min(size - 1, max(1, int(size * fraction)))


class _Conn:
    def __init__(self, proxy: FaultProxy, cid: int, client: socket.socket, up: socket.socket):
        self.proxy = proxy
        self.id = cid
        self.client = client
        self.up = up
        self.cin = _Scanner(commands=True)
        self.sin = _Scanner(commands=False)
        self.raw: bool | None = None  # decided on the first byte from the client
        self.c_pending: collections.deque = collections.deque()  # (bytes, name, seq, plan)
        self.s_pending: collections.deque = collections.deque()  # (bytes, is_push)
        self.plans: collections.deque = collections.deque()  # (name, seq, plan) forwarded, unanswered
        self.to_up = bytearray()
        self.to_client = bytearray()
        self.hold_until = 0.0
        self.ncmd = 0
        self.c_eof = False
        self.s_eof = False
        self.closing: str | None = None  # "fin" / "rst" once a fault or an EOF ends the connection
        self.close_by = 0.0
        self.draining = False
        self.closed = False
        self.masks = {client: 0, up: 0}


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of `upstream_host:upstream_port` that
    injects faults; see the module's doc. `start()`/`stop()` or a `with` block."""

    def __init__(self, upstream_host: str = "127.0.0.1", upstream_port: int | None = None, *, connect_timeout: float = 2.0):
        if upstream_port is None:
            raise TypeError("FaultProxy needs the upstream port")
        self._upstream = (upstream_host, int(upstream_port))
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._events: list[Fault] = []
        self.errors: list[BaseException] = []  # unexpected exceptions in the loop (a test asserts none)
        self._armed: list[_Armed] = []
        self._chaos: _Chaos | None = None
        self._global_hold = 0.0
        self._refusing = False
        self._calls: collections.deque = collections.deque()
        self._conns: dict[int, _Conn] = {}
        self._next_id = 1
        self.accepted = 0
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._listener: socket.socket | None = None
        self.port: int | None = None

    # -- life ---------------------------------------------------------------

    def start(self) -> FaultProxy:
        if self._thread:
            return self
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, ("listen", None))
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=f"FaultProxy:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Closes every connection and the listener; joins the loop's thread."""
        t = self._thread
        if not t:
            return
        if t.is_alive():
            self._call(self._shutdown)
            t.join(10)
        self._thread = None
        if t.is_alive():
            raise RuntimeError("FaultProxy: the loop thread did not stop")

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def url_for(
        self,
        user: str | None = None,
        password: str | None = None,
        db: int | None = None,
        *,
        scheme: str = "redis",
        fragment: str | None = None,
    ) -> str:
        """`redis://[user][:password]@127.0.0.1:port[/db][#fragment]`, user and
        password quoted; `scheme="rediss"` through a proxy to a TLS port (the
        certificate must then name 127.0.0.1)."""
        auth = ""
        if user is not None or password is not None:
            auth = quote(user or "", safe="")
            if password is not None:
                auth += ":" + quote(password, safe="")
            auth += "@"
        url = f"{scheme}://{auth}127.0.0.1:{self.port}"
        if db is not None:
            url += f"/{int(db)}"
        if fragment is not None:
            url += ("" if db is not None else "/") + "#" + fragment
        return url

    def __repr__(self) -> str:
        return f"<FaultProxy 127.0.0.1:{self.port} -> {self._upstream[0]}:{self._upstream[1]}>"

    # -- faults ---------------------------------------------------------------

    def arm(
        self,
        kind: str,
        *,
        command: str | None = None,
        conn: int | None = None,
        times: int = 1,
        seconds: float = 0.5,
        fraction: float = 0.5,
        where: str = "request",
    ) -> None:
        """One-shot faults: the next `times` commands that match (`command`, any
        command by default, always EXEC for the *_exec kinds; `conn`, any
        connection by default) get `kind`. `seconds`: a stall's length;
        `fraction`: where a reset or drop cuts its message; `where`: a drop's
        side ("request" or "reply")."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {KINDS}")
        if where not in ("request", "reply"):
            raise ValueError("where must be 'request' or 'reply'")
        if kind.endswith("_exec"):
            command = "EXEC"
        with self._lock:
            self._armed.append(_Armed(kind, command.upper() if command else None, conn, times, float(seconds), float(fraction), where))

    def chaos(
        self,
        seed,
        *,
        p_drop_before: float = 0.0,
        p_drop_after: float = 0.0,
        p_reset: float = 0.0,
        p_drop: float = 0.0,
        p_stall: float = 0.0,
        max_stall: float = 0.2,
        commands=None,
    ) -> None:
        """A random schedule: each command (of `commands`, all by default) may
        get a fault, decided by `seed`, its connection's index since this call
        (0 for the first connection opened after it) and the command's index on
        that connection, and nothing else: the same traffic gets the same faults.
        An EXEC may be dropped before or after (`p_drop_before`, `p_drop_after`);
        any command's reply may be cut by a reset (`p_reset`), any command or
        reply by a close (`p_drop`); any command may first stall its connection
        for up to `max_stall` seconds (`p_stall`), on top of the rest."""
        with self._lock:
            self._chaos = _Chaos(
                seed,
                self._next_id,
                p_drop_before,
                p_drop_after,
                p_reset,
                p_drop,
                p_stall,
                max_stall,
                frozenset(c.upper() for c in commands) if commands else None,
            )

    def calm(self) -> None:
        """Disarms everything (armed faults, chaos, refusal) and releases every stall now."""
        with self._lock:
            self._armed.clear()
            self._chaos = None
            self._refusing = False
            self._global_hold = 0.0
        self._call(self._release_holds)

    def stall(self, seconds: float) -> None:
        """Holds every byte on every connection (new ones too), both ways, for
        `seconds` from now; then delivers them. Returns at once."""
        with self._lock:
            self._global_hold = max(self._global_hold, time.monotonic() + seconds)
            self._events.append(Fault("stall", None, detail={"seconds": seconds}))
        self._wake()

    def kill_all(self, *, reset: bool = False) -> int:
        """Closes every open connection now (FIN; a TCP reset with `reset=True`);
        returns how many. When it returns, they are closed."""
        return self._call(lambda: sum(self._kill(c, reset) for c in list(self._conns.values())))

    def kill(self, conn: int, *, reset: bool = False) -> bool:
        """Closes one connection now; False when it was not open."""
        return self._call(lambda: self._kill(self._conns[conn], reset) if conn in self._conns else False)

    def refuse(self, on: bool = True) -> None:
        """While on, a new connection is accepted and closed at once (a reset),
        as a server that is down would; open ones are left alone."""
        with self._lock:
            self._refusing = on

    def retarget(self, host: str, port: int) -> None:
        """New connections go to `host:port` from now on (a failover); open ones stay."""
        with self._lock:
            self._upstream = (host, int(port))

    # -- records ---------------------------------------------------------------

    @property
    def events(self) -> list[Fault]:
        """Every fault injected, in order (a copy)."""
        with self._lock:
            return list(self._events)

    def faults(self, kind: str | None = None, *, conn: int | None = None, exec_forwarded: bool | None | type(...) = ...) -> list[Fault]:
        """The events of one kind (all by default), of one connection, with a
        given `exec_forwarded` (True, False or None; any when left out)."""
        return [
            f
            for f in self.events
            if (kind is None or f.kind == kind)
            and (conn is None or f.conn == conn)
            and (exec_forwarded is ... or f.exec_forwarded is exec_forwarded)
        ]

    def clear_events(self) -> None:
        with self._lock:
            self._events.clear()

    @property
    def connections(self) -> list[int]:
        """The ids of the connections open now."""
        return self._call(lambda: sorted(self._conns))

    # -- the loop ---------------------------------------------------------------

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError, AttributeError):
            pass

    def _call(self, fn):
        t = self._thread
        if t is None or threading.current_thread() is t or not t.is_alive():
            return fn()
        done = threading.Event()
        box: dict = {}

        def run():
            try:
                box["r"] = fn()
            except BaseException as e:  # handed to the caller
                box["e"] = e
            finally:
                done.set()

        with self._lock:
            self._calls.append(run)
        self._wake()
        while not done.wait(0.2):
            if not t.is_alive():
                raise RuntimeError("FaultProxy: the loop thread is gone") from (self.errors[-1] if self.errors else None)
        if "e" in box:
            raise box["e"]
        return box.get("r")

    def _record(self, fault: Fault) -> None:
        with self._lock:
            self._events.append(fault)

    def _loop(self) -> None:
        try:
            while not self._stopping:
                for key, mask in self._sel.select(self._timeout()):
                    what, conn = key.data
                    try:
                        if what == "listen":
                            self._accept()
                        elif what == "wake":
                            try:
                                while self._wake_r.recv(4096):
                                    pass
                            except BlockingIOError:
                                pass
                        elif not conn.closed:
                            self._io(conn, key.fileobj, mask)
                    except Exception as e:  # one connection's trouble is not the proxy's
                        self.errors.append(e)
                        if conn is not None:
                            self._abort(conn)
                while True:
                    with self._lock:
                        fn = self._calls.popleft() if self._calls else None
                    if fn is None:
                        break
                    fn()
                now = time.monotonic()
                with self._lock:
                    if self._global_hold and now >= self._global_hold:
                        self._global_hold = 0.0
                for conn in list(self._conns.values()):
                    try:
                        self._pump(conn, now)
                        self._settle(conn, now)
                    except Exception as e:
                        self.errors.append(e)
                        self._abort(conn)
        except BaseException as e:  # kept for the test to see (`errors`), not printed by the thread
            self.errors.append(e)
        finally:
            self._shutdown()
            for s in (self._listener, self._wake_r, self._wake_w):
                try:
                    self._sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                s.close()
            self._sel.close()
            with self._lock:
                calls, self._calls = list(self._calls), collections.deque()
            for fn in calls:  # answer anyone still waiting
                fn()

    def _shutdown(self) -> None:
        self._stopping = True
        for conn in list(self._conns.values()):
            self._abort(conn)

    def _timeout(self) -> float | None:
        # A hold counts until a pump has seen it over (the pump clears it): one
        # that ends between the pump and this call must still wake the loop,
        # or the held messages wait for an unrelated event.
        now = time.monotonic()
        times = [self._global_hold] if self._global_hold else []
        for c in self._conns.values():
            if c.hold_until and not c.closing:
                times.append(c.hold_until)
            if c.closing:
                times.append(now + _DRAIN_POLL if c.draining else c.close_by)
        return max(0.0, min(times) - now) if times else None

    def _release_holds(self) -> None:
        for c in self._conns.values():
            c.hold_until = 0.0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            cid = self._next_id
            self._next_id += 1
            self.accepted += 1
            with self._lock:
                refusing, upstream = self._refusing, self._upstream
            if refusing:
                self._record(Fault("refuse", cid))
                _close(client, "rst")
                continue
            try:
                up = socket.create_connection(upstream, timeout=self.connect_timeout)
            except OSError:
                _close(client, "rst")  # as the upstream did to us
                continue
            for s in (client, up):
                s.setblocking(False)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(self, cid, client, up)
            self._conns[cid] = conn
            self._settle(conn, time.monotonic())

    # -- one connection -------------------------------------------------------------

    def _io(self, conn: _Conn, sock: socket.socket, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            buf = conn.to_client if sock is conn.client else conn.to_up
            try:
                sent = sock.send(buf)
                del buf[:sent]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._abort(conn)
                return
        if mask & selectors.EVENT_READ and not conn.closed:
            try:
                data = sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # a reset: the other side is gone
                self._abort(conn)
                return
            if sock is conn.client:
                self._from_client(conn, data)
            else:
                self._from_server(conn, data)

    def _from_client(self, conn: _Conn, data: bytes) -> None:
        if not data:
            conn.c_eof = True
            return
        if conn.raw is None:
            conn.raw = not (data[0] == _STAR or 0x20 < data[0] < 0x7F)
        if conn.raw:
            conn.c_pending.append((data, None, None, None))
            return
        try:
            msgs = conn.cin.feed(data)
        except _NotResp:
            self._go_raw(conn)
            return
        for msg in msgs:
            name = _command_name(msg)
            if name is None:
                conn.c_pending.append((msg, None, None, None))
                continue
            seq = conn.ncmd
            conn.ncmd += 1
            conn.c_pending.append((msg, name, seq, self._decide(conn, name, seq)))

    def _from_server(self, conn: _Conn, data: bytes) -> None:
        if not data:
            conn.s_eof = True
            return
        if conn.raw:
            conn.s_pending.append((data, True))
            return
        try:
            msgs = conn.sin.feed(data)
        except _NotResp:
            self._go_raw(conn)
            return
        for msg in msgs:
            conn.s_pending.append((msg, msg[:1] == b">"))

    def _go_raw(self, conn: _Conn) -> None:
        """Not RESP after all: relay the rest as it comes, unpaired."""
        conn.raw = True
        rest = conn.cin.take_rest()
        if rest:
            conn.c_pending.append((rest, None, None, None))
        rest = conn.sin.take_rest()
        if rest:
            conn.s_pending.append((rest, True))
        conn.plans.clear()

    def _decide(self, conn: _Conn, name: str, seq: int) -> _Plan | None:
        with self._lock:
            for i, a in enumerate(self._armed):
                if a.matches(conn.id, name):
                    a.times -= 1
                    if a.times <= 0:
                        del self._armed[i]
                    if a.kind == "stall":
                        return _Plan(None, "armed", stall=a.seconds)
                    return _Plan(a.kind, "armed", a.fraction, a.where)
            ch = self._chaos
        if ch is None or (ch.commands is not None and name not in ch.commands):
            return None
        rng = random.Random(f"{ch.seed}:{conn.id - ch.base}:{seq}")
        u = [rng.random() for _ in range(8)]
        plan = _Plan(None, "chaos", fraction=0.05 + 0.9 * u[5], where="request" if u[6] < 0.5 else "reply")
        if name == "EXEC" and u[0] < ch.p_drop_before:
            plan.kind = "drop_before_exec"
        elif name == "EXEC" and u[1] < ch.p_drop_after:
            plan.kind = "drop_after_exec"
        elif u[2] < ch.p_reset:
            plan.kind = "reset_mid_reply"
        elif u[3] < ch.p_drop:
            plan.kind = "drop"
        if u[4] < ch.p_stall:
            plan.stall = round(ch.max_stall * u[7], 6)
        return plan if plan.kind or plan.stall else None

    def _held(self, conn: _Conn, now: float) -> bool:
        if conn.hold_until and now >= conn.hold_until:
            conn.hold_until = 0.0
        return now < conn.hold_until or now < self._global_hold

    def _pump(self, conn: _Conn, now: float) -> None:
        """Moves whole messages to the outgoing buffers, applying their plans,
        unless the connection is held."""
        if conn.closed or conn.closing or self._held(conn, now):
            return
        while conn.c_pending and not conn.closing:
            msg, name, seq, plan = conn.c_pending[0]
            if plan is not None and plan.stall:
                self._record(Fault("stall", conn.id, name, seq, source=plan.source, detail={"seconds": plan.stall}))
                conn.hold_until = now + plan.stall
                plan.stall = 0.0
                return
            conn.c_pending.popleft()
            if name is None:
                conn.to_up += msg
                continue
            kind = plan.kind if plan else None
            if kind == "drop_before_exec" and name == "EXEC":
                self._end(conn, Fault(kind, conn.id, name, seq, source=plan.source), "fin", lost_exec=True)
                return
            if kind == "drop" and plan.where == "request":
                k = _cut(len(msg), plan.fraction)
                conn.to_up += msg[:k]
                self._end(
                    conn,
                    Fault(kind, conn.id, name, seq, source=plan.source, detail={"where": "request", "forwarded": k, "of": len(msg)}),
                    "fin",
                    lost_exec=name == "EXEC",
                )
                return
            conn.to_up += msg
            conn.plans.append((name, seq, plan))
        while conn.s_pending and not conn.closing:
            msg, push = conn.s_pending.popleft()
            if push or not conn.plans:
                conn.to_client += msg
                continue
            name, seq, plan = conn.plans.popleft()
            kind = plan.kind if plan else None
            if kind == "drop_after_exec" and name == "EXEC":
                conn.plans.appendleft((name, seq, plan))
                self._end(conn, Fault(kind, conn.id, name, seq, source=plan.source, detail={"reply_bytes": len(msg)}), "fin")
                return
            if kind == "reset_mid_reply" or (kind == "drop" and plan.where == "reply"):
                k = _cut(len(msg), plan.fraction)
                conn.to_client += msg[:k]
                conn.plans.appendleft((name, seq, plan))
                detail = {"forwarded": k, "of": len(msg)}
                if kind == "drop":
                    detail["where"] = "reply"
                self._end(
                    conn, Fault(kind, conn.id, name, seq, source=plan.source, detail=detail), "rst" if kind == "reset_mid_reply" else "fin"
                )
                return
            conn.to_client += msg
        if (conn.c_eof and not conn.c_pending) or (conn.s_eof and not conn.s_pending):
            # one side hung up: hand over what is whole, then close (as the server would)
            conn.closing = "fin"
            conn.close_by = now + _CLOSE_GRACE

    def _end(self, conn: _Conn, fault: Fault, how: str, lost_exec: bool = False) -> None:
        """A fault ends the connection: records it (before the client can see
        it), then closes once what must go out has gone."""
        unanswered = [n for n, _, _ in conn.plans]
        fault.detail["unanswered"] = unanswered
        if "EXEC" in unanswered:
            fault.exec_forwarded = True
        elif lost_exec:
            fault.exec_forwarded = False
        self._record(fault)
        conn.closing = how
        conn.close_by = time.monotonic() + _CLOSE_GRACE
        conn.c_pending.clear()
        conn.s_pending.clear()

    def _kill(self, conn: _Conn, reset: bool) -> bool:
        if conn.closed:
            return False
        unanswered = [n for n, _, _ in conn.plans]
        self._record(
            Fault("kill", conn.id, exec_forwarded=True if "EXEC" in unanswered else None, detail={"reset": reset, "unanswered": unanswered})
        )
        self._finish(conn, "rst" if reset else "fin")
        return True

    def _settle(self, conn: _Conn, now: float) -> None:
        """Closes a closing connection once its buffers are out (or its grace
        is over); else sets what the selector waits for on each socket."""
        if conn.closed:
            return
        if conn.closing:
            out = not conn.to_client and not conn.to_up
            # A reset throws away what the kernel has not delivered yet: wait
            # until the client has the part of the reply it is meant to get.
            conn.draining = out and conn.closing == "rst" and _unsent(conn.client) > 0
            if (out and not conn.draining) or now >= conn.close_by:
                self._finish(conn, conn.closing)
                return
        reading = not conn.closing
        self._interest(
            conn,
            conn.client,
            (selectors.EVENT_READ if reading and not conn.c_eof and len(conn.to_up) < _BACKPRESSURE else 0)
            | (selectors.EVENT_WRITE if conn.to_client else 0),
        )
        self._interest(
            conn,
            conn.up,
            (selectors.EVENT_READ if reading and not conn.s_eof and len(conn.to_client) < _BACKPRESSURE else 0)
            | (selectors.EVENT_WRITE if conn.to_up else 0),
        )

    def _interest(self, conn: _Conn, sock: socket.socket, mask: int) -> None:
        old = conn.masks[sock]
        if mask == old:
            return
        if old and mask:
            self._sel.modify(sock, mask, ("conn", conn))
        elif mask:
            self._sel.register(sock, mask, ("conn", conn))
        else:
            self._sel.unregister(sock)
        conn.masks[sock] = mask

    def _abort(self, conn: _Conn) -> None:
        self._finish(conn, "fin")

    def _finish(self, conn: _Conn, how: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.pop(conn.id, None)
        for s in (conn.client, conn.up):
            if conn.masks.get(s):
                try:
                    self._sel.unregister(s)
                except (KeyError, ValueError):
                    pass
        _close(conn.client, how)
        _close(conn.up, "fin")


_SIOCOUTQNSD = 0x894B  # Linux: bytes in a TCP send queue not sent yet


def _unsent(sock: socket.socket) -> int:
    """Bytes the kernel has not sent yet on this socket (Linux; 0 elsewhere).
    Sent ones are in the peer's receive queue already (loopback), where a
    reset leaves them; the not-yet-acknowledged count (SIOCOUTQ) would wait
    for delayed ACKs."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQNSD, b"\0\0\0\0"))[0]
    except (OSError, AttributeError, ValueError):
        return 0


def _close(sock: socket.socket, how: str) -> None:
    try:
        if how == "rst":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
