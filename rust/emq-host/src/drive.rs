//! Driving a conversation (`emq_plan::protocol::conversation`): reads pipelined, `WATCH`
//! before the guarded reads, the plan in one `MULTI`/`EXEC`, and a new call
//! (`emq_plan::backoff`, jittered) when `EXEC` aborts or the reads changed under
//! the watch (SPEC §9). The plan's typed writes are rendered straight into the
//! connection's send buffer (`emq_plan::protocol::write`).

use std::time::{Duration, Instant};

use emq_plan::backoff::backoff;
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write;
use emq_plan::{Cmd, Keys, Reply, Write};

use crate::conn::{unknown, Conn};
use crate::error::{ForCall, HostError, HostResult};
use crate::jitter::Jitter;

/// How many times a call starts again before it gives up with a contention error.
pub const MAX_ATTEMPTS: u32 = 32;
/// The pause before the second attempt (µs); each attempt doubles it.
const RETRY_BASE_US: u64 = 100;
/// The longest pause between attempts (µs).
const RETRY_CAP_US: u64 = 20_000;

/// Runs the conversations `make` gives until one commits (each attempt a new
/// call, with its own clock reading). `done` sees the one that committed.
/// Every error names `call`, the call the user made (`Queue.add`), not the
/// conversation's wire verb.
pub fn drive<C: Conversation>(
    conn: &mut Conn,
    call: &str,
    make: impl FnMut() -> HostResult<C>,
    mut done: impl FnMut(&C),
) -> HostResult<C::Out> {
    drive_timed(conn, call, make, |c, _| done(c))
}

/// `drive`, where `done` also gets the moment the committed call's first
/// replies came back: within a reply's flight after its clock reading, for a
/// caller that waits for a time the call saw.
pub fn drive_timed<C: Conversation>(
    conn: &mut Conn,
    call: &str,
    mut make: impl FnMut() -> HostResult<C>,
    mut done: impl FnMut(&C, Instant),
) -> HostResult<C::Out> {
    let mut rng = Jitter::new();
    for attempt in 0..MAX_ATTEMPTS {
        let mut c = make()?;
        let mut replied = None;
        if let Some(out) = attempt_once(conn, call, &mut c, &mut replied)? {
            done(&c, replied.unwrap_or_else(Instant::now));
            return Ok(out);
        }
        let pause_us = backoff(attempt, RETRY_BASE_US, RETRY_CAP_US, rng.unit());
        std::thread::sleep(Duration::try_from_secs_f64(pause_us / 1e6).unwrap_or_default());
    }
    Err(HostError::Contention(format!(
        "{call}: gave up after {MAX_ATTEMPTS} attempts: other clients kept changing what it read; nothing was written"
    )))
}

/// One call: `Some(out)`, or `None` when it must start again.
fn attempt_once<C: Conversation>(conn: &mut Conn, call: &str, c: &mut C, replied: &mut Option<Instant>) -> HostResult<Option<C::Out>> {
    let mut state =
        Call { call, watching: false, committed: false, aborts: 0, rng: Jitter::new(), queued: false, exec_sent: false, replied: None };
    let result = state.run(conn, c);
    *replied = state.replied;
    match result {
        // After a group has committed, a broken connection no longer means that
        // nothing was written: say what is known.
        Err(HostError::Connection(m) | HostError::Timeout(m)) if state.committed => {
            Err(HostError::OutcomeUnknown(format!("{m}; the call's first groups were applied, the rest is unknown")))
        }
        // A redirect (the slot moved) comes before anything of the current group is
        // written: the call ends with the groups it applied, and their members are
        // its reply (the rest are left for the next call). Started again whole on
        // the new node, it would leave them out of its reply.
        Err(e @ (HostError::Redirect(_) | HostError::Unavailable(_))) if state.committed => match c.applied_so_far() {
            Some(out) => Ok(Some(out)),
            None => Err(e),
        },
        other => other,
    }
}

