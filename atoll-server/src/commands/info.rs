//! INFO: the sections and field names operators and redis_exporter know.

use crate::exec::Server;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The sections of a plain INFO.
const DEFAULT_OMITS: &[&str] = &["commandstats", "latencystats"];

/// Which sections an INFO call asked for, in Redis's order.
pub fn select_sections(args: &[&[u8]]) -> Vec<&'static str> {
    let want: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).to_lowercase()).collect();
    let everything = want.iter().any(|w| w == "all" || w == "everything");
    let default = args.is_empty() || want.iter().any(|w| w == "default");
    SECTIONS
        .iter()
        .map(|(name, _)| name)
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
    // A load holds every shard until it ends (a replica's full sync): INFO must not wait
    // for it — it is how a client watches the load — and no client waits on a key meanwhile.
    if srv.persistence.loading() {
        return (0, 0);
    }
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        for s in 0..crate::engine::SHARDS {
            locks.with_shard(db, s, |sh| {
                if let Some(b) = &sh.blocked {
                    for q in b.values() {
                        keys += 1;
                        let group_reader = q.iter().any(|w| w.command().eq_ignore_ascii_case(b"xreadgroup"));
                        nokey += group_reader as usize;
                    }
                }
            });
        }
    }
    (keys, nokey)
}

/// What every section is built from: the server, the time INFO began, and the caller's
/// locks (inside EXEC it holds every database, so the keyspace section reads through them
/// instead of locking shards again).
struct Cx<'a, 'l> {
    srv: &'a Server,
    now: i64,
    locks: &'a mut crate::engine::Locks<'l>,
}

/// Writes one section.
type Section = fn(&mut String, &mut Cx);

/// Every section, in the order Redis 7.2 prints them, with the function that writes it.
/// (`debug` only when named, as in Redis: `select_sections`.)
const SECTIONS: &[(&str, Section)] = &[
    ("server", server),
    ("clients", clients),
    ("memory", memory),
    ("persistence", persistence),
    ("stats", stats),
    ("replication", replication),
    ("cpu", cpu),
    ("modules", modules),
    ("commandstats", commandstats),
    ("errorstats", errorstats),
    ("latencystats", latencystats),
    ("cluster", cluster),
    ("keyspace", keyspace),
    ("debug", debug),
];

/// One line of a section.
macro_rules! f {
    ($o:expr, $($a:tt)*) => {{
        let _ = write!($o, $($a)*);
        $o.push_str("\r\n");
    }};
}

/// Builds the INFO text of `sections` (names from `select_sections`).
pub fn generate(srv: &Server, sections: &[&str], locks: &mut crate::engine::Locks) -> String {
    let mut o = String::new();
    let mut cx = Cx { srv, now: srv.now_ms(), locks };
    for (n, sec) in sections.iter().enumerate() {
        if n > 0 {
            o.push_str("\r\n");
        }
        if let Some((_, write)) = SECTIONS.iter().find(|(name, _)| name == sec) {
            write(&mut o, &mut cx);
        }
    }
    o
}

fn server(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let now = cx.now;
    o.push_str("# Server\r\n");
    f!(o, "redis_version:{}", crate::REDIS_VERSION);
    f!(o, "redis_git_sha1:00000000");
    f!(o, "redis_git_dirty:0");
    f!(o, "redis_build_id:0");
    f!(o, "redis_mode:standalone");
    f!(o, "server_name:atoll");
    f!(o, "atoll_version:{}", env!("CARGO_PKG_VERSION"));
    f!(o, "os:{} {}", std::env::consts::OS, std::env::consts::ARCH);
    f!(o, "arch_bits:64");
    f!(o, "monotonic_clock:POSIX clock_gettime");
    f!(o, "multiplexing_api:{}", if srv.io_uring.load(Ordering::Relaxed) { "io_uring" } else { "epoll" });
    f!(o, "atomicvar_api:c11-builtin");
    f!(o, "gcc_version:0.0.0");
    f!(o, "process_id:{}", std::process::id());
    f!(o, "process_supervised:{}", crate::config::supervise::mode_name());
    f!(o, "run_id:{}", srv.run_id);
    f!(o, "tcp_port:{}", srv.tcp_port.load(Ordering::Relaxed));
    f!(o, "server_time_usec:{}", now * 1000);
    let up = srv.started.elapsed().as_secs();
    f!(o, "uptime_in_seconds:{}", up);
    f!(o, "uptime_in_days:{}", up / 86400);
    f!(o, "hz:{}", srv.config.hot.effective_hz.load(Ordering::Relaxed));
    f!(o, "configured_hz:{}", srv.config.hot.hz.load(Ordering::Relaxed));
    f!(o, "lru_clock:{}", (now / 1000) & 0xFF_FFFF);
    f!(o, "executable:{}", srv.executable);
    f!(o, "config_file:{}", srv.config.config_file.clone().unwrap_or_default());
    f!(o, "io_threads_active:0");
    let deadline = srv.shutdown_deadline_ms.load(Ordering::Relaxed);
    if deadline != 0 {
        f!(o, "shutdown_in_milliseconds:{}", (deadline - srv.now_ms()).max(0));
    }
    let mut binds = String::new();
    for b in srv.config.text(crate::config::p::BIND).split_whitespace() {
        binds.push_str(&format!("bind={b},"));
    }
    f!(o, "listener0:name=tcp,{}port={}", binds, srv.tcp_port.load(Ordering::Relaxed));
    f!(o, "threads:{}", srv.threads);
}

