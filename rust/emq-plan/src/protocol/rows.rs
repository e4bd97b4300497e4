//! Reading job rows under the watch, and telling live rows from ghosts.
//!
//! One `HMGET row fields…` per id (`HGET` for one field) and one `EXISTS` per group
//! of rows. `HMGET` refuses a row of another type; a row with any field read is a
//! hash; rows with none of the fields are ghosts or hashes without them, which the
//! group's `EXISTS` count settles, except when some of each are there: then `TYPE`
//! each of those.

use crate::error::{Error, Result};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::reply::Reply;

/// A row's fields in the order asked; `None` for a ghost.
pub type Fields = Vec<Option<Vec<u8>>>;

/// Rows per `EXISTS`. A count settles the rows of its group that had none of the
/// fields read (all ghosts, or all rows) unless the group holds some of each; only
/// then are that group's unsure rows typed, one by one. A sweep reads `lane` (and
/// `stalls`) only, so every flat row is unsure: one count over a whole batch would
/// type a thousand rows for one ghost, groups of 32 type at most 32.
pub const GROUP: usize = 32;

pub fn reads(keys: &Keys, ids: &[Vec<u8>], fields: &[&str]) -> Vec<Cmd> {
    // The name and the fields encoded once; each row's command is them around its key.
    let (name, tail) = (Cmd::new(if fields.len() == 1 { "HGET" } else { "HMGET" }), Cmd::from_args(fields));
    let mut cmds: Vec<Cmd> = ids.iter().map(|id| Cmd::around(&name, &keys.job_parts(id), &tail)).collect();
    cmds.reserve(ids.len().div_ceil(GROUP));
    for group in ids.chunks(GROUP) {
        let room = group.iter().map(|id| keys.job_parts(id).iter().map(|p| p.len()).sum::<usize>() + 8).sum();
        let mut exists = Cmd::with_room("EXISTS", room);
        for id in group {
            exists = exists.arg_parts(&keys.job_parts(id));
        }
        cmds.push(exists);
    }
    cmds
}

/// How many replies [`reads`] of `n` rows gives: one a row, one a group.
pub fn reply_count(n: usize) -> usize {
    n + n.div_ceil(GROUP)
}

/// Parses the replies of [`reads`] ([`reply_count`] of them). Gives each row, and the
/// indexes of the rows that still need a `TYPE` ([`type_reads`], [`resolve`]).
pub fn parse(verb: &str, keys: &Keys, ids: &[Vec<u8>], replies: &[Reply], width: usize) -> Result<(Vec<Option<Fields>>, Vec<usize>)> {
    parse_rows(verb, keys, ids, replies, width, |f| f.iter().map(|v| v.map(<[u8]>::to_vec)).collect())
}

/// [`parse`], each row made by `make` from its fields as read (borrowed from the
/// replies): a caller that keeps one or two of them copies only those.
pub fn parse_rows<T>(
    verb: &str,
    keys: &Keys,
    ids: &[Vec<u8>],
    replies: &[Reply],
    width: usize,
    mut make: impl FnMut(&[Option<&[u8]>]) -> T,
) -> Result<(Vec<Option<T>>, Vec<usize>)> {
    if replies.len() != reply_count(ids.len()) {
        return Err(Error::server(verb, "rows: wrong number of replies"));
    }
    let mut rows = Vec::with_capacity(ids.len());
    let mut unsure = vec![];
    // One row's fields, the vector kept from row to row.
    let mut fields: Vec<Option<&[u8]>> = Vec::with_capacity(width);
    for (g, (group, count)) in ids.chunks(GROUP).zip(&replies[ids.len()..]).enumerate() {
        let base = g * GROUP;
        let (mut group_unsure, mut known) = (vec![], 0i64);
        for (j, id) in group.iter().enumerate() {
            fields.clear();
            match &replies[base + j] {
                r if r.is_wrongtype() => return Err(wrong_type(verb, keys, id)),
                Reply::Error { message, .. } => return Err(Error::server(verb, message)),
                Reply::Array(a) if a.len() == width => fields.extend(a.iter().map(Reply::as_bytes)),
                Reply::Bulk(b) if width == 1 => fields.push(Some(b)),
                Reply::Nil if width == 1 => fields.push(None),
                _ => return Err(Error::server(verb, "HMGET gave no fields")),
            }
            if fields.iter().all(Option::is_none) {
                group_unsure.push(base + j);
            } else {
                known += 1;
            }
            rows.push(Some(make(&fields)));
        }
        let existing = count.as_int().ok_or_else(|| Error::server(verb, "EXISTS gave no count"))?;
        match existing.saturating_sub(known) {
            0 => {
                for &i in &group_unsure {
                    rows[i] = None;
                }
            }
            n if n == group_unsure.len() as i64 => {}
            _ => unsure.extend(group_unsure),
        }
    }
    Ok((rows, unsure))
}

pub fn type_reads(keys: &Keys, ids: &[Vec<u8>], unsure: &[usize]) -> Vec<Cmd> {
    unsure.iter().map(|&i| Cmd::new("TYPE").arg(keys.job(&ids[i]))).collect()
}

/// Settles the unsure rows from their `TYPE` replies.
pub fn resolve(verb: &str, keys: &Keys, ids: &[Vec<u8>], rows: &mut [Option<Fields>], unsure: &[usize], replies: &[Reply]) -> Result<()> {
    if replies.len() != unsure.len() {
        return Err(Error::server(verb, "TYPE: wrong number of replies"));
    }
    for (&i, r) in unsure.iter().zip(replies) {
        match r.as_bytes() {
            Some(b"none") => rows[i] = None,
            Some(b"hash") => {}
            _ => return Err(wrong_type(verb, keys, &ids[i])),
        }
    }
    Ok(())
}

pub fn wrong_type(verb: &str, keys: &Keys, id: &[u8]) -> Error {
    Error::layout(verb, format!("{} has the wrong type", String::from_utf8_lossy(&keys.job(id))))
}
