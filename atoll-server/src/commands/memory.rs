//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
//!
//! MEMORY USAGE measures what the key occupies in Atoll's heap (`engine::footprint`): its node
//! (header, key bytes, and the value when it lives inside), what the value allocates, and its
//! entry in the expiry table if it has a deadline — each allocation at the allocator's size
//! class, as INFO `used_memory` counts it; with SAMPLES as Redis (the per-element allocations
//! of the first `count` elements, 0 for all, averaged and multiplied out). Atoll's layout is
//! not Redis's: a figure here is Atoll's own (docs/BENCHMARKS.md compares the two).

use super::info::{allocated_bytes, rss_bytes};
use crate::engine::dict::Dict;
use crate::exec::*;
use std::sync::atomic::Ordering;

// MEMORY USAGE key [SAMPLES count]
pub fn memory_usage(ctx: &mut Ctx) -> CmdResult {
    let mut samples = 5usize;
    let mut i = 3;
    while i < ctx.args.len() {
        if eq_ic(ctx.args[i], "samples") && i + 1 < ctx.args.len() {
            let n = parse_int(ctx.args[i + 1])?;
            if n < 0 {
                return Err(CmdError::Syntax);
            }
            samples = n as usize;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = ctx.args[2];
    // Read in place, as Redis reads its dictionary: no expiry, no access-time update.
    let shard = ctx.ks.shard(key);
    let size = shard.keys.get(key).map(|v| {
        let ttl = if shard.expires.contains_key(key) { Dict::<i64>::entry_bytes(key) } else { 0 };
        v.node_bytes() + v.footprint(samples) + ttl
    });
    match size {
        Some(s) => ctx.reply.int(s as i64),
        None => ctx.reply.null(),
    }
    Ok(())
}

// MEMORY STATS
pub fn memory_stats(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    let (alloc, active, resident) = allocated_bytes();
    let rss = rss_bytes();
    let peak = srv.peak_allocated.fetch_max(alloc, Ordering::Relaxed).max(alloc);
    let startup = srv.startup_allocated.load(Ordering::Relaxed);
    // Measured as INFO's memory section measures them.
    let clients = srv.clients.fold(0, |sum, h| if h.replica.load(Ordering::Relaxed) { sum } else { sum + h.memory() });
    let bufs = srv.repl.buffers();
    let (replicas, backlog) = (bufs.replicas, bufs.backlog);
    let aof_buffer = srv.persistence.aof.log().map_or(0, |l| l.buffered().1);
    let eval_caches = srv.scripts.bytes.load(Ordering::Relaxed);
    let function_caches = {
        let st = srv.scripts.functions.read();
        st.libraries.values().map(|l| l.code.len() as u64 + 64).sum::<u64>()
    };
    let mut dbs = Vec::new();
    let mut keys_total = 0u64;
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        let (keys, main, exp) = ctx.ks.locks.db_overhead(db);
        if keys > 0 {
            keys_total += keys as u64;
            dbs.push((db, main as u64, exp as u64));
        }
    }
    let links = srv.cluster.links_mem.load(std::sync::atomic::Ordering::Relaxed);
    let overhead = startup
        + links
        + clients
        + replicas
        + backlog
        + aof_buffer
        + eval_caches
        + function_caches
        + dbs.iter().map(|d| d.1 + d.2).sum::<u64>();
    let dataset = alloc.saturating_sub(overhead);
    let net = alloc.saturating_sub(startup);
    let r = &mut *ctx.reply;
    r.map(27 + dbs.len());
    let int = |r: &mut crate::protocol::Reply, k: &str, v: u64| {
        r.bulk(k.as_bytes());
        r.int(v as i64);
    };
    int(r, "peak.allocated", peak);
    int(r, "total.allocated", alloc);
    int(r, "startup.allocated", startup);
    int(r, "replication.backlog", backlog);
    int(r, "clients.slaves", replicas);
    int(r, "clients.normal", clients);
    int(r, "cluster.links", links);
    int(r, "aof.buffer", aof_buffer);
    int(r, "lua.caches", eval_caches);
    int(r, "functions.caches", function_caches);
    for (db, main, exp) in &dbs {
        r.bulk(format!("db.{db}").as_bytes());
        r.map(3);
        int(r, "overhead.hashtable.main", *main);
        int(r, "overhead.hashtable.expires", *exp);
        int(r, "overhead.hashtable.slot-to-keys", 0);
    }
    int(r, "overhead.total", overhead);
    int(r, "keys.count", keys_total);
    int(r, "keys.bytes-per-key", net.checked_div(keys_total).unwrap_or(0));
    int(r, "dataset.bytes", dataset);
    // Redis computes these ratios in C floats.
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { (a as f32 / b as f32) as f64 };
    let dbl = |r: &mut crate::protocol::Reply, k: &str, v: f64| {
        r.bulk(k.as_bytes());
        r.double(v);
    };
    dbl(r, "dataset.percentage", ratio(dataset * 100, net));
    dbl(r, "peak.percentage", ratio(alloc * 100, peak));
    int(r, "allocator.allocated", alloc);
    int(r, "allocator.active", active);
    int(r, "allocator.resident", resident);
    dbl(r, "allocator-fragmentation.ratio", ratio(active, alloc));
    int(r, "allocator-fragmentation.bytes", active.saturating_sub(alloc));
    dbl(r, "allocator-rss.ratio", ratio(resident, active));
    int(r, "allocator-rss.bytes", resident.saturating_sub(active));
    dbl(r, "rss-overhead.ratio", ratio(rss, resident));
    int(r, "rss-overhead.bytes", rss.saturating_sub(resident));
    dbl(r, "fragmentation", ratio(rss, alloc));
    int(r, "fragmentation.bytes", rss.saturating_sub(alloc));
    Ok(())
}

// MEMORY DOCTOR
pub fn memory_doctor(ctx: &mut Ctx) -> CmdResult {
    let (alloc, _, _) = allocated_bytes();
    let rss = rss_bytes();
    let peak = ctx.srv.peak_allocated.fetch_max(alloc, Ordering::Relaxed).max(alloc);
    // Redis calls an instance with under 5 MB allocated empty. Atoll's own start-up
    // allocations (per-worker I/O buffers, the command table) are larger than Redis's, so it
    // counts what was allocated since start-up.
    let startup = ctx.srv.startup_allocated.load(Ordering::Relaxed);
    let text = if alloc.saturating_sub(startup) < 5 << 20 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string()
    } else {
        let mut issues = String::new();
        if peak as f64 / alloc as f64 > 1.5 {
            issues.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
        }
        if rss as f64 / alloc as f64 > 1.4 && rss - alloc > 10 << 20 {
            issues.push_str(&format!(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"jemalloc-{}\".\n\n", tikv_jemalloc_ctl::version::read().unwrap_or("5")));
        }
        if issues.is_empty() {
            "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n"
                .into()
        } else {
            format!("Sam, I detected a few issues in this Redis instance memory implants:\n\n{issues}I'm here to keep you safe, Sam. I want to help you.\n")
        }
    };
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

// MEMORY MALLOC-STATS
pub fn memory_malloc_stats(ctx: &mut Ctx) -> CmdResult {
    unsafe extern "C" fn write(out: *mut std::ffi::c_void, s: *const std::ffi::c_char) {
        // SAFETY: `out` is the Vec passed below, alive for the whole call; jemalloc passes a
        // NUL-terminated string.
        let out = unsafe { &mut *(out as *mut Vec<u8>) };
        out.extend_from_slice(unsafe { std::ffi::CStr::from_ptr(s) }.to_bytes());
    }
    let mut text: Vec<u8> = Vec::new();
    // SAFETY: jemalloc calls `write` synchronously with the opaque pointer we give it.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(Some(write), &mut text as *mut Vec<u8> as *mut _, std::ptr::null());
    }
    ctx.reply.verbatim("txt", &text);
    Ok(())
}

// MEMORY PURGE
pub fn memory_purge(ctx: &mut Ctx) -> CmdResult {
    // Redis's `jemalloc_purge`: every arena's dirty pages back to the OS (MALLCTL_ARENAS_ALL).
    let name = b"arena.4096.purge\0";
    // SAFETY: a mallctl that takes and returns nothing.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr() as *const _,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(CmdError::msg("ERR Error purging dirty pages"));
    }
    ctx.reply.ok();
    Ok(())
}

// MEMORY HELP
pub fn memory_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("memory".into()));
    }
    help_reply(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}
