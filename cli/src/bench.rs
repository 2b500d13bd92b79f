//! `sim bench`: times the engine on the M/M/c reference model (`scenarios/bench/mmc.toml`, the
//! model of docs/performance.md), and checks the run's queueing physics the way the reference loop
//! does: the mean queue wait against Erlang C by a z-test on batch means, and the ordering
//! inversions, to compare with what `mmc-limit` prints for the same parameters.
//!
//! The timed runs use no observer, exactly as `sim run` does (all checkers on). The wait
//! statistics come from one more run of the same seed with an [`Observer`]: the run is
//! deterministic, so it is the same sample path, and normal runs pay nothing for it.

use crate::CliError;
use sim::dist::DurDist;
use sim::history::{Event, Observer};
use sim::scenario::Arrival;
use sim::time::Time;
use sim::{FaultPlan, Metrics, RunOptions, Status};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The default scenario: the M/M/c reference model.
pub const DEFAULT_FILE: &str = "scenarios/bench/mmc.toml";

/// The reference model's text, built in: `sim bench` without a file runs it from any folder (an
/// installed `sim` has no checkout beside it; it answered "cannot read: No such file").
pub const BUILT_IN: &str = include_str!("../../scenarios/bench/mmc.toml");

/// Batches of the batch-means standard error (as `mmc-limit`).
pub const BATCHES: u64 = 50;

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The scenario file.
    pub file: PathBuf,
    /// Overrides `[workload] messages`.
    pub messages: Option<u64>,
    /// Timed runs (at least 1).
    pub repeat: u32,
    /// The strategy (default: the scenario's first).
    pub strategy: Option<String>,
    /// The seed (default: the scenario's).
    pub seed: Option<u64>,
}

/// Mean queue wait with a batch-means standard error, in seconds.
#[derive(Clone, Copy, Debug)]
pub struct WaitSummary {
    /// Messages that started service (waits recorded).
    pub count: u64,
    /// Mean wait from reaching the broker's queue to the start of service.
    pub mean_s: f64,
    /// Standard error of the mean from [`BATCHES`] batch means (NaN with fewer than 2 batches).
    pub se_s: f64,
}

/// The result of a benchmark.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// The scenario file.
    pub file: String,
    /// The strategy run.
    pub strategy: String,
    /// The seed.
    pub seed: u64,
    /// Wall time of each timed run, in seconds (the engine run only, not loading).
    pub walls_s: Vec<f64>,
    /// The run's figures (identical for every repetition).
    pub metrics: Metrics,
    /// Queue waits.
    pub wait: WaitSummary,
    /// Erlang C mean wait (seconds), when the scenario is an M/M/c queue (one broker, Poisson
    /// arrivals, exponential service, prefetch 1, no faults, utilisation below 1).
    pub erlang_c_wq_s: Option<f64>,
}

impl BenchReport {
    /// Median wall time of the timed runs.
    pub fn median_wall_s(&self) -> f64 {
        let mut w = self.walls_s.clone();
        w.sort_by(f64::total_cmp);
        w[w.len() / 2]
    }

    /// The z-score of the mean wait against Erlang C.
    pub fn z(&self) -> Option<f64> {
        // No standard error (fewer than two batches: a handful of messages) is no test: a NaN z
        // printed "FAIL, |z| > 4" while the exit code said it passed.
        let se = self.wait.se_s;
        self.erlang_c_wq_s
            .filter(|_| se.is_finite() && se > 0.0)
            .map(|wq| (self.wait.mean_s - wq) / se)
    }

    /// Whether the z-test fails (|z| > 4). Not applicable (no Erlang C, or too few messages for
    /// a standard error) counts as passing.
    pub fn failed(&self) -> bool {
        self.z().is_some_and(|z| z.abs() > 4.0)
    }

