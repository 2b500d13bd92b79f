//! Delivery leases, requeue positions, crash detection, partial-batch failure and replay from the
//! dead-letter queue (issue 13): the broker's side of what SQS, Service Bus and Kafka do that JMS
//! brokers do not.

use crate::common::{self, history};

use sim::history::{Event, Node};
use sim::scenario::ScenarioBuilder;

/// One message at 1s to two competing consumers with a 10s service.
fn one_message() -> ScenarioBuilder {
    ScenarioBuilder::new(&["competing"])
        .evenly(1, "1/s", 1)
        .broker("a")
        .consumers(2, "10s")
}

/// `consumer` 5 times slower than the service from 0s to 100s.
fn slow(b: ScenarioBuilder, consumer: u32) -> ScenarioBuilder {
    b.fault_for("slow_consumer", "0s", "100s")
        .with("consumer", consumer)
        .with("factor", 5)
}

/// [`one_message`] where consumer 0 is 5 times slower than the 10s service (50s) while
/// consumer 1 is not.
fn one_slow_message() -> ScenarioBuilder {
    slow(one_message(), 0)
}

/// `b` with a `[lease]` of `duration`.
fn lease(b: ScenarioBuilder, duration: &str) -> ScenarioBuilder {
    b.section("lease").with("duration", duration)
}

/// The lease ends at 31s while consumer 0 still works: the broker hands the message to
/// consumer 1 (delivery 2, redelivered), which writes and acks it at 41s; consumer 0 writes it
/// again at 51s (a duplicate) and its ack is refused.
#[test]
fn an_expired_lease_hands_the_message_to_another_while_the_first_still_works() {
    let (m, events) = history(&lease(one_slow_message(), "30s").to_toml(), "competing");
    let expire = events.iter().find_map(|e| match *e {
        Event::Expire { t, consumer, .. } => Some((t, consumer)),
        _ => None,
    });
    assert_eq!(expire, Some((31_000_000, 0)));
    let dispatches: Vec<_> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch {
                t,
                consumer,
                delivery,
                redelivered,
                ..
            } => Some((t, consumer, delivery, redelivered)),
            _ => None,
        })
        .collect();
    assert_eq!(
        dispatches,
        [(1_000_000, 0, 1, false), (31_000_000, 1, 2, true)]
    );
    let applies: Vec<_> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Apply { t, consumer, .. } => Some((t, consumer)),
            _ => None,
        })
        .collect();
    assert_eq!(applies, [(41_000_000, 1), (51_000_000, 0)]);
    let refused = events.iter().find_map(|e| match *e {
        Event::AckFail { t, consumer, .. } => Some((t, consumer)),
        _ => None,
    });
    assert_eq!(refused, Some((51_000_000, 0)));
    assert_eq!(
        (m.applied, m.duplicates, m.lost, m.pending_at_end),
        (1, 1, 0, 0)
    );
    assert_eq!((m.coverage.lease_expiries, m.coverage.failed_acks), (1, 1));
}

/// Renewing every 10s keeps the lease while the consumer works: nothing expires, one write.
#[test]
fn a_renewed_lease_does_not_expire_while_the_consumer_works() {
    let text = lease(one_slow_message(), "30s").with("renew_every", "10s");
    let (m, events) = history(&text.to_toml(), "competing");
    assert!(!events.iter().any(|e| matches!(e, Event::Expire { .. })));
    assert_eq!((m.applied, m.duplicates, m.coverage.failed_acks), (1, 0, 0));
}

/// Renewal stops `renew_max` after the delivery (Service Bus's MaxAutoLockRenewalDuration):
/// delivered at 1s, renewed at 11s (to 41s); at 21s renewal has run 20s > 15s and stops, so the
/// lease ends at 41s.
#[test]
fn renewal_stops_after_renew_max() {
    let text = lease(one_slow_message(), "30s")
        .with("renew_every", "10s")
        .with("renew_max", "15s");
    let (m, events) = history(&text.to_toml(), "competing");
    let expire = events.iter().find_map(|e| match *e {
        Event::Expire { t, .. } => Some(t),
        _ => None,
    });
    assert_eq!(expire, Some(41_000_000));
    assert_eq!(m.duplicates, 1);
}

