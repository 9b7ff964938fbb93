//! The watchdog: a thread of its own that notices a worker stuck inside one round and says so
//! in the log, in Redis's style, and in INFO (`stalled_workers`, `watchdog_reports`).
//!
//! A worker marks the start of each round and its end (`Beat::progress_ms`), and each command
//! it starts (`Beat::running`); while a busy script runs it marks each pass of the busy poll,
//! which still serves clients. A worker whose round has shown no progress for longer than the
//! limit is reported once per stall — the command, its client and the lock it waits for, read
//! from lock-free slots, so the report never waits on what the worker holds. The limit is
//! `watchdog-period` (ms) when set, as Redis's DEBUG-only software watchdog; otherwise
//! [`DEFAULT_LIMIT_MS`]: Atoll never stays silent about a stuck worker.

use crate::exec::Server;
use crate::services::watchdog::{Seen, DEFAULT_LIMIT_MS};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Worker `id` is serving while a script runs: progress.
pub fn alive(srv: &Server, id: usize) {
    srv.stats.workers[id].beat.progress_ms.store(srv.now_ms().max(1) as u64, Ordering::Relaxed);
}

/// Starts the watchdog thread.
pub fn spawn(srv: Arc<Server>) {
    std::thread::Builder::new()
        .name("atoll-watchdog".into())
        .spawn(move || loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
            check(&srv);
        })
        .expect("spawn the watchdog");
}

fn limit_ms(srv: &Server) -> i64 {
    match srv.config.int(crate::config::p::WATCHDOG_PERIOD) {
        p if p > 0 => p,
        _ => DEFAULT_LIMIT_MS,
    }
}

fn check(srv: &Server) {
    let now = srv.now_ms();
    let limit = limit_ms(srv);
    for (id, w) in srv.stats.workers.iter().enumerate() {
        let since = w.beat.progress_ms.load(Ordering::Relaxed);
        let stuck = if since == 0 { 0 } else { now - since as i64 };
        match srv.watchdog.observe(id, stuck >= limit) {
            Seen::Quiet => {}
            Seen::Moving => crate::log_warning!("--- WATCHDOG: worker {id} is making progress again ---"),
            Seen::Stalled => {
                crate::log_warning!(
                    "--- WATCHDOG TIMER EXPIRED: worker {id} has not finished its round for {stuck} ms ---"
                );
                crate::log_warning!("{}", running(srv, id));
            }
        }
    }
}

/// What worker `id` is doing, from its lock-free slots: the command, its client and the lock
/// it waits for. Also the crash report's line.
pub fn running(srv: &Server, id: usize) -> String {
    let Some(w) = srv.stats.workers.get(id) else { return String::new() };
    let cmd = w.beat.cmd.load(Ordering::Relaxed) as usize;
    let name = cmd.checked_sub(1).and_then(|i| srv.table.all.get(i)).map_or("(none)", |c| c.full_name());
    let client = w.beat.client.load(Ordering::Relaxed);
    let waits = match crate::lockorder::waiting_in(id) {
        Some(r) => format!("waiting for a {r:?} lock"),
        None => "not waiting for a lock".to_string(),
    };
    format!("worker {id}: last command '{name}' of client id={client}, {waits}")
}