fn clients(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let locks = &mut *cx.locks;
    o.push_str("# Clients\r\n");
    // Replicas are not counted, as in Redis.
    f!(o, "connected_clients:{}", srv.clients.len().saturating_sub(srv.repl.connected()));
    f!(o, "cluster_connections:0");
    f!(o, "maxclients:{}", srv.config.hot.maxclients.load(Ordering::Relaxed));
    // The largest unfinished request held now (Redis keeps the largest of the last
    // few seconds; Atoll holds no read buffer between requests).
    let max_qbuf = srv.clients.fold(0, |m, h| m.max(h.qbuf.load(Ordering::Relaxed)));
    f!(o, "client_recent_max_input_buffer:{}", max_qbuf);
    // Likewise the most output a client has not taken yet (CLIENT LIST `omem`).
    let max_obuf = srv.clients.fold(0, |m, h| m.max(h.out_pending.load(Ordering::Relaxed)));
    f!(o, "client_recent_max_output_buffer:{}", max_obuf);
    f!(o, "blocked_clients:{}", srv.blocked_clients.load(Ordering::Relaxed));
    f!(o, "tracking_clients:{}", srv.tracking.figures().0);
    // Blocked clients with a timeout; each wait read outside the registry's lock (a wait's
    // state ranks below it).
    let timed = srv
        .clients
        .snapshot()
        .iter()
        .filter_map(|h| h.waiter.lock().clone())
        .filter(|w| w.timed() && w.waiting())
        .count();
    f!(o, "clients_in_timeout_table:{timed}");
    let (keys, nokey) = blocking_keys(srv, locks);
    f!(o, "total_blocking_keys:{}", keys);
    f!(o, "total_blocking_keys_on_nokey:{}", nokey);
}

