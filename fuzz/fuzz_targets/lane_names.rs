//! The queue's lanes (`reads::Lanes`, one `SMEMBERS` of `P lanes`) fed any replies:
//! see `emq_fuzz` for the properties.

#![no_main]

use emq_fuzz::{drive, queue, Replies, Unstructured};
use emq_plan::reads::Lanes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    drive(Replies::new(u, &keys, vec![]), || Lanes::new(keys.clone()));
});