/// The state of one call on the connection.
struct Call<'a> {
    /// The call the user made, which every error names.
    call: &'a str,
    watching: bool,
    /// Whether a group of this call has committed.
    committed: bool,
    /// Aborted `EXEC`s this call has taken up again (`Conversation::aborted`).
    aborts: u32,
    rng: Jitter,
    /// The expected transaction is queued (`MULTI` and its writes, not yet
    /// `EXEC`): see `Conversation::expected_exec`.
    queued: bool,
    /// Its `EXEC` is sent too: it went as soon as the read was found to be the
    /// one expected, before the replies to the queued writes were read.
    exec_sent: bool,
    /// When the call's first replies came back (see `drive_timed`).
    replied: Option<Instant>,
}

impl Call<'_> {
    fn run<C: Conversation>(&mut self, conn: &mut Conn, c: &mut C) -> HostResult<Option<C::Out>> {
        let mut step = c.start();
        // What the last step sent and got back, freed while the server works on the
        // next one rather than before it is sent.
        let mut spent: (Vec<Cmd>, Vec<Reply>) = (vec![], vec![]);
        loop {
            let result = match step {
                Step::Done(out) => {
                    end_watch(conn, self.watching)?;
                    return Ok(Some(out));
                }
                Step::Read { watch, cmds } => {
                    let mut all = Vec::with_capacity(cmds.len() + 1);
                    if !watch.is_empty() {
                        all.push(Cmd::new("WATCH").args(&watch));
                        self.watching = true;
                    }
                    let skip = all.len();
                    all.extend(cmds);
                    conn.send(&all)?;
                    let n = all.len();
                    drop(std::mem::replace(&mut spent, (all, vec![])));
                    c.speculate();
                    // The transaction the conversation expects, queued behind the
                    // reads so the server queues it while the replies are read.
                    let expected = c.expected_exec();
                    let ahead = match expected {
                        Some(writes) if conn.queue_ahead => {
                            conn.send_with(|out| {
                                Cmd::new("MULTI").encode_into(out);
                                write::encode_into(c.keys(), writes, out);
                            })?;
                            Some(writes.len())
                        }
                        _ => None,
                    };
                    let expected = expected.is_some();
                    let replies = conn.replies(n)?;
                    self.replied.get_or_insert_with(Instant::now);
                    // Fed while the server still queues: the plan is checked meanwhile.
                    let fed = fed(self.call, c, &replies, skip);
                    let as_expected = matches!(fed, Ok(Step::Exec(_))) && c.exec_as_expected();
                    // The read is the one expected: `EXEC` goes now, so the server runs the
                    // transaction as soon as it has queued it, not a round trip later. A
                    // command it refused to queue makes it refuse the `EXEC` too.
                    if ahead.is_some() && as_expected {
                        self.exec_sent = true;
                        conn.send(&[Cmd::new("EXEC")]).map_err(unknown)?;
                    }
                    // `MULTI` and each queued command: the first refusal, if any (with
                    // `EXEC` sent, a connection lost now leaves the outcome unknown).
                    let refused = match ahead {
                        Some(k) => conn.queued_replies(k + 1).map_err(|e| if self.exec_sent { unknown(e) } else { e })?,
                        None => None,
                    };
                    spent.1 = replies;
                    match ahead {
                        Some(_) => self.after_queued(conn, fed, as_expected, refused),
                        None => {
                            if expected && matches!(fed, Ok(Step::Exec(_))) {
                                conn.queue_ahead = as_expected;
                            }
                            fed
                        }
                    }
                }
                Step::Exec(writes) => {
                    // Queued ahead: its writes are the server's already, and its `EXEC` may be too.
                    let n = match (std::mem::take(&mut self.queued), std::mem::take(&mut self.exec_sent)) {
                        (true, true) => 1,
                        (true, false) => {
                            conn.send(&[Cmd::new("EXEC")])?;
                            1
                        }
                        (false, _) => {
                            conn.send_with(|out| transaction(c.keys(), &writes, out))?;
                            writes.len() + 2
                        }
                    };
                    drop(writes);
                    drop(std::mem::take(&mut spent));
                    self.watching = false; // EXEC ends every watch, run or not
                    match Self::exec_reply(conn, self.call, n)? {
                        Some(exec) => return Ok(Some(c.finish(&exec).for_call(self.call)?)),
                        None => match self.take_up(c) {
                            Some(next) => Ok(next),
                            None => return Ok(None),
                        },
                    }
                }
                Step::Snapshot(cmds) => {
                    // Reads in one transaction: no watch, so nothing aborts it.
                    let mut all = Vec::with_capacity(cmds.len() + 2);
                    all.push(Cmd::new("MULTI"));
                    all.extend(cmds);
                    all.push(Cmd::new("EXEC"));
                    conn.send(&all)?;
                    let n = all.len();
                    drop(all);
                    drop(std::mem::take(&mut spent));
                    self.watching = false;
                    match Self::exec_reply(conn, c.verb(), n)? {
                        Some(exec) => return Ok(Some(c.finish(&exec).for_call(self.call)?)),
                        None => return Ok(None),
                    }
                }
                Step::Group { writes, watch, cmds } => {
                    let n_tx = writes.len() + 2;
                    let mut reads = Vec::with_capacity(cmds.len() + 1);
                    if !watch.is_empty() {
                        reads.push(Cmd::new("WATCH").args(&watch));
                    }
                    let skip = reads.len();
                    reads.extend(cmds);
                    conn.send_with(|out| {
                        transaction(c.keys(), &writes, out);
                        emq_plan::protocol::cmd::encode_into(&reads, out);
                    })?;
                    let n_reads = reads.len();
                    drop(writes);
                    drop(std::mem::replace(&mut spent, (reads, vec![])));
                    self.watching = skip > 0;
                    c.speculate();
                    let exec = Self::exec_reply(conn, self.call, n_tx);
                    // The next group's watch and reads went out behind the EXEC: their
                    // replies are read whatever EXEC gave (a refusal, a redirect), so the
                    // connection's replies stay in step with its commands.
                    let replies = if conn.is_open() { conn.replies(n_reads) } else { Ok(vec![]) };
                    self.watching &= conn.is_open();
                    match (exec, replies) {
                        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                        (Ok(Some(exec)), Ok(replies)) => {
                            self.committed = true;
                            match c.committed(Some(&exec)).for_call(self.call) {
                                Err(e) => Err(e),
                                Ok(()) => {
                                    let fed = fed(self.call, c, &replies, skip);
                                    spent.1 = replies;
                                    fed
                                }
                            }
                        }
                        (Ok(None), Ok(_)) => {
                            c.committed(None).for_call(self.call)?;
                            if self.watching {
                                conn.unwatch()?;
                                self.watching = false;
                            }
                            match self.take_up(c) {
                                Some(next) => Ok(next),
                                None => return Ok(None),
                            }
                        }
                    }
                }
            };
            match result {
                Ok(next) => step = next,
                Err(e) => {
                    end_watch(conn, self.watching)?;
                    return match e {
                        HostError::Contention(_) => Ok(None),
                        e => {
                            if e.drops_connection() {
                                conn.close();
                            }
                            Err(e)
                        }
                    };
                }
            }
        }
    }

    /// The step after reads whose expected transaction was queued behind them
    /// (`expected`: `fed` is that transaction's `Step::Exec`, and its `EXEC` was
    /// sent): that `EXEC`, when the server queued it all; else the queue ends,
    /// by `DISCARD` or by the server's refusal of the `EXEC` sent (either ends the
    /// watch too), and the call goes on without it, or starts again when it
    /// needed the watch.
    fn after_queued<O>(
        &mut self,
        conn: &mut Conn,
        fed: HostResult<Step<O>>,
        expected: bool,
        refused: Option<Reply>,
    ) -> HostResult<Step<O>> {
        if expected && refused.is_none() {
            self.queued = true;
            return fed;
        }
        conn.queue_ahead = expected;
        if std::mem::take(&mut self.exec_sent) {
            // The server refused a queued command, and so the `EXEC` sent ahead
            // (`EXECABORT`: nothing ran, and the watch ended).
            conn.write_replies(1)?;
        } else if let Reply::Error { .. } = conn.one(Cmd::new("DISCARD"))? {
            conn.close();
        }
        self.watching = false;
        let verb = self.call;
        match (fed, refused) {
            // The transaction was its own, and the server refused part of it.
            (Ok(_), Some(r)) if expected => Err(refusal(verb, &r)),
            (Ok(Step::Done(out)), _) => Ok(Step::Done(out)),
            (Ok(_), _) => Err(HostError::Contention(format!("{verb}: the read was not the one expected; its watch ended"))),
            (Err(e), _) => Err(e),
        }
    }

    /// Reads a sent transaction's replies: `Some(EXEC's replies)`, or `None`
    /// when the guard aborted it. A command refused while queued (READONLY, OOM,
    /// NOPERM, MOVED, …) makes EXEC discard the transaction: that command's
    /// error is the call's, not EXECABORT's.
    fn exec_reply(conn: &mut Conn, verb: &str, n: usize) -> HostResult<Option<Vec<Reply>>> {
        let out = match conn.write_replies(n)? {
            (Some(queued), _) => Err(refusal(verb, &queued)),
            (None, Reply::Nil) => Ok(None),
            // A wrong type is the conversation's to name (a read in a
            // transaction, as `counts` makes); any other error, its class.
            (None, Reply::Array(exec)) => match exec.iter().find(|r| is_error(r) && !r.is_wrongtype()) {
                Some(r) => Err(refusal(verb, r)),
                None => Ok(Some(exec)),
            },
            (None, r @ Reply::Error { .. }) => Err(refusal(verb, &r)),
            _ => Err(HostError::Server(format!("{verb}: EXEC gave no reply"))),
        };
        if out.as_ref().is_err_and(HostError::drops_connection) {
            conn.close();
        }
        out
    }

    /// An aborted `EXEC`: the conversation's next step, after a pause, or
    /// `None` to start the call again.
    fn take_up<C: Conversation>(&mut self, c: &mut C) -> Option<Step<C::Out>> {
        let next = c.aborted()?;
        let pause_us = backoff(self.aborts.min(MAX_ATTEMPTS), RETRY_BASE_US, RETRY_CAP_US, self.rng.unit());
        std::thread::sleep(Duration::try_from_secs_f64(pause_us / 1e6).unwrap_or_default());
        self.aborts += 1;
        Some(next)
    }
}

