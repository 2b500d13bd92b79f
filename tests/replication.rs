//! Leaders and replicas (issue 38 §8): with `[broker.replication]` the broker leads the topic's
//! partitions and followers fetch what it writes. A `broker_crash` takes the leader down: a
//! follower in sync leads after `leader_election_time`, and what the followers had not fetched
//! is cut from the log. `acks = "1"` had told the producer it was written: lost; `acks = "all"`
//! had not: the producer sends it again, nothing lost. `min_insync_replicas` refuses writes
//! while too few replicas are in sync; `unclean_leader_election` lets a replica out of sync
//! lead, losing what it missed, instead of waiting for the last one in sync.
//!
//! On today's behaviour (the `[[broker]]` the whole cluster: `broker_crash` stops it until the
//! fault ends, its log whole) the loss, min-ISR and unclean-election tests fail: nothing is lost
//! under `acks = "1"`, and nobody serves before the fault ends. (Checked by making
//! `Engine::broker_crash` and `broker_restart` in `sim/src/engine/failover.rs` skip their
//! replicated branch.) The high-watermark test reads a mechanism without a crash, and the
//! validation test does not run the engine.

use crate::common::{run_with, scenario};
use sim::history::{DiscardReason, Event, Node};

/// The crash of the leader.
const CRASH: u64 = 20_000_000;
/// How long the crashed replica stays down.
const DOWN: u64 = 30_000_000;

/// 500 records/s over 50 keys into 6 partitions, three consumers keeping up; the leader
/// crashes at 20s for 30s. `replication` and `producers` extend those tables.
fn text(producers: &str, replication: &str, consumers: &str, faults: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 25000
rate = "500/s"
keys = 50
[producers]
{producers}
[[broker]]
name = "k"
[broker.replication]
replication_lag = {{ dist = "exponential", mean = "20ms" }}
{replication}
[consumers]
count = 3
prefetch = 500
service = {{ dist = "exponential", mean = "1ms" }}
{consumers}
[strategy.kafka]
partitions = 6
[[fault]]
kind = "broker_crash"
broker = "k"
at = "20s"
for = "30s"
{faults}
"#
    )
}

fn history(text: &str, seed: u64) -> (sim::Metrics, Vec<Event>) {
    let sc = scenario(text);
    let mut events = Vec::new();
    let m = run_with(&sc, "kafka", seed, |e| events.push(*e));
    (m, events)
}

/// Times the broker came back (`Recover`).
fn recoveries(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Recover {
                t,
                node: Node::Broker(0),
            } => Some(t),
            _ => None,
        })
        .collect()
}

/// `(time, id)` of every record cut from the log.
fn truncated(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Discard {
                t,
                msg,
                reason: DiscardReason::Truncated,
            } => Some((t, msg.id)),
            _ => None,
        })
        .collect()
}

#[test]
fn acks_1_loses_what_the_followers_had_not_fetched_and_acks_all_loses_nothing() {
    let rf3 = "replication_factor = 3\nmin_insync_replicas = 2";
    for seed in 1..=3 {
        let (one, ev1) = history(&text("acks = \"1\"", rf3, "", ""), seed);
        let (all, ev_all) = history(&text("acks = \"all\"", rf3, "", ""), seed);
        // A follower in sync leads after the controller's election (7-9s), long before the
        // crashed replica is back (30s).
        for ev in [&ev1, &ev_all] {
            let back = recoveries(ev);
            assert_eq!(back.len(), 1, "seed {seed}: {back:?}");
            let after = back[0] - CRASH;
            assert!(
                (7_000_000..=9_000_000).contains(&after),
                "seed {seed}: a new leader serves {after}us after the crash"
            );
        }
        // acks = 1: every record the leader had written and answered, and the followers had
        // not fetched, is gone at the election: lost.
        let cut = truncated(&ev1);
        assert!(!cut.is_empty(), "seed {seed}: acks=1 lost nothing");
        assert_eq!(one.lost, cut.len() as u64, "seed {seed}");
        let stored: std::collections::BTreeMap<u64, u64> = ev1
            .iter()
            .filter_map(|e| match *e {
                Event::Enqueue { t, msg, .. } => Some((msg.id, t)),
                _ => None,
            })
            .collect();
        for &(t, id) in &cut {
            assert!(
                t > CRASH && t < CRASH + 9_000_000,
                "seed {seed}: cut at {t}"
            );
            let at = stored[&id];
            assert!(
                at <= CRASH && at + 2_000_000 > CRASH,
                "seed {seed}: record {id} written at {at}, shortly before the crash"
            );
        }
        // acks = all: the same records were never answered: sent again, stored, applied.
        assert_eq!(all.lost, 0, "seed {seed}");
        assert!(truncated(&ev_all).is_empty(), "seed {seed}");
        assert_eq!(all.applied, all.produced, "seed {seed}");
        let failed_at_crash = ev_all
            .iter()
            .filter(|e| matches!(e, Event::SendFail { t, .. } if *t > CRASH && *t < CRASH + DOWN))
            .count();
        assert!(
            failed_at_crash > 0,
            "seed {seed}: no send came back to its producer"
        );
    }
}

