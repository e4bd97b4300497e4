//! The signal hook: a Python signal that comes while the core waits on the
//! server (the GIL released) runs its handler, as Python's own blocking calls
//! do (PEP 475), and a handler that raises ends the call with its error.

use std::cell::RefCell;

use pyo3::prelude::*;

thread_local! {
    /// What a Python signal handler raised during this thread's call (`signal_raised`).
    static RAISED: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Hands the wire the hook for a read interrupted by a signal.
pub fn install() {
    emq_wire::resp::on_interrupt(signal_raised);
}

/// What a signal handler raised while this thread's call waited, if anything:
/// the call's error then, not the broken read's (`Client::routed`).
pub fn take_raised() -> Option<PyErr> {
    RAISED.with(|r| r.borrow_mut().take())
}

/// The wire's hook (`emq_wire::resp::on_interrupt`): runs the Python signal
/// handlers (only the main thread has any to run), and gives the read up only
/// when one raised (`KeyboardInterrupt`). Else the read goes on: a handler
/// that returns (a worker's `SIGTERM`, which ends its park from another
/// thread; a `SIGCHLD`, a profiler's) does not break the call.
fn signal_raised() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            RAISED.with(|r| *r.borrow_mut() = Some(e));
            true
        }
    })
}
