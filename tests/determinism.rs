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

/// A few bundled histories pinned by their fingerprint (FNV-1a over every event's JSON line):
/// the runs whose order is the engine's hardest to keep (a poison message failing as it starts
/// behind a dispatch, groups moving at a crash, a broker failover, batch receives). A change to
/// the engine that must keep every history (issue 35's router and what follows it) is checked
/// over every bundled file by `scripts/compare-histories.sh`; these keep the hardest cases in
/// `cargo test`. A change meant to alter one of them updates its number and says why.
#[test]
fn pinned_histories_are_unchanged() {
    common::at_root();
    let pins: [(&str, &str, u64, u64); 6] = [
        (
            "scenarios/artemis-groups.toml",
            "competing",
            1,
            0x9fcc09bc52f18a97,
        ),
        (
            "scenarios/artemis-groups.toml",
            "message_groups",
            1,
            0xbcdc154298b97442,
        ),
        (
            "scenarios/artemis-groups.toml",
            "artemis_groups",
            2,
            0xb265610e99435683,
        ),
        (
            "scenarios/failover.toml",
            "message_groups",
            42,
            0x8843832ad19eca5e,
        ),
        (
            "scenarios/failover.toml",
            "unit_of_order",
            42,
            0xb4dbe16d1dcd083d,
        ),
        (
            "scenarios/db-outage-batch.toml",
            "cache_pessimistic",
            1,
            0xf91f3526f7ee8be4,
        ),
    ];
    let mut changed = Vec::new();
    for (file, strategy, seed, pinned) in pins {
        let sc = ordsim::load(Path::new(file)).unwrap();
        let mut fp = sim::history::Fingerprint::new(false, None);
        common::run_with(&sc, strategy, seed, |e| {
            sim::history::Observer::event(&mut fp, e)
        });
        if fp.hash != pinned {
            changed.push(format!(
                "{file} {strategy} seed {seed}: {:#018x} ({} events)",
                fp.hash, fp.events
            ));
        }
    }
    assert!(
        changed.is_empty(),
        "histories changed:\n{}",
        changed.join("\n")
    );
}
