//! One connection to the server, owned by the core: raw pipelines of packed
//! commands, reconnecting on the next call after a wire error.
//!
//! A `Conn` keeps everything it was opened with (address, credentials, TLS,
//! database, timeouts), so `sibling` opens another connection exactly like it:
//! a worker's other connections run as the same user, over the same TLS.

use std::time::Duration;

use emq_plan::{Cmd, Reply};
use emq_wire::net::{self, Addr, Stream};
use emq_wire::{Auth, Wire, WireError};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::error::{HostError, HostResult};

pub struct Conn {
    info: ConnectionInfo,
    wire: Option<Wire<Stream>>,
    /// Where it connects, never with a password: for messages and reprs.
    pub address: String,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    /// Whether the server's `WATCH` costs the same per key however many one
    /// connection watches (`INFO server`, read once): see `sweeps::group_for`.
    flat_watch: Option<bool>,
    /// How long a read polls before it sleeps (`emq_wire::net::Stream::set_spin`).
    spin: Duration,
    /// `emq.connect(wait_replicas=N, wait_timeout=T)`: `(N, T in ms)`; see `replicated`.
    wait: Option<(u64, u64)>,
    /// A transaction ran or a script answered since `replicated` last looked.
    written: bool,
    /// The ids the last group commit's claim read past those it took, and its
    /// queue's prefix: the next one's hint (`plan_backend`'s `complete_and_claim`).
    pub claim_hint: Option<(Vec<u8>, Vec<Vec<u8>>)>,
    /// Whether a conversation's expected transaction is queued ahead of its
    /// reads' replies (`drive`): until a guess turns out wrong, and again once
    /// one would have been right.
    pub queue_ahead: bool,
    /// The last promote on this connection took a whole batch: a backlog, whose
    /// next selection is read bare (`sweeps::run_plan_timed`).
    pub backlog: bool,
    /// The server refused a sorted selection's `SORT_RO … GET` (an ACL user without
    /// access to every key, a cluster): this connection reads rows one by one.
    pub sort_refused: bool,
    /// The last promote on this connection found its queue using priorities:
    /// a sorted selection asks for the rows' `priority` too (`Sweep::levels_hint`).
    pub levels: bool,
    /// The longest a read waited in the last sweep of each backend and kind
    /// on this connection (`sweeping`); zero: none yet.
    sweep_waits: [Duration; SWEEP_SLOTS],
}

/// One slot of `Conn::sweep_waits` for each backend (3) and kind (2) of sweep.
pub const SWEEP_SLOTS: usize = 6;

/// The longest spin a caller may ask for (`emq.connect(spin=…)`, whose default
/// says why a read polls): past it, polling costs a core for nothing a sleep
/// would not give.
pub const MAX_SPIN: Duration = Duration::from_millis(10);

/// How long the reads of a sweep poll (`Conn::sweeping`): a little longer than
/// the longest wait of the connection's last sweep of the same backend and
/// kind, at least the connection's own spin, at most [`MAX_SPIN`]. A sweep's
/// answers take longer than a claim's (a transaction of a hundred rows takes
/// the server 200 µs to 2 ms), so under the connection's spin its reader falls
/// asleep before most of them, and each wake-up costs both sides (the plan's
/// three round trips a call three times); the next call of a backlog takes about
/// as long as the last. Zero: the connection never polls, and neither do its
/// sweeps.
pub fn sweep_spin(own: Duration, last_wait: Duration) -> Duration {
    if own.is_zero() {
        return own;
    }
    (last_wait + last_wait / 4 + Duration::from_micros(50)).clamp(own, MAX_SPIN.max(own))
}

impl Conn {
    pub fn open(
        url: &str,
        connect_timeout: Duration,
        read_timeout: Option<Duration>,
        spin: Duration,
        wait: Option<(u64, u64)>,
    ) -> HostResult<Self> {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"].iter().any(|s| url.starts_with(s));
        let info = url.into_connection_info().ok().filter(|_| scheme_ok).ok_or_else(|| {
            HostError::Argument(format!("emq.connect: url {:?} is not a redis://, rediss:// or unix:// URL", redact(url)))
        })?;
        let address = address(&info);
        Ok(Conn {
            info,
            wire: None,
            address,
            connect_timeout,
            read_timeout,
            flat_watch: None,
            spin,
            wait,
            written: false,
            claim_hint: None,
            queue_ahead: true,
            backlog: false,
            sort_refused: false,
            levels: false,
            sweep_waits: [Duration::ZERO; SWEEP_SLOTS],
        })
    }

