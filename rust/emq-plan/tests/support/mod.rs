//! What the conversation tests share: replies made by hand, and the typed
//! writes they expect. Each test file uses what it needs of it.
#![allow(dead_code)]

use emq_plan::protocol::conversation::Step;
use emq_plan::protocol::write::{Counted, LaneField, Members, RowFields, Write};
use emq_plan::{Cmd, Reply};

/// The clock every test's `TIME` gives: 1700000000 s and 123456 µs.
pub const NOW: i64 = 1_700_000_000_123;

pub fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

pub fn time() -> Reply {
    Reply::Array(vec![bulk("1700000000"), bulk("123456")])
}

/// `LRANGE`'s reply.
pub fn list(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| bulk(s)).collect())
}

/// An `HMGET` reply of optional values.
pub fn fields(values: &[Option<&str>]) -> Reply {
    Reply::Array(values.iter().map(|v| v.map(bulk).unwrap_or(Reply::Nil)).collect())
}

/// A lane's control as `HMGET P lanectl:L paused limit active ring` reads it.
pub fn ctl(paused: bool, limit: i64, active: i64, in_ring: bool) -> Reply {
    let flag = |on: bool| Some(if on { "1" } else { "0" });
    let (limit, active) = (limit.to_string(), active.to_string());
    fields(&[flag(paused), Some(&limit), Some(&active), flag(in_ring)])
}

pub fn wrongtype() -> Reply {
    Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() }
}

pub fn cmd(parts: &[&str]) -> Cmd {
    Cmd::from_args(parts)
}

pub fn key(k: &str) -> Vec<u8> {
    format!("emq:{{q}}:{k}").into_bytes()
}

pub fn members(xs: &[&str]) -> Members {
    xs.iter().collect()
}

pub fn id(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

pub fn row(i: &str, fields: RowFields) -> Write {
    Write::SetRow { id: id(i), fields }
}

pub fn lane(l: &str, field: LaneField) -> Write {
    Write::SetLane { lane: id(l), field }
}

pub fn read<T: std::fmt::Debug>(step: Step<T>) -> (Vec<Vec<u8>>, Vec<Cmd>) {
    match step {
        Step::Read { watch, cmds } => (watch, cmds),
        other => panic!("expected a read, got {other:?}"),
    }
}

pub fn exec<T: std::fmt::Debug>(step: Step<T>) -> Vec<Write> {
    match step {
        Step::Exec(w) => w,
        other => panic!("expected the plan, got {other:?}"),
    }
}

/// `HMGET P lanectl:L` of every control field a plan reads (`CTL_FIELDS`: the
/// serving fields, then `lvl:1` to `lvl:9`).
pub fn lanectl_read(lane: &str) -> Cmd {
    let key = format!("emq:{{q}}:lanectl:{lane}");
    Cmd::new("HMGET").arg(key).args(emq_plan::lanes::offer::CTL_FIELDS)
}

/// The per-minute counters' writes of a call at `NOW` (`jobs::counters`): one
/// increment per kind present, then the expiry.
pub fn counted(kinds: &[(Counted, i64)]) -> Vec<Write> {
    let minute = emq_plan::jobs::counters::minute_of(NOW);
    let mut w: Vec<Write> = kinds.iter().map(|&(kind, by)| Write::Count { minute, kind, by }).collect();
    w.push(Write::KeepCounts { minute });
    w
}
