//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
//!
//! MEMORY USAGE answers what Redis 7.2 (with jemalloc, its Linux default) would use for the
//! same key and value — Redis's `objectComputeSize` over its own structures (robj, sds,
//! dictEntry, listpack, quicklist node …) rounded to jemalloc's size classes — so tools that
//! size a migration or compare instances read the figure they know. Atoll's own layout is
//! smaller (docs/BENCHMARKS.md: about half per string key); INFO memory reports what Atoll
//! actually holds.

use super::info::{allocated_bytes, rss_bytes};
use crate::engine::list::lp_entry_size;
use crate::engine::stream::{rax_nodes, Stream, StreamId};
use crate::engine::Value;
use crate::exec::*;
use std::sync::atomic::Ordering;

/// jemalloc 5's usable size for a request of `n` bytes (x86-64 size classes: 8, 16, then
/// steps of 16 to 128, then four classes per doubling).
fn je(n: usize) -> usize {
    match n {
        0..=8 => 8,
        9..=128 => (n + 15) & !15,
        _ => {
            let k = usize::BITS - 1 - (n - 1).leading_zeros(); // 2^k < n <= 2^(k+1)
            let step = 1usize << (k - 2);
            n.div_ceil(step) * step
        }
    }
}

/// An sds string's allocation: header by length class, the bytes, the terminator.
fn sds(len: usize) -> usize {
    let hdr = match len {
        0 => 3,
        1..=31 => 1,
        32..=255 => 3,
        256..=65535 => 5,
        _ if len < 1 << 32 => 9,
        _ => 17,
    };
    je(hdr + len + 1)
}

// Redis's structure sizes on x86-64.
const ROBJ: usize = 16;
const DICT_ENTRY: usize = 24;
const DICT: usize = 56;
const QUICKLIST: usize = 40;
const QUICKLIST_NODE: usize = 40;
/// Listpack header (6) and end byte.
const LP: usize = 7;

/// A hash table's slots for `n` elements: Redis grows to the next power of two.
fn slots(n: usize) -> usize {
    n.max(4).next_power_of_two()
}

/// The mean over the first `samples` items (all for 0), times the count: Redis's estimate.
fn sampled(sizes: impl Iterator<Item = usize>, samples: usize, count: usize) -> usize {
    let (mut sum, mut n) = (0usize, 0usize);
    for s in sizes.take(if samples == 0 { usize::MAX } else { samples }) {
        sum += s;
        n += 1;
    }
    if n == 0 {
        0
    } else {
        (sum as f64 / n as f64 * count as f64) as usize
    }
}

/// Expected allocation of a skiplist node's level array: levels are random (p = 1/4), so
/// Redis's own figure varies between runs; this is its mean.
fn skiplist_node_mean() -> usize {
    let mut mean = 0.0;
    let mut p = 0.75;
    for level in 1..=32 {
        mean += p * je(24 + 16 * level) as f64;
        p /= 4.0;
    }
    mean as usize
}

/// Redis's `streamRadixTreeMemoryUsage`: its per-element and per-node estimate of a radix tree
/// (IDs, node headers, and a fixed 30 words per node for children and data pointers).
fn rax_estimate(elements: usize, nodes: usize) -> usize {
    elements * 16 + nodes * (4 + 8 * 30)
}

/// A PEL's radix tree: its IDs and Redis's node count for them.
fn pel_size<'a>(ids: impl Iterator<Item = &'a StreamId>) -> usize {
    let keys: Vec<[u8; 16]> = ids.map(|id| id.key_bytes()).collect();
    rax_estimate(keys.len(), rax_nodes(&keys))
}

/// Redis's `objectComputeSize` for a stream: the stream and its radix tree, the node listpacks
/// (the first `samples` averaged for all but the last, the last counted as it is), then each
/// group with its PEL and consumers.
fn stream_size(s: &Stream, samples: usize, node_max_entries: usize) -> usize {
    // A listpack is created with 4096 bytes reserved and grows past that by reallocation; a
    // node closed for reaching `stream-node-max-entries` is shrunk to fit (Redis 7.2), one
    // closed by `stream-node-max-bytes` keeps its reservation, as does the last node.
    let n = s.node_count();
    let alloc = |i: usize, (bytes, entries): (usize, usize)| {
        if i + 1 < n && node_max_entries > 0 && entries >= node_max_entries {
            je(bytes)
        } else {
            je(bytes.max(4096))
        }
    };
    let want = if samples == 0 { usize::MAX } else { samples };
    let (mut lp, mut taken) = (0, 0);
    for (i, node) in s.node_sizes().enumerate().take(want) {
        lp += alloc(i, node);
        taken += 1;
    }
    let mut size = ROBJ + 80 + rax_estimate(n, s.rax_node_count());
    if n <= taken {
        size += lp;
    } else {
        size += lp / taken.max(1) * (n - 1);
        size += s.node_sizes().next_back().map_or(0, |node| alloc(n - 1, node));
    }
    for g in s.groups.values() {
        size += 40 + pel_size(g.pel.keys()) + 24 * g.pel.len();
        for (name, c) in &g.consumers {
            size += 32 + name.len() + pel_size(c.pel.iter());
        }
    }
    size
}

