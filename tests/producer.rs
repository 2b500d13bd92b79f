//! Producer sends that fail (issue 14): the `send_error` fault and `[producers] max_in_flight`,
//! `idempotence`, `retry_backoff`. A failed send is retried after the backoff; without
//! idempotence and with more than one send in flight, up to `max_in_flight - 1` later sends are
//! stored before it (Kafka's "risk of message reordering after a failed send due to retries").

use crate::common::{self, send_failures, stored_order};

use sim::history::Event;

/// Runs `strategy` on `text` with `seed`, keeping the history.
fn history(text: &str, strategy: &str, seed: u64) -> (sim::Metrics, Vec<Event>) {
    let sc = common::scenario(text);
    let mut events = Vec::new();
    let m = common::run_with(&sc, strategy, seed, |e| events.push(*e));
    (m, events)
}

/// [`common::one_key`] with the broker as it is.
fn one_key(producers: &str, faults: &str) -> String {
    common::one_key(producers, "", faults)
}

/// A window around exactly one send (the one produced at 500ms), every send in it failing.
const ONE_SEND_FAILS: &str = r#"
[[fault]]
kind = "send_error"
at = "450ms"
for = "100ms"
"#;

/// How many later messages (higher seqs) were stored before `seq`.
fn overtaken_by(order: &[u32], seq: u32) -> usize {
    let at = order.iter().position(|&s| s == seq).expect("stored");
    order[..at].iter().filter(|&&s| s > seq).count()
}

/// The message produced at 500ms (seq 4: the first arrival is at 100ms).
fn failed_seq(events: &[Event]) -> u32 {
    events
        .iter()
        .find_map(|e| match *e {
            Event::Produce {
                t: 500_000, msg, ..
            } => Some(msg.seq),
            _ => None,
        })
        .expect("a message at 500ms")
}

/// (a) No idempotence, 5 in flight: the 4 sends after the failed one are stored before its retry
/// (1s later); the 5th and later wait behind it. `single` then applies it after them.
#[test]
fn without_idempotence_the_failed_send_lands_after_max_in_flight_minus_one_later_ones() {
    for mif in [2u32, 3, 5] {
        let text = one_key(
            &format!("max_in_flight = {mif}\nidempotence = false\nretry_backoff = \"1s\""),
            ONE_SEND_FAILS,
        );
        let (m, events) = history(&text, "single", 1);
        let failed = failed_seq(&events);
        assert_eq!(send_failures(&events), [(500_000, failed)], "mif {mif}");
        let order = stored_order(&events);
        assert_eq!(order.len(), 30);
        // Exactly max_in_flight - 1 later messages overtook it; nothing else is out of order.
        assert_eq!(overtaken_by(&order, failed), mif as usize - 1, "{order:?}");
        let mut expected: Vec<u32> = (0..30).filter(|&s| s != failed).collect();
        expected.insert(failed as usize + mif as usize - 1, failed);
        assert_eq!(order, expected, "mif {mif}");
        assert!(m.ordering_violations > 0, "mif {mif}: {m:?}");
        assert_eq!(m.applied, 30);
        assert_eq!(m.coverage.send_failures, 1);
        // Stored at its retry, one backoff after the failure.
        let retried = events.iter().find_map(|e| match *e {
            Event::Enqueue { t, msg, .. } if msg.seq == failed => Some(t),
            _ => None,
        });
        assert_eq!(retried, Some(1_500_000));
    }
}

/// (b) With idempotence the retry keeps its place: everything after it waits, stored in
/// production order, no violation; the failure is in the history.
#[test]
fn with_idempotence_later_sends_wait_behind_the_failed_one() {
    let text = one_key(
        "max_in_flight = 5\nidempotence = true\nretry_backoff = \"1s\"",
        ONE_SEND_FAILS,
    );
    let (m, events) = history(&text, "single", 1);
    assert_eq!(send_failures(&events).len(), 1);
    assert_eq!(stored_order(&events), (0..30).collect::<Vec<_>>());
    assert_eq!(m.ordering_violations, 0);
    assert_eq!(m.applied, 30);
    assert_eq!(m.coverage.send_failures, 1);
}

/// (c) One send in flight (the default, a synchronous JMS send): the same as idempotence.
#[test]
fn one_send_in_flight_keeps_order() {
    for producers in [
        "max_in_flight = 1\nretry_backoff = \"1s\"",
        // Every JMS flavour's default: 1 in flight, no idempotence, the reconnect delay.
        "reconnect_delay = \"1s\"",
    ] {
        let (m, events) = history(&one_key(producers, ONE_SEND_FAILS), "single", 1);
        assert_eq!(send_failures(&events).len(), 1, "{producers}");
        assert_eq!(stored_order(&events), (0..30).collect::<Vec<_>>());
        assert_eq!(m.ordering_violations, 0);
        assert_eq!(m.applied, 30);
        let retried = events.iter().find_map(|e| match *e {
            Event::Enqueue { t, msg, .. } if msg.seq == 4 => Some(t),
            _ => None,
        });
        assert_eq!(retried, Some(1_500_000), "{producers}");
    }
}

/// A send that fails again on its retry waits another backoff; a window of several failing sends
/// with 3 in flight: the first failure opens the window, the next 2 sends (failing too) use it,
/// the rest wait; every message is stored once and applied.
#[test]
fn retries_fail_again_inside_the_window() {
    let text = one_key(
        "max_in_flight = 3\nretry_backoff = \"300ms\"",
        r#"
[[fault]]
kind = "send_error"
at = "450ms"
for = "1s"
"#,
    );
    let (m, events) = history(&text, "single", 1);
    let fails = send_failures(&events);
    // 500, 600, 700ms fail (the window's first and the two in flight with it); the retries at
    // 800ms and 1.1s fail again; at 1.4s the window has ended and everything goes, in order.
    assert_eq!(fails.first(), Some(&(500_000, 4)));
    assert!(fails.iter().all(|&(t, _)| t < 1_450_000), "{fails:?}");
    assert!(fails.len() > 3, "{fails:?}");
    assert_eq!(stored_order(&events), (0..30).collect::<Vec<_>>());
    assert_eq!(m.applied, 30);
    assert_eq!(m.produced, 30);
}

