//! PROMOTE's write plan (SPEC §5 steps 5 to 7): a pure function of the read.

use crate::error::{Error, Result};
use crate::lanes::offer::Offers;
use crate::protocol::write::{Members, RowFields, Write};
use crate::sweep::types::{Outcome, Plan, Read, Row, PROMOTE};

/// Every due id leaves `schedule`; flat rows join `pending`, lane rows their lane,
/// in due order; live rows become `pending`; then offers, the flat wake, the trim,
/// and `P promotions` counts the call.
pub fn plan(read: &Read) -> Result<Plan> {
    let mut flat: Vec<&[u8]> = vec![];
    let mut by_lane: Vec<(&[u8], Vec<&[u8]>)> = vec![];
    for (id, row) in read.ids.iter().zip(&read.rows) {
        match row {
            Row::Ghost => {}
            Row::Live { lane: None, .. } => flat.push(id),
            Row::Live { lane: Some(l), .. } => match by_lane.iter_mut().find(|(name, _)| name == l) {
                Some((_, ids)) => ids.push(id),
                None => by_lane.push((l, vec![id])),
            },
        }
    }

    let mut offers = Offers::default();
    for (name, ids) in &by_lane {
        let lane = read.lane(name);
        offers.offer(name, lane.len.saturating_add(ids.len() as i64), &lane.ctl);
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
        offers.wake_flat();
    }
    for (name, ids) in by_lane {
        w.push(Write::MakeReady { lane: Some(name.to_vec()), ids: Members::of(&ids) });
    }
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
