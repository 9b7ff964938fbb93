//! The command table's machinery (DESIGN habit 1): what a command is, and the table built from
//! rows. It is the single source of truth for dispatch, arity checks, the generic gates,
//! COMMAND INFO/DOCS/GETKEYS and each command's lock scope.
//!
//! A row names a command and what runs it (`R`: the call path's handler and lock scope,
//! `exec::table::Run`; this layer never looks inside). Its facts — arity, flags, ACL
//! categories, key specs, arguments — come from `specs.json`, extracted from Redis's command
//! specs by `tools/gen_specs.py` (which reads `commands/table.rs` for the list of names).

use super::keyspec::KeySpec;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::Arc;

/// One row of the table: a command's name and what runs it.
pub struct Row<R> {
    name: &'static str,
    run: R,
}

impl<R> Row<R> {
    pub const fn new(name: &'static str, run: R) -> Row<R> {
        Row { name, run }
    }
}

/// Command flags (Redis's CMD_* bits) used by the gates.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    pub const PROTECTED: u32 = 1 << 16;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    pub const MOVABLE_KEYS: u32 = 1 << 18;
    /// Atoll's own: may run while a RESP2 client is subscribed (Redis lists these commands
    /// in `processCommand`).
    pub const PUBSUB_CONTEXT: u32 = 1 << 19;
    pub const NO_ASYNC_LOADING: u32 = 1 << 20;

    pub fn from_name(n: &str) -> u32 {
        match n {
            "WRITE" => WRITE,
            "READONLY" => READONLY,
            "DENYOOM" => DENYOOM,
            "ADMIN" => ADMIN,
            "PUBSUB" => PUBSUB,
            "NOSCRIPT" => NOSCRIPT,
            "BLOCKING" => BLOCKING,
            "LOADING" => LOADING,
            "STALE" => STALE,
            "SKIP_MONITOR" => SKIP_MONITOR,
            "SKIP_SLOWLOG" => SKIP_SLOWLOG,
            "FAST" => FAST,
            "NO_AUTH" => NO_AUTH,
            "MAY_REPLICATE" => MAY_REPLICATE,
            "NO_MULTI" => NO_MULTI,
            "ALLOW_BUSY" => ALLOW_BUSY,
            "PROTECTED" => PROTECTED,
            "NO_MANDATORY_KEYS" => NO_MANDATORY_KEYS,
            "NO_ASYNC_LOADING" => NO_ASYNC_LOADING,
            _ => 0,
        }
    }
}

/// Redis's categories, in its order (ACL CAT, COMMAND INFO).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category's bit in `Command::acl_cats` (case-insensitive name, without `@`).
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(name)).map(|i| 1 << i)
}

/// The channels a command names, for the channel permission check (Redis's
/// `commands_with_channels`; the unsubscribe commands are not checked).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Channels {
    None,
    /// PUBLISH, SPUBLISH: the first argument.
    Publish,
    /// SUBSCRIBE, SSUBSCRIBE: every argument.
    Subscribe,
    /// PSUBSCRIBE: every argument, a pattern matched literally against the user's.
    PatternSubscribe,
}

impl Channels {
    pub fn of(name: &str) -> Channels {
        match name {
            "publish" | "spublish" => Channels::Publish,
            "subscribe" | "ssubscribe" => Channels::Subscribe,
            "psubscribe" => Channels::PatternSubscribe,
            _ => Channels::None,
        }
    }
}

/// How the ACL key check finds a command's keys, decided once when the table is built (the
/// check runs for every command of a restricted user).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum AclKeys {
    /// No keys.
    None,
    /// One key, always at this argument, needing this access (`KeySpec::acl`): GET, INCR …
    Single(usize, u8),
    /// From the key specs.
    Specs,
    /// The command's own rules, as Redis asks its `getkeys_proc`: access by option (SET,
    /// BITFIELD), keys the specs cannot express (SORT's STORE, MIGRATE's KEYS).
    Set,
    Bitfield,
    Sort,
    SortRo,
    Migrate,
}

