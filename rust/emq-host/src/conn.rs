//! One connection to the server, owned by the core: raw pipelines of packed
//! commands, reconnecting on the next call after a wire error.

use std::time::Duration;

use emq_plan::{cmd, Cmd, Reply};
use redis::{ConnectionLike, IntoConnectionInfo, Value};

use crate::error::{HostError, HostResult};

pub struct Conn {
    client: redis::Client,
    conn: Option<redis::Connection>,
    /// The address, without credentials, for messages.
    pub address: String,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
}

impl Conn {
    pub fn open(url: &str, connect_timeout: Duration, read_timeout: Option<Duration>) -> HostResult<Self> {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"].iter().any(|s| url.starts_with(s));
        // Named in CLIENT LIST as emq (a user denied CLIENT SETINFO connects all the same).
        let info = url.into_connection_info().ok().map(|i| {
            let settings = i.redis_settings().clone().set_lib_name("emq", env!("CARGO_PKG_VERSION"));
            i.set_redis_settings(settings)
        });
        let client = info.and_then(|i| redis::Client::open(i).ok()).filter(|_| scheme_ok).ok_or_else(|| {
            HostError::Argument(format!(
                "emq.connect: url {:?} is not a redis://, rediss:// or unix:// URL",
                redact(url)
            ))
        })?;
        Ok(Conn { client, conn: None, address: redact(url), connect_timeout, read_timeout })
    }

    fn connection(&mut self) -> HostResult<&mut redis::Connection> {
        if self.conn.is_none() {
            let c = self
                .client
                .get_connection_with_timeout(self.connect_timeout)
                .map_err(|e| self.wire_error(&e))?;
            c.set_read_timeout(self.read_timeout).map_err(|e| self.wire_error(&e))?;
            c.set_write_timeout(self.read_timeout).map_err(|e| self.wire_error(&e))?;
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    fn wire_error(&self, e: &redis::RedisError) -> HostError {
        let msg = format!("emq: {}: {e}", self.address);
        if e.is_timeout() {
            HostError::Timeout(msg)
        } else if e.code() == Some("NOAUTH") || e.code() == Some("WRONGPASS") || e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() || e.is_unrecoverable_error() {
            HostError::Connection(msg)
        } else {
            HostError::Server(msg)
        }
    }

    /// Sends `cmds` as one pipeline and returns one reply each; error replies
    /// come back as `Reply::Error`, not as a failure of the call.
    pub fn pipeline(&mut self, cmds: &[Cmd]) -> HostResult<Vec<Reply>> {
        let packed = cmd::encode(cmds);
        self.pipeline_packed(&packed, cmds.len())
    }

    pub fn pipeline_packed(&mut self, packed: &[u8], count: usize) -> HostResult<Vec<Reply>> {
        let result = self.connection()?.req_packed_commands(packed, 0, count);
        match result {
            Ok(values) => Ok(values.into_iter().map(reply).collect()),
            Err(e) => {
                // The connection's state (a WATCH, a half-read reply) is unknown:
                // drop it, and the next call connects afresh.
                self.conn = None;
                Err(self.wire_error(&e))
            }
        }
    }

    /// Sends `cmds` as one pipeline and returns the last reply only (the others,
    /// `MULTI`'s `OK` and a `QUEUED` per command, are read but not kept).
    pub fn pipeline_last(&mut self, cmds: &[Cmd]) -> HostResult<Reply> {
        let packed = cmd::encode(cmds);
        let result = self.connection()?.req_packed_commands(&packed, cmds.len() - 1, 1);
        match result {
            Ok(mut values) => Ok(values.pop().map(reply).unwrap_or(Reply::Nil)),
            Err(e) => {
                self.conn = None;
                Err(self.wire_error(&e))
            }
        }
    }

    pub fn one(&mut self, c: Cmd) -> HostResult<Reply> {
        Ok(self.pipeline(std::slice::from_ref(&c))?.pop().unwrap_or(Reply::Nil))
    }

    /// Ends a watch; if the server refuses, drops the connection instead (its
    /// watch must not abort the next call's `EXEC`).
    pub fn unwatch(&mut self) -> HostResult<()> {
        if let Reply::Error { .. } = self.one(Cmd::new("UNWATCH"))? {
            self.conn = None;
        }
        Ok(())
    }

    pub fn close(&mut self) {
        self.conn = None;
    }
}

/// The URL without its password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}

pub fn reply(v: Value) -> Reply {
    match v {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::BulkString(b) => Reply::Bulk(b),
        Value::Array(items) | Value::Set(items) => Reply::Array(items.into_iter().map(reply).collect()),
        Value::SimpleString(s) => Reply::Status(s),
        Value::Okay => Reply::Status("OK".into()),
        Value::Map(kv) => Reply::Array(kv.into_iter().flat_map(|(k, v)| [reply(k), reply(v)]).collect()),
        Value::Attribute { data, .. } => reply(*data),
        Value::Double(d) => Reply::Bulk(d.to_string().into_bytes()),
        Value::Boolean(b) => Reply::Int(b as i64),
        Value::VerbatimString { text, .. } => Reply::Bulk(text.into_bytes()),
        Value::ServerError(e) => {
            let code = e.code().to_string();
            let message = match e.details() {
                Some(d) => format!("{code} {d}"),
                None => code.clone(),
            };
            Reply::Error { code, message }
        }
        other => Reply::Bulk(format!("{other:?}").into_bytes()),
    }
}
