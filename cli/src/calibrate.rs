//! `sim calibrate`: the simulator's range over many seeds beside a few live runs, per strategy and
//! metric, with a verdict (docs/calibration.md). This module holds what needs no broker: the
//! metrics compared, the tolerance, the range and verdict of a row, the simulator's side (seeds in
//! parallel), the table, the CSV and the chart. The live side is `live::calibrate` (cargo feature
//! `live`).

use crate::CliError;
use rayon::prelude::*;
use sim::{FaultPlan, Metrics, RunOptions, Scenario, Status};

/// The figures compared, in the order of the table: those that matter for ordering, then latency.
pub const METRICS: [&str; 9] = [
    "ordering_violations",
    "stale_writes",
    "final_state_mismatches",
    "duplicates",
    "redeliveries",
    "lost",
    "pending_at_end",
    "latency_ms.p50",
    "latency_ms.p99",
];

/// Compared only where the scenario stages a NACK (a poison message): `dead_lettered` (the live
/// value read from ActiveMQ.DLQ at the end). Elsewhere both sides read 0.
pub const NACK_METRICS: [&str; 1] = ["dead_lettered"];

/// The metrics compared for a scenario: [`METRICS`], then [`NACK_METRICS`] when `nack`.
pub fn metrics_for(nack: bool) -> Vec<&'static str> {
    let mut m = METRICS.to_vec();
    if nack {
        m.extend(NACK_METRICS);
    }
    m
}

/// Why each default absolute slack of [`DEFAULT_ABSOLUTE`] is what it is (printed when a live
/// value needed it).
pub const DEFAULT_WHY: [(&str, &str); 4] = [
    (
        "ordering_violations stale_writes final_state_mismatches duplicates redeliveries",
        "rare events counted in single digits: one crash's other interleaving makes one or two more or fewer",
    ),
    (
        "lost pending_at_end dead_lettered",
        "none: a persistent broker loses nothing, a drained run leaves nothing",
    ),
    (
        "latency_ms.p50 latency_ms.p99",
        "the timer slack and scheduling jitter of a shared machine",
    ),
    (
        "rel",
        "20 seeds rarely show the extremes: a 21st draw falls outside their min-max with probability 2/21",
    ),
];

/// A live value is in the simulator's low tail at or below this percentile, in its high tail at
/// or above 100 minus it.
pub const TAIL_PERCENTILE: f64 = 10.0;

/// A metric is flagged as biased when this many of its live values sit in one tail that the
/// chance of so many there, were live and simulator the same distribution (each value in a tail
/// with probability 1/10), is below [`BIAS_P`].
pub const BIAS_P: f64 = 0.01;

/// Default relative widening: a quarter of the simulator's min-max span on each side.
pub const DEFAULT_RELATIVE: f64 = 0.25;

/// Default absolute slack per metric (added on each side after the relative widening), and why:
/// see [`Tolerance::default`] and docs/calibration.md.
pub const DEFAULT_ABSOLUTE: [(&str, f64); 10] = [
    // Rare events counted in single digits: one or two more or fewer is what a different
    // interleaving of one crash makes, and 20 seeds rarely show the extremes.
    ("ordering_violations", 2.0),
    ("stale_writes", 2.0),
    ("final_state_mismatches", 1.0),
    ("duplicates", 1.0),
    ("redeliveries", 2.0),
    // A persistent broker loses nothing and a drained run leaves nothing: no slack.
    ("lost", 0.0),
    ("pending_at_end", 0.0),
    // Each poison message is dead-lettered once its deliveries are used up, in both: no slack.
    ("dead_lettered", 0.0),
    // Milliseconds: the timer slack and scheduling jitter of a shared machine (sleeps overshoot by
    // up to a millisecond; a p99 of a few hundred samples moves by a few).
    ("latency_ms.p50", 1.0),
    ("latency_ms.p99", 5.0),
];

/// How far outside the simulator's range a live value may fall and still agree.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerance {
    /// Fraction of the range's span added on each side.
    pub relative: f64,
    /// Absolute slack per metric, added on each side.
    pub absolute: Vec<(String, f64)>,
    /// Slack per metric as a fraction of the simulator's largest value, added on each side too
    /// (`--tolerance METRIC=N%`: for a latency, what a slower machine scales). None by default.
    pub of_max: Vec<(String, f64)>,
    /// What `--tolerance` set (`rel` or a metric): its reason is "given on the command line".
    pub given: Vec<String>,
}

impl Default for Tolerance {
    /// 25% of the span plus [`DEFAULT_ABSOLUTE`]. With 20 seeds, a 21st draw from the same
    /// distribution falls outside the sample's min-max with probability 2/21 (about 10%); the
    /// relative widening covers most of the tails the seeds did not reach, the absolute slack
    /// covers degenerate ranges (every seed 0) and integer granularity.
    fn default() -> Tolerance {
        Tolerance {
            relative: DEFAULT_RELATIVE,
            absolute: DEFAULT_ABSOLUTE
                .iter()
                .map(|(m, v)| (m.to_string(), *v))
                .collect(),
            of_max: Vec::new(),
            given: Vec::new(),
        }
    }
}

