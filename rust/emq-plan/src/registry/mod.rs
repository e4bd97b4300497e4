//! The registry (SPEC §2, §17): the queues that have been used and the
//! workers alive, under one tag no queue can have (`R = emq:{emq registry}:`,
//! `names::REGISTRY`), so the dashboard, `emq queues` and `emq workers` list
//! them without `SCAN` (which, in a cluster, reads one node). A registry call
//! is routed by that tag, as a queue's calls are by the queue's.

pub mod queues;
pub mod workers;

pub use queues::{QueueNames, RegisterQueue, QUEUES, REGISTER};
pub use workers::{WorkerBeat, WorkerFields, WorkerLeave, Workers, MAX_WORKERS, WORKERS, WORKER_BEAT, WORKER_LEAVE};
