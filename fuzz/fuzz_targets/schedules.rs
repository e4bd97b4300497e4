//! Schedules (SPEC §14) fed any spec, zone and instants: parsing refuses or
//! accepts, never panics; for an accepted spec `next_after` is strictly
//! increasing and agrees with `latest_at_or_before`, and the ticks a sweep is
//! due lie between the stored tick and now, oldest first, within the policy's
//! bound, with the first tick after now to store next.

#![no_main]

use emq_fuzz::Unstructured;
use emq_plan::schedules::{due_ticks, Missed, Spec};
use libfuzzer_sys::fuzz_target;

/// Pieces of real expressions, so the fuzzer reaches the searches.
const PIECES: &[&str] = &[
    "*", "*/15", "*/7", "0", "1", "2", "5", "29", "30", "31", "59", "60", "1-5", "10-20/5", "MON-FRI", "sun", "7", "JAN", "feb", "DEC",
    "1,15", "L", "?", "5/15", "@daily", "@hourly", "@reboot", "",
];

/// Zones with changes of every kind, and names that are none.
const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Santiago",
    "Antarctica/Troll",
    "Asia/Kathmandu",
    "europe/london",
    "Mars/Olympus",
    "",
];

/// An instant: mostly in years 1900-2200, sometimes anywhere an i64 goes.
fn instant(u: &mut Unstructured<'_>) -> i64 {
    if u.ratio(1, 8).unwrap_or(false) {
        return u.arbitrary().unwrap_or(0);
    }
    u.int_in_range(-2_208_988_800_000i64..=7_258_118_400_000).unwrap_or(0)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let cron: Option<String> = match u.choose_index(3).unwrap_or(0) {
        0 => {
            let n = u.int_in_range(1..=7usize).unwrap_or(5);
            Some((0..n).map(|_| *u.choose(PIECES).unwrap_or(&"*")).collect::<Vec<_>>().join(" "))
        }
        1 => Some(u.arbitrary().unwrap_or_default()),
        _ => None,
    };
    let every: Option<i64> = match (&cron, u.choose_index(4).unwrap_or(0)) {
        (None, 0) => Some(u.arbitrary().unwrap_or(1)),
        (None, _) => Some(u.int_in_range(1..=86_400_000i64).unwrap_or(1)),
        (Some(_), 0) => Some(1000),
        (Some(_), _) => None,
    };
    let tz: Option<String> = match u.choose_index(3).unwrap_or(0) {
        0 => None,
        1 => Some(u.choose(ZONES).unwrap_or(&"UTC").to_string()),
        _ => Some(u.arbitrary().unwrap_or_default()),
    };
    let Ok(spec) = Spec::parse("EMQ.SCHEDULE", cron.as_deref(), every, tz.as_deref()) else { return };

    let start = instant(&mut u);
    let mut t = start;
    for _ in 0..8 {
        let Some(next) = spec.next_after(t) else { break };
        assert!(next > t, "next_after({t}) = {next}");
        assert_eq!(spec.latest_at_or_before(next), Some(next), "a tick is the latest at itself");
        assert_eq!(spec.latest_at_or_before(next - 1), spec.latest_at_or_before(t), "no tick in ({t}, {next})");
        t = next + i64::from(u.int_in_range(0..=2u8).unwrap_or(0)) * 500;
    }

    let Some(next) = spec.next_after(start) else { return };
    let now = next.saturating_add(i64::from(u.arbitrary::<u32>().unwrap_or(0)) * u.int_in_range(1..=1000i64).unwrap_or(1));
    let missed = match u.choose_index(3).unwrap_or(0) {
        0 => Missed::Latest,
        1 => Missed::All { max_missed: u.int_in_range(1..=50u32).unwrap_or(1) },
        _ => Missed::Skip { grace_ms: u.int_in_range(0..=3_600_000i64).unwrap_or(0) },
    };
    let due = due_ticks(&spec, next, now, missed);
    assert!(due.ticks.windows(2).all(|w| w[0] < w[1]), "oldest first, each once");
    assert!(due.ticks.iter().all(|&k| next <= k && k <= now), "between the stored tick and now");
    let bound = match missed {
        Missed::All { max_missed } => max_missed as usize,
        _ => 1,
    };
    assert!(due.ticks.len() <= bound);
    if let Some(&last) = due.ticks.last() {
        assert_eq!(Some(last), spec.latest_at_or_before(now), "the latest tick due is always kept");
    }
    assert_eq!(due.next, spec.next_after(now));
    assert!(due.next.is_none_or(|n| n > now));
});
