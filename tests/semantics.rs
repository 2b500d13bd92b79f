//! Faithful semantics (issue 12): each test pins a behaviour of the real brokers that the model
//! once got wrong, and fails on the old behaviour.

use crate::common;

use sim::history::Event;

/// A non-persistent broker crashes while the consumer is writing a message: the broker's copy is
/// gone, but the consumer still applies it. Applied wins: nothing lost, nothing duplicated (it
/// used to count lost 1 and duplicate 1); the messages the broker held in its queue are lost.
#[test]
fn applied_wins_over_a_broker_copy_lost_in_a_crash() {
    let sc = common::scenario(
        r#"
strategies = ["single"]
[workload]
messages = 20
rate = "4/s"
keys = 1
[[broker]]
name = "a"
persistent = false
[consumers]
count = 1
prefetch = 1
service = { dist = "constant", value = "800ms" }
[[fault]]
kind = "broker_crash"
broker = "a"
at = "2500ms"
for = "100ms"
"#,
    );
    let mut in_hand_at_crash = None;
    let mut serving = None;
    let mut discarded = Vec::new();
    let m = common::run_with(&sc, "single", 1, |e| match *e {
        Event::Start { msg, .. } => serving = Some(msg.id),
        Event::Apply { msg, .. } if serving == Some(msg.id) => serving = None,
        Event::Crash { .. } => in_hand_at_crash = serving,
        Event::Discard { msg, .. } => discarded.push(msg.id),
        _ => {}
    });
    let in_hand = in_hand_at_crash.expect("the consumer was applying a message at the crash");
    // The history says what the broker did: its copy of the message in hand is discarded too.
    assert!(discarded.contains(&in_hand), "{discarded:?}");
    assert!(discarded.len() >= 2, "the crash also took queued messages");
    // The checker judges: the message in hand was applied, the others are lost.
    assert_eq!(m.duplicates, 0);
    assert_eq!(m.lost, discarded.len() as u64 - 1);
    assert_eq!(m.applied + m.lost, m.produced);
}

/// The README's strategy table names, for each strategy, the figure its guarantee is about, as
/// the registry says (`sim list` prints the same).
#[test]
fn the_readme_names_each_strategys_guarantee() {
    common::at_root();
    let readme = std::fs::read_to_string("README.md").unwrap();
    for i in strategies::ALL {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", i.name)))
            .unwrap_or_else(|| panic!("no README row for {}", i.name));
        let cells: Vec<&str> = row.split(" | ").collect();
        assert_eq!(cells[2], format!("`{}`", i.guarantee), "{row}");
    }
}
