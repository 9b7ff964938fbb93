//! What runs each command: its handler and lock scope, the half of a command-table row the
//! call path supplies (the facts are `spec`'s). `commands::table` lists the rows.

use super::{CmdResult, Ctx};
use crate::engine::LockPlan;

pub use crate::cmdspec::{flags, AclKeys, Channels};

pub type Handler = for<'c, 'a, 'k> fn(&mut Ctx<'c, 'a, 'k>) -> CmdResult;
/// Builds a lock plan for commands whose key specs do not say everything (MOVE, COPY … DB,
/// SWAPDB): arguments, the client's db.
pub type PlanFn = fn(&[&[u8]], usize, &mut LockPlan) -> CmdResult;

/// What a command locks (DESIGN §1).
#[derive(Clone, Copy)]
pub enum Scope {
    /// Touches no keys (PING, CLIENT …).
    None,
    /// Locks the shards of the keys its key specs name.
    Keys,
    /// Walks the database one shard at a time (KEYS, SCAN, DBSIZE, RANDOMKEY); inside a
    /// transaction it locks the whole database instead.
    Walk,
    /// Reads every database one shard at a time (INFO keyspace); inside a transaction it
    /// locks every database instead, so it never waits for a shard its own EXEC holds.
    WalkAll,
    /// `WalkAll`, but locks every database when the predicate holds for the arguments
    /// (DEBUG RELOAD replaces the whole dataset; DEBUG DIGEST only reads it).
    WalkAllOr(fn(&[&[u8]]) -> bool),
    /// Locks every shard of the client's database (FLUSHDB).
    Db,
    /// Locks every shard of every database (FLUSHALL).
    All,
    /// Key specs plus a plan function for what they cannot express.
    Custom(PlanFn),
}

/// A command's run half.
#[derive(Clone, Copy)]
pub struct Run {
    pub handler: Handler,
    pub scope: Scope,
}

pub type Command = crate::cmdspec::Command<Run>;
pub type CommandTable = crate::cmdspec::CommandTable<Run>;
pub type Row = crate::cmdspec::Row<Run>;

pub const fn row(name: &'static str, handler: Handler, scope: Scope) -> Row {
    Row::new(name, Run { handler, scope })
}
