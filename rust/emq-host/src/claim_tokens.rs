//! Claim tokens: a lease's proof, which `extend`, `complete` and `fail` show.
//! 128 bits each from the operating system's randomness, in hex: a token must
//! not be guessable from another (a late worker's word is refused by it).

use crate::error::{HostError, HostResult};

/// `n` fresh tokens; `call` names the call in the error when the operating
/// system gives no randomness.
pub fn fresh(call: &str, n: usize) -> HostResult<Vec<Vec<u8>>> {
    let mut bytes = vec![0u8; 16 * n];
    getrandom::fill(&mut bytes).map_err(|e| HostError::Server(format!("{call}: no randomness from the operating system: {e}")))?;
    Ok(bytes
        .chunks_exact(16)
        .map(|t| {
            let mut hex = Vec::with_capacity(32);
            emq_plan::numbers::push_hex(&mut hex, t);
            hex
        })
        .collect())
}
