//! The socket under the wire: TCP, TLS (native-tls: the system's OpenSSL on
//! Linux, so `SSL_CERT_FILE` names a CA to trust) or a Unix socket, with its
//! timeouts, and [`connect`], which opens one and runs the handshake. What goes
//! over it is `resp`'s.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
#[cfg(unix)]
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::{WireError, WireResult};
use crate::resp::{Auth, Wire};

/// Where a connection goes (the host reads it from the URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    Tcp {
        host: String,
        port: u16,
    },
    /// `insecure`: no certificate or host name check (a URL's `#insecure`).
    Tls {
        host: String,
        port: u16,
        insecure: bool,
    },
    #[cfg(unix)]
    Unix(PathBuf),
}

/// Connects, authenticates, selects the database and names the client
/// (`Wire::handshake`), every step within `connect_timeout`; reads and writes
/// then wait at most `read_timeout` (`None`: forever).
pub fn connect(
    addr: &Addr,
    auth: &Auth,
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
    spin: Duration,
) -> WireResult<Wire<Stream>> {
    let mut wire = Wire::new(Stream::connect(addr, connect_timeout)?);
    wire.handshake(auth)?;
    wire.stream().set_timeouts(read_timeout, read_timeout)?;
    wire.stream_mut().set_spin(spin);
    Ok(wire)
}

/// An open connection's socket, and how its reads wait (`set_spin`).
pub struct Stream {
    socket: Socket,
    spin: Duration,
    /// The longest a polling read waited for bytes since `take_longest_wait`.
    longest_wait: Duration,
}

enum Socket {
    Tcp(TcpStream),
    Tls(Box<native_tls::TlsStream<TcpStream>>),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    /// Opens the socket (and the TLS session) to `addr`, every step within
    /// `timeout`; reads and writes then wait at most `timeout` until
    /// `set_timeouts` says otherwise.
    pub fn connect(addr: &Addr, timeout: Duration) -> WireResult<Stream> {
        let socket = match addr {
            Addr::Tcp { host, port } => Socket::Tcp(tcp(host, *port, timeout)?),
            Addr::Tls { host, port, insecure } => {
                let tcp = tcp(host, *port, timeout)?;
                tcp.set_read_timeout(Some(timeout))?;
                tcp.set_write_timeout(Some(timeout))?;
                let tls = native_tls::TlsConnector::builder()
                    .danger_accept_invalid_certs(*insecure)
                    .danger_accept_invalid_hostnames(*insecure)
                    .build()
                    .map_err(|e| WireError::Io(io::Error::other(e)))?;
                Socket::Tls(Box::new(tls.connect(host, tcp).map_err(|e| WireError::Io(io::Error::other(e.to_string())))?))
            }
            #[cfg(unix)]
            Addr::Unix(path) => Socket::Unix(UnixStream::connect(path)?),
        };
        let stream = Stream { socket, spin: Duration::ZERO, longest_wait: Duration::ZERO };
        stream.set_timeouts(Some(timeout), Some(timeout))?;
        Ok(stream)
    }

    pub fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        let tcp = match &self.socket {
            Socket::Tcp(s) => s,
            Socket::Tls(s) => s.get_ref(),
            #[cfg(unix)]
            Socket::Unix(s) => {
                s.set_read_timeout(read)?;
                return s.set_write_timeout(write);
            }
        };
        tcp.set_read_timeout(read)?;
        tcp.set_write_timeout(write)
    }

    /// How long a read that finds nothing to read polls the socket before it
    /// sleeps until the server answers (zero: it sleeps at once). A sleeping
    /// reader is woken by the server's answer, which on a virtual machine can
    /// take longer than a small command itself (about 60 µs of a 90 µs round
    /// trip on loopback here, against 30 µs polling; `benches/README.md`). Polling
    /// yields the core to any other thread that wants it. TCP and Unix sockets
    /// only: a TLS stream always sleeps.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// The longest a read waited for the server's bytes since the last call
    /// (reads that poll only: with no spin, nothing is timed), and starts over.
    pub fn take_longest_wait(&mut self) -> Duration {
        std::mem::take(&mut self.longest_wait)
    }

    /// A read that polls for up to `spin` before it blocks.
    fn read_spinning(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let start = Instant::now();
        let polled = match &mut self.socket {
            Socket::Tcp(s) => poll(s, buf, self.spin, start, TcpStream::set_nonblocking),
            #[cfg(unix)]
            Socket::Unix(s) => poll(s, buf, self.spin, start, UnixStream::set_nonblocking),
            Socket::Tls(_) => Ok(None),
        };
        let n = match polled? {
            Some(n) => n,
            None => self.read_blocking(buf)?,
        };
        self.longest_wait = self.longest_wait.max(start.elapsed());
        Ok(n)
    }

    fn read_blocking(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.socket {
            Socket::Tcp(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.read(buf),
        }
    }
}

/// Reads from `s` without blocking until bytes come or `spin` has passed since
/// `start`: `Some(n)`, or `None` (nothing yet; the socket blocks again).
fn poll<S: Read>(
    s: &mut S,
    buf: &mut [u8],
    spin: Duration,
    start: Instant,
    nonblocking: impl Fn(&S, bool) -> io::Result<()>,
) -> io::Result<Option<usize>> {
    nonblocking(s, true)?;
    let got = loop {
        match s.read(buf) {
            Ok(n) => break Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if start.elapsed() >= spin {
                    break Ok(None);
                }
                std::thread::yield_now();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    nonblocking(s, false)?;
    got
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.spin.is_zero() {
            self.read_blocking(buf)
        } else {
            self.read_spinning(buf)
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.socket {
            Socket::Tcp(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.socket {
            Socket::Tcp(s) => s.flush(),
            Socket::Tls(s) => s.flush(),
            #[cfg(unix)]
            Socket::Unix(s) => s.flush(),
        }
    }
}

fn tcp(host: &str, port: u16, timeout: Duration) -> WireResult<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host}:{port} resolves to no address"));
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last.into())
}
