//! EXTEND and COMPLETE of many jobs in one call (SPEC §7), COMPLETE paired with
//! a flat claim (`emq_plan::batch::complete_and_claim`), and completes and fails together
//! (`emq_plan::batch::settle_many`), with results and error details, fed any
//! replies: see `emq_fuzz` for the properties. The rows' `token` fields
//! sometimes match the workers', so the plans are reached (and their `wait`
//! and `cancel` fields sometimes hold a waiter or `1`).

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::batch::complete_and_claim::Both;
use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::{ExtendMany, Held};
use emq_plan::batch::settle_many::{Fate, SettleMany};
use emq_plan::jobs::claim::Claim;
use emq_plan::protocol::write::ErrorDetail;
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
    let pick = u.int_in_range(0..=3u8).unwrap_or(0);
    if pick == 3 {
        // Each job completed, failed after a delay (0: ready at once), or failed with the backoff.
        let fated: Vec<(Held, Fate)> = jobs
            .iter()
            .map(|j| {
                let detail = u.arbitrary::<bool>().unwrap_or(false).then(|| {
                    Box::new(ErrorDetail {
                        error_type: Some(b"m.E".to_vec()),
                        traceback: u.arbitrary::<bool>().unwrap_or(false).then(Vec::new),
                    })
                });
                let retry = u.arbitrary::<bool>().unwrap_or(true);
                let fate = match u.int_in_range(0..=3u8).unwrap_or(0) {
                    0 => Fate::COMPLETE,
                    1 => Fate::Fail {
                        error: b"e".to_vec(),
                        retry_in_ms: Some(u.int_in_range(0..=2u64).unwrap_or(0)),
                        jitter: 0.5,
                        detail,
                        retry,
                    },
                    2 => Fate::Complete { result: Some(b"{}".to_vec()) },
                    _ => Fate::Fail {
                        error: vec![],
                        retry_in_ms: None,
                        jitter: u.int_in_range(0..=9u8).unwrap_or(0) as f64 / 10.0,
                        detail,
                        retry,
                    },
                };
                (j.clone(), fate)
            })
            .collect();
        let make = || SettleMany::new(keys.clone(), fated.clone());
        let Ok(_) = make() else { return };
        drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
    } else if pick == 2 {
        let claim_n = u.int_in_range(0..=3u64).unwrap_or(0);
        let make = || CompleteMany::new(keys.clone(), jobs.clone());
        let Ok(_) = make() else { return };
        let claim_keys = keys.clone();
        let claim = move || {
            (claim_n > 0).then(|| {
                let tokens = (0..claim_n).map(|i| format!("t{i}").into_bytes()).collect();
                Claim::new(claim_keys.clone(), claim_n, lease_ms.max(1), tokens).expect("n, lease and tokens are good").flat_only()
            })
        };
        drive(Replies::new(u, &keys, hints), || Both::new(claim(), make().expect("checked above")));
    } else if pick == 1 {
        let results: Vec<(Held, Option<Vec<u8>>)> =
            jobs.iter().map(|j| (j.clone(), u.arbitrary::<bool>().unwrap_or(false).then(|| b"r".to_vec()))).collect();
        let make = || CompleteMany::with_results(keys.clone(), results.clone());
        let Ok(_) = make() else { return };
        drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
    } else {
        let make = || ExtendMany::new(keys.clone(), jobs.clone(), lease_ms);
        let Ok(_) = make() else { return };
        drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
    }
});
