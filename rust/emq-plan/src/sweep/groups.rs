//! A sweep's later groups: each read again under its own watch, then planned,
//! left out where nothing of it is left, or taken up again after an abort.

use crate::error::{Error, Result};
use crate::lanes::offer::CTL_FIELDS;
use crate::protocol::cmd::Cmd;
use crate::protocol::reply::Reply;
use crate::protocol::rows;
use crate::sweep::conversation::{Part, Stage, Sweep};
use crate::sweep::types::{Lane, Row, Step};

/// How many times one group of a call is read and planned again after the guard
/// aborted it before the call ends with the groups it has applied.
pub const GROUP_ATTEMPTS: u32 = 32;

impl Sweep {
    /// What a later group watches: its lease marks and rows (a promote:
    /// `P promotions`) and the control of its lanes; and what it reads under
    /// that watch.
    pub(super) fn group_reads(&self, k: usize) -> (Vec<Vec<u8>>, Vec<Cmd>) {
        let r = self.groups[k].clone();
        let ids = &self.read.ids[r.clone()];
        let lanes = Self::lanes_of(&self.read.rows[r.clone()]);
        let mut watch = self.watch_of(r);
        watch.extend(lanes.iter().map(|l| self.keys.lanectl(l)));
        let mut cmds = vec![Cmd::new("ZMSCORE").arg(self.zset()).args(ids)];
        cmds.extend(rows::reads(&self.keys, ids, self.fields()));
        for l in &lanes {
            cmds.push(Cmd::new("HMGET").arg(self.keys.lanectl(l)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(self.keys.lane(l)));
        }
        (watch, cmds)
    }

    /// Reads group `k` again (after an abort, or when a row changed lane).
    fn group_step(&mut self, k: usize) -> Step {
        let (watch, cmds) = self.group_reads(k);
        self.current = k;
        self.stage = Stage::Group;
        Step::Read { watch, cmds }
    }

    pub(super) fn group_read(&mut self, replies: &[Reply]) -> Result<Step> {
        self.part_extras = None;
        let r = self.groups[self.current].clone();
        let (ids, old_rows) = (self.read.ids[r.clone()].to_vec(), self.read.rows[r.clone()].to_vec());
        let lane_names = Self::lanes_of(&old_rows);
        let reads = rows::reply_count(ids.len());
        if replies.len() != 1 + reads + 2 * lane_names.len() {
            return Err(self.host_error("group: wrong number of replies"));
        }
        self.check(&replies[0], &self.zset())?;
        let scores = replies[0].as_array().ok_or_else(|| self.host_error("ZMSCORE gave no array"))?;
        let (rows, unsure) = rows::parse_rows(self.verb(), &self.keys, &ids, &replies[1..=reads], self.fields().len(), Self::row)?;
        let mut rows: Vec<Row> = rows.into_iter().map(|r| r.unwrap_or(Row::Ghost)).collect();
        let mut lanes: Vec<Lane> = lane_names.into_iter().map(|name| Lane { name, ..Default::default() }).collect();
        self.lane_replies(&mut lanes, &replies[1 + reads..])?;
        // Members another call took, or scored anew, since the selection are left.
        let kept: Vec<bool> = ids
            .iter()
            .zip(&self.read.scores[r.clone()])
            .enumerate()
            .map(|(i, (_, s))| scores.get(i).and_then(Reply::as_score) == Some(*s))
            .collect();
        let scores = self.read.scores[r].to_vec();
        if !unsure.is_empty() {
            self.part = Part { ids, scores, rows, lanes };
            self.part_keep(&kept);
            let unsure_kept: Vec<usize> = unsure.iter().copied().filter(|&i| kept[i]).collect();
            if !unsure_kept.is_empty() {
                // Indexes of the kept members among those still in the part.
                let map: Vec<usize> = unsure_kept.iter().map(|&i| kept[..i].iter().filter(|k| **k).count()).collect();
                let cmds = rows::type_reads(&self.keys, &self.part.ids, &map);
                self.stage = Stage::GroupTypes { unsure: map };
                return Ok(Step::Read { watch: vec![], cmds });
            }
            return self.part_read();
        }
        self.part = Part { ids, scores, rows: std::mem::take(&mut rows), lanes };
        self.part_keep(&kept);
        self.part_read()
    }

    /// Keeps the members of the part that `kept` says are still there.
    fn part_keep(&mut self, kept: &[bool]) {
        let mut i = 0;
        self.part.ids.retain(|_| (kept[i], i += 1).0);
        let mut j = 0;
        self.part.rows.retain(|_| (kept[j], j += 1).0);
        let mut k = 0;
        self.part.scores.retain(|_| (kept[k], k += 1).0);
    }

    pub(super) fn group_types_read(&mut self, unsure: &[usize], replies: &[Reply]) -> Result<Step> {
        let mut rows = std::mem::take(&mut self.part.rows);
        let typed = self.typed(&self.part.ids, &mut rows, unsure, replies);
        self.part.rows = rows;
        typed?;
        self.part_read()
    }

    /// A later group, read under its watch: planned, unless a row has moved to a
    /// lane whose control it did not read (then it is read again).
    fn part_read(&mut self) -> Result<Step> {
        if Self::lanes_of(&self.part.rows).iter().any(|l| !self.part.lanes.iter().any(|x| &x.name == l)) {
            return self.retry_group();
        }
        let names = Self::lanes_of(&self.part.rows);
        self.part.lanes.retain(|l| names.contains(&l.name));
        if self.part.ids.is_empty() {
            // Nothing of this group is left to take.
            return Ok(self.next_group());
        }
        self.plan_part()
    }

    /// The step after the current group, when it applied nothing.
    fn next_group(&mut self) -> Step {
        if self.current + 1 < self.groups.len() {
            self.group_step(self.current + 1)
        } else {
            Step::Done(self.done.take().unwrap_or_else(|| self.empty()))
        }
    }

    /// Takes the current group up again, or ends the call with the groups applied.
    pub(super) fn retry_group(&mut self) -> Result<Step> {
        self.retries += 1;
        if self.retries > GROUP_ATTEMPTS {
            return match self.done.take() {
                Some(done) => Ok(Step::Done(done)),
                None => Err(Error::conflict(self.verb(), "a group kept changing under its watch")),
            };
        }
        Ok(self.group_step(self.current))
    }
}
