//! Kafka transactions (issue 38 §9): a transactional producer (`[producers] transactional`,
//! Kafka's `transactional.id`) writes its records in transactions committed every
//! `commit_interval`; a `read_committed` consumer (`[consumers] isolation`, Kafka's
//! `isolation.level`) reads a partition only up to its last stable offset: a record waits for
//! the commit of its own transaction and of every transaction open at an earlier offset of its
//! partition, another producer's too. `read_uncommitted` (Kafka's default) reads at once.

use crate::common::{history, scenario};

use sim::history::Event;
use std::collections::BTreeMap;

const PARTITIONS: u32 = 2;
const INTERVAL: u64 = 500_000;

/// 40 records at 20/s (one every 50ms from 50ms) over 8 keys, `producers` transactional
/// producers (key k is producer k mod count's), 2 partitions, one idle consumer; `consumers`
/// extends `[consumers]`.
fn text(producers: u32, consumers: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 40
rate = "20/s"
arrival = "constant"
keys = 8
[[broker]]
name = "k"
[producers]
count = {producers}
transactional = true
commit_interval = "500ms"
[consumers]
count = 1
prefetch = 500
service = "1ms"
{consumers}
[strategy.kafka]
partitions = {PARTITIONS}
"#
    )
}

/// Per message id, when the consumer first got it.
fn first_dispatch(events: &[Event]) -> BTreeMap<u64, u64> {
    let mut at = BTreeMap::new();
    for e in events {
        if let Event::Dispatch { t, msg, .. } = *e {
            at.entry(msg.id).or_insert(t);
        }
    }
    at
}

/// Per message id, when a `read_committed` consumer may read it and when its own transaction
/// commits, derived from the writes alone
/// by Kafka's rule: a producer's transaction begins with its first record written after its
/// last commit and commits `INTERVAL` later; a record is readable once every transaction with
/// a record at its offset or before in its partition has committed (the LSO has passed it).
fn readable_by_lso(events: &[Event]) -> BTreeMap<u64, (u64, u64)> {
    let mut producer_of = BTreeMap::new();
    // Per producer: when its open transaction commits.
    let mut commit_at: BTreeMap<u32, u64> = BTreeMap::new();
    // Per partition: the latest commit time of the transactions written to it so far.
    let mut lso_wait: BTreeMap<u32, u64> = BTreeMap::new();
    let mut readable = BTreeMap::new();
    for e in events {
        match *e {
            Event::Produce { msg, producer, .. } => {
                producer_of.insert(msg.id, producer);
            }
            Event::Enqueue { t, msg, .. } => {
                let p = producer_of[&msg.id];
                let c = commit_at.entry(p).or_insert(t + INTERVAL);
                if *c <= t {
                    // Its last transaction committed (at `c`): this record begins the next.
                    *c = t + INTERVAL;
                }
                let part = strategies::kafka::key_hash(msg.key) % PARTITIONS;
                let w = lso_wait.entry(part).or_insert(0);
                *w = (*w).max(*c);
                readable.insert(msg.id, (*w, *c));
            }
            _ => {}
        }
    }
    readable
}

/// The stores of every message, by id.
fn stored(events: &[Event]) -> BTreeMap<u64, u64> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { t, msg, .. } => Some((msg.id, t)),
            _ => None,
        })
        .collect()
}

/// `read_committed`: each record reaches the consumer exactly when the LSO passes it; with two
/// producers a record often waits for the other producer's commit (its transaction began at an
/// earlier offset of the partition), later than its own. Before transactions were modelled the
/// file did not load (`transactional` was no field), and with the LSO ignored every record
/// would be read as it is written.
#[test]
fn read_committed_reads_up_to_the_last_stable_offset() {
    let (m, events) = history(&text(2, "isolation = \"read_committed\""), "kafka");
    assert_eq!((m.applied, m.lost, m.duplicates), (40, 0, 0));
    let lso = readable_by_lso(&events);
    let expected: BTreeMap<u64, u64> = lso.iter().map(|(&id, &(r, _))| (id, r)).collect();
    let got = first_dispatch(&events);
    assert_eq!(got, expected);
    // The LSO's cost: every record waits for a commit, and some wait past their own
    // transaction's commit for the other producer's.
    let stores = stored(&events);
    assert!(got.iter().all(|(id, t)| *t > stores[id]));
    let for_the_other = lso.values().filter(|&&(r, own)| r > own).count();
    assert!(
        for_the_other > 5,
        "{for_the_other} wait for the other producer's commit"
    );
    assert!(m.latency_ms.p50 >= 100.0, "p50 {} ms", m.latency_ms.p50);
}

