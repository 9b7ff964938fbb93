//! The ACL command (Redis 7.2's subcommands and replies). The model — rules, checks, the log —
//! is `services::acl`; this is its interface to clients.

use crate::exec::*;
use crate::services::acl::{Denied, User};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Closes the connections of removed users (ACL DELUSER, ACL LOAD); the caller's own after its
/// reply.
fn kill_clients_of(ctx: &mut Ctx, users: &[Arc<User>]) {
    if users.is_empty() {
        return;
    }
    for h in ctx.srv.clients.snapshot() {
        let gone = h.user.lock().as_ref().is_some_and(|u| users.iter().any(|x| Arc::ptr_eq(x, u)));
        if gone {
            ctx.client.close(&h);
        }
    }
}

fn acl_file(ctx: &Ctx) -> Option<String> {
    Some(ctx.srv.config.text(crate::config::p::ACLFILE)).filter(|f| !f.is_empty())
}

/// ACL CAT, GENPASS and LOG take at most one argument; more is Redis's generic subcommand error.
fn at_most_one_arg(ctx: &Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&ctx.args[1][..ctx.args[1].len().min(128)])
        )));
    }
    Ok(())
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

// ACL SETUSER username [rule ...]
pub fn setuser(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args[2];
    if name.iter().any(|&c| c.is_ascii_whitespace() || c == 0 || c == 0x0b) {
        return Err(CmdError::msg("ERR Usernames can't contain spaces or null characters"));
    }
    let ops: Vec<Vec<u8>> = ctx.args[3..].iter().map(|a| a.to_vec()).collect();
    let srv = ctx.srv;
    let (user, old) = srv.acl.set_user(&srv.acl_env(), name, &ops).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    // Subscribers of the user that lost a channel are disconnected, as in Redis.
    if let Some(old) = old {
        let new = user.rules();
        if crate::services::acl::Acl::channels_reduced(&new, &old) {
            for h in srv.pubsub.subscribers_losing(&user, &new) {
                ctx.client.close(&h);
            }
        }
    }
    ctx.reply.ok();
    Ok(())
}

// ACL DELUSER username [username ...]
pub fn deluser(ctx: &mut Ctx) -> CmdResult {
    let names = &ctx.args[2..];
    if names.iter().any(|n| *n == b"default") {
        return Err(CmdError::msg("ERR The 'default' user cannot be removed"));
    }
    let gone = ctx.srv.acl.delete(names);
    kill_clients_of(ctx, &gone);
    ctx.reply.int(gone.len() as i64);
    Ok(())
}

// ACL GETUSER username
pub fn getuser(ctx: &mut Ctx) -> CmdResult {
    let Some(u) = ctx.srv.acl.get(ctx.args[2]) else {
        ctx.reply.null();
        return Ok(());
    };
    let rules = u.rules();
    let r = &mut *ctx.reply;
    r.map(6);
    r.bulk(b"flags");
    let flags = rules.flag_names();
    r.set(flags.len());
    for f in flags {
        r.bulk(f.as_bytes());
    }
    r.bulk(b"passwords");
    r.array(rules.passwords.len());
    for p in &rules.passwords {
        r.bulk(p.as_bytes());
    }
    let selector = |r: &mut crate::protocol::Reply, s: &crate::services::acl::Selector| {
        r.bulk(b"commands");
        r.bulk(s.describe_commands().as_bytes());
        r.bulk(b"keys");
        r.bulk(&s.describe_keys());
        r.bulk(b"channels");
        r.bulk(&s.describe_channels());
    };
    selector(r, rules.root_selector());
    r.bulk(b"selectors");
    r.array(rules.selectors.len() - 1);
    for s in &rules.selectors[1..] {
        r.map(3);
        selector(r, s);
    }
    Ok(())
}

// ACL LIST
pub fn list(ctx: &mut Ctx) -> CmdResult {
    let lines = ctx.srv.acl.lines();
    ctx.reply.array(lines.len());
    for l in lines {
        ctx.reply.bulk(&l);
    }
    Ok(())
}

// ACL USERS
pub fn users(ctx: &mut Ctx) -> CmdResult {
    let users = ctx.srv.acl.users();
    ctx.reply.array(users.len());
    for u in users {
        ctx.reply.bulk(&u.name);
    }
    Ok(())
}

// ACL WHOAMI
pub fn whoami(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.client.user_name();
    ctx.reply.bulk(&name);
    Ok(())
}

