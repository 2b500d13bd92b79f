//! ordsim's ordering strategies, one file each: a dispatch policy (broker side) plus a handler
//! (consumer side), behind the [`sim::strategy::Strategy`] interface.
//!
//! This crate also holds the registry: names, one-line descriptions, parameter checks, and
//! [`run_named`], which monomorphizes the engine for the named strategy (no dynamic dispatch in the
//! event loop).

pub mod competing;
pub mod single;

use serde::de::DeserializeOwned;
use sim::history::Observer;
use sim::scenario::{FieldError, PathSeg, Scenario};
use sim::{FaultPlan, RunError, RunOptions, Status, StrategySummary};

pub use competing::Competing;
pub use single::Single;

/// A strategy's name and what it models.
#[derive(Clone, Copy, Debug)]
pub struct Info {
    /// Name as written in scenario files.
    pub name: &'static str,
    /// One line for `sim list`.
    pub summary: &'static str,
}

/// Every strategy, in the order `sim list` shows them.
pub const ALL: &[Info] = &[
    Info {
        name: "competing",
        summary: "baseline: round-robin to all consumers, plain apply; reorders as soon as c > 1",
    },
    Info {
        name: "single",
        summary:
            "exclusive consumer + standby after takeover_delay; order hinges on blocking redelivery",
    },
];

/// Whether `name` is a known strategy.
pub fn is_known(name: &str) -> bool {
    ALL.iter().any(|i| i.name == name)
}

fn params<T: DeserializeOwned + Default>(sc: &Scenario, name: &str) -> Result<T, FieldError> {
    match sc.strategy.get(name) {
        None => Ok(T::default()),
        Some(t) => t.clone().try_into().map_err(|e: toml::de::Error| {
            FieldError::new(
                vec![PathSeg::from("strategy"), PathSeg::from(name)],
                e.message().trim().to_string(),
            )
        }),
    }
}

/// Checks strategy names and `[strategy.NAME]` tables; used by the scenario loader.
pub fn validate(sc: &Scenario) -> Vec<FieldError> {
    let known = ALL.iter().map(|i| i.name).collect::<Vec<_>>().join(", ");
    let mut errs = Vec::new();
    for (i, name) in sc.strategies.iter().enumerate() {
        if !is_known(name) {
            errs.push(FieldError::new(
                vec![PathSeg::from("strategies"), PathSeg::Index(i)],
                format!("unknown strategy {name:?} (known: {known})"),
            ));
        }
    }
    for name in sc.strategy.keys() {
        let check = match name.as_str() {
            "single" => params::<single::SingleParams>(sc, name).err(),
            "competing" => params::<NoParams>(sc, name).err(),
            _ => Some(FieldError::new(
                vec![PathSeg::from("strategy"), PathSeg::from(name.as_str())],
                format!("no strategy named {name:?} takes parameters (known: {known})"),
            )),
        };
        errs.extend(check);
    }
    errs
}

/// A strategy without parameters accepts only an empty table.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

/// Runs the named strategy on the scenario and its plan. Unknown names and bad parameters were
/// rejected by [`validate`] when the scenario was loaded.
pub fn run_named<O: Observer>(
    name: &str,
    sc: &Scenario,
    plan: &FaultPlan,
    opts: &RunOptions,
    observer: &mut O,
) -> Result<StrategySummary, RunError> {
    let brokers = sc.brokers.len();
    let metrics = match name {
        "competing" => sim::run(sc, plan, Competing::new(brokers), opts, observer)?,
        "single" => {
            let p = params(sc, name).unwrap_or_default();
            sim::run(sc, plan, Single::new(brokers, p), opts, observer)?
        }
        other => {
            return Ok(StrategySummary {
                strategy: other.to_string(),
                status: Status::NotApplicable,
                reason: Some(format!("unknown strategy {other:?}")),
                metrics: None,
            })
        }
    };
    Ok(StrategySummary {
        strategy: name.to_string(),
        status: Status::Ok,
        reason: None,
        metrics: Some(metrics),
    })
}

/// Helpers for the strategies' own tests: run a scenario written inline.
#[cfg(test)]
pub(crate) mod test_util {
    use sim::{FaultPlan, Metrics, RunOptions, Scenario};

    /// Loads a scenario from TOML text, with the strategy checks.
    pub fn scenario(text: &str) -> Scenario {
        sim::scenario::load_str("test.toml", text, &super::validate)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs one strategy with `seed`.
    pub fn run(sc: &Scenario, strategy: &str, seed: u64) -> Metrics {
        let plan = FaultPlan::resolve(sc, seed);
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        super::run_named(strategy, sc, &plan, &opts, &mut sim::history::NoObserver)
            .unwrap_or_else(|e| panic!("{e}"))
            .metrics
            .expect("applicable")
    }

    /// One broker, `consumers` consumers with exponential service of mean 10ms, prefetch 1,
    /// `rate` per second, 50 keys, 3000 messages, plus `extra` TOML.
    pub fn simple(strategies: &str, consumers: u32, rate: u32, extra: &str) -> Scenario {
        scenario(&format!(
            r#"
strategies = [{strategies}]
[workload]
messages = 3000
rate = "{rate}/s"
keys = 50
[[broker]]
name = "a"
[consumers]
count = {consumers}
service = {{ dist = "exponential", mean = "10ms" }}
{extra}
"#
        ))
    }
}
