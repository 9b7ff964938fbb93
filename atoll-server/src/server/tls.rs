//! A TLS connection's codec: ciphertext in, plaintext out and back, no I/O (rustls's
//! `ServerConnection` driven by buffers). The backends stay as they are: what a socket
//! delivers is opened here before the session sees it (`worker::run_input`), and the replies a
//! round produced are sealed into the backend's send buffer before they are written. The
//! handshake is part of the same flow: its messages are output the connection has to write
//! even when no command ran (`wants_write`).

use rustls::ServerConnection;
use std::io::{Read, Write};
use std::sync::Arc;

pub struct TlsCodec {
    conn: ServerConnection,
    /// Opened bytes of the last input (kept to reuse the allocation).
    pub plain: Vec<u8>,
}

/// Keeps the decrypted-input buffer between reads up to this size.
const KEEP_PLAIN: usize = 64 * 1024;

impl TlsCodec {
    pub fn new(config: Arc<rustls::ServerConfig>) -> Result<TlsCodec, rustls::Error> {
        let mut conn = ServerConnection::new(config)?;
        // Replies are sealed as a round produces them, and their size is bounded by the
        // output-buffer limits that the backend applies to the sealed bytes: rustls's own
        // limit on plaintext waiting for the handshake would only drop bytes.
        conn.set_buffer_limit(None);
        Ok(TlsCodec { conn, plain: Vec::new() })
    }

    /// Takes ciphertext from the socket, appending what it opens to `plain`. An error means
    /// the peer broke the protocol (or failed the client-certificate check): the connection
    /// must close once the alert rustls queued is written.
    pub fn open(&mut self, mut cipher: &[u8], plain: &mut Vec<u8>) -> Result<(), rustls::Error> {
        while !cipher.is_empty() {
            // Takes at most what rustls can buffer; the rest goes in on the next turn, once
            // the records read so far are processed and their plaintext drained.
            match self.conn.read_tls(&mut cipher) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => return Err(rustls::Error::General("TLS input buffer full".into())),
            }
            let state = self.conn.process_new_packets()?;
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let at = plain.len();
                plain.resize(at + n, 0);
                // Exactly what `process_new_packets` reported as readable.
                let got = self.conn.reader().read(&mut plain[at..]).unwrap_or(0);
                plain.truncate(at + got);
            }
        }
        Ok(())
    }

    /// Seals `plain` (the round's replies) and appends the records to `wire`, with any
    /// handshake or alert messages due.
    pub fn seal(&mut self, plain: &[u8], wire: &mut Vec<u8>) {
        if !plain.is_empty() {
            // The buffer limit is off: `write_all` takes everything (before the handshake
            // completes it is held and sent as soon as it does).
            let _ = self.conn.writer().write_all(plain);
        }
        while self.conn.wants_write() {
            if self.conn.write_tls(wire).is_err() {
                break;
            }
        }
    }

    /// Ends the TLS session: appends the `close_notify` alert to `wire` (written before the
    /// socket closes, so the client knows nothing was cut off).
    pub fn close(&mut self, wire: &mut Vec<u8>) {
        self.conn.send_close_notify();
        self.seal(&[], wire);
    }

    /// Messages of the protocol itself (handshake, alerts) wait to be written.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Gives back a large decrypted-input buffer once its bytes are used.
    pub fn keep_plain(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        if buf.capacity() <= KEEP_PLAIN {
            self.plain = buf;
        }
    }
}
