//! A command, kept as its arguments already RESP-encoded: building one is a
//! single growing buffer, not an allocation per argument (a sweep builds a few
//! commands per job), and sending it is one copy.

use std::fmt;

use crate::numbers::Decimal;

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Cmd {
    argc: usize,
    /// `$<len>\r\n<arg>\r\n` for each argument.
    buf: Vec<u8>,
}

impl Cmd {
    pub fn new(name: &str) -> Self {
        Self::with_room(name, 128)
    }

    /// A command with room for `room` more bytes of encoded arguments (each
    /// argument takes its length plus about 8): no growing while it is built.
    pub fn with_room(name: &str, room: usize) -> Self {
        Cmd { argc: 0, buf: Vec::with_capacity(name.len() + 8 + room) }.arg(name)
    }

    /// A command from its arguments, name first.
    pub fn from_args<I, A>(items: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        Cmd::default().args(items)
    }

    pub fn arg(self, a: impl AsRef<[u8]>) -> Self {
        self.arg_parts(&[a.as_ref()])
    }

    /// One argument made of `parts` end to end (a key: prefix, kind, name).
    pub fn arg_parts(mut self, parts: &[&[u8]]) -> Self {
        push_bulk(&mut self.buf, parts);
        self.argc += 1;
        self
    }

    /// An integer argument, written without a string of its own.
    pub fn arg_int(self, n: i64) -> Self {
        self.arg_parts(&[Decimal::int(n).as_bytes()])
    }

    /// A command of `argc` arguments already encoded in `buf` (as `arg_parts`
    /// encodes them), name first.
    pub(crate) fn from_encoded(argc: usize, buf: Vec<u8>) -> Self {
        Cmd { argc, buf }
    }

    /// `head`'s arguments, one argument made of `parts`, then `tail`'s: a row's
    /// command from a name and a tail encoded once, not once a row (a sweep
    /// builds one or two a row), in a buffer of the exact size.
    pub fn around(head: &Cmd, parts: &[&[u8]], tail: &Cmd) -> Cmd {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut buf = Vec::with_capacity(head.buf.len() + len + 24 + tail.buf.len());
        buf.extend_from_slice(&head.buf);
        let mut cmd = Cmd { argc: head.argc, buf }.arg_parts(parts);
        cmd.buf.extend_from_slice(&tail.buf);
        cmd.argc += tail.argc;
        cmd
    }

    pub fn args<I, A>(mut self, items: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        let items = items.into_iter();
        // Room for ids of a dozen bytes: long lists (a batch's ids) grow once or twice, not ten times.
        self.buf.reserve(items.size_hint().0 * 24);
        for a in items {
            self = self.arg(a);
        }
        self
    }

    pub fn argc(&self) -> usize {
        self.argc
    }

    /// The arguments, name first (decoded from the buffer).
    pub fn to_args(&self) -> Vec<&[u8]> {
        let mut out = Vec::with_capacity(self.argc);
        out.extend(self.iter_args());
        out
    }

    /// The arguments, name first, without collecting them (a host that runs the
    /// command in the server reads them in place).
    pub fn iter_args(&self) -> impl Iterator<Item = &[u8]> {
        let buf = &self.buf;
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= buf.len() {
                return None;
            }
            // `$<digits>\r\n<arg>\r\n`, as `arg_parts` wrote it.
            let mut len = 0usize;
            let mut i = at + 1;
            while buf[i] != b'\r' {
                len = len * 10 + usize::from(buf[i] - b'0');
                i += 1;
            }
            let arg = &buf[i + 2..i + 2 + len];
            at = i + 2 + len + 2;
            Some(arg)
        })
    }

    pub fn name(&self) -> &[u8] {
        self.to_args().first().copied().unwrap_or(b"")
    }

    /// Appends this command, RESP-encoded, to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        push_array_head(out, self.argc);
        out.extend_from_slice(&self.buf);
    }

    fn encoded_len(&self) -> usize {
        self.buf.len() + 24
    }
}

