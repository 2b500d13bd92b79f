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

/// One message, poison, one consumer, 1ms redelivery; `top` goes at the top level (before any
/// table) and `redelivery` into `[redelivery]`.
fn poison_run(
    top: &str,
    redelivery: &str,
    persistent: bool,
) -> (sim::Metrics, Vec<u32>, Vec<bool>) {
    let sc = common::scenario(&format!(
        r#"
{top}
strategies = ["single"]
[workload]
messages = 1
rate = "10/s"
keys = 1
poison_fraction = 1.0
[[broker]]
name = "a"
persistent = {persistent}
[consumers]
count = 1
service = "1ms"
[redelivery]
initial_delay = "1ms"
{redelivery}
"#
    ));
    let (mut deliveries, mut blocking) = (Vec::new(), Vec::new());
    let m = common::run_with(&sc, "single", 1, |e| match *e {
        Event::Dispatch { msg, delivery, .. } if msg.id == 0 => deliveries.push(delivery),
        Event::Redelivery {
            msg, blocking: b, ..
        } if msg.id == 0 => blocking.push(b),
        _ => {}
    });
    (m, deliveries, blocking)
}

/// ActiveMQ's `maximumRedeliveries = N` allows N + 1 deliveries; IBM MQ's `BOTHRESH = N` allows
/// N (`BackoutCount >= BOTHRESH`), and `BOTHRESH = 0` disables the backout.
#[test]
fn max_redeliveries_and_backout_threshold_count_deliveries_as_their_brokers_do() {
    let (m, d, _) = poison_run("", "max_redeliveries = 2", true);
    assert_eq!(d, vec![1, 2, 3]);
    assert_eq!(m.poison_dead_lettered, 1);
    let (m, d, _) = poison_run("", "backout_threshold = 2", true);
    assert_eq!(d, vec![1, 2]);
    assert_eq!(m.poison_dead_lettered, 1);
    let (m, d, _) = poison_run("", "backout_threshold = 1", true);
    assert_eq!((d, m.poison_dead_lettered), (vec![1], 1));
    // Defaults: ActiveMQ 6 redeliveries (7 deliveries).
    let (_, d, _) = poison_run("", "", true);
    assert_eq!(d.len(), 7);
}

/// `dead_letter = "drop"` deletes what the broker gives up on: `dropped`, not `dead_lettered`;
/// ActiveMQ drops a non-persistent message by default (and dead-letters a persistent one).
#[test]
fn a_broker_drops_or_dead_letters_what_it_gives_up_on() {
    let (m, _, _) = poison_run("", "max_redeliveries = 1\ndead_letter = \"drop\"", true);
    assert_eq!((m.dropped, m.poison_dropped, m.dead_lettered), (1, 1, 0));
    assert_eq!(m.applied + m.dropped, m.produced);
    let (m, _, _) = poison_run("", "max_redeliveries = 1", false);
    assert_eq!(
        (m.dropped, m.dead_lettered),
        (1, 0),
        "ActiveMQ: non-persistent is dropped"
    );
    let (m, _, _) = poison_run("", "max_redeliveries = 1", true);
    assert_eq!((m.dropped, m.dead_lettered), (0, 1));
    let (m, _, _) = poison_run("", "max_redeliveries = 1\ndead_letter = \"queue\"", false);
    assert_eq!(
        (m.dropped, m.dead_lettered),
        (0, 1),
        "the file overrides the flavour"
    );
}

/// A flavour's defaults apply where `[redelivery]` is silent: Artemis redelivers from the broker
/// (non-blocking) up to 10 deliveries and then drops (no dead-letter address); IBM MQ never backs
/// out by default (BOTHRESH 0).
#[test]
fn flavours_bring_their_brokers_defaults() {
    let (m, d, blocking) = poison_run("flavour = \"artemis\"", "", true);
    assert_eq!(d.len(), 10);
    assert!(
        blocking.iter().all(|b| !b),
        "Artemis holds the message at the broker"
    );
    assert_eq!(m.poison_dropped, 1);
    let (_, _, blocking) = poison_run("", "", true);
    assert!(blocking.iter().all(|&b| b), "ActiveMQ's session holds it");
    let sc = common::scenario(
        &common::base("\"single\"", 1, "").replace("seed = 7", "seed = 7\nflavour = \"ibm_mq\""),
    );
    assert_eq!(
        sc.redelivery_policy().limit,
        sim::scenario::Limit::Unlimited
    );
}
