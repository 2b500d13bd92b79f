//! Logs with offsets (issue 14): offset commits that settle what a consumer processed, a group
//! that resumes from the last commit, graceful membership changes, a zombie whose commit is
//! refused, and partitions added under a running group.

use crate::common::{self, history};

use sim::history::{Event, Node};
use sim::scenario::{exponential, ScenarioBuilder};

/// The `kafka` strategy on the `kafka` flavour, its broker named `kafka` (the default client:
/// Spring Kafka's listener container).
fn kafka() -> ScenarioBuilder {
    ScenarioBuilder::new(&["kafka"])
        .flavour("kafka")
        .broker("kafka")
}

/// `b` with the plain `KafkaConsumer` (`client = "plain"`: auto-commit at a poll, every 5s).
fn plain(b: ScenarioBuilder) -> ScenarioBuilder {
    b.section("consumers").with("client", "plain")
}

/// [`kafka`] with a topic of `partitions` partitions, its consumers polling up to 500 records.
fn topic(partitions: u32) -> ScenarioBuilder {
    kafka()
        .prefetch(500)
        .section("strategy.kafka")
        .with("partitions", partitions)
}

/// Ten records, one a second from 1s, of one key (a `kafka` topic of `partitions` partitions,
/// `consumers` consumers with 100ms of work each).
fn ten_records(consumers: u32, partitions: u32) -> ScenarioBuilder {
    topic(partitions)
        .evenly(10, "1/s", 1)
        .consumers(consumers, "100ms")
}

fn commits(events: &[Event]) -> Vec<(u64, u32, u32)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Commit {
                t,
                consumer,
                records,
            } => Some((t, consumer, records)),
            _ => None,
        })
        .collect()
}

/// Auto-commit (the plain client): made at a poll once 5s have passed since the last one, the
/// first interval counted from the join (0s). The consumer waits in `poll()` between records
/// (one a second, 100ms each), so it commits when each interval ends: at 5s the four records
/// processed by then, at 10s the next five, at 15s the last. Records are acked only when a
/// commit covers them.
#[test]
fn auto_commit_settles_processed_records_every_interval() {
    let (m, events) = history(&plain(ten_records(1, 1)).to_toml(), "kafka");
    assert_eq!(
        commits(&events),
        [(5_000_000, 0, 4), (10_000_000, 0, 5), (15_000_000, 0, 1)]
    );
    let acks: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Ack { t, .. } => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        acks,
        [&[5_000_000; 4][..], &[10_000_000; 5], &[15_000_000]].concat()
    );
    assert_eq!(m.coverage.commits, 3);
    assert_eq!((m.applied, m.duplicates, m.pending_at_end), (10, 0, 0));
}

/// `b`: one consumer, one partition, 1000 records all written within the first 10ms, 20ms of
/// work each: its first poll brings one record, its second 500 (10s of work, from 20ms).
fn one_long_poll(b: ScenarioBuilder) -> ScenarioBuilder {
    b.section("strategy.kafka")
        .with("partitions", 1)
        .evenly(1000, "100000/s", 1000)
        .consumers(1, "20ms")
        .prefetch(500)
}

/// Auto-commit is made only inside `poll()`: a consumer busy on one poll's 500 records (10s of
/// work) commits none of them when the 5s interval passes, only at its next poll (10.02s). Dying
/// at 8s, 7.98s into that poll, it has committed nothing: every record it processed (its first
/// poll's and 399 of the second's) is replayed, not only those of the last 5s.
#[test]
fn auto_commit_waits_for_the_next_poll_and_a_crash_replays_the_whole_poll() {
    let b = plain(one_long_poll(kafka()));
    let (m, events) = history(&b.to_toml(), "kafka");
    assert_eq!(commits(&events)[0], (10_020_010, 0, 501));
    let crashed = b
        .section("consumers")
        .with("restart_takes_over", true)
        .fault_for("consumer_crash", "8s", "1s")
        .with("consumer", 0);
    let (m_crash, events) = history(&crashed.to_toml(), "kafka");
    assert!(commits(&events).iter().all(|&(t, _, _)| t > 8_000_000));
    let applied_before = events
        .iter()
        .filter(|e| matches!(e, Event::Apply { t, .. } if *t <= 8_000_000))
        .count() as u64;
    assert_eq!(applied_before, 399);
    assert_eq!(m_crash.duplicates, applied_before, "{m_crash:?}");
    assert_eq!(
        (m.applied, m_crash.lost, m_crash.pending_at_end),
        (1000, 0, 0)
    );
}

