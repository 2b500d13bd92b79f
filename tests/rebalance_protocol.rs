//! Kafka's rebalance protocols (issue 38 §3). Eager (`range`, `round_robin`; the default list
//! `[range, cooperative-sticky]` negotiates eager): every member revokes everything it owns when
//! it rejoins (`ConsumerCoordinator.onJoinPrepare`), which it does only from its next `poll()`,
//! so one member deep in a long poll stops the whole group (KIP-429). Cooperative
//! (`cooperative_sticky`): the members keep their partitions while they rejoin; only the
//! partitions that move are revoked (`onJoinComplete`) and handed out in a second round.

use crate::common::history;

use sim::history::Event;

/// Three members over six partitions, 10ms a record; consumer 2 is 100 times slower (1s a
/// record: a poll of up to 100 records is up to 100s of work, inside `max.poll.interval.ms`);
/// consumer 0 leaves at 30s and comes back at 50s.
fn text(assignor: &str, client: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 12000
rate = "100/s"
keys = 60
[[broker]]
name = "k"
[consumers]
count = 3
prefetch = 100
service = "10ms"
client = "{client}"
[strategy.kafka]
partitions = 6
assignor = "{assignor}"
[[fault]]
kind = "slow_consumer"
consumer = 2
at = "0s"
for = "1000s"
factor = 100
[[fault]]
kind = "consumer_leave"
consumer = 0
at = "30s"
for = "20s"
"#
    )
}

/// The longest time, in µs, between two dispatches to consumer 1 from 25s to 200s.
fn longest_gap_of_consumer_1(events: &[Event]) -> u64 {
    let times: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch { t, consumer: 1, .. } if (25_000_000..200_000_000).contains(&t) => {
                Some(t)
            }
            _ => None,
        })
        .collect();
    times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
}

/// Under range the leave (and the join after it) stops consumer 1 too, fast as it is, until the
/// slow member finishes its poll and rejoins: no record for it for many seconds. Under
/// cooperative-sticky the partitions that stay keep flowing: it is never without records for
/// more than a moment.
#[test]
fn an_eager_rebalance_waits_for_the_slow_member_and_a_cooperative_one_does_not() {
    let (range, events) = history(&text("range", "spring"), "kafka");
    let eager = longest_gap_of_consumer_1(&events);
    let (coop, events) = history(&text("cooperative_sticky", "spring"), "kafka");
    let cooperative = longest_gap_of_consumer_1(&events);
    assert!(eager >= 5_000_000, "range: {eager}µs");
    assert!(
        cooperative < 1_000_000,
        "cooperative-sticky: {cooperative}µs"
    );
    for m in [&range, &coop] {
        assert_eq!((m.applied, m.lost, m.pending_at_end), (12000, 0, 0));
    }
    // Everyone's records waited for the slow member's poll.
    assert!(
        range.latency_ms.p50 > coop.latency_ms.p50,
        "{range:?} {coop:?}"
    );
}

/// A member commits only at a poll: each commit of the slow consumer comes when every record
/// it was dispatched is processed, even those of a rebalance (it rejoins, and commits, from its
/// next `poll()`), under Spring's container and the plain client's auto-commit alike.
#[test]
fn a_member_busy_in_a_poll_commits_only_when_it_polls_again() {
    for assignor in ["range", "cooperative_sticky"] {
        for client in ["spring", "plain"] {
            let (_, events) = history(&text(assignor, client), "kafka");
            let mut outstanding = 0i64;
            let mut commits = 0;
            for e in &events {
                match *e {
                    Event::Dispatch { consumer: 2, .. } => outstanding += 1,
                    Event::Apply { consumer: 2, .. } => outstanding -= 1,
                    Event::Commit { t, consumer: 2, .. } => {
                        commits += 1;
                        assert_eq!(outstanding, 0, "{assignor} {client}: commit at {t}µs");
                    }
                    _ => {}
                }
            }
            assert!(commits > 0, "{assignor} {client}");
        }
    }
}