impl Tolerance {
    /// Applies one `--tolerance` argument: `0.3` or `rel=0.3` (the relative widening),
    /// `METRIC=ABS` (that metric's absolute slack, e.g. `duplicates=2`, `latency_ms.p99=10`), or
    /// `METRIC=N%` (a further slack of N% of the simulator's largest value of it).
    pub fn apply(&mut self, arg: &str) -> Result<(), String> {
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => ("rel", arg.trim()),
        };
        let (value, percent) = match value.strip_suffix('%') {
            Some(v) if name != "rel" && name != "relative" => (v.trim(), true),
            _ => (value, false),
        };
        let v: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("--tolerance {arg:?}: {value:?} is not a number at least 0"))?;
        if name == "rel" || name == "relative" {
            self.relative = v;
            self.given.push("rel".into());
            return Ok(());
        }
        let Some(slot) = self.absolute.iter_mut().find(|(m, _)| m == name) else {
            let mut known = vec!["rel"];
            known.extend(metrics_for(true));
            return Err(format!(
                "--tolerance {arg:?}: unknown metric {name:?}: {}",
                crate::one_of(name, &known)
            ));
        };
        self.given.push(name.to_string());
        if !percent {
            slot.1 = v;
            return Ok(());
        }
        self.of_max.retain(|(m, _)| m != name);
        self.of_max.push((name.to_string(), v / 100.0));
        Ok(())
    }

    /// The slack of `metric` beyond the relative widening, for a simulator range `range`: its
    /// absolute slack plus its fraction of the range's largest value.
    pub fn slack(&self, metric: &str, range: &SimRange) -> f64 {
        let of_max = self
            .of_max
            .iter()
            .find(|(m, _)| m == metric)
            .map_or(0.0, |(_, f)| f * range.max);
        self.absolute(metric) + of_max
    }

    /// The absolute slack of `metric` (0 if it has none).
    pub fn absolute(&self, metric: &str) -> f64 {
        self.absolute
            .iter()
            .find(|(m, _)| m == metric)
            .map(|(_, v)| *v)
            .unwrap_or(0.0)
    }

    /// Why `metric`'s tolerance (or `rel`) is what it is.
    pub fn why(&self, metric: &str) -> &'static str {
        if self.given.iter().any(|g| g == metric) {
            return "given on the command line (--tolerance)";
        }
        DEFAULT_WHY
            .iter()
            .find(|(ms, _)| ms.split(' ').any(|m| m == metric))
            .map_or("", |(_, why)| why)
    }

    /// One line saying what the tolerance is.
    pub fn describe(&self) -> String {
        let abs: Vec<String> = self
            .absolute
            .iter()
            .map(|(m, v)| format!("{m} {}", crate::charts::short_number(*v)))
            .collect();
        let of_max: Vec<String> = self
            .of_max
            .iter()
            .map(|(m, f)| format!("{m} {}%", crate::charts::short_number(f * 100.0)))
            .collect();
        let of_max = if of_max.is_empty() {
            String::new()
        } else {
            format!(
                ", and by a share of its largest value: {}",
                of_max.join(", ")
            )
        };
        format!(
            "tolerance: the simulator's min-max widened on each side by {}% of its span plus {}{of_max}",
            crate::charts::short_number(self.relative * 100.0),
            abs.join(", ")
        )
    }
}

/// The simulator's values of one metric over its seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimRange {
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Seeds.
    pub n: usize,
}

impl SimRange {
    /// Of `values` (`None` when empty).
    pub fn of(values: &[f64]) -> Option<SimRange> {
        if values.is_empty() {
            return None;
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        Some(SimRange {
            min,
            max,
            mean,
            n: values.len(),
        })
    }

    /// The accepted interval: `[min - w, max + w]` with `w = relative * (max - min) + absolute`.
    /// Counts cannot go below 0, so neither does the low end.
    pub fn widened(&self, relative: f64, absolute: f64) -> (f64, f64) {
        let w = relative * (self.max - self.min) + absolute;
        ((self.min - w).max(0.0), self.max + w)
    }
}

/// Whether a live value agrees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every live value is inside the widened range.
    Within,
    /// At least one is outside.
    Outside,
}

impl Verdict {
    /// As the table and the CSV write it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Within => "within",
            Verdict::Outside => "OUTSIDE",
        }
    }
}

/// One row: a scenario, a strategy, a metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The scenario's name.
    pub scenario: String,
    /// Its file.
    pub file: String,
    /// Strategy.
    pub strategy: String,
    /// Metric path.
    pub metric: String,
    /// The simulator's range.
    pub sim: SimRange,
    /// The accepted interval.
    pub low: f64,
    /// The accepted interval.
    pub high: f64,
    /// One value per live run.
    pub live: Vec<f64>,
    /// Per live value, its percentile in the simulator's values ([`percentile`]).
    pub percentiles: Vec<f64>,
    /// Per live value, the simulator's value at the same seed (the same workload and faults:
    /// docs/calibration.md, "One workload on both sides"), when that seed was run.
    pub paired: Vec<Option<f64>>,
    /// The verdict.
    pub verdict: Verdict,
}

