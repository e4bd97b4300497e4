//! The cron dialect of schedules: parsing an expression into its fields, and the
//! matching times of the wall clock before or after a given one.
//!
//! Everything here is civil time (a calendar and a clock with no zone): which
//! instant a matching wall clock time is, across daylight saving changes, is the
//! zone's business (`super::zone`). The dialect is documented in
//! `docs/schedules-arith.md`: 5 fields (minute hour day-of-month month
//! day-of-week) or 6 (second first), `*`, lists, ranges, steps after `*` or a
//! range, three-letter month and weekday names in their own field, the Vixie
//! rule for day-of-month and day-of-week, and the nicknames `@yearly`
//! `@annually` `@monthly` `@weekly` `@daily` `@midnight` `@hourly`.

use jiff::civil::{Date, DateTime};

/// The longest expression accepted: a list of every minute (`0,1,...,59`) is
/// about 170 bytes, so this only stops input that is not an expression.
pub const CRON_MAX_BYTES: usize = 1024;

/// How far a search looks: the Gregorian calendar (weekdays included) repeats
/// every 400 years, so a pattern with no match in 400 years has none at all, and
/// parsing refuses such a pattern. Real patterns match within 28 years.
const SEARCH_YEARS: i16 = 400;

const MONTHS: &[&str] = &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's place in the expression: its name (for messages), its values,
/// and the names its values may be written with (`names[i]` is `min + i`).
struct FieldKind {
    name: &'static str,
    min: u8,
    max: u8,
    names: &'static [&'static str],
}

const SECOND: FieldKind = FieldKind { name: "second", min: 0, max: 59, names: &[] };
const MINUTE: FieldKind = FieldKind { name: "minute", min: 0, max: 59, names: &[] };
const HOUR: FieldKind = FieldKind { name: "hour", min: 0, max: 23, names: &[] };
const DAY: FieldKind = FieldKind { name: "day-of-month", min: 1, max: 31, names: &[] };
const MONTH: FieldKind = FieldKind { name: "month", min: 1, max: 12, names: MONTHS };
// 7 is Sunday too, as in every cron; it is folded into 0 once parsed.
const WEEKDAY: FieldKind = FieldKind { name: "day-of-week", min: 0, max: 7, names: WEEKDAYS };

/// A parsed cron expression: one bit set a field (bit `v` set: value `v` matches).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Whether day-of-month and day-of-week each begin with `*` (Vixie cron's
    /// test): when either does, a day must match both fields; when neither does,
    /// either field is enough.
    days_star: bool,
    weekdays_star: bool,
}

/// The time of day as (hour, minute, second).
type Hms = (u8, u8, u8);

impl Cron {
    /// Parses an expression, or says what is wrong with it (the caller names the
    /// argument and the verb).
    pub fn parse(expression: &str) -> Result<Cron, String> {
        if expression.len() > CRON_MAX_BYTES {
            return Err(format!("is longer than {CRON_MAX_BYTES} bytes"));
        }
        let text = expression.trim();
        let text = match text.strip_prefix('@') {
            Some(nick) => nickname(nick).ok_or_else(|| {
                format!("nickname {:?} is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly", truncated(text))
            })?,
            None => text,
        };
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let (second, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            n => return Err(format!("has {n} fields: give 5 (minute hour day-of-month month day-of-week) or 6 (second first)")),
        };
        let seconds = parse_field(&SECOND, second)?;
        let minutes = parse_field(&MINUTE, rest[0])?;
        let hours = parse_field(&HOUR, rest[1])?;
        let days = parse_field(&DAY, rest[2])?;
        let months = parse_field(&MONTH, rest[3])?;
        let mut weekdays = parse_field(&WEEKDAY, rest[4])?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        let cron = Cron {
            seconds,
            minutes,
            hours,
            days,
            months,
            weekdays,
            days_star: rest[2].starts_with('*'),
            weekdays_star: rest[4].starts_with('*'),
        };
        // A pattern such as `0 0 31 2 *` parses but would never tick: refuse it
        // now rather than store a schedule that silently never runs.
        if !cron.has_a_day() {
            return Err("never matches: no month it allows has a day it allows".to_string());
        }
        Ok(cron)
    }

