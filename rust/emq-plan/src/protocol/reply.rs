//! The server's replies, as the plans see them: a host converts its client's
//! values into these, so the plans stay independent of any client crate.

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    /// A double (RESP3's `,`): a score the module host read as the server keeps
    /// it, without printing it for the plan to parse back.
    Double(f64),
    Status(String),
    Array(Vec<Reply>),
    /// An error reply: its code (`WRONGTYPE`, `NOPERM`, …) and the whole message.
    Error {
        code: String,
        message: String,
    },
}

impl Reply {
    pub fn is_wrongtype(&self) -> bool {
        matches!(self, Reply::Error { code, .. } if code == "WRONGTYPE")
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(n) => Some(*n),
            Reply::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// A zset score as the server prints it (`ZRANGE … WITHSCORES`, `ZMSCORE`).
    pub fn as_score(&self) -> Option<f64> {
        match self {
            Reply::Double(d) => Some(*d),
            r => std::str::from_utf8(r.as_bytes()?).ok()?.parse::<f64>().ok(),
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            Reply::Status(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// An `HMGET`'s values: `None` for each absent field (and no values at all
    /// for anything but an array).
    pub fn fields(&self) -> Vec<Option<&[u8]>> {
        self.as_array().unwrap_or(&[]).iter().map(Reply::as_bytes).collect()
    }

    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// A key's error reply as the plans raise it: a wrong type is a layout error
/// naming the key, any other error reply a server error; anything else passes.
pub fn check_error(verb: &str, key: &[u8], r: &Reply) -> Result<()> {
    match r {
        r if r.is_wrongtype() => Err(Error::layout(verb, format!("{} has the wrong type", String::from_utf8_lossy(key)))),
        Reply::Error { message, .. } => Err(Error::server(verb, message)),
        _ => Ok(()),
    }
}
