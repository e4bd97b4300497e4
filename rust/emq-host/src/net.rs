//! The socket under the wire: TCP, TLS (native-tls: the system's OpenSSL on
//! Linux, so `SSL_CERT_FILE` names a CA to trust) or a Unix socket, with its
//! timeouts. What goes over it is `resp`'s.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::ConnectionAddr;

use crate::resp::{WireError, WireResult};

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
    pub fn connect(addr: &ConnectionAddr, timeout: Duration) -> WireResult<Stream> {
        let stream = match addr {
            ConnectionAddr::Tcp(host, port) => Stream::Tcp(tcp(host, *port, timeout)?),
            ConnectionAddr::TcpTls { host, port, insecure, .. } => {
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
            ConnectionAddr::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
            #[allow(unreachable_patterns)]
            other => return Err(WireError::Protocol(format!("unsupported address {other:?}"))),
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
