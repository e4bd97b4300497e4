//! STALLED CHECK's write plan (SPEC §6 steps 4 to 7): a pure function of the read.
//! A row asked to stop (`cancel 1`, SPEC §13) is cancelled, not recovered; a
//! row that dies or is cancelled is told to its waiters (`jobs::ending`).

use crate::error::{Error, Result};
use crate::jobs::counters::Tally;
use crate::jobs::ending::{cancelled_writes, Notices};
use crate::jobs::retention::DONE_MS;
use crate::lanes::offer::{Levels, Offers};
use crate::protocol::guard::{lease_marks, relies_on_empty};
use crate::protocol::write::{LaneField, Members, RowFields, Write};
use crate::sweep::types::{Outcome, Plan, Read, Row, STALLED};

/// A lane's share of a plan: (name, recovered ids, rows that left active).
type LaneTally<'a> = (&'a [u8], Vec<&'a [u8]>, i64);

/// Every expired id leaves `active`. A live row counts a stall; past
/// `max_stalled` it dies, else it goes back to `pending` or its lane. Lane rows
/// give back their lane's slot; then offers, the flat wake, the trim.
pub fn plan(read: &Read, max_stalled: Option<u64>) -> Result<Plan> {
    let mut recovered: Vec<Vec<u8>> = vec![];
    let mut dead: Vec<Vec<u8>> = vec![];
    let mut flat: Vec<&[u8]> = vec![];
    // Per lane, in the order of its first live row.
    let mut by_lane: Vec<LaneTally<'_>> = vec![];
    // Recovered rows of priority 1 to 9 join their level's list (SPEC §15).
    let mut levels = Levels::default();
    let mut rows = Vec::with_capacity(2 * read.ids.len());
    let mut cancelled: Vec<(&[u8], i64)> = vec![];
    let mut notices = Notices::default();
    let done_ms = read.extras.map_or(DONE_MS, |e| e.done_ms);

    for (id, row) in read.ids.iter().zip(&read.rows) {
        let Row::Live { lane, stalls, ending, priority } = row else { continue };
        let stalls = stalls.saturating_add(1);
        let dies = dies(stalls, max_stalled);
        // Leaves for good: dead, or cancelled (asked to stop; never recovered).
        let gone = dies || ending.cancel;
        if ending.cancel {
            cancelled.push((id, ending.keep_or(done_ms)));
            notices.add(id, ending);
        } else if dies {
            dead.push(id.clone());
            notices.add(id, ending);
            rows.push(Write::SetRow { id: id.clone(), fields: RowFields::Stalled { stalls, dead: true } });
            rows.push(Write::DropLease { id: id.clone() });
            // Its error is `stalled`: an earlier attempt's type and traceback are not this ending's.
            rows.push(Write::DropErrorDetail { id: id.clone() });
        } else {
            recovered.push(id.clone());
            rows.push(Write::SetRow { id: id.clone(), fields: RowFields::Stalled { stalls, dead: false } });
            rows.push(Write::DropLease { id: id.clone() });
        }
        match lane {
            None if !gone && *priority > 0 => levels.push(None, *priority, id),
            None if !gone => flat.push(id),
            None => {}
            Some(l) => {
                let i = match by_lane.iter().position(|(name, ..)| name == l) {
                    Some(i) => i,
                    None => {
                        by_lane.push((l, vec![], 0));
                        by_lane.len() - 1
                    }
                };
                by_lane[i].2 += 1;
                if !gone && *priority > 0 {
                    levels.push(Some(l), *priority, id);
                } else if !gone {
                    by_lane[i].1.push(id);
                }
            }
        }
    }

    let mut offers = Offers::default();
    let mut actives = vec![];
    for (name, ids, left) in &by_lane {
        let lane = read.lane(name);
        let mut ctl = lane.ctl.clone();
        ctl.active = (ctl.active - left).max(0);
        actives.push(ctl.active);
        offers.offer(name, lane.len.saturating_add((ids.len() + levels.count_in(name)) as i64), &ctl);
    }
    let t = read.types;
    // `pending` is typed on every call that selected members (SPEC §5 step 5), as
    // the seed's module does, whatever the rows turn out to be.
    if !t.pending || (!dead.is_empty() && !t.dead) || (offers.offered_any() && !t.ring) || !t.wake {
        return Err(Error::layout(STALLED, "pending, dead, ring or wake has the wrong type"));
    }

    // Room for every write: two thousand of them moved once, not at each doubling.
    let mut w = Vec::with_capacity(rows.len() + 2 * by_lane.len() + 16);
    w.push(Write::LeaveActive(Members::of(&read.ids)));
    // Every member leaves `active`: the marks of the seconds their leases ended
    // in tell the stalled checks that watch them (`crate::protocol::guard`).
    w.extend(lease_marks(&read.scores));
    if !dead.is_empty() {
        w.push(Write::Bury { at: read.now, ids: Members::of(&dead) });
    }
    w.extend(rows);
    cancelled_writes(&cancelled, read.now, true, &mut w);
    if !flat.is_empty() {
        w.push(Write::MakeReady { lane: None, ids: Members::of(&flat) });
    }
    if !flat.is_empty() || levels.any_flat() {
        offers.wake_flat();
    }
    for ((name, ids, _), active) in by_lane.into_iter().zip(actives) {
        if !ids.is_empty() {
            w.push(Write::MakeReady { lane: Some(name.to_vec()), ids: Members::of(&ids) });
        }
        w.push(Write::SetLane { lane: name.to_vec(), field: LaneField::Active(active) });
    }
    levels.writes(&mut w);
    offers.writes(&mut w);
    notices.writes(&mut w);
    let tally = Tally { dead: dead.len() as i64, cancelled: cancelled.len() as i64, recovered: recovered.len() as i64, ..Tally::default() };
    tally.writes(read.now, &mut w);
    Ok(Plan { writes: w, outcome: Outcome::Stalled { recovered, dead } })
}

/// The lanes whose plan leaves them out of the ring only because their list is
/// empty (every row of theirs it saw dies): the sweep watches those lists.
pub fn empty_lanes_relied_on(read: &Read, max_stalled: Option<u64>) -> Vec<Vec<u8>> {
    read.lanes
        .iter()
        .filter(|lane| {
            let (mut left, mut pushed) = (0, 0);
            for row in &read.rows {
                if let Row::Live { lane: Some(l), stalls, ending, .. } = row {
                    if *l == lane.name {
                        left += 1;
                        pushed += i64::from(!dies(stalls.saturating_add(1), max_stalled) && !ending.cancel);
                    }
                }
            }
            let mut ctl = lane.ctl.clone();
            ctl.active = (ctl.active - left).max(0);
            relies_on_empty(lane.len.saturating_add(pushed), &ctl)
        })
        .map(|lane| lane.name.clone())
        .collect()
}

/// A row dies once its stalls (counting this one) pass `max_stalled`.
fn dies(stalls: i64, max_stalled: Option<u64>) -> bool {
    max_stalled.is_some_and(|m| stalls > m as i64)
}
