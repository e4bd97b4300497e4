//! How a lane is read and offered (SPEC §2): its control fields (`P lanectl:L`),
//! whether it can be served, and offer(L), the one rule that puts a lane in the
//! ring and wakes a parked worker, with the trim that keeps `P wake` at
//! `WAKE_MAX` tokens; and the wake for a new head of `schedule` (SPEC §7).
//! Changing a lane's control is `lane_control`'s.

use crate::names::Keys;
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::reply::Reply;
use crate::protocol::write::{LaneField, Members, Write};
pub use crate::protocol::write::{LEVELS_IN_USE, WAKE_MAX};

/// The fields of `P lanectl:L` that decide whether a lane can be served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaneCtl {
    pub paused: bool,
    /// `0` (or absent, or not a number): no limit.
    pub limit: i64,
    pub active: i64,
    pub in_ring: bool,
    /// Bit `p` set: field `lvl:<p>` says priority level `p` (1 to 9) holds
    /// work (SPEC §15); a level found empty has its field cleared by a claim.
    pub levels: u16,
}

/// The fields a plan reads with `HMGET P lanectl:L`, in this order: the
/// serving fields, then `lvl:1` to `lvl:9`.
pub const CTL_FIELDS: [&str; 13] =
    ["paused", "limit", "active", "ring", "lvl:1", "lvl:2", "lvl:3", "lvl:4", "lvl:5", "lvl:6", "lvl:7", "lvl:8", "lvl:9"];

/// The fields a claim reads with `HMGET P flatctl`: `lvl:1` to `lvl:9`.
pub const LEVEL_FIELDS: [&str; 9] = ["lvl:1", "lvl:2", "lvl:3", "lvl:4", "lvl:5", "lvl:6", "lvl:7", "lvl:8", "lvl:9"];

/// The levels set in `f`, the values of [`LEVEL_FIELDS`] in order: bit `p` for `lvl:<p>`.
pub fn levels_of(f: &[Option<&[u8]>]) -> u16 {
    f.iter().take(9).enumerate().filter(|(_, v)| v.is_some()).fold(0, |acc, (i, _)| acc | (1 << (i + 1)))
}

impl LaneCtl {
    /// From the `HMGET` reply values (absent fields are `None`).
    pub fn from_fields(f: &[Option<&[u8]>]) -> Self {
        let flag = |v: Option<&[u8]>| v == Some(b"1".as_slice());
        let int = |v: Option<&[u8]>| v.and_then(field_int).unwrap_or(0);
        LaneCtl {
            paused: flag(f.first().copied().flatten()),
            limit: int(f.get(1).copied().flatten()),
            active: int(f.get(2).copied().flatten()),
            in_ring: flag(f.get(3).copied().flatten()),
            levels: levels_of(f.get(4..).unwrap_or_default()),
        }
    }

    /// From the reply of `HMGET P lanectl:L` with `CTL_FIELDS`.
    pub fn from_reply(r: &Reply) -> Self {
        LaneCtl::from_fields(&r.fields())
    }

    /// Not paused, and no limit or fewer active than the limit.
    pub fn can_serve(&self) -> bool {
        !self.paused && (self.limit <= 0 || self.active < self.limit)
    }
}

/// The tail every ready-making write shares: lanes offered to the ring, wake
/// tokens, and the trim of `P wake`. Tokens are pushed in the order they were
/// offered, in one `RPUSH` each for the ring and for `wake`.
#[derive(Default)]
pub struct Offers {
    ring: Vec<Vec<u8>>,
    tokens: Vec<Vec<u8>>,
}

impl Offers {
    /// offer(L): `len` is the lane list's length after this plan's pushes
    /// (those to any level); a lane whose control says a level holds work has
    /// work too (a level found empty later costs a claim its turn, never a job).
    /// Returns whether the lane joined the ring.
    pub fn offer(&mut self, lane: &[u8], len: i64, ctl: &LaneCtl) -> bool {
        if (len > 0 || ctl.levels != 0) && ctl.can_serve() && !ctl.in_ring && !self.ring.iter().any(|l| l == lane) {
            self.ring.push(lane.to_vec());
            self.tokens.push(lane.to_vec());
            return true;
        }
        false
    }

    /// The flat wake token, `""`.
    pub fn wake_flat(&mut self) {
        self.tokens.push(Vec::new());
    }

    pub fn offered_any(&self) -> bool {
        !self.ring.is_empty()
    }

    /// The writes: `ring = 1` for each offered lane, the ring and wake pushes, and
    /// the trim of `P wake` (always: the plans trim whenever they write).
    pub fn writes(self, out: &mut Vec<Write>) {
        let ring = Members::of(&self.ring);
        out.extend(self.ring.into_iter().map(|lane| Write::SetLane { lane, field: LaneField::InRing(true) }));
        if !ring.is_empty() {
            out.push(Write::JoinRing(ring));
        }
        if !self.tokens.is_empty() {
            out.push(Write::Wake(Members::of(&self.tokens)));
        }
        out.push(Write::TrimWake);
    }
}

/// Whether `P promotions`, as read (`GET`), says the queue uses priorities.
pub fn levels_in_use(promotions: &Reply) -> bool {
    promotions.as_bytes().and_then(field_int).is_some_and(|n| n >= LEVELS_IN_USE)
}

