//! Every emq call is a short conversation with the server: reads (the first
//! ones before any watch, later ones under `WATCH`), then at most one
//! `MULTI`/`EXEC` (SPEC §4, §9). A host drives any [`Conversation`] the same way
//! and starts it anew when `EXEC` aborts or what it read changed under its watch
//! (`guard` says what each one watches). Reads are commands ([`Cmd`]); the
//! writes are typed ([`Write`]), and the host renders them with the
//! conversation's keys ([`Conversation::keys`]).

use crate::error::Result;
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::reply::Reply;
use crate::protocol::write::Write;

/// What the host does next.
#[derive(Debug, PartialEq)]
pub enum Step<T> {
    /// `WATCH watch` (when non-empty), then `cmds`, pipelined. Feed back the
    /// replies of `cmds` only.
    Read {
        watch: Vec<Vec<u8>>,
        cmds: Vec<Cmd>,
    },
    /// `MULTI`, the writes, `EXEC`: the call's (last) transaction. Feed back
    /// `EXEC`'s replies to `finish`; an aborted `EXEC` asks `aborted` what next.
    Exec(Vec<Write>),
    /// `MULTI`, `cmds`, `EXEC`: reads at one instant (the counts), no watch.
    /// Feed back `EXEC`'s replies to `finish`.
    Snapshot(Vec<Cmd>),
    /// A call applied in groups (SPEC §9): `MULTI`, `writes`, `EXEC` for one
    /// group, then `WATCH watch` and `cmds` for the next, pipelined, so the
    /// server reads for the next group right after it commits this one. Feed
    /// `EXEC`'s replies to `committed` (`None`: it aborted), then the reads'
    /// replies to `feed` (after an abort: to nothing; `aborted` says what next).
    Group {
        writes: Vec<Write>,
        watch: Vec<Vec<u8>>,
        cmds: Vec<Cmd>,
    },
    Done(T),
}

pub trait Conversation {
    type Out;
    fn verb(&self) -> &'static str;
    /// The queue's keys: the prefix the host renders the writes with.
    fn keys(&self) -> &Keys;
    fn start(&mut self) -> Step<Self::Out>;
    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>>;
    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out>;

    /// Called by the host once a `Read` (or `Group`) step is sent and before its
    /// replies are read, while the server works on them: a conversation may get
    /// ready for the replies it expects (a sweep builds the plan for the likely
    /// read). It must not change what `feed` returns for any replies.
    fn speculate(&mut self) {}

    /// After `speculate`: the writes of the `Step::Exec` the conversation
    /// expects next, when it has guessed that step whole. A host may queue
    /// them (`MULTI` and the writes, without `EXEC`) behind the reads just sent,
    /// so the server queues them while the host reads the replies; it then sends
    /// `EXEC` only if `exec_as_expected` says the `Step::Exec` that came is this
    /// one, and `DISCARD` otherwise (which ends the watch too: the call starts
    /// again).
    fn expected_exec(&self) -> Option<&[Write]> {
        None
    }

    /// Whether the `Step::Exec` just returned has exactly the writes
    /// `expected_exec` gave.
    fn exec_as_expected(&self) -> bool {
        false
    }

    /// A group's `EXEC` ran (`Some`, its replies) or was aborted by the guard
    /// (`None`). Only conversations that send `Step::Group` get this.
    fn committed(&mut self, _exec: Option<&[Reply]>) -> Result<()> {
        Err(crate::error::Error::server(self.verb(), "a group was committed in a call of one transaction"))
    }

    /// An `EXEC` was aborted by the guard: `None` starts the call again (a new
    /// clock reading; nothing was written), `Some(step)` goes on with this call
    /// (a call applied in groups retries the aborted group). The host has ended
    /// any watch before it takes the step.
    fn aborted(&mut self) -> Option<Step<Self::Out>> {
        None
    }

    /// The call ends early, with nothing of its current group written (a cluster
    /// moved its slot): what its committed groups took, if any. Such a call is
    /// then what consecutive calls of those groups would have been.
    fn applied_so_far(&mut self) -> Option<Self::Out> {
        None
    }

    /// Whether the error `reply` to the `index`th read of the last `Read` step
    /// is the conversation's to answer (a refusal it can read around) rather
    /// than the host's to raise. `WRONGTYPE` always goes to the conversation.
    fn reads_error(&self, _index: usize, _reply: &Reply) -> bool {
        false
    }
}
