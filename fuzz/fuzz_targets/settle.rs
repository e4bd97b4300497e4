//! EXTEND, COMPLETE and FAIL (SPEC §7) fed any replies, for flat and lane jobs,
//! retried now, later or after the backoff (any jitter), or dead now: see `emq_fuzz` for the
//! properties. The row's `token` field sometimes matches the worker's, so the
//! plans are reached.

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::jobs::settle::{Action, Settle};
use emq_plan::protocol::write::ErrorDetail;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let lane = u.arbitrary::<bool>().unwrap_or(false).then(|| name(&mut u));
    let action = match u.choose_index(3).unwrap_or(0) {
        0 => Action::Extend { lease_ms: u.arbitrary().unwrap_or(0) },
        1 => Action::Complete { result: u.arbitrary::<bool>().unwrap_or(false).then(|| b"r".to_vec()) },
        _ => Action::Fail {
            error: u.arbitrary().unwrap_or_default(),
            retry_in_ms: match u.choose_index(3).unwrap_or(0) {
                0 => None,
                1 => Some(0),
                _ => u.arbitrary().ok(),
            },
            detail: u
                .arbitrary::<bool>()
                .unwrap_or(false)
                .then(|| Box::new(ErrorDetail { error_type: Some(b"E".to_vec()), traceback: None })),
            retry: u.arbitrary::<bool>().unwrap_or(true),
        },
    };
    let jitter: f64 = u.arbitrary().unwrap_or(0.5);
    let token = b"active".to_vec(); // a word the replies often hold
    let make = || Settle::new(keys.clone(), b"a".to_vec(), token.clone(), lane.clone(), action.clone(), jitter);
    let Ok(_) = make() else { return };
    let hints = vec![b"a".to_vec(), b"L".to_vec()];
    drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
});
