//! Generated job ids: this process's tag and a sequence, which the plan (or
//! the module, given them with the call) makes into ids that are unique and
//! sort by creation (`emq_plan::jobs::add`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::jitter::Jitter;

/// This process's tag, and the first of `count` numbers of its sequence. A
/// call takes them once: a retry keeps the ids it generates.
pub fn next(count: usize) -> (u32, u64) {
    static TAG: OnceLock<u32> = OnceLock::new();
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tag = *TAG.get_or_init(|| getrandom::u32().unwrap_or_else(|_| Jitter::new().next() as u32 ^ std::process::id()));
    (tag, SEQ.fetch_add(count as u64, Ordering::Relaxed))
}