/// Spring Kafka's container (the default client) commits each poll's records once processed:
/// with a poll per record, a consumer that dies 0.4s after its fourth record has committed all
/// four, and nothing is replayed (the plain client's auto-commit had committed none yet).
#[test]
fn the_spring_container_commits_each_poll_and_a_crash_replays_nothing() {
    let spring = crash(ten_records(1, 1), Some("1s"));
    let (m, events) = history(&spring.to_toml(), "kafka");
    let c = commits(&events);
    assert_eq!(
        &c[..4],
        [1_100_000, 2_100_000, 3_100_000, 4_100_000].map(|t| (t, 0, 1))
    );
    assert_eq!((m.duplicates, m.applied, m.lost), (0, 10, 0));
    let (m, _) = history(&plain(spring).to_toml(), "kafka");
    assert_eq!((m.duplicates, m.applied), (4, 10));
}

/// Spring Kafka's container commits what a poll processed before its error handler retries a
/// failed record (`invokeErrorHandler` runs `processCommits()` first): with ten records in one
/// poll and some poison among them, a commit is made at the instant of a first failure, of the
/// records processed before it. The plain client's `commitSync()` after its loop (`commit =
/// "batch"`) commits only at the poll.
#[test]
fn the_spring_container_commits_before_it_retries_a_failed_record() {
    // Seed 2: the fourth, seventh and eighth records are poison (the second poll's first record
    // would leave nothing processed before it).
    let b = topic(1)
        .evenly(10, "1000/s", 10)
        .consumers(1, "100ms")
        .section("workload")
        .with("poison_fraction", 0.3);
    let at_failure = |text: &str| {
        let mut events = Vec::new();
        common::run_with(&common::scenario(text), "kafka", 2, |e| events.push(*e));
        let failures: Vec<u64> = events
            .iter()
            .filter_map(|e| match *e {
                Event::Rollback { t, .. } => Some(t),
                _ => None,
            })
            .collect();
        assert!(!failures.is_empty());
        commits(&events)
            .into_iter()
            .filter(|&(t, _, n)| n > 0 && failures.contains(&t))
            .count()
    };
    assert!(at_failure(&b.to_toml()) > 0);
    let plain_batch = plain(b).with("commit", "batch");
    assert_eq!(at_failure(&plain_batch.to_toml()), 0);
}

/// A record that always fails (poison): Spring Kafka's `DefaultErrorHandler` delivers it 10
/// times, then skips it; the plain client has no retry handler: it is delivered once and
/// skipped. Either way it is dropped, and the records after it are applied.
#[test]
fn a_plain_client_skips_a_failed_record_and_spring_retries_it() {
    let b = ten_records(1, 1)
        .section("workload")
        .with("poison_fraction", 0.3);
    let deliveries = |text: &str| {
        let (m, events) = history(text, "kafka");
        let most = (0..10u32)
            .map(|seq| {
                events
                    .iter()
                    .filter(|e| matches!(e, Event::Dispatch { msg, .. } if msg.seq == seq))
                    .count()
            })
            .max()
            .unwrap();
        (m, most)
    };
    let (spring, most) = deliveries(&b.to_toml());
    assert_eq!(most, 10);
    assert!(spring.dropped > 0, "{spring:?}");
    let (plain_m, most) = deliveries(&plain(b).to_toml());
    assert_eq!(most, 1);
    assert_eq!(plain_m.dropped, spring.dropped);
    assert_eq!(plain_m.applied + plain_m.dropped, 10);
}

/// `b` with `commit = COMMIT` in `[consumers]`, as text.
fn committing(b: ScenarioBuilder, commit: &str) -> String {
    b.section("consumers").with("commit", commit).to_toml()
}

