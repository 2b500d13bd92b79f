//! Same scenario + seed => the same bytes; different seeds => different histories.

use crate::common;

use ordsim::{report, run_scenario, RunRequest};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

fn json_of(file: &str, seed: Option<u64>, strategies: &[&str]) -> String {
    let path = Path::new(file);
    let sc = ordsim::load(path).unwrap();
    let req = RunRequest {
        seed,
        strategies: strategies.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    report::json(&run_scenario(sc, path, &req, None).unwrap().summary)
}

#[test]
fn same_seed_gives_byte_identical_json() {
    crate::common::at_root();
    let a = json_of("scenarios/failover.toml", Some(3), &[]);
    let b = json_of("scenarios/failover.toml", Some(3), &[]);
    assert_eq!(a, b);
    assert!(a.contains("\"ordering_violations\""));
}

#[test]
fn a_strategy_alone_matches_its_entry_among_others() {
    crate::common::at_root();
    let all: serde_json::Value =
        serde_json::from_str(&json_of("scenarios/failover.toml", Some(5), &[])).unwrap();
    for (i, name) in ["competing", "single"].iter().enumerate() {
        let alone: serde_json::Value =
            serde_json::from_str(&json_of("scenarios/failover.toml", Some(5), &[name])).unwrap();
        assert_eq!(alone["strategies"][0], all["strategies"][i], "{name}");
    }
}

fn history_hash(seed: u64) -> u64 {
    let sc = common::scenario(&common::base("\"competing\"", 4, ""));
    let mut h = DefaultHasher::new();
    common::run_with(&sc, "competing", seed, |e| {
        serde_json::to_string(e).unwrap().hash(&mut h)
    });
    h.finish()
}

#[test]
fn different_seeds_give_different_histories() {
    crate::common::at_root();
    assert_eq!(history_hash(1), history_hash(1));
    assert_ne!(history_hash(1), history_hash(2));
}

#[test]
fn fault_plan_is_the_same_for_every_strategy_and_run() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\", \"single\"",
        3,
        "[[fault]]\nkind = \"consumer_crash\"\nrate = \"6/min\"\nfor = { dist = \"exponential\", mean = \"2s\" }\n",
    );
    let sc = common::scenario(&text);
    let a = sim::FaultPlan::resolve(&sc, 11);
    let b = sim::FaultPlan::resolve(&sc, 11);
    assert_eq!(a, b);
    assert!(!a.faults.is_empty());
    assert_ne!(a, sim::FaultPlan::resolve(&sc, 12));
}
