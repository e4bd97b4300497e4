//! What a sweep reads and plans (SPEC §5, §6): its kind and verb, the rows it
//! selected, the lanes and lists it touches, the write plan and the reply. Shared
//! by the plans (`promote`, `stalled`) and the conversation that reads for them.

use crate::jobs::ending::{Ending, ExtrasRead};
use crate::lanes::offer::LaneCtl;
use crate::protocol::write::Write;

pub const PROMOTE: &str = "EMQ.PROMOTE";
pub const STALLED: &str = "EMQ.STALLED.CHECK";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Promote,
    /// `max_stalled: None`: nothing dies (the worker's `reap`).
    Stalled {
        max_stalled: Option<u64>,
    },
}

impl Kind {
    pub fn verb(self) -> &'static str {
        match self {
            Kind::Promote => PROMOTE,
            Kind::Stalled { .. } => STALLED,
        }
    }
}

/// What the host does next in a sweep.
pub type Step = crate::protocol::conversation::Step<Outcome>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Ids taken out of `schedule`, ghosts included.
    Promoted(i64),
    Stalled {
        recovered: Vec<Vec<u8>>,
        dead: Vec<Vec<u8>>,
    },
}

/// One selected row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    Ghost,
    /// `lane: None`: a flat row. `ending`: what a stalled check reads of its
    /// waiters, cancel and keep (`jobs::ending`; a promote reads none).
    Live {
        lane: Option<Vec<u8>>,
        stalls: i64,
        ending: Ending,
        /// Its priority level (SPEC §15: the row's `priority`, absent: 0).
        priority: u8,
    },
}

/// What a plan knows about one lane it touches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lane {
    pub name: Vec<u8>,
    pub ctl: LaneCtl,
    /// The lane list's length as read.
    pub len: i64,
}

/// Whether each of the queue's lists has its type of SPEC §2 (or is absent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Types {
    pub pending: bool,
    pub ring: bool,
    pub wake: bool,
    pub dead: bool,
}

impl Types {
    pub const ALL: Types = Types { pending: true, ring: true, wake: true, dead: true };
}

/// Everything a plan is built from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Read {
    pub now: i64,
    /// The µs the clock reading had run into `now`'s millisecond (0 to 999).
    pub now_us: i64,
    pub ids: Vec<Vec<u8>>,
    /// Their scores in the zset, as selected (ascending).
    pub scores: Vec<f64>,
    pub rows: Vec<Row>,
    /// Lanes of live rows, in the order of their first row.
    pub lanes: Vec<Lane>,
    pub types: Types,
    /// What the selection showed of the time after `now`: the first score past
    /// it, `None` when the zset holds nothing past the selection, and `now`
    /// itself when the selection was all due (more may be).
    pub next: Option<f64>,
    /// What the endings' extra step read (`jobs::ending::Extras`), when rows
    /// have waiters or a cancel: the policy a cancelled row is kept by.
    pub extras: Option<ExtrasRead>,
}

impl Read {
    pub fn lane(&self, name: &[u8]) -> &Lane {
        self.lanes.iter().find(|l| l.name == name).expect("every live lane row's lane was read")
    }
}

/// The write plan and the reply it gives once `EXEC` has run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub writes: Vec<Write>,
    pub outcome: Outcome,
}