/// `commit = "each"` acks each record when it is processed (no `commit` event); `batch` commits
/// once the records it fetched are processed (here each poll brings one).
#[test]
fn commit_each_acks_at_once_and_batch_commits_each_poll() {
    let (m, events) = history(&committing(ten_records(1, 1), "each"), "kafka");
    assert!(commits(&events).is_empty());
    assert_eq!((m.coverage.commits, m.applied), (0, 10));
    let (m, events) = history(&committing(ten_records(1, 1), "batch"), "kafka");
    let c = commits(&events);
    assert_eq!(c.len(), 10);
    assert_eq!(c[0], (1_100_000, 0, 1));
    assert_eq!(c[9], (10_100_000, 0, 1));
    assert_eq!(m.applied, 10);
}

/// `b` where consumer 0 crashes at 4.5s (and restarts after `span`, or never).
fn crash(b: ScenarioBuilder, span: Option<&str>) -> ScenarioBuilder {
    let b = b
        .fault("consumer_crash")
        .with("consumer", 0)
        .with("at", "4500ms");
    match span {
        Some(span) => b.with("for", span),
        None => b,
    }
}

fn replayed(events: &[Event]) -> Vec<(u64, u32)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch {
                t,
                msg,
                redelivered: true,
                ..
            } => Some((t, msg.seq)),
            _ => None,
        })
        .collect()
}

/// A consumer dies 0.4s after processing its fourth record, before its first auto-commit. It
/// restarts at 5.5s, but as a new member (no `group.instance.id`): its join waits until the group
/// drops the dead member at its 45s session timeout (49.5s). Then the group resumes from the
/// last commit (none) and the four records are delivered and applied again: four duplicates,
/// each an older state written again. With static membership (`restart_takes_over = true`) the
/// restarted process takes over at once (5.5s). Committing each record leaves nothing to replay.
#[test]
fn a_crash_before_the_commit_replays_what_was_processed() {
    let crashed = crash(plain(ten_records(1, 1)), Some("1s"));
    let (m, events) = history(&crashed.to_toml(), "kafka");
    assert_eq!(m.duplicates, 4);
    let at = |t| (0..4).map(|seq| (t, seq)).collect::<Vec<_>>();
    assert_eq!(replayed(&events), at(49_500_000));
    let connects: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Connect {
                t,
                node: Node::Consumer(0),
                ..
            } => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(
        connects,
        [0, 49_500_000],
        "the restarted process joins only then"
    );
    assert!(events
        .iter()
        .any(|e| matches!(*e, Event::Recover { t: 5_500_000, .. })));
    assert_eq!((m.applied, m.lost, m.pending_at_end), (10, 0, 0));
    let static_member = crashed
        .clone()
        .section("consumers")
        .with("restart_takes_over", true);
    let (m, events) = history(&static_member.to_toml(), "kafka");
    assert_eq!(replayed(&events), at(5_500_000));
    assert_eq!(m.duplicates, 4);
    let (m, _) = history(&committing(crashed, "each"), "kafka");
    assert_eq!((m.duplicates, m.applied), (0, 10));
}

/// The only member dies for good 0.4s after processing its fourth record, before its first
/// auto-commit: the run cannot settle. The four records processed stay applied, and the log
/// still holds them beyond the committed offset (`unacked` at the end: the group would replay
/// them); the six never fetched are pending. Committing each record leaves none unacked.
#[test]
fn records_processed_beyond_the_last_commit_are_unacked_at_the_end() {
    let dies = crash(plain(ten_records(1, 1)), None);
    let (m, events) = history(&dies.to_toml(), "kafka");
    let unacked: Vec<u32> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Unacked { msg, .. } => Some(msg.seq),
            _ => None,
        })
        .collect();
    assert_eq!(unacked, [0, 1, 2, 3]);
    assert_eq!((m.applied, m.unacked_at_end, m.pending_at_end), (4, 4, 6));
    assert_ne!(m.ended_by, sim::summary::EndReason::Settled);
    let (m, _) = history(&committing(dies, "each"), "kafka");
    assert_eq!((m.applied, m.unacked_at_end, m.pending_at_end), (4, 0, 6));
}