impl Row {
    /// Judges `live` against the simulator's `sim` values with `tol`.
    pub fn judge(
        scenario: &str,
        file: &str,
        strategy: &str,
        metric: &str,
        sim: &[f64],
        live: &[f64],
        tol: &Tolerance,
    ) -> Option<Row> {
        let range = SimRange::of(sim)?;
        let (low, high) = range.widened(tol.relative, tol.slack(metric, &range));
        let verdict = if live.iter().all(|v| inside(*v, low, high)) {
            Verdict::Within
        } else {
            Verdict::Outside
        };
        Some(Row {
            scenario: scenario.to_string(),
            file: file.to_string(),
            strategy: strategy.to_string(),
            metric: metric.to_string(),
            sim: range,
            low,
            high,
            live: live.to_vec(),
            percentiles: live.iter().map(|v| percentile(sim, *v)).collect(),
            paired: Vec::new(),
            verdict,
        })
    }

    /// The tail every live value sits in, when there are two or more and all sit in the same
    /// one: `low` or `high`.
    pub fn tail(&self) -> Option<&'static str> {
        let tails: Vec<Option<&str>> = self.percentiles.iter().map(|p| tail_of(*p)).collect();
        match tails.first() {
            Some(Some(t)) if tails.len() > 1 && tails.iter().all(|x| *x == Some(t)) => Some(t),
            _ => None,
        }
    }

    /// How many live values are accepted only by the tolerance: outside the simulator's min-max,
    /// inside the accepted interval.
    pub fn by_tolerance(&self) -> usize {
        self.live
            .iter()
            .filter(|v| {
                inside(**v, self.low, self.high) && !inside(**v, self.sim.min, self.sim.max)
            })
            .count()
    }

    /// How many live values fall outside.
    pub fn outside(&self) -> usize {
        self.live
            .iter()
            .filter(|v| !inside(**v, self.low, self.high))
            .count()
    }
}

/// Where `v` falls among the simulator's values `sim`, 0 to 100: the share below it plus half the
/// share equal to it (the mid-rank percentile: a value equal to every seed's is at 50, one below
/// them all at 0, above them all at 100). 50 when `sim` is empty.
pub fn percentile(sim: &[f64], v: f64) -> f64 {
    if sim.is_empty() {
        return 50.0;
    }
    let below = sim.iter().filter(|x| **x < v).count() as f64;
    let equal = sim.iter().filter(|x| **x == v).count() as f64;
    100.0 * (below + equal / 2.0) / sim.len() as f64
}

/// The tail a percentile sits in ([`TAIL_PERCENTILE`]): `low`, `high`, or none.
pub fn tail_of(p: f64) -> Option<&'static str> {
    if p <= TAIL_PERCENTILE {
        Some("low")
    } else if p >= 100.0 - TAIL_PERCENTILE {
        Some("high")
    } else {
        None
    }
}

/// A metric whose live values sit in one tail of the simulator's distributions, across runs
/// and files, more often than chance.
#[derive(Clone, Debug, PartialEq)]
pub struct Bias {
    /// The metric.
    pub metric: String,
    /// `low` or `high`.
    pub tail: &'static str,
    /// Live values in that tail.
    pub k: usize,
    /// Live values of the metric.
    pub n: usize,
    /// The chance of `k` or more of `n` in one tail were live the simulator's distribution.
    pub p: f64,
    /// The rows (scenario/strategy) with a value there.
    pub rows: Vec<String>,
}

/// The biased metrics of `rows` (in [`METRICS`] order): per metric and tail, the live values in
/// that tail over all rows, flagged when the binomial chance of so many (each with probability
/// [`TAIL_PERCENTILE`] / 100) is below [`BIAS_P`].
pub fn biases(rows: &[Row]) -> Vec<Bias> {
    use statrs::distribution::{Binomial, DiscreteCDF};
    let mut out = Vec::new();
    for metric in metrics_for(true) {
        let of: Vec<&Row> = rows.iter().filter(|r| r.metric == metric).collect();
        let n: usize = of.iter().map(|r| r.percentiles.len()).sum();
        for tail in ["low", "high"] {
            let mut k = 0;
            let mut where_ = Vec::new();
            for r in &of {
                let here = r
                    .percentiles
                    .iter()
                    .filter(|p| tail_of(**p) == Some(tail))
                    .count();
                if here > 0 {
                    k += here;
                    where_.push(format!(
                        "{}/{} ({here} of {})",
                        r.scenario,
                        r.strategy,
                        r.percentiles.len()
                    ));
                }
            }
            if k < 2 {
                continue;
            }
            let b = Binomial::new(TAIL_PERCENTILE / 100.0, n as u64).expect("p in [0, 1]");
            // P(X >= k) = 1 - P(X <= k - 1).
            let p = 1.0 - b.cdf(k as u64 - 1);
            if p < BIAS_P {
                out.push(Bias {
                    metric: metric.to_string(),
                    tail,
                    k,
                    n,
                    p,
                    rows: where_,
                });
            }
        }
    }
    out
}

/// A metric whose live values sit on one side of their twins (the simulator at the same seed,
/// the same workload and faults) more often than chance: a sign test over the pairs.
#[derive(Clone, Debug, PartialEq)]
pub struct TwinBias {
    /// The metric.
    pub metric: String,
    /// `below` or `above` the twin.
    pub side: &'static str,
    /// Pairs with live on that side.
    pub k: usize,
    /// Pairs that differ (ties left out).
    pub n: usize,
    /// The chance of `k` or more of `n` on one side were live and twin alike (each side 1/2).
    pub p: f64,
}