    /// A new connection with the same settings (`read_timeout`: `None` keeps this
    /// one's), not yet connected.
    pub fn sibling(&self, read_timeout: Option<Option<Duration>>) -> Conn {
        Conn {
            info: self.info.clone(),
            wire: None,
            address: self.address.clone(),
            connect_timeout: self.connect_timeout,
            read_timeout: read_timeout.unwrap_or(self.read_timeout),
            flat_watch: self.flat_watch,
            spin: self.spin,
            wait: self.wait,
            written: false,
            claim_hint: None,
            queue_ahead: true,
            backlog: false,
            sort_refused: false,
            levels: false,
            sweep_waits: [Duration::ZERO; SWEEP_SLOTS],
        }
    }

    /// A new connection with this one's settings to another node of its cluster
    /// (`host:port` from the slot map; TLS stays TLS), not yet connected.
    pub fn at(&self, host: &str, port: u16) -> Conn {
        let addr = match self.info.addr() {
            ConnectionAddr::TcpTls { insecure, tls_params, .. } => {
                ConnectionAddr::TcpTls { host: host.to_string(), port, insecure: *insecure, tls_params: tls_params.clone() }
            }
            _ => ConnectionAddr::Tcp(host.to_string(), port),
        };
        let info = self.info.clone().set_addr(addr);
        Conn { address: address(&info), info, ..self.sibling(None) }
    }

    /// The host it connects to (empty for a Unix socket).
    pub fn host(&self) -> String {
        match self.info.addr() {
            ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
            _ => String::new(),
        }
    }

    pub fn read_timeout(&self) -> Option<Duration> {
        self.read_timeout
    }

    /// Whether `WATCH` is flat on this server: Valkey 9 and later compare a new
    /// key with those watched through a set; Redis 7.x and Valkey 8 walk a list,
    /// so the cost of a key grows with the keys already watched (SPEC §9,
    /// measured in `benches/README.md`). From the handshake's `HELLO` (no ACL
    /// denies it); unknown: not flat.
    pub fn flat_watch(&mut self) -> HostResult<bool> {
        if let Some(flat) = self.flat_watch {
            return Ok(flat);
        }
        let (name, version) = self.wire()?.server.clone();
        let major = version.split('.').next().and_then(|v| v.parse::<u64>().ok());
        let flat = name == "valkey" && major.is_some_and(|v| v >= 9);
        self.flat_watch = Some(flat);
        Ok(flat)
    }

    /// Runs the sweep `f` with its reads polling for [`sweep_spin`] of the last
    /// sweep in `slot` (< [`SWEEP_SLOTS`]), and keeps how long this one's reads
    /// waited for the next; the connection's own spin comes back after.
    pub fn sweeping<T>(&mut self, slot: usize, f: impl FnOnce(&mut Conn) -> T) -> T {
        let own = self.spin;
        if own.is_zero() {
            return f(self);
        }
        self.set_spin(sweep_spin(own, self.sweep_waits[slot]));
        let out = f(self);
        // A wire dropped by an error took its waits with it: the estimate stays.
        if let Some(w) = self.wire.as_mut() {
            self.sweep_waits[slot] = w.stream_mut().take_longest_wait();
        }
        self.set_spin(own);
        out
    }

    pub fn spin(&self) -> Duration {
        self.spin
    }

