//! Lua debugging sessions (SCRIPT DEBUG SYNC, then EVAL): the connection leaves its worker's
//! event loop for a thread of its own, which runs the EVAL with the debugger reading and
//! writing the socket directly (`scripting::ldb`), writes the reply and closes — Redis ends
//! every debugging session by closing the connection too.
//!
//! Why a thread: the debugger waits on a person between lines, with the script's locks held.
//! Waiting inside the worker would stop every other client of that worker, and one of them
//! waiting for a key the script holds would stop the session itself. Here the worker goes on;
//! commands that need what the script holds wait for it, as they would for any long script.

use super::tls::TlsCodec;
use super::worker::{release, Link};
use crate::exec::client::DebugWire;
use crate::exec::Server;
use crate::protocol::Reply;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A write the client does not take within this long ends the session (Redis's 5 s send
/// timeout).
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs the debugging session of `link`'s EVAL (its `ldb_request`) on a new thread. `sealed`:
/// bytes the backend had made ready for the socket and not yet written (TLS records, or a
/// short send's rest); `link.out` from `link.sent` on is output not yet sealed.
pub fn hand_over(srv: Arc<Server>, fd: OwnedFd, link: Link, sealed: Vec<u8>) {
    let spawned = std::thread::Builder::new().name("atoll-ldb".into()).spawn(move || session(srv, fd, link, sealed));
    if let Err(e) = spawned {
        // The link (and its socket) went with the closure; the client sees its connection
        // close, as when Redis cannot fork a debugging session.
        crate::log_warning!("Could not start a Lua debugging session: {e}");
    }
}

fn session(srv: Arc<Server>, fd: OwnedFd, mut link: Link, sealed: Vec<u8>) {
    let mut wire = SocketWire { fd: fd.as_raw_fd(), tls: link.tls.take(), plain: link.session.take_pending() };
    // What the connection owed the client comes first.
    let pending = link.out.split_off(link.sent.min(link.out.len()));
    link.out.clear();
    link.sent = 0;
    let ok = wire.write_sealed(&sealed).is_ok() && wire.write(&pending).is_ok();
    let client = &mut link.session.client;
    if let Some(argv) = client.ldb_request.take() {
        let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let ws = &srv.stats.workers[client.worker];
        client.ldb_wire = Some(Box::new(wire));
        let mut reply = Reply { buf: Vec::new(), proto: client.proto };
        crate::exec::call::run_passed(&srv, ws, client, &refs, &mut reply);
        if let Some(mut w) = client.ldb_wire.take() {
            if ok && w.write(&reply.buf).is_ok() {
                w.finish();
            }
        }
    }
    release(&srv, &mut link, move || drop(fd));
}

/// The client's socket, in blocking use (the descriptor stays non-blocking; `poll` waits).
struct SocketWire {
    fd: RawFd,
    tls: Option<Box<TlsCodec>>,
    /// Bytes received (opened, on TLS) and not yet handed to the debugger.
    plain: Vec<u8>,
}

impl SocketWire {
    /// Waits until the socket is ready for `events`, or `limit` passes (false).
    fn wait(&self, events: i16, limit: Option<Duration>) -> io::Result<bool> {
        let start = Instant::now();
        loop {
            let ms = match limit {
                Some(l) => l.saturating_sub(start.elapsed()).as_millis().min(1000) as i32,
                None => 1000,
            };
            let mut p = libc::pollfd { fd: self.fd, events, revents: 0 };
            // SAFETY: one valid pollfd for the length of the call.
            let n = unsafe { libc::poll(&mut p, 1, ms) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n > 0 {
                return Ok(true);
            }
            if limit.is_some_and(|l| start.elapsed() >= l) {
                return Ok(false);
            }
        }
    }

    /// Writes bytes as they go on the wire.
    fn write_sealed(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let start = Instant::now();
        while !bytes.is_empty() {
            // SAFETY: writes from a live slice, within its length.
            let n = unsafe { libc::send(self.fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
            if n >= 0 {
                bytes = &bytes[n as usize..];
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => {
                    let left = SEND_TIMEOUT.saturating_sub(start.elapsed());
                    if left.is_zero() || !self.wait(libc::POLLOUT, Some(left))? {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                _ => return Err(e),
            }
        }
        Ok(())
    }
}

impl DebugWire for SocketWire {
    fn read(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        while self.plain.is_empty() {
            self.wait(libc::POLLIN, None)?;
            // SAFETY: reads into a local buffer, within its length.
            let n = unsafe { libc::read(self.fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n == 0 {
                return Ok(0);
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            let got = &chunk[..n as usize];
            match self.tls.as_deref_mut() {
                None => self.plain.extend_from_slice(got),
                Some(tls) => {
                    let mut plain = std::mem::take(&mut self.plain);
                    tls.open(got, &mut plain).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    self.plain = plain;
                    // Messages of the protocol itself (a key update) may be due.
                    if tls.wants_write() {
                        let mut wire = Vec::new();
                        tls.seal(&[], &mut wire);
                        self.write_sealed(&wire)?;
                    }
                }
            }
        }
        let n = self.plain.len();
        buf.append(&mut self.plain);
        Ok(n)
    }

    fn finish(&mut self) {
        // On TLS, the close alert goes before the socket closes, as Redis's.
        if let Some(tls) = self.tls.as_deref_mut() {
            let mut wire = Vec::new();
            tls.close(&mut wire);
            let _ = self.write_sealed(&wire);
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self.tls.as_deref_mut() {
            None => self.write_sealed(bytes),
            Some(tls) => {
                let mut wire = Vec::new();
                tls.seal(bytes, &mut wire);
                self.write_sealed(&wire)
            }
        }
    }
}
