//! The engine's queueing physics: with c consumers, prefetch 1, Poisson arrivals, exponential
//! service and no faults, the mean queue wait must match Erlang C (M/M/c), and M/M/1 for `single`.
//!
//! Waits are autocorrelated, so a fixed percentage band is wrong one seed in four at high load; the
//! comparison is a z-test on batch means (50 batches, |z| <= 4), as the reference loop `mmc-limit`
//! does (docs/performance.md).

use crate::common;

use sim::history::Event;

/// Erlang C mean wait in queue, through the stable Erlang-B recursion (seconds).
fn erlang_c_wq(c: u32, lambda: f64, mu: f64) -> f64 {
    let a = lambda / mu;
    let rho = a / c as f64;
    assert!(rho < 1.0);
    let mut b = 1.0f64;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let pw = b / (1.0 - rho * (1.0 - b));
    pw / (c as f64 * mu - lambda)
}

const BATCHES: usize = 50;

/// (mean wait, batch-means standard error) in seconds, waits taken in service-start order.
fn mean_wait(strategy: &str, c: u32, rho: f64, n: u64, seed: u64) -> (f64, f64) {
    let lambda = rho * c as f64; // mu = 1/s
    let text = format!(
        r#"
strategies = ["{strategy}"]
[workload]
messages = {n}
rate = "{lambda}/s"
keys = 1000
[[broker]]
name = "a"
[consumers]
count = {c}
prefetch = 1
service = {{ dist = "exponential", mean = "1s" }}
[run]
drain_timeout = "100h"
"#
    );
    let sc = common::scenario(&text);
    let mut enqueued = vec![u64::MAX; n as usize];
    let mut waits = Vec::with_capacity(n as usize);
    let m = common::run_with(&sc, strategy, seed, |e| match *e {
        Event::Enqueue { t, msg, .. } => enqueued[msg.id as usize] = t,
        Event::Start { t, msg, .. } => waits.push((t - enqueued[msg.id as usize]) as f64 / 1e6),
        _ => {}
    });
    assert_eq!(m.applied, n);
    assert_eq!(
        waits.len() as u64,
        n,
        "each message starts service exactly once"
    );
    let per = waits.len() / BATCHES;
    let means: Vec<f64> = waits
        .chunks_exact(per)
        .take(BATCHES)
        .map(|b| b.iter().sum::<f64>() / per as f64)
        .collect();
    let mean = means.iter().sum::<f64>() / BATCHES as f64;
    let var = means.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (BATCHES - 1) as f64;
    (mean, (var / BATCHES as f64).sqrt())
}

fn check(strategy: &str, c: u32, rho: f64, n: u64) {
    let (mean, se) = mean_wait(strategy, c, rho, n, 42);
    let wq = erlang_c_wq(c, rho * c as f64, 1.0);
    let z = (mean - wq) / se;
    eprintln!("{strategy} c={c} rho={rho}: mean wait {mean:.4}s, Erlang C {wq:.4}s, se {se:.4}, z {z:+.2}");
    assert!(
        z.abs() <= 4.0,
        "{strategy} c={c} rho={rho}: mean wait {mean} vs Erlang C {wq} (se {se}, z {z})"
    );
}

#[test]
fn competing_matches_erlang_c_at_rho_0_5() {
    check("competing", 8, 0.5, 200_000);
}

#[test]
fn competing_matches_erlang_c_at_rho_0_8() {
    check("competing", 8, 0.8, 400_000);
}

#[test]
fn competing_matches_erlang_c_at_rho_0_95() {
    check("competing", 8, 0.95, 1_000_000);
}

#[test]
fn single_matches_m_m_1() {
    check("single", 1, 0.5, 200_000);
    check("single", 1, 0.8, 400_000);
}
