//! Static membership (issue 38 §4): a Kafka member with `group.instance.id` (`[consumers]
//! restart_takes_over = true`) sends no LeaveGroup when it closes (`AbstractCoordinator.
//! maybeLeaveGroup`, KIP-345): back inside `session.timeout.ms` it causes no rebalance and its
//! partitions wait for it; only the session timeout reassigns them.

use crate::common::history;

use sim::history::{Event, Node};

/// Two members, two partitions; member 0 closes at 5s for `away` (the session timeout: 45s).
fn text(static_member: bool, away: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 3000
rate = "50/s"
keys = 20
[[broker]]
name = "k"
[consumers]
count = 2
commit = "each"
restart_takes_over = {static_member}
service = "2ms"
[strategy.kafka]
partitions = 2
[[fault]]
kind = "consumer_leave"
consumer = 0
at = "5s"
for = "{away}"
"#
    )
}

/// Times at which consumer 0 lost its group membership (a `disconnect` of it).
fn disconnects(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Disconnect {
                t,
                node: Node::Consumer(0),
            } => Some(t),
            _ => None,
        })
        .collect()
}

/// Dispatches to consumer 1 between `from` and `to` of records consumer 0 was given before 5s
/// (its partitions' keys).
fn moved(events: &[Event], from: u64, to: u64) -> usize {
    let keys0: std::collections::BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch {
                t,
                msg,
                consumer: 0,
                ..
            } if t < 5_000_000 => Some(msg.key),
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter(|e| {
            matches!(**e, Event::Dispatch { t, msg, consumer: 1, .. }
                if t > from && t < to && keys0.contains(&msg.key))
        })
        .count()
}

/// Back in 10s: no rebalance (no disconnect, nothing of its partitions goes to the other
/// member), its records wait and are applied when it returns. A dynamic member (the flavour's
/// default) leaves at once and its partitions move.
#[test]
fn a_static_member_back_inside_the_session_timeout_causes_no_rebalance() {
    let (m, events) = history(&text(true, "10s"), "kafka");
    assert!(
        disconnects(&events).is_empty(),
        "{:?}",
        disconnects(&events)
    );
    assert_eq!(moved(&events, 5_000_000, 15_000_000), 0);
    assert_eq!(
        (m.applied, m.pending_at_end, m.ordering_violations),
        (3000, 0, 0)
    );
    // Its records waited: at least the 10s away.
    assert!(m.latency_ms.max >= 9_000.0, "{:?}", m.latency_ms);

    let (_, events) = history(&text(false, "10s"), "kafka");
    let d = disconnects(&events);
    assert!(!d.is_empty() && d[0] < 5_100_000, "{d:?}");
    assert!(moved(&events, 5_000_000, 15_000_000) > 0);
}

/// Away longer than the session timeout (45s): the group drops it then, not before, and its
/// partitions move; it joins again when it comes back.
#[test]
fn a_static_member_away_past_the_session_timeout_is_dropped_at_the_timeout() {
    let (m, events) = history(&text(true, "60s"), "kafka");
    let d = disconnects(&events);
    assert!(
        !d.is_empty() && d[0] >= 50_000_000 && d[0] < 50_100_000,
        "{d:?}"
    );
    assert_eq!(moved(&events, 5_000_000, 50_000_000), 0);
    assert!(moved(&events, 50_000_000, 65_000_000) > 0);
    assert_eq!((m.applied, m.pending_at_end), (3000, 0));
}