/// (d) `fraction = 0`: nothing fails, and the history is the one without the fault.
#[test]
fn fraction_zero_changes_nothing() {
    let producers = "max_in_flight = 5\nretry_backoff = \"1s\"";
    let with = one_key(
        producers,
        "[[fault]]\nkind = \"send_error\"\nat = \"0s\"\nfor = \"10s\"\nfraction = 0.0",
    );
    let (m, events) = history(&with, "single", 3);
    let (m0, events0) = history(&one_key(producers, ""), "single", 3);
    assert!(send_failures(&events).is_empty());
    // The same, but for when the drain begins (the fault's window keeps the fault phase open).
    let no_drain = |e: &Vec<Event>| -> Vec<Event> {
        e.iter()
            .filter(|e| !matches!(e, Event::DrainStart { .. }))
            .copied()
            .collect()
    };
    assert!(
        no_drain(&events) == no_drain(&events0),
        "the histories differ"
    );
    assert_eq!(m.applied, m0.applied);
    assert_eq!(m.ordering_violations, 0);
    assert_eq!(m.latency_ms, m0.latency_ms);
}

/// A fraction draws from the producer's own seeded stream: the same seed gives the same history,
/// another seed other failures; every message is still accounted for.
#[test]
fn failures_are_drawn_deterministically() {
    let text = common::base(
        "\"competing\", \"single\"",
        2,
        r#"
[producers]
count = 2
max_in_flight = 5
retry_backoff = "50ms"
[[fault]]
kind = "send_error"
at = "2s"
for = "10s"
fraction = 0.3
"#,
    );
    let (a, ea) = history(&text, "single", 11);
    let (b, eb) = history(&text, "single", 11);
    let (_, ec) = history(&text, "single", 12);
    assert!(ea == eb, "same seed, other history");
    assert_eq!(a, b);
    assert_ne!(send_failures(&ea), send_failures(&ec));
    let n = send_failures(&ea).len();
    // About 30% of the ~1000 sends in the window (and of their retries).
    assert!((200..600).contains(&n), "{n}");
    assert_eq!(a.produced, 2000);
    assert_eq!(
        a.produced,
        a.applied + a.stale_rejected + a.dead_lettered + a.dropped + a.pending_at_end + a.lost
    );
    assert_eq!(a.pending_at_end, 0);
    assert!(a.ordering_violations > 0);
}

/// `producer = 1`: only that producer's sends fail.
#[test]
fn a_fault_on_one_producer_leaves_the_others_alone() {
    let text = common::base(
        "\"competing\"",
        2,
        r#"
[producers]
count = 3
[[fault]]
kind = "send_error"
producer = 1
at = "1s"
for = "5s"
fraction = 0.5
"#,
    );
    let (m, events) = history(&text, "competing", 5);
    let producers: std::collections::BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match *e {
            Event::SendFail { producer, .. } => Some(producer),
            _ => None,
        })
        .collect();
    assert_eq!(producers, [1].into());
    assert_eq!(m.applied, 2000);
}

/// The plan line and the scripted form of a `send_error`.
#[test]
fn the_plan_describes_a_send_error() {
    let sc = common::scenario(&one_key("count = 2", ONE_SEND_FAILS));
    let plan = sim::FaultPlan::resolve(&sc, 1);
    assert_eq!(
        plan.describe(&sc),
        ["t=450ms send_error every producer fraction 1 for 100ms"]
    );
    let again = common::scenario(&sc.to_toml());
    assert_eq!(sim::FaultPlan::resolve(&again, 1), plan);
}

/// Bad values are refused with their place in the file and what is allowed.
#[test]
fn bad_producer_settings_are_located() {
    for (producers, fault, field, says) in [
        (
            "max_in_flight = 0",
            "",
            "producers.max_in_flight",
            "at least 1",
        ),
        (
            "max_in_flight = 6\nidempotence = true",
            "",
            "producers.max_in_flight",
            "at most 5",
        ),
        (
            "idempotence = true\nmax_in_flight = 9",
            "",
            "producers.max_in_flight",
            "idempotent",
        ),
        (
            "retry_backoff = \"10us\"",
            "",
            "producers.retry_backoff",
            "at least",
        ),
        ("max_in_flight = -1", "", "max_in_flight", ""),
        ("idempotence = \"yes\"", "", "idempotence", ""),
        (
            "",
            "[[fault]]\nkind = \"send_error\"\nat = \"1s\"\nfraction = 1.5",
            "fault[0].fraction",
            "[0, 1]",
        ),
        (
            "",
            "[[fault]]\nkind = \"send_error\"\nat = \"1s\"\nproducer = 4",
            "fault[0].producer",
            "no producer 4",
        ),
        (
            "",
            "[[fault]]\nkind = \"send_error\"\nrate = \"1/s\"",
            "fault[0].for",
            "duration",
        ),
    ] {
        let text = one_key(producers, fault);
        let e = ordsim::load_text("p.toml", &text).unwrap_err().to_string();
        assert!(e.starts_with("p.toml:"), "{e}");
        assert!(e.contains(field), "{field}: {e}");
        assert!(e.contains(says), "{says}: {e}");
    }
}
