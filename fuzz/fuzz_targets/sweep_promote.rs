//! PROMOTE (SPEC §5) fed any replies: see `emq_fuzz` for the properties.

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
    // A bare selection (members without scores) where the host would choose it.
    let bare = u.arbitrary::<bool>().unwrap_or(false);
    // ... read with its rows by SORT (a backlog's promote).
    let sorted = u.arbitrary::<bool>().unwrap_or(false);
    drive(Replies::new(u, &keys, vec![]), || {
        Sweep::grouped(Kind::Promote, keys.clone(), batch, group).bare_selection(bare).sorted_selection(sorted)
    });
});
