//! One connection to the server, owned by the core: raw pipelines of packed
//! commands, reconnecting on the next call after a wire error.

use std::time::Duration;

use emq_plan::{Cmd, Reply};
use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::{HostError, HostResult};
use crate::resp::{Wire, WireError};

pub struct Conn {
    info: ConnectionInfo,
    wire: Option<Wire>,
    /// The address, without credentials, for messages.
    pub address: String,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
}

impl Conn {
    pub fn open(url: &str, connect_timeout: Duration, read_timeout: Option<Duration>) -> HostResult<Self> {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"].iter().any(|s| url.starts_with(s));
        let info = url.into_connection_info().ok().filter(|_| scheme_ok).ok_or_else(|| {
            HostError::Argument(format!(
                "emq.connect: url {:?} is not a redis://, rediss:// or unix:// URL",
                redact(url)
            ))
        })?;
        Ok(Conn { info, wire: None, address: redact(url), connect_timeout, read_timeout })
    }

    fn wire(&mut self) -> HostResult<&mut Wire> {
        if self.wire.is_none() {
            let w = Wire::connect(&self.info, self.connect_timeout, self.read_timeout).map_err(|e| self.wire_error(&e))?;
            self.wire = Some(w);
        }
        Ok(self.wire.as_mut().expect("just connected"))
    }

    fn wire_error(&self, e: &WireError) -> HostError {
        let msg = format!("emq: {}: {e}", self.address);
        match e {
            WireError::Timeout => HostError::Timeout(msg),
            WireError::Io(_) | WireError::Refused(..) => HostError::Connection(msg),
            WireError::Protocol(_) => HostError::Server(msg),
        }
    }

    /// Runs `f` on the wire; on any failure the connection's state (a `WATCH`, a
    /// half-read reply) is unknown, so it is dropped and the next call connects
    /// afresh.
    fn on_wire<T>(&mut self, f: impl FnOnce(&mut Wire) -> Result<T, WireError>) -> HostResult<T> {
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

    /// Sends `cmds` as one pipeline without reading; `replies` or `last_reply`
    /// reads what they answer (the caller may work in between, while the server does).
    pub fn send(&mut self, cmds: &[Cmd]) -> HostResult<()> {
        self.on_wire(|w| w.send(cmds))
    }

    pub fn replies(&mut self, n: usize) -> HostResult<Vec<Reply>> {
        self.on_wire(|w| w.replies(n))
    }

    pub fn last_reply(&mut self, n: usize) -> HostResult<Reply> {
        self.on_wire(|w| w.last_reply(n))
    }

    pub fn one(&mut self, c: Cmd) -> HostResult<Reply> {
        Ok(self.pipeline(std::slice::from_ref(&c))?.pop().unwrap_or(Reply::Nil))
    }

    /// Ends a watch; if the server refuses, drops the connection instead (its
    /// watch must not abort the next call's `EXEC`).
    pub fn unwatch(&mut self) -> HostResult<()> {
        if let Reply::Error { .. } = self.one(Cmd::new("UNWATCH"))? {
            self.wire = None;
        }
        Ok(())
    }

    pub fn close(&mut self) {
        self.wire = None;
    }
}

/// The URL without its password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}
