//! Log lines in Redis's format: `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`, where the
//! level mark is `.` debug, `-` verbose, `*` notice, `#` warning.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::OnceLock;

static LEVEL: AtomicU32 = AtomicU32::new(2);
static FILE: OnceLock<Option<parking_lot::Mutex<std::fs::File>>> = OnceLock::new();
/// Where the log goes, as a descriptor a signal handler can write to without locks.
static LOG_FD: AtomicI32 = AtomicI32::new(1);

pub const DEBUG: u32 = 0;
pub const VERBOSE: u32 = 1;
pub const NOTICE: u32 = 2;
pub const WARNING: u32 = 3;

/// Sets the log file ("" = stdout) once at start.
pub fn init(logfile: &str, level: u32) {
    LEVEL.store(level, Ordering::Relaxed);
    let f = if logfile.is_empty() {
        None
    } else {
        std::fs::OpenOptions::new().create(true).append(true).open(logfile).ok().map(parking_lot::Mutex::new)
    };
    if let Some(f) = &f {
        LOG_FD.store(f.lock().as_raw_fd(), Ordering::Relaxed);
    }
    let _ = FILE.set(f);
}

/// `syslog-enabled yes`: every line logged also goes to the system logger.
static SYSLOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `syslog-enabled yes`: opens the system logger as Redis does (`openlog(ident, LOG_PID |
/// LOG_NDELAY | LOG_NOWAIT, facility)`); `facility` is `user` or `local0`…`local7`.
pub fn open_syslog(ident: &str, facility: &str) {
    let facility = match facility {
        "user" => libc::LOG_USER,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => libc::LOG_LOCAL0,
    };
    let Ok(ident) = std::ffi::CString::new(ident) else { return };
    // openlog keeps the pointer for the life of the process.
    let ident: &'static std::ffi::CStr = Box::leak(ident.into_boxed_c_str());
    // SAFETY: a NUL-terminated string that lives for ever, and flag constants.
    unsafe { libc::openlog(ident.as_ptr(), libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT, facility) };
    SYSLOG.store(true, Ordering::Relaxed);
}

/// Signals that mean the process is crashing, as Redis's `setupSigSegvAction` lists them.
const CRASH_SIGNALS: [libc::c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT];

/// Set once a panic's report is written: the SIGABRT that follows adds no second one.
static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// Inside a command's handler on this thread: 0 no, [`IN_READ_HANDLER`] a command that
    /// does not write, [`IN_WRITE_HANDLER`] one that may.
    static HANDLER: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}
pub const IN_READ_HANDLER: u8 = 1;
pub const IN_WRITE_HANDLER: u8 = 2;

/// Marks this thread as running a command's handler (`call`); returns what to restore.
#[inline]
pub fn enter_handler(mode: u8) -> u8 {
    HANDLER.replace(mode)
}

#[inline]
pub fn leave_handler(prev: u8) {
    HANDLER.set(prev)
}

/// What the server was doing on the crashing thread (`set_crash_context`).
type Context = Box<dyn Fn() -> String + Send + Sync>;
static CONTEXT: OnceLock<Context> = OnceLock::new();

/// Registers what a crash report says the crashing thread was doing (the server's command
/// and client, from the watchdog's slots).
pub fn set_crash_context(f: Context) {
    let _ = CONTEXT.set(f);
}

/// The policy for a Rust panic, as Redis's for a failed assertion: an unexpected internal
/// failure stops the process with a report in the log — the thread, the message, what it ran,
/// the backtrace — so nothing runs on half-alive (a worker, the AOF writer or the loader gone
/// while the listener still accepts). One exception keeps the server up: a handler of a
/// command that does not write, which has changed nothing, is caught by `call` and answered
/// `-ERR internal error` (its line is logged here).
pub fn install_panic_policy() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        if HANDLER.get() == IN_READ_HANDLER {
            crate::log_warning!("BUG: a command's handler panicked at {at}: {msg}");
            return;
        }
        let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
        crash(&format!("panic in thread '{thread}' at {at}: {msg}"));
    }));
}

