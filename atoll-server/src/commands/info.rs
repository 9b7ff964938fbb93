//! INFO: the sections and field names operators and redis_exporter know.

use crate::exec::Server;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// Every section, in the order Redis 7.2 prints them.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "debug",
];
/// The sections of a plain INFO.
const DEFAULT_OMITS: &[&str] = &["commandstats", "latencystats"];

/// Which sections an INFO call asked for, in Redis's order.
pub fn select_sections(args: &[&[u8]]) -> Vec<&'static str> {
    let want: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).to_lowercase()).collect();
    let everything = want.iter().any(|w| w == "all" || w == "everything");
    let default = args.is_empty() || want.iter().any(|w| w == "default");
    ORDER
        .iter()
        .filter(|s| {
            want.iter().any(|w| w == *s)
                // `debug` only when named, as in Redis.
                || (**s != "debug" && (everything || (default && !DEFAULT_OMITS.contains(s))))
        })
        .copied()
        .collect()
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes}B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.2}K", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", b / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", b / (1024.0 * 1024.0 * 1024.0))
    }
}

/// Resident set size of this process, from /proc.
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// Bytes allocated by the program according to jemalloc (0 when jemalloc is not the
/// allocator, as in unit tests).
pub use crate::services::stats::allocated_bytes;

fn total_system_memory() -> u64 {
    let s = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

fn rusage(who: i32) -> (String, String) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only into the struct we pass.
    unsafe { libc::getrusage(who, &mut ru) };
    (
        format!("{}.{:06}", ru.ru_stime.tv_sec, ru.ru_stime.tv_usec),
        format!("{}.{:06}", ru.ru_utime.tv_sec, ru.ru_utime.tv_usec),
    )
}

/// Keys clients are blocked on, and those of them an XREADGROUP waits on (it is also woken when
/// the key goes away: Redis's "on nokey"). One shard at a time; INFO is not on a hot path.
/// Through the caller's locks: inside EXEC or a script this thread already holds the shards.
fn blocking_keys(srv: &Server, locks: &mut crate::engine::Locks) -> (usize, usize) {
    let (mut keys, mut nokey) = (0, 0);
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        for s in 0..crate::engine::SHARDS {
            locks.with_shard(db, s, |sh| {
                if let Some(b) = &sh.blocked {
                    for q in b.values() {
                        keys += 1;
                        let group_reader = q.iter().any(|w| {
                            w.downcast_ref::<crate::exec::blocking::Waiter>()
                                .is_some_and(|w| w.argv.first().is_some_and(|a| a.eq_ignore_ascii_case(b"xreadgroup")))
                        });
                        nokey += group_reader as usize;
                    }
                }
            });
        }
    }
    (keys, nokey)
}

