//! The sweeps' wire form (`emq_plan::wire::parse`, the module's argument checks)
//! fed any arguments: it refuses or parses, never panics.

#![no_main]

use emq_fuzz::{arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let args: Vec<Vec<u8>> = if u.arbitrary::<bool>().unwrap_or(false) {
        // Near the real thing: a verb, a count, keys of one queue, the prefix, numbers.
        let words: [&[u8]; 12] = [
            b"EMQ.PROMOTE",
            b"emq.stalled.check",
            b"2",
            b"3",
            b"emq:{q}:schedule",
            b"emq:{q}:pending",
            b"emq:{q}:active",
            b"emq:{q}:dead",
            b"emq:{q}:",
            b"1",
            b"0",
            b"99999999999999999999",
        ];
        let n = u.int_in_range(0..=9usize).unwrap_or(0);
        (0..n)
            .map(|_| match u.choose(&words) {
                Ok(w) => w.to_vec(),
                Err(arbitrary::Error::NotEnoughData) | Err(_) => vec![],
            })
            .collect()
    } else {
        u.arbitrary().unwrap_or_default()
    };
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    if let Ok(req) = emq_plan::wire::parse(&refs) {
        assert!(req.batch > 0, "a parsed batch is positive");
        assert!(emq_plan::names::queue_name_problem(&req.queue).is_none(), "a parsed queue name is good");
    }
});
