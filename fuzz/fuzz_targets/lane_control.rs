//! Lane control (SPEC §7 "lanes": pause, resume, set limit) fed any replies: see
//! `emq_fuzz` for the properties.

#![no_main]

use emq_fuzz::{drive, name, queue, Replies, Unstructured};
use emq_plan::lanes::lane_control::{LaneControl, LaneOp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let keys = queue(&mut u);
    let lane = name(&mut u);
    let op = match u.choose_index(3).unwrap_or(0) {
        0 => LaneOp::Pause,
        1 => LaneOp::Resume,
        _ => LaneOp::Limit(u.arbitrary().unwrap_or(0)),
    };
    let Ok(_) = LaneControl::new(keys.clone(), lane.clone(), op) else { return };
    drive(Replies::new(u, &keys, vec![]), || LaneControl::new(keys.clone(), lane.clone(), op).expect("checked above"));
});