// ACL CAT [category]
pub fn cat(ctx: &mut Ctx) -> CmdResult {
    at_most_one_arg(ctx)?;
    let Some(&want) = ctx.args.get(2) else {
        ctx.reply.array(crate::services::acl::CATEGORIES.len());
        for c in crate::services::acl::CATEGORIES {
            ctx.reply.bulk(c.as_bytes());
        }
        return Ok(());
    };
    let Some(bit) = crate::services::acl::category_bit(want) else {
        let shown = &want[..want.len().min(128)];
        return Err(CmdError::msg(format!("ERR Unknown category '{}'", String::from_utf8_lossy(shown))));
    };
    let mut names: Vec<&str> = Vec::new();
    for c in ctx.srv.table.top_level_original() {
        if c.acl_cats & bit != 0 {
            names.push(&c.name);
        }
        for s in &c.subcommands {
            if s.acl_cats & bit != 0 {
                names.push(&s.name);
            }
        }
    }
    ctx.reply.array(names.len());
    for n in names {
        ctx.reply.bulk(n.as_bytes());
    }
    Ok(())
}

// ACL GENPASS [bits]
pub fn genpass(ctx: &mut Ctx) -> CmdResult {
    at_most_one_arg(ctx)?;
    let bits = match ctx.args.get(2) {
        Some(_) => ctx.arg_i64(2)?,
        None => 256,
    };
    if bits <= 0 || bits > 4096 {
        return Err(CmdError::msg(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
        ));
    }
    let chars = ((bits + 3) / 4) as usize;
    use rand::Rng;
    // The thread RNG is a CSPRNG (ChaCha) seeded from the OS, as Redis's getRandomHexChars.
    let mut rng = rand::thread_rng();
    let hex: String = (0..chars).map(|_| char::from_digit(rng.gen_range(0..16), 16).unwrap()).collect();
    ctx.reply.bulk(hex.as_bytes());
    Ok(())
}

// ACL LOG [count | RESET]
pub fn log(ctx: &mut Ctx) -> CmdResult {
    at_most_one_arg(ctx)?;
    let mut count = 10i64;
    if let Some(&a) = ctx.args.get(2) {
        if eq_ic(a, "RESET") {
            ctx.srv.acl.log.lock().entries.clear();
            ctx.reply.ok();
            return Ok(());
        }
        count = ctx.arg_i64(2)?.max(0);
    }
    let now = ctx.srv.now_ms();
    let log = ctx.srv.acl.log.lock();
    let n = (count as usize).min(log.entries.len());
    let r = &mut *ctx.reply;
    r.array(n);
    for e in log.entries.iter().take(n) {
        r.map(10);
        r.bulk(b"count");
        r.int(e.count as i64);
        r.bulk(b"reason");
        r.bulk(e.reason.reason().as_bytes());
        r.bulk(b"context");
        r.bulk(e.context.name().as_bytes());
        r.bulk(b"object");
        r.bulk(&e.object);
        r.bulk(b"username");
        r.bulk(&e.username);
        r.bulk(b"age-seconds");
        r.double((now - e.ctime) as f64 / 1000.0);
        r.bulk(b"client-info");
        r.bulk(e.client_info.as_bytes());
        r.bulk(b"entry-id");
        r.int(e.entry_id as i64);
        r.bulk(b"timestamp-created");
        r.int(e.created);
        r.bulk(b"timestamp-last-updated");
        r.int(e.ctime);
    }
    Ok(())
}

// ACL DRYRUN username command [arg ...]
pub fn dryrun(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    let Some(u) = srv.acl.get(ctx.args[2]) else {
        return Err(CmdError::msg(format!("ERR User '{}' not found", String::from_utf8_lossy(ctx.args[2]))));
    };
    let argv = &ctx.args[3..];
    let cmd = match crate::exec::call::resolve(srv, argv) {
        Ok(c) => c.clone(),
        Err((Some(c), _)) => {
            return Err(CmdError::msg(format!("ERR wrong number of arguments for '{}' command", c.name)));
        }
        Err((None, _)) => {
            // A container with an unknown subcommand is not found either.
            return Err(CmdError::msg(format!("ERR Command '{}' not found", String::from_utf8_lossy(argv[0]))));
        }
    };
    match u.rules().check(&cmd, argv) {
        Ok(()) => ctx.reply.ok(),
        Err((d, pos)) => {
            let arg = argv.get(pos).copied().unwrap_or(b"");
            let text = crate::services::acl::denial_text(d, &u.name, &cmd, arg, d != Denied::Command);
            ctx.reply.bulk(text.as_bytes());
        }
    }
    Ok(())
}