    /// This connection's spin, for its reads from now on (and a new wire's).
    fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
        if let Some(w) = self.wire.as_mut() {
            w.stream_mut().set_spin(spin);
            // Waits before this belong to other calls.
            w.stream_mut().take_longest_wait();
        }
    }

    /// Connects now (if not connected): a bad address or refused credentials fail here.
    pub fn connect(&mut self) -> HostResult<()> {
        self.wire().map(drop)
    }

    fn wire(&mut self) -> HostResult<&mut Wire<Stream>> {
        if self.wire.is_none() {
            let w = wire_addr(self.info.addr())
                .and_then(|addr| net::connect(&addr, &auth(&self.info), self.connect_timeout, self.read_timeout, self.spin))
                .map_err(|e| self.wire_error(&e))?;
            self.wire = Some(w);
        }
        Ok(self.wire.as_mut().expect("just connected"))
    }

    fn wire_error(&self, e: &WireError) -> HostError {
        let msg = format!("{}: {e}", self.address);
        match e {
            WireError::Timeout => HostError::Timeout(msg),
            WireError::Io(_) => HostError::Connection(msg),
            // The handshake's refusals say what to do about the URL, not what the
            // server's own words say about `HELLO` or `AUTH`.
            WireError::Refused { code, .. } if code == "NOAUTH" => HostError::Authentication(format!(
                "{}: the server needs a password, and the URL gives none: put it in the URL \
                 (redis://:PASSWORD@host:port, or redis://USER:PASSWORD@host:port for an ACL user; \
                 unix:///path?user=USER&pass=PASSWORD), or in EMQ_URL to keep it off a command line",
                self.address
            )),
            WireError::Refused { code, .. } if code == "WRONGPASS" => HostError::Authentication(format!(
                "{}: the server refused the URL's credentials: the password is wrong, or the user (default: \"default\") \
                 does not exist or is disabled",
                self.address
            )),
            WireError::Refused { code, message } => HostError::classify(&self.address, code, message),
            WireError::Protocol(_) => HostError::Server(msg),
        }
    }

    /// Runs `f` on the wire; on any failure the connection's state (a `WATCH`, a
    /// half-read reply) is unknown, so it is dropped and the next call connects
    /// afresh.
    fn on_wire<T>(&mut self, f: impl FnOnce(&mut Wire<Stream>) -> Result<T, WireError>) -> HostResult<T> {
        let result = f(self.wire()?);
        result.map_err(|e| {
            self.wire = None;
            self.wire_error(&e)
        })
    }

    /// Sends `cmds` as one pipeline and returns one reply each; error replies
    /// come back as `Reply::Error`, not as a failure of the call.
    pub fn pipeline(&mut self, cmds: &[Cmd]) -> HostResult<Vec<Reply>> {
        self.on_wire(|w| w.pipeline(cmds))
    }

    /// Sends `cmds` as one pipeline without reading; `replies` or `exec_replies`
    /// reads what they answer (the caller may work in between, while the server does).
    /// A failure here means the pipeline was not sent whole: its last command
    /// did not reach the server.
    pub fn send(&mut self, cmds: &[Cmd]) -> HostResult<()> {
        self.on_wire(|w| w.send(cmds))
    }

    /// Sends what `encode` renders into the send buffer as one pipeline (see
    /// `send`): a plan's writes, rendered where they are sent.
    pub fn send_with(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> HostResult<()> {
        self.on_wire(|w| w.send_with(encode))
    }

    pub fn replies(&mut self, n: usize) -> HostResult<Vec<Reply>> {
        self.on_wire(|w| w.replies(n))
    }

    /// Reads the `n` replies of a sent pipeline that ends with a write (an
    /// `EXEC`, a script): the first error reply among all but the last, and the
    /// last. The write was sent whole, so a failure now leaves its outcome
    /// unknown.
    pub fn write_replies(&mut self, n: usize) -> HostResult<(Option<Reply>, Reply)> {
        let out = self.on_wire(|w| w.exec_replies(n)).map_err(unknown)?;
        // An `EXEC` that ran (not aborted, not refused), or a script that answered.
        self.written |= !matches!(out.1, Reply::Nil | Reply::Error { .. });
        Ok(out)
    }

    /// Reads the `n` replies of commands queued in a transaction not yet run
    /// (`MULTI` and the commands, no `EXEC`): the first refusal among them.
    pub fn queued_replies(&mut self, n: usize) -> HostResult<Option<Reply>> {
        let (first, last) = self.on_wire(|w| w.exec_replies(n))?;
        Ok(first.or(matches!(last, Reply::Error { .. }).then_some(last)))
    }

    pub fn one(&mut self, c: Cmd) -> HostResult<Reply> {
        Ok(self.pipeline(std::slice::from_ref(&c))?.pop().unwrap_or(Reply::Nil))
    }

    /// One command that writes (a script): its reply, or `OutcomeUnknown` when
    /// the reply is lost after the command was sent.
    pub fn one_write(&mut self, c: Cmd) -> HostResult<Reply> {
        self.send(std::slice::from_ref(&c))?;
        Ok(self.write_replies(1)?.1)
    }

    /// Commands that write, sent as one pipeline (a module's commands, each
    /// all or none by itself): their replies, or `OutcomeUnknown` when they are
    /// lost after the commands were sent.
    pub fn writes(&mut self, cmds: &[Cmd]) -> HostResult<Vec<Reply>> {
        self.send(cmds)?;
        let out = self.on_wire(|w| w.replies(cmds.len())).map_err(unknown)?;
        self.written |= out.iter().any(|r| !matches!(r, Reply::Nil | Reply::Error { .. }));
        Ok(out)
    }

    /// After a call that may write, with `emq.connect(wait_replicas=N)`: if it
    /// wrote (see `written`), waits until N replicas have acknowledged this
    /// connection's writes (`WAIT`), or fails with `NotReplicated`: the writes
    /// are applied here, but a failover now may lose them. Never a retry (the
    /// call did what it did); a user the ACL denies `WAIT` gets `Permission`. A
    /// call that wrote nothing (a beat's promote with nothing due) waits for
    /// nothing.
    pub fn replicated(&mut self, verb: &str) -> HostResult<()> {
        let wrote = std::mem::take(&mut self.written);
        let Some((n, timeout_ms)) = self.wait.filter(|_| wrote) else {
            return Ok(());
        };
        let unknown =
            |why: &str| HostError::NotReplicated(format!("{verb}: written, but whether {n} replica(s) have it is unknown ({why})"));
        if !self.is_open() {
            // A new connection's WAIT would count another client's writes: none.
            return Err(unknown("the connection closed after the write"));
        }
        match self.one(Cmd::new("WAIT").arg(n.to_string()).arg(timeout_ms.to_string())) {
            Ok(Reply::Int(k)) if u64::try_from(k).is_ok_and(|k| k >= n) => Ok(()),
            Ok(Reply::Int(k)) => Err(HostError::NotReplicated(format!(
                "{verb}: written, but {k} of {n} replica(s) acknowledged it within {timeout_ms} ms: a failover now may lose it"
            ))),
            Ok(Reply::Error { code, message }) if code == "NOPERM" => Err(HostError::Permission(format!("{verb}: {message}"))),
            Ok(Reply::Error { message, .. }) => Err(unknown(&message)),
            Ok(_) => Err(unknown("WAIT gave no count")),
            Err(e) => Err(unknown(e.message())),
        }
    }

    /// Ends a watch; if the server refuses, drops the connection instead (its
    /// watch must not abort the next call's `EXEC`).
    pub fn unwatch(&mut self) -> HostResult<()> {
        if let Reply::Error { .. } = self.one(Cmd::new("UNWATCH"))? {
            self.wire = None;
        }
        Ok(())
    }

    /// Whether it holds a live connection (a failed call drops it).
    pub fn is_open(&self) -> bool {
        self.wire.is_some()
    }

    pub fn close(&mut self) {
        self.wire = None;
    }
}

