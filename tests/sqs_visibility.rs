//! Amazon SQS: the visibility timeout runs from the receive (issue 39 §1). A message the
//! consumer fails and does not delete becomes visible again when the timeout started by its
//! `ReceiveMessage` (or by its last `ChangeMessageVisibility`) ends, not a full timeout after the
//! failure [Q4][Q8]; the redrive policy moves it to the dead-letter queue on the receive that
//! would exceed `maxReceiveCount`, not when it fails [Q3].

use crate::common::history;

use sim::history::Event;
use sim::scenario::ScenarioBuilder;

/// `messages` messages over `keys` groups, one a second from 1s, to one SQS FIFO consumer
/// (queue `q`) taking `service` each.
fn fifo(messages: u32, keys: u32, service: &str) -> ScenarioBuilder {
    ScenarioBuilder::new(&["sqs_fifo"])
        .flavour("sqs")
        .evenly(messages, "1/s", keys)
        .broker("q")
        .consumers(1, service)
}

/// `messages` messages of one group, one a second from 1s, to one SQS FIFO consumer taking 10s
/// each; the database is down from 0s for `outage`, so a delivery that ends inside it fails.
fn failing_messages(messages: u32, outage: &str) -> ScenarioBuilder {
    fifo(messages, 1, "10s")
        .prefetch(1)
        .fault_for("db_outage", "0s", outage)
}

/// The times of the deliveries of message 0 after its first.
fn redeliveries(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch {
                t,
                msg,
                redelivered: true,
                ..
            } if msg.id == 0 => Some(t),
            _ => None,
        })
        .collect()
}

fn dead_lettered_at(events: &[Event]) -> Option<u64> {
    events.iter().find_map(|e| match *e {
        Event::DeadLetter { t, .. } => Some(t),
        _ => None,
    })
}

/// Received at 1s, failed at 11s: visible again at 31s, when the 30s timeout started by the
/// receive ends (before: 41s, a full timeout after the failure).
#[test]
fn a_failed_message_is_visible_again_when_the_timeout_from_its_receive_ends() {
    let (m, events) = history(&failing_messages(1, "12s").to_toml(), "sqs_fifo");
    assert_eq!(redeliveries(&events).first(), Some(&31_000_000));
    let delay = events.iter().find_map(|e| match *e {
        Event::Redelivery { t, delay_us, .. } => Some((t, delay_us)),
        _ => None,
    });
    assert_eq!(
        delay,
        Some((11_000_000, 20_000_000)),
        "what was left of the lease"
    );
    assert_eq!((m.applied, m.lost, m.pending_at_end), (1, 0, 0));
}

/// An explicit `initial_delay` is the consumer's `ChangeMessageVisibility(delay)` at the
/// failure: timed from the call (11s + 5s).
#[test]
fn an_initial_delay_is_a_visibility_change_timed_from_the_failure() {
    let text = failing_messages(1, "12s")
        .section("redelivery")
        .with("initial_delay", "5s");
    let (_, events) = history(&text.to_toml(), "sqs_fifo");
    assert_eq!(redeliveries(&events).first(), Some(&16_000_000));
}

/// With a heartbeat (`ChangeMessageVisibility` every 10s, `[lease] renew_every`), the timeout
/// runs from the last call: renewed at 11s and 21s, failed at 26s, visible at 51s (before: 56s).
#[test]
fn a_renewed_timeout_runs_from_the_last_renewal() {
    let text = failing_messages(1, "27s")
        .section("lease")
        .with("renew_every", "10s")
        .fault_for("slow_consumer", "0s", "20s")
        .with("consumer", 0)
        .with("factor", 2.5);
    let (m, events) = history(&text.to_toml(), "sqs_fifo");
    assert_eq!(m.coverage.failed_acks, 0, "the renewals kept the lease");
    assert_eq!(redeliveries(&events).first(), Some(&51_000_000));
}