    /// Whether some day of the calendar matches. With both day fields
    /// restricted, any day of an allowed weekday in an allowed month does; else
    /// an allowed day must exist in an allowed month (February has a 29th), and
    /// then falls on each weekday within 400 years.
    fn has_a_day(&self) -> bool {
        if !(self.days_star || self.weekdays_star) {
            return true;
        }
        let longest: [u8; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        (1..=12u8).any(|m| has(self.months, m) && (1..=longest[usize::from(m - 1)]).any(|d| has(self.days, d)))
    }

    /// Whether a wall clock time matches every field (its sub-second part aside):
    /// the tests' brute-force scans check the searches against it.
    #[cfg(test)]
    pub fn matches(&self, t: DateTime) -> bool {
        self.day_matches(t.date()) && self.time_matches(hms(t))
    }

    #[cfg(test)]
    fn time_matches(&self, (h, m, s): Hms) -> bool {
        has(self.hours, h) && has(self.minutes, m) && has(self.seconds, s)
    }

    /// The day rule of Vixie cron: when day-of-month or day-of-week begins with
    /// `*`, a day must match both; when both are restricted, either one.
    fn day_matches(&self, date: Date) -> bool {
        if !has(self.months, date.month().unsigned_abs()) {
            return false;
        }
        let day = has(self.days, date.day().unsigned_abs());
        let weekday = has(self.weekdays, date.weekday().to_sunday_zero_offset().unsigned_abs());
        if self.days_star || self.weekdays_star {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The first matching whole second at or after `from` (its sub-second part
    /// ignored), within `SEARCH_YEARS`; `None` past the end of the calendar.
    pub fn first_at_or_after(&self, from: DateTime) -> Option<DateTime> {
        let mut date = from.date();
        let mut floor = Some(hms(from));
        let last_year = date.year().saturating_add(SEARCH_YEARS);
        while date.year() <= last_year {
            if !has(self.months, date.month().unsigned_abs()) {
                date = date.last_of_month().tomorrow().ok()?;
                floor = None;
                continue;
            }
            if self.day_matches(date) {
                if let Some((h, m, s)) = self.first_time_at_or_after(floor.unwrap_or((0, 0, 0))) {
                    return Some(at(date, h, m, s));
                }
            }
            date = date.tomorrow().ok()?;
            floor = None;
        }
        None
    }

    /// The last matching whole second at or before `to` (its sub-second part
    /// ignored), within `SEARCH_YEARS`; `None` before the start of the calendar.
    pub fn last_at_or_before(&self, to: DateTime) -> Option<DateTime> {
        let mut date = to.date();
        let mut ceiling = Some(hms(to));
        let first_year = date.year().saturating_sub(SEARCH_YEARS);
        while date.year() >= first_year {
            if !has(self.months, date.month().unsigned_abs()) {
                date = date.first_of_month().yesterday().ok()?;
                ceiling = None;
                continue;
            }
            if self.day_matches(date) {
                if let Some((h, m, s)) = self.last_time_at_or_before(ceiling.unwrap_or((23, 59, 59))) {
                    return Some(at(date, h, m, s));
                }
            }
            date = date.yesterday().ok()?;
            ceiling = None;
        }
        None
    }

    /// The first matching time of day at or after `floor`, on any matching day.
    fn first_time_at_or_after(&self, (h0, m0, s0): Hms) -> Option<Hms> {
        let mut h = next_bit(self.hours, h0)?;
        loop {
            let mut minute = next_bit(self.minutes, if h == h0 { m0 } else { 0 });
            while let Some(m) = minute {
                let from = if h == h0 && m == m0 { s0 } else { 0 };
                if let Some(s) = next_bit(self.seconds, from) {
                    return Some((h, m, s));
                }
                minute = next_bit(self.minutes, m + 1);
            }
            h = next_bit(self.hours, h + 1)?;
        }
    }

    /// The last matching time of day at or before `ceiling`, on any matching day.
    fn last_time_at_or_before(&self, (h0, m0, s0): Hms) -> Option<Hms> {
        let mut h = prev_bit(self.hours, h0)?;
        loop {
            let mut minute = prev_bit(self.minutes, if h == h0 { m0 } else { 59 });
            while let Some(m) = minute {
                let to = if h == h0 && m == m0 { s0 } else { 59 };
                if let Some(s) = prev_bit(self.seconds, to) {
                    return Some((h, m, s));
                }
                minute = m.checked_sub(1).and_then(|m| prev_bit(self.minutes, m));
            }
            h = prev_bit(self.hours, h.checked_sub(1)?)?;
        }
    }
}

/// The expression a nickname stands for (case aside), as Vixie cron has them.
fn nickname(nick: &str) -> Option<&'static str> {
    Some(match nick.to_ascii_lowercase().as_str() {
        "yearly" | "annually" => "0 0 1 1 *",
        "monthly" => "0 0 1 * *",
        "weekly" => "0 0 * * 0",
        "daily" | "midnight" => "0 0 * * *",
        "hourly" => "0 * * * *",
        _ => return None,
    })
}

/// One field: a comma-separated list of `*`, `v`, `a-b`, `*/n` and `a-b/n`.
fn parse_field(kind: &FieldKind, text: &str) -> Result<u64, String> {
    let problem = |what: String| format!("{} field {:?}: {what}", kind.name, truncated(text));
    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(problem("has an empty list item".to_string()));
        }
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        let (first, last) = if range == "*" {
            (kind.min, kind.max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (value(kind, a).map_err(problem)?, value(kind, b).map_err(problem)?);
            if a > b {
                return Err(problem(format!("range {range:?} runs backwards")));
            }
            (a, b)
        } else {
            if step.is_some() {
                return Err(problem(format!("a step needs `*` or a range before it, as in \"*/n\" or \"{range}-{}/n\"", kind.max)));
            }
            let v = value(kind, range).map_err(problem)?;
            (v, v)
        };
        let span = kind.max - kind.min + 1;
        let step = match step {
            None => 1,
            Some(s) => match s.parse::<u8>() {
                Ok(n) if (1..=span).contains(&n) && s.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return Err(problem(format!("step {s:?} must be an integer from 1 to {span}"))),
            },
        };
        let mut v = first;
        while v <= last {
            bits |= 1 << v;
            v = match v.checked_add(step) {
                Some(next) => next,
                None => break,
            };
        }
    }
    Ok(bits)
}

/// One value of a field: digits, or a name of the field (case aside).
fn value(kind: &FieldKind, text: &str) -> Result<u8, String> {
    if !text.is_empty() && text.len() <= 3 && text.bytes().all(|b| b.is_ascii_digit()) {
        let v: u8 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
        if v < kind.min || v > kind.max {
            return Err(format!("{v} is out of range {}-{}", kind.min, kind.max));
        }
        return Ok(v);
    }
    if let Some(i) = kind.names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
        // `names` has at most 12 entries, so the index fits a u8.
        return Ok(kind.min + u8::try_from(i).unwrap_or(0));
    }
    Err(if kind.names.is_empty() {
        format!("{:?} is not a number from {} to {}", truncated(text), kind.min, kind.max)
    } else {
        format!(
            "{:?} is not a number from {} to {} or a {} name ({}-{})",
            truncated(text),
            kind.min,
            kind.max,
            kind.name,
            kind.names[0],
            kind.names[kind.names.len() - 1]
        )
    })
}

/// At most 40 characters of user input, for a message.
fn truncated(text: &str) -> &str {
    match text.char_indices().nth(40) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

fn has(bits: u64, v: u8) -> bool {
    v < 64 && bits & (1 << v) != 0
}

/// The smallest set value at or above `from`.
fn next_bit(bits: u64, from: u8) -> Option<u8> {
    let above = bits.checked_shr(u32::from(from))?.checked_shl(u32::from(from))?;
    (above != 0).then(|| above.trailing_zeros() as u8)
}

/// The largest set value at or below `to`.
fn prev_bit(bits: u64, to: u8) -> Option<u8> {
    let below = if to >= 63 { bits } else { bits & ((1u64 << (to + 1)) - 1) };
    (below != 0).then(|| 63 - below.leading_zeros() as u8)
}

fn hms(t: DateTime) -> Hms {
    (t.hour().unsigned_abs(), t.minute().unsigned_abs(), t.second().unsigned_abs())
}

fn at(date: Date, h: u8, m: u8, s: u8) -> DateTime {
    // Every value comes from a field's bits, which hold hours below 24 and
    // minutes and seconds below 60, so the casts keep them.
    date.at(h as i8, m as i8, s as i8, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn dt(s: &str) -> DateTime {
        s.parse().unwrap()
    }

    fn next(expr: &str, from: &str) -> String {
        Cron::parse(expr).unwrap().first_at_or_after(dt(from)).unwrap().to_string()
    }

    fn prev(expr: &str, to: &str) -> String {
        Cron::parse(expr).unwrap().last_at_or_before(dt(to)).unwrap().to_string()
    }

    #[test]
    fn fields_lists_ranges_steps() {
        let c = Cron::parse("5,10-12,*/20 * * * *").unwrap();
        let minutes: Vec<u8> = (0..60).filter(|&m| has(c.minutes, m)).collect();
        assert_eq!(minutes, vec![0, 5, 10, 11, 12, 20, 40]);
        let c = Cron::parse("*/15 0 10-20/5 * * *").unwrap();
        let seconds: Vec<u8> = (0..60).filter(|&s| has(c.seconds, s)).collect();
        assert_eq!(seconds, vec![0, 15, 30, 45], "6 fields: the first is seconds");
        let hours: Vec<u8> = (0..24).filter(|&h| has(c.hours, h)).collect();
        assert_eq!(hours, vec![10, 15, 20], "the third of 6 fields is hours");
        // With 5 fields the seconds are 0 alone.
        assert_eq!(Cron::parse("* * * * *").unwrap().seconds, 1);
    }

    #[test]
    fn names_in_their_own_field_only() {
        let c = Cron::parse("0 0 * jan-Mar,DEC mon-fri").unwrap();
        assert_eq!(c, Cron::parse("0 0 * 1-3,12 1-5").unwrap());
        // A broken parser that replaces names across the whole expression reads
        // MON in the month field as January, and JAN in the weekday field as Monday.
        assert!(Cron::parse("0 0 * MON *").unwrap_err().contains("month field \"MON\""));
        assert!(Cron::parse("0 0 * * JAN").unwrap_err().contains("day-of-week field \"JAN\""));
        assert!(Cron::parse("0 0 * JANUARY *").is_err(), "three-letter names only");
    }

    #[test]
    fn sunday_is_0_and_7() {
        assert_eq!(Cron::parse("0 0 * * 7").unwrap(), Cron::parse("0 0 * * 0").unwrap());
        assert_eq!(Cron::parse("0 0 * * 5-7").unwrap(), Cron::parse("0 0 * * 0,5,6").unwrap());
        assert_eq!(Cron::parse("0 0 * * sun").unwrap(), Cron::parse("0 0 * * 0").unwrap());
    }

    #[test]
    fn nicknames() {
        for (nick, expr) in [
            ("@yearly", "0 0 1 1 *"),
            ("@annually", "0 0 1 1 *"),
            ("@monthly", "0 0 1 * *"),
            ("@weekly", "0 0 * * 0"),
            ("@daily", "0 0 * * *"),
            ("@midnight", "0 0 * * *"),
            ("@HOURLY", "0 * * * *"),
        ] {
            assert_eq!(Cron::parse(nick).unwrap(), Cron::parse(expr).unwrap(), "{nick}");
        }
        assert!(Cron::parse("@reboot").unwrap_err().contains("is not one of @yearly"));
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        for (expr, says) in [
            ("", "has 0 fields"),
            ("* * * *", "has 4 fields: give 5"),
            ("* * * * * * *", "has 7 fields"),
            ("60 * * * *", "minute field \"60\": 60 is out of range 0-59"),
            ("* 24 * * *", "hour field \"24\": 24 is out of range 0-23"),
            ("* * 0 * *", "day-of-month field \"0\": 0 is out of range 1-31"),
            ("* * * 13 *", "month field \"13\": 13 is out of range 1-12"),
            ("* * * * 8", "day-of-week field \"8\": 8 is out of range 0-7"),
            ("61 * * * * *", "second field \"61\""),
            ("*/0 * * * *", "step \"0\" must be an integer from 1 to 60"),
            ("*/61 * * * *", "step \"61\" must be an integer from 1 to 60"),
            ("*/+5 * * * *", "step \"+5\""),
            ("5/15 * * * *", "a step needs `*` or a range before it"),
            ("50-10 * * * *", "range \"50-10\" runs backwards"),
            ("1,,2 * * * *", "has an empty list item"),
            ("x * * * *", "\"x\" is not a number from 0 to 59"),
            ("* * * * FOO", "\"FOO\" is not a number from 0 to 7 or a day-of-week name (SUN-SAT)"),
            ("* * L * *", "day-of-month field \"L\""),
            ("* * * * 5#3", "day-of-week field \"5#3\""),
            ("? * * * *", "minute field \"?\""),
            ("0 0 31 2 *", "never matches"),
            ("0 0 30,31 2 *", "never matches"),
        ] {
            let got = Cron::parse(expr).unwrap_err();
            assert!(got.contains(says), "{expr:?}: {got:?} should contain {says:?}");
        }
        assert!(Cron::parse(&"1,".repeat(600)).unwrap_err().contains("longer than 1024 bytes"));
    }

    #[test]
    fn vixie_rule_for_day_of_month_and_day_of_week() {
        // Both restricted: either is enough (the 13th, or any Friday).
        let c = Cron::parse("0 0 13 * 5").unwrap();
        assert!(c.day_matches(date(2025, 6, 13)), "a Friday the 13th");
        assert!(c.day_matches(date(2025, 5, 13)), "a Tuesday the 13th");
        assert!(c.day_matches(date(2025, 5, 16)), "a Friday the 16th");
        assert!(!c.day_matches(date(2025, 5, 14)));
        // One field begins with `*`: both must match (as in Vixie cron, `*/2` counts).
        let c = Cron::parse("0 0 */2 * 1").unwrap();
        assert!(c.day_matches(date(2025, 6, 9)), "a Monday on an odd day");
        assert!(!c.day_matches(date(2025, 6, 16)), "a Monday on an even day");
        assert!(!c.day_matches(date(2025, 6, 11)), "an odd day that is not a Monday");
        let c = Cron::parse("0 0 13 * *").unwrap();
        assert!(!c.day_matches(date(2025, 5, 16)), "weekday `*` adds no day");
    }

    #[test]
    fn never_matching_patterns_are_refused_and_only_those() {
        for expr in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30,31 FEB */2"] {
            assert!(Cron::parse(expr).unwrap_err().starts_with("never matches"), "{expr}");
        }
        // Each accepted one has a match, found by the search itself.
        let probe = date(2000, 1, 1).at(0, 0, 0, 0);
        for expr in ["0 0 29 2 *", "0 0 31 4,5 *", "0 0 31 2 1", "0 0 */31 2 1", "0 0 29 2 */7", "0 0 30 2 MON"] {
            let c = Cron::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
            assert!(c.first_at_or_after(probe).is_some(), "{expr}");
        }
    }

    #[test]
    fn searches_forward() {
        assert_eq!(next("30 2 * * *", "2025-03-30T02:30:00"), "2025-03-30T02:30:00", "at or after");
        assert_eq!(next("30 2 * * *", "2025-03-30T02:30:00.5"), "2025-03-30T02:30:00", "sub-second part ignored");
        assert_eq!(next("30 2 * * *", "2025-03-30T02:30:01"), "2025-03-31T02:30:00");
        assert_eq!(next("0 0 29 2 *", "2025-01-01T00:00:00"), "2028-02-29T00:00:00");
        assert_eq!(next("0 0 29 2 *", "2097-01-01T00:00:00"), "2104-02-29T00:00:00", "2100 is no leap year");
        assert_eq!(next("0 0 31 * *", "2025-04-01T00:00:00"), "2025-05-31T00:00:00", "April has 30 days");
        assert_eq!(next("59 23 31 12 *", "2025-12-31T23:59:01"), "2026-12-31T23:59:00");
        assert_eq!(next("0 0 1 1 *", "2025-12-31T23:59:59"), "2026-01-01T00:00:00", "a year end");
        assert_eq!(next("*/15 * * * * *", "2025-12-31T23:59:46"), "2026-01-01T00:00:00");
        assert_eq!(next("10 5,20 * * * *", "2025-06-01T10:20:11"), "2025-06-01T11:05:10", "next hour's first minute");
        assert_eq!(next("0 0 * * 1", "2025-06-10T00:00:00"), "2025-06-16T00:00:00", "next Monday");
    }

    #[test]
    fn searches_backward() {
        assert_eq!(prev("30 2 * * *", "2025-03-30T02:30:00"), "2025-03-30T02:30:00", "at or before");
        assert_eq!(prev("30 2 * * *", "2025-03-30T02:29:59"), "2025-03-29T02:30:00");
        assert_eq!(prev("0 0 29 2 *", "2104-02-28T00:00:00"), "2096-02-29T00:00:00");
        assert_eq!(prev("0 0 31 * *", "2025-05-30T00:00:00"), "2025-03-31T00:00:00");
        assert_eq!(prev("0 0 1 1 *", "2026-01-01T00:00:00"), "2026-01-01T00:00:00");
        assert_eq!(prev("0 0 1 1 *", "2025-12-31T23:59:59"), "2025-01-01T00:00:00", "a year back");
        assert_eq!(prev("10 5,20 * * * *", "2025-06-01T10:05:09"), "2025-06-01T09:20:10", "previous hour's last minute");
        assert_eq!(prev("*/15 * * * * *", "2026-01-01T00:00:14"), "2026-01-01T00:00:00");
    }

    #[test]
    fn searches_agree_with_a_scan() {
        // Both searches against a second-by-second scan over a day of a busy
        // pattern and a sparse one.
        for expr in ["*/7 13-15 9-11 * * *", "3-5 */10 * * * *", "0 0 * * * *"] {
            let c = Cron::parse(expr).unwrap();
            let start = dt("2025-06-01T09:00:00");
            let matching: Vec<DateTime> =
                (0..6 * 3600).map(|s| start.checked_add(jiff::SignedDuration::from_secs(s)).unwrap()).filter(|&t| c.matches(t)).collect();
            for w in matching.windows(2) {
                let after = w[0].checked_add(jiff::SignedDuration::from_secs(1)).unwrap();
                assert_eq!(c.first_at_or_after(after), Some(w[1]), "{expr} after {}", w[0]);
                let before = w[1].checked_sub(jiff::SignedDuration::from_secs(1)).unwrap();
                assert_eq!(c.last_at_or_before(before), Some(w[0]), "{expr} before {}", w[1]);
            }
        }
    }

    #[test]
    fn searches_stop_at_the_calendar_ends() {
        let c = Cron::parse("0 0 1 1 *").unwrap();
        assert_eq!(c.first_at_or_after(dt("9999-06-01T00:00:00")), None);
        assert_eq!(Cron::parse("0 0 2 1 *").unwrap().last_at_or_before(dt("-009999-01-01T23:00:00")), None);
    }

    #[test]
    fn bit_helpers() {
        assert_eq!(next_bit(0b1010, 0), Some(1));
        assert_eq!(next_bit(0b1010, 2), Some(3));
        assert_eq!(next_bit(0b1010, 4), None);
        assert_eq!(next_bit(1 << 63, 63), Some(63));
        assert_eq!(next_bit(u64::MAX, 64), None);
        assert_eq!(prev_bit(0b1010, 2), Some(1));
        assert_eq!(prev_bit(0b1010, 0), None);
        assert_eq!(prev_bit(1 << 63, 63), Some(63));
        assert_eq!(prev_bit(1 << 59, 200), Some(59));
    }
}
