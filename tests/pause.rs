//! Paused consumers and slow failure detection (issue 13): a process that stops with its
//! connection open is noticed only after `[consumers] failure_detection`; its deliveries then go
//! to another consumer while it still holds the message it was working on, and when it resumes it
//! writes that message anyway: a zombie write.

use crate::common;

use sim::history::{Event, Node};
use sim::scenario::ScenarioBuilder;

/// An exclusive consumer (`single`, standby taking over at once) whose process stops at 5.005s (in the middle of a message) for
/// `pause`, with the broker's failure detection at 30s; keys 1, one message every 100ms.
fn run(pause: &str) -> (sim::Metrics, Vec<Event>) {
    let text = ScenarioBuilder::new(&["single"])
        .evenly(600, "10/s", 1)
        .broker("a")
        .consumers(2, "20ms")
        .with("failure_detection", "30s")
        .fault_for("consumer_pause", "5005ms", pause)
        .with("consumer", 0);
    let sc = common::scenario(&text.to_toml());
    let mut events = Vec::new();
    let m = common::run_with(&sc, "single", 1, |e| events.push(*e));
    (m, events)
}

/// A pause longer than the failure detection: the broker drops the paused consumer at 35s and
/// the standby takes over (redelivering the message in hand and everything after it); at 65s the
/// paused process resumes and writes the message it held: after newer ones (an ordering violation
/// and a stale write) and a second time (a duplicate).
#[test]
fn a_pause_past_the_failure_detection_makes_a_zombie_write() {
    let (m, events) = run("60s");
    let detected = events
        .iter()
        .find_map(|e| match *e {
            Event::Disconnect {
                t,
                node: Node::Consumer(0),
            } => Some(t),
            _ => None,
        })
        .expect("the broker dropped the paused consumer");
    assert_eq!(detected, 35_005_000, "5.005s + failure_detection 30s");
    let zombie = events
        .iter()
        .find_map(|e| match *e {
            Event::Apply {
                t,
                consumer: 0,
                msg,
                ..
            } if t >= 35_000_000 => Some((t, msg)),
            _ => None,
        })
        .expect("the paused consumer wrote after it was dropped");
    assert!(zombie.0 >= 65_000_000, "only once it resumed: {zombie:?}");
    assert!(m.ordering_violations >= 1, "{m:?}");
    assert!(m.stale_writes >= 1);
    assert!(m.duplicates >= 1);
    assert_eq!(m.applied, 600);
    assert_eq!(m.lost + m.pending_at_end, 0);
}

/// A pause shorter than the failure detection only delays: the broker never notices, nothing is
/// redelivered, nothing reorders.
#[test]
fn a_pause_shorter_than_the_failure_detection_only_delays() {
    let (m, events) = run("10s");
    assert!(!events.iter().any(|e| matches!(e, Event::Disconnect { .. })));
    assert_eq!(
        (m.ordering_violations, m.duplicates, m.redeliveries),
        (0, 0, 0)
    );
    assert_eq!(m.applied, 600);
    assert!(m.latency_ms.max >= 9_000.0, "{}", m.latency_ms.max);
}
