//! The sweeps' plan work, without a server: the time `emq-plan` itself takes to
//! read a thousand rows' worth of replies and plan their writes, for a promote
//! and a stalled check of all-flat rows, per step of the conversation, then to
//! render the writes as the client host sends them (into a buffer kept from
//! call to call) and to drop them (what a host pays on top of the server's
//! work; the module runs the plan in the server and applies the writes itself).
//!
//!     cargo bench -p emq-plan --bench sweep_plan
//!
//! Medians of `ROUNDS` rounds of `REPS` calls each, µs per call (the system's
//! allocator: the module's keeps blocks from call to call and is faster).

use std::time::Instant;

use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::encode_into;
use emq_plan::sweep::{Kind, Sweep};
use emq_plan::{Cmd, Keys, Reply};

const ROWS: usize = 1000;
const REPS: usize = 200;
const ROUNDS: usize = 9;

/// The server's answer to one of the sweep's reads: the selection (every
/// member due), rows with none of the fields read (flat rows), `EXISTS`
/// counts that say they all exist, empty lists.
fn answer(c: &Cmd, ids: &[Vec<u8>]) -> Reply {
    let args = c.to_args();
    match args[0] {
        b"TIME" => Reply::Array(vec![Reply::Bulk(b"1700000000".to_vec()), Reply::Bulk(b"0".to_vec())]),
        b"ZRANGE" => Reply::Array(
            ids.iter().enumerate().flat_map(|(i, id)| [Reply::Bulk(id.clone()), Reply::Double(1_600_000_000_000.0 + i as f64)]).collect(),
        ),
        b"HGET" | b"GET" => Reply::Nil,
        b"HMGET" => Reply::Array(vec![Reply::Nil; args.len() - 2]),
        b"EXISTS" => Reply::Int(i64::try_from(args.len() - 1).unwrap_or(0)),
        b"LLEN" | b"ZCARD" | b"HLEN" => Reply::Int(0),
        other => panic!("unexpected read {}", String::from_utf8_lossy(other)),
    }
}

/// One call: its two reads answered (the time of each `feed` into `t[0]` and
/// `t[1]`), then its writes rendered into `out` (`t[2]`) and dropped (`t[3]`).
fn call(kind: Kind, keys: &Keys, ids: &[Vec<u8>], out: &mut Vec<u8>, t: &mut [f64; 4]) {
    let mut s = Sweep::in_server(kind, keys.clone(), ROWS as u64);
    let mut step = s.start();
    for slot in &mut t[..2] {
        let Step::Read { cmds, .. } = step else { panic!("expected a read") };
        let replies: Vec<Reply> = cmds.iter().map(|c| answer(c, ids)).collect();
        let t0 = Instant::now();
        step = s.feed(&replies).expect("the plan takes the replies");
        *slot += t0.elapsed().as_secs_f64();
    }
    let Step::Exec(writes) = step else { panic!("no transaction after two reads") };
    out.clear();
    let t0 = Instant::now();
    encode_into(keys, &writes, out);
    std::hint::black_box(&out);
    t[2] += t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    drop(std::hint::black_box(writes));
    t[3] += t0.elapsed().as_secs_f64();
}

fn main() {
    let keys = Keys::new(b"bench");
    let ids: Vec<Vec<u8>> = (0..ROWS).map(|i| format!("job-{i:08}").into_bytes()).collect();
    println!("the plan's work for {ROWS} all-flat rows, us a call (medians of {ROUNDS} x {REPS} calls):");
    let mut out = vec![];
    for (name, kind) in [("promote", Kind::Promote), ("stalled", Kind::Stalled { max_stalled: None })] {
        let mut rounds = vec![];
        for _ in 0..ROUNDS {
            let mut t = [0f64; 4];
            for _ in 0..REPS {
                call(kind, &keys, &ids, &mut out, &mut t);
            }
            rounds.push(t.map(|x| x / REPS as f64 * 1e6));
        }
        let median = |i: usize| {
            let mut v: Vec<f64> = rounds.iter().map(|r| r[i]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (sel, rows, render, drop) = (median(0), median(1), median(2), median(3));
        println!(
            "  {name:8} selection read -> row reads {sel:7.1}   rows read -> writes {rows:7.1}   rendered {render:6.1}   dropped {drop:6.1}   total {:7.1}",
            sel + rows + render + drop
        );
    }
}
