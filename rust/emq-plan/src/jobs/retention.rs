//! Retention: how long a done row and a dead job are kept, and how many dead jobs,
//! so a queue's memory stays bounded under a steady load.
//!
//! The policy lives on the server, in the hash `P retention`, so every process
//! agrees on it. Its fields are decimal integers read with `numbers::field_int`;
//! a field that is absent, unreadable, or below `-1` counts as its default:
//!
//! - `done_ms`: how long a done row is kept after it completes. `0`: deleted at
//!   once; `-1`: forever. Default [`DONE_MS`] (10 minutes).
//! - `dead_ms`: how long a dead job is kept. `0`: not kept; `-1`: forever.
//!   Default [`DEAD_MS`] (30 days).
//! - `dead_max`: the most dead jobs kept. `-1`: no limit. Default [`DEAD_MAX`].
//!
//! A done row that is kept is listed in `P done` (zset: id -> finished time) and
//! expires (`PEXPIREAT`) when its time is up; COMPLETE drops the index entries
//! of rows that have expired by then.
//!
//! A call that makes `d` jobs dead at `now` trims `P dead` in the same
//! transaction ([`dead_trim`]): with `c` the size of `dead` before the call's
//! adds, `head` its first `d + TRIM_SLACK` (64) entries, and `merged` = `head` with
//! `(now, id)` for each new dead id, in zset order (score, then member bytes),
//! it removes the first `k` entries of `merged`, and deletes their rows, where
//! `k = min(d + TRIM_SLACK, max(count_k, time_k))`, `count_k = max(0, c + d - dead_max)`
//! (`0` with no limit) and `time_k` the number of entries of `merged` scored at
//! or before `now - dead_ms` (`0` when kept forever). At most `TRIM_SLACK` more
//! are removed than the call adds, so a lowered policy takes effect over a few
//! calls, and no call's cost grows with the size of `dead`.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::names::Keys;
use crate::numbers::{field_int, MAX_MS};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{Members, RowFields, Write};

/// The verb of reading and setting the policy.
pub const RETENTION: &str = "EMQ.RETENTION";

/// Default `done_ms`: a done row is kept 10 minutes.
pub const DONE_MS: i64 = 600_000;
/// Default `dead_ms`: a dead job is kept 30 days.
pub const DEAD_MS: i64 = 2_592_000_000;
/// Default `dead_max`: at most 10,000 dead jobs.
pub const DEAD_MAX: i64 = 10_000;

/// The fields of `P retention`, in the order `Retention::from_fields` reads them.
pub const FIELDS: [&str; 3] = ["done_ms", "dead_ms", "dead_max"];

/// How many entries of `dead` a call may remove beyond the `d` it adds.
pub const TRIM_SLACK: usize = 64;

/// The largest value a policy field may hold (it is read back to 15 digits).
pub const MAX_VALUE: i64 = MAX_MS;

/// The effective policy: each field a count or a time in ms, `-1` for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub done_ms: i64,
    pub dead_ms: i64,
    pub dead_max: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { done_ms: DONE_MS, dead_ms: DEAD_MS, dead_max: DEAD_MAX }
    }
}

/// A stored policy value: an integer of at least `-1`, else the default.
fn value(v: Option<&[u8]>, default: i64) -> i64 {
    v.and_then(field_int).filter(|&n| n >= -1).unwrap_or(default)
}

impl Retention {
    /// From the values of `HMGET P retention` with `names` (a subset of
    /// [`FIELDS`], in any order); the fields not named keep their defaults.
    pub fn from_named(names: &[&str], values: &[Option<&[u8]>]) -> Self {
        let mut r = Retention::default();
        for (name, v) in names.iter().zip(values.iter().copied().chain(std::iter::repeat(None))) {
            match *name {
                "done_ms" => r.done_ms = value(v, DONE_MS),
                "dead_ms" => r.dead_ms = value(v, DEAD_MS),
                "dead_max" => r.dead_max = value(v, DEAD_MAX),
                _ => {}
            }
        }
        r
    }

    /// From the values of `HMGET P retention` with all of [`FIELDS`].
    pub fn from_fields(values: &[Option<&[u8]>]) -> Self {
        Retention::from_named(&FIELDS, values)
    }

