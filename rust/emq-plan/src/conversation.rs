//! Every emq call is a short conversation with the server: reads (the first
//! ones before any watch, later ones under `WATCH`), then at most one
//! `MULTI`/`EXEC`. A host drives any [`Conversation`] the same way and starts it
//! anew when `EXEC` aborts or what it read changed under its watch.

use crate::error::Result;
use crate::{Cmd, Reply};

/// What the host does next.
#[derive(Debug, PartialEq)]
pub enum Step<T> {
    /// `WATCH watch` (when non-empty), then `cmds`, pipelined. Feed back the
    /// replies of `cmds` only.
    Read { watch: Vec<Vec<u8>>, cmds: Vec<Cmd> },
    /// `MULTI`, `cmds`, `EXEC`. Feed back `EXEC`'s replies (an aborted `EXEC`
    /// starts the call again).
    Exec(Vec<Cmd>),
    Done(T),
}

pub trait Conversation {
    type Out;
    fn verb(&self) -> &'static str;
    fn start(&mut self) -> Step<Self::Out>;
    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>>;
    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out>;
}
