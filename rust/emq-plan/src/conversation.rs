//! Every emq call is a short conversation with the server: reads (the first
//! ones before any watch, later ones under `WATCH`), then at most one
//! `MULTI`/`EXEC` (SPEC §4, §9). A host drives any [`Conversation`] the same way
//! and starts it anew when `EXEC` aborts or what it read changed under its watch
//! (`guard` says what each one watches).

use crate::cmd::Cmd;
use crate::error::Result;
use crate::reply::Reply;

/// What the host does next.
#[derive(Debug, PartialEq)]
pub enum Step<T> {
    /// `WATCH watch` (when non-empty), then `cmds`, pipelined. Feed back the
    /// replies of `cmds` only.
    Read {
        watch: Vec<Vec<u8>>,
        cmds: Vec<Cmd>,
    },
    /// `WATCH` these keys now, without waiting for its reply, then feed back no
    /// replies: the conversation builds its next reads while the server works
    /// on the watch. The host checks the watch's reply before it feeds the next
    /// read's replies (or before `EXEC`).
    Watch(Vec<Vec<u8>>),
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

    /// Called by the host once a `Read` step is sent and before its replies are
    /// read, while the server works on them: a conversation may get ready for
    /// the replies it expects (a sweep builds the plan for the likely read). It
    /// must not change what `feed` returns for any replies.
    fn speculate(&mut self) {}
}
