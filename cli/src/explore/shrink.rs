//! Shrinking a failing case: greedy passes over reduction steps until none still fails (a local
//! minimum), and the reduction steps of a scenario.
//!
//! [`shrink`] is generic: a value, its candidate reductions ([`Shrink::candidates`], in order of
//! preference) and a predicate "still fails". Each round tries the candidates of the current
//! value in order (`jobs` at a time, in parallel; the first that fails *in order* is taken, so the
//! result does not depend on `jobs`) and starts again from the one taken; it stops when no
//! candidate fails (a local minimum) or the run budget is spent.

use rayon::prelude::*;
use sim::dist::{DurDist, DurSpec};
use sim::scenario::{Arrival, KeyDistribution};
use sim::time::{Dur, Rate};
use sim::Scenario;

/// A value that has smaller versions of itself.
pub trait Shrink: Clone + Send + Sync {
    /// The values one reduction step away, each with a few words saying what the step did, most
    /// promising first. Every candidate must be strictly smaller by some well-founded measure, so
    /// that shrinking ends.
    fn candidates(&self) -> Vec<(String, Self)>;
}

/// What [`shrink`] found.
#[derive(Clone, Debug)]
pub struct Shrunk<T> {
    /// The smallest failing value found.
    pub value: T,
    /// The steps taken, in order.
    pub steps: Vec<String>,
    /// Candidates tried (each one run of the predicate).
    pub tries: u64,
    /// Whether no single step of `value` still fails (false: the budget ran out first).
    pub local_minimum: bool,
}

/// Shrinks `start` (which fails) while `fails` holds, trying at most `budget` candidates, `jobs`
/// at a time. The result depends on neither `jobs` nor timing.
pub fn shrink<T: Shrink>(
    start: T,
    fails: &(dyn Fn(&T) -> bool + Sync),
    jobs: usize,
    budget: u64,
) -> Shrunk<T> {
    let jobs = jobs.max(1);
    let mut value = start;
    let mut steps = Vec::new();
    let mut tries = 0u64;
    'rounds: loop {
        let cands = value.candidates();
        for window in cands.chunks(jobs) {
            if tries >= budget {
                return Shrunk {
                    value,
                    steps,
                    tries,
                    local_minimum: false,
                };
            }
            let window = &window[..window.len().min((budget - tries) as usize)];
            let verdicts: Vec<bool> = window.par_iter().map(|(_, c)| fails(c)).collect();
            match verdicts.iter().position(|&f| f) {
                Some(i) => {
                    // Only the candidates up to the one taken count: a sequential search would
                    // have stopped there.
                    tries += i as u64 + 1;
                    let (what, c) = window[i].clone();
                    steps.push(what);
                    value = c;
                    continue 'rounds;
                }
                None => tries += window.len() as u64,
            }
        }
        return Shrunk {
            value,
            steps,
            tries,
            local_minimum: true,
        };
    }
}

/// A failing scenario: the scenario and the seed it fails with (the seed never changes while
/// shrinking: each candidate is the same run, made smaller).
#[derive(Clone, Debug)]
pub struct Case {
    /// The scenario (its faults scripted).
    pub sc: Scenario,
    /// The run's seed.
    pub seed: u64,
}

/// A fault is tried at `k / MOVES` of its time, for every k below MOVES.
const MOVES: u64 = 32;

fn halve_dist(d: &DurSpec) -> Option<DurSpec> {
    match d.0 {
        DurDist::Constant { value } if value.0 > 1000 => Some(DurSpec(DurDist::Constant {
            value: Dur(value.0 / 2),
        })),
        _ => None,
    }
}

fn constant_of(d: &DurSpec) -> Option<DurSpec> {
    match d.0 {
        DurDist::Constant { .. } => None,
        ref other => Some(DurSpec(DurDist::Constant {
            value: Dur(other.mean_micros().round() as u64),
        })),
    }
}

impl Case {
    fn with(&self, f: impl FnOnce(&mut Scenario)) -> Case {
        let mut c = self.clone();
        f(&mut c.sc);
        c
    }

    /// Fewer consumers: `n` of them; fault targets beyond are folded onto the ones left.
    fn consumers(&self, n: u32) -> Case {
        self.with(|sc| {
            sc.consumers.count = n;
            if let Some(names) = &mut sc.consumers.names {
                names.truncate(n as usize);
            }
            for f in &mut sc.faults {
                if let Some(c) = &mut f.consumer {
                    *c %= n;
                }
            }
        })
    }

    /// Fewer producers, likewise.
    fn producers(&self, n: u32) -> Case {
        self.with(|sc| {
            sc.producers.count = n;
            if let Some(names) = &mut sc.producers.names {
                names.truncate(n as usize);
            }
            for f in &mut sc.faults {
                if let Some(p) = &mut f.producer {
                    *p %= n;
                }
            }
        })
    }
}

