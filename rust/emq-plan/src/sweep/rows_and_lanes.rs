//! Steps 2 to 4 of a sweep: every selected row and lane read, the first
//! group's under its watch, so that every input check is made before the
//! first `EXEC`.

use crate::error::{Error, Result};
use crate::jobs::ending::Ending;
use crate::lanes::offer::{level, LaneCtl, CTL_FIELDS};
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::guard::{still_selected, RE_READ_SLACK};
use crate::protocol::reply::Reply;
use crate::protocol::rows;
use crate::sweep::conversation::{Part, Stage, Sweep};
use crate::sweep::types::{Kind, Lane, Row, Step, Types};

impl Sweep {
    /// The first group's watch, and under it the reads of every selected row
    /// (in the server: no watch, no re-read).
    pub(super) fn rows_reads(&mut self) -> Step {
        let mut cmds = vec![];
        cmds.extend((!self.in_server).then(|| match self.kind {
            // A promote: `P promotions` again. Unchanged, no promote ran between the
            // selection and the watch, and only a promote takes a due member or
            // writes its row (guard.rs): the selection stands, whatever its size.
            Kind::Promote => Cmd::new("GET").arg(self.keys.promotions()),
            // A stalled check: the first group again, the head of the zset as far as
            // its members and `RE_READ_SLACK` more (a range costs the server less
            // than `ZMSCORE`).
            Kind::Stalled { .. } => {
                let last = (self.groups[0].len() - 1 + RE_READ_SLACK).to_string();
                Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg(last).arg("WITHSCORES")
            }
        }));
        cmds.extend(rows::reads(&self.keys, &self.read.ids, self.fields()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.pending()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.ring()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.wake()));
        if matches!(self.kind, Kind::Stalled { .. }) {
            cmds.push(Cmd::new("ZCARD").arg(self.keys.dead()));
        }
        if self.checks_retention() {
            // A later group may kill and so trim `dead` by `P retention`: its type
            // too is checked before the first group's EXEC (SPEC §9).
            cmds.push(Cmd::new("HLEN").arg(self.keys.retention()));
        }
        self.stage = Stage::Rows;
        let watch = if self.in_server { vec![] } else { self.watch_of(self.groups[0].clone()) };
        Step::Read { watch, cmds }
    }

    pub(super) fn rows_read(&mut self, replies: &[Reply]) -> Result<Step> {
        let n = self.read.ids.len();
        let stalled = matches!(self.kind, Kind::Stalled { .. });
        let (re_read, extra) = (usize::from(!self.in_server), 3 + usize::from(stalled) + usize::from(self.checks_retention()));
        let reads = rows::reply_count(n);
        if replies.len() != re_read + reads + extra {
            return Err(self.host_error("rows: wrong number of replies"));
        }
        let first = self.groups[0].clone();
        let stands = match self.kind {
            _ if self.in_server => true,
            Kind::Promote => self.promotions.as_ref() == Some(&replies[0]),
            Kind::Stalled { .. } => {
                replies[0].as_array().is_some_and(|a| still_selected(a, &self.read.ids[first.clone()], &self.read.scores[first]))
            }
        };
        if !stands {
            return Err(Error::conflict(self.verb(), "the selection changed before the watch"));
        }
        let (rows, unsure) =
            rows::parse_rows(self.verb(), &self.keys, &self.read.ids, &replies[re_read..re_read + reads], self.fields().len(), Self::row)?;
        self.read.rows = rows.into_iter().map(|r| r.unwrap_or(Row::Ghost)).collect();
        let t = &replies[re_read + reads..];
        self.read.types = Self::list_types(t);
        if self.checks_retention() && t.get(4).is_some_and(Reply::is_wrongtype) {
            let key = self.keys.retention();
            return Err(Error::layout(self.verb(), format!("{} has the wrong type", String::from_utf8_lossy(&key))));
        }
        self.rows_known(unsure)
    }

    /// Every row is read: the unsure ones get their `TYPE` (step 3), then the lanes.
    pub(super) fn rows_known(&mut self, unsure: Vec<usize>) -> Result<Step> {
        if !unsure.is_empty() {
            let cmds = rows::type_reads(&self.keys, &self.read.ids, &unsure);
            self.stage = Stage::Types { unsure };
            return Ok(Step::Read { watch: vec![], cmds });
        }
        self.lanes_step()
    }

    /// The lists' types from their reads: `pending`, the ring, `wake`, then
    /// `dead` where read (a stalled check).
    pub(super) fn list_types(t: &[Reply]) -> Types {
        Types {
            pending: !t[0].is_wrongtype(),
            ring: !t[1].is_wrongtype(),
            wake: !t[2].is_wrongtype(),
            dead: !t.get(3).is_some_and(Reply::is_wrongtype),
        }
    }

    /// A live row from its fields as read (a promote's `lane`, `priority`; a
    /// stalled check's `lane`, `stalls`, the ending fields `wait`, `cancel`,
    /// `keep`, then `priority`).
    pub(super) fn row(fields: &[Option<&[u8]>]) -> Row {
        let field = |i: usize| fields.get(i).copied().flatten();
        if fields.len() <= 2 {
            return Row::Live { lane: field(0).map(<[u8]>::to_vec), stalls: 0, ending: Ending::default(), priority: level(field(1)) };
        }
        let stalls = field(1).and_then(field_int).unwrap_or(0);
        let ending = Ending::from_fields(field(2), field(3), field(4));
        Row::Live { lane: field(0).map(<[u8]>::to_vec), stalls, ending, priority: level(field(5)) }
    }

