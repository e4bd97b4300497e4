//! A job's row (`reads::Get`) fed any replies: see `emq_fuzz` for the properties.

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::reads::Get;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let id = name(&mut u);
    let Ok(_) = Get::new(keys.clone(), id.clone()) else { return };
    drive(Replies::new(u, &keys, vec![]), || Get::new(keys.clone(), id.clone()).expect("checked above"));
});
