//! The sweeps' form: the seed's `EVALSHA` tails with the script's sha replaced
//! by the command's name.
//!
//! `EMQ.PROMOTE 2 <P>schedule <P>pending <P> <batch>`
//! `EMQ.STALLED.CHECK 3 <P>active <P>pending <P>dead <P> <max_stalled> <batch>`
//!
//! `EMQ.PROMOTE` answers the count of ids taken out of `schedule`;
//! `EMQ.STALLED.CHECK` the ids recovered and the ids made dead.

use crate::error::{Error, Result};
use crate::numbers::count_arg;
use crate::sweep::types::{Kind, PROMOTE, STALLED};
use crate::wire::routing::queue_of;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub kind: Kind,
    pub queue: Vec<u8>,
    pub batch: u64,
}

/// Checks a whole command (its name first): the layout, then each argument.
pub fn parse(args: &[&[u8]]) -> Result<Request> {
    let Some((name, tail)) = args.split_first() else {
        return Err(Error::argument("emq", "command", "is empty"));
    };
    let upper = name.to_ascii_uppercase();
    let (verb, suffixes): (&str, &[&[u8]]) = match upper.as_slice() {
        b"EMQ.PROMOTE" => (PROMOTE, &[b"schedule", b"pending"]),
        b"EMQ.STALLED.CHECK" => (STALLED, &[b"active", b"pending", b"dead"]),
        _ => {
            return Err(Error::argument(
                "emq",
                "command",
                format!("{:?} is not EMQ.PROMOTE or EMQ.STALLED.CHECK", String::from_utf8_lossy(name)),
            ))
        }
    };
    let nkeys = suffixes.len();
    let nargs = if verb == PROMOTE { 2 } else { 3 };
    let expected = format!("{nkeys} keys and {nargs} arguments");
    if tail.len() != 1 + nkeys + nargs || tail[0] != nkeys.to_string().as_bytes() {
        return Err(Error::layout(verb, format!("expected {expected}")));
    }
    let (keys, argv) = tail[1..].split_at(nkeys);
    let queue = queue_of(verb, argv[0], keys, suffixes)?;
    let batch = count_arg(argv[nargs - 1], false).ok_or_else(|| Error::argument(verb, "batch", "must be a positive integer"))?;
    let kind = if verb == PROMOTE {
        Kind::Promote
    } else {
        // Empty: no limit (nothing dies), as the Lua script takes it.
        let max_stalled = match argv[1] {
            b"" => None,
            m => Some(count_arg(m, true).ok_or_else(|| Error::argument(verb, "max_stalled", "must be a non-negative integer or empty"))?),
        };
        Kind::Stalled { max_stalled }
    };
    Ok(Request { kind, queue: queue.to_vec(), batch })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn p(s: &str) -> Result<Request> {
        let parts: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse(&parts)
    }

    #[test]
    fn the_seed_tails_parse() {
        let r = p("EMQ.PROMOTE 2 emq:{orders}:schedule emq:{orders}:pending emq:{orders}: 100").unwrap();
        assert_eq!((r.kind, r.queue.as_slice(), r.batch), (Kind::Promote, &b"orders"[..], 100));
        let r = p("EMQ.STALLED.CHECK 3 emq:{orders}:active emq:{orders}:pending emq:{orders}:dead emq:{orders}: 1 100").unwrap();
        assert_eq!(r.kind, Kind::Stalled { max_stalled: Some(1) });
        let r = p("EMQ.STALLED.CHECK 3 emq:{orders}:active emq:{orders}:pending emq:{orders}:dead emq:{orders}:  100").unwrap();
        assert_eq!(r.kind, Kind::Stalled { max_stalled: None });
    }

    #[test]
    fn layout_errors() {
        for bad in [
            "EMQ.PROMOTE 1 emq:{o}:schedule emq:{o}:pending emq:{o}: 100",
            "EMQ.PROMOTE 2 emq:{o}:schedule emq:{o}:pending emq:{o}:",
            "EMQ.PROMOTE 2 emq:{o}:pending emq:{o}:schedule emq:{o}: 100",
            "EMQ.PROMOTE 2 emq:{o}:schedule emq:{p}:pending emq:{o}: 100",
            "EMQ.PROMOTE 2 emq:{o}:schedule emq:{o}:pending emq:o: 100",
            "EMQ.STALLED.CHECK 3 emq:{o}:active emq:{o}:pending emq:{o}:dead emq:{o}: 1",
            "EMQ.STALLED.CHECK 3 emq:{o}:active emq:{o}:dead emq:{o}:pending emq:{o}: 1 1",
        ] {
            let e = p(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Layout, "{bad}: {e}");
        }
    }

    #[test]
    fn argument_errors_name_the_argument() {
        for (bad, name) in [
            ("EMQ.PROMOTE 2 emq:{o}:schedule emq:{o}:pending emq:{o}: 0", "batch"),
            ("EMQ.PROMOTE 2 emq:{o}:schedule emq:{o}:pending emq:{o}: -1", "batch"),
            ("EMQ.PROMOTE 2 emq:{o}:schedule emq:{o}:pending emq:{o}: 1.5", "batch"),
            ("EMQ.STALLED.CHECK 3 emq:{o}:active emq:{o}:pending emq:{o}:dead emq:{o}: x 1", "max_stalled"),
            ("EMQ.STALLED.CHECK 3 emq:{o}:active emq:{o}:pending emq:{o}:dead emq:{o}: 1 0", "batch"),
        ] {
            let e = p(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Argument);
            assert!(e.message.contains(name), "{e}");
        }
    }
}