/// A paused process cannot renew: a pause past the lease hands its message to another, and the
/// paused consumer writes it when it resumes (a zombie write without any failure detection).
#[test]
fn a_paused_consumer_cannot_renew() {
    let text = lease(one_slow_message(), "30s")
        .with("renew_every", "10s")
        .fault_for("consumer_pause", "5s", "60s")
        .with("consumer", 0);
    let (m, events) = history(&text.to_toml(), "competing");
    let expire = events.iter().find_map(|e| match *e {
        Event::Expire { t, consumer, .. } => Some((t, consumer)),
        _ => None,
    });
    // Paused from 5s, before its first renewal (11s): the lease from 1s ends at 31s.
    assert_eq!(expire, Some((31_000_000, 0)));
    assert_eq!(m.duplicates, 1, "{m:?}");
}

/// A message its lease brought back enough times is redriven to the dead-letter queue
/// (`backout_threshold`, SQS's maxReceiveCount).
#[test]
fn lease_expiries_count_toward_the_redrive_threshold() {
    // Both consumers take 50s; lease 30s: every delivery expires; the 2nd expiry redrives it.
    let text = one_slow_message()
        .flavour("sqs")
        .section("redelivery")
        .with("backout_threshold", 2);
    let (m, events) = history(&slow(text, 1).to_toml(), "competing");
    let dead = events.iter().find_map(|e| match *e {
        Event::DeadLetter { t, .. } => Some(t),
        _ => None,
    });
    assert_eq!(
        dead,
        Some(61_000_000),
        "delivered at 1s and 31s, both leases ended"
    );
    // Both consumers still wrote it (applied wins; the second write is a duplicate).
    assert_eq!((m.applied, m.duplicates, m.dead_lettered), (1, 1, 0));
    assert_eq!(m.coverage.failed_acks, 2);
}

/// Three messages of one key (at 10, 20 and 30ms); the first fails at 60ms in an outage until
/// 100ms and is requeued (no delay) where `requeue` says, while the next two wait in the queue:
/// head or original keep it first, tail puts it behind them (an ordering violation on a single
/// consumer).
#[test]
fn requeue_position_decides_what_comes_after_a_rollback() {
    let run = |requeue: &str| {
        let text = ScenarioBuilder::new(&["single"])
            .flavour("artemis")
            .evenly(3, "100/s", 1)
            .broker("a")
            .consumers(1, "50ms")
            .section("redelivery")
            .with("requeue", requeue)
            .fault_for("db_outage", "0s", "100ms");
        let sc = common::scenario(&text.to_toml());
        let mut order = Vec::new();
        let m = common::run_with(&sc, "single", 1, |e| {
            if let Event::Apply { msg, .. } = e {
                order.push(msg.seq);
            }
        });
        (order, m.ordering_violations)
    };
    assert_eq!(run("head"), (vec![0, 1, 2], 0));
    assert_eq!(run("original"), (vec![0, 1, 2], 0));
    let (order, violations) = run("tail");
    assert_eq!(order, vec![1, 2, 0]);
    assert_eq!(violations, 1);
}

/// A consumer crash with `crash_detection = "timeout"`: its deliveries stay assigned to it until
/// the failure detection (30s) drops its session; with `connection` they come back at once.
#[test]
fn a_crash_is_noticed_after_the_detection_timeout() {
    let text = |mode: &str| {
        one_message()
            .section("consumers")
            .with("crash_detection", mode)
            .fault("consumer_crash")
            .with("consumer", 0)
            .with("at", "2s")
            .to_toml()
    };
    let redelivered_at = |mode: &str| {
        let (m, events) = history(&text(mode), "competing");
        assert_eq!((m.applied, m.lost, m.pending_at_end), (1, 0, 0));
        events.iter().find_map(|e| match *e {
            Event::Dispatch {
                t,
                redelivered: true,
                consumer: 1,
                ..
            } => Some(t),
            _ => None,
        })
    };
    assert_eq!(redelivered_at("connection"), Some(2_000_000));
    assert_eq!(redelivered_at("timeout"), Some(32_000_000));
    let (_, events) = history(&text("timeout"), "competing");
    assert!(events.iter().any(|e| matches!(
        *e,
        Event::Disconnect {
            t: 32_000_000,
            node: Node::Consumer(0)
        }
    )));
}

