//! Log lines in Redis's format: `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`, where the
//! level mark is `.` debug, `-` verbose, `*` notice, `#` warning.

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

static LEVEL: AtomicU32 = AtomicU32::new(2);
static FILE: OnceLock<Option<parking_lot::Mutex<std::fs::File>>> = OnceLock::new();

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
    let _ = FILE.set(f);
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
    let mark = ['.', '-', '*', '#'][level.min(3) as usize];
    let line = format!("{}:M {} {} {}\n", std::process::id(), timestamp(), mark, msg);
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