impl AclKeys {
    fn of(name: &str, specs: &[KeySpec], single: Option<usize>) -> AclKeys {
        match name {
            "set" => AclKeys::Set,
            "bitfield" => AclKeys::Bitfield,
            "sort" => AclKeys::Sort,
            "sort_ro" => AclKeys::SortRo,
            "migrate" => AclKeys::Migrate,
            _ if specs.is_empty() => AclKeys::None,
            _ => match (single, specs) {
                (Some(pos), [spec]) if spec.acl & super::keyspec::NOT_KEY == 0 => AclKeys::Single(pos, spec.acl),
                _ => AclKeys::Specs,
            },
        }
    }
}

pub struct Command<R> {
    /// Lower-case full name: `get`, `config|get`.
    pub name: String,
    /// Index into per-command statistics.
    pub id: usize,
    pub arity: i64,
    pub flags: u32,
    /// Flag names as COMMAND INFO prints them (lower case).
    pub flag_names: Vec<String>,
    pub acl_categories: Vec<String>,
    /// Every ACL category the command is in, as bits (`acl::category_bit`), including those
    /// Redis derives from its flags (`setImplicitACLCategories`).
    pub acl_cats: u32,
    /// The channels it names, for ACL channel permissions.
    pub channels: Channels,
    /// Where the ACL key check finds its keys.
    pub acl_keys: AclKeys,
    pub tips: Vec<String>,
    pub key_specs: Vec<KeySpec>,
    /// Legacy (first, last, step) key range for COMMAND INFO.
    pub legacy_range: (i64, i64, i64),
    /// `Some(i)` when the command's only key is always argument `i` (the lock plan's fast
    /// path: GET, SET, INCR …).
    pub single_key: Option<usize>,
    /// What runs it (the call path's handler and lock scope).
    pub run: R,
    pub subcommands: Vec<Arc<Command<R>>>,
    pub spec: Json,
    pub is_container: bool,
}

impl<R> Command<R> {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Arity check: positive = exact, negative = at least |arity|.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        (self.arity > 0 && argc == self.arity) || (self.arity < 0 && argc >= -self.arity)
    }

    pub fn subcommand(&self, name: &[u8]) -> Option<&Arc<Command<R>>> {
        let prefix = self.name.len() + 1;
        self.subcommands.iter().find(|s| s.name.as_bytes()[prefix..].eq_ignore_ascii_case(name))
    }

    /// Name for error messages and stats: `get`, `config|get`.
    pub fn full_name(&self) -> &str {
        &self.name
    }
}

/// Why `rename-command` was refused; its text is Redis's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RenameError {
    NoSuchCommand,
    TargetExists,
}

impl std::fmt::Display for RenameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RenameError::NoSuchCommand => "No such command in rename-command",
            RenameError::TargetExists => "Target command name already exists",
        })
    }
}

pub struct CommandTable<R> {
    /// Keyed by the lowercase name's bytes: a lookup neither allocates nor validates UTF-8.
    /// foldhash, not ahash: names are a few bytes, where it takes about half the instructions
    /// (ahash without AES-NI at build time falls back to a slower mix), and a table that
    /// never grows after start-up cannot be flooded.
    map: HashMap<Box<[u8]>, Arc<Command<R>>, foldhash::fast::RandomState>,
    /// Every command and subcommand, indexed by `Command::id`.
    pub all: Vec<Arc<Command<R>>>,
}

static SPECS_JSON: &str = include_str!("specs.json");

fn single_key(specs: &[KeySpec]) -> Option<usize> {
    use super::keyspec::{Begin, Find};
    match specs {
        [KeySpec { begin: Begin::Index(p), find: Find::Range { lastkey: 0, .. }, .. }] if *p > 0 => Some(*p as usize),
        _ => Option::None,
    }
}

