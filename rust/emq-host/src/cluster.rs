//! Redis/Valkey Cluster (SPEC §11): which node serves a queue, and each call's
//! way there.
//!
//! Every key of a queue carries the hash tag `{queue}` (SPEC §1), so a queue
//! lives in one slot and every call runs whole on the node that owns it. A
//! `Router` starts on its seed connection and knows nothing of a cluster: the
//! first `MOVED` (a call for a queue on another node) makes it read the slot map
//! (`CLUSTER SLOTS`, which Redis 7.0 and Valkey 9 both answer) and from then on
//! it sends each queue's calls to the owner, one connection per node, opened on
//! demand with the seed's credentials, TLS and timeouts. A standalone server
//! costs nothing: no command is added to any call.
//!
//! A redirect comes before `EXEC` runs (a read refused, or a queued command
//! refused so that `EXEC` discards the transaction), so nothing of the call was
//! written and it starts again: `MOVED` on the new owner after a map refresh;
//! `ASK`, `TRYAGAIN` and `CLUSTERDOWN` (a slot migrating or a failover under
//! way) after a pause, until the call's budget (the read timeout) is spent, then
//! a `Cluster` error naming the verb and the slot. A redirect never reaches the
//! caller as another error or as a value.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use emq_plan::backoff::backoff;
use emq_plan::{Cmd, Reply};

use crate::conn::Conn;
use crate::error::{HostError, HostResult};
use crate::jitter::Jitter;

/// Slots of a cluster (`CLUSTER KEYSLOT` is CRC16 of the hash tag, modulo this).
pub const SLOT_COUNT: u16 = 16384;

/// How long a call waits for a cluster to settle (a migration, a failover) when
/// the client has no read timeout.
const DEFAULT_BUDGET: Duration = Duration::from_secs(30);
/// The first pause after `ASK`, `TRYAGAIN` or `CLUSTERDOWN` (µs), doubling up to the cap.
const PAUSE_BASE_US: u64 = 1_000;
const PAUSE_CAP_US: u64 = 200_000;

/// CRC16/XMODEM (polynomial 0x1021), the cluster's key hash.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// The slot of every key of `queue`: its keys are `emq:{queue}:…`, and a queue
/// name holds no brace (SPEC §1), so the hash tag is the name.
pub fn queue_slot(queue: &[u8]) -> u16 {
    crc16(queue) % SLOT_COUNT
}

/// The slot map: `(first slot, last slot, "host:port" of its primary)`, sorted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlotMap(Vec<(u16, u16, String)>);

impl SlotMap {
    /// The map from a `CLUSTER SLOTS` reply; `asked` is the host the reply came
    /// from (a node may give its own address as an empty string).
    pub fn parse(reply: &Reply, asked: &str) -> Option<SlotMap> {
        let mut ranges = vec![];
        for range in reply.as_array()? {
            let r = range.as_array()?;
            let (first, last) = (u16::try_from(r.first()?.as_int()?).ok()?, u16::try_from(r.get(1)?.as_int()?).ok()?);
            let primary = r.get(2)?.as_array()?;
            let host = match primary.first()?.as_bytes()? {
                b"" | b"?" => asked.to_string(),
                h => String::from_utf8_lossy(h).into_owned(),
            };
            let port = primary.get(1)?.as_int()?;
            ranges.push((first, last, join(&host, port)));
        }
        ranges.sort();
        Some(SlotMap(ranges))
    }

    /// The primary that serves `slot`.
    pub fn owner(&self, slot: u16) -> Option<&str> {
        let i = self.0.partition_point(|(_, last, _)| *last < slot);
        self.0.get(i).filter(|(first, _, _)| *first <= slot).map(|(_, _, node)| node.as_str())
    }

    /// Drops every range `node` serves: their owners are to be learned again.
    fn forget(&mut self, node: &str) {
        self.0.retain(|(_, _, n)| n != node);
    }