/// Writes the crash report for `reason` and aborts the process.
pub fn crash(reason: &str) -> ! {
    let bt = std::backtrace::Backtrace::force_capture();
    let doing = CONTEXT.get().map(|f| f()).unwrap_or_default();
    let mut text = String::from("\n\n=== ATOLL BUG REPORT START: Cut & paste starting from here ===\n");
    text.push_str(&format!("{}:M # Atoll {} crashed by {reason}\n", std::process::id(), env!("CARGO_PKG_VERSION")));
    if !doing.is_empty() {
        text.push_str(&format!("{doing}\n"));
    }
    text.push_str(&format!("\n------ STACK TRACE ------\n{bt}\n=== ATOLL BUG REPORT END. ===\n"));
    REPORTED.store(true, Ordering::SeqCst);
    let fd = LOG_FD.load(Ordering::Relaxed);
    // SAFETY: write(2) of a buffer we own, to the log's descriptor (not through its lock: the
    // crashing thread may hold it).
    unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
    if EXIT_ON_PANIC.load(Ordering::Relaxed) {
        // `use-exit-on-panic` (Redis's, for its tests): exit 1 instead of dying by SIGABRT.
        // SAFETY: ends the process at once, as Redis's `_exit(1)`.
        unsafe { libc::_exit(1) }
    }
    std::process::abort()
}

/// `use-exit-on-panic`: a crash exits with status 1 rather than by SIGABRT.
static EXIT_ON_PANIC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn exit_on_panic(exit: bool) {
    EXIT_ON_PANIC.store(exit, Ordering::Relaxed);
}

/// The handlers that were there before ours (Rust's stack-overflow report for SIGSEGV and
/// SIGBUS), put back once ours has written its report.
static PREVIOUS: OnceLock<Vec<(libc::c_int, libc::sigaction)>> = OnceLock::new();

/// A crash is reported in the log before the process dies, as Redis reports one ("crashed by
/// signal"): operators and Redis's tests look for it. Called once at start-up.
pub fn install_crash_report() {
    let mut previous = Vec::new();
    for sig in CRASH_SIGNALS {
        // SAFETY: plain sigaction calls with zeroed structs we own; the handler only formats
        // into a stack buffer and writes it (async-signal-safe), then puts the old action back.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = crash_handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &sa, &mut old) == 0 {
                previous.push((sig, old));
            }
        }
    }
    let _ = PREVIOUS.set(previous);
}

/// Appends `n` in decimal to `buf` at `*len` (no allocation: runs in a signal handler).
fn put_num(buf: &mut [u8], len: &mut usize, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    put(buf, len, &digits[i..]);
}

fn put(buf: &mut [u8], len: &mut usize, s: &[u8]) {
    let n = s.len().min(buf.len() - *len);
    buf[*len..*len + n].copy_from_slice(&s[..n]);
    *len += n;
}

extern "C" fn crash_handler(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let mut buf = [0u8; 512];
    let mut len = 0;
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO.
    let code = if info.is_null() { 0 } else { unsafe { (*info).si_code } };
    if REPORTED.load(Ordering::SeqCst) {
        // A panic's report is written: die by the signal without a second one.
        // SAFETY: signal(2) and raise(2) are async-signal-safe.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    }
    put(&mut buf, &mut len, b"\n\n=== ATOLL BUG REPORT START: Cut & paste starting from here ===\n");
    // SAFETY: getpid is async-signal-safe.
    put_num(&mut buf, &mut len, unsafe { libc::getpid() } as u64);
    put(&mut buf, &mut len, b":M # Atoll ");
    put(&mut buf, &mut len, env!("CARGO_PKG_VERSION").as_bytes());
    put(&mut buf, &mut len, b" crashed by signal: ");
    put_num(&mut buf, &mut len, sig as u64);
    put(&mut buf, &mut len, b", si_code: ");
    if code < 0 {
        put(&mut buf, &mut len, b"-");
    }
    put_num(&mut buf, &mut len, code.unsigned_abs() as u64);
    if (sig == libc::SIGSEGV || sig == libc::SIGBUS) && !info.is_null() && code > 0 {
        // SAFETY: as above; si_addr is meaningful for these signals from a fault.
        let addr = unsafe { (*info).si_addr() } as usize;
        put(&mut buf, &mut len, b"\nAccessing address: 0x");
        let mut hex = [0u8; 16];
        for (i, h) in hex.iter_mut().enumerate() {
            *h = b"0123456789abcdef"[(addr >> (60 - 4 * i)) & 0xF];
        }
        put(&mut buf, &mut len, &hex);
    }
    put(&mut buf, &mut len, b"\n=== ATOLL BUG REPORT END. ===\n");
    // SAFETY: write(2) and sigaction(2) are async-signal-safe; `PREVIOUS` was set before
    // the handler was installed for the last time and is never changed after.
    unsafe {
        libc::write(LOG_FD.load(Ordering::Relaxed), buf.as_ptr().cast(), len);
        let old = PREVIOUS.get().and_then(|p| p.iter().find(|(s, _)| *s == sig).map(|(_, a)| *a));
        match old {
            // A fault happens again on return and goes to the handler that was there (Rust's
            // report of a stack overflow, else the default: the process dies by the signal).
            Some(a) if code > 0 => {
                libc::sigaction(sig, &a, std::ptr::null_mut());
            }
            // Sent by kill or raise: die by it now, as Redis does.
            _ => {
                libc::signal(sig, libc::SIG_DFL);
                libc::raise(sig);
            }
        }
    }
}

/// `hide-user-data-from-log` (Valkey's): keys and values are left out of log lines.
static HIDE_USER_DATA: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn hide_user_data(hide: bool) {
    HIDE_USER_DATA.store(hide, Ordering::Relaxed);
}

/// Whether a log line may show keys and values (`hide-user-data-from-log no`).
pub fn shows_user_data() -> bool {
    !HIDE_USER_DATA.load(Ordering::Relaxed)
}

/// A copy of the log's descriptor for a background child's standard error: what the child
/// reports lands in the server's log (Redis's child logs through the same file).
pub fn log_fd_copy() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: duplicates the log's open descriptor; the copy is ours alone.
    let d = unsafe { libc::fcntl(LOG_FD.load(Ordering::Relaxed), libc::F_DUPFD_CLOEXEC, 0) };
    // SAFETY: `d` is a new descriptor no one else owns.
    (d >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(d) })
}

