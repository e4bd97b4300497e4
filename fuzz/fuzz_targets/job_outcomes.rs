//! The calls of SPEC §13 that are not settles, fed any replies: CANCEL of a
//! job in any state, a waiter's registration (AWAIT), PROGRESS of a held job,
//! STATUS of many rows and the read of requests to stop: see `emq_fuzz` for
//! the properties. The rows' `state` often holds one of emq's states and their
//! `wait` a waiter, so every branch is reached.

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::jobs::cancel::Cancel;
use emq_plan::jobs::progress::Progress;
use emq_plan::jobs::waiters::Await;
use emq_plan::reads::cancels::Cancels;
use emq_plan::reads::Status;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let n = u.int_in_range(0..=4usize).unwrap_or(1);
    let ids: Vec<Vec<u8>> = (0..n).map(|i| format!("j{i}").into_bytes()).collect();
    let hints = vec![b"j0".to_vec(), b"w1".to_vec()];
    match u.int_in_range(0..=4u8).unwrap_or(0) {
        0 => drive(Replies::new(u, &keys, hints), || Cancel::new(keys.clone(), b"j0".to_vec()).expect("a good id")),
        1 => drive(Replies::new(u, &keys, hints), || Await::new(keys.clone(), ids.clone(), b"w1".to_vec()).expect("good ids")),
        2 => {
            let lane = u.arbitrary::<bool>().unwrap_or(false).then(|| name(&mut u));
            let value: Vec<u8> = u.arbitrary().unwrap_or_default();
            let make = || Progress::new(keys.clone(), b"j0".to_vec(), b"active".to_vec(), lane.clone(), value.clone());
            let Ok(_) = make() else { return };
            drive(Replies::new(u, &keys, hints), || make().expect("checked above"));
        }
        3 => drive(Replies::new(u, &keys, hints), || Status::new(keys.clone(), ids.clone()).expect("good ids")),
        _ => {
            let since: Option<i64> = u.arbitrary().unwrap_or(None);
            drive(Replies::new(u, &keys, hints), || Cancels::new(keys.clone(), since));
        }
    }
});
