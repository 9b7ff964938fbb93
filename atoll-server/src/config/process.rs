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
        let b = match *base {
            Some(b) => b,
            None => match std::fs::read_to_string(OOM_FILE) {
                Ok(s) => {
                    let b = s.trim().parse().unwrap_or(0);
                    *base = Some(b);
                    b
                }
                Err(e) => {
                    crate::log_warning!("Unable to read oom_score_adj: {e}");
                    return Err(super::ConfigError::Apply(FAILED.into()));
                }
            },
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
    let base = {
        let mut b = OOM_BASE.lock();
        match *b {
            Some(v) => v,
            None => {
                let v = std::fs::read_to_string(OOM_FILE).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
                *b = Some(v);
                v
            }
        }
    };
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
