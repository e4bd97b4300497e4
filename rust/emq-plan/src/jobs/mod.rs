//! A job's own calls (SPEC §7): ADD (`add`), CLAIM (`claim`), EXTEND, COMPLETE
//! and FAIL of one held job (`settle`), and the retention of done and dead rows
//! that a complete or a death applies (`retention`).

pub mod add;
pub mod claim;
pub mod retention;
pub mod settle;
