//! The RDB scheduler: the persistence thread. It runs BGSAVEs when asked (BGSAVE,
//! SCHEDULE) and when a `save <seconds> <changes>` point is reached, and the AOF rewrites the
//! AOF asks for; the saving itself is `daemons::persistence`'s and `daemons::aof`'s.

use super::persistence::*;
use crate::exec::Server;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The persistence thread: runs BGSAVEs when asked and when a `save` point is reached.
pub fn run_thread(srv: Arc<Server>) {
    let p = &srv.persistence;
    yield_to_workers();
    loop {
        p.wait_for_wake(Duration::from_millis(100));
        if srv.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if p.loading() {
            continue;
        }
        if crate::daemons::aof::run_requested(&srv) {
            continue;
        }
        crate::daemons::aof::maybe_auto_rewrite(&srv);
        // A BGSAVE request arrives with `in_progress` already set; a save point sets it here.
        let requested = p.scheduled.swap(false, Ordering::AcqRel);
        if !requested {
            if !save_point_reached(&srv) || p.in_progress.swap(true, Ordering::AcqRel) {
                continue;
            }
            p.bgsave_started_ms.store(srv.now_ms(), Ordering::Relaxed);
            p.progress.cancel.store(false, Ordering::Relaxed);
        }
        let start = p.bgsave_started_ms.load(Ordering::Relaxed);
        let ok = write(&srv, true).is_ok();
        p.last_bgsave_secs.store((srv.now_ms() - start) / 1000, Ordering::Relaxed);
        p.in_progress.store(false, Ordering::Release);
        if ok {
            crate::log_notice!("Background saving terminated with success");
        } else {
            crate::log_warning!("Background saving error");
        }
    }
}

/// Background saving is not to take a core from the clients: this thread (snapshots, AOF
/// rewrites) runs at a lower priority (nice 5), so a worker woken by a request preempts it
/// at once instead of waiting out its time slice when they share a core. Where the saving
/// has a core to itself nothing changes. (Redis's forked child competes at equal priority.)
fn yield_to_workers() {
    // SAFETY: setpriority on this thread's id (Linux threads are schedulable entities).
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 5);
    }
}

/// Redis's serverCron rule: some `save <seconds> <changes>` point has at least `changes`
/// changes and `seconds` since the last save — and, after a failed save, 5 s have passed.
fn save_point_reached(srv: &Server) -> bool {
    let save = srv.config.text(crate::config::p::SAVE);
    if save.is_empty() {
        return false;
    }
    let p = &srv.persistence;
    let now = srv.now_ms();
    let changes = changes_since_save(srv);
    let since = now / 1000 - srv.lastsave.load(Ordering::Relaxed);
    if p.failed() && now - p.last_try_ms.load(Ordering::Relaxed) < 5000 {
        return false;
    }
    let nums: Vec<i64> = save.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    nums.chunks(2).any(|c| c.len() == 2 && changes as i64 >= c[1] && since >= c[0])
}
