//! Users and their permissions, as Redis 7.2's ACL: rules (`on`, `>pass`, `~keys`, `&channels`,
//! `+cmd`, `-@category`, selectors …), the permission check every command passes, the ACL log
//! and the ACL file.
//!
//! A user's rules are an immutable [`Rules`] value behind an `Arc`, replaced whole by ACL SETUSER
//! (rules are validated on a copy, so a bad rule changes nothing, as Redis stages them on a
//! temporary user). Connections keep the `Arc` they last read and compare one counter, the
//! registry's `epoch`, before each command: a change reaches every connection without a lock on
//! the command path, and a user whose root selector allows everything (the default user, unless
//! restricted) skips the check altogether.

use crate::cmdspec::keyspec;
pub use crate::cmdspec::{category_bit, Channels, CATEGORIES};
use crate::cmdspec::{AclKeys, Command, CommandTable};
use crate::engine::glob::glob_match;
use crate::lockorder::{rank, Mutex, RwLock};
use sha2::{Digest, Sha256};
use smallvec::SmallVec;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Command bits per selector. Redis keeps 1024, the last one reserved: set only by `+@all`, it
/// tells whether the rules started from everything (and so would allow commands added later).
const WORDS: usize = 16;
const FUTURE_BIT: usize = WORDS * 64 - 1;

/// Key pattern permissions.
const READ: u8 = 1;
const WRITE: u8 = 2;
const RW: u8 = READ | WRITE;

#[derive(Clone, PartialEq, Debug)]
struct KeyPattern {
    perm: u8,
    pattern: Vec<u8>,
    /// The pattern is a literal prefix followed by one `*` (`app:*`, `*`): matched by comparing
    /// bytes, the common case of the per-command check.
    prefix: Option<usize>,
}

/// `Some(len)` when `p` is `literal*` with no other glob character.
fn prefix_len(p: &[u8]) -> Option<usize> {
    let (last, head) = p.split_last()?;
    (*last == b'*' && !head.iter().any(|c| matches!(c, b'*' | b'?' | b'[' | b'\\'))).then_some(head.len())
}

impl KeyPattern {
    fn new(perm: u8, pattern: &[u8]) -> KeyPattern {
        KeyPattern { perm, pattern: pattern.to_vec(), prefix: prefix_len(pattern) }
    }

    fn matches(&self, key: &[u8]) -> bool {
        match self.prefix {
            Some(n) => key.starts_with(&self.pattern[..n]),
            None => glob_match(&self.pattern, key, false),
        }
    }

    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perm {
            RW => b"~".as_slice(),
            READ => b"%R~",
            _ => b"%W~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// One set of permissions: the root selector (rules given outside parentheses) or one of the
/// `(…)` selectors a user may add. A command is allowed when any selector allows all of it.
#[derive(Clone)]
pub struct Selector {
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    allowed: [u64; WORDS],
    /// `+select|0`: first arguments allowed for a command whose bit is not set (deprecated in
    /// Redis, still honoured).
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    patterns: Vec<KeyPattern>,
    channels: Vec<Vec<u8>>,
    /// The command and category rules in the order given, each once (`+get`, `-@write`): what
    /// ACL LIST prints after `+@all`/`-@all`.
    rules: Vec<String>,
}

/// Why users could not be set or loaded; its text is Redis's.
#[derive(Debug, Clone, PartialEq)]
pub enum AclError {
    /// A selector's parenthesis is not closed: the argument it starts at.
    Unmatched(String),
    /// ACL SETUSER: a rule (modifier) was refused.
    Modifier { op: String, why: RuleError },
    /// A `user` line of the configuration: a rule was refused.
    Configured { op: String, user: String, why: RuleError },
    /// A `user` line of the configuration names a user with spaces.
    SpacesInName,
    /// An ACL file: every problem it has, in Redis's words, one after the other.
    File(String),
}

impl std::fmt::Display for AclError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AclError::Unmatched(arg) => write!(f, "Unmatched parenthesis in acl selector starting at '{arg}'."),
            AclError::Modifier { op, why } => write!(f, "Error in ACL SETUSER modifier '{op}': {}", why.text()),
            AclError::Configured { op, user, why } => {
                write!(f, "Error loading ACL rule '{op}' for the user named '{user}': {}", why.text())
            }
            AclError::SpacesInName => f.write_str("Spaces not allowed in ACL usernames"),
            AclError::File(problems) => f.write_str(problems),
        }
    }
}

