//! RESP2 commands out and replies in, over any `Read + Write` (a `net::Stream`:
//! TCP, TLS or a Unix socket; a byte source in the fuzz targets), and the
//! handshake that opens a connection.
//!
//! The host's redis crate reads the URL (so `redis://user:pass@host:port/db`,
//! `rediss://…#insecure` and `unix:///path?db=N` mean what they mean there); the
//! handshake and the reading of replies are ours. The crate parses a
//! reply into its own values through a general parser, which cost about half of a
//! sweep's client CPU (1.5 µs a job against 0.14 µs for this reader, measured on
//! the replies of a 1,000-job stalled check); a sweep reads several values a job.
//!
//! What a server sends cannot make the reader panic or allocate beyond the bytes
//! it sent: lengths are checked, a string's announced length reserves at most
//! `MAX_RESERVE` ahead of its bytes, arrays reserve room only for the elements
//! the bytes in hand could hold, and replies nest at most `MAX_DEPTH` deep
//! (`fuzz/fuzz_targets/resp.rs` holds it to that).

use std::io::{self, Read, Write};
use std::sync::OnceLock;

use emq_plan::{Cmd, Reply};
use memchr::memchr;

use crate::error::{WireError, WireResult};

/// What a read interrupted by a signal (`EINTR`: a socket with a timeout is
/// not restarted) does: the host's hook says whether to give up (`true`: its
/// signal handler raised) or read again; with no hook, it reads again.
static ON_INTERRUPT: OnceLock<fn() -> bool> = OnceLock::new();

/// Sets the hook a read interrupted by a signal asks (see `ON_INTERRUPT`); the
/// first one set stays.
pub fn on_interrupt(hook: fn() -> bool) {
    let _ = ON_INTERRUPT.set(hook);
}

/// What the handshake sends: credentials (the server's `requirepass`, or an ACL
/// user's) and the database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Auth {
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: i64,
}

/// One parsed element: a whole value, or the head of an array.
enum Elem {
    Value(Reply),
    Array(usize),
}

/// An array being filled while its elements arrive.
struct Frame {
    items: Vec<Reply>,
    left: usize,
}

/// A connected socket (or any byte stream) and its buffers.
pub struct Wire<S> {
    stream: S,
    buf: Vec<u8>,
    /// Unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// The commands being sent, encoded.
    out: Vec<u8>,
    /// The server's name and version, as its `HELLO` told them (empty: unknown).
    pub server: (String, String),
}

const READ_CHUNK: usize = 64 * 1024;
/// The largest string reply read (the servers' own limit, `proto-max-bulk-len`, is
/// 512 MiB by default); a longer length is taken for a broken stream.
const MAX_BULK: i64 = 1 << 32;
/// The largest send buffer kept between calls (a sweep of 1,000 jobs needs about 200 KiB).
const MAX_KEPT: usize = 4 << 20;
/// The most the read buffer grows ahead of a string's bytes on the strength of
/// its announced length; past it, the buffer grows as the bytes arrive.
const MAX_RESERVE: usize = 16 << 20;
/// The deepest nesting of arrays read (a server's replies nest a few levels;
/// deeper ones would only make dropping or converting a reply recurse deep).
pub const MAX_DEPTH: usize = 512;

impl<S: Read + Write> Wire<S> {
    /// A wire over a stream that is connected (`net::connect` also runs the
    /// handshake).
    pub fn new(stream: S) -> Self {
        Wire::with_buffer(stream, READ_CHUNK)
    }

    /// A wire whose read buffer starts at `len` bytes (at least 1; it grows as
    /// replies need): the tests and fuzz targets start it small.
    pub fn with_buffer(stream: S, len: usize) -> Self {
        Wire { stream, buf: vec![0; len.max(1)], start: 0, end: 0, out: vec![], server: (String::new(), String::new()) }
    }