    /// The human-readable report, ending with one `key=value` line like `mmc-limit`'s.
    pub fn text(&self) -> String {
        let m = &self.metrics;
        let med = self.median_wall_s();
        let min = self.walls_s.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.walls_s.iter().copied().fold(0.0, f64::max);
        let per_s = |x: u64, w: f64| x as f64 / w;
        let mut s = format!(
            "bench {}: strategy {}, seed {}, {} messages, {} engine events, {} timed run(s)\n",
            self.file,
            self.strategy,
            self.seed,
            m.produced,
            m.events,
            self.walls_s.len()
        );
        s += &format!(
            "wall time: median {med:.4} s (min {min:.4}, max {max:.4}); {:.2} M messages/s, {:.2} M events/s (median)\n",
            per_s(m.applied, med) / 1e6,
            per_s(m.events, med) / 1e6
        );
        match (self.erlang_c_wq_s, self.z()) {
            (Some(wq), Some(z)) => {
                s += &format!(
                    "mean queue wait {:.6} s (batch-means se {:.6}, {} batches) vs Erlang C {wq:.6} s: {:+.2}%, z = {z:+.2} ({})\n",
                    self.wait.mean_s,
                    self.wait.se_s,
                    BATCHES,
                    100.0 * (self.wait.mean_s - wq) / wq,
                    if z.abs() <= 4.0 { "pass, |z| <= 4" } else { "FAIL, |z| > 4" }
                )
            }
            (Some(wq), None) => {
                s += &format!(
                    "mean queue wait {:.6} s vs Erlang C {wq:.6} s: no z-test, too few messages \
                     for a standard error ({} of them; the batch means need {BATCHES} batches)\n",
                    self.wait.mean_s, self.wait.count
                )
            }
            _ => {
                s += &format!(
                    "mean queue wait {:.6} s (batch-means se {:.6}); Erlang C not applicable to this scenario\n",
                    self.wait.mean_s, self.wait.se_s
                )
            }
        }
        s += &format!(
            "ordering inversions (ordering_violations): {}\n",
            m.ordering_violations
        );
        s += &format!(
            "impl=ordsim strategy={} n={} seed={} events={} completed={} inversions={} mean_wait={:.6} wait_se={:.6} erlang_c_wq={} z={} wall_s={med:.4} events_per_s={:.0} msgs_per_s={:.0}\n",
            self.strategy,
            m.produced,
            self.seed,
            m.events,
            m.applied,
            m.ordering_violations,
            self.wait.mean_s,
            self.wait.se_s,
            self.erlang_c_wq_s.map_or("n/a".into(), |w| format!("{w:.6}")),
            self.z().map_or("n/a".into(), |z| format!("{z:+.2}")),
            per_s(m.events, med),
            per_s(m.applied, med),
        );
        s
    }
}

/// Erlang C mean wait in queue of an M/M/c queue, through the stable Erlang-B recursion (in the
/// unit of `1 / mu`).
pub fn erlang_c_wq(c: u32, lambda: f64, mu: f64) -> f64 {
    let a = lambda / mu;
    let rho = a / c as f64;
    let mut b = 1.0f64;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let pw = b / (1.0 - rho * (1.0 - b));
    pw / (c as f64 * mu - lambda)
}

/// Waits of messages in the order they start service, cut into batches as `mmc-limit` does
/// (batches of `ceil(n / 50)`; a short last batch only joins the overall mean).
struct WaitStats {
    batch_len: u64,
    in_batch: u64,
    batch_sum_us: u128,
    sum_us: u128,
    count: u64,
    batch_means: Vec<f64>,
}

impl WaitStats {
    fn new(n: u64) -> Self {
        WaitStats {
            batch_len: n.div_ceil(BATCHES).max(1),
            in_batch: 0,
            batch_sum_us: 0,
            sum_us: 0,
            count: 0,
            batch_means: Vec::with_capacity(BATCHES as usize + 1),
        }
    }

    fn record(&mut self, wait_us: u64) {
        self.batch_sum_us += wait_us as u128;
        self.in_batch += 1;
        if self.in_batch == self.batch_len {
            self.batch_means
                .push(self.batch_sum_us as f64 / 1e6 / self.in_batch as f64);
            self.sum_us += self.batch_sum_us;
            self.count += self.in_batch;
            self.batch_sum_us = 0;
            self.in_batch = 0;
        }
    }

    fn finish(mut self) -> WaitSummary {
        self.sum_us += self.batch_sum_us;
        self.count += self.in_batch;
        let mean_s = self.sum_us as f64 / 1e6 / self.count.max(1) as f64;
        let b = self.batch_means.len() as f64;
        let se_s = if b < 2.0 {
            f64::NAN
        } else {
            let bm = self.batch_means.iter().sum::<f64>() / b;
            let var = self
                .batch_means
                .iter()
                .map(|x| (x - bm).powi(2))
                .sum::<f64>()
                / (b - 1.0);
            (var / b).sqrt()
        };
        WaitSummary {
            count: self.count,
            mean_s,
            se_s,
        }
    }
}