/// The metrics of `rows` (in [`METRICS`] order) whose live values sit below (or above) their
/// twins in so many of the differing pairs that the binomial chance, each side 1/2, is below
/// [`BIAS_P`]. Unlike the tail test it needs no spread over seeds: a workload that happens to be
/// unusual moves both sides of its pair.
pub fn twin_biases(rows: &[Row]) -> Vec<TwinBias> {
    use statrs::distribution::{Binomial, DiscreteCDF};
    let mut out = Vec::new();
    for metric in metrics_for(true) {
        let (mut below, mut above) = (0usize, 0usize);
        for r in rows.iter().filter(|r| r.metric == metric) {
            for (live, twin) in r.live.iter().zip(&r.paired) {
                match twin {
                    Some(t) if live < t => below += 1,
                    Some(t) if live > t => above += 1,
                    _ => {}
                }
            }
        }
        let n = below + above;
        for (side, k) in [("below", below), ("above", above)] {
            if k == 0 {
                continue;
            }
            let b = Binomial::new(0.5, n as u64).expect("p in [0, 1]");
            let p = 1.0 - b.cdf(k as u64 - 1);
            if p < BIAS_P {
                out.push(TwinBias {
                    metric: metric.to_string(),
                    side,
                    k,
                    n,
                    p,
                });
            }
        }
    }
    out
}

/// What `sim calibrate` prints after its tables: the biased metrics (against the simulator's
/// spread, and against the twins), and every tolerance a live value needed (outside the
/// simulator's min-max, accepted by the widening) with its reason.
pub fn findings(rows: &[Row], tol: &Tolerance) -> String {
    let mut s = String::new();
    for b in twin_biases(rows) {
        s.push_str(&format!(
            "TWIN {}: live {} the simulator at the same seed in {} of {} differing pair(s) (chance {:.2e} were they alike)\n",
            b.metric, b.side, b.k, b.n, b.p
        ));
    }
    for b in biases(rows) {
        s.push_str(&format!(
            "BIAS {}: {} of {} live value(s) in the simulator's {} tail (percentile {} {}; chance {:.2e} were they the same distribution): {}\n",
            b.metric,
            b.k,
            b.n,
            b.tail,
            if b.tail == "low" { "<=" } else { ">=" },
            if b.tail == "low" {
                TAIL_PERCENTILE
            } else {
                100.0 - TAIL_PERCENTILE
            },
            b.p,
            b.rows.join(", ")
        ));
    }
    let mut why: Vec<String> = Vec::new();
    for r in rows.iter().filter(|r| r.by_tolerance() > 0) {
        let needed: Vec<f64> = r
            .live
            .iter()
            .copied()
            .filter(|v| inside(*v, r.low, r.high) && !inside(*v, r.sim.min, r.sim.max))
            .collect();
        s.push_str(&format!(
            "tolerance applied: {} {} {}: live {} outside the simulator's {}-{}, accepted in {}..{} ({}% of the span + {})\n",
            r.scenario,
            r.strategy,
            r.metric,
            joined(&needed, " ", num),
            num(r.sim.min),
            num(r.sim.max),
            num(r.low),
            num(r.high),
            crate::charts::short_number(tol.relative * 100.0),
            num(tol.slack(&r.metric, &r.sim)),
        ));
        for (what, w) in [
            ("the span's share", tol.why("rel")),
            (r.metric.as_str(), tol.why(&r.metric)),
        ] {
            let line = format!("  why {what}: {w}\n");
            if !why.contains(&line) {
                why.push(line);
            }
        }
    }
    s.extend(why);
    s
}

/// `v` in `[low, high]`, with a hair of float slack (a mean of integers is not exact).
pub fn inside(v: f64, low: f64, high: f64) -> bool {
    let eps = 1e-9 * (1.0 + high.abs());
    v.is_finite() && v >= low - eps && v <= high + eps
}

/// Ctrl-C during `sim calibrate`: its counts of live runs are filled in where the error
/// reaches the live side (`live::calibrate`, which keeps the rows gathered).
pub fn interrupted() -> CliError {
    CliError::Interrupted {
        done: 0,
        total: 0,
        resume: String::new(),
    }
}

/// Runs `strategy` of `sc` with seeds `seeds` in parallel (the library's run path, as `sim sweep`
/// does): the metrics with their seeds, in seed order (a seed the strategy does not apply to is
/// left out).
pub fn sim_runs(
    sc: &Scenario,
    file: &str,
    strategy: &str,
    seeds: std::ops::RangeInclusive<u64>,
) -> Result<Vec<(u64, Metrics)>, CliError> {
    let seeds: Vec<u64> = seeds.collect();
    let out: Vec<Result<Option<Metrics>, CliError>> = seeds
        .par_iter()
        .map(|&seed| {
            // Ctrl-C (`sim calibrate` installs the handler): stop here, not after every seed.
            if crate::interrupt::interrupted() {
                return Err(interrupted());
            }
            let plan = FaultPlan::resolve(sc, seed);
            let opts = RunOptions {
                seed,
                max_events: None,
                max_sim_time: None,
            };
            let st = strategies::run_named(strategy, sc, &plan, &opts, None).map_err(|error| {
                CliError::Run {
                    error,
                    repro: crate::repro_line(file, seed, Some(strategy)),
                }
            })?;
            Ok(match st.status {
                Status::Ok => st.metrics,
                _ => None,
            })
        })
        .collect();
    let mut ms = Vec::new();
    for (seed, r) in seeds.into_iter().zip(out) {
        if let Some(m) = r? {
            ms.push((seed, m));
        }
    }
    Ok(ms)
}

