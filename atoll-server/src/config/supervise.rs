//! Running under a service manager as redis-server does: `daemonize yes` forks into the
//! background (unless a supervisor runs the process), `supervised systemd` tells systemd how
//! start-up and shutdown go over `NOTIFY_SOCKET` (READY=1, STATUS=…, STOPPING=1: the
//! `sd-notify` crate), `supervised upstart` stops itself with SIGSTOP once set up, as upstart
//! expects, and `auto` picks whichever of the two the environment names.

use crate::{log_notice, log_verbose, log_warning};
use std::sync::atomic::{AtomicU8, Ordering};

const NONE: u8 = 0;
const UPSTART: u8 = 1;
const SYSTEMD: u8 = 2;

/// The supervisor found at start-up (INFO `process_supervised`).
static MODE: AtomicU8 = AtomicU8::new(NONE);

/// Redis's `redisIsSupervised`: whether `mode` (`supervised`'s value) finds its supervisor;
/// true if the process runs under one (and then does not daemonize).
pub fn detect(mode: &str) -> bool {
    let mode = match mode {
        "auto" if std::env::var_os("UPSTART_JOB").is_some() => {
            log_verbose!("Upstart supervision detected.");
            "upstart"
        }
        "auto" if std::env::var_os("NOTIFY_SOCKET").is_some() => {
            log_verbose!("Systemd supervision detected.");
            "systemd"
        }
        m => m,
    };
    let found = match mode {
        "upstart" => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                log_warning!("upstart supervision requested, but UPSTART_JOB not found!");
                return false;
            }
            log_notice!("supervised by upstart, will stop to signal readiness.");
            // SAFETY: raising a signal at ourselves; upstart continues the process.
            unsafe { libc::raise(libc::SIGSTOP) };
            std::env::remove_var("UPSTART_JOB");
            UPSTART
        }
        "systemd" => {
            if std::env::var_os("NOTIFY_SOCKET").is_none() {
                log_warning!("systemd supervision error: NOTIFY_SOCKET not found!");
                return false;
            }
            if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Status("Atoll is loading...")]) {
                log_warning!("systemd supervision error: sd_notify: {e}");
                return false;
            }
            log_notice!(
                "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
            );
            SYSTEMD
        }
        _ => return false,
    };
    MODE.store(found, Ordering::Relaxed);
    true
}

/// INFO's `process_supervised`.
pub fn mode_name() -> &'static str {
    match MODE.load(Ordering::Relaxed) {
        UPSTART => "upstart",
        SYSTEMD => "systemd",
        _ => "no",
    }
}

/// Tells systemd (when it supervises) the server's state: `STATUS=status`, and `READY=1` or
/// `STOPPING=1` when `ready`/`stopping`.
pub fn notify(status: &str, ready: bool, stopping: bool) {
    if MODE.load(Ordering::Relaxed) != SYSTEMD {
        return;
    }
    let mut states = vec![sd_notify::NotifyState::Status(status)];
    if ready {
        states.push(sd_notify::NotifyState::Ready);
    }
    if stopping {
        states.push(sd_notify::NotifyState::Stopping);
    }
    if let Err(e) = sd_notify::notify(false, &states) {
        log_warning!("systemd supervision error: sd_notify: {e}");
    }
}

/// `daemonize yes`: the process forks, the parent returns to the shell at once, and the
/// child leaves the terminal's session with its standard streams on /dev/null (Redis's
/// `daemonize`). Called before any thread of the server starts: a fork keeps only the
/// calling thread.
pub fn daemonize() {
    // SAFETY: fork while single-threaded (the caller's promise); the parent exits at once.
    match unsafe { libc::fork() } {
        -1 => {
            log_warning!("Can't fork into the background: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
        0 => {}
        _ => std::process::exit(0),
    }
    // SAFETY: plain system calls on descriptors this process owns.
    unsafe {
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}
