//! Which ticks a sweep enqueues when it finds a schedule due, by the schedule's
//! missed-tick policy (SPEC §14), and the next tick it stores.
//!
//! The ticks due are the spec's ticks from the stored next tick to `now`, both
//! included; the new next tick is the first tick after `now`. The cost is a few
//! searches whatever the downtime (`latest`, `skip`), or one search per job
//! (`all`, at most its bound): the sweep never walks the ticks it drops.

use super::spec::Spec;
use crate::error::{Error, Result};

/// The largest `max_missed`: one sweep writes the jobs of a schedule in one
/// transaction, which should stay short.
pub const MAX_MISSED_LIMIT: u32 = 1000;

/// What a sweep does when it finds several ticks due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// One job, for the latest tick due (the default).
    Latest,
    /// One job a tick due, oldest first; past the bound, the most recent
    /// `max_missed` ticks (so `all` with 1 is `latest`).
    All { max_missed: u32 },
    /// One job, for the latest tick due, only if it is at most `grace_ms` old.
    Skip { grace_ms: i64 },
}

impl Missed {
    /// A policy from a caller's arguments: `missed` (`latest`, `all`, `skip`;
    /// `None`: `latest`), `max_missed` for `all`, `grace_ms` for `skip`.
    pub fn parse(verb: &str, missed: Option<&str>, max_missed: Option<i64>, grace_ms: Option<i64>) -> Result<Missed> {
        let policy = match missed.unwrap_or("latest") {
            "latest" => Missed::Latest,
            "all" => {
                let bound = max_missed.ok_or_else(|| Error::argument(verb, "max_missed", "is required with missed='all'"))?;
                match u32::try_from(bound) {
                    Ok(n) if (1..=MAX_MISSED_LIMIT).contains(&n) => Missed::All { max_missed: n },
                    _ => return Err(Error::argument(verb, "max_missed", format!("must be an integer from 1 to {MAX_MISSED_LIMIT}"))),
                }
            }
            "skip" => {
                let grace = grace_ms.ok_or_else(|| Error::argument(verb, "grace", "is required with missed='skip'"))?;
                if grace < 0 {
                    return Err(Error::argument(verb, "grace", "must be a non-negative duration"));
                }
                Missed::Skip { grace_ms: grace }
            }
            other => {
                let other: String = other.chars().take(40).collect();
                return Err(Error::argument(verb, "missed", format!("must be 'latest', 'all' or 'skip', not {other:?}")));
            }
        };
        if max_missed.is_some() && !matches!(policy, Missed::All { .. }) {
            return Err(Error::argument(verb, "max_missed", "applies to missed='all' only"));
        }
        if grace_ms.is_some() && !matches!(policy, Missed::Skip { .. }) {
            return Err(Error::argument(verb, "grace", "applies to missed='skip' only"));
        }
        Ok(policy)
    }
}

/// What a sweep does for one schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    /// The ticks to enqueue a job for, oldest first.
    pub ticks: Vec<i64>,
    /// The next tick to store: the first after `now` (`None`: the schedule never
    /// ticks again within the calendar).
    pub next: Option<i64>,
    /// Whether some tick due gets no job (the policy dropped it).
    pub dropped: bool,
}

/// The ticks due from the stored next tick `next` to `now`, and the new next
/// tick. With `next` after `now` nothing is due and `next` stays.
pub fn due_ticks(spec: &Spec, next: i64, now: i64, missed: Missed) -> Due {
    if next > now {
        return Due { ticks: Vec::new(), next: Some(next), dropped: false };
    }
    let new_next = spec.next_after(now);
    // The latest tick due; none when the stored next tick is not a tick and no
    // tick lies between it and now (a spec changed without its next tick).
    let Some(latest) = spec.latest_at_or_before(now).filter(|&t| t >= next) else {
        return Due { ticks: Vec::new(), next: new_next, dropped: false };
    };
    let (ticks, dropped) = match missed {
        Missed::Latest => (vec![latest], latest > next),
        Missed::Skip { grace_ms } => {
            if now.saturating_sub(latest) <= grace_ms {
                (vec![latest], latest > next)
            } else {
                (Vec::new(), true)
            }
        }
        Missed::All { max_missed } => {
            let bound = usize::try_from(max_missed).unwrap_or(usize::MAX);
            let mut ticks = vec![latest];
            let mut earlier = previous(spec, latest).filter(|&t| t >= next);
            while let Some(t) = earlier {
                if ticks.len() >= bound {
                    break;
                }
                ticks.push(t);
                earlier = previous(spec, t).filter(|&t| t >= next);
            }
            ticks.reverse();
            (ticks, earlier.is_some())
        }
    };
    Due { ticks, next: new_next, dropped }
}

/// The tick before `tick`.
fn previous(spec: &Spec, tick: i64) -> Option<i64> {
    spec.latest_at_or_before(tick.checked_sub(1)?)
}