    /// From the reply of `HMGET P retention names…`: a wrong type is a layout
    /// error, any other error reply a server error.
    pub fn from_reply(verb: &str, keys: &Keys, names: &[&str], r: &Reply) -> Result<Self> {
        match r {
            r if r.is_wrongtype() => Err(wrong_type(verb, &keys.retention())),
            Reply::Error { message, .. } => Err(Error::server(verb, message)),
            Reply::Array(a) if a.len() == names.len() => Ok(Retention::from_named(names, &r.fields())),
            _ => Err(Error::server(verb, "HMGET of the retention gave no fields")),
        }
    }
}

/// `HMGET P retention names…`.
pub fn read(keys: &Keys, names: &[&str]) -> Cmd {
    Cmd::new("HMGET").arg(keys.retention()).args(names)
}

pub fn wrong_type(verb: &str, key: &[u8]) -> Error {
    Error::layout(verb, format!("{} has the wrong type", String::from_utf8_lossy(key)))
}

// ------------------------------------------------------------------ done rows

/// A row that a complete makes done: its id, how long it is kept (its own
/// `keep`, else the queue's `done_ms`: `0` deleted at once, `-1` forever) and
/// its result.
pub struct DoneRow<'a> {
    pub id: &'a [u8],
    pub keep: i64,
    pub result: Option<&'a [u8]>,
}

/// COMPLETE's writes for the row of `id`, done at `now` under `done_ms`, after
/// it has left `active` (see the module doc): deleted at once, or marked done
/// and listed in `P done` (with its expiry unless kept forever).
pub fn done_writes(id: &[u8], now: i64, done_ms: i64, w: &mut Vec<Write>) {
    many_done_writes(&[DoneRow { id, keep: done_ms, result: None }], now, w);
}

/// The writes of many rows done at the same `now` ([`ended_writes`]): a
/// row kept 0 ms is deleted; the others get `state done finished [result]`,
/// lose their lease and expire when their keep is up; then one `ZADD` of them
/// all to `P done` and one trim of its entries older than the longest keep.
/// With every row kept by the queue's `done_ms`, the same keyspace as their
/// completes one after another under that clock: each would list its row at
/// `now` and trim entries older than `now - done_ms`, which none of the new
/// ones is.
pub fn many_done_writes(rows: &[DoneRow<'_>], now: i64, w: &mut Vec<Write>) {
    let rows = rows
        .iter()
        .map(|r| Ended { id: r.id, keep: r.keep, fields: RowFields::Done { finished: now, result: r.result.map(<[u8]>::to_vec) } })
        .collect();
    ended_writes(rows, now, true, |at, ids| Write::ListDone { at, ids }, |before| Write::TrimDone { before }, w);
}

/// A row that ends now, as the retention writes it: its id, how long it is
/// kept (ms: `0` deleted at once, `-1` forever) and the fields it gets.
pub struct Ended<'a> {
    pub id: &'a [u8],
    pub keep: i64,
    pub fields: RowFields,
}

/// The retention writes of rows that end at `now` (done or cancelled), after
/// they have left where they were: a row kept 0 ms is deleted at once; any
/// other gets its fields, loses its lease (`lease`: it had one), expires at
/// `now + keep` (none when kept forever), and is listed in the index (`P done`
/// or `P cancelled`, by `list`) at `now`; then the index drops its entries
/// finished more than the longest positive keep of these rows ago (`trim`),
/// those of rows expired by then (none when every row is kept forever).
pub fn ended_writes(
    rows: Vec<Ended<'_>>,
    now: i64,
    lease: bool,
    list: fn(i64, Members) -> Write,
    trim: fn(i64) -> Write,
    w: &mut Vec<Write>,
) {
    let mut listed: Vec<&[u8]> = vec![];
    let mut longest: Option<i64> = None;
    for Ended { id, keep, fields } in rows {
        if keep == 0 {
            w.push(Write::DeleteRows(Members::one(id)));
            continue;
        }
        w.push(Write::SetRow { id: id.to_vec(), fields });
        if lease {
            w.push(Write::DropLease { id: id.to_vec() });
        }
        if keep > 0 {
            w.push(Write::ExpireRow { id: id.to_vec(), at: now.saturating_add(keep) });
            longest = Some(longest.map_or(keep, |l| l.max(keep)));
        }
        listed.push(id);
    }
    if !listed.is_empty() {
        w.push(list(now, Members::of(&listed)));
    }
    if let Some(keep) = longest {
        w.push(trim(now.saturating_sub(keep)));
    }
}