/// Why a rule was refused (Redis's `ACLSetUserStringError`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RuleError {
    Syntax,
    Unknown,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
    FirstArgOfSub,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::AfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::AfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// What rules need from the server: the command table (ACL rules name commands by their
/// original names, whatever `rename-command` did) and `acl-pubsub-default`.
pub struct RuleEnv<'a, R> {
    pub table: &'a CommandTable<R>,
    pub all_channels_default: bool,
}

impl<'a, R> RuleEnv<'a, R> {
    fn find(&self, name: &[u8]) -> Option<&'a Arc<Command<R>>> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.table.all.iter().find(|c| c.name == lower)
    }
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b)
}

impl Selector {
    fn new(all_channels: bool) -> Selector {
        Selector {
            all_keys: false,
            all_channels,
            all_commands: false,
            allowed: [0; WORDS],
            first_args: Vec::new(),
            patterns: Vec::new(),
            channels: Vec::new(),
            rules: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        id < FUTURE_BIT + 1 && self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if id > FUTURE_BIT {
            return;
        }
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Allows or denies a command, and with a container every subcommand.
    fn change<R>(&mut self, cmd: &Command<R>, on: bool) {
        self.set_bit(cmd.id, on);
        self.first_args.retain(|(id, _)| *id != cmd.id);
        for sub in &cmd.subcommands {
            self.set_bit(sub.id, on);
        }
    }

    /// Keeps `rule` once, at the end: an earlier rule for the same command (or one of its
    /// subcommands, or first arguments) is dropped, as Redis's `ACLUpdateCommandRules` does.
    fn note_rule(&mut self, rule: &str, on: bool) {
        let rule = rule.to_ascii_lowercase();
        self.rules.retain(|r| {
            let body = &r[1..];
            !(body == rule
                || (body.len() > rule.len() && body.starts_with(&rule) && body.as_bytes()[rule.len()] == b'|'))
        });
        self.rules.push(format!("{}{rule}", if on { '+' } else { '-' }));
    }

    fn set_category<R>(&mut self, env: &RuleEnv<R>, cat: &[u8], on: bool) -> Result<(), RuleError> {
        let bit = category_bit(cat).ok_or(RuleError::Unknown)?;
        self.note_rule(&format!("@{}", String::from_utf8_lossy(cat)), on);
        for cmd in env.table.top_level_original() {
            if cmd.acl_cats & bit != 0 {
                self.change(cmd, on);
            }
            for sub in &cmd.subcommands {
                if sub.acl_cats & bit != 0 {
                    self.change(sub, on);
                }
            }
        }
        Ok(())
    }

    /// One selector rule (Redis's `ACLSetSelector`).
    fn apply<R>(&mut self, env: &RuleEnv<R>, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.patterns.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.patterns.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.allowed = [u64::MAX; WORDS];
            self.all_commands = true;
            self.rules.clear();
            self.first_args.clear();
        } else if is("nocommands") || is("-@all") {
            self.allowed = [0; WORDS];
            self.all_commands = false;
            self.rules.clear();
            self.first_args.clear();
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.all_keys {
                return Err(RuleError::AfterAllKeys);
            }
            let mut perm = 0;
            let mut offset = 1;
            if op[0] == b'%' {
                loop {
                    match op.get(offset) {
                        Some(c) if c.eq_ignore_ascii_case(&b'R') && perm & READ == 0 => perm |= READ,
                        Some(c) if c.eq_ignore_ascii_case(&b'W') && perm & WRITE == 0 => perm |= WRITE,
                        Some(b'~') if perm != 0 => {
                            offset += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    offset += 1;
                }
            } else {
                perm = RW;
            }
            let pattern = &op[offset..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.patterns.iter_mut().find(|p| p.pattern == pattern) {
                Some(p) => p.perm |= perm,
                None => self.patterns.push(KeyPattern::new(perm, pattern)),
            }
            self.all_keys = false;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::AfterAllChannels);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.all_channels = false;
        } else if op.len() > 1 && (op[0] == b'+' || op[0] == b'-') && op[1] == b'@' {
            self.set_category(env, &op[2..], op[0] == b'+')?;
        } else if op[0] == b'+' {
            let name = &op[1..];
            match name.iter().rposition(|&c| c == b'|') {
                None => {
                    let cmd = env.find(name).ok_or(RuleError::Unknown)?;
                    self.change(cmd, true);
                    let full = cmd.name.clone();
                    self.note_rule(&full, true);
                }
                Some(bar) => {
                    let (parent, sub) = (&name[..bar], &name[bar + 1..]);
                    let cmd = env.find(parent).ok_or(RuleError::Unknown)?;
                    if cmd.name.contains('|') {
                        return Err(RuleError::FirstArgOfSub);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if cmd.is_container {
                        let sub = env.find(name).ok_or(RuleError::Unknown)?;
                        self.change(sub, true);
                    } else {
                        crate::log_warning!(
                            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
                            String::from_utf8_lossy(name)
                        );
                        match self.first_args.iter_mut().find(|(id, _)| *id == cmd.id) {
                            Some((_, args)) => {
                                if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                    args.push(sub.to_vec());
                                }
                            }
                            None => self.first_args.push((cmd.id, vec![sub.to_vec()])),
                        }
                    }
                    self.note_rule(&String::from_utf8_lossy(name), true);
                }
            }
        } else if op[0] == b'-' {
            let cmd = env.find(&op[1..]).ok_or(RuleError::Unknown)?;
            self.change(cmd, false);
            let full = cmd.name.clone();
            self.note_rule(&full, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `+@all`/`-@all` and the rules after it (ACL GETUSER `commands`).
    pub fn describe_commands(&self) -> String {
        let mut s = String::from(if self.bit(FUTURE_BIT) { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// Keys, channels and commands, as ACL LIST prints a selector.
    fn describe(&self, out: &mut Vec<u8>) {
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for p in &self.patterns {
                p.describe(out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
    }

    /// ACL GETUSER's `keys` field.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            p.describe(&mut out);
        }
        out
    }

    /// ACL GETUSER's `channels` field.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    fn key_ok(&self, key: &[u8], need: u8) -> bool {
        self.all_keys || self.patterns.iter().any(|p| p.perm & need == need && p.matches(key))
    }

    fn channel_ok(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| if is_pattern { p == channel } else { glob_match(p, channel, false) })
    }

    /// Whether `need` access to every key is granted (`~*`, `%R~*` …): SORT's BY and GET.
    fn unrestricted_keys(&self, need: u8) -> bool {
        self.all_keys || self.patterns.iter().any(|p| p.perm & need == need && p.pattern == b"*")
    }

    /// Redis's `ACLSelectorCheckCmd`: Err is the denial and the argument it is about.
    fn check<R>(&self, cmd: &Command<R>, argv: &[&[u8]], keys: &mut KeyCache) -> Result<(), (Denied, usize)> {
        if !self.all_commands && !cmd.has(crate::cmdspec::flags::NO_AUTH) && !self.bit(cmd.id) {
            let idx = if cmd.name.contains('|') { 2 } else { 1 };
            let allowed = argv.len() >= 2
                && self.first_args.iter().any(|(id, args)| {
                    *id == cmd.id && argv.get(idx).is_some_and(|a| args.iter().any(|x| x.eq_ignore_ascii_case(a)))
                });
            if !allowed {
                return Err((Denied::Command, 0));
            }
        }
        if !self.all_keys && cmd.acl_keys != AclKeys::None {
            for &(pos, need) in keys.get(cmd, argv) {
                if !self.key_ok(argv[pos], need) {
                    return Err((Denied::Key, pos));
                }
            }
        }
        if !self.all_channels && cmd.channels != Channels::None {
            let (from, to, pattern) = match cmd.channels {
                Channels::Publish => (1, 2.min(argv.len()), false),
                Channels::Subscribe => (1, argv.len(), false),
                Channels::PatternSubscribe => (1, argv.len(), true),
                Channels::None => (0, 0, false),
            };
            for (pos, ch) in argv.iter().enumerate().take(to).skip(from) {
                if !self.channel_ok(ch, pattern) {
                    return Err((Denied::Channel, pos));
                }
            }
        }
        Ok(())
    }
}

/// Key positions and the access each needs, found once for all of a user's selectors.
#[derive(Default)]
struct KeyCache {
    done: bool,
    keys: SmallVec<[(usize, u8); 8]>,
}

impl KeyCache {
    fn get<R>(&mut self, cmd: &Command<R>, argv: &[&[u8]]) -> &[(usize, u8)] {
        if !self.done {
            self.done = true;
            acl_keys(cmd, argv, &mut self.keys);
        }
        &self.keys
    }
}

/// The keys a command names and the access each needs. The key specs say it, except where
/// Redis asks the command itself (`getkeys_proc`): SET and BITFIELD, whose access depends on
/// their options, and SORT and MIGRATE, whose specs cannot express their keys.
fn acl_keys<R>(cmd: &Command<R>, argv: &[&[u8]], out: &mut SmallVec<[(usize, u8); 8]>) {
    let is = |a: &[u8], s: &str| a.eq_ignore_ascii_case(s.as_bytes());
    match cmd.acl_keys {
        AclKeys::None => {}
        AclKeys::Single(pos, acl) => {
            if pos < argv.len() {
                out.push((pos, acl));
            }
        }
        AclKeys::Set if argv.len() > 1 => {
            out.push((1, if keyspec::set_reads_its_key(argv) { RW } else { WRITE }));
        }
        AclKeys::Bitfield if argv.len() > 1 => {
            out.push((1, if keyspec::bitfield_is_readonly(argv) { READ } else { RW }));
        }
        AclKeys::Sort | AclKeys::SortRo if argv.len() > 1 => {
            out.push((1, READ));
            if cmd.acl_keys == AclKeys::Sort {
                let mut i = 2;
                let mut store = None;
                while i < argv.len() {
                    if is(argv[i], "limit") {
                        i += 2;
                    } else if is(argv[i], "get") || is(argv[i], "by") {
                        i += 1;
                    } else if is(argv[i], "store") && i + 1 < argv.len() {
                        store = Some(i + 1);
                        i += 1;
                    }
                    i += 1;
                }
                if let Some(s) = store {
                    out.push((s, WRITE));
                }
            }
        }
        AclKeys::Migrate if argv.len() > 3 => {
            let (mut first, mut num) = (3, 1);
            let mut i = 6;
            while i < argv.len() {
                if is(argv[i], "keys") {
                    if !argv[3].is_empty() {
                        return;
                    }
                    first = i + 1;
                    num = argv.len() - first;
                    break;
                } else if is(argv[i], "auth") {
                    i += 1;
                } else if is(argv[i], "auth2") {
                    i += 2;
                }
                i += 1;
            }
            out.extend((first..first + num).map(|p| (p, RW)));
        }
        AclKeys::Set | AclKeys::Bitfield | AclKeys::Sort | AclKeys::SortRo | AclKeys::Migrate => {}
        AclKeys::Specs => {
            let complete = keyspec::key_positions_with(&cmd.key_specs, argv, |pos, spec| {
                if spec.acl & keyspec::NOT_KEY == 0 {
                    out.push((pos, spec.acl));
                }
            });
            // Redis falls back to the command's own key finder, which finds no keys in a
            // request whose key count runs past its arguments (the command then fails on it).
            if complete != Ok(true) {
                out.clear();
            }
        }
    }
}

/// Why a command was refused, ordered as Redis picks the reason to report among selectors.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Denied {
    Command = 1,
    Key = 2,
    Auth = 3,
    Channel = 4,
}

impl Denied {
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key => "key",
            Denied::Auth => "auth",
            Denied::Channel => "channel",
        }
    }
}

/// A user's flags, passwords and selectors.
#[derive(Clone)]
pub struct Rules {
    pub enabled: bool,
    pub nopass: bool,
    pub skip_sanitize: bool,
    /// SHA-256 of each password, as lowercase hex (what `#` rules and ACL GETUSER show).
    pub passwords: Vec<String>,
    /// The root selector first.
    pub selectors: Vec<Selector>,
    /// The root selector allows every command, key and channel: no check needed.
    pub unrestricted: bool,
}

pub fn hash_password(p: &[u8]) -> String {
    let d = Sha256::digest(p);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

impl Rules {
    /// A new user: off, no passwords, nothing allowed.
    pub fn new<R>(env: &RuleEnv<R>) -> Rules {
        Rules {
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new(env.all_channels_default)],
            unrestricted: false,
        }
    }

    /// The default user's initial rules: everything, no password.
    pub fn default_user<R>(env: &RuleEnv<R>) -> Rules {
        let mut r = Rules::new(env);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            r.apply(env, op.as_bytes()).expect("default rules are valid");
        }
        r.finish();
        r
    }

    fn root(&mut self) -> &mut Selector {
        &mut self.selectors[0]
    }

    /// One rule (Redis's `ACLSetUser`).
    pub fn apply<R>(&mut self, env: &RuleEnv<R>, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |s: &str| op.eq_ignore_ascii_case(s.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.skip_sanitize = true;
        } else if is("sanitize-payload") {
            self.skip_sanitize = false;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let at = self.passwords.iter().position(|p| *p == h).ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(env.all_channels_default);
            let mut ops: Vec<Vec<u8>> = Vec::new();
            crate::protocol::parser::split_args(&op[1..op.len() - 1], &mut ops);
            for o in &ops {
                s.apply(env, o)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for o in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply(env, o.as_bytes())?;
            }
            if env.all_channels_default {
                self.apply(env, b"allchannels")?;
            }
            for o in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply(env, o.as_bytes())?;
            }
        } else {
            self.root().apply(env, op)?;
        }
        Ok(())
    }

    /// Recomputes what is derived from the rules (call after applying them).
    pub fn finish(&mut self) {
        let r = &self.selectors[0];
        self.unrestricted = self.selectors.len() == 1 && r.all_commands && r.all_keys && r.all_channels;
    }

    pub fn root_selector(&self) -> &Selector {
        &self.selectors[0]
    }

    /// ACL LIST's description (also the ACL file's and CONFIG REWRITE's `user` lines).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Redis's flag order: on, off, nopass, skip-sanitize-payload, sanitize-payload.
        out.extend_from_slice(if self.enabled { b"on " } else { b"off " });
        if self.nopass {
            out.extend_from_slice(b"nopass ");
        }
        out.extend_from_slice(if self.skip_sanitize { b"skip-sanitize-payload " } else { b"sanitize-payload " });
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                s.describe(&mut out);
            } else {
                out.extend_from_slice(b" (");
                s.describe(&mut out);
                out.push(b')');
            }
        }
        out
    }

    /// ACL GETUSER's `flags`.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f.push(if self.skip_sanitize { "skip-sanitize-payload" } else { "sanitize-payload" });
        f
    }

    /// Whether the command may run with these arguments (Redis's `ACLCheckAllUserCommandPerm`):
    /// when no selector allows it, the denial to report is the most specific one (a key or
    /// channel over the command), for the last argument any selector stumbled on.
    pub fn check<R>(&self, cmd: &Command<R>, argv: &[&[u8]]) -> Result<(), (Denied, usize)> {
        let mut keys = KeyCache::default();
        let mut worst = (Denied::Command, 0);
        for s in &self.selectors {
            match s.check(cmd, argv, &mut keys) {
                Ok(()) => return Ok(()),
                Err((d, pos)) => {
                    if d > worst.0 || (d == worst.0 && pos > worst.1) {
                        worst = (d, pos);
                    }
                }
            }
        }
        Err(worst)
    }

    /// Whether the command is allowed by a selector that can also read every key (SORT's BY
    /// and GET options need it).
    pub fn check_with_all_keys_readable<R>(&self, cmd: &Command<R>, argv: &[&[u8]]) -> bool {
        let mut keys = KeyCache::default();
        self.selectors.iter().any(|s| s.check(cmd, argv, &mut keys).is_ok() && s.unrestricted_keys(READ))
    }

    /// Whether any selector lets the user publish to or subscribe to `channel`.
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors.iter().any(|s| s.channel_ok(channel, is_pattern))
    }

    /// Whether a key may be accessed with `write` (else read) permission by any selector.
    pub fn key_allowed(&self, key: &[u8], write: bool) -> bool {
        let need = if write { WRITE } else { READ };
        self.selectors.iter().any(|s| s.key_ok(key, need))
    }

    /// Whether these rules allow every channel the `old` ones did (then no subscriber of the
    /// user loses a subscription): Redis's shortcut before scanning clients.
    fn channels_superset_of(&self, old: &Rules) -> bool {
        if self.selectors.iter().any(|s| s.all_channels) {
            return true;
        }
        let upcoming: Vec<&Vec<u8>> = self.selectors.iter().flat_map(|s| &s.channels).collect();
        old.selectors.iter().all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(&c)))
    }

    /// Whether a subscription survives new rules (as Redis, against the union of the new
    /// selectors' channel lists).
    pub fn keeps_subscription(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors.iter().any(|s| s.all_channels)
            || self.selectors.iter().flat_map(|s| &s.channels).any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    glob_match(p, channel, false)
                }
            })
    }
}