/// With `crash_detection = "lease"` (SQS) a dead consumer's receive comes back when its lease
/// ends, not before.
#[test]
fn a_dead_consumers_receive_comes_back_when_its_lease_ends() {
    let text = one_message()
        .flavour("sqs")
        .fault("consumer_crash")
        .with("consumer", 0)
        .with("at", "2s");
    let (m, events) = history(&text.to_toml(), "competing");
    let again = events.iter().find_map(|e| match *e {
        Event::Dispatch {
            t,
            redelivered: true,
            ..
        } => Some(t),
        _ => None,
    });
    assert_eq!(again, Some(31_000_000));
    assert_eq!((m.applied, m.duplicates, m.lost), (1, 0, 0));
}

/// Partial-batch failure: messages of one key arrive faster than one consumer processes them, so
/// each receive takes several (SQS FIFO: up to 10 of a group); one of a receive fails in an
/// outage. `continue` goes on with the rest (they overtake the failed one); `fail_rest`
/// gives them back with it, and order holds.
#[test]
fn fail_rest_keeps_order_where_continue_breaks_it() {
    let text = |mode: &str| {
        common::outage_window(
            "strategies = [\"sqs_fifo\"]\nflavour = \"sqs\"",
            20,
            &format!("partial_failure = \"{mode}\""),
            "initial_delay = \"1s\"",
            ("100ms", "30ms"),
        )
    };
    let cont = common::run(&common::scenario(&text("continue")), "sqs_fifo", 1);
    let rest = common::run(&common::scenario(&text("fail_rest")), "sqs_fifo", 1);
    assert!(cont.ordering_violations > 0, "{cont:?}");
    assert_eq!(rest.ordering_violations, 0, "{rest:?}");
    assert_eq!((rest.applied, rest.lost), (20, 0));
}

/// AWS Lambda's SQS event source (`commit = "batch"`: a batch is deleted when the invocation
/// returns): without `ReportBatchItemFailures` (`whole_batch`) a failure in the batch leaves the
/// messages it already processed undeleted, so they are received again when their visibility
/// timeout ends (30s after the receive) and applied a second time; with it (`fail_rest`, the
/// FIFO form), only the failed message and the rest come back, and nothing is applied twice.
#[test]
fn a_lambda_batch_that_fails_as_a_whole_brings_its_processed_messages_back() {
    let text = |mode: &str| {
        common::outage_window(
            "strategies = [\"sqs_fifo\"]\nflavour = \"sqs\"",
            20,
            &format!("partial_failure = \"{mode}\"\ncommit = \"batch\""),
            "",
            ("115ms", "30ms"),
        )
    };
    let (whole, events) = history(&text("whole_batch"), "sqs_fifo");
    let (rest, _) = history(&text("fail_rest"), "sqs_fifo");
    assert_eq!((rest.duplicates, rest.lost), (0, 0), "{rest:?}");
    assert!(whole.duplicates > 0, "{whole:?}");
    assert_eq!(
        (whole.applied, whole.lost, whole.pending_at_end),
        (20, 0, 0)
    );
    // Each message applied twice was received again once its lease (30s from its receive) ended.
    let mut applied = std::collections::BTreeSet::new();
    let mut received_at = std::collections::BTreeMap::new();
    let mut again = 0;
    for e in &events {
        match *e {
            Event::Dispatch {
                t,
                msg,
                redelivered: false,
                ..
            } => {
                received_at.insert(msg.id, t);
            }
            Event::Dispatch {
                t,
                msg,
                redelivered: true,
                ..
            } if applied.contains(&msg.id) => {
                assert!(
                    t >= received_at[&msg.id] + 30_000_000,
                    "{msg:?} back at {t}"
                );
                again += 1;
            }
            Event::Apply { msg, .. } => {
                applied.insert(msg.id);
            }
            _ => {}
        }
    }
    assert!(again as u64 >= whole.duplicates, "{again} {whole:?}");
}