/// Redis's `objectComputeSize` for a value.
fn value_size(v: &Value, samples: usize, fill: i64, node_max_entries: usize) -> usize {
    let mut buf = itoa::Buffer::new();
    match v {
        Value::Int(_) => ROBJ,
        Value::List(l) if l.encoding() == "listpack" => ROBJ + je(l.quicklist_nodes(fill).1.max(LP)),
        Value::List(l) => {
            let nodes = l.quicklist_node_bytes(fill);
            ROBJ + QUICKLIST + sampled(nodes.iter().map(|b| QUICKLIST_NODE + je(*b)), samples, nodes.len())
        }
        Value::Set(s) => match s.encoding() {
            "intset" => ROBJ + je(s.intset_bytes().unwrap_or(8)),
            "listpack" => {
                let mut n = LP;
                s.for_each(|m| n += lp_entry_size(m));
                ROBJ + je(n)
            }
            _ => {
                let mut sizes = Vec::new();
                s.for_each(|m| sizes.push(DICT_ENTRY + sds(m.len())));
                ROBJ + DICT + 8 * slots(s.len()) + sampled(sizes.into_iter(), samples, s.len())
            }
        },
        Value::Hash(h) if h.encoding() == "listpack" => {
            let mut n = LP;
            h.for_each(|f, val| n += lp_entry_size(f) + lp_entry_size(val));
            ROBJ + je(n)
        }
        Value::Hash(h) => {
            let mut sizes = Vec::new();
            h.for_each(|f, val| sizes.push(sds(f.len()) + sds(val.len()) + DICT_ENTRY));
            ROBJ + DICT + 8 * slots(h.len()) + sampled(sizes.into_iter(), samples, h.len())
        }
        Value::ZSet(z) if z.encoding() == "listpack" => {
            let mut n = LP;
            z.for_each(|m, s| {
                let mut b = Vec::new();
                crate::protocol::reply::fmt_double(s, &mut b);
                n += lp_entry_size(m) + lp_entry_size(&b);
            });
            ROBJ + je(n)
        }
        Value::ZSet(z) => {
            let node = skiplist_node_mean();
            let mut sizes = Vec::new();
            z.for_each(|m, _| sizes.push(sds(m.len()) + DICT_ENTRY + node));
            ROBJ + 16 + 32 + DICT + 8 * slots(z.len()) + je(24 + 16 * 32) + sampled(sizes.into_iter(), samples, z.len())
        }
        Value::Stream(s) => stream_size(s, samples, node_max_entries),
        _ => {
            let len = v.str_len().unwrap_or(0);
            if len <= crate::engine::value::EMBSTR_MAX && !matches!(v, Value::Raw(_)) {
                je(ROBJ + 3 + len + 1)
            } else {
                let cap = match v {
                    Value::Raw(r) => r.capacity(),
                    _ => v.as_bytes(&mut buf).map_or(0, |b| b.len()),
                };
                ROBJ + sds(cap)
            }
        }
    }
}

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
    let fill = ctx.srv.config.hot.list_max_listpack_size.load(Ordering::Relaxed);
    let node_max_entries = ctx.srv.config.int(crate::config::p::STREAM_NODE_MAX_ENTRIES).max(0) as usize;
    // Redis reads the dictionary directly: no expiry, no access-time update.
    let size = ctx.ks.shard(key).keys.get(key).map(|v| value_size(&v, samples, fill, node_max_entries));
    match size {
        Some(s) => ctx.reply.int((s + sds(key.len()) + DICT_ENTRY) as i64),
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
    let clients = srv.clients.len() as u64 * 1600;
    let mut dbs = Vec::new();
    let mut keys_total = 0u64;
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        let (keys, expires) = ctx.ks.locks.db_stats(db);
        if keys > 0 {
            keys_total += keys as u64;
            let main = (slots(keys) * 8 + keys * (DICT_ENTRY + ROBJ)) as u64;
            let exp = if expires > 0 { (slots(expires) * 8 + expires * DICT_ENTRY) as u64 } else { 0 };
            dbs.push((db, main, exp));
        }
    }
    let overhead = startup + clients + dbs.iter().map(|d| d.1 + d.2).sum::<u64>();
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
    int(r, "replication.backlog", 0);
    int(r, "clients.slaves", 0);
    int(r, "clients.normal", clients);
    int(r, "cluster.links", 0);
    int(r, "aof.buffer", 0);
    int(r, "lua.caches", 0);
    int(r, "functions.caches", 0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_classes() {
        assert_eq!(je(5), 8);
        assert_eq!(je(23), 32);
        assert_eq!(je(104), 112);
        assert_eq!(je(129), 160);
        assert_eq!(je(8178), 8192);
        assert_eq!(je(4726), 5120);
    }

    /// Figures of Redis with jemalloc for the same values (object_memory's worked examples).
    #[test]
    fn usage_matches_redis_model() {
        let key = |k: &str| sds(k.len()) + DICT_ENTRY;
        assert_eq!(value_size(&Value::from_bytes(b"bar"), 5, -2, 100) + key("foo"), 64);
        assert_eq!(value_size(&Value::from_bytes(&[b'x'; 100]), 5, -2, 100) + key("str100"), 160);
        assert_eq!(value_size(&Value::from_bytes(b"12345678"), 5, -2, 100) + key("int"), 48);
    }
}