impl Shrink for Case {
    fn candidates(&self) -> Vec<(String, Case)> {
        let sc = &self.sc;
        let mut out: Vec<(String, Case)> = Vec::new();
        let desc = |i: usize| {
            let f = &sc.faults[i];
            format!(
                "fault {} at {}",
                f.kind.name(),
                f.at.map_or("?".into(), |d| d.readable())
            )
        };
        // Fewer faults.
        for i in 0..sc.faults.len() {
            out.push((
                format!("drop {}", desc(i)),
                self.with(|s| {
                    s.faults.remove(i);
                }),
            ));
        }
        // Fewer messages: the first half, the last half (faults moved as much earlier), the first
        // half over the same span (at half the rate), three quarters, one less.
        let m = sc.workload.messages;
        if m > 1 {
            let half = m / 2;
            out.push((
                format!("messages {m} -> {half} (the first half)"),
                self.with(|s| s.workload.messages = half),
            ));
            let shift = (half as f64 / sc.workload.rate.as_per_sec() * 1e6) as u64;
            out.push((
                format!("messages {m} -> {} (the last half)", m - half),
                self.with(|s| {
                    s.workload.messages = m - half;
                    for f in &mut s.faults {
                        if let Some(at) = &mut f.at {
                            at.0 = at.0.saturating_sub(shift);
                        }
                    }
                }),
            ));
            out.push((
                format!("messages {m} -> {half} over the same time (half the rate)"),
                self.with(|s| {
                    s.workload.messages = half;
                    s.workload.rate = Rate::per_sec(s.workload.rate.as_per_sec() / 2.0);
                }),
            ));
            for d in [4, 8, 16] {
                if m >= d {
                    out.push((
                        format!("messages {m} -> {}", m - m / d),
                        self.with(|s| s.workload.messages = m - m / d),
                    ));
                }
            }
            out.push((
                format!("messages {m} -> {}", m - 1),
                self.with(|s| s.workload.messages = m - 1),
            ));
        }
        let k = sc.workload.keys;
        if k > 1 {
            out.push((
                format!("keys {k} -> {}", k / 2),
                self.with(|s| s.workload.keys = k / 2),
            ));
            if k > 2 {
                out.push((
                    format!("keys {k} -> {}", k - 1),
                    self.with(|s| s.workload.keys = k - 1),
                ));
            }
        }
        let c = sc.consumers.count;
        if c > 1 {
            out.push((format!("consumers {c} -> {}", c / 2), self.consumers(c / 2)));
            if c > 2 {
                out.push((format!("consumers {c} -> {}", c - 1), self.consumers(c - 1)));
            }
        }
        let p = sc.producers.count;
        if p > 1 {
            out.push((format!("producers {p} -> {}", p / 2), self.producers(p / 2)));
            if p > 2 {
                out.push((format!("producers {p} -> {}", p - 1), self.producers(p - 1)));
            }
        }
        // The structural steps so far (messages, keys, consumers, producers), to combine with a
        // moved fault below.
        let structural = out.len() - sc.faults.len();
        let pf = sc.consumers.prefetch;
        if pf > 1 {
            out.push((
                format!("prefetch {pf} -> {}", pf / 2),
                self.with(|s| s.consumers.prefetch = pf / 2),
            ));
        }
        // Shorter and earlier faults; times rounded to the millisecond.
        for i in 0..sc.faults.len() {
            if let Some(d) = sc.faults[i].duration.as_ref().and_then(halve_dist) {
                out.push((
                    format!("{} half as long", desc(i)),
                    self.with(|s| s.faults[i].duration = Some(d)),
                ));
            }
            if let Some(at) = sc.faults[i].at.filter(|a| a.0 > 0) {
                // Earlier: at 1/32, 2/32, ... 31/32 of its time (a failure that needs a
                // coincidence at the fault's instant may find one earlier, and then fewer messages
                // do).
                for k in 1..MOVES {
                    let t = at.0 / MOVES * k;
                    out.push((
                        format!("{} moved to {}", desc(i), Dur(t).readable()),
                        self.with(|s| s.faults[i].at = Some(Dur(t))),
                    ));
                }
                if at.0 % 1000 != 0 {
                    out.push((
                        format!("{} rounded to the millisecond", desc(i)),
                        self.with(|s| s.faults[i].at = Some(Dur(at.0 / 1000 * 1000))),
                    ));
                }
            }
            if let Some(DurDist::Constant { value }) = sc.faults[i].duration.as_ref().map(|d| &d.0)
            {
                if value.0 % 1000 != 0 && value.0 > 1000 {
                    let v = Dur(value.0 / 1000 * 1000);
                    out.push((
                        format!("{} lasting whole milliseconds", desc(i)),
                        self.with(|s| {
                            s.faults[i].duration = Some(DurSpec(DurDist::Constant { value: v }))
                        }),
                    ));
                }
            }
        }
        // Constant distributions.
        if let Some(d) = constant_of(&sc.consumers.service) {
            out.push((
                "a constant service time".into(),
                self.with(|s| s.consumers.service = d),
            ));
        }
        if sc.workload.arrival != Arrival::Constant {
            out.push((
                "evenly spaced arrivals".into(),
                self.with(|s| s.workload.arrival = Arrival::Constant),
            ));
        }
        if sc.workload.key_distribution != KeyDistribution::Uniform {
            out.push((
                "uniform keys".into(),
                self.with(|s| {
                    s.workload.key_distribution = KeyDistribution::Uniform;
                    s.workload.zipf_exponent = None;
                }),
            ));
        }
        for i in 0..sc.faults.len() {
            if let Some(d) = sc.faults[i].duration.as_ref().and_then(constant_of) {
                out.push((
                    format!("{} of constant length", desc(i)),
                    self.with(|s| s.faults[i].duration = Some(d)),
                ));
            }
        }
        if sc.workload.poison_fraction > 0.0 {
            out.push((
                "no poison messages".into(),
                self.with(|s| s.workload.poison_fraction = 0.0),
            ));
        }
        if sc.workload.group_header_missing > 0.0 {
            out.push((
                "every message with its group header".into(),
                self.with(|s| s.workload.group_header_missing = 0.0),
            ));
        }
        // Last, two steps at once: a structural step with one fault moved earlier. A failure
        // that needs a coincidence at the fault's instant (two messages of a key in flight) is
        // lost by a step that changes which messages are where, and may be found again nearby.
        let mut compound = Vec::new();
        for (what, c) in out.iter().skip(sc.faults.len()).take(structural) {
            for i in 0..c.sc.faults.len() {
                let Some(at) = c.sc.faults[i].at.filter(|a| a.0 > 0) else {
                    continue;
                };
                for k in 1..COMPOUND_MOVES {
                    let t = at.0 / COMPOUND_MOVES * k;
                    let mut moved = c.clone();
                    moved.sc.faults[i].at = Some(Dur(t));
                    compound.push((
                        format!("{what}, with fault {} moved to {}", i, Dur(t).readable()),
                        moved,
                    ));
                }
            }
        }
        out.extend(compound);
        out
    }
}