/// Consumer 0 owns the only partition and stops for 60s at 2.5s (a GC pause past the 45s session
/// timeout; a stopped process polls for nothing more): the group drops it at 47.5s and consumer 1
/// replays from the last commit (none). When consumer 0 wakes up and rejoins, its commit of the
/// two records it had processed is refused.
#[test]
fn a_zombies_commit_is_refused_and_its_partition_replayed() {
    let text = plain(ten_records(2, 1))
        .section("workload")
        .with("messages", 80)
        .fault_for("consumer_pause", "2500ms", "60s")
        .with("consumer", 0);
    let (m, events) = history(&text.to_toml(), "kafka");
    let dropped = events.iter().find_map(|e| match *e {
        Event::Disconnect {
            t,
            node: Node::Consumer(0),
        } => Some(t),
        _ => None,
    });
    assert_eq!(dropped, Some(47_500_000), "2.5s + session.timeout.ms 45s");
    let refused: Vec<(u32, u32)> = events
        .iter()
        .filter_map(|e| match *e {
            Event::AckFail { t, msg, consumer } if t >= 62_500_000 => Some((consumer, msg.seq)),
            _ => None,
        })
        .collect();
    assert_eq!(refused, [(0, 0), (0, 1)]);
    assert_eq!(m.coverage.failed_acks, 2);
    // Nothing was handed to the stopped process after it stopped.
    assert!(!events.iter().any(|e| matches!(
        e,
        Event::Dispatch { t, consumer: 0, .. } if (2_500_000..62_500_000).contains(t)
    )));
    // Consumer 1 applied the first two again.
    assert_eq!((m.duplicates, m.applied, m.lost), (2, 80, 0));
}

/// A graceful leave and join (two rebalances): the leaving member commits what it processed,
/// the partitions move with nothing processed twice and nothing out of order; a crash of the
/// same member at the same time replays what it had not committed.
#[test]
fn a_graceful_leave_and_join_hand_partitions_over_without_duplicates() {
    let text = |kind: &str| {
        plain(topic(6))
            .workload(3000, "100/s", 40)
            .consumers(3, exponential("5ms"))
            .fault_for(kind, "10s", "5s")
            .with("consumer", 1)
            .to_toml()
    };
    let (m, events) = history(&text("consumer_leave"), "kafka");
    let c1: Vec<Event> = events
        .iter()
        .filter(|e| match e {
            Event::Disconnect { node, .. } | Event::Connect { node, .. } => {
                *node == Node::Consumer(1)
            }
            Event::Commit { consumer, .. } => *consumer == 1,
            _ => false,
        })
        .copied()
        .collect();
    // It commits, then leaves at once (it was idle or finished its record), joins at 15s.
    let leave_at = match c1.iter().find(|e| matches!(e, Event::Disconnect { .. })) {
        Some(Event::Disconnect { t, .. }) => *t,
        _ => panic!("no disconnect: {c1:?}"),
    };
    assert!((10_000_000..10_100_000).contains(&leave_at), "{leave_at}");
    assert!(c1
        .iter()
        .any(|e| matches!(e, Event::Commit { t, .. } if *t == leave_at)));
    assert!(c1
        .iter()
        .any(|e| matches!(e, Event::Connect { t: 15_000_000, .. })));
    assert_eq!(
        (m.ordering_violations, m.duplicates, m.applied, m.lost),
        (0, 0, 3000, 0)
    );
    assert!(m.coverage.reassignments > 0);
    let (m, _) = history(&text("consumer_crash"), "kafka");
    assert!(m.duplicates > 0, "a crash replays from the last commit");
    assert_eq!((m.applied, m.lost), (3000, 0));
}

