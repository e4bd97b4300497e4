//! What a plan refuses with. Every message names the verb, then what is wrong.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A key or argument list that does not have the queue's layout, or a key of the
    /// wrong type (SPEC §5 steps 4 and 5).
    Layout,
    /// An argument of the right place with a bad value (`batch`, `max_stalled`, …).
    Argument,
    /// What was read before the guard changed under it: the call starts again.
    Conflict,
    /// A job id that is already taken.
    Duplicate,
    /// Any other error reply from the server (permissions, OOM, …).
    Server,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn layout(verb: &str, what: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Layout, message: format!("{verb}: layout: {what}") }
    }

    pub fn argument(verb: &str, name: &str, what: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Argument, message: format!("{verb}: {name} {what}") }
    }

    pub fn conflict(verb: &str, what: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Conflict, message: format!("{verb}: conflict: {what}") }
    }

    pub fn duplicate(verb: &str, what: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Duplicate, message: format!("{verb}: {what}") }
    }

    pub fn server(verb: &str, what: impl fmt::Display) -> Self {
        Error { kind: ErrorKind::Server, message: format!("{verb}: {what}") }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