/// `read_uncommitted` (Kafka's default): transactions change nothing for the consumer, every
/// record is read as it is written.
#[test]
fn read_uncommitted_reads_what_is_written_at_once() {
    for consumers in ["", "isolation = \"read_uncommitted\""] {
        let (m, events) = history(&text(2, consumers), "kafka");
        assert_eq!((m.applied, m.lost, m.duplicates), (40, 0, 0));
        assert_eq!(first_dispatch(&events), stored(&events));
    }
}

/// Kafka refuses a `transactional.id` without idempotence, and transactions belong to Kafka.
#[test]
fn a_transactional_producer_needs_idempotence_and_kafka() {
    let refused = |text: &str| match ordsim::load_text("t.toml", text) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    };
    let e = refused(&text(1, "").replace(
        "transactional = true",
        "transactional = true\nidempotence = false",
    ));
    assert!(e.contains("producers.transactional"), "{e}");
    assert!(e.contains("idempotence"), "{e}");
    let e = refused(
        &text(1, "")
            .replace("flavour = \"kafka\"", "flavour = \"activemq\"")
            .replace("strategies = [\"kafka\"]", "strategies = [\"single\"]")
            .replace("[strategy.kafka]\npartitions = 2", ""),
    );
    assert!(e.contains("transactional.id"), "{e}");
    let e = refused(&text(1, "").replace("transactional = true\n", ""));
    assert!(e.contains("commit_interval"), "{e}");
    let e = refused(&text(1, "").replace("\"500ms\"", "\"61s\""));
    assert!(e.contains("transaction.timeout.ms"), "{e}");
    // A valid file loads.
    scenario(&text(1, "isolation = \"read_committed\""));
}

/// One producer, one partition, a record every 100ms from 100ms (seq n at (n + 1) * 100ms),
/// the application committing every second; its process dies at 2.55s and a new instance
/// starts at 3.55s. Its third transaction began with seq 20 at 2.1s (the commit due at 2.1s
/// comes before the record sent then): seqs 20-24 were written since its last commit.
fn crash(producers: &str, consumers: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 40
rate = "10/s"
arrival = "constant"
keys = 1
[[broker]]
name = "k"
[producers]
commit_interval = "1s"
{producers}
[consumers]
count = 1
service = "1ms"
{consumers}
[[fault]]
kind = "producer_crash"
producer = 0
at = "2550ms"
for = "1s"
"#
    )
}

/// (seq, copy id, original id) of every resend, and the seqs discarded as aborted.
fn resends_and_aborts(events: &[Event]) -> (Vec<(u32, u64, u64)>, Vec<u32>) {
    let mut resends = Vec::new();
    let mut aborted = Vec::new();
    for e in events {
        match *e {
            Event::Resend {
                t,
                msg,
                of,
                deduplicated,
                ..
            } => {
                assert_eq!(t, 3_550_000, "written again when the new instance starts");
                assert!(!deduplicated);
                resends.push((msg.seq, msg.id, of));
            }
            Event::Discard { t, msg, reason } => {
                assert_eq!(reason, sim::history::DiscardReason::Aborted);
                assert_eq!(
                    t, 3_550_000,
                    "aborted by the new instance's initTransactions"
                );
                aborted.push(msg.seq);
            }
            _ => {}
        }
    }
    (resends, aborted)
}

/// Transactional, `read_committed`: the new instance aborts the open transaction (seqs 20-24
/// are never read) and writes them again; each is applied once, in order. Before producer
/// crashes were modelled the fault kind did not exist (the file did not load).
#[test]
fn a_crashed_transactional_producers_open_transaction_is_aborted_and_never_read() {
    let (m, events) = history(
        &crash("transactional = true", "isolation = \"read_committed\""),
        "kafka",
    );
    let (resends, aborted) = resends_and_aborts(&events);
    assert_eq!(
        resends.iter().map(|r| r.0).collect::<Vec<_>>(),
        (20..25).collect::<Vec<_>>()
    );
    assert!(resends.iter().all(|&(_, copy, of)| copy > of));
    assert_eq!(aborted, (20..25).collect::<Vec<_>>());
    assert_eq!(
        (
            m.applied,
            m.duplicates,
            m.lost,
            m.ordering_violations,
            m.pending_at_end
        ),
        (40, 0, 0, 0, 0)
    );
    assert_eq!(m.coverage.resends_stored, 5);
    // Every apply is of a record read once: the aborted originals never reached the consumer.
    let aborted_ids: Vec<u64> = resends.iter().map(|r| r.2).collect();
    assert!(!events.iter().any(|e| matches!(*e,
        Event::Dispatch { msg, .. } if aborted_ids.contains(&msg.id))));
}