/// One partition drained by consumer 0 with a backlog; two partitions are added at 10s, seen at
/// once by every client (`metadata_max_age = "0s"`; under the flavour's 5 min nobody sees them
/// within this run: tests/new_partitions.rs): later records of some keys go to a new partition
/// that consumer 1 owns and are applied before the older records of the same keys still queued
/// in partition 0 [K4]. `auto_offset_reset = "earliest"`: under the flavour's `latest` what the
/// producers write to the new partitions while the rebalance waits for busy consumer 0's next
/// poll is skipped (tests/new_partitions.rs), and this test is about the split, not the loss.
#[test]
fn adding_partitions_splits_a_key_across_owners() {
    let text = topic(1)
        .workload(2000, "100/s", 20)
        .consumers(2, "15ms")
        .section("consumers")
        .with("metadata_max_age", "0s")
        .with("auto_offset_reset", "earliest")
        .section("producers")
        .with("metadata_max_age", "0s");
    let (m, _) = history(&text.to_toml(), "kafka");
    assert_eq!((m.ordering_violations, m.applied), (0, 2000));
    let add = text
        .fault("add_partitions")
        .with("at", "10s")
        .with("count", 2);
    let (m, events) = history(&add.to_toml(), "kafka");
    assert!(m.ordering_violations > 0, "{m:?}");
    assert_eq!((m.applied, m.lost, m.duplicates), (2000, 0, 0));
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Apply { consumer: 1, .. })));
}

/// Records that fail (the target is down for 300ms): Spring Kafka's default error handler retries
/// a record in place, so its partition waits and order holds, but its 10 attempts without delay
/// last 20ms here: records are skipped (dropped) through the outage. A retry topic (non-blocking,
/// with a delay) loses nothing and lets later records of a key go first [K6].
#[test]
fn blocking_retry_keeps_a_partition_in_order_and_a_retry_topic_does_not() {
    let text = topic(1)
        .workload(400, "200/s", 2)
        .consumers(1, "2ms")
        .fault_for("db_outage", "500ms", "300ms");
    let (m, _) = history(&text.to_toml(), "kafka");
    assert_eq!(m.ordering_violations, 0, "{m:?}");
    assert!(m.innocent_dropped > 0, "{m:?}");
    assert_eq!(m.applied + m.innocent_dropped, 400);
    let retry_topic = text
        .section("redelivery")
        .with("mode", "non_blocking")
        .with("initial_delay", "1s")
        .with("backout_threshold", 0);
    let (m, _) = history(&retry_topic.to_toml(), "kafka");
    assert!(m.ordering_violations > 0, "{m:?}");
    assert_eq!((m.applied, m.dropped), (400, 0));
}

/// A Kafka consumer reads each partition on its own: with the `kafka` flavour no partition's
/// records wait behind another's backlog (the flavour's dispatch window is unbounded). With
/// ActiveMQ's window of 200 written out, a partition whose owner is stopped holds the rest back.
#[test]
fn a_stalled_partition_does_not_hold_back_the_others() {
    let text = |page: Option<u32>| {
        let b = topic(2)
            .workload(3000, "200/s", 40)
            .consumers(2, "2ms")
            .fault_for("consumer_pause", "1s", "12s")
            .with("consumer", 0);
        match page {
            Some(page) => b.last("broker").with("page_size", page).to_toml(),
            None => b.to_toml(),
        }
    };
    let run = |page| common::run(&common::scenario(&text(page)), "kafka", 1);
    let (default, unbounded, amq) = (run(None), run(Some(1000000)), run(Some(200)));
    assert_eq!(default, unbounded);
    // Consumer 1's partition (over half the records) flows through the pause by default; with
    // a window of 200 it waits behind consumer 0's backlog.
    assert!(default.latency_ms.p50 < 100.0, "{:?}", default.latency_ms);
    assert!(amq.latency_ms.p50 > 1000.0, "{:?}", amq.latency_ms);
}

/// A member that restarts before the group noticed its death joins as a new member, and the
/// rebalance its join starts waits for the dead member's session to time out: from the restart
/// (15s) to the timeout (10s + 45s) the whole group fetches nothing (an eager rebalance stops
/// every member); before the restart only the dead member's partitions wait. With static
/// membership (`restart_takes_over = true`) the group goes on.
#[test]
fn a_restarted_member_stalls_the_group_until_its_old_session_times_out() {
    let text = topic(6)
        .workload(8000, "100/s", 40)
        .consumers(3, exponential("5ms"))
        .with("commit", "each")
        .fault_for("consumer_crash", "10s", "5s")
        .with("consumer", 1);
    let dispatched = |events: &[Event], from: u64, to: u64| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Dispatch { t, .. } if (from..to).contains(t)))
            .count()
    };
    let (m, events) = history(&text.to_toml(), "kafka");
    assert!(
        dispatched(&events, 10_100_000, 15_000_000) > 100,
        "the others go on"
    );
    assert_eq!(
        dispatched(&events, 15_000_001, 55_000_000),
        0,
        "the group waits"
    );
    assert!(dispatched(&events, 55_000_000, 56_000_000) > 100);
    assert_eq!((m.ordering_violations, m.applied, m.lost), (0, 8000, 0));
    let static_member = text.section("consumers").with("restart_takes_over", true);
    let (m, events) = history(&static_member.to_toml(), "kafka");
    assert!(dispatched(&events, 15_000_001, 55_000_000) > 1000);
    assert_eq!((m.ordering_violations, m.applied, m.lost), (0, 8000, 0));
}