/// An outage dead-letters innocent messages (2 deliveries allowed); an operator replays the
/// dead-letter queue at 12s, after the last message: every message is applied in the end (nothing dead-lettered), but
/// the replayed ones after newer messages of their keys (ordering violations, stale writes, wrong
/// final states).
#[test]
fn a_dlq_replay_brings_messages_back_late() {
    let text = |replay: bool| {
        let queue = ScenarioBuilder::new(&["single"]).flavour("artemis");
        let queue = queue.evenly(200, "20/s", 5).broker("a").consumers(1, "5ms");
        // One redelivery, then the dead-letter queue.
        let b = queue.section("redelivery").with("max_redeliveries", 1);
        let b = b.with("dead_letter", "queue");
        let b = b.fault_for("db_outage", "2s", "1s");
        if replay {
            b.fault("dlq_replay").with("at", "12s").to_toml()
        } else {
            b.to_toml()
        }
    };
    let (before, _) = history(&text(false), "single");
    assert!(before.dead_lettered > 0);
    let (after, events) = history(&text(true), "single");
    let replayed = events
        .iter()
        .filter(|e| matches!(e, Event::Replay { t: 12_000_000, .. }))
        .count() as u64;
    assert_eq!(replayed, before.dead_lettered);
    assert_eq!(after.coverage.dlq_replays, replayed);
    assert_eq!(
        (after.dead_lettered, after.applied, after.lost),
        (0, 200, 0)
    );
    assert!(after.ordering_violations > 0);
    assert!(after.final_state_mismatches > 0);
}

/// `receive = "batch"`: a consumer asks for up to `prefetch` messages, and again only once it has
/// settled all of them (an SQS receive loop); with `prefetch` the broker tops its buffer up as it
/// acks. One consumer, prefetch 3, a message every 10ms, 25ms each.
#[test]
fn a_batch_receiver_asks_again_only_when_its_batch_is_done() {
    let text = |receive: &str| {
        ScenarioBuilder::new(&["competing"])
            .evenly(30, "100/s", 3)
            .broker("a")
            .consumers(1, "25ms")
            .prefetch(3)
            .with("receive", receive)
            .to_toml()
    };
    // (dispatches, acks before it) for each dispatch, in order.
    let outstanding_at_dispatch = |receive: &str| {
        let (m, events) = history(&text(receive), "competing");
        assert_eq!((m.applied, m.lost, m.duplicates), (30, 0, 0));
        let (mut dispatched, mut acked, mut last_t) = (0u32, 0u32, u64::MAX);
        let mut held_at_new_receive = Vec::new();
        for e in &events {
            match *e {
                Event::Dispatch { t, .. } => {
                    if t != last_t {
                        held_at_new_receive.push(dispatched - acked);
                        last_t = t;
                    }
                    dispatched += 1;
                }
                Event::Ack { .. } => acked += 1,
                _ => {}
            }
        }
        held_at_new_receive
    };
    // A batch receiver holds nothing whenever it receives again.
    assert!(outstanding_at_dispatch("batch").iter().all(|&n| n == 0));
    // A topped-up prefetch receives while it still holds messages.
    assert!(outstanding_at_dispatch("prefetch").iter().any(|&n| n > 0));
}

/// A batch receiver that finds messages waiting takes a whole batch in one receive: the broker
/// hands out up to `prefetch` at that instant, not one (its room is a whole batch until the offer
/// ends, so its handouts are carried out after the offer: delivered one by one as they were
/// chosen, the first would leave it no room for the rest). One consumer, prefetch 3, arrivals
/// every 5ms, 25ms a message: a backlog builds from the start.
#[test]
fn a_batch_receiver_takes_a_whole_batch_from_a_backlog() {
    let text = ScenarioBuilder::new(&["competing"])
        .evenly(30, "200/s", 3)
        .broker("a")
        .consumers(1, "25ms")
        .prefetch(3)
        .with("receive", "batch")
        .to_toml();
    let (m, events) = history(&text, "competing");
    assert_eq!((m.applied, m.lost, m.duplicates), (30, 0, 0));
    // Deliveries per instant, in order.
    let mut per_instant: Vec<(u64, u32)> = Vec::new();
    for e in &events {
        if let Event::Dispatch { t, .. } = *e {
            match per_instant.last_mut() {
                Some((at, n)) if *at == t => *n += 1,
                _ => per_instant.push((t, 1)),
            }
        }
    }
    assert!(per_instant.iter().all(|&(_, n)| n <= 3), "{per_instant:?}");
    // After the first receive, a backlog is always waiting: every receive takes three.
    let full = per_instant.iter().filter(|&&(_, n)| n == 3).count();
    assert!(full >= 8, "{per_instant:?}");
}

