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
use std::time::Duration;

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
pub fn connect(addr: &Addr, auth: &Auth, connect_timeout: Duration, read_timeout: Option<Duration>) -> WireResult<Wire<Stream>> {
    let mut wire = Wire::new(Stream::connect(addr, connect_timeout)?);
    wire.handshake(auth)?;
    wire.stream().set_timeouts(read_timeout, read_timeout)?;
    Ok(wire)
}

pub enum Stream {
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
        let stream = match addr {
            Addr::Tcp { host, port } => Stream::Tcp(tcp(host, *port, timeout)?),
            Addr::Tls { host, port, insecure } => {
                let tcp = tcp(host, *port, timeout)?;
                tcp.set_read_timeout(Some(timeout))?;
                tcp.set_write_timeout(Some(timeout))?;
                let tls = native_tls::TlsConnector::builder()
                    .danger_accept_invalid_certs(*insecure)
                    .danger_accept_invalid_hostnames(*insecure)
                    .build()
                    .map_err(|e| WireError::Io(io::Error::other(e)))?;
                Stream::Tls(Box::new(tls.connect(host, tcp).map_err(|e| WireError::Io(io::Error::other(e.to_string())))?))
            }
            #[cfg(unix)]
            Addr::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        };
        stream.set_timeouts(Some(timeout), Some(timeout))?;
        Ok(stream)
    }

    pub fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        let tcp = match self {
            Stream::Tcp(s) => s,
            Stream::Tls(s) => s.get_ref(),
            #[cfg(unix)]
            Stream::Unix(s) => {
                s.set_read_timeout(read)?;
                return s.set_write_timeout(write);
            }
        };
        tcp.set_read_timeout(read)?;
        tcp.set_write_timeout(write)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
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
