//! Blocking commands (BLPOP, BLMOVE, BZPOPMIN, XREAD BLOCK …): waiters registered on keys and
//! served by the write that makes a key ready (DESIGN §1 "Blocking commands").
//!
//! The API a blocking command uses:
//! 1. Try to serve at once (the key already has data) like the non-blocking form.
//! 2. Inside MULTI/EXEC (`ctx.client.in_exec`) never block: reply as on timeout.
//! 3. Otherwise call `ctx.block(BlockRequest { .. })` and reply nothing. The client is suspended
//!    (its later pipelined commands wait) until one of its keys is served or the deadline passes.
//! 4. A write that may make a key ready calls `ctx.ks.signal_ready(key)`. Under that write's
//!    shard lock the longest-waiting client on the key is served by its `serve` function, which
//!    pops / reads on the waiter's behalf and builds the waiter's reply; the reply is handed to
//!    the waiter's worker. `serve` must not assume anything about the writer's client.

use crate::commands::{CmdError, KsView};
use crate::protocol::Reply;

/// Result of trying to serve a blocked client from a key that was signalled ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The reply is complete: the client is unblocked.
    Done,
    /// Nothing to serve after all (wrong type now, or still empty): keep waiting.
    NotReady,
}

/// Serves a blocked client: `argv` is the blocked command as the client sent it, `key` the key
/// that became ready (in `ks.db`, the client's database). Writes the client's reply to `reply`.
pub type ServeFn = fn(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served;

/// Writes the reply a blocked client gets when its timeout expires.
pub type TimeoutFn = fn(reply: &mut Reply);

/// What a blocking command asks for when it has to wait.
pub struct BlockRequest {
    /// Keys to wait on, in the client's current database.
    pub keys: Vec<Vec<u8>>,
    /// Absolute deadline in Unix ms; None waits forever.
    pub deadline_ms: Option<i64>,
    pub serve: ServeFn,
    pub on_timeout: TimeoutFn,
}

/// Parses a blocking timeout in seconds (BLPOP, BZPOPMIN …; fractions allowed, 0 = forever) into
/// an absolute deadline.
pub fn deadline_from_secs(arg: &[u8], now_ms: i64) -> Result<Option<i64>, CmdError> {
    let s = std::str::from_utf8(arg).map_err(|_| CmdError::msg("ERR timeout is not a float or out of range"))?;
    let v: f64 = s
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && !s.starts_with(char::is_whitespace))
        .ok_or_else(|| CmdError::msg("ERR timeout is not a float or out of range"))?;
    if v < 0.0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let ms = (v * 1000.0).ceil();
    if ms > (i64::MAX / 2) as f64 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok(if ms == 0.0 { None } else { Some(now_ms + ms as i64) })
}

/// Parses a timeout in milliseconds (XREAD BLOCK; 0 = forever).
pub fn deadline_from_ms(arg: &[u8], now_ms: i64) -> Result<Option<i64>, CmdError> {
    let v = crate::protocol::parse_i64(arg).ok_or_else(|| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if v < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    if v > i64::MAX / 2 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok(if v == 0 { None } else { Some(now_ms + v) })
}

/// Called by every write that may make `key` ready for blocked clients.
pub fn signal_ready(_ks: &mut KsView, _key: &[u8]) {
    // The waiter registry is being built; until it lands no client is ever suspended, so
    // there is nobody to serve.
}
