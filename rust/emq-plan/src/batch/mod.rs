//! A worker's jobs in one call (SPEC §7): EXTEND, COMPLETE, and COMPLETE and
//! FAIL together of many held jobs (`extend_many`, `complete_many`,
//! `settle_many`), and a group commit that claims in the same transaction
//! (`complete_and_claim`).

pub mod complete_and_claim;
pub mod complete_many;
pub mod extend_many;
pub mod settle_many;
