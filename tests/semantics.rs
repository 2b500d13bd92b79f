//! Faithful semantics (issue 12): each test pins a behaviour of the real brokers that the model
//! once got wrong, and fails on the old behaviour.

use crate::common;

use sim::history::Event;
use sim::scenario::ScenarioBuilder;

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

/// One key, one consumer with a window of 10, a 50ms database outage: every message in hand
/// during it fails. `top` goes at the top level, `consumers` into `[consumers]`, `redelivery`
/// into `[redelivery]`.
fn rollback_run(top: &str, consumers: &str, redelivery: &str) -> (sim::Metrics, Vec<Event>) {
    let (m, h) = rollback_history(top, consumers, redelivery);
    let rollbacks = h
        .iter()
        .filter(|e| matches!(e, Event::Rollback { .. }))
        .count();
    assert!(rollbacks > 0, "the outage failed deliveries");
    (m, h)
}

/// [`rollback_run`]'s scenario run.
fn rollback_history(top: &str, consumers: &str, redelivery: &str) -> (sim::Metrics, Vec<Event>) {
    let top = format!("{top}\nstrategies = [\"single\"]");
    let text = common::outage_window(&top, 200, consumers, redelivery, ("500ms", "50ms"));
    common::history(&text, "single")
}

/// Artemis rolls a failed delivery's whole window back (issue 39): the session stops, the
/// client's buffer is cleared and the server cancels every delivering reference back in order
/// (`ClientSessionImpl.rollback`, `ServerConsumerImpl.cancelRefs`), so the prefetched messages
/// do not overtake the failed one, and those the client never consumed keep their delivery count
/// (`decrementDeliveryCount`): they come back not redelivered. It used to requeue the failed
/// message alone, behind the window, and report ordering violations Artemis does not have.
#[test]
fn an_artemis_rollback_gives_the_whole_window_back_in_order() {
    let (m, h) = rollback_run("flavour = \"artemis\"", "", "");
    assert_eq!(m.ordering_violations, 0, "{m:?}");
    assert_eq!((m.applied, m.lost, m.dropped), (200, 0, 0), "{m:?}");
    // Only the messages that failed in hand come back redelivered.
    let failed: std::collections::BTreeSet<u64> = h
        .iter()
        .filter_map(|e| match *e {
            Event::Rollback { msg, .. } => Some(msg.id),
            _ => None,
        })
        .collect();
    let redelivered: std::collections::BTreeSet<u64> = h
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch {
                msg,
                redelivered: true,
                ..
            } => Some(msg.id),
            _ => None,
        })
        .collect();
    assert!(!redelivered.is_empty());
    assert!(
        redelivered.is_subset(&failed),
        "{redelivered:?} vs {failed:?}"
    );
    // The old behaviour, still there on request: the window goes on and overtakes.
    let (cont, _) = rollback_run(
        "flavour = \"artemis\"",
        "partial_failure = \"continue\"",
        "",
    );
    assert!(cont.ordering_violations > 0, "{cont:?}");
}

/// With a redelivery delay, Artemis schedules every cancelled reference by its own delivery
/// count (`QueueImpl.checkRedelivery`): the window waits at the broker with the failed message
/// and comes back with it, in order, behind it. (Messages still queued behind the window go on
/// meanwhile, the non-blocking delay's own hazard: those overtake.)
#[test]
fn an_artemis_rollback_holds_the_window_for_the_redelivery_delay() {
    let (m, h) = rollback_run("flavour = \"artemis\"", "", "initial_delay = \"200ms\"");
    assert_eq!((m.applied, m.lost, m.dropped), (200, 0, 0), "{m:?}");
    let at = h
        .iter()
        .position(|e| matches!(e, Event::Rollback { .. }))
        .unwrap();
    let Event::Rollback { t: t0, msg, .. } = h[at] else {
        unreachable!()
    };
    let failed = msg.id;
    // The window: dispatched before the rollback, not started by then.
    let mut window = std::collections::BTreeSet::new();
    for e in &h[..at] {
        match *e {
            Event::Dispatch { msg, .. } => {
                window.insert(msg.id);
            }
            Event::Start { msg, .. } => {
                window.remove(&msg.id);
            }
            _ => {}
        }
    }
    assert!(window.len() > 1, "{window:?}");
    // Their next dispatches: the failed message first, then the window in order, all after
    // the delay.
    let mut back = Vec::new();
    for e in &h[at..] {
        if let Event::Dispatch { t, msg, .. } = *e {
            if (msg.id == failed || window.contains(&msg.id))
                && !back.iter().any(|&(_, i)| i == msg.id)
            {
                back.push((t, msg.id));
            }
        }
    }
    let ids: Vec<u64> = back.iter().map(|&(_, i)| i).collect();
    let mut want = vec![failed];
    want.extend(window.iter().copied());
    assert_eq!(ids, want);
    assert!(back.iter().all(|&(t, _)| t >= t0 + 200_000), "{back:?}");
}

/// ActiveMQ Classic's client keeps order by itself: its rollback puts the delivered messages
/// back in front of the unconsumed ones and stops the consumer for the delay
/// (`ActiveMQMessageConsumer.rollback`), the blocking mode, whatever `partial_failure` says.
#[test]
fn activemq_classic_rollback_keeps_the_window_in_the_client() {
    for pf in ["", "partial_failure = \"rollback\""] {
        let (m, _) = rollback_run("", pf, "initial_delay = \"200ms\"");
        assert_eq!(m.ordering_violations, 0, "{pf}: {m:?}");
    }
}