/// The rows of one scenario and strategy: every metric of `metrics` both sides have.
/// `sim` and `live` are by seed; each live value is paired with the simulator's at its seed.
pub fn rows(
    metrics: &[&str],
    scenario: &str,
    file: &str,
    strategy: &str,
    sim: &[(u64, Metrics)],
    live: &[(u64, Metrics)],
    tol: &Tolerance,
) -> Vec<Row> {
    metrics
        .iter()
        .filter_map(|metric| {
            let measured: Vec<(u64, f64)> = live
                .iter()
                .filter_map(|(seed, m)| Some((*seed, m.numeric(metric)?)))
                .collect();
            if measured.is_empty() {
                return None;
            }
            let l: Vec<f64> = measured.iter().map(|(_, v)| *v).collect();
            let mut row = Row::judge(
                scenario,
                file,
                strategy,
                metric,
                &sim.iter()
                    .filter_map(|(_, m)| m.numeric(metric))
                    .collect::<Vec<_>>(),
                &l,
                tol,
            )?;
            row.paired = measured
                .iter()
                .map(|(seed, _)| {
                    let (_, m) = sim.iter().find(|(s, _)| s == seed)?;
                    m.numeric(metric)
                })
                .collect();
            Some(row)
        })
        .collect()
}

/// A number for the table and the CSV: integers as integers, others with up to two decimals.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "nan".into();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        crate::charts::trimmed(x, 2)
    }
}

/// `xs`, each written by `f`, joined by `sep`.
fn joined(xs: &[f64], sep: &str, f: impl Fn(f64) -> String) -> String {
    xs.iter().map(|x| f(*x)).collect::<Vec<_>>().join(sep)
}

/// The table: one line per row, live values side by side.
pub fn table(rows: &[Row]) -> String {
    let header = [
        "strategy",
        "metric",
        "sim min-max",
        "sim mean",
        "accepted",
        "live",
        "sim@seed",
        "live %ile",
        "tail",
        "verdict",
    ];
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.strategy.clone(),
                r.metric.clone(),
                format!("{}-{}", num(r.sim.min), num(r.sim.max)),
                num(r.sim.mean),
                format!("{}..{}", num(r.low), num(r.high)),
                joined(&r.live, " ", num),
                paired(&r.paired, " "),
                joined(&r.percentiles, " ", |p| format!("{p:.0}")),
                r.tail().unwrap_or("").to_string(),
                r.verdict.name().to_string(),
            ]
        })
        .collect();
    let mut width = header.map(|h| h.len());
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(width).enumerate() {
            // Text left, numbers right.
            if !(2..8).contains(&i) {
                s.push_str(&format!("{cell:<w$}"));
            } else {
                s.push_str(&format!("{cell:>w$}"));
            }
            if i + 1 < c.len() {
                s.push_str("  ");
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&header.map(String::from));
    for c in &cells {
        s.push_str(&line(c));
    }
    s
}

/// The simulator's values at the live runs' seeds, `-` for a seed it did not run.
fn paired(xs: &[Option<f64>], sep: &str) -> String {
    xs.iter()
        .map(|x| x.map_or_else(|| "-".to_string(), num))
        .collect::<Vec<_>>()
        .join(sep)
}

/// The CSV columns.
pub const CSV_HEADER: [&str; 17] = [
    "scenario",
    "file",
    "strategy",
    "metric",
    "sim_seeds",
    "sim_min",
    "sim_max",
    "sim_mean",
    "accepted_low",
    "accepted_high",
    "live_runs",
    "live_values",
    "sim_same_seed",
    "live_outside",
    "live_percentiles",
    "tail",
    "verdict",
];

/// `calibration.csv`: one row per scenario, strategy and metric; the live values joined by `;`.
pub fn csv(rows: &[Row]) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER)?;
    for r in rows {
        w.write_record([
            r.scenario.clone(),
            r.file.clone(),
            r.strategy.clone(),
            r.metric.clone(),
            r.sim.n.to_string(),
            num(r.sim.min),
            num(r.sim.max),
            num(r.sim.mean),
            num(r.low),
            num(r.high),
            r.live.len().to_string(),
            joined(&r.live, ";", num),
            paired(&r.paired, ";"),
            r.outside().to_string(),
            joined(&r.percentiles, ";", |p| format!("{p:.1}")),
            r.tail().unwrap_or("").to_string(),
            r.verdict.name().to_string(),
        ])?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("CSV of UTF-8 fields"))
}

/// Whether every row agrees.
pub fn all_within(rows: &[Row]) -> bool {
    rows.iter().all(|r| r.verdict == Verdict::Within)
}

