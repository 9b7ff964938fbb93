//! A replica's connection to its master: plain TCP, or TLS over it (`tls-replication yes`),
//! split into the reading half (the link thread: snapshot and stream) and the writing half
//! (the link thread's GETACK answers and the ACK thread's REPLCONF ACKs).
//!
//! The link is blocking I/O on threads of its own, so TLS is rustls's `ClientConnection`
//! driven by hand rather than a tokio stream: the reader waits on the socket without holding
//! anything, then feeds what arrived to the TLS state under its lock; a writer takes the same
//! lock to encrypt and send. One lock, never held across a wait for the master's bytes, so an
//! ACK is never stuck behind a read.

use crate::lockorder::{rank, Mutex};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

type Tls = Arc<Mutex<ClientConnection, { rank::LEAF }>>;

/// The reading half.
pub struct Reader {
    sock: TcpStream,
    tls: Option<Tls>,
    /// TLS records read from the socket, not yet handed to rustls (it takes what fits).
    raw: Vec<u8>,
    at: usize,
}

/// The writing half; shared by the threads that write, each write whole. With TLS, the
/// socket is written under the TLS state's lock (the reader's answers too): records must go
/// out in the order they were sealed.
pub enum Writer {
    Plain(Mutex<TcpStream, { rank::LEAF }>),
    Tls { sock: TcpStream, tls: Tls },
}

/// Makes the connection over `sock`: TLS when `tls` is given (the handshake done here, the
/// master's certificate checked as `services::tls` says), plain otherwise.
pub fn open(sock: TcpStream, host: &str, tls: Option<Arc<ClientConfig>>) -> io::Result<(Reader, Writer)> {
    let tls = match tls {
        None => None,
        Some(config) => {
            // An address is no server name: no SNI then, as Redis sends none for one.
            let name = match host.parse::<std::net::IpAddr>() {
                Ok(ip) => ServerName::IpAddress(ip.into()),
                Err(_) => ServerName::try_from(host.to_string())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            };
            let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
            let mut s = &sock;
            while conn.is_handshaking() {
                conn.complete_io(&mut s)?;
            }
            Some(Arc::new(Mutex::new(conn)))
        }
    };
    let reader = Reader { sock: sock.try_clone()?, tls: tls.clone(), raw: Vec::new(), at: 0 };
    let writer = match tls {
        None => Writer::Plain(Mutex::new(sock)),
        Some(tls) => Writer::Tls { sock, tls },
    };
    Ok((reader, writer))
}

impl Reader {
    /// The TCP socket underneath (addresses, for CLIENT LIST's master client).
    pub fn tcp(&self) -> &TcpStream {
        &self.sock
    }
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = &self.tls else { return self.sock.read(buf) };
        loop {
            {
                let mut c = tls.lock();
                match c.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if self.at < self.raw.len() {
                    self.at += c.read_tls(&mut &self.raw[self.at..])?;
                    let state = c.process_new_packets().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    // What the master's TLS asks back (a key update's answer) goes out now.
                    flush_tls(&mut c, &self.sock)?;
                    if state.peer_has_closed() && state.plaintext_bytes_to_read() == 0 {
                        return Ok(0);
                    }
                    continue;
                }
            }
            self.raw.resize(64 << 10, 0);
            let got = (&self.sock).read(&mut self.raw);
            // On an error nothing was read: no stale bytes may reach rustls on a retry (an
            // interrupted read is retried by the std readers above this one).
            let n = got.inspect_err(|_| self.raw.clear())?;
            self.raw.truncate(n);
            self.at = 0;
            if n == 0 {
                return Ok(0);
            }
        }
    }
}

impl Writer {
    /// Sends `bytes` whole (no other write in between).
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Writer::Plain(sock) => sock.lock().write_all(bytes),
            Writer::Tls { sock, tls } => {
                let mut c = tls.lock();
                c.writer().write_all(bytes)?;
                flush_tls(&mut c, sock)
            }
        }
    }
}

/// Sends what rustls has sealed, all of it; a signal that interrupts a write (the socket has a
/// send timeout, so Linux does not restart the call) is retried, as `write_all` retries.
fn flush_tls(c: &mut ClientConnection, sock: &TcpStream) -> io::Result<()> {
    while c.wants_write() {
        match c.write_tls(&mut &*sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
