//! A zombie producer (issue 38 §9): a `producer_pause` stops a producer's process (a GC pause,
//! a frozen VM) with batched records still unsent; with `replaced_after` the application's
//! orchestration starts a new instance meanwhile, which produces again from the last commit
//! (the paused one's unsent records included). When the zombie wakes, a transactional one is
//! fenced by its transactional id's epoch (the new instance's `initTransactions`, or the
//! coordinator's abort of its timed-out transaction, bumped it: the partition leader answers
//! `INVALID_PRODUCER_EPOCH`, the coordinator `PRODUCER_FENCED`, fatal for the client): its late
//! writes are refused (`discard`, reason `fenced`). Without transactions (a new instance is a
//! new producer id) they are written: duplicates behind newer records.

use crate::common::{history, scenario};

use sim::history::{DiscardReason, Event};

/// 60 records of one key, one every 100ms from 100ms, batched by a 500ms linger: batch j (seqs
/// 5j..5j+4) is sent at (5j+6)*100ms. Commits every 1s from the first write (at 600ms): the
/// transaction open at the pause (from 1.6s) holds seqs 10-19, and the batch of seqs 20-24
/// (sent at 2.6s) is still unsent when the producer pauses at 2.55s for `pause`. `producers`
/// and `fault` extend `[producers]` and the `[[fault]]`; `consumers` extends `[consumers]`.
fn text(producers: &str, consumers: &str, pause: &str, fault: &str) -> String {
    format!(
        r#"
flavour = "kafka"
strategies = ["kafka"]
[workload]
messages = 60
rate = "10/s"
arrival = "constant"
keys = 1
[[broker]]
name = "k"
[producers]
commit_interval = "1s"
linger = "500ms"
{producers}
[consumers]
count = 1
service = "1ms"
{consumers}
[[fault]]
kind = "producer_pause"
producer = 0
at = "2550ms"
for = "{pause}"
{fault}
"#
    )
}

/// What the history says of a pause: (seq, copy id, original id) of every resend, the seqs
/// discarded as aborted, and (seq, id, when) of those discarded as fenced.
struct Story {
    resends: Vec<(u32, u64, u64)>,
    aborted: Vec<u32>,
    fenced: Vec<(u32, u64, u64)>,
}

fn story(events: &[Event]) -> Story {
    let mut s = Story {
        resends: Vec::new(),
        aborted: Vec::new(),
        fenced: Vec::new(),
    };
    for e in events {
        match *e {
            Event::Resend {
                msg,
                of,
                deduplicated,
                ..
            } => {
                assert!(!deduplicated);
                s.resends.push((msg.seq, msg.id, of));
            }
            Event::Discard { t, msg, reason } => match reason {
                DiscardReason::Aborted => s.aborted.push(msg.seq),
                DiscardReason::Fenced => s.fenced.push((msg.seq, msg.id, t)),
                other => panic!("discarded {other:?}"),
            },
            _ => {}
        }
    }
    s
}

/// When each message (by id) was applied, in order of application.
fn applies(events: &[Event]) -> Vec<(u64, u32, u64)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Apply { t, msg, .. } => Some((msg.id, msg.seq, t)),
            _ => None,
        })
        .collect()
}

const TXN: &str = "transactional = true";
const READ_COMMITTED: &str = "isolation = \"read_committed\"";

