//! PROMOTE (SPEC §5) fed any replies: see `emq_fuzz` for the properties.

#![no_main]

use emq_fuzz::{drive, queue, Replies, Unstructured};
use emq_plan::sweep::{Kind, Sweep};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let batch = emq_fuzz::batch(&mut u);
    drive(Replies::new(u, &keys, vec![]), || Sweep::new(Kind::Promote, keys.clone(), batch));
});