/// The socket address of a URL's connection info.
fn wire_addr(addr: &ConnectionAddr) -> Result<Addr, WireError> {
    Ok(match addr {
        ConnectionAddr::Tcp(host, port) => Addr::Tcp { host: host.clone(), port: *port },
        ConnectionAddr::TcpTls { host, port, insecure, .. } => Addr::Tls { host: host.clone(), port: *port, insecure: *insecure },
        #[cfg(unix)]
        ConnectionAddr::Unix(path) => Addr::Unix(path.clone()),
        #[allow(unreachable_patterns)]
        other => return Err(WireError::Protocol(format!("unsupported address {other:?}"))),
    })
}

/// The handshake's credentials and database, from a URL's connection info.
fn auth(info: &ConnectionInfo) -> Auth {
    let s = info.redis_settings();
    Auth { username: s.username().map(str::to_owned), password: s.password().map(str::to_owned), db: s.db() }
}

/// A lost reply to a write that was sent whole.
pub(crate) fn unknown(e: HostError) -> HostError {
    match e {
        HostError::Connection(m) | HostError::Timeout(m) | HostError::Server(m) => {
            HostError::OutcomeUnknown(format!("{m}; the write was sent, whether it ran is unknown"))
        }
        other => other,
    }
}

/// The connection's address as a URL without its password: `redis://user@host:port/db`,
/// `rediss://…`, `unix:///path?db=N`.
fn address(info: &ConnectionInfo) -> String {
    let s = info.redis_settings();
    let user = s.username().map(|u| format!("{u}@")).unwrap_or_default();
    let db = s.db();
    match info.addr() {
        ConnectionAddr::Unix(path) => {
            let mut q = vec![];
            if db != 0 {
                q.push(format!("db={db}"));
            }
            if let Some(u) = s.username() {
                q.push(format!("user={u}"));
            }
            let q = if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) };
            format!("unix://{}{q}", path.display())
        }
        addr => {
            let (scheme, host, port, insecure) = match addr {
                ConnectionAddr::Tcp(h, p) => ("redis", h, *p, false),
                ConnectionAddr::TcpTls { host, port, insecure, .. } => ("rediss", host, *port, *insecure),
                #[allow(unreachable_patterns)]
                _ => ("redis", &String::new(), 0, false),
            };
            let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
            let db = if db != 0 { format!("/{db}") } else { String::new() };
            let frag = if insecure { "#insecure" } else { "" };
            format!("{scheme}://{user}{host}:{port}{db}{frag}")
        }
    }
}