fn memory(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let (alloc, active, resident) = allocated_bytes();
    let allocator = crate::services::stats::jemalloc_allocated();
    let rss = rss_bytes();
    let maxmem = srv.config.int(crate::config::p::MAXMEMORY) as u64;
    o.push_str("# Memory\r\n");
    f!(o, "used_memory:{}", alloc);
    f!(o, "used_memory_human:{}", human(alloc));
    f!(o, "used_memory_rss:{}", rss);
    f!(o, "used_memory_rss_human:{}", human(rss));
    // The peak as INFO and MEMORY STATS have seen it; the startup figure is what the
    // server held once up, the dataset the rest (Redis subtracts its overheads too).
    let peak = srv.peak_allocated.fetch_max(alloc, Ordering::Relaxed).max(alloc);
    let startup = srv.startup_allocated.load(Ordering::Relaxed);
    let dataset = alloc.saturating_sub(startup);
    f!(o, "used_memory_peak:{}", peak);
    f!(o, "used_memory_peak_human:{}", human(peak));
    f!(o, "used_memory_peak_perc:{:.2}%", alloc as f64 * 100.0 / peak.max(1) as f64);
    f!(o, "used_memory_overhead:{}", startup);
    f!(o, "used_memory_startup:{}", startup);
    f!(o, "used_memory_dataset:{}", dataset);
    f!(o, "used_memory_dataset_perc:{:.2}%", dataset as f64 * 100.0 / alloc.max(1) as f64);
    f!(o, "allocator_allocated:{}", allocator);
    f!(o, "allocator_active:{}", active);
    f!(o, "allocator_resident:{}", resident);
    let tsm = total_system_memory();
    f!(o, "total_system_memory:{}", tsm);
    f!(o, "total_system_memory_human:{}", human(tsm));
    // One Lua interpreter per worker runs both scripts and functions: their memory
    // is reported as the EVAL engine's.
    let sc = &srv.scripts;
    let lua = sc.vm_memory();
    let eval_bytes = sc.bytes.load(Ordering::Relaxed);
    let (nfuncs, fbytes) = {
        let st = sc.functions.read();
        (st.functions.len(), st.libraries.values().map(|l| l.code.len() as u64 + 64).sum::<u64>())
    };
    f!(o, "used_memory_lua:{}", lua);
    f!(o, "used_memory_vm_eval:{}", lua);
    f!(o, "used_memory_lua_human:{}", human(lua));
    f!(o, "used_memory_scripts_eval:{}", eval_bytes);
    f!(o, "number_of_cached_scripts:{}", sc.len());
    f!(o, "number_of_functions:{}", nfuncs);
    f!(o, "number_of_libraries:{}", sc.functions.read().libraries.len());
    f!(o, "used_memory_vm_functions:0");
    f!(o, "used_memory_vm_total:{}", lua);
    f!(o, "used_memory_vm_total_human:{}", human(lua));
    f!(o, "used_memory_functions:{}", fbytes);
    f!(o, "used_memory_scripts:{}", eval_bytes + fbytes);
    f!(o, "used_memory_scripts_human:{}", human(eval_bytes + fbytes));
    f!(o, "maxmemory:{}", maxmem);
    f!(o, "maxmemory_human:{}", human(maxmem));
    f!(o, "maxmemory_policy:{}", srv.config.text(crate::config::p::MAXMEMORY_POLICY));
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    f!(o, "allocator_frag_ratio:{:.2}", ratio(active, allocator));
    f!(o, "allocator_frag_bytes:{}", active.saturating_sub(allocator));
    f!(o, "allocator_rss_ratio:{:.2}", ratio(resident, active));
    f!(o, "allocator_rss_bytes:{}", resident.saturating_sub(active));
    f!(o, "rss_overhead_ratio:{:.2}", ratio(rss, resident));
    f!(o, "rss_overhead_bytes:{}", rss as i64 - resident as i64);
    f!(o, "mem_fragmentation_ratio:{:.2}", ratio(rss, alloc));
    f!(o, "mem_fragmentation_bytes:{}", rss as i64 - alloc as i64);
    // What the replicas hold, read once for the three fields that show it.
    let bufs = srv.repl.buffers();
    f!(o, "mem_not_counted_for_evict:{}", bufs.replicas + crate::services::clients::in_transit());
    f!(o, "mem_replication_backlog:{}", bufs.backlog);
    f!(o, "mem_total_replication_buffers:{}", bufs.total);
    f!(o, "mem_clients_slaves:{}", bufs.replicas);
    f!(
        o,
        "mem_clients_normal:{}",
        srv.clients.fold(0, |sum, h| if h.replica.load(Ordering::Relaxed) { sum } else { sum + h.memory() })
    );
    f!(o, "mem_cluster_links:{}", srv.cluster.links_mem.load(Ordering::Relaxed));
    f!(o, "mem_aof_buffer:{}", srv.persistence.aof.log().map_or(0, |l| l.buffered().1));
    f!(o, "mem_allocator:jemalloc");
    f!(o, "active_defrag_running:0");
    f!(o, "lazyfree_pending_objects:{}", srv.lazyfree.pending());
    f!(o, "lazyfreed_objects:{}", srv.lazyfree.freed());
}

