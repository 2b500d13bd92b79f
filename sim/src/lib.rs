//! ordsim's engine: a deterministic discrete-event simulation of brokers, producers, consumers and
//! downstream resources, run once per ordering strategy against the same seeded fault plan.
//!
//! Data flows one way: scenario file -> [`scenario::Scenario`] -> [`faults::FaultPlan`] ->
//! [`engine::run`] per strategy -> history ([`history::Event`]s) -> [`checkers::Checkers`] ->
//! [`summary::Metrics`]. Strategies never grade themselves; checkers never look inside strategies.

#![warn(missing_docs)]

pub mod checkers;
pub mod dist;
pub mod engine;
pub mod event_queue;
pub mod expect;
pub mod faults;
pub mod hash;
pub mod history;
pub mod metric_defs;
pub mod rng;
pub mod scenario;
pub mod strategy;
pub mod suggest;
pub mod summary;
pub mod time;
pub mod verdict;

pub use engine::{run, RunError, RunOptions};
pub use faults::FaultPlan;
pub use scenario::Scenario;
pub use summary::{Metrics, ParamValue, Params, RunSummary, Status, StrategySummary};