/// With a structural step, a fault is tried at `k / COMPOUND_MOVES` of its time.
const COMPOUND_MOVES: u64 = 32;

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy: a list of numbers; steps drop one element or halve one.
    #[derive(Clone, Debug, PartialEq)]
    struct Toy(Vec<u32>);

    impl Shrink for Toy {
        fn candidates(&self) -> Vec<(String, Toy)> {
            let mut out = Vec::new();
            for i in 0..self.0.len() {
                let mut v = self.0.clone();
                v.remove(i);
                out.push((format!("drop {i}"), Toy(v)));
            }
            for i in 0..self.0.len() {
                if self.0[i] > 0 {
                    let mut v = self.0.clone();
                    v[i] /= 2;
                    out.push((format!("halve {i}"), Toy(v)));
                }
            }
            out
        }
    }

    /// "Fails" when the sum is at least 10 and some element is odd.
    fn fails(t: &Toy) -> bool {
        t.0.iter().sum::<u32>() >= 10 && t.0.iter().any(|x| x % 2 == 1)
    }

    #[test]
    fn shrinking_reaches_a_local_minimum_whatever_the_jobs() {
        let start = Toy(vec![40, 7, 3, 100, 2, 9]);
        let one = shrink(start.clone(), &fails, 1, 10_000);
        assert!(one.local_minimum);
        assert!(fails(&one.value));
        // A local minimum: no single step still fails.
        assert!(one.value.candidates().iter().all(|(_, c)| !fails(c)));
        assert!(one.value.0.len() <= 2, "{:?}", one.value);
        for jobs in [2, 3, 8] {
            let j = shrink(start.clone(), &fails, jobs, 10_000);
            assert_eq!(j.value, one.value, "jobs {jobs}");
            assert_eq!(j.steps, one.steps, "jobs {jobs}");
            assert_eq!(j.tries, one.tries, "jobs {jobs}");
        }
    }

    #[test]
    fn the_budget_stops_shrinking() {
        let s = shrink(Toy(vec![40, 7, 3, 100, 2, 9]), &fails, 2, 3);
        assert!(!s.local_minimum);
        assert!(s.tries <= 3);
        assert!(fails(&s.value));
    }
}