fn persistence(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let now = cx.now;
    o.push_str("# Persistence\r\n");
    let p = &srv.persistence;
    let loading = p.loading();
    f!(o, "loading:{}", loading as u8);
    f!(o, "async_loading:{}", srv.repl.upstream.async_loading.load(Ordering::Relaxed) as u8);
    if loading {
        let total = p.loading_total_bytes.load(Ordering::Relaxed);
        let done = p.loading.loaded_bytes.load(Ordering::Relaxed);
        let start = p.loading_start_s.load(Ordering::Relaxed);
        let elapsed = (now / 1000 - start).max(0);
        let perc = if total > 0 { done as f64 * 100.0 / total as f64 } else { 0.0 };
        let eta = if done > 0 && total > done { (total - done) as i64 * elapsed.max(1) / done as i64 } else { 1 };
        f!(o, "loading_start_time:{start}");
        f!(o, "loading_total_bytes:{total}");
        f!(o, "loading_rdb_used_mem:0");
        f!(o, "loading_loaded_bytes:{done}");
        f!(o, "loading_loaded_perc:{perc:.2}");
        f!(o, "loading_eta_seconds:{eta}");
    }
    // A fork-less snapshot's "copy-on-write" is what commands serialized ahead of
    // its walk because they were about to change a shard (see rdbfile::Progress).
    // A snapshot for replicas counts as Redis counts its child making one for them.
    let for_replicas = srv.repl.snapshot.lock().clone();
    let running = p.in_progress.load(Ordering::Relaxed) || for_replicas.is_some();
    let pr = match &for_replicas {
        Some((_, pr)) if !p.in_progress.load(Ordering::Relaxed) => &**pr,
        _ => &p.progress,
    };
    let (cow, done, total) = if running {
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        (l(&pr.cow_bytes), l(&pr.keys_processed), l(&pr.keys_total))
    } else {
        (0, 0, 0)
    };
    f!(o, "current_cow_peak:{cow}");
    f!(o, "current_cow_size:{cow}");
    f!(o, "current_cow_size_age:0");
    let perc = if total > 0 { done as f64 * 100.0 / total as f64 } else { 0.0 };
    f!(o, "current_fork_perc:{perc:.2}");
    f!(o, "current_save_keys_processed:{done}");
    f!(o, "current_save_keys_total:{total}");
    f!(o, "rdb_changes_since_last_save:{}", crate::daemons::persistence::changes_since_save(srv));
    f!(o, "rdb_bgsave_in_progress:{}", running as u8);
    f!(o, "rdb_last_save_time:{}", srv.lastsave.load(Ordering::Relaxed));
    f!(o, "rdb_last_bgsave_status:{}", if p.failed() { "err" } else { "ok" });
    f!(o, "rdb_last_bgsave_time_sec:{}", p.last_bgsave_secs.load(Ordering::Relaxed));
    let started = match &for_replicas {
        Some((since, _)) if !p.in_progress.load(Ordering::Relaxed) => *since,
        _ => p.bgsave_started_ms.load(Ordering::Relaxed),
    };
    let current = if running { (now - started) / 1000 } else { -1 };
    f!(o, "rdb_current_bgsave_time_sec:{}", current);
    f!(o, "rdb_saves:{}", p.saves.load(Ordering::Relaxed));
    f!(o, "rdb_last_cow_size:{}", p.last_cow_bytes.load(Ordering::Relaxed));
    f!(o, "rdb_last_load_keys_expired:{}", p.last_load_keys_expired.load(Ordering::Relaxed));
    f!(o, "rdb_last_load_keys_loaded:{}", p.last_load_keys_loaded.load(Ordering::Relaxed));
    let aof = &srv.persistence.aof;
    let log = aof.log();
    f!(o, "aof_enabled:{}", log.is_some() as u8);
    f!(o, "aof_rewrite_in_progress:{}", aof.rewrite_in_progress.load(Ordering::Relaxed) as u8);
    f!(o, "aof_rewrite_scheduled:{}", aof.rewrite_scheduled.load(Ordering::Relaxed) as u8);
    f!(o, "aof_last_rewrite_time_sec:{}", aof.last_rewrite_secs.load(Ordering::Relaxed));
    let started = aof.rewrite_started_ms.load(Ordering::Relaxed);
    f!(o, "aof_current_rewrite_time_sec:{}", if started > 0 { (now - started) / 1000 } else { -1 });
    let rewrite_failed = aof.last_rewrite_failed.load(Ordering::Relaxed);
    f!(o, "aof_last_bgrewrite_status:{}", if rewrite_failed { "err" } else { "ok" });
    f!(o, "aof_rewrites:{}", aof.rewrites.load(Ordering::Relaxed));
    f!(o, "aof_rewrites_consecutive_failures:{}", aof.consecutive_failures.load(Ordering::Relaxed));
    let failed = log.as_ref().is_some_and(|l| l.write_failed.load(Ordering::Relaxed));
    f!(o, "aof_last_write_status:{}", if failed { "err" } else { "ok" });
    f!(o, "aof_last_cow_size:{}", aof.last_cow_bytes.load(Ordering::Relaxed));
    f!(o, "module_fork_in_progress:0");
    f!(o, "module_fork_last_cow_size:0");
    if let Some(l) = &log {
        let base = aof.base_size.load(Ordering::Relaxed);
        f!(o, "aof_current_size:{}", base + l.file_size.load(Ordering::Relaxed));
        f!(o, "aof_base_size:{base}");
        f!(o, "aof_pending_rewrite:0");
        f!(o, "aof_buffer_length:{}", l.buffered().0);
        f!(o, "aof_pending_bio_fsync:0");
        f!(o, "aof_delayed_fsync:0");
    }
}