    pub fn stream(&self) -> &S {
        &self.stream
    }

    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Authenticates, selects the database and names the client (`CLIENT
    /// SETINFO`, whose refusal is ignored: older servers and narrow ACL users
    /// connect all the same).
    pub fn handshake(&mut self, auth: &Auth) -> WireResult<()> {
        let mut cmds = vec![];
        if let Some(password) = &auth.password {
            cmds.push(match &auth.username {
                Some(user) => Cmd::new("AUTH").arg(user).arg(password),
                None => Cmd::new("AUTH").arg(password),
            });
        }
        if auth.db != 0 {
            cmds.push(Cmd::new("SELECT").arg(auth.db.to_string()));
        }
        let checked = cmds.len();
        // A server that wants credentials answers `NOAUTH`: the connection is
        // refused now, not on its first call. `HELLO 2` (RESP2, as before) also
        // names the server and its version, and no ACL denies it (a server older
        // than 6.0 does not know it: the server is then unknown).
        cmds.push(Cmd::new("HELLO").arg("2"));
        cmds.push(Cmd::new("CLIENT").arg("SETINFO").arg("LIB-NAME").arg("emq"));
        cmds.push(Cmd::new("CLIENT").arg("SETINFO").arg("LIB-VER").arg(env!("CARGO_PKG_VERSION")));
        let replies = self.pipeline(&cmds)?;
        let refused = |r: &Reply| match r {
            Reply::Error { code, message } => Some(WireError::Refused { code: code.clone(), message: message.clone() }),
            _ => None,
        };
        if let Some(e) = replies[..checked].iter().find_map(refused) {
            return Err(e);
        }
        match &replies[checked] {
            Reply::Error { code, .. } if code == "NOAUTH" => Err(refused(&replies[checked]).expect("an error")),
            Reply::Array(hello) => {
                let field =
                    |name: &str| hello.chunks_exact(2).find(|kv| kv[0].as_bytes() == Some(name.as_bytes())).and_then(|kv| kv[1].as_bytes());
                let text = |v: Option<&[u8]>| v.map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
                self.server = (text(field("server")), text(field("version")));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Sends `cmds` and reads one reply each.
    pub fn pipeline(&mut self, cmds: &[Cmd]) -> WireResult<Vec<Reply>> {
        self.send(cmds)?;
        self.replies(cmds.len())
    }

    /// Reads `n` replies.
    pub fn replies(&mut self, n: usize) -> WireResult<Vec<Reply>> {
        (0..n).map(|_| self.read_reply(true)).collect()
    }

    /// Reads `n` replies (`MULTI`, the queued commands, `EXEC`): the first error
    /// among all but the last, and the last. The others are read past without
    /// being built.
    pub fn exec_replies(&mut self, n: usize) -> WireResult<(Option<Reply>, Reply)> {
        let mut first_error = None;
        for _ in 1..n {
            let r = self.read_reply(false)?;
            if first_error.is_none() && matches!(r, Reply::Error { .. }) {
                first_error = Some(r);
            }
        }
        Ok((first_error, self.read_reply(true)?))
    }

    /// Sends `cmds` as one pipeline; their replies are read with `replies` or
    /// `exec_replies`.
    pub fn send(&mut self, cmds: &[Cmd]) -> WireResult<()> {
        self.send_parts(&[cmds])
    }

    /// Sends the commands of every part, in order, as one pipeline.
    pub fn send_parts(&mut self, parts: &[&[Cmd]]) -> WireResult<()> {
        self.send_with(|out| {
            for cmds in parts {
                emq_plan::protocol::cmd::encode_into(cmds, out);
            }
        })
    }

    /// Sends what `encode` appends to the (empty) send buffer as one pipeline,
    /// without reading: commands a caller renders itself, straight into the
    /// buffer (a plan's typed writes).
    pub fn send_with(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> WireResult<()> {
        self.out.clear();
        encode(&mut self.out);
        self.stream.write_all(&self.out)?;
        // A buffer grown for one large call is not kept for good.
        if self.out.capacity() > MAX_KEPT {
            self.out = vec![];
        }
        Ok(())
    }

    /// Reads one reply; with `keep` false, reads past it and gives `Nil`, or the
    /// reply itself when it is an error (errors are never skipped unseen).
    fn read_reply(&mut self, keep: bool) -> WireResult<Reply> {
        let mut stack: Vec<Frame> = vec![];
        // Elements this reply's arrays have reserved room for: together no more
        // than the bytes in hand could hold (3 bytes an element at least), so an
        // announced length (`*1000000000`, nested) reserves nothing it did not send.
        let mut reserved = 0usize;
        loop {
            let Some(elem) = self.element(keep)? else {
                self.fill()?;
                continue;
            };
            let mut value = match elem {
                Elem::Array(n) if n > 0 => {
                    if stack.len() == MAX_DEPTH {
                        return Err(WireError::Protocol(format!("a reply nested deeper than {MAX_DEPTH} arrays")));
                    }
                    let items = if keep {
                        let room = ((self.end - self.start) / 3).saturating_sub(reserved);
                        let capacity = n.min(room).min(1 << 16);
                        reserved += capacity;
                        Vec::with_capacity(capacity)
                    } else {
                        vec![]
                    };
                    stack.push(Frame { items, left: n });
                    continue;
                }
                Elem::Array(_) => Reply::Array(vec![]),
                Elem::Value(v) => v,
            };
            // Attach the value to the arrays it completes.
            loop {
                let Some(frame) = stack.last_mut() else { return Ok(value) };
                if keep {
                    frame.items.push(value);
                }
                frame.left -= 1;
                if frame.left > 0 {
                    break;
                }
                let done = stack.pop().expect("a frame is there");
                value = if keep { Reply::Array(done.items) } else { Reply::Nil };
            }
        }
    }

    /// Parses the element at the head of the buffer, or `None` if it has not
    /// all arrived yet (nothing is consumed then).
    fn element(&mut self, keep: bool) -> WireResult<Option<Elem>> {
        let unread = &self.buf[self.start..self.end];
        let Some(cr) = memchr(b'\r', unread) else { return Ok(None) };
        if cr + 1 >= unread.len() {
            return Ok(None);
        }
        if cr == 0 || unread[cr + 1] != b'\n' {
            return Err(WireError::Protocol("a line without its type or CRLF".into()));
        }
        let (kind, line) = (unread[0], &unread[1..cr]);
        let after_line = cr + 2;
        let elem = match kind {
            b'+' => Elem::Value(if keep { Reply::Status(text(line)) } else { Reply::Nil }),
            b'-' => Elem::Value(error(line)),
            b':' => Elem::Value(Reply::Int(int(line)?)),
            b'$' => {
                let n = int(line)?;
                if n > MAX_BULK {
                    return Err(WireError::Protocol(format!("a reply of {n} bytes")));
                }
                // A negative length is the null string.
                if let Ok(n) = usize::try_from(n) {
                    if unread.len() < after_line + n + 2 {
                        self.reserve((after_line + n + 2).min(MAX_RESERVE));
                        return Ok(None);
                    }
                    let body = &unread[after_line..after_line + n];
                    let value = if keep { Reply::Bulk(body.to_vec()) } else { Reply::Nil };
                    self.start += after_line + n + 2;
                    return Ok(Some(Elem::Value(value)));
                }
                Elem::Value(Reply::Nil)
            }
            // A negative length is the null array.
            b'*' => usize::try_from(int(line)?).map_or(Elem::Value(Reply::Nil), Elem::Array),
            other => return Err(WireError::Protocol(format!("unknown reply type {:?}", other as char))),
        };
        self.start += after_line;
        Ok(Some(elem))
    }

    /// Makes room for an element of `need` bytes from `start`.
    fn reserve(&mut self, need: usize) {
        if self.buf.len() < need {
            self.buf.resize(need.next_power_of_two(), 0);
        }
    }

    /// Reads more bytes into the buffer (moving the unread ones to its front
    /// when the end is reached).
    fn fill(&mut self) -> WireResult<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() || self.buf.len() - self.end < READ_CHUNK / 4 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted && !ON_INTERRUPT.get().is_some_and(|give_up| give_up()) => {}
                read => break read?,
            }
        };
        if n == 0 {
            return Err(WireError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection")));
        }
        self.end += n;
        Ok(())
    }
}

fn int(line: &[u8]) -> WireResult<i64> {
    let (negative, digits) = match line {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 19 {
        return Err(WireError::Protocol("an integer out of range".into()));
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(WireError::Protocol("an integer with a non-digit".into()));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(i64::from(d - b'0')))
            .ok_or_else(|| WireError::Protocol("an integer out of range".into()))?;
    }
    Ok(if negative { -v } else { v })
}

fn text(line: &[u8]) -> String {
    String::from_utf8_lossy(line).into_owned()
}

/// An error reply: its first word is the code (`WRONGTYPE`, `NOPERM`, …).
fn error(line: &[u8]) -> Reply {
    let message = text(line);
    let code = message.split(' ').next().unwrap_or("").to_string();
    Reply::Error { code, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(int(b"0").unwrap(), 0);
        assert_eq!(int(b"-12").unwrap(), -12);
        assert_eq!(int(b"9223372036854775807").unwrap(), i64::MAX);
        assert!(int(b"9223372036854775808").is_err());
        assert!(int(b"").is_err());
        assert!(int(b"1x").is_err());
    }

    /// Replies that arrive a byte at a time (and one larger than the buffer) are
    /// read whole, each exactly once, kept or skipped.
    #[cfg(unix)]
    #[test]
    fn replies_in_pieces() {
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let big = vec![b'x'; 3 * READ_CHUNK + 7];
        let mut sent = b"+OK\r\n:-42\r\n$-1\r\n*-1\r\n*0\r\n$4\r\na\r\nb\r\n*3\r\n*1\r\n:1\r\n$0\r\n\r\n-ERR no\r\n".to_vec();
        sent.extend_from_slice(format!("*2\r\n$1\r\nz\r\n${}\r\n", big.len()).as_bytes());
        sent.extend_from_slice(&big);
        sent.extend_from_slice(b"\r\n:7\r\n");
        let writer = std::thread::spawn(move || {
            for (i, chunk) in sent.chunks(1).enumerate() {
                theirs.write_all(chunk).unwrap();
                if i % 4096 == 0 {
                    std::thread::yield_now();
                }
            }
        });
        let mut w = Wire::with_buffer(ours, 16);
        let bulk = |b: &[u8]| Reply::Bulk(b.to_vec());
        assert_eq!(w.read_reply(true).unwrap(), Reply::Status("OK".into()));
        assert_eq!(w.read_reply(true).unwrap(), Reply::Int(-42));
        assert_eq!(w.read_reply(true).unwrap(), Reply::Nil);
        assert_eq!(w.read_reply(true).unwrap(), Reply::Nil);
        assert_eq!(w.read_reply(true).unwrap(), Reply::Array(vec![]));
        assert_eq!(w.read_reply(true).unwrap(), bulk(b"a\r\nb"));
        assert_eq!(w.read_reply(true).unwrap(), Reply::Array(vec![Reply::Array(vec![Reply::Int(1)]), bulk(b""), error(b"ERR no")]));
        assert_eq!(w.read_reply(false).unwrap(), Reply::Nil, "a skipped reply is read past");
        assert_eq!(w.read_reply(true).unwrap(), Reply::Int(7));
        writer.join().unwrap();
    }

    /// Bytes to read, then the end of the stream; writes go nowhere.
    struct Bytes(io::Cursor<Vec<u8>>);

    impl Read for Bytes {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }
    }

    impl Write for Bytes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn wire(bytes: &[u8]) -> Wire<Bytes> {
        Wire::with_buffer(Bytes(io::Cursor::new(bytes.to_vec())), 16)
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |depth: usize| [b"*1\r\n".repeat(depth), b":7\r\n".to_vec()].concat();
        let mut w = wire(&nested(MAX_DEPTH));
        let mut r = w.read_reply(true).unwrap();
        for _ in 0..MAX_DEPTH {
            let Reply::Array(mut items) = r else { panic!("an array") };
            r = items.pop().unwrap();
        }
        assert_eq!(r, Reply::Int(7));
        for keep in [true, false] {
            let e = wire(&nested(MAX_DEPTH + 1)).read_reply(keep).unwrap_err();
            assert!(matches!(e, WireError::Protocol(ref m) if m.contains("nested deeper")), "{e}");
        }
    }

    #[test]
    fn announced_lengths_reserve_only_what_arrived() {
        let mut w = wire(b"$4294967296\r\nabc");
        assert!(matches!(w.read_reply(true), Err(WireError::Io(_))), "the stream ends first");
        assert!(w.buf.len() <= MAX_RESERVE, "{} bytes", w.buf.len());
        let mut w = wire(&[b"*1000000000\r\n".repeat(3), b":1\r\n".to_vec()].concat());
        assert!(matches!(w.read_reply(true), Err(WireError::Io(_))));
        assert!(wire(b"$4294967297\r\n").read_reply(true).is_err(), "longer than MAX_BULK");
    }

    #[test]
    fn error_codes() {
        assert_eq!(
            error(b"WRONGTYPE Operation against a key"),
            Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE Operation against a key".into() }
        );
    }
}
