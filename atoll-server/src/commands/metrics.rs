//! What the metrics listener serves (`server::http`): Prometheus text at `/metrics`, with
//! redis_exporter's metric names where one exists, and the JSON the dashboard polls at
//! `/api/stats`. Both are read from the same counters as INFO, never from a second set.

use super::info::{allocated_bytes, rss_bytes};
use super::latency::merged_histogram;
use crate::exec::Server;
use crate::services::hotkeys;
use serde_json::json;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// One command's counters summed over the workers.
struct CmdTotals {
    name: String,
    calls: u64,
    usec: u64,
    failed: u64,
    rejected: u64,
}

fn command_totals(srv: &Server) -> Vec<CmdTotals> {
    let st = &srv.stats;
    let mut out: Vec<CmdTotals> = srv
        .table
        .all
        .iter()
        .map(|c| CmdTotals {
            name: c.name.clone(),
            calls: st.cmd_sum(c.id, |s| &s.calls),
            usec: st.cmd_sum(c.id, |s| &s.usec),
            failed: st.cmd_sum(c.id, |s| &s.failed_calls),
            rejected: st.cmd_sum(c.id, |s| &s.rejected_calls),
        })
        .filter(|c| c.calls + c.failed + c.rejected > 0)
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
    out
}

/// A label value with Prometheus's escapes.
fn label(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The Prometheus text exposition (format 0.0.4).
pub fn prometheus(srv: &Server) -> String {
    let mut o = String::new();
    let st = &srv.stats;
    macro_rules! metric {
        ($name:expr, $kind:expr, $help:expr, $($line:tt)*) => {{
            let _ = writeln!(o, "# HELP {} {}", $name, $help);
            let _ = writeln!(o, "# TYPE {} {}", $name, $kind);
            $($line)*
        }};
    }
    let simple = |o: &mut String, name: &str, kind: &str, help: &str, v: f64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    };
    let (alloc, _, _) = allocated_bytes();
    simple(&mut o, "redis_up", "gauge", "Information about the Redis instance", 1.0);
    simple(
        &mut o,
        "redis_uptime_in_seconds",
        "gauge",
        "uptime_in_seconds metric",
        srv.started.elapsed().as_secs() as f64,
    );
    simple(&mut o, "redis_connected_clients", "gauge", "connected_clients metric", srv.clients.len() as f64);
    simple(
        &mut o,
        "redis_blocked_clients",
        "gauge",
        "blocked_clients metric",
        srv.blocked_clients.load(Ordering::Relaxed) as f64,
    );
    simple(
        &mut o,
        "redis_config_maxclients",
        "gauge",
        "config_maxclients metric",
        srv.config.hot.maxclients.load(Ordering::Relaxed) as f64,
    );
    simple(&mut o, "redis_memory_used_bytes", "gauge", "memory_used_bytes metric", alloc as f64);
    simple(&mut o, "redis_memory_used_rss_bytes", "gauge", "memory_used_rss_bytes metric", rss_bytes() as f64);
    for (name, help, v) in [
        ("redis_commands_processed_total", "commands_processed_total metric", st.sum(|c| &c.commands)),
        ("redis_connections_received_total", "connections_received_total metric", st.sum(|c| &c.connections)),
        ("redis_rejected_connections_total", "rejected_connections_total metric", st.sum(|c| &c.rejected_connections)),
        ("redis_net_input_bytes_total", "net_input_bytes_total metric", st.net_input()),
        ("redis_net_output_bytes_total", "net_output_bytes_total metric", st.net_output()),
        ("redis_keyspace_hits_total", "keyspace_hits_total metric", st.sum(|c| &c.keyspace_hits)),
        ("redis_keyspace_misses_total", "keyspace_misses_total metric", st.sum(|c| &c.keyspace_misses)),
        ("redis_expired_keys_total", "expired_keys_total metric", st.sum(|c| &c.expired_keys)),
        ("redis_evicted_keys_total", "evicted_keys_total metric", 0),
        ("redis_total_error_replies", "total_error_replies metric", st.sum(|c| &c.error_replies)),
    ] {
        simple(&mut o, name, "counter", help, v as f64);
    }
    simple(&mut o, "redis_slowlog_length", "gauge", "Total slowlog", srv.commandlog.slow.len() as f64);
    metric!("redis_db_keys", "gauge", "Total number of keys by DB", {
        for db in 0..srv.ks.num_dbs() {
            if srv.ks.db_if_exists(db).is_some() {
                let (keys, _) = srv.ks.db_stats(db);
                let _ = writeln!(o, "redis_db_keys{{db=\"db{db}\"}} {keys}");
            }
        }
    });
    metric!("redis_db_keys_expiring", "gauge", "Total number of expiring keys by DB", {
        for db in 0..srv.ks.num_dbs() {
            if srv.ks.db_if_exists(db).is_some() {
                let (_, expiring) = srv.ks.db_stats(db);
                let _ = writeln!(o, "redis_db_keys_expiring{{db=\"db{db}\"}} {expiring}");
            }
        }
    });
    let cmds = command_totals(srv);
    metric!("redis_commands_total", "counter", "Total number of calls per command", {
        for c in &cmds {
            let _ = writeln!(o, "redis_commands_total{{cmd=\"{}\"}} {}", c.name, c.calls);
        }
    });
    metric!("redis_commands_duration_seconds_total", "counter", "Total amount of time in seconds spent per command", {
        for c in &cmds {
            let _ = writeln!(o, "redis_commands_duration_seconds_total{{cmd=\"{}\"}} {}", c.name, c.usec as f64 / 1e6);
        }
    });
    metric!(
        "redis_commands_failed_calls_total",
        "counter",
        "Total number of errors within command execution per command",
        {
            for c in &cmds {
                let _ = writeln!(o, "redis_commands_failed_calls_total{{cmd=\"{}\"}} {}", c.name, c.failed);
            }
        }
    );
    metric!(
        "redis_commands_rejected_calls_total",
        "counter",
        "Total number of errors prior command execution per command",
        {
            for c in &cmds {
                let _ = writeln!(o, "redis_commands_rejected_calls_total{{cmd=\"{}\"}} {}", c.name, c.rejected);
            }
        }
    );
    metric!("redis_errors_total", "counter", "Total number of errors per error type", {
        for (code, n) in srv.stats.errors() {
            let _ = writeln!(o, "redis_errors_total{{err=\"{}\"}} {n}", label(code.as_bytes()));
        }
    });
    // Per-command latency as a Prometheus histogram: the buckets LATENCY HISTOGRAM reports.
    metric!("atoll_command_duration_seconds", "histogram", "Command execution time (latency-tracking)", {
        for c in srv.table.all.iter() {
            let Some(m) = merged_histogram(srv, c) else { continue };
            for (ns, n) in m.levels() {
                let _ = writeln!(
                    o,
                    "atoll_command_duration_seconds_bucket{{cmd=\"{}\",le=\"{}\"}} {n}",
                    c.name,
                    ns as f64 / 1e9
                );
            }
            let _ = writeln!(o, "atoll_command_duration_seconds_bucket{{cmd=\"{}\",le=\"+Inf\"}} {}", c.name, m.total);
            let usec = st.cmd_sum(c.id, |s| &s.usec);
            let _ = writeln!(o, "atoll_command_duration_seconds_sum{{cmd=\"{}\"}} {}", c.name, usec as f64 / 1e6);
            let _ = writeln!(o, "atoll_command_duration_seconds_count{{cmd=\"{}\"}} {}", c.name, m.total);
        }
    });
    metric!("atoll_hotkey_commands", "gauge", "Estimated commands on the hottest keys (sampled)", {
        for (db, key, n) in hotkeys::top(st.workers.iter().map(|w| &w.hot), 10) {
            let _ = writeln!(o, "atoll_hotkey_commands{{db=\"db{db}\",key=\"{}\"}} {n}", label(&key));
        }
    });
    o
}

