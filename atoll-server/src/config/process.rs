//! Settings that act on the process itself, as Redis applies them on Linux:
//!
//! * `oom-score-adj` / `oom-score-adj-values`: the OOM killer's preference, written to
//!   `/proc/self/oom_score_adj` at start-up and on every CONFIG SET of either. `yes` (alias
//!   `relative`) adds the value to the score the process had before Atoll first changed it,
//!   `absolute` writes the value itself, `no` puts that original score back. The values are
//!   per process class (primary, replica, background child): the replica's applies while the
//!   server follows a master ([`set_replica`]), the child's in the background child that writes
//!   a snapshot ([`set_child_oom_score`]).
//! * `disable-thp`: when the kernel gives every process transparent huge pages (`[always]`),
//!   turn them off for this one (`prctl(PR_SET_THP_DISABLE)`): a huge page makes one touched
//!   byte cost 2 MB of RSS, which is what maxmemory and the operator's dashboards count.

use crate::lockorder::{rank, Mutex};

const OOM_FILE: &str = "/proc/self/oom_score_adj";

/// The score before Atoll changed it (`None`: Atoll has not).
static OOM_BASE: Mutex<Option<i64>, { rank::LEAF }> = Mutex::new(None);

/// The server follows a master: the second of `oom-score-adj-values` is its class.
static REPLICA: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The score before Atoll first changed it, read once (`base` caches it).
fn oom_base(base: &mut Option<i64>) -> std::io::Result<i64> {
    if let Some(b) = *base {
        return Ok(b);
    }
    let b = std::fs::read_to_string(OOM_FILE)?.trim().parse().unwrap_or(0);
    *base = Some(b);
    Ok(b)
}

/// The server starts or stops following a master (REPLICAOF): its OOM score class changes,
/// as Redis's `setOOMScoreAdj` picks the class by role.
pub fn set_replica(on: bool, mode: &str, values: &str) {
    REPLICA.store(on, std::sync::atomic::Ordering::Relaxed);
    let _ = set_oom_score(mode, values);
}

/// Applies `oom-score-adj` (`no`, `yes` or `absolute`) with `oom-score-adj-values` (three
/// numbers: the primary's, the replica's, a background child's). `Err` is Redis's CONFIG SET text; the reason is logged.
pub fn set_oom_score(mode: &str, values: &str) -> Result<(), super::ConfigError> {
    const FAILED: &str = "Failed to set current oom_score_adj. Check server logs.";
    let mut base = OOM_BASE.lock();
    let val = if mode != "no" {
        let b = match oom_base(&mut base) {
            Ok(b) => b,
            Err(e) => {
                crate::log_warning!("Unable to read oom_score_adj: {e}");
                return Err(super::ConfigError::Apply(FAILED.into()));
            }
        };
        let class = usize::from(REPLICA.load(std::sync::atomic::Ordering::Relaxed));
        let own: i64 = values.split_whitespace().nth(class).and_then(|v| v.parse().ok()).unwrap_or(0);
        let v = if mode == "absolute" { own } else { own + b };
        v.clamp(-1000, 1000)
    } else {
        match base.take() {
            Some(b) => b,
            None => return Ok(()),
        }
    };
    std::fs::write(OOM_FILE, val.to_string()).map_err(|e| {
        crate::log_warning!("Unable to write oom_score_adj: {e}");
        super::ConfigError::Apply(FAILED.into())
    })
}

/// A background child's OOM score (`oom-score-adj-values`' third class), written to its
/// `/proc/<pid>/oom_score_adj` as Redis's child sets its own; nothing with `oom-score-adj no`.
pub fn set_child_oom_score(pid: u32, mode: &str, values: &str) {
    if mode == "no" {
        return;
    }
    let base = oom_base(&mut OOM_BASE.lock()).unwrap_or(0);
    let own: i64 = values.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap_or(0);
    let v = if mode == "absolute" { own } else { own + base }.clamp(-1000, 1000);
    if let Err(e) = std::fs::write(format!("/proc/{pid}/oom_score_adj"), v.to_string()) {
        crate::log_warning!("Unable to write oom_score_adj of the background child {pid}: {e}");
    }
}

/// `disable-thp yes` at start-up: transparent huge pages off for the process when the kernel
/// applies them to every process.
pub fn disable_thp_if_always(disable: bool) {
    let always =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").is_ok_and(|s| s.contains("[always]"));
    if !always {
        return;
    }
    // SAFETY: prctl with integer arguments only.
    if disable && unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } == 0 {
        return;
    }
    crate::log_warning!(
        "WARNING You have Transparent Huge Pages (THP) support enabled in your kernel. This will create latency and memory usage issues with Redis. To fix this issue run the command 'echo madvise > /sys/kernel/mm/transparent_hugepage/enabled' as root, and add it to your /etc/rc.local in order to retain the setting after a reboot. Redis must be restarted after THP is disabled (set to 'madvise' or 'never')."
    );
}

/// The process title (`set-proc-title`, `proc-title-template`), as Redis's setproctitle: the
/// command line `ps` and `/proc/<pid>/cmdline` show is rewritten in place. Linux gives a
/// process no other way to retitle itself without privileges: the memory holding argv (and,
/// after it, the environment strings) is what the kernel reads back, so the environment is
/// moved to the C library's heap first (`setenv` copies each variable) and the two areas
/// together hold the title.
struct TitleArea {
    start: usize,
    len: usize,
}