/// Joins arguments that spread one `(…)` selector over several (Redis's
/// `ACLMergeSelectorArguments`). Err: the index of the argument opening an unclosed selector.
pub fn merge_selectors(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().unwrap().1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.clone()));
            continue;
        }
        out.push(op.clone());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// A user: a name and its current rules.
pub struct User {
    pub name: Vec<u8>,
    rules: RwLock<Arc<Rules>, { rank::LEAF }>,
    /// Removed by ACL DELUSER or ACL LOAD: connections still holding it fall back to the
    /// default user, unauthenticated.
    pub deleted: AtomicBool,
}

impl User {
    fn new(name: &[u8], rules: Rules) -> Arc<User> {
        Arc::new(User { name: name.to_vec(), rules: RwLock::new(Arc::new(rules)), deleted: AtomicBool::new(false) })
    }

    pub fn rules(&self) -> Arc<Rules> {
        self.rules.read().clone()
    }

    pub fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// Where a denial happened (ACL LOG `context`).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry; similar denials within a minute are counted in one.
pub struct LogEntry {
    pub count: u64,
    pub reason: Denied,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix ms of the last occurrence.
    pub ctime: i64,
    pub client_info: String,
    pub entry_id: u64,
    pub created: i64,
}

#[derive(Default)]
pub struct Log {
    /// Newest first.
    pub entries: VecDeque<LogEntry>,
    next_id: u64,
}

/// The user registry, the ACL log and the denial counters.
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>, { rank::ACL_USERS }>,
    /// The `default` user: never replaced (ACL LOAD copies new rules into it), so connections
    /// made before a reload keep it.
    pub default: Arc<User>,
    /// Bumped on every change of any user's rules: connections refresh their copy when it moves.
    pub epoch: AtomicU64,
    /// New connections must authenticate (the default user has passwords or is off).
    auth_required: AtomicBool,
    pub log: Mutex<Log, { rank::LEAF }>,
    /// INFO `acl_access_denied_auth`, `_cmd`, `_key`, `_channel`.
    pub denied: [AtomicU64; 4],
}

