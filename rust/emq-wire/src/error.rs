//! Why a connection is no longer usable: a socket error, a timeout, bytes that
//! are not RESP2, or a refused handshake.

use std::io;

#[derive(Debug)]
pub enum WireError {
    Io(io::Error),
    Timeout,
    /// The server sent something that is not RESP2 (or that no server sends: a
    /// reply nested too deep, a string too long).
    Protocol(String),
    /// The handshake was refused (`AUTH`, `SELECT`, or a `PING` that wants
    /// credentials): the error reply's code and message.
    Refused {
        code: String,
        message: String,
    },
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => WireError::Timeout,
            _ => WireError::Io(e),
        }
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Timeout => write!(f, "no reply within the read timeout"),
            WireError::Protocol(what) => write!(f, "protocol error: {what}"),
            WireError::Refused { message, .. } => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for WireError {}

pub type WireResult<T> = Result<T, WireError>;