fn legacy_range(specs: &[KeySpec]) -> ((i64, i64, i64), bool) {
    use super::keyspec::{Begin, Find};
    let mut range: Option<(i64, i64, i64)> = Option::None;
    let mut movable = false;
    for s in specs {
        match (&s.begin, &s.find) {
            (Begin::Index(pos), Find::Range { lastkey, step, limit }) if *limit <= 1 => {
                let last = if *lastkey < 0 { *lastkey } else { pos + lastkey };
                match range {
                    Option::None => range = Some((*pos, last, *step)),
                    Some((f, l, st)) => {
                        if l >= 0 && *pos == l + 1 && *step == st {
                            range = Some((f, last, st));
                        } else if l >= 0 && last >= 0 && *step == st {
                            range = Some((f.min(*pos), l.max(last), st));
                        } else {
                            movable = true;
                        }
                    }
                }
            }
            _ => movable = true,
        }
    }
    (range.unwrap_or((0, 0, 0)), movable)
}

/// The command's categories as bits: those its spec lists, plus those Redis derives from its
/// flags (`setImplicitACLCategories`).
fn implicit_categories(fl: u32, listed: &[String]) -> u32 {
    let bit = |n: &str| category_bit(n.as_bytes()).unwrap_or(0);
    let mut cats = listed.iter().fold(0, |acc, c| acc | bit(c.trim_start_matches('@')));
    let has = |f: u32| fl & f != 0;
    if has(flags::WRITE) {
        cats |= bit("write");
    }
    // Scripting commands flagged read-only (EVAL_RO …) are not @read, as in Redis.
    if has(flags::READONLY) && cats & bit("scripting") == 0 {
        cats |= bit("read");
    }
    if has(flags::ADMIN) {
        cats |= bit("admin") | bit("dangerous");
    }
    if has(flags::PUBSUB) {
        cats |= bit("pubsub");
    }
    if has(flags::FAST) {
        cats |= bit("fast");
    }
    if has(flags::BLOCKING) {
        cats |= bit("blocking");
    }
    if !has(flags::FAST) {
        cats |= bit("slow");
    }
    cats
}

/// The command flags COMMAND INFO shows, in the order of Redis 7.2's reply table
/// (`addReplyCommandFlags`); `movablekeys` is derived from the key specs.
const REPLY_FLAG_ORDER: &[&str] = &[
    "write",
    "readonly",
    "denyoom",
    "module",
    "admin",
    "pubsub",
    "noscript",
    "blocking",
    "loading",
    "stale",
    "skip_monitor",
    "skip_slowlog",
    "asking",
    "fast",
    "no_auth",
    "no_mandatory_keys",
    "no_async_loading",
    "no_multi",
    "allow_busy",
];

