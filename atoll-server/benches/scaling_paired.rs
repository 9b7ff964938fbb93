//! Paired scaling measurement (issue 4): the workloads of `benches/scaling.rs`, but each
//! 2-thread run is timed right next to a 1-thread run of the same length, and the scaling
//! factor is the median over many such pairs.
//!
//! Why not only criterion: criterion measures the 1-thread and the 2-thread case of a group
//! seconds apart. On a shared VM whose speed drifts by tens of percent within seconds (measured
//! here: one thread's GET rate moved between 1.8 and 2.8 M/s from one round to the next), the
//! ratio of two such figures measures the drift as much as the engine. A pair takes about a
//! fifth of a second, the order within a pair alternates, and the median of many pairs drops
//! the pairs a drift fell into.
//!
//!     cargo bench --bench scaling_paired [-- PAIRS]

use std::time::Duration;

mod common;
use common::{ceiling, preloaded_server, run, WORKLOADS};

/// Length of one run: long enough that thread start-up is noise, short enough that the host's
/// speed rarely changes within a pair.
const SLICE: Duration = Duration::from_millis(80);

/// Iterations of `f`'s first variant that take about `SLICE`.
fn calibrate(f: &mut impl FnMut(usize, u64) -> Duration) -> u64 {
    let mut iters = 64;
    loop {
        let t = f(0, iters);
        if t >= SLICE / 4 {
            return (iters as f64 * SLICE.as_secs_f64() / t.as_secs_f64()).ceil() as u64;
        }
        iters *= 4;
    }
}

/// Times the two variants of `f` (0 and 1) side by side `n` times, alternating which goes
/// first, and returns the quartiles of `scale·t0/t1`: variant 1's throughput over variant 0's
/// when both do the same iterations per thread and variant 1 runs `scale` threads to 0's one.
fn pairs(n: usize, scale: f64, mut f: impl FnMut(usize, u64) -> Duration) -> (f64, f64, f64) {
    let iters = calibrate(&mut f);
    let mut ratios: Vec<f64> = (0..n)
        .map(|i| {
            let (t0, t1) = if i % 2 == 0 {
                let t0 = f(0, iters);
                (t0, f(1, iters))
            } else {
                let t1 = f(1, iters);
                (f(0, iters), t1)
            };
            scale * t0.as_secs_f64() / t1.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    (ratios[n / 4], ratios[n / 2], ratios[(3 * n) / 4])
}

fn main() {
    // `cargo bench` passes `--bench`; the only argument of our own is the number of pairs.
    let n = std::env::args().skip(1).find_map(|a| a.parse::<usize>().ok()).unwrap_or(41).max(3);
    let show = |what: &str, (q1, m, q3): (f64, f64, f64)| {
        println!("{what:<34} median {m:.3}x  (quartiles {q1:.3}–{q3:.3}, {n} pairs)");
    };
    println!("scaling, throughput 2 threads ÷ 1 thread:");
    show("  CEILING", pairs(n, 2.0, |v, iters| ceiling(v + 1, iters)));
    let srv = preloaded_server();
    for (name, cmd, own_db) in WORKLOADS {
        show(&format!("  {name}"), pairs(n, 2.0, |v, iters| run(&srv, cmd, v + 1, iters, own_db)));
    }
    // The cost of sharing, without the machine's own 2-thread loss: the same two threads, once
    // each in its own database and once on one shared keyspace.
    println!("contention, 2 threads, throughput shared keyspace ÷ own database per thread:");
    for cmd in ["GET", "SET", "INCR"] {
        show(&format!("  {cmd}"), pairs(n, 1.0, |v, iters| run(&srv, cmd, 2, iters, v == 0)));
    }
}
