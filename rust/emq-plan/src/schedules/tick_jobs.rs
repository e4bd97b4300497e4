//! The jobs of schedule ticks, added as ADD adds a job with a given id due at
//! the tick (SPEC §7): the same row, the same lists, offers and wake, so a
//! tick's job is an ordinary job. Unlike ADD, an id that exists is skipped, not
//! refused: it is the same tick's job, enqueued by another host (exactly once).
//!
//! Shared by TIMERS (`crate::sweep::timers`) and RUN NOW (`super::ops`): the
//! reads a plan makes under its watch (the rows of the ids, the lanes' control
//! and lengths, the lists' types), then the writes.

use super::record::TickJob;
use crate::error::{Error, Result};
use crate::jobs::add::{digest_hex, NewJob, When};
use crate::lanes::offer::{LaneCtl, Offers, CTL_FIELDS};
use crate::names::Keys;
use crate::numbers::MAX_MS;
use crate::protocol::cmd::Cmd;
use crate::protocol::reply::Reply;
use crate::protocol::write::{Members, NewRow, RowFields, Write};

/// One tick's job: its id (`tick_id`), its tick (the job's due time) and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickAdd {
    pub id: Vec<u8>,
    pub tick: i64,
    pub job: TickJob,
}

/// The ticks' jobs of one call.
#[derive(Clone, Debug, Default)]
pub struct TickAdds {
    adds: Vec<TickAdd>,
    /// The lanes of the jobs, in order of first job.
    lanes: Vec<Vec<u8>>,
}

/// What the writes did: the ids added, and how many existed (skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Added {
    pub ids: Vec<Vec<u8>>,
    pub skipped: usize,
}

impl TickAdds {
    pub fn new(adds: Vec<TickAdd>) -> Self {
        let mut lanes: Vec<Vec<u8>> = vec![];
        for a in &adds {
            if let Some(l) = &a.job.lane {
                if !lanes.contains(l) {
                    lanes.push(l.clone());
                }
            }
        }
        TickAdds { adds, lanes }
    }

    pub fn is_empty(&self) -> bool {
        self.adds.is_empty()
    }

    /// What the guard watches: each id's row (another host adding the same
    /// tick's job writes it) and each lane's control.
    pub fn watch(&self, keys: &Keys) -> Vec<Vec<u8>> {
        let mut w: Vec<Vec<u8>> = self.adds.iter().map(|a| keys.job(&a.id)).collect();
        w.extend(self.lanes.iter().map(|l| keys.lanectl(l)));
        w
    }

    /// `EXISTS` of each row, each lane's control and length, and the lengths
    /// of `pending`, `ring` and `wake` (their types).
    pub fn reads(&self, keys: &Keys) -> Vec<Cmd> {
        let mut cmds: Vec<Cmd> = self.adds.iter().map(|a| Cmd::new("EXISTS").arg(keys.job(&a.id))).collect();
        for l in &self.lanes {
            cmds.push(Cmd::new("HMGET").arg(keys.lanectl(l)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(keys.lane(l)));
        }
        cmds.extend([keys.pending(), keys.ring(), keys.wake()].map(|k| Cmd::new("LLEN").arg(k)));
        cmds
    }

    pub fn reply_count(&self) -> usize {
        self.adds.len() + 2 * self.lanes.len() + 3
    }

    /// The writes of the jobs whose rows do not exist, in ADD's order (rows,
    /// pushes, offers and the wake, the trim of `wake`), from `reads`' replies.
    pub fn plan(&self, verb: &str, keys: &Keys, now: i64, replies: &[Reply], w: &mut Vec<Write>) -> Result<Added> {
        if replies.len() != self.reply_count() {
            return Err(Error::server(verb, "wrong number of replies"));
        }
        let (exists, rest) = replies.split_at(self.adds.len());
        let (lanes, lists) = rest.split_at(2 * self.lanes.len());
        for r in exists {
            if let Reply::Error { message, .. } = r {
                return Err(Error::server(verb, message));
            }
        }
        let mut ctls = Vec::with_capacity(self.lanes.len());
        for (l, pair) in self.lanes.iter().zip(lanes.chunks_exact(2)) {
            if pair[0].is_wrongtype() || pair[1].is_wrongtype() {
                return Err(Error::layout(verb, format!("{} or its control has the wrong type", String::from_utf8_lossy(&keys.lane(l)))));
            }
            ctls.push((LaneCtl::from_reply(&pair[0]), pair[1].as_int().unwrap_or(0)));
        }
        if lists.iter().any(Reply::is_wrongtype) {
            return Err(Error::layout(verb, "pending, ring or wake has the wrong type"));
        }
        let mut added = Added::default();
        let mut flat: Vec<&[u8]> = vec![];
        let mut by_lane: Vec<(&[u8], Vec<&[u8]>)> = vec![];
        for (a, e) in self.adds.iter().zip(exists) {
            if e.as_int() != Some(0) {
                added.skipped += 1;
                continue;
            }
            let due = a.tick.min(MAX_MS);
            let j = NewJob {
                priority: 0,
                id: Some(a.id.clone()),
                data: a.job.data.clone(),
                when: When::At(a.tick),
                lane: a.job.lane.clone(),
                max_attempts: a.job.max_attempts,
                keep: None,
                unique: None,
            };
            let new = NewRow {
                priority: 0,
                ready: due <= now,
                digest: digest_hex(&j),
                data: j.data,
                due,
                max_attempts: j.max_attempts,
                created: now,
                lane: j.lane,
                keep: None,
                unique: None,
                wait: None,
            };
            w.push(Write::SetRow { id: a.id.clone(), fields: RowFields::New(Box::new(new)) });
            match &a.job.lane {
                None => flat.push(&a.id),
                Some(l) => match by_lane.iter_mut().find(|(name, _)| name == l) {
                    Some((_, ids)) => ids.push(&a.id),
                    None => by_lane.push((l, vec![&a.id])),
                },
            }
            added.ids.push(a.id.clone());
        }
        if added.ids.is_empty() {
            return Ok(added);
        }
        let mut offers = Offers::default();
        for (l, ids) in &by_lane {
            let i = self.lanes.iter().position(|x| x == l).expect("every lane of a job was read");
            let (ctl, len) = &ctls[i];
            offers.offer(l, len.saturating_add(ids.len() as i64), ctl);
        }
        if !flat.is_empty() {
            w.push(Write::MakeReady { lane: None, ids: Members::of(&flat) });
            offers.wake_flat();
        }
        for (l, ids) in &by_lane {
            w.push(Write::MakeReady { lane: Some(l.to_vec()), ids: Members::of(ids) });
        }
        offers.writes(w);
        if !by_lane.is_empty() {
            let used: Vec<&[u8]> = by_lane.iter().map(|(l, _)| *l).collect();
            w.push(Write::ListLanes(Members::of(&used)));
        }
        Ok(added)
    }
}
