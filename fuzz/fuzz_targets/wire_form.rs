//! The module's wire forms (`emq_plan::wire::parse` for the sweeps,
//! `parse_job` for the claims, completes, extends, settles and adds, with
//! their results, errors, keeps and uniqueness keys in the v2 forms: the
//! module's argument checks) fed any arguments: they refuse or parse, never
//! panic, and a call built back from what it parsed to parses to the same (a
//! lease as the client host caps it).

#![no_main]

use emq_fuzz::{arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let args: Vec<Vec<u8>> = if u.arbitrary::<bool>().unwrap_or(false) {
        // Near the real thing: a verb, a count, keys of one queue, the prefix, numbers.
        let words: [&[u8]; 30] = [
            b"EMQ.PROMOTE",
            b"emq.stalled.check",
            b"EMQ.CLAIM",
            b"EMQ.COMPLETE",
            b"EMQ.EXTEND",
            b"EMQ.SETTLE",
            b"EMQ.ADD",
            b"c",
            b"r0",
            b"b3",
            b"b999999",
            b"d5",
            b"a-5",
            b"d18446744073709551615",
            b"",
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
            b"v2",
            b"n",
            b"v{}",
            b"-1",
            b"k",
        ];
        let n = u.int_in_range(0..=16usize).unwrap_or(0);
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
    if let Ok(req) = emq_plan::wire::parse_job(&refs) {
        // Built back as the client host sends it, it parses to the same request.
        use emq_plan::wire::JobRequest;
        let (c, want) = match &req {
            JobRequest::Claim { queue, n, lease_ms, tokens } => {
                assert!(*n > 0 && *lease_ms > 0 && tokens.len() as u64 == *n);
                let capped = (*lease_ms).min(emq_plan::numbers::MAX_MS.unsigned_abs());
                let want = JobRequest::Claim { queue: queue.clone(), n: *n, lease_ms: capped, tokens: tokens.clone() };
                (emq_plan::wire::claim_cmd(&emq_plan::Keys::new(queue), *n, *lease_ms, tokens), want)
            }
            JobRequest::Complete { queue, jobs } => {
                assert!(!jobs.is_empty());
                (emq_plan::wire::complete_cmd(&emq_plan::Keys::new(queue), jobs), req.clone())
            }
            JobRequest::Extend { queue, lease_ms, jobs } => {
                assert!(!jobs.is_empty() && *lease_ms > 0);
                let capped = (*lease_ms).min(emq_plan::numbers::MAX_MS.unsigned_abs());
                let want = JobRequest::Extend { queue: queue.clone(), lease_ms: capped, jobs: jobs.clone() };
                (emq_plan::wire::extend_cmd(&emq_plan::Keys::new(queue), *lease_ms, jobs), want)
            }
            JobRequest::Settle { queue, jobs } => {
                assert!(!jobs.is_empty());
                (emq_plan::wire::settle_cmd(&emq_plan::Keys::new(queue), jobs), req.clone())
            }
            JobRequest::Add { queue, gen, jobs } => {
                assert!(!jobs.is_empty());
                (emq_plan::wire::add_cmd(&emq_plan::Keys::new(queue), *gen, jobs), req.clone())
            }
        };
        assert_eq!(emq_plan::wire::parse_job(&c.to_args()), Ok(want));
    }
});
