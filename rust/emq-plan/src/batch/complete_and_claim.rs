//! COMPLETE and CLAIM as one call: a worker's group commit that claims its next
//! jobs in the same transaction ([`CompleteAndClaim`]), two conversations paired
//! by [`Both`] (any two conversations of one queue pair so). Their reads go out
//! together, each fed back its own replies; when both have planned, their
//! writes go in one `MULTI`/`EXEC`, the first's then the second's, all or none.
//! Each keeps its own guard: the call watches what either watches, so whatever
//! would abort one aborts both, and a conflict in either starts both again.
//!
//! The call is then the first followed by the second, provided the second's
//! plan does not depend on what the first writes (a flat claim, then
//! completes: the claim takes `pending` ids whose rows are `pending`, the
//! completes rows their tokens hold in `active`; see
//! `claim::Claim::flat_only`). The first is optional: without it the call is
//! the second alone.
//!
//! A short read both send (`TIME`, the type checks of the lists both write:
//! one or two arguments, byte for byte the same) goes out once, and both are
//! fed its reply: the pair reads the clock once (SPEC §4), and the server
//! answers two fewer commands.

use crate::batch::complete_many::CompleteMany;
use crate::error::{Error, Result};
use crate::jobs::claim::Claim;
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::Reply;
use crate::protocol::write::Write;

/// One of the pair: its next step (taken once sent), how many replies of the
/// step in flight are its own, and its answer once it has one.
struct Half<C: Conversation> {
    c: C,
    next: Option<Step<C::Out>>,
    sent: Option<usize>,
    out: Option<C::Out>,
}

impl<C: Conversation> Half<C> {
    fn new(c: C) -> Self {
        Half { c, next: None, sent: None, out: None }
    }

    /// Its next step is a read.
    fn reads(&self) -> bool {
        matches!(self.next, Some(Step::Read { .. }))
    }

    /// Adds its read to the combined one; remembers how many replies are its.
    fn send_read(&mut self, watch: &mut Vec<Vec<u8>>, cmds: &mut Vec<Cmd>) {
        match self.next.take() {
            Some(Step::Read { watch: w, cmds: c }) => {
                watch.extend(w);
                self.sent = Some(c.len());
                cmds.extend(c);
            }
            other => self.next = other,
        }
    }

    /// Adds its writes to the combined transaction.
    fn send_exec(&mut self, writes: &mut Vec<Write>) {
        match self.next.take() {
            Some(Step::Exec(w)) => {
                self.sent = Some(w.len());
                writes.extend(w);
            }
            other => self.next = other,
        }
    }

    /// Its next step from its replies (if it sent anything); a `Done` is kept as its answer.
    fn feed(&mut self, replies: &[Reply]) -> Result<()> {
        if self.sent.take().is_some() {
            self.next = Some(self.c.feed(replies)?);
        }
        self.settle()
    }

    fn settle(&mut self) -> Result<()> {
        match self.next.take() {
            Some(Step::Done(out)) => self.out = Some(out),
            Some(Step::Group { .. } | Step::Snapshot(_)) => {
                return Err(Error::server(self.c.verb(), "a call in groups, or of reads in a transaction, cannot be paired"))
            }
            other => self.next = other,
        }
        Ok(())
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        if self.sent.take().is_some() {
            self.out = Some(self.c.finish(exec)?);
        }
        Ok(())
    }
}

/// A worker's group commit that claims: a flat claim (optional), then the completes.
pub type CompleteAndClaim = Both<Claim, CompleteMany>;

/// Two conversations of one queue as one call: as `a`, then `b`.
pub struct Both<A: Conversation, B: Conversation> {
    a: Option<Half<A>>,
    b: Half<B>,
    /// Where the second's replies are in the read just sent, when a command of
    /// its went out once for both (`step`).
    b_from: Option<Vec<usize>>,
    /// How many commands of the read just sent are the second's own.
    b_wire: usize,
    /// A half that could not start (a step the pair cannot carry): the call's error.
    broken: Option<Error>,
}

