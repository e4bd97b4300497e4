//! PROMOTE's write plan (SPEC §5 steps 5 to 7): a pure function of the read.

use crate::error::{Error, Result};
use crate::lanes::offer::{Levels, Offers};
use crate::protocol::write::{Members, RowFields, Write};
use crate::sweep::types::{Outcome, Plan, Read, Row, PROMOTE};

/// Every due id leaves `schedule`; flat rows join `pending`, lane rows their lane,
/// in due order; live rows become `pending`; then offers, the flat wake, the trim,
/// and `P promotions` counts the call.
pub fn plan(read: &Read) -> Result<Plan> {
    let mut flat: Vec<&[u8]> = vec![];
    let mut by_lane: Vec<(&[u8], Vec<&[u8]>)> = vec![];
    // Rows of priority 1 to 9 join their level's list (SPEC §15).
    let mut levels = Levels::default();
    for (id, row) in read.ids.iter().zip(&read.rows) {
        let Row::Live { lane, priority, .. } = row else { continue };
        if let Some(l) = lane {
            if !by_lane.iter().any(|(name, _)| name == l) {
                by_lane.push((l, vec![]));
            }
        }
        match lane {
            _ if *priority > 0 => levels.push(lane.as_deref(), *priority, id),
            None => flat.push(id),
            Some(l) => by_lane.iter_mut().find(|(name, _)| name == l).expect("pushed above").1.push(id),
        }
    }

    let mut offers = Offers::default();
    for (name, ids) in &by_lane {
        let lane = read.lane(name);
        offers.offer(name, lane.len.saturating_add((ids.len() + levels.count_in(name)) as i64), &lane.ctl);
    }
    let t = read.types;
    // `pending` is typed on every call that selected members (SPEC §5 step 5).
    if !t.pending || (offers.offered_any() && !t.ring) || !t.wake {
        return Err(Error::layout(PROMOTE, "pending, ring or wake has the wrong type"));
    }

    // Room for every write: a thousand of them moved once, not at each doubling.
    let mut w = Vec::with_capacity(read.ids.len() + by_lane.len() + 8);
    w.push(Write::Unschedule(Members::of(&read.ids)));
    if !flat.is_empty() {
        w.push(Write::MakeReady { lane: None, ids: Members::of(&flat) });
    }
    if !flat.is_empty() || levels.any_flat() {
        offers.wake_flat();
    }
    for (name, ids) in by_lane {
        if !ids.is_empty() {
            w.push(Write::MakeReady { lane: Some(name.to_vec()), ids: Members::of(&ids) });
        }
    }
    levels.writes(&mut w);
    for (id, row) in read.ids.iter().zip(&read.rows) {
        if let Row::Live { .. } = row {
            w.push(Write::SetRow { id: id.clone(), fields: RowFields::Ready });
        }
    }
    offers.writes(&mut w);
    // Every promote that takes members bumps the key promoters watch (`crate::protocol::guard`).
    w.push(Write::CountPromotion);
    Ok(Plan { writes: w, outcome: Outcome::Promoted(read.ids.len() as i64) })
}