/// Builds the INFO text. `locks` are the caller's (inside EXEC it holds every database, so the
/// keyspace section reads through them instead of locking shards again).
pub fn generate(srv: &Server, sections: &[&str], locks: &mut crate::engine::Locks) -> String {
    let mut o = String::new();
    let now = srv.now_ms();
    let st = &srv.stats;
    for (n, sec) in sections.iter().enumerate() {
        if n > 0 {
            o.push_str("\r\n");
        }
        macro_rules! f { ($($a:tt)*) => { let _ = write!(o, $($a)*); o.push_str("\r\n"); } }
        match *sec {
            "server" => {
                o.push_str("# Server\r\n");
                f!("redis_version:{}", crate::REDIS_VERSION);
                f!("redis_git_sha1:00000000");
                f!("redis_git_dirty:0");
                f!("redis_build_id:0");
                f!("redis_mode:standalone");
                f!("server_name:atoll");
                f!("atoll_version:{}", env!("CARGO_PKG_VERSION"));
                f!("os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
                f!("arch_bits:64");
                f!("monotonic_clock:POSIX clock_gettime");
                f!("multiplexing_api:{}", if srv.io_uring.load(Ordering::Relaxed) { "io_uring" } else { "epoll" });
                f!("atomicvar_api:c11-builtin");
                f!("gcc_version:0.0.0");
                f!("process_id:{}", std::process::id());
                f!("process_supervised:{}", crate::config::supervise::mode_name());
                f!("run_id:{}", srv.run_id);
                f!("tcp_port:{}", srv.tcp_port.load(Ordering::Relaxed));
                f!("server_time_usec:{}", now * 1000);
                let up = srv.started.elapsed().as_secs();
                f!("uptime_in_seconds:{}", up);
                f!("uptime_in_days:{}", up / 86400);
                f!("hz:{}", srv.config.hot.hz.load(Ordering::Relaxed));
                f!("configured_hz:{}", srv.config.hot.hz.load(Ordering::Relaxed));
                f!("lru_clock:{}", (now / 1000) & 0xFF_FFFF);
                f!("executable:{}", srv.executable);
                f!("config_file:{}", srv.config.config_file.clone().unwrap_or_default());
                f!("io_threads_active:0");
                let deadline = srv.shutdown_deadline_ms.load(Ordering::Relaxed);
                if deadline != 0 {
                    f!("shutdown_in_milliseconds:{}", (deadline - srv.now_ms()).max(0));
                }
                let mut binds = String::new();
                for b in srv.config.get("bind").split_whitespace() {
                    binds.push_str(&format!("bind={b},"));
                }
                f!("listener0:name=tcp,{}port={}", binds, srv.tcp_port.load(Ordering::Relaxed));
                f!("threads:{}", srv.threads);
            }
            "clients" => {
                o.push_str("# Clients\r\n");
                // Replicas are not counted, as in Redis.
                f!("connected_clients:{}", srv.clients.len().saturating_sub(srv.repl.connected()));
                f!("cluster_connections:0");
                f!("maxclients:{}", srv.config.hot.maxclients.load(Ordering::Relaxed));
                // The largest unfinished request held now (Redis keeps the largest of the last
                // few seconds; Atoll holds no read buffer between requests).
                let max_qbuf = srv.clients.fold(0, |m, h| m.max(h.qbuf.load(Ordering::Relaxed)));
                f!("client_recent_max_input_buffer:{}", max_qbuf);
                f!("client_recent_max_output_buffer:0");
                f!("blocked_clients:{}", srv.blocked_clients.load(Ordering::Relaxed));
                f!("tracking_clients:{}", srv.tracking.figures().0);
                f!("clients_in_timeout_table:0");
                let (keys, nokey) = blocking_keys(srv, locks);
                f!("total_blocking_keys:{}", keys);
                f!("total_blocking_keys_on_nokey:{}", nokey);
            }
            "memory" => {
                let (alloc, active, resident) = allocated_bytes();
                let allocator = crate::services::stats::jemalloc_allocated();
                let rss = rss_bytes();
                let maxmem = srv.config.get_i64("maxmemory") as u64;
                o.push_str("# Memory\r\n");
                f!("used_memory:{}", alloc);
                f!("used_memory_human:{}", human(alloc));
                f!("used_memory_rss:{}", rss);
                f!("used_memory_rss_human:{}", human(rss));
                // The peak as INFO and MEMORY STATS have seen it; the startup figure is what the
                // server held once up, the dataset the rest (Redis subtracts its overheads too).
                let peak = srv.peak_allocated.fetch_max(alloc, Ordering::Relaxed).max(alloc);
                let startup = srv.startup_allocated.load(Ordering::Relaxed);
                let dataset = alloc.saturating_sub(startup);
                f!("used_memory_peak:{}", peak);
                f!("used_memory_peak_human:{}", human(peak));
                f!("used_memory_peak_perc:{:.2}%", alloc as f64 * 100.0 / peak.max(1) as f64);
                f!("used_memory_overhead:{}", startup);
                f!("used_memory_startup:{}", startup);
                f!("used_memory_dataset:{}", dataset);
                f!("used_memory_dataset_perc:{:.2}%", dataset as f64 * 100.0 / alloc.max(1) as f64);
                f!("allocator_allocated:{}", allocator);
                f!("allocator_active:{}", active);
                f!("allocator_resident:{}", resident);
                let tsm = total_system_memory();
                f!("total_system_memory:{}", tsm);
                f!("total_system_memory_human:{}", human(tsm));
                // One Lua interpreter per worker runs both scripts and functions: their memory
                // is reported as the EVAL engine's.
                let sc = &srv.scripts;
                let lua = sc.vm_memory();
                let eval_bytes = sc.bytes.load(Ordering::Relaxed);
                let (nfuncs, fbytes) = {
                    let st = sc.functions.read();
                    (st.functions.len(), st.libraries.values().map(|l| l.code.len() as u64 + 64).sum::<u64>())
                };
                f!("used_memory_lua:{}", lua);
                f!("used_memory_vm_eval:{}", lua);
                f!("used_memory_lua_human:{}", human(lua));
                f!("used_memory_scripts_eval:{}", eval_bytes);
                f!("number_of_cached_scripts:{}", sc.len());
                f!("number_of_functions:{}", nfuncs);
                f!("number_of_libraries:{}", sc.functions.read().libraries.len());
                f!("used_memory_vm_functions:0");
                f!("used_memory_vm_total:{}", lua);
                f!("used_memory_vm_total_human:{}", human(lua));
                f!("used_memory_functions:{}", fbytes);
                f!("used_memory_scripts:{}", eval_bytes + fbytes);
                f!("used_memory_scripts_human:{}", human(eval_bytes + fbytes));
                f!("maxmemory:{}", maxmem);
                f!("maxmemory_human:{}", human(maxmem));
                f!("maxmemory_policy:{}", srv.config.get("maxmemory-policy"));
                let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
                f!("allocator_frag_ratio:{:.2}", ratio(active, allocator));
                f!("allocator_frag_bytes:{}", active.saturating_sub(allocator));
                f!("allocator_rss_ratio:{:.2}", ratio(resident, active));
                f!("allocator_rss_bytes:{}", resident.saturating_sub(active));
                f!("rss_overhead_ratio:{:.2}", ratio(rss, resident));
                f!("rss_overhead_bytes:{}", rss as i64 - resident as i64);
                f!("mem_fragmentation_ratio:{:.2}", ratio(rss, alloc));
                f!("mem_fragmentation_bytes:{}", rss as i64 - alloc as i64);
                // What the replicas hold, read once for the three fields that show it.
                let replica_bufs = srv.repl.replica_buffers();
                f!("mem_not_counted_for_evict:{}", replica_bufs);
                f!("mem_replication_backlog:{}", srv.repl.backlog_bytes());
                f!("mem_total_replication_buffers:{}", srv.repl.backlog_bytes() + replica_bufs);
                f!("mem_clients_slaves:{}", replica_bufs);
                f!(
                    "mem_clients_normal:{}",
                    srv.clients.fold(0, |sum, h| if h.replica.load(Ordering::Relaxed) {
                        sum
                    } else {
                        sum + h.memory()
                    })
                );
                f!("mem_cluster_links:0");
                f!("mem_aof_buffer:0");
                f!("mem_allocator:jemalloc");
                f!("active_defrag_running:0");
                f!("lazyfree_pending_objects:{}", srv.lazyfree.pending());
                f!("lazyfreed_objects:{}", srv.lazyfree.freed());
            }
            "persistence" => {
                o.push_str("# Persistence\r\n");
                let p = &srv.persistence;
                let loading = p.loading();
                f!("loading:{}", loading as u8);
                f!("async_loading:0");
                if loading {
                    let total = p.loading_total_bytes.load(Ordering::Relaxed);
                    let done = p.loading.loaded_bytes.load(Ordering::Relaxed);
                    let start = p.loading_start_s.load(Ordering::Relaxed);
                    let elapsed = (now / 1000 - start).max(0);
                    let perc = if total > 0 { done as f64 * 100.0 / total as f64 } else { 0.0 };
                    let eta =
                        if done > 0 && total > done { (total - done) as i64 * elapsed.max(1) / done as i64 } else { 1 };
                    f!("loading_start_time:{start}");
                    f!("loading_total_bytes:{total}");
                    f!("loading_rdb_used_mem:0");
                    f!("loading_loaded_bytes:{done}");
                    f!("loading_loaded_perc:{perc:.2}");
                    f!("loading_eta_seconds:{eta}");
                }
                // A fork-less snapshot's "copy-on-write" is what commands serialized ahead of
                // its walk because they were about to change a shard (see rdbfile::Progress).
                let running = p.in_progress.load(Ordering::Relaxed);
                let pr = &p.progress;
                let (cow, done, total) = if running {
                    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
                    (l(&pr.cow_bytes), l(&pr.keys_processed), l(&pr.keys_total))
                } else {
                    (0, 0, 0)
                };
                f!("current_cow_peak:{cow}");
                f!("current_cow_size:{cow}");
                f!("current_cow_size_age:0");
                let perc = if total > 0 { done as f64 * 100.0 / total as f64 } else { 0.0 };
                f!("current_fork_perc:{perc:.2}");
                f!("current_save_keys_processed:{done}");
                f!("current_save_keys_total:{total}");
                f!("rdb_changes_since_last_save:{}", crate::exec::persistence::changes_since_save(srv));
                f!("rdb_bgsave_in_progress:{}", running as u8);
                f!("rdb_last_save_time:{}", srv.lastsave.load(Ordering::Relaxed));
                f!("rdb_last_bgsave_status:{}", if p.failed() { "err" } else { "ok" });
                f!("rdb_last_bgsave_time_sec:{}", p.last_bgsave_secs.load(Ordering::Relaxed));
                let current = if running { (now - p.bgsave_started_ms.load(Ordering::Relaxed)) / 1000 } else { -1 };
                f!("rdb_current_bgsave_time_sec:{}", current);
                f!("rdb_saves:{}", p.saves.load(Ordering::Relaxed));
                f!("rdb_last_cow_size:{}", p.last_cow_bytes.load(Ordering::Relaxed));
                f!("rdb_last_load_keys_expired:{}", p.last_load_keys_expired.load(Ordering::Relaxed));
                f!("rdb_last_load_keys_loaded:{}", p.last_load_keys_loaded.load(Ordering::Relaxed));
                let aof = &srv.persistence.aof;
                let log = aof.log();
                f!("aof_enabled:{}", log.is_some() as u8);
                f!("aof_rewrite_in_progress:{}", aof.rewrite_in_progress.load(Ordering::Relaxed) as u8);
                f!("aof_rewrite_scheduled:{}", aof.rewrite_scheduled.load(Ordering::Relaxed) as u8);
                f!("aof_last_rewrite_time_sec:{}", aof.last_rewrite_secs.load(Ordering::Relaxed));
                let started = aof.rewrite_started_ms.load(Ordering::Relaxed);
                f!("aof_current_rewrite_time_sec:{}", if started > 0 { (now - started) / 1000 } else { -1 });
                let rewrite_failed = aof.last_rewrite_failed.load(Ordering::Relaxed);
                f!("aof_last_bgrewrite_status:{}", if rewrite_failed { "err" } else { "ok" });
                f!("aof_rewrites:{}", aof.rewrites.load(Ordering::Relaxed));
                f!("aof_rewrites_consecutive_failures:{}", aof.consecutive_failures.load(Ordering::Relaxed));
                let failed = log.as_ref().is_some_and(|l| l.write_failed.load(Ordering::Relaxed));
                f!("aof_last_write_status:{}", if failed { "err" } else { "ok" });
                f!("aof_last_cow_size:{}", aof.last_cow_bytes.load(Ordering::Relaxed));
                f!("module_fork_in_progress:0");
                f!("module_fork_last_cow_size:0");
                if let Some(l) = &log {
                    let base = aof.base_size.load(Ordering::Relaxed);
                    f!("aof_current_size:{}", base + l.file_size.load(Ordering::Relaxed));
                    f!("aof_base_size:{base}");
                    f!("aof_pending_rewrite:0");
                    f!("aof_buffer_length:0");
                    f!("aof_pending_bio_fsync:0");
                    f!("aof_delayed_fsync:0");
                }
            }
            "stats" => {
                o.push_str("# Stats\r\n");
                f!("total_connections_received:{}", st.sum(|c| &c.connections));
                f!("total_commands_processed:{}", st.sum(|c| &c.commands));
                f!("instantaneous_ops_per_sec:{}", srv.instantaneous_ops());
                f!("total_net_input_bytes:{}", st.sum(|c| &c.net_input_bytes));
                f!("total_net_output_bytes:{}", st.sum(|c| &c.net_output_bytes));
                f!("total_net_repl_input_bytes:0");
                f!("total_net_repl_output_bytes:0");
                let (kin, kout) = srv.instantaneous_kbps();
                f!("instantaneous_input_kbps:{kin:.2}");
                f!("instantaneous_output_kbps:{kout:.2}");
                f!("instantaneous_input_repl_kbps:0.00");
                f!("instantaneous_output_repl_kbps:0.00");
                f!("rejected_connections:{}", st.sum(|c| &c.rejected_connections));
                f!("sync_full:{}", srv.repl.sync_full.load(Ordering::Relaxed));
                f!("sync_partial_ok:{}", srv.repl.sync_partial_ok.load(Ordering::Relaxed));
                f!("sync_partial_err:{}", srv.repl.sync_partial_err.load(Ordering::Relaxed));
                f!("expired_keys:{}", st.sum(|c| &c.expired_keys));
                f!("expired_stale_perc:{:.2}", srv.stats.expired_stale_perc());
                f!("expired_time_cap_reached_count:{}", st.sum(|c| &c.expire_cycle_capped));
                f!("expire_cycle_cpu_milliseconds:{}", st.sum(|c| &c.expire_cycle_cpu_ms));
                f!("evicted_keys:{}", srv.evict.evicted_keys.load(Ordering::Relaxed));
                f!("evicted_clients:{}", srv.evict.evicted_clients.load(Ordering::Relaxed));
                let (cur, total) = srv.evict.exceeded_ms(srv.now_ms());
                f!("total_eviction_exceeded_time:{}", total);
                f!("current_eviction_exceeded_time:{}", cur);
                f!("keyspace_hits:{}", st.sum(|c| &c.keyspace_hits));
                f!("keyspace_misses:{}", st.sum(|c| &c.keyspace_misses));
                {
                    use crate::exec::pubsub::Kind;
                    f!("pubsub_channels:{}", srv.pubsub.len(Kind::Channel));
                    f!("pubsub_patterns:{}", srv.pubsub.len(Kind::Pattern));
                    f!("pubsubshard_channels:{}", srv.pubsub.len(Kind::Shard));
                }
                f!("latest_fork_usec:0");
                f!("total_forks:0");
                f!("migrate_cached_sockets:{}", srv.migrate_sockets.len());
                f!("slave_expires_tracked_keys:0");
                f!("active_defrag_hits:0");
                f!("active_defrag_misses:0");
                f!("active_defrag_key_hits:0");
                f!("active_defrag_key_misses:0");
                f!("total_active_defrag_time:0");
                f!("current_active_defrag_time:0");
                let (_, keys, items, prefixes) = srv.tracking.figures();
                f!("tracking_total_keys:{keys}");
                f!("tracking_total_items:{items}");
                f!("tracking_total_prefixes:{prefixes}");
                f!("unexpected_error_replies:{}", st.sum(|c| &c.unexpected_error_replies));
                f!("total_error_replies:{}", st.sum(|c| &c.error_replies));
                f!("dump_payload_sanitizations:0");
                f!("total_reads_processed:{}", st.sum(|c| &c.reads_processed));
                f!("total_writes_processed:{}", st.sum(|c| &c.writes_processed));
                f!("io_threaded_reads_processed:0");
                f!("io_threaded_writes_processed:0");
                f!("reply_buffer_shrinks:0");
                f!("reply_buffer_expands:0");
                // Worker rounds (all workers): how many, their busy time, and the part spent
                // running commands.
                let cmd_us: u64 = srv.table.all.iter().map(|c| st.cmd_sum(c.id, |s| &s.usec)).sum();
                f!("eventloop_cycles:{}", st.sum(|c| &c.eventloop_cycles));
                f!("eventloop_duration_sum:{}", st.sum(|c| &c.eventloop_us));
                f!("eventloop_duration_cmd_sum:{}", cmd_us);
                let (per_sec, per_cycle) = srv.instantaneous_eventloop();
                f!("instantaneous_eventloop_cycles_per_sec:{}", per_sec);
                f!("instantaneous_eventloop_duration_usec:{}", per_cycle);
                f!("acl_access_denied_auth:{}", srv.acl.denied[0].load(Ordering::Relaxed));
                f!("acl_access_denied_cmd:{}", srv.acl.denied[1].load(Ordering::Relaxed));
                f!("acl_access_denied_key:{}", srv.acl.denied[2].load(Ordering::Relaxed));
                f!("acl_access_denied_channel:{}", srv.acl.denied[3].load(Ordering::Relaxed));
                // Atoll's own (io_uring backend): waits that held the wake-up for more requests.
                f!("io_batched_waits:{}", st.sum(|c| &c.batched_waits));
                // Atoll's own: workers stuck in one round now, and stalls reported since start
                // (`daemons::watchdog`).
                f!("stalled_workers:{}", srv.watchdog.stalled());
                f!("watchdog_reports:{}", srv.watchdog.reports.load(Ordering::Relaxed));
            }
            "replication" => {
                o.push_str("# Replication\r\n");
                let up = &srv.repl.upstream;
                let master = up.master.lock().clone();
                let now = srv.now_ms();
                if let Some((host, port)) = &master {
                    use crate::exec::upstream::CONNECTED;
                    let state = up.state.load(Ordering::Relaxed);
                    f!("role:slave");
                    f!("master_host:{host}");
                    f!("master_port:{port}");
                    f!("master_link_status:{}", if state == CONNECTED { "up" } else { "down" });
                    let io = up.last_io_ms.load(Ordering::Relaxed);
                    f!("master_last_io_seconds_ago:{}", if io == 0 { -1 } else { (now - io) / 1000 });
                    f!("master_sync_in_progress:{}", (state == crate::exec::upstream::SYNC) as u8);
                    f!("slave_read_repl_offset:{}", up.read_offset.load(Ordering::Relaxed));
                    f!("slave_repl_offset:{}", up.offset.load(Ordering::Relaxed));
                    if state != CONNECTED {
                        let since = up.down_since_ms.load(Ordering::Relaxed);
                        f!("master_link_down_since_seconds:{}", if since == 0 { -1 } else { (now - since) / 1000 });
                    }
                    f!("slave_priority:{}", srv.config.get("replica-priority"));
                    f!("slave_read_only:{}", srv.config.get_bool("replica-read-only") as u8);
                    f!("replica_announced:{}", srv.config.get_bool("replica-announced") as u8);
                } else {
                    f!("role:master");
                }
                let replicas = srv.repl.all_replicas();
                f!("connected_slaves:{}", replicas.len());
                for (i, r) in replicas.iter().enumerate() {
                    let state = match r.link() {
                        crate::exec::replication::Link::WaitBgsave => "wait_bgsave",
                        crate::exec::replication::Link::SendBulk => "send_bulk",
                        crate::exec::replication::Link::Online => "online",
                    };
                    f!(
                        "slave{i}:ip={},port={},state={state},offset={},lag={}",
                        r.ip,
                        r.port,
                        r.ack_offset.load(Ordering::Relaxed),
                        (now - r.ack_ms.load(Ordering::Relaxed)).max(0) / 1000
                    );
                }
                f!("master_failover_state:no-failover");
                f!("master_replid:{}", srv.replid.lock());
                let (id2, second) = srv
                    .repl
                    .replid2
                    .lock()
                    .clone()
                    .unwrap_or_else(|| ("0000000000000000000000000000000000000000".into(), -1));
                f!("master_replid2:{id2}");
                let offset = if master.is_some() { up.offset.load(Ordering::Relaxed) } else { srv.repl.offset() };
                f!("master_repl_offset:{offset}");
                f!("second_repl_offset:{second}");
                let (active, size, first, histlen) = srv.repl.backlog_info(srv);
                f!("repl_backlog_active:{}", active as u8);
                f!("repl_backlog_size:{size}");
                f!("repl_backlog_first_byte_offset:{first}");
                f!("repl_backlog_histlen:{histlen}");
            }
            "cpu" => {
                let (sys, user) = rusage(libc::RUSAGE_SELF);
                let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
                o.push_str("# CPU\r\n");
                f!("used_cpu_sys:{}", sys);
                f!("used_cpu_user:{}", user);
                f!("used_cpu_sys_children:{}", csys);
                f!("used_cpu_user_children:{}", cuser);
                f!("used_cpu_sys_main_thread:{}", sys);
                f!("used_cpu_user_main_thread:{}", user);
            }
            "modules" => o.push_str("# Modules\r\n"),
            "errorstats" => {
                o.push_str("# Errorstats\r\n");
                for (code, n) in st.errors() {
                    f!("errorstat_{}:count={}", code, n);
                }
            }
            "cluster" => {
                o.push_str("# Cluster\r\n");
                f!("cluster_enabled:0");
            }
            "keyspace" => {
                o.push_str("# Keyspace\r\n");
                for db in 0..srv.ks.num_dbs() {
                    if srv.ks.db_if_exists(db).is_none() {
                        continue;
                    }
                    let (keys, expires) = locks.db_stats(db);
                    if keys > 0 {
                        f!("db{}:keys={},expires={},avg_ttl=0", db, keys, expires);
                    }
                }
            }
            "debug" => {
                // Redis's: its AOF flush and cron time, its longest event-loop iteration and
                // the most commands one ran; here summed over (maxima: across) the workers.
                o.push_str("# Debug\r\n");
                f!("eventloop_duration_aof_sum:{}", st.sum(|c| &c.eventloop_aof_ns) / 1000);
                f!("eventloop_duration_cron_sum:{}", st.sum(|c| &c.eventloop_cron_ns) / 1000);
                f!("eventloop_duration_max:{}", st.max(|c| &c.eventloop_max_us));
                f!("eventloop_cmd_per_cycle_max:{}", st.max(|c| &c.eventloop_max_cmds));
            }
            "commandstats" => {
                o.push_str("# Commandstats\r\n");
                let mut cmds: Vec<_> = srv.table.all.iter().collect();
                cmds.sort_by(|a, b| a.name.cmp(&b.name));
                for c in cmds {
                    let calls = st.cmd_sum(c.id, |s| &s.calls);
                    let rej = st.cmd_sum(c.id, |s| &s.rejected_calls);
                    let failed = st.cmd_sum(c.id, |s| &s.failed_calls);
                    if calls == 0 && rej == 0 && failed == 0 {
                        continue;
                    }
                    let usec = st.cmd_sum(c.id, |s| &s.usec);
                    let per = if calls > 0 { usec as f64 / calls as f64 } else { 0.0 };
                    f!(
                        "cmdstat_{}:calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}",
                        c.name,
                        calls,
                        usec,
                        per,
                        rej,
                        failed
                    );
                }
            }
            "latencystats" => {
                o.push_str("# Latencystats\r\n");
                if srv.config.hot.latency_tracking.load(std::sync::atomic::Ordering::Relaxed) {
                    let pcts: Vec<f64> = srv
                        .config
                        .get("latency-tracking-info-percentiles")
                        .split(' ')
                        .filter_map(|p| p.parse().ok())
                        .collect();
                    let mut cmds: Vec<_> = srv.table.all.iter().collect();
                    cmds.sort_by(|a, b| a.name.cmp(&b.name));
                    for c in cmds {
                        let Some(m) = super::latency::merged_histogram(srv, c) else { continue };
                        let parts: Vec<String> = pcts
                            .iter()
                            .map(|&p| {
                                let v = m.value_at_percentile(p) as f64 / 1000.0;
                                format!("p{}={v:.3}", crate::services::latency::percentile_label(p))
                            })
                            .collect();
                        f!("latency_percentiles_usec_{}:{}", c.name, parts.join(","));
                    }
                }
            }
            _ => {}
        }
    }
    o
}