/// The most arguments of a read sent once for both halves: `TIME`, `LLEN key`,
/// `ZCARD key` (a row's read is the one half's alone, and comparing it costs).
const SHARED_ARGS: usize = 2;

impl<A: Conversation, B: Conversation> Both<A, B> {
    /// `a` (if any) and `b` as one call: as `a`, then `b`, one after the other,
    /// in one transaction.
    pub fn new(a: Option<A>, b: B) -> Self {
        Both { a: a.map(Half::new), b: Half::new(b), b_from: None, b_wire: 0, broken: None }
    }

    /// The first conversation, if any (what it read, once the call is done).
    pub fn first(&self) -> Option<&A> {
        self.a.as_ref().map(|h| &h.c)
    }

    /// How many replies of the step just sent are the first's.
    fn split(&self) -> usize {
        self.a.as_ref().and_then(|a| a.sent).unwrap_or(0)
    }

    fn step(&mut self) -> Step<(Option<A::Out>, B::Out)> {
        let a_reads = self.a.as_ref().is_some_and(Half::reads);
        if a_reads || self.b.reads() {
            let (mut watch, mut cmds) = (vec![], vec![]);
            if let Some(a) = &mut self.a {
                a.send_read(&mut watch, &mut cmds);
            }
            let k = cmds.len();
            let mut mine = vec![];
            self.b.send_read(&mut watch, &mut mine);
            self.b_from = None;
            let shared: Vec<Option<usize>> =
                mine.iter().map(|c| if c.argc() <= SHARED_ARGS { cmds[..k].iter().position(|a| a == c) } else { None }).collect();
            if shared.iter().any(Option::is_some) {
                let mut from = Vec::with_capacity(mine.len());
                for (c, at) in mine.into_iter().zip(shared) {
                    match at {
                        Some(i) => from.push(i),
                        None => {
                            from.push(cmds.len());
                            cmds.push(c);
                        }
                    }
                }
                self.b_from = Some(from);
            } else {
                cmds.extend(mine);
            }
            self.b_wire = cmds.len() - k;
            return Step::Read { watch, cmds };
        }
        let mut writes = vec![];
        if let Some(a) = &mut self.a {
            a.send_exec(&mut writes);
        }
        self.b.send_exec(&mut writes);
        if self.b.sent.is_some() || self.a.as_ref().is_some_and(|a| a.sent.is_some()) {
            return Step::Exec(writes);
        }
        match (self.a.as_mut().map(|a| a.out.take()), self.b.out.take()) {
            (None, Some(b)) => Step::Done((None, b)),
            (Some(Some(a)), Some(b)) => Step::Done((Some(a), b)),
            // Neither reads, writes nor has an answer: not reachable from the
            // halves' own steps; reported by the next feed.
            _ => {
                self.broken = Some(Error::server(self.b.c.verb(), "a paired call stalled"));
                Step::Read { watch: vec![], cmds: vec![] }
            }
        }
    }
}

impl<A: Conversation, B: Conversation> Conversation for Both<A, B> {
    type Out = (Option<A::Out>, B::Out);

