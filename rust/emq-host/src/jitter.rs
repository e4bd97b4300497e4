//! The randomness that spreads retries and backoff pauses (`emq_plan::backoff`):
//! a small generator seeded from the operating system. Not for secrets (claim
//! tokens come from the operating system itself, `jobs`).

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of jitter: xorshift64*, seeded from the operating system.
pub struct Jitter(u64);

impl Jitter {
    /// Seeded from the operating system's randomness (the clock where it has none).
    pub fn new() -> Self {
        let seed =
            getrandom::u64().unwrap_or_else(|_| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1));
        Jitter(seed | 1)
    }

    /// xorshift64*: not for secrets, only to spread retries.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