const UNSET: Time = Time::MAX;
const DONE: Time = Time::MAX - 1;

/// Records each message's wait from its first enqueue to its first start of service. Keeps a
/// window of messages from the oldest not yet started: memory follows messages in flight.
struct WaitObserver {
    /// Id of `enqueued[0]`.
    base: u64,
    /// First enqueue time per message, [`UNSET`] before it, [`DONE`] once started.
    enqueued: VecDeque<Time>,
    stats: WaitStats,
}

impl Observer for WaitObserver {
    fn event(&mut self, e: &Event) {
        match *e {
            Event::Produce { msg, .. } => {
                debug_assert_eq!(msg.id, self.base + self.enqueued.len() as u64);
                self.enqueued.push_back(UNSET);
            }
            Event::Enqueue { t, msg, .. } => {
                if let Some(x) = msg
                    .id
                    .checked_sub(self.base)
                    .and_then(|i| self.enqueued.get_mut(i as usize))
                {
                    if *x == UNSET {
                        *x = t;
                    }
                }
            }
            Event::Start { t, msg, .. } => {
                let Some(i) = msg.id.checked_sub(self.base) else {
                    return;
                };
                let Some(x) = self.enqueued.get_mut(i as usize) else {
                    return;
                };
                if *x != UNSET && *x != DONE {
                    self.stats.record(t - *x);
                    *x = DONE;
                }
                while self.enqueued.front() == Some(&DONE) {
                    self.enqueued.pop_front();
                    self.base += 1;
                }
            }
            _ => {}
        }
    }
}

/// Erlang C for the scenario, when it is an M/M/c queue.
fn erlang_c_for(sc: &sim::Scenario, plan: &FaultPlan) -> Option<f64> {
    let DurDist::Exponential { mean } = sc.consumers.service.0 else {
        return None;
    };
    let mm = sc.workload.arrival == Arrival::Poisson
        && sc.brokers.len() == 1
        && sc.consumers.prefetch == 1
        && plan.faults.is_empty()
        && mean.0 > 0;
    let mu = 1e6 / mean.0 as f64;
    let lambda = sc.workload.rate.as_per_sec();
    let c = sc.consumers.count;
    (mm && lambda < c as f64 * mu).then(|| erlang_c_wq(c, lambda, mu))
}