impl fmt::Debug for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.to_args().iter().map(|a| String::from_utf8_lossy(a))).finish()
    }
}

/// Appends the head of a command of `argc` arguments, `*<argc>\r\n`, to `out`.
#[inline]
pub(crate) fn push_array_head(out: &mut Vec<u8>, argc: usize) {
    out.push(b'*');
    out.extend_from_slice(Decimal::count(argc).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends one argument made of `parts` end to end, `$<len>\r\n<bytes>\r\n`,
/// to `out`, with room for the whole of it reserved at once.
#[inline]
pub(crate) fn push_bulk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(len + 25);
    // Most arguments (a field, a small value, an id) are shorter than 100 bytes.
    if len < 10 {
        out.extend_from_slice(&[b'$', b'0' + len as u8, b'\r', b'\n']);
    } else if len < 100 {
        out.extend_from_slice(&[b'$', b'0' + (len / 10) as u8, b'0' + (len % 10) as u8, b'\r', b'\n']);
    } else {
        out.push(b'$');
        out.extend_from_slice(Decimal::count(len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends commands, encoded back to back as one pipeline, to `out` (a buffer kept from call to
/// call, so a large pipeline does not fault in fresh pages each time).
pub fn encode_into(cmds: &[Cmd], out: &mut Vec<u8>) {
    out.reserve(cmds.iter().map(Cmd::encoded_len).sum());
    for c in cmds {
        c.encode_into(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_resp_arrays_of_bulk_strings() {
        let c = Cmd::new("RPUSH").arg("k").arg(b"\xffx");
        let mut out = b"*1\r\n$4\r\nPING\r\n".to_vec();
        encode_into(&[c], &mut out);
        assert_eq!(out, b"*1\r\n$4\r\nPING\r\n*3\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n$2\r\n\xffx\r\n".to_vec());
    }

    #[test]
    fn lengths_of_every_size_are_written_in_decimal() {
        let c = Cmd::new("SET").arg(vec![b'x'; 9]).arg(vec![b'y'; 10]).arg(vec![b'z'; 100]);
        assert_eq!(c.to_args().iter().map(|a| a.len()).collect::<Vec<_>>(), vec![3, 9, 10, 100]);
    }

    #[test]
    fn a_command_around_a_key_is_the_command_built_argument_by_argument() {
        let (head, tail) = (Cmd::new("HMGET"), Cmd::from_args(["lane", "stalls"]));
        let c = Cmd::around(&head, &[b"emq:{q}:", b"job:", b"x\r\n"], &tail);
        assert_eq!(c, Cmd::new("HMGET").arg("emq:{q}:job:x\r\n").arg("lane").arg("stalls"));
        assert_eq!(c.argc(), 4);
        assert_eq!(Cmd::around(&head, &[], &Cmd::default()), Cmd::new("HMGET").arg(""));
    }

    #[test]
    fn integers_are_written_as_their_strings() {
        for n in [0i64, 7, -7, 42, 1000, -1000, 123_456_789, i64::MAX, i64::MIN] {
            assert_eq!(Cmd::new("X").arg_int(n), Cmd::new("X").arg(n.to_string()), "{n}");
        }
    }

    #[test]
    fn arguments_read_back() {
        let c = Cmd::new("HSET").arg_parts(&[b"emq:{q}:", b"job:", b"a\r\nb"]).arg("").arg(vec![7u8; 300]);
        assert_eq!(c.argc(), 4);
        assert_eq!(c.to_args(), vec![&b"HSET"[..], b"emq:{q}:job:a\r\nb", b"", &[7u8; 300][..]]);
        assert_eq!(c, Cmd::from_args(["HSET".as_bytes(), b"emq:{q}:job:a\r\nb", b"", &[7u8; 300]]));
        assert_eq!(c.name(), b"HSET");
        assert_eq!(format!("{:?}", Cmd::new("GET").arg("k")), r#"["GET", "k"]"#);
    }
}