/// The dashboard's JSON (`/api/stats`).
pub fn stats_json(srv: &Server) -> serde_json::Value {
    let st = &srv.stats;
    let (alloc, _, _) = allocated_bytes();
    let keys: usize =
        (0..srv.ks.num_dbs()).filter(|&d| srv.ks.db_if_exists(d).is_some()).map(|d| srv.ks.dbsize(d)).sum();
    let commands: Vec<_> = command_totals(srv)
        .into_iter()
        .filter(|c| c.calls > 0)
        .map(|c| {
            let cmd = srv.table.all.iter().find(|x| x.name == c.name);
            let m = cmd.and_then(|x| merged_histogram(srv, x));
            let p = |q: f64| m.as_ref().map_or(0.0, |m| m.value_at_percentile(q) as f64 / 1000.0);
            json!({"name": c.name, "calls": c.calls, "usec": c.usec, "failed": c.failed, "rejected": c.rejected,
                   "p50_us": p(50.0), "p99_us": p(99.0), "p999_us": p(99.9)})
        })
        .collect();
    let slowlog: Vec<_> = srv.commandlog.slow.with(Some(10), |entries| {
        entries
            .map(|e| {
                json!({"id": e.id, "time": e.time, "usec": e.value,
                       "args": e.args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>(),
                       "client": e.addr, "name": String::from_utf8_lossy(&e.name)})
            })
            .collect()
    });
    let hot: Vec<_> = hotkeys::top(st.workers.iter().map(|w| &w.hot), 10)
        .into_iter()
        .map(|(db, k, n)| json!({"key": String::from_utf8_lossy(&k), "db": db, "hits": n}))
        .collect();
    json!({
        "time_ms": srv.now_ms(),
        "uptime_s": srv.started.elapsed().as_secs(),
        "version": crate::REDIS_VERSION,
        "server": "atoll",
        "commands_total": st.sum(|c| &c.commands),
        "connected_clients": srv.clients.len(),
        "blocked_clients": srv.blocked_clients.load(Ordering::Relaxed),
        "used_memory": alloc,
        "used_memory_rss": rss_bytes(),
        "keys": keys,
        "expired_keys": st.sum(|c| &c.expired_keys),
        "keyspace_hits": st.sum(|c| &c.keyspace_hits),
        "keyspace_misses": st.sum(|c| &c.keyspace_misses),
        "net_input_bytes": st.net_input(),
        "net_output_bytes": st.net_output(),
        "commands": commands,
        "slowlog": slowlog,
        "hotkeys": hot,
    })
}