/// A received message whose lease ends before the consumer starts it is still processed by it (a
/// client goes through what it received): consumer 1 is down until 5s, so consumer 0 (20s a
/// message) receives all three messages at 0.1, 0.2 and 0.3s; the third one's lease ends at
/// 30.3s while it is still in consumer 0's buffer. The broker hands it out again, and consumer 0
/// still writes its own copy after the second (40.1s to 60.1s); that delete fails.
#[test]
fn a_received_message_whose_lease_ended_is_still_processed() {
    let text = ScenarioBuilder::new(&["competing"])
        .evenly(3, "10/s", 3)
        .broker("a")
        .consumers(2, "1s")
        .prefetch(3);
    let text = lease(text, "30s")
        .fault_for("consumer_crash", "0s", "5s")
        .with("consumer", 1)
        .fault_for("slow_consumer", "0s", "200s")
        .with("consumer", 0)
        .with("factor", 20);
    let (m, events) = history(&text.to_toml(), "competing");
    let third = events
        .iter()
        .find_map(|e| match *e {
            Event::Expire {
                t: 30_300_000,
                msg,
                consumer: 0,
                ..
            } => Some(msg.id),
            _ => None,
        })
        .expect("the third message's lease ended in consumer 0's buffer");
    let by_0 = |pick: fn(&Event) -> Option<(u64, u64, u32)>| -> Vec<u64> {
        events
            .iter()
            .filter_map(pick)
            .filter(|&(_, id, c)| id == third && c == 0)
            .map(|(t, _, _)| t)
            .collect()
    };
    let starts = by_0(|e| match *e {
        Event::Start { t, msg, consumer } => Some((t, msg.id, consumer)),
        _ => None,
    });
    let applies = by_0(|e| match *e {
        Event::Apply {
            t, msg, consumer, ..
        } => Some((t, msg.id, consumer)),
        _ => None,
    });
    let refused = by_0(|e| match *e {
        Event::AckFail { t, msg, consumer } => Some((t, msg.id, consumer)),
        _ => None,
    });
    assert_eq!(
        starts.first(),
        Some(&40_100_000),
        "started after its lease ended"
    );
    assert_eq!(applies.first(), Some(&60_100_000));
    assert_eq!(refused.first(), Some(&60_100_000));
    assert_eq!((m.applied, m.lost, m.pending_at_end), (3, 0, 0));
    assert!(m.duplicates >= 1);
}

/// SQS FIFO with a redrive policy (`maxReceiveCount` 2): an outage makes the head of a group fail
/// twice and it is redriven to the dead-letter queue, so the rest of its group goes on without it
/// (the group's order is broken for good, [Q3]); redriving it back later applies it after newer
/// messages of its group.
#[test]
fn sqs_redrive_lets_the_group_go_on_without_its_head() {
    let queue = ScenarioBuilder::new(&["sqs_fifo"]).flavour("sqs");
    let queue = queue
        .evenly(100, "10/s", 2)
        .broker("q")
        .consumers(2, "20ms");
    let text = queue
        .section("redelivery")
        .with("backout_threshold", 2)
        .with("initial_delay", "100ms")
        .fault_for("db_outage", "2s", "1s");
    let (m, _) = history(&text.to_toml(), "sqs_fifo");
    assert!(m.dead_lettered > 0, "{m:?}");
    assert_eq!(m.innocent_dead_lettered, m.dead_lettered);
    assert_eq!(m.pending_at_end, 0, "the groups went on");
    assert_eq!(m.applied + m.dead_lettered, 100);
    let replay = text.fault("dlq_replay").with("at", "15s");
    let (r, _) = history(&replay.to_toml(), "sqs_fifo");
    assert_eq!((r.applied, r.dead_lettered), (100, 0));
    assert!(
        r.ordering_violations > 0 && r.final_state_mismatches > 0,
        "{r:?}"
    );
}

/// A refused ack still frees the consumer's window: the broker hands it the message it just
/// took back at once, not when some later send happens to wake dispatch. The last message (at
/// 2s) outlives its 50ms lease while the only consumer works on it for 80ms: taken back at
/// 2.05s, its ack refused at 2.08s, delivered again then (nothing else is left to send), taken
/// back again at 2.13s and dead-lettered (two deliveries), applied by the consumer at 2.16s.
/// Before, it waited in the queue to the end of the run.
#[test]
fn a_refused_ack_frees_the_consumer_for_the_next_delivery() {
    let text = ScenarioBuilder::new(&["single"])
        .evenly(2, "1/s", 1)
        .broker("a")
        .consumers(1, "80ms")
        .section("redelivery")
        .with("backout_threshold", 2)
        .with("dead_letter", "queue");
    let (m, events) = history(&lease(text, "50ms").to_toml(), "single");
    let dispatches: Vec<_> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch { t, msg, .. } if msg.seq == 1 => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(dispatches, vec![2_000_000, 2_080_000]);
    assert_eq!(m.pending_at_end, 0);
    assert_eq!(m.applied, 2);
    assert_eq!(
        m.coverage.failed_acks, 4,
        "both deliveries of both messages"
    );
}