/// Two Pulsar consumers; one message fails during a short database outage and is negatively
/// acknowledged (60s delay); `crash` is a `[[fault]]` block added at the end.
fn nack_run(crash: Option<(u32, u64)>) -> (sim::Metrics, Vec<Event>) {
    let mut text = ScenarioBuilder::new(&["competing"])
        .flavour("pulsar")
        .evenly(10, "10/s", 10)
        .broker("a")
        .consumers(2, "10ms")
        .prefetch(1)
        .fault_for("db_outage", "490ms", "30ms");
    if let Some((consumer, at_ms)) = crash {
        text = text
            .fault_for("consumer_crash", &format!("{at_ms}ms"), "100s")
            .with("consumer", consumer);
    }
    common::history(&text.to_toml(), "competing")
}

/// Pulsar's negative-ack delay is the client's timer (`NegativeAcksTracker`): the broker keeps
/// the message among the consumer's unacked ones, and when the consumer goes it redelivers them
/// all at once (`removeConsumer`). It used to hold the message for the full 60s delay even after
/// its consumer had crashed.
#[test]
fn a_pulsar_negative_ack_delay_dies_with_its_client() {
    let (_, h) = nack_run(None);
    let (t0, failed, c) = h
        .iter()
        .find_map(|e| match *e {
            Event::Rollback {
                t, msg, consumer, ..
            } => Some((t, msg.id, consumer)),
            _ => None,
        })
        .expect("the outage failed a delivery");
    let redelivered_at = |h: &[Event]| {
        h.iter()
            .find_map(|e| match *e {
                Event::Dispatch {
                    t,
                    msg,
                    redelivered: true,
                    ..
                } if msg.id == failed => Some(t),
                _ => None,
            })
            .expect("redelivered")
    };
    // Alive, the client asks for it after its delay.
    assert_eq!(redelivered_at(&h), t0 + 60_000_000);
    // Its consumer crashes 1s later: the other one has it at once.
    let crash_ms = t0 / 1000 + 1000;
    let (m, h) = nack_run(Some((c, crash_ms)));
    assert_eq!(redelivered_at(&h), crash_ms * 1000);
    assert_eq!((m.applied, m.lost), (10, 0), "{m:?}");
}

/// `messages` of one key, evenly at `rate`, to two consumers of prefetch 1 taking `service` each
/// (broker `a`), for `strategy`.
fn one_key_two_consumers(
    strategy: &str,
    messages: u32,
    rate: &str,
    service: &str,
) -> ScenarioBuilder {
    ScenarioBuilder::new(&[strategy])
        .evenly(messages, rate, 1)
        .broker("a")
        .consumers(2, service)
        .prefetch(1)
}

/// `reset_groups` (issue 39 §2): the group's owner is busy (prefetch 1, a 10s message in hand)
/// and its next messages wait for it; the reset forgets the owner, so the next one goes to the
/// idle consumer at the reset's instant. Dispatch remembers which queued messages wait for a full
/// owner and skips them while the candidates are unchanged: the reset must void that memory, or
/// the message waits for the old owner's 10s.
#[test]
fn a_group_reset_hands_the_waiting_group_to_an_idle_consumer_at_once() {
    let text = one_key_two_consumers("message_groups", 5, "10/s", "10s")
        .fault("reset_groups")
        .with("at", "1s");
    let (m, events) = common::history(&text.to_toml(), "message_groups");
    let first_to_idle = events.iter().find_map(|e| match *e {
        Event::Dispatch { t, consumer: 1, .. } => Some(t),
        _ => None,
    });
    assert_eq!(first_to_idle, Some(1_000_000), "{m:?}");
}

/// Unit-of-Order holds a unit's next messages while one is incomplete, and dispatch skips them
/// on that promise. The poison first message is dead-lettered in the same instant its last
/// delivery fails, and the dispatch that follows must already know the unit is free: the next
/// message goes at the dead-letter instant (nothing else arrives later to dispatch again: with
/// the promise withdrawn only after that dispatch, the rest of the unit never leaves the queue).
#[test]
fn a_unit_freed_by_a_dead_letter_sends_its_next_message_at_once() {
    let text = one_key_two_consumers("unit_of_order", 3, "100/s", "1ms")
        .section("redelivery")
        .with("mode", "blocking")
        .with("initial_delay", "100ms")
        .with("multiplier", 1.0)
        .with("backout_threshold", 2)
        .fault_for("poison", "5ms", "10ms")
        .with("fraction", 1.0);
    let (m, events) = common::history(&text.to_toml(), "unit_of_order");
    let (dead, poison) = events
        .iter()
        .find_map(|e| match *e {
            Event::DeadLetter { t, msg, .. } => Some((t, msg.seq)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no dead letter: {m:?}"));
    let next = events.iter().find_map(|e| match e {
        Event::Dispatch { t, msg, .. } if msg.seq == poison + 1 => Some(*t),
        _ => None,
    });
    assert_eq!(next, Some(dead), "{m:?}");
    assert_eq!(m.pending_at_end, 0, "{m:?}");
}