#[test]
fn consumers_read_only_below_the_high_watermark() {
    // No record is handed to a consumer before its followers have it: with a 200ms lag
    // (constant) every delivery before the crash comes at least 200ms after its write (after
    // it the new leader is alone in sync: its writes are committed at once).
    let (m, events) = history(
        &text(
            "acks = \"1\"",
            "replication_factor = 2\nreplication_lag = \"200ms\"",
            "",
            "",
        )
        .replace(
            "replication_lag = { dist = \"exponential\", mean = \"20ms\" }\n",
            "",
        ),
        1,
    );
    let stored: std::collections::BTreeMap<u64, u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { t, msg, .. } => Some((msg.id, t)),
            _ => None,
        })
        .collect();
    let mut delivered = 0;
    for e in &events {
        if let Event::Dispatch { t, msg, .. } = *e {
            if t >= CRASH {
                break;
            }
            delivered += 1;
            assert!(t >= stored[&msg.id] + 200_000, "{msg:?} read at {t}");
        }
    }
    assert!(delivered > 0 && m.applied > 0);
}

#[test]
fn min_insync_replicas_refuses_writes_while_the_isr_is_short() {
    // Two replicas, both needed: once the follower leads alone, an acks=all write is refused
    // (NotEnoughReplicas) until the crashed one is back and caught up; nothing is stored then.
    let (m, events) = history(
        &text(
            "acks = \"all\"",
            "replication_factor = 2\nmin_insync_replicas = 2",
            "",
            "",
        ),
        1,
    );
    let back = recoveries(&events)[0];
    let stored_meanwhile = events
        .iter()
        .filter(
            |e| matches!(e, Event::Enqueue { t, .. } if *t > back + 1_000_000 && *t < CRASH + DOWN),
        )
        .count();
    assert_eq!(stored_meanwhile, 0, "stored while the ISR was short");
    let refused = events
        .iter()
        .filter(|e| matches!(e, Event::SendFail { t, .. } if *t > back && *t < CRASH + DOWN))
        .count();
    assert!(refused > 100, "{refused} refused sends");
    assert_eq!(m.lost, 0);
    assert_eq!(m.applied, m.produced);
    // With one replica enough, the new leader takes writes at once.
    let (_, events) = history(
        &text(
            "acks = \"all\"",
            "replication_factor = 2\nmin_insync_replicas = 1",
            "",
            "",
        ),
        1,
    );
    let back = recoveries(&events)[0];
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Enqueue { t, .. } if *t > back && *t < back + 1_000_000)));
}

#[test]
fn unclean_election_trades_loss_for_availability() {
    // Two replicas. The leader crashes at 20s for 30s; the follower leads from about 28s, alone;
    // it crashes at 40s for 60s: nobody in sync is alive. At 50s the first is back, out of sync.
    // Clean (the default): the partitions wait for the second (100s), nothing lost. Unclean:
    // the first leads at 50s, and what the second wrote meanwhile that the (slow) consumers
    // had not read is lost.
    let second = "[[fault]]\nkind = \"broker_crash\"\nbroker = \"k\"\nat = \"40s\"\nfor = \"60s\"";
    let slow = "service = { dist = \"exponential\", mean = \"8ms\" }";
    let run = |unclean: bool| {
        let t = text(
            "acks = \"all\"",
            &format!("replication_factor = 2\nunclean_leader_election = {unclean}"),
            "",
            second,
        )
        .replace("service = { dist = \"exponential\", mean = \"1ms\" }", slow);
        history(&t, 1)
    };
    let (clean, ev_clean) = run(false);
    let (unclean, ev_unclean) = run(true);
    let back_clean = recoveries(&ev_clean);
    let back_unclean = recoveries(&ev_unclean);
    assert_eq!(back_clean.len(), 2, "{back_clean:?}");
    assert_eq!(
        back_clean[1], 100_000_000,
        "the last in sync leads when it returns"
    );
    assert_eq!(
        back_unclean[1], 50_000_000,
        "the first back leads, out of sync"
    );
    assert_eq!(clean.lost, 0);
    assert!(truncated(&ev_clean).is_empty());
    let cut = truncated(&ev_unclean);
    assert!(!cut.is_empty(), "unclean election lost nothing");
    assert_eq!(unclean.lost, cut.len() as u64);
    assert!(cut.iter().all(|&(t, _)| t == 50_000_000));
}