/// `MULTI`, `writes`, `EXEC`, rendered into `out` (`writes.len() + 2` replies).
fn transaction(keys: &Keys, writes: &[Write], out: &mut Vec<u8>) {
    Cmd::new("MULTI").encode_into(out);
    write::encode_into(keys, writes, out);
    Cmd::new("EXEC").encode_into(out);
}

/// Feeds a read's replies (after `skip` replies to watches): an error reply
/// other than a wrong type (which the plan names as a layout error) is what
/// the call fails with, by its class.
fn fed<C: Conversation>(call: &str, c: &mut C, replies: &[Reply], skip: usize) -> HostResult<Step<C::Out>> {
    let refused = first_error(&replies[..skip]).or_else(|| {
        replies[skip..].iter().enumerate().find(|(i, r)| is_error(r) && !r.is_wrongtype() && !c.reads_error(*i, r)).map(|(_, r)| r)
    });
    match refused {
        Some(r) => Err(refusal(call, r)),
        None => c.feed(&replies[skip..]).for_call(call),
    }
}

/// Ends a call that does not reach `EXEC`.
fn end_watch(conn: &mut Conn, watching: bool) -> HostResult<()> {
    if watching {
        conn.unwatch()?;
    }
    Ok(())
}

fn is_error(r: &Reply) -> bool {
    matches!(r, Reply::Error { .. })
}

/// The first error reply among `replies`.
fn first_error(replies: &[Reply]) -> Option<&Reply> {
    replies.iter().find(|r| is_error(r))
}

/// The error a refusal by the server stands for, by its code.
fn refusal(verb: &str, r: &Reply) -> HostError {
    match r {
        Reply::Error { code, message } => HostError::classify(verb, code, message),
        other => HostError::Server(format!("{verb}: {other:?}")),
    }
}
