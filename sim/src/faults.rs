//! The resolved fault plan: random faults expanded, from the seed, into an explicit schedule before
//! the run. Every strategy of a run faces the same plan; `sim run` prints it; each entry
//! serializes as a scripted `[[fault]]` so a plan can be written back as a standalone scenario.

use crate::dist::{DurDist, DurSpec};
use crate::rng::{stream, Component};
use crate::scenario::{Fault, FaultKind, Scenario};
use crate::time::{Dur, Time};
use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;
use std::fmt;

/// What a planned fault acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A broker, by index.
    Broker(u16),
    /// A consumer.
    Consumer(u32),
    /// A producer.
    Producer(u32),
    /// The target database / the workload (no node).
    World,
}

/// One fault occurrence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedFault {
    /// Kind.
    pub kind: FaultKind,
    /// Start, microseconds.
    pub at: Time,
    /// Length (None: never heals by itself).
    pub duration: Option<Time>,
    /// What it acts on.
    pub target: Target,
    /// slow_consumer factor.
    pub factor: f64,
    /// clock_skew step, signed microseconds.
    pub skew: i64,
    /// poison fraction.
    pub fraction: f64,
    /// Index of the `[[fault]]` entry it came from.
    pub source: usize,
}

/// All fault occurrences of a run, by start time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultPlan {
    /// The occurrences, sorted by (at, source).
    pub faults: Vec<PlannedFault>,
}

/// Safety bound: a random fault entry may expand to at most this many occurrences.
pub const MAX_OCCURRENCES: usize = 1_000_000;

impl FaultPlan {
    /// Expands the scenario's faults with `seed`. Each `[[fault]]` entry draws from its own stream,
    /// so editing one entry does not move the others.
    pub fn resolve(s: &Scenario, seed: u64) -> FaultPlan {
        let window = s
            .run
            .fault_window
            .map_or_else(|| s.expected_production_micros(), |d| d.0);
        let mut faults = Vec::new();
        for (i, f) in s.faults.iter().enumerate() {
            let mut rng = stream(seed, Component::Faults, i as u32, 0);
            if let Some(at) = f.at {
                faults.push(instance(s, f, i, at.0, &mut rng));
            } else if let Some(rate) = f.rate {
                let exp = Exp::new(rate.as_per_sec() / 1e6).expect("validated rate > 0");
                let mut t = 0f64;
                for _ in 0..MAX_OCCURRENCES {
                    t += exp.sample(&mut rng);
                    if t >= window as f64 {
                        break;
                    }
                    faults.push(instance(s, f, i, t as Time, &mut rng));
                }
            }
        }
        faults.sort_by_key(|f| (f.at, f.source));
        FaultPlan { faults }
    }

    /// The plan as scripted `[[fault]]` entries (for writing a plan back as a scenario).
    pub fn as_scripted(&self, s: &Scenario) -> Vec<Fault> {
        self.faults
            .iter()
            .map(|p| Fault {
                kind: p.kind,
                at: Some(Dur(p.at)),
                rate: None,
                duration: p
                    .duration
                    .map(|d| DurSpec(DurDist::Constant { value: Dur(d) })),
                broker: match p.target {
                    Target::Broker(b) => Some(s.brokers[b as usize].name.clone()),
                    _ => None,
                },
                consumer: match p.target {
                    Target::Consumer(c) => Some(c),
                    _ => None,
                },
                producer: match p.target {
                    Target::Producer(x) => Some(x),
                    _ => None,
                },
                factor: (p.kind == FaultKind::SlowConsumer).then_some(p.factor),
                skew: (p.kind == FaultKind::ClockSkew).then_some(Dur(p.skew.unsigned_abs())),
                ahead: (p.kind == FaultKind::ClockSkew).then_some(p.skew >= 0),
                fraction: (p.kind == FaultKind::Poison).then_some(p.fraction),
            })
            .collect()
    }

    /// Human-readable lines, one per occurrence.
    pub fn describe(&self, s: &Scenario) -> Vec<String> {
        self.faults.iter().map(|p| p.describe(s)).collect()
    }
}

fn instance<R: Rng>(s: &Scenario, f: &Fault, source: usize, at: Time, rng: &mut R) -> PlannedFault {
    // Draw order is fixed: duration, then target.
    let duration = f.duration.as_ref().map(|d| d.0.sampler().sample(rng));
    let target = match f.kind {
        FaultKind::BrokerCrash => Target::Broker(match &f.broker {
            Some(n) => s.broker_index(n).expect("validated broker name") as u16,
            None => rng.random_range(0..s.brokers.len()) as u16,
        }),
        FaultKind::ConsumerCrash | FaultKind::NetworkBlip | FaultKind::SlowConsumer => {
            Target::Consumer(
                f.consumer
                    .unwrap_or_else(|| rng.random_range(0..s.consumers.count)),
            )
        }
        FaultKind::ClockSkew => Target::Producer(
            f.producer
                .unwrap_or_else(|| rng.random_range(0..s.producers.count)),
        ),
        FaultKind::DbOutage
        | FaultKind::Poison
        | FaultKind::SourceOutage
        | FaultKind::CacheCollapse => Target::World,
    };
    let skew = f.skew.map_or(0, |d| d.0.min(i64::MAX as u64) as i64);
    PlannedFault {
        kind: f.kind,
        at,
        duration,
        target,
        factor: f.factor.unwrap_or(1.0),
        skew: if f.ahead.unwrap_or(true) { skew } else { -skew },
        fraction: f.fraction.unwrap_or(0.0),
        source,
    }
}

impl PlannedFault {
    /// One line: `t=10s broker_crash broker a for 30s`.
    pub fn describe(&self, s: &Scenario) -> String {
        let mut line = format!("t={} {}", Dur(self.at), self.kind.name());
        match self.target {
            Target::Broker(b) => line.push_str(&format!(" broker {}", s.brokers[b as usize].name)),
            Target::Consumer(c) => line.push_str(&format!(" consumer {c}")),
            Target::Producer(p) => line.push_str(&format!(" producer {p}")),
            Target::World => {}
        }
        match self.kind {
            FaultKind::SlowConsumer => line.push_str(&format!(" x{}", self.factor)),
            FaultKind::ClockSkew => line.push_str(&format!(
                " {}{}",
                if self.skew < 0 { "-" } else { "+" },
                Dur(self.skew.unsigned_abs())
            )),
            FaultKind::Poison => line.push_str(&format!(" fraction {}", self.fraction)),
            _ => {}
        }
        match self.duration {
            Some(d) => line.push_str(&format!(" for {}", Dur(d))),
            None if self.kind == FaultKind::CacheCollapse => {}
            None => line.push_str(" (never heals)"),
        }
        line
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} fault(s)", self.faults.len())
    }
}
