//! STALLED CHECK (SPEC §6) fed any replies, with and without `max_stalled`: see
//! `emq_fuzz` for the properties.

#![no_main]

use emq_fuzz::{drive, queue, Replies, Unstructured};
use emq_plan::sweep::{Kind, Sweep};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let batch = emq_fuzz::batch(&mut u);
    // Most rows per transaction: often fewer than the batch, so groups follow one another.
    let group = u.int_in_range(1..=4usize).unwrap_or(1);
    let max_stalled = match u.choose_index(6).unwrap_or(0) {
        0 => None,
        1 => Some(u64::MAX),
        2 => u.arbitrary().ok(),
        i => Some(i as u64 - 3),
    };
    // Sometimes the automatic grouping where WATCH grows: groups only past a few watched keys.
    let cap = u.int_in_range(0..=3usize).ok().filter(|&c| c > 0);
    drive(Replies::new(u, &keys, vec![]), || Sweep::grouped(Kind::Stalled { max_stalled }, keys.clone(), batch, group).watch_cap(cap));
});