    fn verb(&self) -> &'static str {
        self.b.c.verb()
    }

    /// The second's keys, which the first's are (`start` refuses a pair of two
    /// queues: the host renders every write of the call with these).
    fn keys(&self) -> &Keys {
        self.b.c.keys()
    }

    fn start(&mut self) -> Step<Self::Out> {
        let mut started = match &self.a {
            Some(a) if a.c.keys() != self.b.c.keys() => Err(Error::server(self.verb(), "a paired call of two queues")),
            _ => Ok(()),
        };
        if let (true, Some(a)) = (started.is_ok(), &mut self.a) {
            a.next = Some(a.c.start());
            started = a.settle();
        }
        self.b.next = Some(self.b.c.start());
        if let Err(e) = started.and(self.b.settle()) {
            self.broken = Some(e);
            return Step::Read { watch: vec![], cmds: vec![] };
        }
        self.step()
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if let Some(e) = self.broken.take() {
            return Err(e);
        }
        let k = self.split();
        let wire = if self.b.sent.is_some() { self.b_wire } else { 0 };
        if replies.len() != k + wire {
            return Err(Error::server(self.verb(), "wrong number of replies"));
        }
        if let Some(a) = &mut self.a {
            a.feed(&replies[..k])?;
        }
        match self.b_from.take() {
            Some(from) => {
                let mine: Vec<Reply> = from.iter().map(|&i| replies[i].clone()).collect();
                self.b.feed(&mine)?;
            }
            None => self.b.feed(&replies[k..])?,
        }
        Ok(self.step())
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        let k = self.split();
        if exec.len() < k {
            return Err(Error::server(self.verb(), "EXEC gave too few replies"));
        }
        let a = match &mut self.a {
            Some(a) => {
                a.finish(&exec[..k])?;
                Some(a.out.take().ok_or_else(|| Error::server(a.c.verb(), "no answer"))?)
            }
            None => None,
        };
        self.b.finish(&exec[k..])?;
        let b = self.b.out.take().ok_or_else(|| Error::server(self.b.c.verb(), "no answer"))?;
        Ok((a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conversation that reads `reads` times (one command each, named
    /// `name`), then writes once, or is done after its reads when `writes` is
    /// false; it answers the replies it was fed.
    struct Script {
        name: &'static str,
        keys: Keys,
        reads: usize,
        writes: bool,
        fed: Vec<Reply>,
    }

    /// The write a script makes, twice: one that names it.
    fn mark(name: &str) -> Write {
        Write::TakeLaneHead { lane: name.as_bytes().to_vec() }
    }

    impl Script {
        fn new(name: &'static str, reads: usize, writes: bool) -> Self {
            Script { name, keys: Keys::new(b"q"), reads, writes, fed: vec![] }
        }

        fn next(&mut self) -> Step<Vec<Reply>> {
            if self.fed.len() < self.reads {
                return Step::Read { watch: vec![self.name.as_bytes().to_vec()], cmds: vec![Cmd::new(self.name)] };
            }
            if self.writes {
                Step::Exec(vec![mark(self.name), mark(self.name)])
            } else {
                Step::Done(std::mem::take(&mut self.fed))
            }
        }
    }

    impl Conversation for Script {
        type Out = Vec<Reply>;
        fn verb(&self) -> &'static str {
            self.name
        }
        fn keys(&self) -> &Keys {
            &self.keys
        }
        fn start(&mut self) -> Step<Self::Out> {
            self.next()
        }
        fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
            assert_eq!(replies.len(), 1, "{} got another's replies", self.name);
            self.fed.extend_from_slice(replies);
            Ok(self.next())
        }
        fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
            assert_eq!(exec.len(), 2, "{} got another's writes' replies", self.name);
            let mut out = std::mem::take(&mut self.fed);
            out.extend_from_slice(exec);
            Ok(out)
        }
    }

    fn int(i: i64) -> Reply {
        Reply::Int(i)
    }

    #[test]
    fn reads_go_together_and_writes_wait_for_both() {
        let mut both = Both::new(Some(Script::new("A", 1, true)), Script::new("B", 2, true));
        let Step::Read { watch, cmds } = both.start() else { panic!("a read first") };
        assert_eq!((watch.len(), cmds.len()), (2, 2));
        // A has planned; B reads again alone.
        let Ok(Step::Read { cmds, .. }) = both.feed(&[int(1), int(2)]) else { panic!("B's second read") };
        assert_eq!(cmds, vec![Cmd::new("B")]);
        let Ok(Step::Exec(writes)) = both.feed(&[int(3)]) else { panic!("one transaction") };
        assert_eq!(writes, vec![mark("A"), mark("A"), mark("B"), mark("B")]);
        let (a, b) = both.finish(&[int(10), int(11), int(20), int(21)]).expect("both answer");
        assert_eq!(a, Some(vec![int(1), int(10), int(11)]));
        assert_eq!(b, vec![int(2), int(3), int(20), int(21)]);
    }

    #[test]
    fn a_half_done_early_keeps_its_answer() {
        let mut both = Both::new(Some(Script::new("A", 1, false)), Script::new("B", 1, true));
        assert!(matches!(both.start(), Step::Read { .. }));
        let Ok(Step::Exec(writes)) = both.feed(&[int(1), int(2)]) else { panic!("B's transaction") };
        assert_eq!(writes.len(), 2);
        assert_eq!(both.finish(&[int(10), int(11)]).expect("answers"), (Some(vec![int(1)]), vec![int(2), int(10), int(11)]));
    }

    #[test]
    fn without_a_second_it_is_the_first_alone() {
        let mut both: Both<Script, Script> = Both::new(None, Script::new("B", 1, false));
        assert!(matches!(both.start(), Step::Read { .. }));
        assert_eq!(both.feed(&[int(1)]).expect("done"), Step::Done((None, vec![int(1)])));
    }

    /// Reads `cmds` once, then is done with the replies it was fed.
    struct Reads(Vec<Cmd>, Vec<Reply>);

    impl Conversation for Reads {
        type Out = Vec<Reply>;
        fn verb(&self) -> &'static str {
            "R"
        }
        fn keys(&self) -> &Keys {
            static KEYS: std::sync::OnceLock<Keys> = std::sync::OnceLock::new();
            KEYS.get_or_init(|| Keys::new(b"q"))
        }
        fn start(&mut self) -> Step<Self::Out> {
            Step::Read { watch: vec![], cmds: self.0.clone() }
        }
        fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
            assert_eq!(replies.len(), self.0.len());
            self.1 = replies.to_vec();
            Ok(Step::Done(std::mem::take(&mut self.1)))
        }
        fn finish(&mut self, _: &[Reply]) -> Result<Self::Out> {
            unreachable!()
        }
    }

    #[test]
    fn a_short_read_both_send_goes_once_and_both_get_its_reply() {
        let time = || Cmd::new("TIME");
        let llen = || Cmd::new("LLEN").arg("wake");
        let row = || Cmd::new("HMGET").arg("row").arg("f").arg("g");
        let a = Reads(vec![time(), llen(), row()], vec![]);
        let b = Reads(vec![time(), Cmd::new("GET").arg("x"), llen(), row()], vec![]);
        let mut both = Both::new(Some(a), b);
        let Step::Read { cmds, .. } = both.start() else { panic!("a read") };
        // The second's TIME and LLEN go out once; its row read (three arguments) is its own.
        assert_eq!(cmds, vec![time(), llen(), row(), Cmd::new("GET").arg("x"), row()]);
        let Ok(Step::Done((a, b))) = both.feed(&[int(1), int(2), int(3), int(4), int(5)]) else { panic!("both done") };
        assert_eq!(a, Some(vec![int(1), int(2), int(3)]));
        assert_eq!(b, vec![int(1), int(4), int(2), int(5)]);
        // Without a first, nothing is shared.
        let mut alone: Both<Reads, Reads> = Both::new(None, Reads(vec![time(), time()], vec![]));
        let Step::Read { cmds, .. } = alone.start() else { panic!("a read") };
        assert_eq!(cmds.len(), 2);
    }

    #[test]
    fn replies_of_the_wrong_count_are_an_error() {
        let mut both = Both::new(Some(Script::new("A", 1, true)), Script::new("B", 1, true));
        both.start();
        assert!(both.feed(&[int(1)]).is_err());
    }

    /// The host renders every write of the pair with one queue's keys: a pair
    /// of two queues would write the first's jobs into the second's keys.
    #[test]
    fn a_pair_of_two_queues_is_refused_before_anything_is_sent() {
        let other = Script { keys: Keys::new(b"other"), ..Script::new("A", 1, true) };
        let mut both = Both::new(Some(other), Script::new("B", 1, true));
        assert_eq!(both.start(), Step::Read { watch: vec![], cmds: vec![] });
        let e = both.feed(&[]).unwrap_err();
        assert!(e.message.contains("two queues"), "{e}");
    }
}
