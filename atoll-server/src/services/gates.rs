//! The command path's gate word: conditions that refuse commands before they run, kept in one
//! byte (`Persistence::gates`) so the command path tests them all with one load. Raised by
//! persistence (loading, a failed save) and by scripting (a busy script).

/// A start-up load is running: commands without the `loading` flag get `-LOADING`.
pub const GATE_LOADING: u8 = 1;
/// The last SAVE/BGSAVE failed: `rdb_last_bgsave_status:err`, and `-MISCONF` for writes.
pub const GATE_SAVE_FAILED: u8 = 2;
/// A script has run past `busy-reply-threshold`: other clients get `-BUSY` (set and cleared by
/// the script's own worker).
pub const GATE_SCRIPT_BUSY: u8 = 4;
/// Following a master with `replica-read-only`: writes from clients get `-READONLY`.
pub const GATE_READONLY: u8 = 8;
/// Following a master: keys past their time are not deleted (the master's DELs do that) and
/// nothing is evicted.
pub const GATE_REPLICA: u8 = 16;
/// `min-replicas-to-write` is set and fewer replicas than that are online within
/// `min-replicas-max-lag`: writes get `-NOREPLICAS`.
pub const GATE_NO_REPLICAS: u8 = 32;
/// Following a master whose link is down, with `replica-serve-stale-data no`: commands
/// without the `stale` flag get `-MASTERDOWN`.
pub const GATE_STALE: u8 = 64;
