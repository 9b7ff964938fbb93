//! Blocking commands (BLPOP, BLMOVE, BZPOPMIN, XREAD BLOCK …): waiters registered on keys and
//! served by the write that makes a key ready (DESIGN §1 "Blocking commands").

use crate::commands::KsView;

/// Called by every write that may make `key` ready for blocked clients.
pub fn signal_ready(_ks: &mut KsView, _key: &[u8]) {
    // Waiter registry lands with the blocking commands; until then no client can be blocked,
    // so there is nobody to serve.
}
