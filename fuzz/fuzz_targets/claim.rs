//! CLAIM (SPEC §7) fed any replies, flat only or not, hinted or not (the
//! fuzzer's `LRANGE` replies are `m0`, `m1`, …, so a hint of their first ids
//! often holds): see `emq_fuzz` for the properties.

#![no_main]

use emq_fuzz::{drive, queue, Replies, Unstructured};
use emq_plan::jobs::claim::Claim;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let n = if u.ratio(1, 16).unwrap_or(false) { 64 } else { u.int_in_range(1..=6u64).unwrap_or(1) };
    let lease_ms = u.arbitrary::<u64>().unwrap_or(1).max(1);
    let tokens: Vec<Vec<u8>> = (0..n).map(|i| format!("t{i}").into_bytes()).collect();
    let flat_only = u.arbitrary::<bool>().unwrap_or(false);
    let hint: Vec<Vec<u8>> = (0..u.int_in_range(0..=4usize).unwrap_or(0)).map(|i| format!("m{i}").into_bytes()).collect();
    drive(Replies::new(u, &keys, vec![]), || {
        let claim = Claim::new(keys.clone(), n, lease_ms, tokens.clone()).expect("n, lease and tokens are good");
        if flat_only {
            claim.flat_only().hinted(hint.clone())
        } else {
            claim
        }
    });
});