/// Transactional and `read_committed`, replaced 1s into a 2s pause: the new instance (at
/// 3.55s) aborts the open transaction (seqs 10-19, never read) and writes again seqs 10-19 and
/// the paused one's unsent 20-24; when the zombie wakes (4.55s) its batch of seqs 20-24 is
/// fenced, never written. Each record is applied once, in order. With the fencing switched off
/// (the zombie's writes let through, as without transactions) seqs 20-24 are written twice
/// and behind newer records: this test fails.
#[test]
fn a_replaced_transactional_zombie_is_fenced() {
    let (m, events) = history(
        &text(TXN, READ_COMMITTED, "2s", "replaced_after = \"1s\""),
        "kafka",
    );
    let s = story(&events);
    assert_eq!(
        s.resends.iter().map(|r| r.0).collect::<Vec<_>>(),
        (10..25).collect::<Vec<_>>(),
        "the open transaction's records, then the paused instance's unsent ones"
    );
    assert_eq!(s.aborted, (10..20).collect::<Vec<_>>());
    assert_eq!(
        s.fenced.iter().map(|f| f.0).collect::<Vec<_>>(),
        (20..25).collect::<Vec<_>>()
    );
    assert!(s.fenced.iter().all(|f| f.2 == 4_550_000), "at the wake");
    // The fenced records are the originals of the copies of seqs 20-24.
    let originals: Vec<u64> = s.resends[10..].iter().map(|r| r.2).collect();
    assert_eq!(s.fenced.iter().map(|f| f.1).collect::<Vec<_>>(), originals);
    assert_eq!(
        (
            m.applied,
            m.duplicates,
            m.lost,
            m.ordering_violations,
            m.pending_at_end
        ),
        (60, 0, 0, 0, 0)
    );
    assert_eq!(m.coverage.resends_stored, 15);
    // A `recover` of the producer when the new instance starts, none at the wake.
    let recovers: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Recover { t, .. } => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(recovers, vec![3_550_000]);
    // Nothing of the fenced originals is ever applied.
    assert!(applies(&events).iter().all(|a| !originals.contains(&a.0)));
}

/// The same pause without transactions (idempotence only: the new instance is a new producer
/// id, its epoch no fence for the old one): the zombie wakes and writes seqs 20-24, after the
/// new instance's copies and newer records: five more duplicates (on top of the ten of seqs
/// 10-19 read before the pause and written again), each applied behind a newer seq.
/// `read_committed` changes nothing without transactions.
#[test]
fn without_transactions_the_zombie_writes_duplicates_behind_the_new_instance() {
    for consumers in ["", READ_COMMITTED] {
        let (m, events) = history(
            &text("", consumers, "2s", "replaced_after = \"1s\""),
            "kafka",
        );
        let s = story(&events);
        assert_eq!(
            s.resends.iter().map(|r| r.0).collect::<Vec<_>>(),
            (10..25).collect::<Vec<_>>()
        );
        assert!(s.aborted.is_empty() && s.fenced.is_empty());
        assert_eq!((m.applied, m.lost, m.pending_at_end), (60, 0, 0));
        assert_eq!(m.duplicates, 15, "{consumers}");
        // The zombie's originals of seqs 20-24 are applied after the wake, each after a newer
        // record of the key.
        let originals: Vec<u64> = s.resends[10..].iter().map(|r| r.2).collect();
        let a = applies(&events);
        let late: Vec<&(u64, u32, u64)> = a.iter().filter(|x| originals.contains(&x.0)).collect();
        assert_eq!(late.len(), 5);
        for &&(id, seq, t) in &late {
            assert!(t >= 4_550_000, "{id} applied at {t}");
            assert!(
                a.iter().any(|&(_, newer, u)| newer > seq && u < t),
                "seq {seq} applied behind a newer one"
            );
        }
        assert!(m.ordering_violations >= 5, "{}", m.ordering_violations);
    }
}

