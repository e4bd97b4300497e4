//! Queue names, prefixes and keys (SPEC §1, §2).

/// Why a queue name is refused, or `None` when it is good: 1 to 128 bytes of
/// UTF-8, no `{`, `}`, control characters or whitespace.
pub fn queue_name_problem(q: &[u8]) -> Option<&'static str> {
    if q.is_empty() || q.len() > 128 {
        return Some("must be 1 to 128 bytes");
    }
    let Ok(s) = std::str::from_utf8(q) else {
        return Some("must be UTF-8");
    };
    if s.chars().any(|c| c == '{' || c == '}' || c.is_control() || c.is_whitespace()) {
        return Some("must have no '{', '}', control characters or whitespace");
    }
    None
}

/// Why a job id or lane name is refused, or `None`: 1 to 256 bytes of UTF-8 with
/// no control characters.
pub fn id_problem(id: &[u8]) -> Option<&'static str> {
    if id.is_empty() || id.len() > 256 {
        return Some("must be 1 to 256 bytes");
    }
    let Ok(s) = std::str::from_utf8(id) else {
        return Some("must be UTF-8");
    };
    if s.chars().any(char::is_control) {
        return Some("must have no control characters");
    }
    None
}

/// The queue name inside a prefix `emq:{q}:`, if the prefix has that form.
pub fn queue_of_prefix(prefix: &[u8]) -> Option<&[u8]> {
    let q = prefix.strip_prefix(b"emq:{")?.strip_suffix(b"}:")?;
    queue_name_problem(q).is_none().then_some(q)
}

/// The kinds of key under a queue's prefix `P` (SPEC §2): the queue's own keys
/// (`P pending`), and the kinds a row, a lane or a second names (`P job:ID`).
/// Every key a plan reads or writes is spelled from these.
pub mod kind {
    pub const SCHEDULE: &[u8] = b"schedule";
    pub const PENDING: &[u8] = b"pending";
    pub const ACTIVE: &[u8] = b"active";
    pub const DEAD: &[u8] = b"dead";
    pub const DONE: &[u8] = b"done";
    pub const CANCELLED: &[u8] = b"cancelled";
    pub const CANCELS: &[u8] = b"cancels";
    pub const RETENTION: &[u8] = b"retention";
    pub const RING: &[u8] = b"ring";
    pub const PROMOTIONS: &[u8] = b"promotions";
    pub const WAKE: &[u8] = b"wake";
    pub const JOB: &[u8] = b"job:";
    pub const LANE: &[u8] = b"lane:";
    pub const LANECTL: &[u8] = b"lanectl:";
    /// `P lanes` (set): every lane that has been added to or controlled.
    pub const LANES: &[u8] = b"lanes";
    pub const LEASES: &[u8] = b"leases:";
    /// The registry's own keys (`R queues`, `R workers`) and a worker's (`R worker:ID`).
    pub const QUEUES: &[u8] = b"queues";
    pub const WORKERS: &[u8] = b"workers";
    pub const WORKER: &[u8] = b"worker:";
    pub const TIMERS: &[u8] = b"timers";
    pub const SCHEDULES: &[u8] = b"schedules";
    pub const INBOX: &[u8] = b"inbox:";
    pub const UNIQUE: &[u8] = b"unique:";
    /// The flat list's control hash (`P flatctl`: which priority levels hold work).
    pub const FLATCTL: &[u8] = b"flatctl";
    /// The flat list of priority level `p` (`P pending:<p>`), by `p`; level 0 is `P pending`.
    pub const PENDING_AT: [&[u8]; 10] = [
        b"pending",
        b"pending:1",
        b"pending:2",
        b"pending:3",
        b"pending:4",
        b"pending:5",
        b"pending:6",
        b"pending:7",
        b"pending:8",
        b"pending:9",
    ];
    /// The kind of lane `L`'s list of priority level `p` (`P plane:<p>:L`), by `p`;
    /// level 0 is `P lane:L`. No lane name makes one from another: `lane:` and
    /// `plane:` differ in their first byte, and `<p>:` is one digit and a colon.
    pub const LANE_AT: [&[u8]; 10] =
        [b"lane:", b"plane:1:", b"plane:2:", b"plane:3:", b"plane:4:", b"plane:5:", b"plane:6:", b"plane:7:", b"plane:8:", b"plane:9:"];
    /// The per-minute counters of settled jobs (`P stats:<minute>`).
    pub const STATS: &[u8] = b"stats:";
}