/// A file name for a scenario's chart: its name with anything but `[A-Za-z0-9_-]` as `_`.
pub fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sim: &[f64], live: &[f64], metric: &str, tol: &Tolerance) -> Row {
        Row::judge("s", "f.toml", "competing", metric, sim, live, tol).unwrap()
    }

    #[test]
    fn the_range_is_widened_by_a_share_of_its_span_plus_the_slack() {
        let r = SimRange::of(&[4.0, 6.0, 8.0]).unwrap();
        assert_eq!((r.min, r.max, r.mean, r.n), (4.0, 8.0, 6.0, 3));
        assert_eq!(r.widened(0.25, 2.0), (1.0, 11.0));
        // Never below 0.
        assert_eq!(r.widened(1.0, 1.0), (0.0, 13.0));
        // A degenerate range is widened by the slack alone.
        let z = SimRange::of(&[0.0; 20]).unwrap();
        assert_eq!(z.widened(0.25, 0.0), (0.0, 0.0));
        assert_eq!(z.widened(0.25, 1.0), (0.0, 1.0));
        assert_eq!(SimRange::of(&[]), None);
    }

    #[test]
    fn a_row_is_within_only_when_every_live_value_is() {
        let t = Tolerance::default();
        // ordering_violations: 3..9, span 6 -> 1.5 + 2 each side: 0..12.5.
        let sim = [3.0, 5.0, 9.0, 4.0];
        let r = row(&sim, &[6.0, 12.0, 0.0], "ordering_violations", &t);
        assert_eq!((r.low, r.high), (0.0, 12.5));
        assert_eq!(r.verdict, Verdict::Within);
        assert_eq!(r.outside(), 0);
        let r = row(&sim, &[6.0, 13.0], "ordering_violations", &t);
        assert_eq!(r.verdict, Verdict::Outside);
        assert_eq!(r.outside(), 1);
        // lost: no slack; every seed 0, one live loss is outside.
        let r = row(&[0.0; 20], &[0.0, 1.0], "lost", &t);
        assert_eq!(r.verdict, Verdict::Outside);
        // Latency: 3.6..4.6 ms (span 1, +0.25 +1 each side) against 10 ms live.
        let r = row(&[3.6, 4.6], &[10.2], "latency_ms.p50", &t);
        assert!((r.high - 5.85).abs() < 1e-9);
        assert_eq!(r.verdict, Verdict::Outside);
        assert_eq!(
            row(&[3.6, 4.6], &[5.8], "latency_ms.p50", &t).verdict,
            Verdict::Within
        );
        // A value that is not a number never agrees.
        assert_eq!(
            row(&[1.0], &[f64::NAN], "duplicates", &t).verdict,
            Verdict::Outside
        );
        assert!(all_within(&[row(&[1.0], &[2.0], "duplicates", &t)]));
        assert!(!all_within(&[
            row(&[1.0], &[2.0], "duplicates", &t),
            row(&[1.0], &[3.0], "duplicates", &t)
        ]));
    }

    #[test]
    fn the_tolerance_is_set_per_metric_or_relative() {
        let mut t = Tolerance::default();
        assert_eq!(t.relative, 0.25);
        assert_eq!(t.absolute("duplicates"), 1.0);
        assert_eq!(t.absolute("lost"), 0.0);
        assert_eq!(t.absolute("no_such"), 0.0);
        t.apply("0.5").unwrap();
        assert_eq!(t.relative, 0.5);
        t.apply("rel=0.1").unwrap();
        assert_eq!(t.relative, 0.1);
        t.apply("latency_ms.p99=20").unwrap();
        assert_eq!(t.absolute("latency_ms.p99"), 20.0);
        assert!(t.apply("latency=3").unwrap_err().contains("unknown metric"));
        assert!(t.apply("duplicates=-1").is_err());
        assert!(t.apply("x").is_err());
        assert!(t.apply("rel=inf").is_err());
        assert!(t.apply("rel=5%").is_err());
        // A share of the simulator's largest value, on top of the absolute slack.
        t.apply("latency_ms.p50=40%").unwrap();
        let r = SimRange::of(&[8.0, 10.0]).unwrap();
        assert_eq!(t.slack("latency_ms.p50", &r), 1.0 + 4.0);
        assert_eq!(t.slack("latency_ms.p99", &r), 20.0);
        t.apply("latency_ms.p50=10%").unwrap();
        assert_eq!(t.slack("latency_ms.p50", &r), 1.0 + 1.0);
        assert!(t.describe().contains("largest value: latency_ms.p50 10%"));
        assert!(t.apply("latency_ms.p50=-3%").is_err());
        let row = Row::judge(
            "s",
            "f",
            "competing",
            "latency_ms.p50",
            &[8.0, 10.0],
            &[11.9],
            &t,
        )
        .unwrap();
        // relative 0.1 (set above): w = 0.1 * 2 + 1 + 10% of 10.
        assert!(
            (row.low - 5.8).abs() < 1e-9 && (row.high - 12.2).abs() < 1e-9,
            "{row:?}"
        );
        assert_eq!(row.verdict, Verdict::Within);
        // Every compared metric has a stated slack.
        for m in METRICS {
            assert!(DEFAULT_ABSOLUTE.iter().any(|(n, _)| *n == m), "{m}");
        }
        assert!(Tolerance::default().describe().contains("25% of its span"));
    }

    #[test]
    fn csv_has_one_row_per_scenario_strategy_and_metric() {
        let t = Tolerance::default();
        let rows = vec![
            row(&[3.0, 9.0], &[6.0, 13.0, 2.0], "ordering_violations", &t),
            row(&[3.6, 4.6], &[10.25], "latency_ms.p50", &t),
        ];
        let text = csv(&rows).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], CSV_HEADER.join(","));
        assert_eq!(
            lines[1],
            "s,f.toml,competing,ordering_violations,2,3,9,6,0,12.5,3,6;13;2,,1,50.0;100.0;0.0,,OUTSIDE"
        );
        assert_eq!(
            lines[2],
            "s,f.toml,competing,latency_ms.p50,2,3.6,4.6,4.1,2.35,5.85,1,10.25,,1,100.0,,OUTSIDE"
        );
        // Read back: every row has every column.
        let mut r = csv::Reader::from_reader(text.as_bytes());
        assert!(r.records().all(|x| x.unwrap().len() == CSV_HEADER.len()));
    }

    /// Live values below their twins in 8 of 8 pairs: flagged (chance 1/256); 5 of 5 is not
    /// (1/32 is above 1%); ties and missing twins are left out; 7 below and 1 above is not.
    #[test]
    fn a_live_side_of_the_twins_beyond_chance_is_flagged() {
        let t = Tolerance::default();
        let with_twins = |live: &[f64], twins: &[Option<f64>]| {
            let mut r = row(&[1.0, 10.0], live, "latency_ms.p50", &t);
            r.paired = twins.to_vec();
            r
        };
        let eight = with_twins(&[1.0; 8], &[Some(2.0); 8]);
        let b = twin_biases(std::slice::from_ref(&eight));
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].side, b[0].k, b[0].n), ("below", 8, 8));
        assert!((b[0].p - 1.0 / 256.0).abs() < 1e-12);
        assert!(findings(&[eight], &t).starts_with("TWIN latency_ms.p50: live below"));
        assert!(twin_biases(&[with_twins(&[1.0; 5], &[Some(2.0); 5])]).is_empty());
        // Ties and missing twins are not pairs: 8 below, 3 tied, 2 without a twin.
        let mut twins = vec![Some(2.0); 8];
        twins.extend([Some(1.0), Some(1.0), Some(1.0), None, None]);
        let b = twin_biases(&[with_twins(&[1.0; 13], &twins)]);
        assert_eq!((b[0].k, b[0].n), (8, 8));
        let mut live = vec![1.0; 7];
        live.push(3.0);
        assert!(twin_biases(&[with_twins(&live, &[Some(2.0); 8])]).is_empty());
    }

    /// Each live value is paired with the simulator's value at its seed (the same workload):
    /// in the row, the table's `sim@seed` column and the CSV; a seed the simulator did not run
    /// shows `-`.
    #[test]
    fn each_live_value_is_paired_with_the_simulator_at_its_seed() {
        let m = |dups: u64| Metrics {
            duplicates: dups,
            ..Metrics::default()
        };
        let sim: Vec<(u64, Metrics)> = (1..=5).map(|s| (s, m(10 * s))).collect();
        let live = vec![(2, m(7)), (9, m(8)), (4, m(41))];
        let rows = rows(
            &["duplicates"],
            "s",
            "f.toml",
            "competing",
            &sim,
            &live,
            &Tolerance::default(),
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].live, vec![7.0, 8.0, 41.0]);
        assert_eq!(rows[0].paired, vec![Some(20.0), None, Some(40.0)]);
        let t = table(&rows);
        assert!(
            t.contains("sim@seed") && t.contains(" 7 8 41 ") && t.contains(" 20 - 40 "),
            "{t}"
        );
        assert!(csv(&rows).unwrap().contains(",7;8;41,20;-;40,"));
    }

    #[test]
    fn each_live_value_has_its_percentile_in_the_simulators_distribution() {
        let sim: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&sim, 0.0), 0.0);
        assert_eq!(percentile(&sim, 21.0), 100.0);
        assert_eq!(percentile(&sim, 10.0), 47.5);
        assert_eq!(percentile(&[0.0; 20], 0.0), 50.0);
        assert_eq!(percentile(&[], 3.0), 50.0);
        assert_eq!(tail_of(10.0), Some("low"));
        assert_eq!(tail_of(10.1), None);
        assert_eq!(tail_of(90.0), Some("high"));
        let t = Tolerance::default();
        // crash-after-apply, single (issue 37): live 1, 1, 2 against the simulator's 4..15.
        let sim = [4.0, 5.0, 7.0, 9.0, 11.0, 15.0];
        let r = row(&sim, &[1.0, 1.0, 2.0], "ordering_violations", &t);
        assert_eq!(r.percentiles, vec![0.0, 0.0, 0.0]);
        assert_eq!(r.tail(), Some("low"));
        assert_eq!(r.verdict, Verdict::Within, "inside the widened band");
        assert_eq!(r.by_tolerance(), 3);
        let line = table(std::slice::from_ref(&r));
        assert!(
            line.lines().nth(1).unwrap().contains("0 0 0  low"),
            "{line}"
        );
        // One run: no tail across runs; spread values: none either.
        assert_eq!(row(&sim, &[1.0], "ordering_violations", &t).tail(), None);
        assert_eq!(
            row(&sim, &[1.0, 20.0], "ordering_violations", &t).tail(),
            None
        );
    }

    #[test]
    fn a_metric_in_the_same_tail_across_runs_and_files_is_flagged() {
        let t = Tolerance::default();
        let sim: Vec<f64> = (4..=15).map(f64::from).collect();
        let mut low = row(&sim, &[1.0, 2.0, 3.0], "ordering_violations", &t);
        low.scenario = "crash-after-apply".into();
        let mut other = row(&sim, &[2.0], "ordering_violations", &t);
        other.scenario = "crash-groups".into();
        let fair = row(&sim, &[9.0, 10.0, 5.0], "duplicates", &t);
        let b = biases(&[low.clone(), other.clone(), fair.clone()]);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(
            (b[0].metric.as_str(), b[0].tail, b[0].k, b[0].n),
            ("ordering_violations", "low", 4, 4)
        );
        assert!((b[0].p - 1e-4).abs() < 1e-12, "{}", b[0].p);
        assert_eq!(
            b[0].rows,
            vec![
                "crash-after-apply/competing (3 of 3)",
                "crash-groups/competing (1 of 1)"
            ]
        );
        // One value in a tail is chance.
        assert!(biases(&[other.clone(), fair.clone()]).is_empty());
        let f = findings(&[low, other, fair], &t);
        assert!(
            f.starts_with(
                "BIAS ordering_violations: 4 of 4 live value(s) in the simulator's low tail"
            ),
            "{f}"
        );
        assert!(
            f.contains("tolerance applied: crash-after-apply competing ordering_violations: live 1 2 3 outside the simulator's 4-15, accepted in 0..19.75 (25% of the span + 2)"),
            "{f}"
        );
        assert!(f.contains("  why ordering_violations: rare events"), "{f}");
        // A value outside the accepted band is not one the tolerance accepted.
        let mixed = findings(&[row(&sim, &[1.0, 30.0], "ordering_violations", &t)], &t);
        assert!(
            mixed.contains("ordering_violations: live 1 outside"),
            "{mixed}"
        );
        assert!(f.contains("rare events counted in single digits"), "{f}");
        assert!(f.contains("20 seeds rarely show the extremes"), "{f}");
        // A tolerance given on the command line says so.
        let mut t = Tolerance::default();
        t.apply("ordering_violations=3").unwrap();
        assert_eq!(
            t.why("ordering_violations"),
            "given on the command line (--tolerance)"
        );
        assert!(t.why("duplicates").starts_with("rare events"));
        // Every metric has a reason.
        for m in metrics_for(true) {
            assert!(!Tolerance::default().why(m).is_empty(), "{m}");
        }
    }

    #[test]
    fn the_table_lines_up_and_names_the_verdict() {
        let t = Tolerance::default();
        let rows = vec![
            row(&[3.0, 9.0], &[6.0], "ordering_violations", &t),
            row(&[0.0], &[0.0, 0.0], "lost", &t),
        ];
        let s = table(&rows);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("strategy"));
        assert!(lines[1].contains("3-9") && lines[1].ends_with("within"));
        assert!(lines[2].contains("0 0") && lines[2].ends_with("within"));
        assert_eq!(num(4.0), "4");
        assert_eq!(num(4.126), "4.13");
        assert_eq!(
            file_stem("calibration-crash groups/x"),
            "calibration-crash_groups_x"
        );
    }

    #[test]
    fn rows_cover_every_metric_both_sides_have() {
        let m = Metrics::default();
        let rs = rows(
            &METRICS,
            "s",
            "f",
            "competing",
            &[(1, m.clone()), (2, m.clone())],
            &[(1, m.clone())],
            &Tolerance::default(),
        );
        assert_eq!(
            rs.iter().map(|r| r.metric.as_str()).collect::<Vec<_>>(),
            METRICS.to_vec()
        );
        assert!(all_within(&rs));
        // With a NACK staged, dead_lettered too, with no slack.
        let mut dl = m.clone();
        dl.dead_lettered = 4;
        let rs = rows(
            &metrics_for(true),
            "s",
            "f",
            "competing",
            &[(1, dl.clone()), (2, dl)],
            &[(1, m)],
            &Tolerance::default(),
        );
        let last = rs.last().unwrap();
        assert_eq!(last.metric, "dead_lettered");
        assert!(!all_within(&rs));
        assert!(Tolerance::default().apply("dead_lettered=1").is_ok());
        assert!(rows(
            &METRICS,
            "s",
            "f",
            "competing",
            &[],
            &[(1, Metrics::default())],
            &Tolerance::default()
        )
        .is_empty());
    }

    #[test]
    fn the_simulator_side_runs_every_seed() {
        let sc = crate::load_text(
            "t",
            r#"
strategies = ["competing"]
[workload]
messages = 50
rate = "100/s"
keys = 3
[[broker]]
name = "a"
[consumers]
count = 2
service = "2ms"
"#,
        )
        .unwrap();
        let ms = sim_runs(&sc, "t", "competing", 1..=5).unwrap();
        assert_eq!(ms.len(), 5);
        assert!(ms.iter().map(|(s, _)| *s).eq(1..=5));
        assert!(ms.iter().all(|(_, m)| m.produced == 50 && m.lost == 0));
        // Deterministic: the same seeds give the same figures.
        assert_eq!(ms, sim_runs(&sc, "t", "competing", 1..=5).unwrap());
    }
}