// ACL LOAD
pub fn load(ctx: &mut Ctx) -> CmdResult {
    let Some(path) = acl_file(ctx) else { return Err(CmdError::msg(NO_ACL_FILE)) };
    let srv = ctx.srv;
    let text = std::fs::read(&path)
        .map_err(|e| CmdError::msg(format!("ERR Error loading ACLs, opening file '{path}': {}", io_text(&e))))?;
    let gone = srv.acl.load_text(&srv.acl_env(), &path, &text).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    kill_clients_of(ctx, &gone);
    ctx.reply.ok();
    Ok(())
}

use crate::log::strerror as io_text;

/// Writes the users to `path` as Redis does: a temporary file, fsynced, renamed over it.
pub fn save_users(srv: &Server, path: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut text = Vec::new();
    for l in srv.acl.lines() {
        text.extend_from_slice(&l);
        text.push(b'\n');
    }
    let tmp = format!("{path}.tmp-{}-{}", std::process::id(), srv.now_ms());
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

// ACL SAVE
pub fn save(ctx: &mut Ctx) -> CmdResult {
    let Some(path) = acl_file(ctx) else { return Err(CmdError::msg(NO_ACL_FILE)) };
    if let Err(e) = save_users(ctx.srv, &path) {
        crate::log_warning!("Writing ACL file for ACL SAVE: {}", io_text(&e));
        return Err(CmdError::msg(
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
        ));
    }
    ctx.reply.ok();
    Ok(())
}

// ACL HELP
pub fn help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("acl".into()));
    }
    help_reply(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

/// AUTH and HELLO AUTH: authenticates the connection as `user`, or logs the failure (reason
/// `auth`, the command as typed for object). Returns whether it succeeded.
pub fn authenticate(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> bool {
    let srv = ctx.srv;
    match srv.acl.authenticate(user, pass) {
        Some(u) => {
            let default = Arc::ptr_eq(&u, &srv.acl.default);
            ctx.client.set_user(if default { None } else { Some(u) });
            ctx.client.authenticated = true;
            let epoch = srv.acl.epoch.load(Ordering::Relaxed);
            crate::exec::call::refresh_acl(srv, ctx.client, epoch);
            true
        }
        None => {
            let context = if ctx.client.in_exec {
                crate::services::acl::Context::Multi
            } else {
                crate::services::acl::Context::Toplevel
            };
            crate::exec::call::log_acl(srv, ctx.client, Denied::Auth, context, ctx.args[0], user);
            false
        }
    }
}

/// Why the users could not be loaded at start-up; its text is what Redis logs before exiting.
#[derive(Debug)]
pub enum StartupError {
    /// `user` lines and an `aclfile` both.
    Both,
    /// A `user` line of the configuration.
    Configured(crate::services::acl::AclError),
    /// The ACL file could not be read.
    Open { file: String, why: String },
    /// The ACL file's problems.
    File(crate::services::acl::AclError),
}

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartupError::Both => f.write_str("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both."),
            StartupError::Configured(e) => write!(f, "{e}\nCritical error while loading ACLs. Exiting."),
            StartupError::Open { file, why } => write!(
                f,
                "Aborting Redis startup because of ACL errors: Error loading ACLs, opening file '{file}': {why}"
            ),
            StartupError::File(e) => write!(f, "Aborting Redis startup because of ACL errors: {e}"),
        }
    }
}

/// Loads the users at start-up, from the config file's `user` lines or from `aclfile` (Redis's
/// `ACLLoadUsersAtStartup`).
pub fn load_at_startup(srv: &Server) -> Result<(), StartupError> {
    let file = srv.config.text(crate::config::p::ACLFILE);
    if !file.is_empty() && !srv.config.users.is_empty() {
        return Err(StartupError::Both);
    }
    let env = srv.acl_env();
    let lines: Vec<Vec<Vec<u8>>> = srv.config.users.iter().map(|u| u.argv.clone()).collect();
    srv.acl.load_configured(&env, &lines).map_err(StartupError::Configured)?;
    if !file.is_empty() {
        let text = std::fs::read(&file).map_err(|e| StartupError::Open { file: file.to_string(), why: io_text(&e) })?;
        srv.acl.load_text(&env, &file, &text).map_err(StartupError::File)?;
    }
    Ok(())
}