/// `maxReceiveCount = 1`: the head of a group, failed at 11s, stays invisible until its
/// timeout ends and is redriven by the receive at 31s, which takes the next message of its group
/// (before: redriven at once, at 11s, and the next one received then).
#[test]
fn redrive_comes_with_the_next_receive_not_the_failure() {
    let text = failing_messages(2, "12s")
        .section("redelivery")
        .with("backout_threshold", 1);
    let (m, events) = history(&text.to_toml(), "sqs_fifo");
    assert_eq!(dead_lettered_at(&events), Some(31_000_000));
    assert!(redeliveries(&events).is_empty(), "redriven, not received");
    let next = events.iter().find_map(|e| match *e {
        Event::Dispatch { t, msg, .. } if msg.id == 1 => Some(t),
        _ => None,
    });
    assert_eq!(next, Some(31_000_000), "the group goes on with the redrive");
    assert_eq!(
        (m.dead_lettered, m.applied, m.lost, m.pending_at_end),
        (1, 1, 0, 0)
    );
}

/// The same for a consumer that receives one message at a time (`receive = "prefetch"`) under
/// a strategy that keeps no promises (`competing`), whose dispatch is otherwise the engine's
/// plain one (`Engine::plain_dispatch`, which must not skip the redrive): message 0 fails at
/// 11s, the consumer takes message 1 meanwhile, and the receive at 31s, when message 0's timeout
/// ends, redrives it rather than delivering it a second time.
#[test]
fn redrive_on_receive_under_a_plain_dispatch() {
    let text = ScenarioBuilder::new(&["competing"])
        .flavour("sqs")
        .evenly(2, "1/s", 1)
        .broker("q")
        .consumers(1, "10s")
        .prefetch(1)
        .section("consumers")
        .with("receive", "prefetch")
        .fault_for("db_outage", "0s", "12s")
        .section("redelivery")
        .with("backout_threshold", 1);
    let (m, events) = history(&text.to_toml(), "competing");
    assert_eq!(dead_lettered_at(&events), Some(31_000_000));
    assert!(redeliveries(&events).is_empty(), "redriven, not received");
    assert_eq!((m.dead_lettered, m.applied, m.lost), (1, 1, 0));
}

/// The same, but the only consumer is busy with another message (of another group, 40s from
/// 11s) when the timeout ends at 31s: the message waits, visible, and the consumer's next
/// receive, at 51s, redrives it. Before: at 11s.
#[test]
fn redrive_waits_for_a_receive() {
    let text = fifo(2, 1000, "10s")
        .prefetch(1)
        .section("redelivery")
        .with("backout_threshold", 1)
        .fault_for("db_outage", "0s", "11500ms")
        .fault_for("slow_consumer", "11s", "60s")
        .with("consumer", 0)
        .with("factor", 4);
    let (m, events) = history(&text.to_toml(), "sqs_fifo");
    let keys: Vec<u32> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Produce { msg, .. } => Some(msg.key),
            _ => None,
        })
        .collect();
    assert_ne!(keys[0], keys[1], "two groups");
    assert_eq!(dead_lettered_at(&events), Some(51_000_000));
    assert_eq!((m.dead_lettered, m.applied, m.lost), (1, 1, 0));
}

/// A batch job (`[consumers] mode = "batch"`, a run every 5s) that fails a poison message does
/// not delete it: it is received again when its timeout ends, by the run going then, and
/// redriven (`maxReceiveCount = 2`) by the receive after its second timeout: received at 5s,
/// failed at 6s, received again at 35s, failed at 36s, redriven at 65s. Before: back at the head
/// at once, received again by the same run at 6s and dead-lettered at 7s.
#[test]
fn a_batch_jobs_failed_message_comes_back_when_its_timeout_ends() {
    let text = fifo(1, 1, "1s")
        .section("consumers")
        .with("mode", "batch")
        .section("consumers.batch")
        .with("interval", "5s")
        .section("workload")
        .with("poison_fraction", 1.0)
        .section("redelivery")
        .with("backout_threshold", 2);
    let (m, events) = history(&text.to_toml(), "sqs_fifo");
    assert_eq!(redeliveries(&events), vec![35_000_000]);
    assert_eq!(dead_lettered_at(&events), Some(65_000_000));
    assert_eq!((m.dead_lettered, m.lost, m.pending_at_end), (1, 0, 0));
}