    /// Settles the rows whose `EXISTS` count left them unsure, from their `TYPE`.
    pub(super) fn typed(&self, ids: &[Vec<u8>], rows: &mut [Row], unsure: &[usize], replies: &[Reply]) -> Result<()> {
        let mut fields: Vec<Option<rows::Fields>> = rows
            .iter()
            .map(|r| match r {
                Row::Ghost => None,
                Row::Live { .. } => Some(vec![]),
            })
            .collect();
        rows::resolve(self.verb(), &self.keys, ids, &mut fields, unsure, replies)?;
        for (row, f) in rows.iter_mut().zip(fields) {
            if f.is_none() {
                *row = Row::Ghost;
            }
        }
        Ok(())
    }

    pub(super) fn types_read(&mut self, unsure: &[usize], replies: &[Reply]) -> Result<Step> {
        let mut rows = std::mem::take(&mut self.read.rows);
        let typed = self.typed(&self.read.ids, &mut rows, unsure, replies);
        self.read.rows = rows;
        typed?;
        self.lanes_step()
    }

    /// The lanes of `rows`, in the order of their first row.
    pub(super) fn lanes_of(rows: &[Row]) -> Vec<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = vec![];
        for row in rows {
            if let Row::Live { lane: Some(l), .. } = row {
                if !names.contains(l) {
                    names.push(l.clone());
                }
            }
        }
        names
    }

    /// Step 4: every lane's control and length (their types are checked here),
    /// the first group's lanes under their watch.
    fn lanes_step(&mut self) -> Result<Step> {
        self.read.lanes = Self::lanes_of(&self.read.rows).into_iter().map(|name| Lane { name, ..Default::default() }).collect();
        if self.grouped_call() {
            self.check_lists()?;
        }
        if self.read.lanes.is_empty() {
            return self.first_part();
        }
        let first = Self::lanes_of(&self.read.rows[self.groups[0].clone()]);
        let watch = first.iter().map(|l| self.keys.lanectl(l)).collect();
        let mut cmds = Vec::with_capacity(2 * self.read.lanes.len());
        for l in &self.read.lanes {
            cmds.push(Cmd::new("HMGET").arg(self.keys.lanectl(&l.name)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(self.keys.lane(&l.name)));
        }
        self.stage = Stage::Lanes;
        Ok(Step::Read { watch, cmds })
    }

    /// The lane reads' replies (`HMGET` control, `LLEN`) into `lanes`, types checked.
    pub(super) fn lane_replies(&self, lanes: &mut [Lane], replies: &[Reply]) -> Result<()> {
        if replies.len() != 2 * lanes.len() {
            return Err(self.host_error("lanes: wrong number of replies"));
        }
        for (lane, pair) in lanes.iter_mut().zip(replies.chunks_exact(2)) {
            self.check(&pair[0], &self.keys.lanectl(&lane.name))?;
            self.check(&pair[1], &self.keys.lane(&lane.name))?;
            lane.ctl = LaneCtl::from_reply(&pair[0]);
            lane.len = pair[1].as_int().unwrap_or(0);
        }
        Ok(())
    }

    pub(super) fn lanes_read(&mut self, replies: &[Reply]) -> Result<Step> {
        let mut lanes = std::mem::take(&mut self.read.lanes);
        let read = self.lane_replies(&mut lanes, replies);
        self.read.lanes = lanes;
        read?;
        self.first_part()
    }

    /// A call of several groups writes every list some group may write: their
    /// types are all checked before the first group's `EXEC` (SPEC §9).
    fn check_lists(&self) -> Result<()> {
        let t = self.read.types;
        let dies = matches!(self.kind, Kind::Stalled { max_stalled: Some(_) });
        if !t.pending || !t.ring || !t.wake || (dies && !t.dead) {
            return Err(Error::layout(self.verb(), "pending, ring, wake or dead has the wrong type"));
        }
        Ok(())
    }

    /// The first group, from the reads of steps 2 to 4.
    fn first_part(&mut self) -> Result<Step> {
        self.part_extras = None;
        let r = self.groups[0].clone();
        self.part = if self.groups.len() == 1 {
            // The call's one group: nothing reads the selection again (an abort
            // starts the call anew), so the part takes it rather than a copy.
            let lanes = std::mem::take(&mut self.read.lanes);
            Part {
                ids: std::mem::take(&mut self.read.ids),
                scores: std::mem::take(&mut self.read.scores),
                rows: std::mem::take(&mut self.read.rows),
                lanes,
            }
        } else {
            let rows = self.read.rows[r.clone()].to_vec();
            let names = Self::lanes_of(&rows);
            let lanes = self.read.lanes.iter().filter(|l| names.contains(&l.name)).cloned().collect();
            Part { ids: self.read.ids[r.clone()].to_vec(), scores: self.read.scores[r].to_vec(), rows, lanes }
        };
        self.plan_part()
    }
}