// ------------------------------------------------------------------ dead jobs

/// The step a call takes once its plan makes `d` jobs dead: `WATCH P dead`
/// (a concurrent trim aborts this call), then the policy, the size of `dead`
/// and its first `d + TRIM_SLACK` entries.
pub fn dead_step<T>(keys: &Keys, d: usize) -> Step<T> {
    let last = (d + TRIM_SLACK - 1).to_string();
    Step::Read {
        watch: vec![keys.dead()],
        cmds: vec![
            read(keys, &DEAD_FIELDS),
            Cmd::new("ZCARD").arg(keys.dead()),
            Cmd::new("ZRANGE").arg(keys.dead()).arg("0").arg(last).arg("WITHSCORES"),
        ],
    }
}

/// The policy fields the dead step reads.
pub const DEAD_FIELDS: [&str; 2] = ["dead_ms", "dead_max"];

/// The first entries of `dead`: (member, score), in zset order.
pub type Head = Vec<(Vec<u8>, f64)>;

/// The replies of [`dead_step`], parsed: the policy, the size of `dead`, its head.
pub fn parse_dead_step(verb: &str, keys: &Keys, replies: &[Reply]) -> Result<(Retention, i64, Head)> {
    let [policy, card, head] = replies else {
        return Err(Error::server(verb, "dead: wrong number of replies"));
    };
    let policy = Retention::from_reply(verb, keys, &DEAD_FIELDS, policy)?;
    for r in [card, head] {
        match r {
            r if r.is_wrongtype() => return Err(wrong_type(verb, &keys.dead())),
            Reply::Error { message, .. } => return Err(Error::server(verb, message)),
            _ => {}
        }
    }
    let card = card.as_int().ok_or_else(|| Error::server(verb, "ZCARD gave no count"))?;
    let head = parse_scored(head).ok_or_else(|| Error::server(verb, "ZRANGE gave no members and scores"))?;
    Ok((policy, card, head))
}

/// `ZRANGE … WITHSCORES` as (member, score) pairs.
pub fn parse_scored(r: &Reply) -> Option<Head> {
    let items = r.as_array()?;
    if items.len() % 2 != 0 {
        return None;
    }
    items
        .chunks_exact(2)
        .map(|p| {
            let score = p[1].as_score().filter(|s| !s.is_nan())?;
            Some((p[0].as_bytes()?.to_vec(), score))
        })
        .collect()
}

/// Redis's zset order: by score as a number, then by member bytes.
fn zset_order(a: &(f64, &[u8]), b: &(f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal).then_with(|| a.1.cmp(b.1))
}

/// The ids a call that makes `new` dead at `now` removes from `dead`, in zset
/// order (see the module doc): `card` is the size of `dead` before the call's
/// adds and `head` its first `new.len() + 64` entries.
pub fn dead_trim(now: i64, new: &[Vec<u8>], policy: &Retention, card: i64, head: &[(Vec<u8>, f64)]) -> Vec<Vec<u8>> {
    let d = new.len();
    if d == 0 {
        return vec![];
    }
    let now_f = now as f64;
    let mut merged: Vec<(f64, &[u8])> = head.iter().take(d + TRIM_SLACK).map(|(m, s)| (*s, m.as_slice())).collect();
    merged.extend(new.iter().map(|id| (now_f, id.as_slice())));
    merged.sort_by(zset_order);
    let count_k = if policy.dead_max >= 0 { card.max(0).saturating_add(d as i64).saturating_sub(policy.dead_max).max(0) } else { 0 };
    let time_k = if policy.dead_ms >= 0 {
        let cut = now.saturating_sub(policy.dead_ms) as f64;
        merged.iter().take_while(|(s, _)| *s <= cut).count() as i64
    } else {
        0
    };
    // Both counts are at least 0.
    let k = usize::try_from(count_k.max(time_k)).unwrap_or(0).min(d + TRIM_SLACK).min(merged.len());
    merged[..k].iter().map(|(_, m)| m.to_vec()).collect()
}

