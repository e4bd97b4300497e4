//! What a plan refuses with. Every message names a verb, then what is wrong:
//! the plan's own (its wire verb, `EMQ.ADD`, as a module command sent by
//! `redis-cli` answers), or the call the user made, once a host names it
//! (`Error::for_call("Queue.add")`).

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

/// A refusal: its kind, and its message, `"{verb}: {detail}"`, whose two parts
/// `verb` and `detail` give apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// Where the verb ends in `message` (the `": "` after it follows).
    verb_len: usize,
}

impl Error {
    fn new(kind: ErrorKind, verb: &str, detail: fmt::Arguments<'_>) -> Self {
        Error { kind, message: format!("{verb}: {detail}"), verb_len: verb.len() }
    }

    pub fn layout(verb: &str, what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Layout, verb, format_args!("layout: {what}"))
    }

    pub fn argument(verb: &str, name: &str, what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Argument, verb, format_args!("{name} {what}"))
    }

    pub fn conflict(verb: &str, what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Conflict, verb, format_args!("conflict: {what}"))
    }

    pub fn duplicate(verb: &str, what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Duplicate, verb, format_args!("{what}"))
    }

    pub fn server(verb: &str, what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Server, verb, format_args!("{what}"))
    }

    /// The verb the message names.
    pub fn verb(&self) -> &str {
        &self.message[..self.verb_len]
    }

    /// What is wrong, without the verb.
    pub fn detail(&self) -> &str {
        &self.message[self.verb_len + 2..]
    }

    /// The same refusal, naming `call` (the call the user made, `Queue.add`)
    /// instead of the plan's verb.
    #[must_use]
    pub fn for_call(self, call: &str) -> Self {
        Error::new(self.kind, call, format_args!("{}", self.detail()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_names_the_call_the_user_made() {
        let e = Error::argument("EMQ.ADD", "delay_ms", "must be an integer");
        assert_eq!(
            (e.verb(), e.detail(), e.message.as_str()),
            ("EMQ.ADD", "delay_ms must be an integer", "EMQ.ADD: delay_ms must be an integer")
        );
        let e = e.for_call("Queue.add");
        assert_eq!((e.kind, e.verb(), e.message.as_str()), (ErrorKind::Argument, "Queue.add", "Queue.add: delay_ms must be an integer"));
        let l = Error::layout("EMQ.PROMOTE", "key k is a string").for_call("emq.promote");
        assert_eq!((l.kind, l.to_string()), (ErrorKind::Layout, "emq.promote: layout: key k is a string".to_string()));
    }
}