/// A URL that did not parse, without anything that may be a password: the
/// userinfo's password and `pass`/`password` query values.
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let (Some(s), Some(at)) = (out.find("://"), out.rfind('@')) {
        if at > s {
            let userinfo = &out[s + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            let kept = if userinfo.contains(':') { format!("{user}:***") } else { user.to_string() };
            out = format!("{}{kept}{}", &out[..s + 3], &out[at..]);
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPIN: Duration = Duration::from_micros(150);

    fn addr(url: &str) -> String {
        Conn::open(url, Duration::from_secs(1), None, SPIN, None).unwrap().address
    }

    #[test]
    fn a_sweep_polls_a_little_past_its_last_wait_within_bounds() {
        let us = Duration::from_micros;
        // No sweep yet, or a short one: the connection's own spin.
        assert_eq!(sweep_spin(SPIN, Duration::ZERO), SPIN);
        assert_eq!(sweep_spin(SPIN, us(40)), SPIN);
        // A call of 400 µs: the next polls through it.
        assert_eq!(sweep_spin(SPIN, us(400)), us(550));
        // Never past the cap, whatever the last call waited.
        assert_eq!(sweep_spin(SPIN, Duration::from_secs(3)), MAX_SPIN);
        // A connection that never polls never does for a sweep either.
        assert_eq!(sweep_spin(Duration::ZERO, us(400)), Duration::ZERO);
        // A connection's own spin above the cap is kept.
        assert_eq!(sweep_spin(MAX_SPIN, us(10)), MAX_SPIN);
    }

    #[test]
    fn addresses_never_hold_a_password() {
        assert_eq!(addr("redis://u:secret@127.0.0.1:6380/3"), "redis://u@127.0.0.1:6380/3");
        assert_eq!(addr("redis://:secret@localhost:6379"), "redis://localhost:6379");
        assert_eq!(addr("rediss://u:secret@h:1/0#insecure"), "rediss://u@h:1#insecure");
        assert_eq!(addr("unix:///tmp/r.sock?db=2&pass=secret&user=u"), "unix:///tmp/r.sock?db=2&user=u");
        assert_eq!(addr("redis+unix:///tmp/r.sock?pass=secret"), "unix:///tmp/r.sock");
    }

    #[test]
    fn redacted_urls() {
        assert_eq!(redact("redis://u:secret@h:1"), "redis://u:***@h:1");
        assert_eq!(redact("bad://h?pass=secret&db=1"), "bad://h?pass=***&db=1");
        assert_eq!(redact("unix:///s?password=x"), "unix:///s?password=***");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn siblings_keep_the_settings() {
        let c = Conn::open("redis://u:p@h:1/2", Duration::from_secs(3), Some(Duration::from_secs(4)), SPIN, Some((1, 500))).unwrap();
        let s = c.sibling(None);
        assert_eq!((s.wait, c.at("other", 7).wait), (Some((1, 500)), Some((1, 500))), "siblings and nodes wait for replicas too");
        assert_eq!(s.address, c.address);
        assert_eq!(s.info.redis_settings().password(), Some("p"));
        assert_eq!((s.connect_timeout, s.read_timeout), (Duration::from_secs(3), Some(Duration::from_secs(4))));
        assert_eq!(c.sibling(Some(Some(Duration::from_secs(9)))).read_timeout, Some(Duration::from_secs(9)));
    }
}