/// Runs the benchmark: `repeat` timed runs, then one run with the wait observer.
pub fn bench(opts: &BenchOptions) -> Result<BenchReport, CliError> {
    // The default file where it is (a checkout, perhaps edited), else the built-in copy.
    let built_in = opts.file == Path::new(DEFAULT_FILE) && !opts.file.exists();
    let mut sc = if built_in {
        crate::load_text(DEFAULT_FILE, BUILT_IN)?
    } else {
        crate::load(&opts.file)?
    };
    if let Some(n) = opts.messages {
        sc.workload.messages = n;
        // Checked as the file's own value is: `--messages 18446744073709551615` ran for minutes
        // up to the event bound the loader would have refused it by.
        if let Some(e) = sim::scenario::validate(&sc).into_iter().next() {
            return Err(CliError::Usage(format!(
                "--messages {n}: {}: {}",
                e.path_string(),
                e.message
            )));
        }
    }
    if opts.repeat == 0 {
        return Err(CliError::Usage(
            "--repeat 0: must be at least 1 (the timed runs)".into(),
        ));
    }
    let seed = opts.seed.unwrap_or(sc.seed);
    let strategy = match &opts.strategy {
        Some(s) => s.clone(),
        None => sc
            .strategies
            .first()
            .cloned()
            .ok_or_else(|| CliError::Usage("the scenario lists no strategy".into()))?,
    };
    // The message of every --strategy: the known names, the closest one.
    crate::check_strategy_names(std::slice::from_ref(&strategy))?;
    let plan = FaultPlan::resolve(&sc, seed);
    let run_opts = RunOptions {
        seed,
        max_events: None,
        max_sim_time: None,
    };
    let file = if built_in {
        format!("{DEFAULT_FILE} (built in)")
    } else {
        opts.file.display().to_string()
    };
    let fail = |error| CliError::Run {
        error,
        repro: crate::repro_line(&file, seed, Some(&strategy)),
    };
    let mut walls_s = Vec::new();
    let mut metrics = None;
    for _ in 0..opts.repeat.max(1) {
        let t0 = Instant::now();
        let r = strategies::run_named(&strategy, &sc, &plan, &run_opts, None).map_err(fail)?;
        walls_s.push(t0.elapsed().as_secs_f64());
        if r.status != Status::Ok {
            return Err(CliError::Usage(format!(
                "{strategy} is not applicable here: {}",
                r.reason.unwrap_or_default()
            )));
        }
        metrics = r.metrics;
    }
    let mut obs = WaitObserver {
        base: 0,
        enqueued: VecDeque::new(),
        stats: WaitStats::new(sc.workload.messages),
    };
    let r =
        strategies::run_named(&strategy, &sc, &plan, &run_opts, Some(&mut obs)).map_err(fail)?;
    let metrics = metrics.expect("at least one run");
    debug_assert_eq!(
        r.metrics.as_ref().map(|m| m.events),
        Some(metrics.events),
        "deterministic"
    );
    Ok(BenchReport {
        file,
        strategy,
        seed,
        walls_s,
        metrics,
        wait: obs.stats.finish(),
        erlang_c_wq_s: erlang_c_for(&sc, &plan),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_matches_the_reference_value() {
        // Erlang C for c = 8, mu = 1, rho = 0.9 (the reference model's erlang_c.py) gives Wq =
        // 0.876916.
        let wq = erlang_c_wq(8, 7.2, 1.0);
        assert!((wq - 0.876916).abs() < 5e-7, "{wq}");
    }

    /// Without a file, outside a checkout (the tests run in `cli/`, where the default path is
    /// not), the bench runs its built-in copy of the model; a file given that is missing is an
    /// error, not the model.
    #[test]
    fn runs_the_built_in_model_outside_a_checkout() {
        assert!(!Path::new(DEFAULT_FILE).exists(), "run from cli/");
        let opts = |file: &str| BenchOptions {
            file: file.into(),
            messages: Some(2_000),
            repeat: 1,
            strategy: None,
            seed: None,
        };
        let r = bench(&opts(DEFAULT_FILE)).unwrap();
        assert_eq!(r.file, "scenarios/bench/mmc.toml (built in)");
        assert_eq!(r.metrics.applied, 2_000);
        assert_eq!(r.strategy, "competing");
        assert!(bench(&opts("scenarios/bench/other.toml")).is_err());
    }

    /// The bench runs the bundled model with an override, and its statistics are those of the
    /// run (no timing is checked: the machines are shared).
    #[test]
    fn runs_the_bundled_model() {
        let r = bench(&BenchOptions {
            file: concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../",
                "scenarios/bench/mmc.toml"
            )
            .into(),
            messages: Some(20_000),
            repeat: 1,
            strategy: None,
            seed: None,
        })
        .unwrap();
        assert_eq!(r.metrics.applied, 20_000);
        assert_eq!(r.wait.count, 20_000, "every message starts service once");
        assert_eq!(r.walls_s.len(), 1);
        assert!(r.metrics.ordering_violations > 0);
        // A bad override is refused as the file's value would be; a run too small for a standard
        // error has no z-test (it printed "FAIL" with z = NaN and exited 0).
        let model = |messages, repeat| BenchOptions {
            file: concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/bench/mmc.toml").into(),
            messages: Some(messages),
            repeat,
            strategy: None,
            seed: None,
        };
        let e = bench(&model(u64::MAX, 1)).unwrap_err().to_string();
        assert!(
            e.starts_with("--messages 18446744073709551615: workload"),
            "{e}"
        );
        let e = bench(&model(10, 0)).unwrap_err().to_string();
        assert!(e.contains("--repeat 0: must be at least 1"), "{e}");
        for n in [0, 1, 10] {
            let small = bench(&model(n, 1)).unwrap();
            assert_eq!(small.z(), None);
            assert!(!small.failed());
            assert!(!small.text().contains("FAIL"), "{}", small.text());
            assert!(
                small.text().contains("no z-test, too few messages"),
                "{}",
                small.text()
            );
        }
        // 20,000 messages are too few for the z-test at rho = 0.9 (batches of 400 are strongly
        // autocorrelated, and the run starts empty); tests/physics.rs checks Erlang C at scale.
        assert!(r.z().expect("an M/M/c model").is_finite());
        assert!(r.text().contains("impl=ordsim"));
    }
}
