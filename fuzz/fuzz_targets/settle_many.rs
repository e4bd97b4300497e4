//! EXTEND and COMPLETE of many jobs in one call (SPEC §7) fed any replies: see
//! `emq_fuzz` for the properties. The rows' `token` fields sometimes match the
//! workers', so the plans are reached.

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::complete_many::CompleteMany;
use emq_plan::extend_many::{ExtendMany, Held};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let n = u.int_in_range(0..=4usize).unwrap_or(1);
    let jobs: Vec<Held> = (0..n)
        .map(|i| Held {
            id: format!("j{i}").into_bytes(),
            token: b"active".to_vec(), // a word the replies often hold
            lane: u.arbitrary::<bool>().unwrap_or(false).then(|| name(&mut u)),
        })
        .collect();
    let lease_ms: u64 = u.arbitrary().unwrap_or(0);
    let hints = vec![b"j0".to_vec(), b"L".to_vec()];
    if u.arbitrary::<bool>().unwrap_or(false) {
        let make = || CompleteMany::new(keys.clone(), jobs.clone());
        let Ok(_) = make() else { return };
        drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
    } else {
        let make = || ExtendMany::new(keys.clone(), jobs.clone(), lease_ms);
        let Ok(_) = make() else { return };
        drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
    }
});