/// No replacement, transactional: a pause longer than `transaction.timeout.ms` (60s) is fenced
/// by the coordinator's abort of the timed-out transaction (its epoch bump); the application
/// starts a new instance when the zombie's first write fails (at the wake, 62.55s), which
/// writes again the aborted and the unsent records. A pause shorter than the timeout only
/// delays: the producer wakes, sends its batch and commits, nothing written twice.
#[test]
fn without_a_replacement_only_a_pause_past_the_transaction_timeout_is_fenced() {
    let (m, events) = history(&text(TXN, READ_COMMITTED, "60s", ""), "kafka");
    let s = story(&events);
    assert_eq!(
        s.resends.iter().map(|r| r.0).collect::<Vec<_>>(),
        (10..25).collect::<Vec<_>>()
    );
    assert_eq!(s.aborted, (10..20).collect::<Vec<_>>());
    assert_eq!(
        s.fenced.iter().map(|f| (f.0, f.2)).collect::<Vec<_>>(),
        (20..25).map(|q| (q, 62_550_000)).collect::<Vec<_>>()
    );
    assert_eq!(
        (m.applied, m.duplicates, m.lost, m.ordering_violations),
        (60, 0, 0, 0)
    );

    let (m, events) = history(&text(TXN, READ_COMMITTED, "5s", ""), "kafka");
    let s = story(&events);
    assert!(s.resends.is_empty() && s.aborted.is_empty() && s.fenced.is_empty());
    assert_eq!(
        (m.applied, m.duplicates, m.lost, m.ordering_violations),
        (60, 0, 0, 0)
    );
    // Seqs 20-24 are written after the wake (7.55s), the first thing the producer sends.
    let written: Vec<(u32, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { t, msg, .. } if t >= 2_550_000 => Some((msg.seq, t)),
            _ => None,
        })
        .collect();
    assert_eq!(written[0], (20, 7_550_000), "{written:?}");
    assert!(written.iter().all(|w| w.1 >= 7_550_000));
}

/// A paused producer under a JMS flavour just resumes late: what it held and what was produced
/// meanwhile is sent at the wake, in order, nothing twice; with a replacement the zombie's
/// writes are duplicates (no transactions outside Kafka).
#[test]
fn a_paused_jms_producer_resumes_late() {
    let jms = |fault: &str| {
        text("", "", "2s", fault)
            .replace("flavour = \"kafka\"", "flavour = \"activemq\"")
            .replace("strategies = [\"kafka\"]", "strategies = [\"single\"]")
            .replace("linger = \"500ms\"\n", "")
    };
    let (m, events) = history(&jms(""), "single");
    assert_eq!(
        (m.applied, m.duplicates, m.lost, m.ordering_violations),
        (60, 0, 0, 0)
    );
    assert!(story(&events).resends.is_empty());
    // Nothing written while paused.
    assert!(!events.iter().any(|e| matches!(*e,
        Event::Enqueue { t, .. } if (2_550_000..4_550_000).contains(&t))));
    let (m, events) = history(&jms("replaced_after = \"1s\""), "single");
    let s = story(&events);
    // No linger: nothing unsent at the pause; the new instance writes again seqs 20-24, written
    // since the last checkpoint (at 2.1s).
    assert_eq!(
        s.resends.iter().map(|r| r.0).collect::<Vec<_>>(),
        (20..25).collect::<Vec<_>>()
    );
    assert_eq!((m.applied, m.lost, m.duplicates), (60, 0, 5));
}

/// `replaced_after`: only on a `producer_pause`, above 0s; a `producer_pause` needs `for`;
/// `commit_interval` applies with a pause; replicas are not modelled with it.
#[test]
fn producer_pause_is_validated() {
    let refused = |text: &str, field: &str, words: &str| match ordsim::load_text("t.toml", text) {
        Ok(_) => panic!("loaded: {text}"),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains(field) && e.contains(words), "{e}");
        }
    };
    let ok = text(TXN, READ_COMMITTED, "2s", "replaced_after = \"1s\"");
    scenario(&ok);
    refused(
        &ok.replace("replaced_after = \"1s\"", "replaced_after = \"0s\""),
        "fault[0].replaced_after",
        "above 0s",
    );
    refused(
        &ok.replace("kind = \"producer_pause\"", "kind = \"producer_crash\""),
        "fault[0].replaced_after",
        "producer_pause",
    );
    refused(
        &ok.replace("for = \"2s\"\n", ""),
        "fault[0].for",
        "producer_pause needs `for`",
    );
    refused(
        &ok.replace(
            "name = \"k\"\n",
            "name = \"k\"\n[broker.replication]\nreplication_factor = 3\n",
        ),
        "producers.transactional",
        "pauses",
    );
    // A checkpoint for a pause without transactions.
    scenario(&text("", "", "2s", ""));
}