/// A consumer whose lease ended still holds its own copy; the broker meanwhile gives up on the
/// message (a quorum queue's delivery limit) and drops it, after it was applied. When the
/// resequencer then starts that stale copy it is not taken over as pending: the message is
/// final in the history (before, the run failed its self-check: "pending message ... was
/// already settled"; found by `properties::messages_are_conserved`, seed 105).
#[test]
fn a_stale_copy_of_a_settled_message_is_not_pending() {
    let text = r#"
strategies = ["resequencer"]
flavour = "rabbitmq_quorum"
[workload]
messages = 122
rate = "242/s"
keys = 7
poison_fraction = 0.058395553971132136
[producers]
count = 2
connect = "spread"
[[broker]]
name = "b0"
persistent = false
[[broker]]
name = "b1"
persistent = false
[consumers]
count = 2
prefetch = 3
service = { dist = "exponential", mean = "8ms" }
connect = "spread"
ack_latency = "0ms"
partial_failure = "fail_rest"
commit = "batch"
[redelivery]
mode = "blocking"
initial_delay = "200ms"
multiplier = 2.0
max_delay = "2s"
[lease]
duration = "50ms"
[run]
drain_timeout = "2m"
"#;
    let sc = common::scenario(text);
    let mut dropped_then_started = false;
    let mut dropped = std::collections::BTreeSet::new();
    let m = common::run_with(&sc, "resequencer", 105, |e| match *e {
        Event::Drop { msg, .. } => {
            dropped.insert(msg.id);
        }
        Event::Start { msg, .. } => dropped_then_started |= dropped.contains(&msg.id),
        _ => {}
    });
    assert!(
        dropped_then_started,
        "the case: a dropped message started later"
    );
    assert_eq!(
        m.produced,
        m.applied + m.stale_rejected + m.dead_lettered + m.dropped + m.pending_at_end + m.lost
    );
}

/// Service Bus: a receiver's process crashes with a message in hand; its OS closes the socket
/// and the service closes its session with it: the message is delivered again at once, and
/// the closed session does not raise its delivery count (message-sessions.md's delivery-count
/// table). Redelivered at 3s, its lock then runs out while its receiver is frozen (63s): the
/// first counted expiry of MaxDeliveryCount 2, so it is not dead-lettered. (Counting the
/// crash's return, the broker would dead-letter it at 63s.)
#[test]
fn a_servicebus_crash_gives_the_message_back_at_once_uncounted() {
    let text = |detection: Option<&str>| {
        let mut b = ScenarioBuilder::new(&["competing"])
            .flavour("servicebus")
            .evenly(1, "1/s", 1)
            .broker("a")
            .consumers(1, "5s");
        if let Some(d) = detection {
            b = b.with("crash_detection", d);
        }
        b.section("redelivery")
            .with("backout_threshold", 2)
            .fault_for("consumer_crash", "2s", "1s")
            .with("consumer", 0)
            .fault_for("consumer_pause", "4s", "70s")
            .with("consumer", 0)
            .to_toml()
    };
    for detection in [None, Some("connection")] {
        let (m, events) = history(&text(detection), "competing");
        let dispatches: Vec<_> = events
            .iter()
            .filter_map(|e| match *e {
                Event::Dispatch { t, delivery, .. } => Some((t / 1_000_000, delivery)),
                _ => None,
            })
            .collect();
        assert_eq!(dispatches[..2], [(1, 1), (3, 2)], "{detection:?}");
        assert!(
            !events.iter().any(|e| matches!(e, Event::DeadLetter { .. })),
            "{detection:?}: {dispatches:?}"
        );
        assert_eq!(
            (m.applied, m.dead_lettered, m.lost),
            (1, 0, 0),
            "{detection:?}"
        );
        assert!(m.coverage.lease_expiries >= 1, "{detection:?}");
    }
}