/// A warning from a background child, in Redis's format with the child's role (`C`), on its
/// standard error — the server's log (`log_fd_copy`).
pub fn child_warning(msg: &str) {
    let line = format!("{}:C {} # {}\n", std::process::id(), timestamp(), msg);
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

pub fn set_level(level: u32) {
    LEVEL.store(level, Ordering::Relaxed);
}

fn timestamp() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r writes only into the tm we pass and reads the time_t we own.
    unsafe { libc::localtime_r(&secs, &mut tm) };
    const MON: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MON[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    )
}

pub fn log(level: u32, msg: &str) {
    if level < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    if SYSLOG.load(Ordering::Relaxed) {
        let prio = [libc::LOG_DEBUG, libc::LOG_INFO, libc::LOG_NOTICE, libc::LOG_WARNING][level.min(3) as usize];
        if let Ok(m) = std::ffi::CString::new(msg.replace('\0', " ")) {
            // SAFETY: a constant format taking one NUL-terminated string, as Redis's call.
            unsafe { libc::syslog(prio, c"%s".as_ptr(), m.as_ptr()) };
        }
    }
    let mark = ['.', '-', '*', '#'][level.min(3) as usize];
    let line = format!("{}:M {} {} {}\n", std::process::id(), timestamp(), mark, msg);
    write_out(&line);
}

/// Text written to the log as it is, without the pid, time and level (Redis's `LL_RAW`): the
/// start-up logo. The system logger gets it too, as Redis's `serverLogRaw` sends it.
pub fn raw(level: u32, text: &str) {
    if level < LEVEL.load(Ordering::Relaxed) {
        return;
    }
    if SYSLOG.load(Ordering::Relaxed) {
        if let Ok(m) = std::ffi::CString::new(text.replace('\0', " ")) {
            // SAFETY: a constant format taking one NUL-terminated string, as Redis's call.
            unsafe { libc::syslog(libc::LOG_NOTICE, c"%s".as_ptr(), m.as_ptr()) };
        }
    }
    write_out(text);
}

fn write_out(line: &str) {
    match FILE.get() {
        Some(Some(f)) => {
            let _ = f.lock().write_all(line.as_bytes());
        }
        _ => {
            let _ = std::io::stdout().lock().write_all(line.as_bytes());
        }
    }
}

#[macro_export]
macro_rules! log_notice { ($($a:tt)*) => { $crate::log::log($crate::log::NOTICE, &format!($($a)*)) } }
#[macro_export]
macro_rules! log_warning { ($($a:tt)*) => { $crate::log::log($crate::log::WARNING, &format!($($a)*)) } }
#[macro_export]
macro_rules! log_verbose { ($($a:tt)*) => { $crate::log::log($crate::log::VERBOSE, &format!($($a)*)) } }

/// An I/O error as strerror() words it in Redis's messages ("No such file or directory"),
/// without Rust's " (os error N)" suffix.
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}