/// The priority levels (SPEC §15): 0 first, the default; 9 last.
pub const LEVELS: u8 = 10;

/// The tag of the registry's keys, `R = "emq:{emq registry}:"` (SPEC §2): a
/// queue name has no whitespace (SPEC §1), so no queue's keys can share it.
pub const REGISTRY: &[u8] = b"emq registry";

/// The keys of one queue. `P` is `emq:{q}:`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    pub prefix: Vec<u8>,
}

impl Keys {
    /// Keys for a queue name that has already been checked.
    pub fn new(queue: &[u8]) -> Self {
        let mut prefix = Vec::with_capacity(queue.len() + 7);
        prefix.extend_from_slice(b"emq:{");
        prefix.extend_from_slice(queue);
        prefix.extend_from_slice(b"}:");
        Keys { prefix }
    }

    pub fn key(&self, suffix: &[u8]) -> Vec<u8> {
        self.key2(suffix, b"")
    }

    fn key2(&self, kind: &[u8], name: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + kind.len() + name.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(kind);
        k.extend_from_slice(name);
        k
    }

    /// A key in parts, prefix, kind and name (`name` empty for the queue's own
    /// keys), for a command to write end to end: no key built on its own.
    pub fn parts<'a>(&'a self, kind: &'static [u8], name: &'a [u8]) -> [&'a [u8]; 3] {
        [&self.prefix, kind, name]
    }

    pub fn schedule(&self) -> Vec<u8> {
        self.key(kind::SCHEDULE)
    }
    pub fn pending(&self) -> Vec<u8> {
        self.key(kind::PENDING)
    }
    pub fn active(&self) -> Vec<u8> {
        self.key(kind::ACTIVE)
    }
    pub fn dead(&self) -> Vec<u8> {
        self.key(kind::DEAD)
    }
    /// The done rows that are kept (zset: id -> finished time).
    pub fn done(&self) -> Vec<u8> {
        self.key(kind::DONE)
    }
    /// The cancelled rows that are kept (zset: id -> when the cancel took effect).
    pub fn cancelled(&self) -> Vec<u8> {
        self.key(kind::CANCELLED)
    }
    /// The running jobs asked to stop (zset: id -> when asked), the last hour of them.
    pub fn cancels(&self) -> Vec<u8> {
        self.key(kind::CANCELS)
    }
    /// `P inbox:W`: a waiter's inbox (list of the ids of the jobs it waits for
    /// that have come to an outcome, `jobs::ending`).
    pub fn inbox(&self, inbox: &[u8]) -> Vec<u8> {
        self.key2(kind::INBOX, inbox)
    }
    /// `P unique:K`: the id of the job added under uniqueness key `K` (string,
    /// expiring with the add's window, `jobs::add`).
    pub fn unique(&self, key: &[u8]) -> Vec<u8> {
        self.key2(kind::UNIQUE, key)
    }
    /// The retention policy (hash, see `jobs::retention`).
    pub fn retention(&self) -> Vec<u8> {
        self.key(kind::RETENTION)
    }
    pub fn ring(&self) -> Vec<u8> {
        self.key(kind::RING)
    }
    /// `P promotions`: a counter every promote that takes members increments, in
    /// the same transaction (or script); promoters watch it (`crate::protocol::guard`).
    pub fn promotions(&self) -> Vec<u8> {
        self.key(kind::PROMOTIONS)
    }
    /// `P leases:B`: the lease mark of second `B` (`crate::protocol::guard`): every write
    /// to a row in `active` whose lease ends in that second sets it, and a
    /// stalled check watches it instead of the rows.
    pub fn leases(&self, bucket: i64) -> Vec<u8> {
        self.key2(kind::LEASES, bucket.to_string().as_bytes())
    }
    pub fn wake(&self) -> Vec<u8> {
        self.key(kind::WAKE)
    }
    /// `P timers` (zset: member -> ms): the times at which something other than
    /// a due job or a lease must happen, typed by prefix (`tick:<schedule>`).
    pub fn timers(&self) -> Vec<u8> {
        self.key(kind::TIMERS)
    }
    /// `P schedules` (hash: schedule name -> its record, `schedules::record`).
    pub fn schedules(&self) -> Vec<u8> {
        self.key(kind::SCHEDULES)
    }
    pub fn job(&self, id: &[u8]) -> Vec<u8> {
        self.key2(kind::JOB, id)
    }
    /// The row's key in parts, for `Cmd::arg_parts` (no key built on its own).
    pub fn job_parts<'a>(&'a self, id: &'a [u8]) -> [&'a [u8]; 3] {
        self.parts(kind::JOB, id)
    }
    pub fn lane(&self, lane: &[u8]) -> Vec<u8> {
        self.key2(kind::LANE, lane)
    }
    pub fn lanectl(&self, lane: &[u8]) -> Vec<u8> {
        self.key2(kind::LANECTL, lane)
    }
    /// `P flatctl`: the flat list's control hash (`lvl:<p>` fields, SPEC §15).
    pub fn flatctl(&self) -> Vec<u8> {
        self.key(kind::FLATCTL)
    }
    /// The ready list of level `level` of `lane` (`None`: the flat list):
    /// `P pending`, `P pending:<p>`, `P lane:L` or `P plane:<p>:L`.
    pub fn ready_at(&self, lane: Option<&[u8]>, level: u8) -> Vec<u8> {
        match lane {
            None => self.key(kind::PENDING_AT[usize::from(level)]),
            Some(l) => self.key2(kind::LANE_AT[usize::from(level)], l),
        }
    }
    /// `P lanes` (set): the names of the lanes used, read instead of a `SCAN`.
    pub fn lanes(&self) -> Vec<u8> {
        self.key(kind::LANES)
    }

    /// The registry's keys (`R`, [`REGISTRY`]), rendered as a queue's are.
    pub fn registry() -> Self {
        Keys::new(REGISTRY)
    }

    /// `R workers` (with the registry's keys).
    pub fn workers(&self) -> Vec<u8> {
        self.key(kind::WORKERS)
    }

    /// `R worker:ID` (with the registry's keys).
    pub fn worker(&self, id: &[u8]) -> Vec<u8> {
        self.key2(kind::WORKER, id)
    }

    /// `R queues` (with the registry's keys).
    pub fn queues(&self) -> Vec<u8> {
        self.key(kind::QUEUES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        assert!(queue_name_problem(b"orders").is_none());
        assert!(queue_name_problem("заказы:eu".as_bytes()).is_none());
        assert!(queue_name_problem(b"").is_some());
        assert!(queue_name_problem(&[b'a'; 129]).is_some());
        assert!(queue_name_problem(&[b'a'; 128]).is_none());
        assert!(queue_name_problem(b"a{b").is_some());
        assert!(queue_name_problem(b"a b").is_some());
        assert!(queue_name_problem(b"a\x01").is_some());
        assert!(queue_name_problem(b"\xff").is_some());
    }

    #[test]
    fn prefixes() {
        assert_eq!(queue_of_prefix(b"emq:{orders}:"), Some(&b"orders"[..]));
        assert_eq!(queue_of_prefix(b"emq:{}:"), None);
        assert_eq!(queue_of_prefix(b"emq:{a}b}:"), None);
        assert_eq!(queue_of_prefix(b"emq:orders:"), None);
        assert_eq!(Keys::new(b"q").lanectl(b"a:b"), b"emq:{q}:lanectl:a:b".to_vec());
        let k = Keys::new(b"q");
        assert_eq!(k.ready_at(None, 0), k.pending());
        assert_eq!(k.ready_at(Some(b"L"), 0), k.lane(b"L"));
        assert_eq!(k.ready_at(None, 3), b"emq:{q}:pending:3".to_vec());
        assert_eq!(k.ready_at(Some(b"a:b"), 9), b"emq:{q}:plane:9:a:b".to_vec());
        // A lane named like a level's list never shares a key with one.
        assert_ne!(k.lane(b"3:L"), k.ready_at(Some(b"L"), 3));
    }
}