/// `max.poll.interval.ms` (here 30s): consumer 0 owns the only partition and its polls grow as
/// the backlog does (1s a record, 10 records a second, up to 100 a poll), until one poll's
/// records take longer than the limit. The group then drops it while it is still working (its
/// heartbeat thread leaves for it), consumer 1 replays the partition from the last commit, and
/// consumer 0 still writes every record it had polled: duplicates, older states written after
/// newer ones, and its commit refused. The commit is made only at a poll, so the poll that was
/// too long commits nothing: consumer 1's polls of the same backlog are as long, it is dropped
/// in turn, and the group replays the same records for ever (Kafka's rebalance loop): the run
/// never settles. A limit it never reaches changes nothing; polls small enough for the limit
/// (20 records, 20s) settle.
#[test]
fn a_poll_loop_slower_than_max_poll_interval_is_dropped_and_writes_late() {
    let text = |limit: &str| {
        kafka()
            .evenly(200, "10/s", 1)
            .consumers(2, "1s")
            .prefetch(100)
            .with("max_poll_interval", limit)
            .to_toml()
    };
    let (m, events) = history(&text("30s"), "kafka");
    let dropped: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Disconnect {
                t,
                node: Node::Consumer(0),
            } => Some(t),
            _ => None,
        })
        .collect();
    assert!(!dropped.is_empty(), "consumer 0 is dropped");
    let polled_before = events.iter().rev().find_map(|e| match *e {
        Event::Dispatch { t, consumer: 0, .. } if t <= dropped[0] => Some(t),
        _ => None,
    });
    assert_eq!(polled_before.map(|t| t + 30_000_000), Some(dropped[0]));
    // It kept writing after it was dropped.
    assert!(events.iter().any(|e| matches!(
        *e,
        Event::Apply { t, consumer: 0, .. } if t > dropped[0] + 1_000_000
    )));
    // Once the records it polled are done, its next poll joins the group again.
    let last_write = events
        .iter()
        .filter_map(|e| match *e {
            Event::Apply { t, consumer: 0, .. } if t > dropped[0] => Some(t),
            _ => None,
        })
        .take_while(|&t| dropped.get(1).is_none_or(|&d| t < d))
        .last()
        .expect("writes after the drop");
    assert!(
        events.iter().any(|e| matches!(
            *e,
            Event::Connect { t, node: Node::Consumer(0), .. } if t >= last_write
        )),
        "consumer 0 joins again after its last write since the drop, at {last_write}"
    );
    assert!(m.duplicates > 0 && m.stale_writes > 0, "{m:?}");
    assert!(m.coverage.failed_acks > 0, "{m:?}");
    assert!(m.pending_at_end > 0 && m.lost == 0, "{m:?}");
    assert_ne!(m.ended_by, sim::summary::EndReason::Settled);
    let dropped = events
        .iter()
        .filter(|e| matches!(e, Event::Disconnect { .. }))
        .count();
    assert!(dropped > 10, "each owner is dropped in turn: {dropped}");
    let (m, events) = history(&text("1h"), "kafka");
    assert!(!events.iter().any(|e| matches!(e, Event::Disconnect { .. })));
    assert_eq!((m.duplicates, m.stale_writes, m.applied), (0, 0, 200));
    let small_polls = text("30s").replace("prefetch = 100", "prefetch = 20");
    let (m, events) = history(&small_polls, "kafka");
    assert!(!events.iter().any(|e| matches!(e, Event::Disconnect { .. })));
    assert_eq!((m.applied, m.pending_at_end), (200, 0));
}