static TITLE_AREA: Mutex<Option<TitleArea>, { rank::LEAF }> = Mutex::new(None);
static EXEC_ARGV0: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// At start-up, before any other thread runs: finds the argv area (`/proc/self/stat`'s
/// `arg_start`/`arg_end`, checked against the arguments it must hold) and takes the
/// environment's strings after it for the title. Without a sound area the title stays as it is.
pub fn init_title() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let _ = EXEC_ARGV0.set(args.first().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default());
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
    // Fields after the command's name (which may hold spaces): the 3rd field is first.
    let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else { return };
    let f: Vec<usize> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
    let field = |n: usize| f.get(n - 3).copied().unwrap_or(0);
    let (arg_start, arg_end, env_start, env_end) = (field(48), field(49), field(50), field(51));
    if arg_start == 0 || arg_end <= arg_start {
        return;
    }
    // The area must hold exactly our arguments, NUL-separated, or it is left alone.
    let mut expect = Vec::new();
    for a in &args {
        expect.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(a.as_os_str()));
        expect.push(0);
    }
    if expect.len() != arg_end - arg_start {
        return;
    }
    // SAFETY: [arg_start, arg_end) is this process's argument area, mapped for its whole life
    // (the kernel reports it); it is only read here.
    let held = unsafe { std::slice::from_raw_parts(arg_start as *const u8, arg_end - arg_start) };
    if held != expect.as_slice() {
        return;
    }
    let mut end = arg_end;
    if env_start == arg_end && env_end > env_start {
        // Each variable set again: the C library copies it to its heap and points `environ`
        // there, so nothing reads the old strings any more.
        let vars: Vec<(std::ffi::CString, std::ffi::CString)> = std::env::vars_os()
            .filter_map(|(k, v)| {
                use std::os::unix::ffi::OsStrExt;
                Some((std::ffi::CString::new(k.as_bytes()).ok()?, std::ffi::CString::new(v.as_bytes()).ok()?))
            })
            .collect();
        // SAFETY: start-up, one thread: setenv with valid C strings.
        let copied = vars.iter().all(|(k, v)| unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) } == 0);
        if copied {
            end = env_end;
        }
    }
    *TITLE_AREA.lock() = Some(TitleArea { start: arg_start, len: end - arg_start });
}

/// `proc-title-template` expanded as Redis's sdstemplate does: `{name}` is replaced by
/// `var(name)` (the name runs to the next `}`), `{{` stands for `{` (a `}` outside a name is
/// itself); None for an unknown variable or a `{` left open. Spaces at either end are
/// trimmed, as Redis trims them.
pub fn expand_title(template: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::new();
    let mut p = template;
    while let Some(i) = p.find('{') {
        out.push_str(&p[..i]);
        let sv = &p[i + 1..];
        if sv.is_empty() {
            return None;
        }
        if let Some(rest) = sv.strip_prefix('{') {
            out.push('{');
            p = rest;
            continue;
        }
        let ev = sv.find('}')?;
        out.push_str(&var(&sv[..ev])?);
        p = &sv[ev + 1..];
    }
    out.push_str(p);
    Some(out.trim_matches(' ').to_string())
}

/// Redis's check of a template: it expands, to something not empty — with an empty title and
/// the other variables as a server has them (a listening address, a config file or `-` and
/// port numbers are never empty; the mode and the socket may be).
pub fn valid_title_template(template: &str) -> bool {
    let var = |n: &str| -> Option<String> {
        Some(match n {
            "title" | "server-mode" | "unixsocket" => String::new(),
            "listen-addr" => "*:0".into(),
            "config-file" => "-".into(),
            "port" | "tls-port" => "0".into(),
            _ => return None,
        })
    };
    expand_title(template, &var).is_some_and(|s| !s.is_empty())
}

/// Sets the process title from the configuration (nothing with `set-proc-title no`, or when
/// start-up found no area to write). `title`: Redis's `{title}`, the name the server was run
/// by (a background child passes its own).
pub fn set_title(cfg: &super::Config, title: Option<&str>) {
    if !cfg.flag(super::p::SET_PROC_TITLE) {
        return;
    }
    let port = cfg.int(super::p::PORT);
    let tls_port = cfg.int(super::p::TLS_PORT);
    let unixsocket = cfg.text(super::p::UNIXSOCKET);
    let title = title.map(str::to_string).unwrap_or_else(|| EXEC_ARGV0.get().cloned().unwrap_or_default());
    let var = |n: &str| -> Option<String> {
        Some(match n {
            "title" => title.clone(),
            "listen-addr" if port != 0 || tls_port != 0 => {
                let bind = cfg.text(super::p::BIND);
                // The first address as written (Redis keeps an optional one's `-`).
                let first = bind.split_whitespace().next().unwrap_or("*").to_string();
                format!("{first}:{}", if port != 0 { port } else { tls_port })
            }
            "listen-addr" => format!("unixsocket:{unixsocket}"),
            "server-mode" if cfg.flag(super::p::CLUSTER_ENABLED) => "[cluster]".into(),
            "server-mode" => String::new(),
            "config-file" => cfg.config_file.clone().unwrap_or_else(|| "-".into()),
            "port" => port.to_string(),
            "tls-port" => tls_port.to_string(),
            "unixsocket" => unixsocket.clone(),
            _ => return None,
        })
    };
    let Some(text) = expand_title(&cfg.text(super::p::PROC_TITLE_TEMPLATE), &var) else { return };
    let area = TITLE_AREA.lock();
    let Some(a) = area.as_ref() else { return };
    let n = text.len().min(a.len - 1);
    // SAFETY: the argument area found at start-up (and the environment strings after it,
    // which nothing reads since `init_title` moved the environment), `a.len` bytes long.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), a.start as *mut u8, n);
        std::ptr::write_bytes((a.start + n) as *mut u8, 0, a.len - n);
    }
}