/// The same crash read `read_uncommitted` (Kafka's default), or without transactions: the
/// records written since the last commit were read, and their copies are read again: five
/// duplicates. Transactions without `read_committed` buy nothing here.
#[test]
fn read_uncommitted_or_without_transactions_a_crash_duplicates_since_the_last_commit() {
    for (producers, consumers) in [
        ("transactional = true", "isolation = \"read_uncommitted\""),
        ("", ""),
    ] {
        let (m, events) = history(&crash(producers, consumers), "kafka");
        let (resends, aborted) = resends_and_aborts(&events);
        assert_eq!(
            resends.iter().map(|r| r.0).collect::<Vec<_>>(),
            (20..25).collect::<Vec<_>>(),
            "{producers}"
        );
        assert!(aborted.is_empty());
        assert_eq!(
            (m.applied, m.duplicates, m.lost, m.pending_at_end),
            (40, 5, 0, 0),
            "{producers} {consumers}"
        );
    }
}

/// Without Kafka, `commit_interval` is the producing application's checkpoint: a JMS
/// producer's crash goes back to it, whatever the flavour, and only a transaction (Kafka's
/// `transaction.timeout.ms`) caps it at 60s. The same crash (at 2.55s) with checkpoints
/// every 1s and every 3s from the first record (100ms): the last before the crash at 2.1s
/// (seqs 20-24 written again), or none yet (due at 3.1s: seqs 0-24).
#[test]
fn a_jms_producers_crash_goes_back_to_its_checkpoint() {
    let jms = |interval: &str| {
        crash("", "")
            .replace("flavour = \"kafka\"", "flavour = \"activemq\"")
            .replace("strategies = [\"kafka\"]", "strategies = [\"single\"]")
            .replace(
                "commit_interval = \"1s\"",
                &format!("commit_interval = {interval:?}"),
            )
    };
    let resent = |interval: &str| {
        let (m, events) = history(&jms(interval), "single");
        let seqs: Vec<u32> = events
            .iter()
            .filter_map(|e| match *e {
                Event::Resend { msg, .. } => Some(msg.seq),
                _ => None,
            })
            .collect();
        assert_eq!((m.applied, m.lost), (40, 0), "{interval}");
        assert_eq!(m.duplicates, seqs.len() as u64, "{interval}");
        seqs
    };
    assert_eq!(resent("1s"), (20..25).collect::<Vec<_>>());
    assert_eq!(resent("3s"), (0..25).collect::<Vec<_>>());
    // Longer than a transaction may stay open: a checkpoint, not a transaction.
    scenario(&jms("90s"));
    match ordsim::load_text("t.toml", &jms("0s")) {
        Ok(_) => panic!("a 0s checkpoint loaded"),
        Err(e) => assert!(e.to_string().contains("above 0s"), "{e}"),
    }
}

/// A producer dead longer than `transaction.timeout.ms` (60s): the coordinator aborts its
/// open transaction then, and the other producer's records behind it in the partition become
/// readable, before the dead one's successor starts (at 72.55s).
#[test]
fn the_transaction_timeout_frees_the_partition_of_a_dead_producer() {
    let text = crash(
        "transactional = true\ncount = 2",
        "isolation = \"read_committed\"",
    )
    .replace("messages = 40", "messages = 700")
    .replace("keys = 1", "keys = 2")
    .replace("for = \"1s\"", "for = \"70s\"");
    let sc = scenario(&text);
    let mut events = Vec::new();
    let m = crate::common::run_with(&sc, "kafka", 1, |e| events.push(*e));
    assert_eq!((m.duplicates, m.lost, m.pending_at_end), (0, 0, 0));
    let producer_of: BTreeMap<u64, (u32, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Produce {
                t, msg, producer, ..
            } => Some((msg.id, (producer, t))),
            _ => None,
        })
        .collect();
    let got = first_dispatch(&events);
    // Producer 1's records written from the crash to 50s wait for producer 0's open
    // transaction, aborted by the coordinator about 60s after it began (2.1s-2.5s), not for
    // the successor at 72.55s.
    let held: Vec<u64> = producer_of
        .iter()
        .filter(|(_, &(p, t))| p == 1 && (3_000_000..50_000_000).contains(&t))
        .map(|(id, _)| got[id])
        .collect();
    assert!(held.len() > 100, "{}", held.len());
    assert!(
        held.iter().all(|&t| (62_000_000..=62_600_000).contains(&t)),
        "{:?}",
        (held.iter().min(), held.iter().max())
    );
}
