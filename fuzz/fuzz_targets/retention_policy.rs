//! Reading and setting the retention policy (`jobs::retention::GetRetention`,
//! `SetRetention`) fed any replies and values: see `emq_fuzz` for the
//! properties.

#![no_main]

use emq_fuzz::{drive, queue, Replies, Unstructured};
use emq_plan::jobs::retention::{GetRetention, SetRetention};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    if u.arbitrary::<bool>().unwrap_or(false) {
        drive(Replies::new(u, &keys, vec![]), || GetRetention::new(keys.clone()));
        return;
    }
    let v = |u: &mut Unstructured<'_>| match u.choose_index(5).unwrap_or(0) {
        0 => None,
        1 => Some(-1),
        2 => Some(0),
        3 => Some(5),
        _ => u.arbitrary().ok(),
    };
    let (a, b, c) = (v(&mut u), v(&mut u), v(&mut u));
    let Ok(_) = SetRetention::new(keys.clone(), a, b, c) else { return };
    drive(Replies::new(u, &keys, vec![]), || SetRetention::new(keys.clone(), a, b, c).expect("checked above"));
});
