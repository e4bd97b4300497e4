//! Lanes (SPEC §2, §7): how a lane is read and offered to the ring (`offer`),
//! and the calls that change its control: pause, resume, limit (`lane_control`).

pub mod lane_control;
pub mod offer;
