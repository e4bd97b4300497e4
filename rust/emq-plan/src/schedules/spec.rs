//! When a schedule ticks: its spec (a cron expression in a time zone, or a fixed
//! interval) and the ticks after or before a given instant.
//!
//! Times are ms since the epoch, UTC, as the server's clock reads them (SPEC §4).
//! A cron tick is the first instant at which the zone's clock shows a matching
//! wall clock time or later (`super::zone`); an interval of `p` ms ticks at every
//! multiple of `p` since the epoch, whatever the zone, so every host computes
//! the same ticks, and so the same job ids, with nothing stored.

use jiff::{SignedDuration, Timestamp};

use super::cron::Cron;
use super::zone::{tzdb_version, Zone};
use crate::error::{Error, Result};

/// A schedule's spec, checked.
#[derive(Clone, Debug)]
pub struct Spec {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Cron { expression: String, cron: Cron, zone: Zone },
    Every { period_ms: i64 },
}

impl Spec {
    /// A spec from the arguments a caller gives: `cron` (with `tz`, default UTC)
    /// or `every` (ms), exactly one.
    pub fn parse(verb: &str, cron: Option<&str>, every_ms: Option<i64>, tz: Option<&str>) -> Result<Spec> {
        match (cron, every_ms) {
            (Some(expression), None) => Spec::cron(verb, expression, tz),
            (None, Some(period_ms)) => {
                // An interval ignores zones, so a zone given with one is a
                // misunderstanding to point out, not a setting to drop.
                if tz.is_some_and(|tz| !tz.eq_ignore_ascii_case("UTC")) {
                    return Err(Error::argument(
                        verb,
                        "tz",
                        "applies to cron only: an interval (every) ticks at multiples of its period since the epoch, in no zone",
                    ));
                }
                Spec::every(verb, period_ms)
            }
            (Some(_), Some(_)) => Err(Error::argument(verb, "cron", "and every are exclusive: give one")),
            (None, None) => Err(Error::argument(verb, "cron", "or every is required")),
        }
    }

    /// A cron expression in an IANA time zone (`None`: UTC).
    pub fn cron(verb: &str, expression: &str, tz: Option<&str>) -> Result<Spec> {
        let cron = Cron::parse(expression).map_err(|why| Error::argument(verb, "cron", why))?;
        let zone = match tz {
            None => Zone::utc(),
            Some(name) => Zone::lookup(name).ok_or_else(|| {
                Error::argument(
                    verb,
                    "tz",
                    format!(
                        "{:?} is not a time zone of the IANA database ({}), such as \"Europe/Berlin\" or \"UTC\"",
                        name.chars().take(64).collect::<String>(),
                        tzdb_version()
                    ),
                )
            })?,
        };
        Ok(Spec { kind: Kind::Cron { expression: expression.trim().to_string(), cron, zone } })
    }

    /// A fixed interval of `period_ms` ms, at least 1.
    pub fn every(verb: &str, period_ms: i64) -> Result<Spec> {
        if period_ms < 1 {
            return Err(Error::argument(verb, "every", "must be a positive number of milliseconds"));
        }
        Ok(Spec { kind: Kind::Every { period_ms } })
    }

    /// The expression, as given (trimmed), for a cron spec.
    pub fn cron_expression(&self) -> Option<&str> {
        match &self.kind {
            Kind::Cron { expression, .. } => Some(expression),
            Kind::Every { .. } => None,
        }
    }

    /// The period, for an interval spec.
    pub fn every_ms(&self) -> Option<i64> {
        match self.kind {
            Kind::Every { period_ms } => Some(period_ms),
            Kind::Cron { .. } => None,
        }
    }

    /// The zone's canonical name (`UTC` for an interval).
    pub fn zone_name(&self) -> &'static str {
        match &self.kind {
            Kind::Cron { zone, .. } => zone.name(),
            Kind::Every { .. } => "UTC",
        }
    }

    /// The first tick strictly after `t_ms`, or `None` when there is none that
    /// the calendar (years -9999 to 9999) or an `i64` can hold.
    pub fn next_after(&self, t_ms: i64) -> Option<i64> {
        match &self.kind {
            Kind::Every { period_ms } => in_calendar(t_ms.div_euclid(*period_ms).checked_add(1)?.checked_mul(*period_ms)?),
            Kind::Cron { cron, zone, .. } => {
                let t = Timestamp::from_millisecond(t_ms).ok()?;
                // A tick is after `t` exactly when its wall clock time is after
                // every time the clock has shown by `t` (`Zone::high_water`).
                let shown = zone.high_water(t);
                let from = shown.checked_add(SignedDuration::from_secs(1)).ok()?;
                let local = cron.first_at_or_after(from)?;
                let tick = zone.tick_of(local)?;
                debug_assert!(tick > t, "{local} ticks at {tick}, not after {t}");
                (tick > t).then(|| tick.as_millisecond())
            }
        }
    }

    /// The last tick at or before `t_ms`, or `None` when there is none that the
    /// calendar or an `i64` can hold.
    pub fn latest_at_or_before(&self, t_ms: i64) -> Option<i64> {
        match &self.kind {
            Kind::Every { period_ms } => in_calendar(t_ms.div_euclid(*period_ms).checked_mul(*period_ms)?),
            Kind::Cron { cron, zone, .. } => {
                let t = Timestamp::from_millisecond(t_ms).ok()?;
                let local = cron.last_at_or_before(zone.high_water(t))?;
                let tick = zone.tick_of(local)?;
                debug_assert!(tick <= t, "{local} ticks at {tick}, after {t}");
                (tick <= t).then(|| tick.as_millisecond())
            }
        }
    }
}

/// A tick the calendar holds (years -9999 to 9999), as cron ticks are: so every
/// tick's id has the same bounded length (`super::tick_id`).
fn in_calendar(tick_ms: i64) -> Option<i64> {
    Timestamp::from_millisecond(tick_ms).is_ok().then_some(tick_ms)
}