/// Similar denials closer than this are counted in one log entry.
const LOG_GROUPING_MS: i64 = 60_000;

impl Acl {
    pub fn new<R>(env: &RuleEnv<R>) -> Acl {
        let default = User::new(b"default", Rules::default_user(env));
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), default.clone());
        Acl {
            users: RwLock::new(users),
            default,
            epoch: AtomicU64::new(1),
            auth_required: AtomicBool::new(false),
            log: Mutex::new(Log::default()),
            denied: Default::default(),
        }
    }

    /// Whether a connection that has not authenticated may only AUTH (Redis's `authRequired`).
    #[inline]
    pub fn auth_required(&self) -> bool {
        self.auth_required.load(Ordering::Relaxed)
    }

    fn changed(&self) {
        let d = self.default.rules();
        self.auth_required.store(!d.nopass || !d.enabled, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// ACL SETUSER: applies every rule to a copy, then installs it (creating the user) only
    /// when all were valid. Returns the user's previous rules (None: created).
    pub fn set_user<R>(
        &self,
        env: &RuleEnv<R>,
        name: &[u8],
        ops: &[Vec<u8>],
    ) -> Result<(Arc<User>, Option<Arc<Rules>>), AclError> {
        let merged = merge_selectors(ops).map_err(|j| AclError::Unmatched(String::from_utf8_lossy(&ops[j]).into()))?;
        let mut users = self.users.write();
        let existing = users.get(name).cloned();
        let mut rules = match &existing {
            Some(u) => (*u.rules()).clone(),
            None => Rules::new(env),
        };
        for op in &merged {
            rules.apply(env, op).map_err(|why| AclError::Modifier { op: String::from_utf8_lossy(op).into(), why })?;
        }
        rules.finish();
        let result = match existing {
            Some(u) => {
                let old = std::mem::replace(&mut *u.rules.write(), Arc::new(rules));
                (u, Some(old))
            }
            None => {
                let u = User::new(name, rules);
                users.insert(name.to_vec(), u.clone());
                (u, None)
            }
        };
        drop(users);
        self.changed();
        Ok(result)
    }

    /// Whether the rules `new` drop a channel the `old` ones allowed.
    pub fn channels_reduced(new: &Rules, old: &Rules) -> bool {
        !new.channels_superset_of(old)
    }

    /// ACL DELUSER of users that exist: the removed ones.
    pub fn delete(&self, names: &[&[u8]]) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        let gone: Vec<Arc<User>> = names.iter().filter_map(|n| users.remove(*n)).collect();
        drop(users);
        for u in &gone {
            u.deleted.store(true, Ordering::Release);
        }
        self.changed();
        gone
    }

    /// Replaces the default user's password (`requirepass`; empty: nopass).
    pub fn set_default_password<R>(&self, env: &RuleEnv<R>, pass: &[u8]) {
        let mut ops = vec![b"resetpass".to_vec()];
        if pass.is_empty() {
            ops.push(b"nopass".to_vec());
        } else {
            let mut p = b">".to_vec();
            p.extend_from_slice(pass);
            ops.push(p);
        }
        let _ = self.set_user(env, b"default", &ops);
    }

    /// Checks a user name and password (Redis's `ACLCheckUserCredentials`); the SHA-256 of the
    /// password is compared with each stored hash in constant time.
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<Arc<User>> {
        let u = self.get(name)?;
        let r = u.rules();
        if !r.enabled {
            return None;
        }
        if r.nopass {
            return Some(u);
        }
        let h = hash_password(pass);
        let mut ok = false;
        for p in &r.passwords {
            ok |= constant_time_eq(p.as_bytes(), h.as_bytes());
        }
        drop(r);
        ok.then_some(u)
    }

    /// Records a denial (Redis's `addACLLogEntry`).
    #[allow(clippy::too_many_arguments)]
    pub fn log_denial(
        &self,
        reason: Denied,
        context: Context,
        object: &[u8],
        username: &[u8],
        client_info: String,
        now_ms: i64,
        max_len: usize,
    ) {
        let i = match reason {
            Denied::Auth => 0,
            Denied::Command => 1,
            Denied::Key => 2,
            Denied::Channel => 3,
        };
        self.denied[i].fetch_add(1, Ordering::Relaxed);
        let mut log = self.log.lock();
        let similar = log.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && (e.ctime - now_ms).abs() <= LOG_GROUPING_MS
                && e.object == object
                && e.username == username
        });
        if let Some(at) = similar {
            let mut e = log.entries.remove(at).expect("found above");
            e.count += 1;
            e.ctime = now_ms;
            e.client_info = client_info;
            log.entries.push_front(e);
            return;
        }
        let entry_id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            ctime: now_ms,
            client_info,
            entry_id,
            created: now_ms,
        });
        log.entries.truncate(max_len);
    }

    /// The `user` lines of the config file, applied at start-up (Redis's
    /// `ACLLoadConfiguredUsers`): each line is `name rule …`, the default user reset first.
    /// Err: the first bad rule.
    pub fn load_configured<R>(&self, env: &RuleEnv<R>, lines: &[Vec<Vec<u8>>]) -> Result<(), AclError> {
        for line in lines {
            let name = &line[0];
            if has_spaces(name) {
                return Err(AclError::SpacesInName);
            }
            let ops = merge_selectors(&line[1..])
                .map_err(|j| AclError::Unmatched(String::from_utf8_lossy(&line[1 + j]).into()))?;
            let mut rules = Rules::new(env);
            for op in &ops {
                rules.apply(env, op).map_err(|why| AclError::Configured {
                    op: String::from_utf8_lossy(op).into(),
                    user: String::from_utf8_lossy(name).into(),
                    why,
                })?;
            }
            rules.finish();
            if !rules.enabled {
                crate::log_notice!(
                    "The user '{}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.",
                    String::from_utf8_lossy(name)
                );
            }
            if name == b"default" {
                *self.default.rules.write() = Arc::new(rules);
            } else {
                self.users.write().insert(name.clone(), User::new(name, rules));
            }
        }
        self.changed();
        Ok(())
    }

    /// The users as ACL LIST and the ACL file write them.
    pub fn lines(&self) -> Vec<Vec<u8>> {
        self.users()
            .iter()
            .map(|u| {
                let mut l = b"user ".to_vec();
                l.extend_from_slice(&u.name);
                l.push(b' ');
                l.extend_from_slice(&u.rules().describe());
                l
            })
            .collect()
    }

    /// Replaces every user with those the text defines (an ACL file), all or nothing (Redis's
    /// `ACLLoadFromFile`). Err: every problem, described as Redis does. Returns the
    /// users that were replaced or removed (their connections must go).
    pub fn load_text<R>(&self, env: &RuleEnv<R>, filename: &str, text: &[u8]) -> Result<Vec<Arc<User>>, AclError> {
        let mut errors = String::new();
        let mut staged: BTreeMap<Vec<u8>, Rules> = BTreeMap::new();
        for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            // Redis splits ACL file lines on single spaces (no quoting).
            let argv: Vec<Vec<u8>> = line.split(|&c| c == b' ').map(|s| s.to_vec()).collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = &argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if staged.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut rules = Rules::new(env);
            let merged = match merge_selectors(&argv[2..]) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!("{filename}:{linenum}: Unmatched parenthesis in selector definition."));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim(op, b"\t\r\n");
                if let Err(e) = rules.apply(env, op) {
                    if e == RuleError::Unknown {
                        errors.push_str(&format!(
                            "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{filename}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            rules.finish();
            staged.insert(name.clone(), rules);
        }
        if !errors.is_empty() {
            errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
            return Err(AclError::File(errors));
        }
        let default_rules = staged.remove(b"default".as_slice()).unwrap_or_else(|| Rules::default_user(env));
        let mut users = self.users.write();
        let old: Vec<Arc<User>> = users.values().filter(|u| u.name != b"default").cloned().collect();
        users.clear();
        *self.default.rules.write() = Arc::new(default_rules);
        users.insert(b"default".to_vec(), self.default.clone());
        for (name, rules) in staged {
            users.insert(name.clone(), User::new(&name, rules));
        }
        drop(users);
        for u in &old {
            u.deleted.store(true, Ordering::Release);
        }
        self.changed();
        Ok(old)
    }
}

fn trim<'a>(mut s: &'a [u8], chars: &[u8]) -> &'a [u8] {
    while let [first, rest @ ..] = s {
        if chars.contains(first) {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if chars.contains(last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// Compares in time independent of where the inputs differ (passwords).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// Redis's NOPERM texts (`getAclErrorMessage`); `verbose` names the key or channel (ACL DRYRUN).
pub fn denial_text<R>(d: Denied, user: &[u8], cmd: &Command<R>, arg: &[u8], verbose: bool) -> String {
    let user = String::from_utf8_lossy(user);
    let arg = String::from_utf8_lossy(arg);
    match d {
        Denied::Command | Denied::Auth => format!("User {user} has no permissions to run the '{}' command", cmd.name),
        Denied::Key if verbose => format!("User {user} has no permissions to access the '{arg}' key"),
        Denied::Key => "No permissions to access a key".into(),
        Denied::Channel if verbose => format!("User {user} has no permissions to access the '{arg}' channel"),
        Denied::Channel => "No permissions to access a channel".into(),
    }
}
