//! emq's wire, with no Python: RESP2 commands out and replies in (`resp`), over
//! a TCP, TLS or Unix socket (`net`, the default feature `net`), and why a
//! connection is no longer usable (`error`).
//!
//! The reader is generic over any `Read + Write`, so the fuzz targets (`fuzz/`)
//! feed it bytes cut anywhere without a socket. The host (`emq-host`) reads
//! connection URLs and keeps the connection; the commands and replies are the
//! plans' (`emq_plan::Cmd`, `emq_plan::Reply`).

#![forbid(unsafe_code)]

pub mod error;
#[cfg(feature = "net")]
pub mod net;
pub mod resp;

pub use error::{WireError, WireResult};
pub use resp::{Auth, Wire};