#[test]
fn replication_settings_are_validated_with_friendly_errors() {
    let bad = |t: &str, want: &str| {
        let e = ordsim::load_text("t.toml", t)
            .expect_err("refused")
            .to_string();
        assert!(e.contains(want), "{e}");
    };
    bad(
        &text("", "replication_factor = 0", "", ""),
        "replication_factor`: must be 1 to 32",
    );
    bad(
        &text("", "min_insync_replicas = 0", "", ""),
        "min_insync_replicas`: must be 1 to 32",
    );
    bad(
        &text("acks = \"0\"", "", "", ""),
        "`producers.acks`: unknown variant `0`, expected one of",
    );
    bad(
        &text("", "", "", "")
            .replace("flavour = \"kafka\"", "flavour = \"activemq\"")
            .replace("strategies = [\"kafka\"]", "strategies = [\"competing\"]")
            .replace("[strategy.kafka]\npartitions = 6\n", ""),
        "it needs flavour = \"kafka\"",
    );
    // acks without replicas does nothing: refused.
    let plain = text("acks = \"1\"", "", "", "");
    let cut = plain.find("[broker.replication]").unwrap();
    let end = plain.find("[consumers]").unwrap();
    let plain = format!("{}{}", &plain[..cut], &plain[end..]);
    bad(&plain, "add a [broker.replication] table");
}

/// An `acks = "all"` write its leader lost in a crash is given up at its delivery timeout,
/// which runs from its send, not from the election that cut it (Kafka's request failed at the
/// crash, and the batch expired in the accumulator `delivery.timeout.ms` after its
/// `createdMs`). 500 records/s, a 1s lag to the followers (every record of the last second
/// before the crash is above the high watermark), an 8s election and a 2s delivery timeout:
/// the records written in that second are past their deadline when the election ends, and
/// are given up then; none is stored. Fails on 50a9d09, where their deadline ran from the
/// election: sent again at once, all stored.
#[test]
fn an_acks_all_write_lost_in_a_crash_is_given_up_from_its_send() {
    let (m, events) = history(
        &text(
            "delivery_timeout = \"2s\"",
            "replication_factor = 3\nmin_insync_replicas = 2\nreplication_lag = \"1s\"\n\
             leader_election_time = \"8s\"",
            "",
            "",
        )
        .replace(
            "replication_lag = { dist = \"exponential\", mean = \"20ms\" }\n",
            "",
        ),
        1,
    );
    let produced: std::collections::BTreeMap<u64, u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Produce { t, msg, .. } => Some((msg.id, t)),
            _ => None,
        })
        .collect();
    let stored: std::collections::BTreeSet<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { msg, .. } => Some(msg.id),
            _ => None,
        })
        .collect();
    let elected = CRASH + 8_000_000;
    let mut cut = 0;
    for e in &events {
        if let Event::DeliveryTimeout { t, msg, .. } = *e {
            let sent = produced[&msg.id];
            if (CRASH - 990_000..CRASH).contains(&sent) {
                cut += 1;
                assert_eq!(t, elected, "{msg:?} sent at {sent}");
            }
        }
    }
    for (&id, &sent) in &produced {
        if (CRASH - 990_000..CRASH).contains(&sent) {
            assert!(
                !stored.contains(&id),
                "record {id} sent at {sent} was stored"
            );
        }
    }
    assert!(cut >= 490, "{cut} records of the last second given up");
    assert!(m.given_up >= 490, "{m:?}");
}
