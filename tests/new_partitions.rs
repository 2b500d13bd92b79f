//! Partitions added to a Kafka topic are seen late (issue 38 §7): each producer hashes keys over
//! the new count from its own next metadata refresh (`metadata.max.age.ms`, 5 min), the group
//! rebalances onto them at its leader's refresh, and a new partition's first owner starts at
//! `auto.offset.reset`: under `latest` (Kafka's default) what was written to it before is
//! skipped, lost (KAFKA-12261); under `earliest` it is read, late.

use crate::common::{run_with, scenario};

use sim::history::{DiscardReason, Event};

/// When the partitions are added.
const ADD: u64 = 60_000_000;

/// Three producers (each key is one producer's), four consumers, 4 partitions + 4 at 60s,
/// with the kafka flavour's defaults unless `extra` sets `[consumers]` fields.
fn text(extra: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 30000
rate = "50/s"
keys = 300
[[broker]]
name = "k"
[producers]
count = 3
[consumers]
count = 4
service = "2ms"
{extra}
[strategy.kafka]
partitions = 4
[[fault]]
kind = "add_partitions"
at = "60s"
count = 4
"#
    )
}

/// Produce times by message id, and the producer of each.
fn produced(events: &[Event]) -> std::collections::BTreeMap<u64, (u64, u32)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Produce {
                t, msg, producer, ..
            } => Some((msg.id, (t, producer))),
            _ => None,
        })
        .collect()
}

/// `(time, message id)` of every record skipped by an offset reset.
fn skipped(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Discard {
                t,
                msg,
                reason: DiscardReason::OffsetReset,
            } => Some((t, msg.id)),
            _ => None,
        })
        .collect()
}

fn history(extra: &str, seed: u64) -> (sim::Metrics, Vec<Event>) {
    let sc = scenario(&text(extra));
    let mut events = Vec::new();
    let m = run_with(&sc, "kafka", seed, |e| events.push(*e));
    (m, events)
}

/// The first refresh at or after the add of a client whose refresh phase is drawn as the
/// strategy draws it (`Component::Strategy`, purpose 1 for producers, 2 for consumers).
fn refresh_after_add(seed: u64, purpose: u8, client: u32) -> u64 {
    let age = 300_000_000;
    let phase = sim::rng::draw_below(seed, sim::rng::Component::Strategy, client, purpose, age);
    if ADD <= phase {
        phase
    } else {
        phase + (ADD - phase).div_ceil(age) * age
    }
}

/// Under `latest` (the kafka flavour's default) the records written to the new partitions
/// between the producers' refreshes and the group leader's are skipped at that one instant:
/// counted lost, each produced after the add and before the reset, and nothing produced after
/// the reset is lost. Before, every client saw the partitions at once and nothing was lost.
#[test]
fn under_latest_what_was_written_to_a_new_partition_before_the_group_saw_it_is_lost() {
    let (m, events) = history("", 1);
    let skips = skipped(&events);
    assert!(m.lost > 0, "nothing lost: {m:?}");
    assert_eq!(m.lost, skips.len() as u64);
    let reset = skips[0].0;
    // The group learns at its leader's (consumer 0's) refresh.
    assert_eq!(reset, refresh_after_add(1, 2, 0));
    let at = produced(&events);
    for &(t, id) in &skips {
        assert_eq!(t, reset, "one reset");
        let (p, _) = at[&id];
        assert!(p >= ADD && p < reset, "record {id} produced at {p}");
    }
    assert_eq!(m.applied + m.lost, m.produced);
}

/// The same run under `earliest`: nothing is lost; the records the `latest` run skipped are
/// read once the group has seen their partition, no earlier than its leader's refresh.
#[test]
fn under_earliest_they_are_read_late_and_nothing_is_lost() {
    let (latest, lev) = history("", 1);
    let (m, events) = history("auto_offset_reset = \"earliest\"", 1);
    assert_eq!((m.lost, m.applied), (0, m.produced), "{m:?}");
    let reset = refresh_after_add(1, 2, 0);
    let was_skipped: std::collections::BTreeSet<u64> =
        skipped(&lev).into_iter().map(|(_, id)| id).collect();
    assert_eq!(was_skipped.len() as u64, latest.lost);
    assert!(!was_skipped.is_empty(), "the latest run lost nothing");
    let mut read = 0;
    for e in &events {
        if let Event::Apply { t, msg, .. } = *e {
            if was_skipped.contains(&msg.id) {
                assert!(
                    t >= reset,
                    "record {} applied at {t} before {reset}",
                    msg.id
                );
                read += 1;
            }
        }
    }
    assert_eq!(read, was_skipped.len());
}