impl<R: Copy> CommandTable<R> {
    pub fn build(rows: &[Row<R>]) -> CommandTable<R> {
        let specs: serde_json::Map<String, Json> = serde_json::from_str(SPECS_JSON).expect("specs.json is valid JSON");
        let mut all: Vec<Arc<Command<R>>> = Vec::new();
        let make = |row: &Row<R>, id: usize, subs: Vec<Arc<Command<R>>>| -> Command<R> {
            let key = row.name.to_uppercase().replace('|', " ");
            let spec = specs.get(&key).unwrap_or_else(|| panic!("no spec for {key}")).clone();
            let flag_list: Vec<String> = spec["command_flags"]
                .as_array()
                .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let mut fl = flag_list.iter().fold(0, |acc, f| acc | flags::from_name(f));
            let key_specs: Vec<KeySpec> =
                spec["key_specs"].as_array().map(|a| a.iter().map(KeySpec::from_json).collect()).unwrap_or_default();
            let (legacy, movable) = legacy_range(&key_specs);
            let single = single_key(&key_specs);
            // COMMAND INFO's flags as Redis 7.2 prints them: in its flag table's order, once
            // each, the ones it hides (may_replicate, sentinel, protected …) left out.
            let mut flag_names: Vec<String> = REPLY_FLAG_ORDER
                .iter()
                .filter(|n| flag_list.iter().any(|f| f.eq_ignore_ascii_case(n)))
                .map(|n| n.to_string())
                .collect();
            if matches!(
                row.name,
                "ping"
                    | "subscribe"
                    | "ssubscribe"
                    | "unsubscribe"
                    | "sunsubscribe"
                    | "psubscribe"
                    | "punsubscribe"
                    | "quit"
                    | "reset"
            ) {
                fl |= flags::PUBSUB_CONTEXT;
            }
            if movable {
                fl |= flags::MOVABLE_KEYS;
                // Before allow_busy, as in Redis's table.
                let at = flag_names.iter().position(|n| n == "allow_busy").unwrap_or(flag_names.len());
                flag_names.insert(at, "movablekeys".into());
            }
            let acl_categories: Vec<String> = spec["acl_categories"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c.as_str().map(|s| format!("@{}", s.to_lowercase()))).collect())
                .unwrap_or_default();
            let acl_cats = implicit_categories(fl, &acl_categories);
            Command {
                name: row.name.to_string(),
                acl_cats,
                channels: Channels::of(row.name),
                acl_keys: AclKeys::of(row.name, &key_specs, single),
                id,
                arity: spec["arity"].as_i64().unwrap_or(-1),
                flags: fl,
                flag_names,
                acl_categories,
                tips: spec["command_tips"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|c| c.as_str().map(|s| s.to_lowercase())).collect())
                    .unwrap_or_default(),
                key_specs,
                legacy_range: legacy,
                single_key: single,
                run: row.run,
                is_container: !subs.is_empty(),
                subcommands: subs,
                spec,
            }
        };
        let mut map = HashMap::with_hasher(foldhash::fast::RandomState::default());
        // Subcommands first, so their containers can own them.
        let mut subs_of: HashMap<&str, Vec<Arc<Command<R>>>> = HashMap::new();
        for row in rows.iter().filter(|r| r.name.contains('|')) {
            let parent = row.name.split('|').next().unwrap();
            let cmd = Arc::new(make(row, all.len(), Vec::new()));
            all.push(cmd.clone());
            subs_of.entry(parent).or_default().push(cmd);
        }
        for row in rows.iter().filter(|r| !r.name.contains('|')) {
            let subs = subs_of.remove(row.name).unwrap_or_default();
            let cmd = Arc::new(make(row, all.len(), subs));
            all.push(cmd.clone());
            map.insert(row.name.as_bytes().into(), cmd);
        }
        assert!(subs_of.is_empty(), "subcommands without a container row");
        CommandTable { map, all }
    }
}

impl<R> CommandTable<R> {
    /// Case-insensitive lookup of a top-level command without allocating for short names.
    pub fn lookup(&self, name: &[u8]) -> Option<&Arc<Command<R>>> {
        let mut buf = [0u8; 32];
        let Some(lower) = buf.get_mut(..name.len()) else {
            // Only a name `rename-command` gave is this long.
            return self.map.get(&*name.to_ascii_lowercase());
        };
        for (d, &b) in lower.iter_mut().zip(name) {
            *d = b.to_ascii_lowercase();
        }
        self.map.get(&*lower)
    }

    /// `rename-command from to`: the command answers to `to` instead (nothing, if `to` is
    /// empty); its own name (COMMAND INFO, errors) stays.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), RenameError> {
        let Some(cmd) = self.map.remove(from.to_ascii_lowercase().as_bytes()) else {
            return Err(RenameError::NoSuchCommand);
        };
        if to.is_empty() {
            return Ok(());
        }
        let key: Box<[u8]> = to.to_ascii_lowercase().into_bytes().into();
        if self.map.contains_key(&key) {
            return Err(RenameError::TargetExists);
        }
        self.map.insert(key, cmd);
        Ok(())
    }

    /// Top-level commands by their original names, whatever `rename-command` did (ACL rules
    /// and categories name commands so).
    pub fn top_level_original(&self) -> impl Iterator<Item = &Arc<Command<R>>> {
        self.all.iter().filter(|c| !c.name.contains('|'))
    }

    /// Top-level commands (containers included, subcommands not).
    pub fn top_level(&self) -> impl Iterator<Item = &Arc<Command<R>>> {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