fn stats(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let st = &srv.stats;
    o.push_str("# Stats\r\n");
    f!(o, "total_connections_received:{}", st.sum(|c| &c.connections));
    f!(o, "total_commands_processed:{}", st.sum(|c| &c.commands));
    f!(o, "instantaneous_ops_per_sec:{}", srv.instantaneous_ops());
    f!(o, "total_net_input_bytes:{}", st.net_input());
    f!(o, "total_net_output_bytes:{}", st.net_output());
    f!(o, "total_net_repl_input_bytes:{}", st.sum(|c| &c.net_repl_input_bytes));
    f!(o, "total_net_repl_output_bytes:{}", st.sum(|c| &c.net_repl_output_bytes));
    let (kin, kout) = srv.instantaneous_kbps();
    f!(o, "instantaneous_input_kbps:{kin:.2}");
    f!(o, "instantaneous_output_kbps:{kout:.2}");
    let (rin, rout) = srv.instantaneous_repl_kbps();
    f!(o, "instantaneous_input_repl_kbps:{rin:.2}");
    f!(o, "instantaneous_output_repl_kbps:{rout:.2}");
    f!(o, "rejected_connections:{}", st.sum(|c| &c.rejected_connections));
    f!(o, "sync_full:{}", srv.repl.sync_full.load(Ordering::Relaxed));
    f!(o, "sync_partial_ok:{}", srv.repl.sync_partial_ok.load(Ordering::Relaxed));
    f!(o, "sync_partial_err:{}", srv.repl.sync_partial_err.load(Ordering::Relaxed));
    f!(o, "expired_keys:{}", st.sum(|c| &c.expired_keys));
    f!(o, "expired_fields:{}", st.sum(|c| &c.expired_fields));
    f!(o, "expired_stale_perc:{:.2}", srv.stats.expired_stale_perc());
    f!(o, "expired_time_cap_reached_count:{}", st.sum(|c| &c.expire_cycle_capped));
    f!(o, "expire_cycle_cpu_milliseconds:{}", st.sum(|c| &c.expire_cycle_cpu_ms));
    f!(o, "evicted_keys:{}", srv.evict.evicted_keys.load(Ordering::Relaxed));
    f!(o, "evicted_clients:{}", srv.evict.evicted_clients.load(Ordering::Relaxed));
    let (cur, total) = srv.evict.exceeded_ms(srv.now_ms());
    f!(o, "total_eviction_exceeded_time:{}", total);
    f!(o, "current_eviction_exceeded_time:{}", cur);
    f!(o, "keyspace_hits:{}", st.sum(|c| &c.keyspace_hits));
    f!(o, "keyspace_misses:{}", st.sum(|c| &c.keyspace_misses));
    {
        use crate::services::pubsub::Kind;
        f!(o, "pubsub_channels:{}", srv.pubsub.len(Kind::Channel));
        f!(o, "pubsub_patterns:{}", srv.pubsub.len(Kind::Pattern));
        f!(o, "pubsubshard_channels:{}", srv.pubsub.len(Kind::Shard));
    }
    // Background children (BGSAVE's and the AOF rewrite's writers), spawned rather than forked.
    f!(o, "latest_fork_usec:{}", srv.persistence.last_spawn_us.load(Ordering::Relaxed));
    f!(o, "total_forks:{}", srv.persistence.children_started.load(Ordering::Relaxed));
    f!(o, "migrate_cached_sockets:{}", srv.migrate_sockets.len());
    f!(o, "slave_expires_tracked_keys:{}", srv.ks.replica_ttls.lock().len());
    f!(o, "active_defrag_hits:0");
    f!(o, "active_defrag_misses:0");
    f!(o, "active_defrag_key_hits:0");
    f!(o, "active_defrag_key_misses:0");
    f!(o, "total_active_defrag_time:0");
    f!(o, "current_active_defrag_time:0");
    let (_, keys, items, prefixes) = srv.tracking.figures();
    f!(o, "tracking_total_keys:{keys}");
    f!(o, "tracking_total_items:{items}");
    f!(o, "tracking_total_prefixes:{prefixes}");
    f!(o, "unexpected_error_replies:{}", st.sum(|c| &c.unexpected_error_replies));
    f!(o, "total_error_replies:{}", st.sum(|c| &c.error_replies));
    f!(o, "dump_payload_sanitizations:0");
    f!(o, "total_reads_processed:{}", st.sum(|c| &c.reads_processed));
    f!(o, "total_writes_processed:{}", st.sum(|c| &c.writes_processed));
    f!(o, "io_threaded_reads_processed:0");
    f!(o, "io_threaded_writes_processed:0");
    f!(o, "reply_buffer_shrinks:0");
    f!(o, "reply_buffer_expands:0");
    // Worker rounds (all workers): how many, their busy time, and the part spent
    // running commands.
    let cmd_us: u64 = srv.table.all.iter().map(|c| st.cmd_sum(c.id, |s| &s.usec)).sum();
    f!(o, "eventloop_cycles:{}", st.sum(|c| &c.eventloop_cycles));
    f!(o, "eventloop_duration_sum:{}", st.sum(|c| &c.eventloop_us));
    f!(o, "eventloop_duration_cmd_sum:{}", cmd_us);
    let (per_sec, per_cycle) = srv.instantaneous_eventloop();
    f!(o, "instantaneous_eventloop_cycles_per_sec:{}", per_sec);
    f!(o, "instantaneous_eventloop_duration_usec:{}", per_cycle);
    f!(o, "acl_access_denied_auth:{}", srv.acl.denied[0].load(Ordering::Relaxed));
    f!(o, "acl_access_denied_cmd:{}", srv.acl.denied[1].load(Ordering::Relaxed));
    f!(o, "acl_access_denied_key:{}", srv.acl.denied[2].load(Ordering::Relaxed));
    f!(o, "acl_access_denied_channel:{}", srv.acl.denied[3].load(Ordering::Relaxed));
    // Atoll's own (io_uring backend): waits that held the wake-up for more requests.
    f!(o, "io_batched_waits:{}", st.sum(|c| &c.batched_waits));
    // Atoll's own: workers stuck in one round now, and stalls reported since start
    // (`daemons::watchdog`).
    f!(o, "stalled_workers:{}", srv.watchdog.stalled());
    f!(o, "watchdog_reports:{}", srv.watchdog.reports.load(Ordering::Relaxed));
}