/// Each producer switches at its own refresh, not all at once at the add: no record a producer
/// sent before its refresh is on a new partition (so none of them is skipped), and a producer
/// that refreshed well before the group's reset has records skipped from just after its
/// refresh. Across seeds the producers' refreshes differ.
#[test]
fn producers_switch_at_their_own_refresh() {
    let mut late_switch = 0;
    for seed in 1..=6 {
        let (_, events) = history("", seed);
        let reset = refresh_after_add(seed, 2, 0);
        let at = produced(&events);
        let skips = skipped(&events);
        let mut switches = Vec::new();
        for p in 0..3u32 {
            let switch = refresh_after_add(seed, 1, p);
            switches.push(switch);
            let first = skips
                .iter()
                .filter(|(_, id)| at[id].1 == p)
                .map(|(_, id)| at[id].0)
                .min();
            if let Some(first) = first {
                assert!(
                    first >= switch,
                    "seed {seed} producer {p}: {first} < {switch}"
                );
            }
            if switch + 5_000_000 < reset {
                let first = first.unwrap_or_else(|| panic!("seed {seed} producer {p}: none"));
                assert!(
                    first < switch + 5_000_000,
                    "seed {seed} producer {p}: {first}"
                );
                if switch > ADD + 5_000_000 {
                    late_switch += 1;
                }
            }
        }
        switches.sort_unstable();
        switches.dedup();
        assert_eq!(switches.len(), 3, "seed {seed}: {switches:?}");
    }
    // Some producer went on writing the old partitions for seconds after the add.
    assert!(late_switch > 0);
}

/// `metadata_max_age = "0s"` everywhere is the old behaviour: everyone switches at once, the
/// group rebalances at the add, and nothing is lost even under `latest`.
#[test]
fn with_no_metadata_age_everyone_switches_at_once() {
    let sc = text("metadata_max_age = \"0s\"")
        .replace("count = 3\n", "count = 3\nmetadata_max_age = \"0s\"\n");
    let sc = scenario(&sc);
    let m = run_with(&sc, "kafka", 1, |_| {});
    assert_eq!((m.lost, m.applied), (0, m.produced));
}

/// Partitions seen at once by everyone (`metadata_max_age = "0s"`) while consumer 0 is busy with
/// a backlog on the one old partition: the rebalance waits for its next poll (the rebalance
/// protocols, tests/rebalance_protocol.rs), and only then is a new partition assigned and its
/// position reset. Under `latest` what the producers wrote to the new partitions in between is
/// skipped, at the instant consumer 0 rejoins (it commits then), eager or cooperative (the new
/// partitions are nobody's, but the assignment waits for every member either way); under
/// `earliest` nothing is lost. A model that resets at the add, as if the group rebalanced at
/// once, fails this test: it loses nothing here (checked on the first version of this work,
/// which did so).
#[test]
fn the_reset_waits_for_the_rebalance_and_skips_what_was_written_meanwhile() {
    let text = |assignor: &str, reset: &str| {
        format!(
            r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 2000
rate = "100/s"
keys = 20
[[broker]]
name = "k"
[producers]
metadata_max_age = "0s"
[consumers]
count = 2
service = "15ms"
metadata_max_age = "0s"
auto_offset_reset = "{reset}"
[strategy.kafka]
partitions = 1
assignor = "{assignor}"
[[fault]]
kind = "add_partitions"
at = "10s"
count = 2
"#
        )
    };
    let add = 10_000_000;
    for assignor in ["range", "cooperative_sticky"] {
        let mut events = Vec::new();
        let m = run_with(&scenario(&text(assignor, "latest")), "kafka", 1, |e| {
            events.push(*e)
        });
        let skips = skipped(&events);
        assert!(m.lost > 0, "{assignor}: nothing lost: {m:?}");
        assert_eq!(m.lost, skips.len() as u64, "{assignor}");
        let reset = skips[0].0;
        assert!(reset > add, "{assignor}: the reset did not wait ({reset})");
        assert!(
            events.iter().any(|e| matches!(
                e,
                Event::Commit { t, consumer: 0, .. } if *t == reset
            )),
            "{assignor}: consumer 0 did not rejoin at {reset}"
        );
        let at = produced(&events);
        for &(t, id) in &skips {
            assert_eq!(t, reset, "{assignor}: one reset");
            let (p, _) = at[&id];
            assert!(
                p >= add && p < reset,
                "{assignor}: record {id} produced at {p}"
            );
        }
        assert_eq!(m.applied + m.lost, m.produced, "{assignor}");
        let m = run_with(&scenario(&text(assignor, "earliest")), "kafka", 1, |_| {});
        assert_eq!((m.lost, m.applied), (0, m.produced), "{assignor}: {m:?}");
    }
}
