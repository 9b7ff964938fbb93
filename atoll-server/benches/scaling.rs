//! In-process scaling benchmark (issue 4): GET, SET and INCR through the whole command path
//! (RESP parsing, dispatch, shard locks, execution, reply encoding) on one shared keyspace, with
//! 1 and then 2 threads, each pinned to its own core. No sockets: this isolates what the engine
//! itself does when workers run side by side — lock contention, shared cache lines, allocator
//! traffic. Throughput is reported in commands per second, so the scaling factor is the ratio
//! of the two lines of a group. On a host whose speed drifts between the two measurements of a
//! group, `benches/scaling_paired.rs` (which `bench/scaling.py` runs) gives steadier ratios.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

mod common;
use common::{ceiling, preloaded_server, run, BATCH, WORKLOADS};

fn scaling(c: &mut Criterion) {
    let srv = preloaded_server();
    let mut g = c.benchmark_group("scaling/CEILING");
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements((BATCH * threads) as u64));
        g.bench_with_input(BenchmarkId::from_parameter(threads), &threads, |b, &threads| {
            b.iter_custom(|iters| ceiling(threads, iters))
        });
    }
    g.finish();
    for (name, cmd, own_db) in WORKLOADS {
        let mut g = c.benchmark_group(format!("scaling/{name}"));
        for threads in [1usize, 2] {
            g.throughput(Throughput::Elements((BATCH * threads) as u64));
            g.bench_with_input(BenchmarkId::from_parameter(threads), &threads, |b, &threads| {
                b.iter_custom(|iters| run(&srv, cmd, threads, iters, own_db))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(4));
    targets = scaling
}
criterion_main!(benches);