fn replication(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    o.push_str("# Replication\r\n");
    let up = &srv.repl.upstream;
    let master = up.master.lock().clone();
    let now = srv.now_ms();
    if let Some((host, port)) = &master {
        use crate::daemons::replica_link::CONNECTED;
        let state = up.state.load(Ordering::Relaxed);
        f!(o, "role:slave");
        f!(o, "master_host:{host}");
        f!(o, "master_port:{port}");
        f!(o, "master_link_status:{}", if state == CONNECTED { "up" } else { "down" });
        let io = up.last_io_ms.load(Ordering::Relaxed);
        f!(o, "master_last_io_seconds_ago:{}", if io == 0 { -1 } else { (now - io) / 1000 });
        f!(o, "master_sync_in_progress:{}", (state == crate::daemons::replica_link::SYNC) as u8);
        f!(o, "slave_read_repl_offset:{}", up.read_offset.load(Ordering::Relaxed));
        f!(o, "slave_repl_offset:{}", up.offset.load(Ordering::Relaxed));
        if state != CONNECTED {
            let since = up.down_since_ms.load(Ordering::Relaxed);
            f!(o, "master_link_down_since_seconds:{}", if since == 0 { -1 } else { (now - since) / 1000 });
        }
        f!(o, "slave_priority:{}", srv.config.text(crate::config::p::REPLICA_PRIORITY));
        f!(o, "slave_read_only:{}", srv.config.flag(crate::config::p::REPLICA_READ_ONLY) as u8);
        f!(o, "replica_announced:{}", srv.config.flag(crate::config::p::REPLICA_ANNOUNCED) as u8);
    } else {
        f!(o, "role:master");
    }
    let replicas = srv.repl.all_replicas();
    f!(o, "connected_slaves:{}", replicas.len());
    for (i, r) in replicas.iter().enumerate() {
        let state = match r.link() {
            crate::daemons::replication::Link::WaitBgsave => "wait_bgsave",
            crate::daemons::replication::Link::SendBulk => "send_bulk",
            crate::daemons::replication::Link::Online => "online",
        };
        f!(
            o,
            "slave{i}:ip={},port={},state={state},offset={},lag={}",
            r.ip,
            r.port,
            r.ack_offset.load(Ordering::Relaxed),
            (now - r.ack_ms.load(Ordering::Relaxed)).max(0) / 1000
        );
    }
    f!(o, "master_failover_state:{}", srv.repl.failover.lock().state.name());
    f!(o, "master_replid:{}", srv.replid.lock());
    let (id2, second) =
        srv.repl.replid2.lock().clone().unwrap_or_else(|| ("0000000000000000000000000000000000000000".into(), -1));
    f!(o, "master_replid2:{id2}");
    let offset = if master.is_some() { up.offset.load(Ordering::Relaxed) } else { srv.repl.offset() };
    f!(o, "master_repl_offset:{offset}");
    f!(o, "second_repl_offset:{second}");
    let (active, size, first, histlen) = srv.repl.backlog_info(crate::daemons::replication::backlog_size(srv));
    f!(o, "repl_backlog_active:{}", active as u8);
    f!(o, "repl_backlog_size:{size}");
    f!(o, "repl_backlog_first_byte_offset:{first}");
    f!(o, "repl_backlog_histlen:{histlen}");
}

