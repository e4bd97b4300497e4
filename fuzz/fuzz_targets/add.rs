//! ADD (SPEC §7) fed any replies, for jobs given or generated ids, due now,
//! later or at any time, flat or in lanes: see `emq_fuzz` for the properties.
//! An `HGET` of a row's digest sometimes gives back the request's own digest, so
//! adds that already landed are reached too; jobs with their own keep and with
//! uniqueness keys (whose `GET` may name a job that exists or not) too, and
//! jobs of any priority level (and one past the last).

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::jobs::add::{digest, Add, NewJob, Unique, When};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let n = u.int_in_range(1..=4usize).unwrap_or(1);
    let mut jobs = vec![];
    for j in 0..n {
        jobs.push(NewJob {
            id: u.arbitrary::<bool>().unwrap_or(false).then(|| format!("id{j}").into_bytes()),
            data: u.arbitrary().unwrap_or_default(),
            when: match u.choose_index(4).unwrap_or(0) {
                0 => When::Delay(0),
                1 => When::Delay(u.arbitrary().unwrap_or(0)),
                2 => When::At(u.arbitrary().unwrap_or(0)),
                _ => When::At(1_700_000_000_123),
            },
            lane: u.arbitrary::<bool>().unwrap_or(false).then(|| name(&mut u)),
            max_attempts: u.arbitrary().unwrap_or(1),
            // 10 is out of range: the add refuses it before anything is read.
            priority: u.int_in_range(0..=10u8).unwrap_or(0),
            keep: u.arbitrary::<bool>().unwrap_or(false).then(|| u.int_in_range(-1..=5000i64).unwrap_or(-1)),
            unique: u.arbitrary::<bool>().unwrap_or(false).then(|| Unique {
                key: format!("k{}", u.int_in_range(0..=1u8).unwrap_or(0) + j as u8).into_bytes(),
                window_ms: u.int_in_range(1..=u64::MAX).unwrap_or(1),
            }),
        });
    }
    let gen = (u.arbitrary().unwrap_or(0), u.arbitrary().unwrap_or(0));
    let hints = jobs.iter().map(|j| digest(j).into_bytes()).collect();
    let Ok(_) = Add::new(keys.clone(), jobs.clone(), gen) else { return };
    drive(Replies::new(u, &keys, hints), || Add::new(keys.clone(), jobs.clone(), gen).expect("checked above"));
});
