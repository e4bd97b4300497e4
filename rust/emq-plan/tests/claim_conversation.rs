//! The claim conversation driven with made-up replies. No server.

use emq_plan::jobs::claim::Claim;
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::{ErrorKind, Keys, Reply};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn list(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| bulk(s)).collect())
}

fn fields(values: &[Option<&str>]) -> Reply {
    Reply::Array(values.iter().map(|v| v.map(bulk).unwrap_or(Reply::Nil)).collect())
}

/// A row as a claim reads it: `state`, `attempts`, `max_attempts`, `data`.
fn row(state: &str) -> Reply {
    fields(&[Some(state), Some("0"), Some("3"), Some("d")])
}

fn expect_read<T: std::fmt::Debug>(step: Step<T>) {
    assert!(matches!(step, Step::Read { .. }), "expected a read, got {step:?}");
}

/// Lanes L (a, b) and M (c, d) in the ring, nothing flat, claim(2). The first
/// read of `a` finds it not `pending` (claimed, say), so the claim turns to c and b
/// and skips a's turn; when it reads the rows again under the watch, `a` is
/// `pending` again (recovered meanwhile). Planning now would take a, c and b: more
/// than 2, with a slot nobody counted. It is a conflict, a new call.
#[test]
fn a_skipped_lane_row_that_became_pending_is_a_conflict() {
    let mut c = Claim::new(Keys::new(b"q"), 2, 1000, vec![b"t1".to_vec(), b"t2".to_vec()]).unwrap();
    expect_read(c.start());
    let time = Reply::Array(vec![bulk("1700000000"), bulk("123456")]);
    expect_read(c.feed(&[time, list(&[]), list(&["L", "M"])]).unwrap());
    let in_ring = fields(&[None, None, None, Some("1")]);
    let rows = [
        list(&[]),
        list(&["L", "M"]),
        in_ring.clone(),
        Reply::Int(2),
        list(&["a", "b"]),
        in_ring,
        Reply::Int(2),
        list(&["c", "d"]),
        Reply::Int(0),
        Reply::Int(0),
    ];
    expect_read(c.feed(&rows).unwrap());
    // a and c: a is not pending.
    expect_read(c.feed(&[row("active"), row("pending"), Reply::Int(2)]).unwrap());
    // a, c and b: a is pending again.
    let e = c.feed(&[row("pending"), row("pending"), row("pending"), Reply::Int(3)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
}