/// A row's priority level from its `priority` field (SPEC §15): absent, or
/// anything but one digit, is 0.
pub fn level(v: Option<&[u8]>) -> u8 {
    match v {
        Some([d @ b'0'..=b'9']) => d - b'0',
        _ => 0,
    }
}

/// Ready ids of priority 1 to 9 by (lane, level), in order of first id: each
/// group is pushed to its level's list and marks its level in the control
/// (`lvl:<p>` of `P flatctl` or `P lanectl:L`), SPEC §15. Level 0 is the
/// plans' own `pending` and lane pushes, unchanged.
#[derive(Default)]
pub struct Levels<'a> {
    groups: Vec<LevelGroup<'a>>,
}

/// The ids of one (lane, level) list, in order.
type LevelGroup<'a> = ((Option<&'a [u8]>, u8), Vec<&'a [u8]>);

impl<'a> Levels<'a> {
    pub fn push(&mut self, lane: Option<&'a [u8]>, level: u8, id: &'a [u8]) {
        match self.groups.iter_mut().find(|(at, _)| *at == (lane, level)) {
            Some((_, ids)) => ids.push(id),
            None => self.groups.push(((lane, level), vec![id])),
        }
    }

    /// Whether a flat id is pushed (the flat wake token is then due).
    pub fn any_flat(&self) -> bool {
        self.groups.iter().any(|((lane, _), _)| lane.is_none())
    }

    /// How many ids of `lane` it pushes.
    pub fn count_in(&self, lane: &[u8]) -> usize {
        self.groups.iter().filter(|((l, _), _)| *l == Some(lane)).map(|(_, ids)| ids.len()).sum()
    }

    /// `RPUSH` of each group to its level's list and `HSET lvl:<p> 1`.
    pub fn writes(&self, out: &mut Vec<Write>) {
        for ((lane, level), ids) in &self.groups {
            let lane = lane.map(<[u8]>::to_vec);
            out.push(Write::ReadyAt { lane: lane.clone(), level: *level, ids: Members::of(ids) });
            out.push(Write::MarkLevel { lane, level: *level });
        }
    }
}

/// Reads the head of `schedule` (and checks its type), for [`new_head`].
pub fn schedule_head(k: &Keys) -> Cmd {
    Cmd::new("ZRANGE").arg(k.schedule()).arg("0").arg("0").arg("WITHSCORES")
}

/// Whether a job due at one of `dues` becomes the new head of `schedule`, due
/// before every member `head` (the reply of [`schedule_head`]) showed: then the
/// call appends the token `""` (SPEC §7), so a parked worker wakes, sees the
/// earlier due time in its promote and parks until then. The head is read
/// without a watch: a token too many wakes a worker once for nothing, and a
/// token missed because the head moved later meanwhile is made up by the
/// worker, which parks no later than the due time it saw.
pub fn new_head(head: &Reply, mut dues: impl Iterator<Item = i64>) -> bool {
    let first = head.as_array().and_then(|a| a.get(1)).and_then(Reply::as_score);
    match first {
        None => dues.next().is_some(),
        Some(h) => dues.any(|d| (d as f64) < h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_rules() {
        let c = |p: &[u8], l: &[u8], a: &[u8]| LaneCtl::from_fields(&[Some(p), Some(l), Some(a), None]);
        assert!(LaneCtl::default().can_serve());
        assert!(!c(b"1", b"0", b"0").can_serve());
        assert!(c(b"0", b"2", b"1").can_serve());
        assert!(!c(b"0", b"2", b"2").can_serve());
        assert!(c(b"0", b"x", b"9").can_serve(), "a limit that is not a number is no limit");
    }

    #[test]
    fn offer_once_per_plan_and_never_when_in_ring() {
        let mut o = Offers::default();
        assert!(o.offer(b"a", 1, &LaneCtl::default()));
        assert!(!o.offer(b"a", 2, &LaneCtl::default()));
        assert!(!o.offer(b"b", 0, &LaneCtl::default()));
        assert!(!o.offer(b"c", 1, &LaneCtl { in_ring: true, ..Default::default() }));
        o.wake_flat();
        let mut out = vec![];
        o.writes(&mut out);
        let lanes = |xs: &[&str]| xs.iter().collect::<Members>();
        assert_eq!(
            out,
            vec![
                Write::SetLane { lane: b"a".to_vec(), field: LaneField::InRing(true) },
                Write::JoinRing(lanes(&["a"])),
                Write::Wake(lanes(&["a", ""])),
                Write::TrimWake,
            ]
        );
    }

    #[test]
    fn a_job_due_before_every_member_of_schedule_is_its_new_head() {
        let head = |score: &str| Reply::Array(vec![Reply::Bulk(b"x".to_vec()), Reply::Bulk(score.as_bytes().to_vec())]);
        assert!(new_head(&Reply::Array(vec![]), [5].into_iter()), "an empty schedule: any job is its head");
        assert!(!new_head(&Reply::Array(vec![]), std::iter::empty()), "no job scheduled: no token");
        assert!(new_head(&head("100"), [200, 99].into_iter()));
        assert!(!new_head(&head("100"), [100, 101].into_iter()), "due with the head, not before it");
        assert!(new_head(&head("inf"), [i64::MAX].into_iter()));
        assert!(!new_head(&head("-inf"), [i64::MIN].into_iter()));
    }
}