/// The writes of a trim: the ids leave `dead` and their rows are deleted.
pub fn trim_writes(trimmed: &[Vec<u8>], w: &mut Vec<Write>) {
    if trimmed.is_empty() {
        return;
    }
    let ids = Members::of(trimmed);
    w.push(Write::TrimDead(ids.clone()));
    w.push(Write::DeleteRows(ids));
}

/// Parses the dead step's replies and gives the trim's writes.
pub fn trim_from_replies(verb: &str, keys: &Keys, now: i64, new: &[Vec<u8>], replies: &[Reply]) -> Result<Vec<Write>> {
    let (policy, card, head) = parse_dead_step(verb, keys, replies)?;
    let mut w = vec![];
    trim_writes(&dead_trim(now, new, &policy, card, &head), &mut w);
    Ok(w)
}

// ------------------------------------------------------------------ the policy, as calls

/// The effective policy (`P retention` with the defaults filled in).
pub struct GetRetention {
    keys: Keys,
}

impl GetRetention {
    pub fn new(keys: Keys) -> Self {
        GetRetention { keys }
    }
}

impl Conversation for GetRetention {
    type Out = Retention;

    fn verb(&self) -> &'static str {
        RETENTION
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Retention> {
        Step::Read { watch: vec![], cmds: vec![read(&self.keys, &FIELDS)] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Retention>> {
        let [r] = replies else { return Err(Error::server(RETENTION, "wrong number of replies")) };
        Ok(Step::Done(Retention::from_reply(RETENTION, &self.keys, &FIELDS, r)?))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Retention> {
        Err(Error::server(RETENTION, "a read has no EXEC"))
    }
}

/// Sets the fields given (`None`: left as it is); each `-1` (none) or more.
pub struct SetRetention {
    keys: Keys,
    fields: Vec<(&'static str, i64)>,
}

impl SetRetention {
    pub fn new(keys: Keys, done_ms: Option<i64>, dead_ms: Option<i64>, dead_max: Option<i64>) -> Result<Self> {
        let mut fields = vec![];
        for (name, v) in FIELDS.into_iter().zip([done_ms, dead_ms, dead_max]) {
            if let Some(v) = v {
                if !(-1..=MAX_VALUE).contains(&v) {
                    return Err(Error::argument(RETENTION, name, format!("must be -1 (none) or from 0 to {MAX_VALUE}, not {v}")));
                }
                fields.push((name, v));
            }
        }
        Ok(SetRetention { keys, fields })
    }
}

impl Conversation for SetRetention {
    type Out = ();

    fn verb(&self) -> &'static str {
        RETENTION
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<()> {
        if self.fields.is_empty() {
            return Step::Done(());
        }
        Step::Exec(vec![Write::SetRetention(self.fields.clone())])
    }

    fn feed(&mut self, _replies: &[Reply]) -> Result<Step<()>> {
        Err(Error::server(RETENTION, "setting the retention reads nothing"))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        for r in exec {
            check_error(RETENTION, &self.keys.retention(), r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Vec<Vec<u8>> {
        xs.iter().map(|x| x.as_bytes().to_vec()).collect()
    }

    fn head(xs: &[(&str, f64)]) -> Vec<(Vec<u8>, f64)> {
        xs.iter().map(|(m, s)| (m.as_bytes().to_vec(), *s)).collect()
    }

    fn policy(dead_ms: i64, dead_max: i64) -> Retention {
        Retention { dead_ms, dead_max, ..Default::default() }
    }

    #[test]
    fn fields_read_with_defaults() {
        assert_eq!(Retention::from_fields(&[]), Retention::default());
        let r = Retention::from_fields(&[Some(b"0"), Some(b"-1"), Some(b"5")]);
        assert_eq!(r, Retention { done_ms: 0, dead_ms: -1, dead_max: 5 });
        let r = Retention::from_fields(&[Some(b"x"), Some(b"-2"), Some(b"1000000000000000")]);
        assert_eq!(r, Retention::default(), "unreadable, below -1, 16 digits: the defaults");
        let r = Retention::from_named(&["dead_max", "done_ms"], &[Some(b"7"), None]);
        assert_eq!((r.dead_max, r.done_ms, r.dead_ms), (7, DONE_MS, DEAD_MS));
    }

    #[test]
    fn reply_errors() {
        let k = Keys::new(b"q");
        let wrong = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        let e = Retention::from_reply("V", &k, &["done_ms"], &wrong).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Layout);
        assert!(e.message.contains("emq:{q}:retention"), "{e}");
        let e = Retention::from_reply("V", &k, &["done_ms"], &Reply::Int(1)).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Server);
    }

    #[test]
    fn count_trim_takes_the_oldest_first_ties_by_member() {
        let h = head(&[("b", 5.0), ("a", 5.0), ("c", 7.0)]);
        // sorted head as ZRANGE gives it would be a, b, c; the trim sorts anyway
        let got = dead_trim(100, &ids(&["n"]), &policy(-1, 2), 3, &h);
        assert_eq!(got, ids(&["a", "b"]), "3 + 1 - 2 = 2 leave: the two at score 5, by member");
        assert_eq!(dead_trim(100, &ids(&["n"]), &policy(-1, 4), 3, &h), ids(&[]));
        assert_eq!(dead_trim(100, &ids(&["n"]), &policy(-1, -1), 3, &h), ids(&[]));
        assert_eq!(dead_trim(100, &ids(&["z", "m"]), &policy(-1, 0), 3, &h), ids(&["a", "b", "c", "m", "z"]));
    }

    #[test]
    fn time_trim_takes_the_prefix_at_or_before_the_cut() {
        let h = head(&[("a", f64::NEG_INFINITY), ("b", 90.0), ("c", 95.0), ("d", 101.0), ("e", f64::INFINITY)]);
        assert_eq!(dead_trim(100, &ids(&["n"]), &policy(10, -1), 5, &h), ids(&["a", "b"]), "90 <= 100 - 10");
        assert_eq!(dead_trim(100, &ids(&["n"]), &policy(0, -1), 5, &h), ids(&["a", "b", "c", "n"]), "0: not kept, new ones too");
        assert_eq!(dead_trim(100, &ids(&["n"]), &policy(-1, -1), 5, &h), ids(&[]));
        // the larger of the two counts wins
        assert_eq!(dead_trim(100, &ids(&["n"]), &policy(10, 3), 5, &h), ids(&["a", "b", "c"]));
    }

    #[test]
    fn a_call_removes_at_most_64_more_than_it_adds() {
        let h: Vec<(Vec<u8>, f64)> = (0..100).map(|i| (format!("o{i:03}").into_bytes(), f64::from(i))).collect();
        let got = dead_trim(1000, &ids(&["n1", "n2"]), &policy(0, 0), 5000, &h);
        assert_eq!(got.len(), 66);
        assert_eq!(got[0], b"o000".to_vec());
        assert_eq!(got[65], b"o065".to_vec());
        assert!(dead_trim(1000, &[], &policy(0, 0), 5000, &h).is_empty(), "no deaths, no trim");
    }

    #[test]
    fn done_writes_follow_the_policy() {
        let id = || b"a".to_vec();
        let members = |xs: &[&str]| xs.iter().collect::<Members>();
        let mut w = vec![];
        done_writes(b"a", 1000, 0, &mut w);
        assert_eq!(w, vec![Write::DeleteRows(members(&["a"]))], "0: deleted at once, not listed");
        let kept = |w: &mut Vec<Write>| {
            w.insert(0, Write::SetRow { id: id(), fields: RowFields::Done { finished: 1000, result: None } });
            w.insert(1, Write::DropLease { id: id() });
        };
        let mut w = vec![];
        done_writes(b"a", 1000, 50, &mut w);
        let mut want = vec![
            Write::ExpireRow { id: id(), at: 1050 },
            Write::ListDone { at: 1000, ids: members(&["a"]) },
            Write::TrimDone { before: 950 },
        ];
        kept(&mut want);
        assert_eq!(w, want, "kept 50 ms: expires then, listed, and the expired entries trimmed");
        let mut w = vec![];
        done_writes(b"a", 1000, -1, &mut w);
        let mut want = vec![Write::ListDone { at: 1000, ids: members(&["a"]) }];
        kept(&mut want);
        assert_eq!(w, want, "kept forever: no expiry, nothing trimmed");
        let rows = |keep: i64| [DoneRow { id: b"a", keep, result: None }, DoneRow { id: b"b", keep, result: None }];
        let mut w = vec![];
        many_done_writes(&rows(0), 7, &mut w);
        assert_eq!(w, vec![Write::DeleteRows(members(&["a"])), Write::DeleteRows(members(&["b"]))], "one DEL a row");
        let mut w = vec![];
        many_done_writes(&rows(-1), 7, &mut w);
        assert_eq!(w.last(), Some(&Write::ListDone { at: 7, ids: members(&["a", "b"]) }), "one ZADD for the batch");
        assert_eq!(w.len(), 5);
        // Each row its own keep and result: the trim goes by the longest keep.
        let mut w = vec![];
        let r = [DoneRow { id: b"a", keep: 10, result: Some(b"1") }, DoneRow { id: b"b", keep: 30, result: None }];
        many_done_writes(&r, 7, &mut w);
        assert_eq!(w[0], Write::SetRow { id: id(), fields: RowFields::Done { finished: 7, result: Some(b"1".to_vec()) } });
        assert_eq!((&w[2], w.last()), (&Write::ExpireRow { id: id(), at: 17 }, Some(&Write::TrimDone { before: -23 })));
    }

    /// A death's trim: the ids the policy removes leave `dead` and their rows
    /// go, in one `ZREM` and one `DEL`; a trim of nothing writes nothing. A
    /// broken trim that left the rows would leak them for good (nothing else
    /// lists them).
    #[test]
    fn a_trim_removes_the_entries_and_deletes_their_rows() {
        let k = Keys::new(b"q");
        // dead_max 1, two kept already, one new death at 100: the two oldest go.
        let replies = [
            Reply::Array(vec![Reply::Nil, Reply::Bulk(b"1".to_vec())]),
            Reply::Int(2),
            Reply::Array(["o1", "5", "o2", "6"].iter().map(|s| Reply::Bulk(s.as_bytes().to_vec())).collect()),
        ];
        let w = trim_from_replies("V", &k, 100, &ids(&["n"]), &replies).unwrap();
        let gone: Members = ["o1", "o2"].into_iter().collect();
        assert_eq!(w, vec![Write::TrimDead(gone.clone()), Write::DeleteRows(gone)]);
        let mut w = vec![];
        trim_writes(&[], &mut w);
        assert!(w.is_empty());
        match dead_step::<()>(&k, 2) {
            Step::Read { watch, cmds } => {
                assert_eq!(watch, vec![k.dead()], "a concurrent trim aborts this one");
                assert_eq!(cmds[2], Cmd::from_args(["ZRANGE", "emq:{q}:dead", "0", "65", "WITHSCORES"]), "d + TRIM_SLACK entries");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn scored_replies() {
        let b = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        let r = Reply::Array(vec![b("a"), b("-inf"), b("b"), b("1.5"), b("c"), b("inf")]);
        assert_eq!(parse_scored(&r).unwrap(), head(&[("a", f64::NEG_INFINITY), ("b", 1.5), ("c", f64::INFINITY)]));
        assert!(parse_scored(&Reply::Array(vec![b("a")])).is_none());
        assert!(parse_scored(&Reply::Array(vec![b("a"), b("x")])).is_none());
        assert!(parse_scored(&Reply::Array(vec![b("a"), b("nan")])).is_none());
    }

    #[test]
    fn set_retention_checks_every_value_first() {
        let k = || Keys::new(b"q");
        let e = SetRetention::new(k(), Some(5), Some(-2), None).err().unwrap();
        assert_eq!(e.kind, crate::error::ErrorKind::Argument);
        assert!(e.message.starts_with("EMQ.RETENTION: dead_ms"), "{e}");
        assert!(SetRetention::new(k(), None, None, Some(MAX_VALUE + 1)).is_err());
        let mut s = SetRetention::new(k(), Some(0), None, Some(-1)).unwrap();
        assert_eq!(s.start(), Step::Exec(vec![Write::SetRetention(vec![("done_ms", 0), ("dead_max", -1)])]));
        assert_eq!(SetRetention::new(k(), None, None, None).unwrap().start(), Step::Done(()));
    }
}
