//! ordsim's engine: a deterministic discrete-event simulation of brokers, producers, consumers and
//! downstream resources, run once per ordering strategy against the same seeded fault plan.
//!
//! Data flows one way: scenario file -> [`scenario::Scenario`] -> [`faults::FaultPlan`] ->
//! [`engine::run`] per strategy -> history ([`history::Event`]s) -> [`checkers::Checkers`] ->
//! [`summary::Metrics`]. Strategies never grade themselves; checkers never look inside strategies.

#![warn(missing_docs)]
// The one exception, with its invariant: `ring.rs`'s unchecked indexing.
#![deny(unsafe_code)]

pub mod checkers;
pub mod dist;
pub mod engine;
pub mod event_queue;
pub mod expect;
pub mod faults;
pub mod hash;
pub mod history;
pub mod metric_defs;
#[allow(unsafe_code)]
pub mod ring;
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

/// Whether `c` must not reach a terminal or a text file raw: a control character, or a
/// bidirectional formatting character (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to
/// U+2069), which reorders the text around it on screen, so a name holding U+202E ("right-to-left
/// override") could make a line of output read as something it does not say.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every character [`is_unsafe_char`] finds, except those `keep` lets through, written
/// as a Rust escape (`\u{1b}`, `\u{202e}`): the one escaping of text from input on its way out
/// (a terminal, a text file, an error message). Borrowed when there is none.
pub fn escape_unsafe(s: &str, keep: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe_char(c) && !keep(c)) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_char(c) && !keep(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}