fn cpu(o: &mut String, _: &mut Cx) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    o.push_str("# CPU\r\n");
    f!(o, "used_cpu_sys:{}", sys);
    f!(o, "used_cpu_user:{}", user);
    f!(o, "used_cpu_sys_children:{}", csys);
    f!(o, "used_cpu_user_children:{}", cuser);
    f!(o, "used_cpu_sys_main_thread:{}", sys);
    f!(o, "used_cpu_user_main_thread:{}", user);
}

fn modules(o: &mut String, _: &mut Cx) {
    o.push_str("# Modules\r\n");
}

fn errorstats(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let st = &srv.stats;
    o.push_str("# Errorstats\r\n");
    for (code, n) in st.errors() {
        f!(o, "errorstat_{}:count={}", code, n);
    }
}

fn cluster(o: &mut String, cx: &mut Cx) {
    o.push_str("# Cluster\r\n");
    f!(o, "cluster_enabled:{}", u8::from(cx.srv.cluster.enabled));
}

fn keyspace(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let locks = &mut *cx.locks;
    o.push_str("# Keyspace\r\n");
    // While a load holds the shards, the dataset is not there yet to count (see
    // `blocking_keys`): the section is empty until it ends.
    if srv.persistence.loading() {
        return;
    }
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        let (keys, expires) = locks.db_stats(db);
        if keys > 0 {
            f!(o, "db{}:keys={},expires={},avg_ttl=0", db, keys, expires);
        }
    }
}

fn debug(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let st = &srv.stats;
    // Redis's: its AOF flush and cron time, its longest event-loop iteration and
    // the most commands one ran; here summed over (maxima: across) the workers.
    o.push_str("# Debug\r\n");
    f!(o, "eventloop_duration_aof_sum:{}", st.sum(|c| &c.eventloop_aof_ns) / 1000);
    f!(o, "eventloop_duration_cron_sum:{}", st.sum(|c| &c.eventloop_cron_ns) / 1000);
    f!(o, "eventloop_duration_max:{}", st.max(|c| &c.eventloop_max_us));
    f!(o, "eventloop_cmd_per_cycle_max:{}", st.max(|c| &c.eventloop_max_cmds));
}

fn commandstats(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    let st = &srv.stats;
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
            o,
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

fn latencystats(o: &mut String, cx: &mut Cx) {
    let srv = cx.srv;
    o.push_str("# Latencystats\r\n");
    if srv.config.hot.latency_tracking.load(std::sync::atomic::Ordering::Relaxed) {
        let pcts: Vec<f64> = srv
            .config
            .text(crate::config::p::LATENCY_TRACKING_INFO_PERCENTILES)
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
            f!(o, "latency_percentiles_usec_{}:{}", c.name, parts.join(","));
        }
    }
}
