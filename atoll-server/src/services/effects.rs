//! Effects: what a write changed, as the commands that redo it (DESIGN §1 "Effects"). The call
//! path collects them; the AOF and the replication stream consume them.

/// A write's deterministic effect, for AOF and replicas (DESIGN §1 "Effects").
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    pub db: usize,
    pub argv: Vec<Vec<u8>>,
    /// Where it goes: both the AOF and replicas, unless a script said otherwise
    /// (`redis.set_repl`).
    pub to: Propagate,
}

/// The targets of an effect (Redis's `PROPAGATE_AOF` / `PROPAGATE_REPL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagate {
    Both,
    Aof,
    Replicas,
}

impl Effect {
    pub fn new(db: usize, argv: Vec<Vec<u8>>) -> Effect {
        Effect { db, argv, to: Propagate::Both }
    }

    /// The part of `effects` that goes to `side` (`Aof` or `Replicas`); a MULTI … EXEC left
    /// empty goes away.
    pub fn for_side(effects: &[Effect], side: Propagate) -> Vec<Effect> {
        let kept: Vec<Effect> = effects.iter().filter(|e| e.to == Propagate::Both || e.to == side).cloned().collect();
        let only_wrap = kept.len() == 2 && kept.iter().all(|e| e.db == Self::NO_DB);
        if only_wrap {
            Vec::new()
        } else {
            kept
        }
    }

    /// The `db` of an effect that belongs to no database: MULTI and EXEC around a group. The
    /// stream selects no database for it, so a transaction reads `MULTI`, `SELECT`, … as
    /// Redis writes it. (The AOF's writer, below this layer, knows it as `persist::aof::NO_DB`.)
    pub const NO_DB: usize = crate::persist::aof::NO_DB;

    /// MULTI … EXEC around `effects` when there are several, as Redis propagates a
    /// transaction or a script.
    pub fn wrap(effects: &mut Vec<Effect>) {
        if effects.len() > 1 {
            effects.insert(0, Self::new(Self::NO_DB, vec![b"MULTI".to_vec()]));
            effects.push(Self::new(Self::NO_DB, vec![b"EXEC".to_vec()]));
        }
    }
}