    /// `slot` now served by `node` (a `MOVED` says so before the map is read again).
    fn assign(&mut self, slot: u16, node: &str) {
        let i = self.0.partition_point(|(_, last, _)| *last < slot);
        match self.0.get(i) {
            Some((first, last, _)) if *first <= slot => {
                let (first, last) = (*first, *last);
                let mut parts = vec![];
                if first < slot {
                    parts.push((first, slot - 1, self.0[i].2.clone()));
                }
                parts.push((slot, slot, node.to_string()));
                if slot < last {
                    parts.push((slot + 1, last, self.0[i].2.clone()));
                }
                self.0.splice(i..=i, parts);
            }
            _ => self.0.insert(i, (slot, slot, node.to_string())),
        }
    }
}

/// `host:port`, with IPv6 hosts in brackets.
fn join(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `host:port` back into its parts.
fn split(node: &str) -> Option<(String, u16)> {
    let (host, port) = node.rsplit_once(':')?;
    Some((host.trim_start_matches('[').trim_end_matches(']').to_string(), port.parse().ok()?))
}

/// What a cluster error reply asks of a call.
#[derive(Debug, PartialEq)]
enum Redirect {
    /// `MOVED slot host:port`: the slot has a new owner.
    Moved(u16, String),
    /// `ASK`, `TRYAGAIN`, `CLUSTERDOWN`: wait and start again (the slot is moving,
    /// or the cluster is failing over).
    Wait(Option<u16>),
}

/// The redirect in an error message (`"VERB: MOVED 3999 127.0.0.1:6381"`).
fn redirect_of(e: &HostError) -> Option<Redirect> {
    let (HostError::Redirect(m) | HostError::Unavailable(m)) = e else { return None };
    let reply = m.split_once(": ").map_or(m.as_str(), |(_, r)| r);
    let mut words = reply.split_whitespace();
    match words.next()? {
        "MOVED" => {
            let slot = words.next()?.parse().ok()?;
            Some(Redirect::Moved(slot, words.next()?.to_string()))
        }
        "ASK" => Some(Redirect::Wait(words.next().and_then(|s| s.parse().ok()))),
        "TRYAGAIN" | "CLUSTERDOWN" => Some(Redirect::Wait(None)),
        _ => None,
    }
}

/// The connections of one client: the seed, and once it has met a cluster, one
/// per node that serves a queue it called.
pub struct Router {
    seed: Conn,
    map: Option<SlotMap>,
    nodes: HashMap<String, Conn>,
    rng: Jitter,
}

impl Router {
    pub fn new(seed: Conn) -> Self {
        Router { seed, map: None, nodes: HashMap::new(), rng: Jitter::new() }
    }

    pub fn address(&self) -> &str {
        &self.seed.address
    }

    /// The seed connection: for calls that name no queue (`PING`, `INFO`, …).
    pub fn seed(&mut self) -> &mut Conn {
        &mut self.seed
    }

    /// A router like this one on new connections (the slot map kept).
    pub fn sibling(&self, read_timeout: Option<Option<Duration>>) -> Router {
        Router { seed: self.seed.sibling(read_timeout), map: self.map.clone(), nodes: HashMap::new(), rng: Jitter::new() }
    }

    pub fn close(&mut self) {
        self.seed.close();
        self.nodes.clear();
    }

    /// The connection that serves `queue`'s slot (the seed until a cluster is met,
    /// or when the map has no owner for it: the server will say who has it).
    pub fn conn_for(&mut self, queue: &[u8]) -> HostResult<&mut Conn> {
        let owner = self.map.as_ref().and_then(|m| m.owner(queue_slot(queue))).map(str::to_owned);
        let Some(node) = owner else { return Ok(&mut self.seed) };
        if !self.nodes.contains_key(&node) {
            let (host, port) = split(&node).ok_or_else(|| HostError::Server(format!("cluster: bad node address {node:?}")))?;
            self.nodes.insert(node.clone(), self.seed.at(&host, port));
        }
        Ok(self.nodes.get_mut(&node).expect("just inserted"))
    }

    /// Runs `f` on the connection of `queue`'s node, following redirects (see the
    /// module's comment) until `f` gives anything else or the budget is spent.
    pub fn run<T>(&mut self, verb: &str, queue: &[u8], mut f: impl FnMut(&mut Conn) -> HostResult<T>) -> HostResult<T> {
        let budget = self.seed.read_timeout().unwrap_or(DEFAULT_BUDGET);
        let start = Instant::now();
        let mut waits: u32 = 0;
        loop {
            let result = f(self.conn_for(queue)?);
            let err = match result {
                Err(e) if redirect_of(&e).is_some() || (self.map.is_some() && matches!(e, HostError::Connection(_))) => e,
                other => return other,
            };
            let slot = queue_slot(queue);
            if start.elapsed() >= budget {
                return Err(match err {
                    // A node that stays unreachable is a connection error, as on one server.
                    e @ HostError::Connection(_) => e,
                    e => HostError::Cluster(format!(
                        "{verb}: the cluster did not settle for the queue's slot {slot} within {:.1} s (last: {})",
                        budget.as_secs_f64(),
                        message(&e)
                    )),
                });
            }
            match redirect_of(&err) {
                Some(Redirect::Moved(moved, to)) => {
                    // The whole map, read from the node named; if it cannot be read
                    // (an ACL may deny CLUSTER SLOTS) or lags, the redirect alone
                    // says where this slot went.
                    let _ = self.refresh(&to);
                    if self.map.as_ref().and_then(|m| m.owner(moved)) != Some(to.as_str()) {
                        self.map.get_or_insert_with(SlotMap::default).assign(moved, &to);
                    }
                    continue;
                }
                Some(Redirect::Wait(_)) => {}
                // The queue's node did not answer (nothing was written: a lost reply
                // to a write is `OutcomeUnknown`, never retried). It may be down and
                // a replica taking over: ask the other nodes for the map, or forget
                // the node so that the seed's `MOVED` says where its slots went.
                None => {
                    // The node the call went to: `f` does not change the map.
                    if let Some(node) = self.owner_of(queue) {
                        if self.refresh_from_others(&node).is_err() {
                            if let Some(m) = self.map.as_mut() {
                                m.forget(&node);
                            }
                        }
                    }
                }
            }
            let pause = backoff(waits, PAUSE_BASE_US, PAUSE_CAP_US, self.rng.unit());
            waits += 1;
            std::thread::sleep(Duration::try_from_secs_f64(pause / 1e6).unwrap_or_default());
        }
    }

    /// The node the map says serves `queue` (`None`: the seed's to ask).
    fn owner_of(&self, queue: &[u8]) -> Option<String> {
        self.map.as_ref().and_then(|m| m.owner(queue_slot(queue))).map(str::to_owned)
    }

    /// Reads the map from any node but `down` (the seed first).
    fn refresh_from_others(&mut self, down: &str) -> HostResult<()> {
        let mut candidates: Vec<String> = self.map.iter().flat_map(|m| m.0.iter().map(|(_, _, n)| n.clone())).collect();
        candidates.dedup();
        candidates.retain(|n| n != down);
        if let Ok(r) = self.seed.one(Cmd::new("CLUSTER").arg("SLOTS")) {
            if let Some(map) = SlotMap::parse(&r, &self.seed.host()) {
                self.map = Some(map);
                return Ok(());
            }
        }
        let mut last = HostError::Server("cluster: no node to read the slot map from".into());
        for node in candidates {
            match self.refresh(&node) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Reads the slot map from `node` (the one a `MOVED` named, so it is up).
    fn refresh(&mut self, node: &str) -> HostResult<()> {
        let (host, port) = split(node).ok_or_else(|| HostError::Server(format!("cluster: bad node address {node:?}")))?;
        let conn = self.nodes.entry(node.to_string()).or_insert_with(|| self.seed.at(&host, port));
        match conn.one(Cmd::new("CLUSTER").arg("SLOTS"))? {
            Reply::Error { code, message } => Err(HostError::classify("CLUSTER SLOTS", &code, &message)),
            r => {
                let map = SlotMap::parse(&r, &host).ok_or_else(|| HostError::Server(format!("CLUSTER SLOTS gave {r:?}")))?;
                // Connections to nodes that serve nothing any more are dropped.
                let serving: Vec<String> = map.0.iter().map(|(_, _, n)| n.clone()).collect();
                self.nodes.retain(|n, _| serving.contains(n));
                self.map = Some(map);
                Ok(())
            }
        }
    }
}

fn message(e: &HostError) -> &str {
    match e {
        HostError::Redirect(m) | HostError::Unavailable(m) => m,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_as_the_cluster_hashes_them() {
        // CLUSTER KEYSLOT of these (the Python cluster tests compare many more with a server).
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(queue_slot(b"foo"), 12182);
        assert_eq!(queue_slot(b"bar"), 5061);
    }

    fn slots_reply(ranges: &[(i64, i64, &str, i64)]) -> Reply {
        Reply::Array(
            ranges
                .iter()
                .map(|(a, b, h, p)| {
                    Reply::Array(vec![
                        Reply::Int(*a),
                        Reply::Int(*b),
                        Reply::Array(vec![Reply::Bulk(h.as_bytes().to_vec()), Reply::Int(*p), Reply::Bulk(b"id".to_vec())]),
                    ])
                })
                .collect(),
        )
    }

    #[test]
    fn the_map_finds_each_slots_owner() {
        let r = slots_reply(&[(10923, 16383, "10.0.0.3", 7003), (0, 5460, "", 7001), (5461, 10922, "10.0.0.2", 7002)]);
        let m = SlotMap::parse(&r, "10.0.0.1").unwrap();
        assert_eq!(m.owner(0), Some("10.0.0.1:7001"));
        assert_eq!(m.owner(5460), Some("10.0.0.1:7001"));
        assert_eq!(m.owner(5461), Some("10.0.0.2:7002"));
        assert_eq!(m.owner(16383), Some("10.0.0.3:7003"));
        let gap = SlotMap::parse(&slots_reply(&[(0, 9, "h", 1), (20, 29, "h", 2)]), "x").unwrap();
        assert_eq!(gap.owner(15), None);
        assert_eq!(gap.owner(30), None);
    }

    #[test]
    fn a_moved_slot_is_split_out_of_its_range() {
        let mut m = SlotMap::parse(&slots_reply(&[(0, 99, "a", 1), (100, 199, "b", 2)]), "x").unwrap();
        m.assign(50, "c:3");
        assert_eq!((m.owner(49), m.owner(50), m.owner(51)), (Some("a:1"), Some("c:3"), Some("a:1")));
        m.assign(0, "c:3");
        m.assign(199, "c:3");
        assert_eq!((m.owner(0), m.owner(1), m.owner(199), m.owner(198)), (Some("c:3"), Some("a:1"), Some("c:3"), Some("b:2")));
        let mut empty = SlotMap::default();
        empty.assign(7, "d:4");
        assert_eq!((empty.owner(7), empty.owner(8)), (Some("d:4"), None));
    }

    #[test]
    fn redirects_from_messages() {
        let moved = HostError::Redirect("EMQ.ADD: MOVED 3999 127.0.0.1:6381".into());
        assert_eq!(redirect_of(&moved), Some(Redirect::Moved(3999, "127.0.0.1:6381".into())));
        assert_eq!(redirect_of(&HostError::Redirect("X: ASK 3999 h:1".into())), Some(Redirect::Wait(Some(3999))));
        assert_eq!(redirect_of(&HostError::Unavailable("X: TRYAGAIN Multiple keys".into())), Some(Redirect::Wait(None)));
        assert_eq!(redirect_of(&HostError::Unavailable("X: CLUSTERDOWN Hash slot not served".into())), Some(Redirect::Wait(None)));
        assert_eq!(redirect_of(&HostError::Unavailable("X: LOADING".into())), None);
        assert_eq!(redirect_of(&HostError::Server("X: MOVED 1 h:2".into())), None);
        assert_eq!(split("[::1]:7000"), Some(("::1".into(), 7000)));
        assert_eq!(join("::1", 7000), "[::1]:7000");
    }
}
