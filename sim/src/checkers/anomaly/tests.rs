//! Annotations on hand-built histories: one anomaly per test, each checked for its key, seqs,
//! time and the earlier event it conflicts with.

use super::*;
use crate::history::{DiscardReason, Event, MsgRef};
use crate::scenario::WorkloadKind;

fn m(key: u32, seq: u32) -> MsgRef {
    MsgRef {
        id: (key * 100 + seq) as u64,
        key,
        seq,
    }
}

fn produce(t: Time, msg: MsgRef) -> Event {
    Event::Produce {
        t,
        msg,
        producer: 0,
        timestamp: t,
        poison: false,
    }
}

fn apply(t: Time, msg: MsgRef, consumer: u32) -> Event {
    Event::Apply {
        t,
        msg,
        consumer,
        state_seq: msg.seq,
    }
}

fn ack(t: Time, msg: MsgRef) -> Event {
    Event::Ack {
        t,
        msg,
        consumer: 0,
    }
}

/// Feeds the history to annotating checkers; returns every anomaly, the final ones included.
fn annotate(kind: WorkloadKind, keys: u32, h: &[Event]) -> Vec<Anomaly> {
    let mut c = Checkers::with_sink(keys, kind, Vec::new());
    for e in h {
        c.observe(e);
    }
    let end = h.last().map_or(0, Event::time);
    let (r, found) = c.finish_into(h.len() as u64, end);
    r.expect("a well-formed history");
    found
}

#[test]
fn a_violation_names_the_apply_of_the_newer_seq() {
    let (a, b) = (m(3, 0), m(3, 1));
    let newer = apply(30, b, 2);
    let late = apply(40, a, 1);
    let found = annotate(
        WorkloadKind::Command,
        4,
        &[
            produce(10, a),
            produce(20, b),
            newer,
            late,
            ack(50, a),
            ack(50, b),
        ],
    );
    // A command applied late is also a final mismatch (wrong order); the violation comes first.
    assert_eq!(
        found[0],
        Anomaly {
            kind: AnomalyKind::Violation,
            t: 40,
            key: 3,
            seq: 0,
            other_seq: Some(1),
            event: Some(late),
            conflicts_with: Some(newer),
        }
    );
    assert_eq!(found.len(), 2);
    assert_eq!(found[1].kind, AnomalyKind::FinalMismatch);
}

#[test]
fn a_duplicate_names_the_first_apply() {
    let a = m(0, 0);
    let first = apply(20, a, 0);
    let again = apply(30, a, 1);
    let found = annotate(
        WorkloadKind::State,
        1,
        &[produce(10, a), first, ack(25, a), again],
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, AnomalyKind::Duplicate);
    assert_eq!((found[0].key, found[0].seq, found[0].t), (0, 0, 30));
    assert_eq!(found[0].event, Some(again));
    assert_eq!(found[0].conflicts_with, Some(first));
}

#[test]
fn a_stale_write_names_the_write_of_the_newer_state() {
    // A notifier-style writer: message 1 writes state 1, then message 0 writes state 0 (read late).
    let (a, b) = (m(0, 0), m(0, 1));
    let newer = apply(20, b, 0);
    let old = Event::Apply {
        t: 30,
        msg: a,
        consumer: 1,
        state_seq: 0,
    };
    let found = annotate(
        WorkloadKind::State,
        1,
        &[produce(10, a), produce(11, b), newer, old],
    );
    let stale: Vec<_> = found
        .iter()
        .filter(|x| x.kind == AnomalyKind::StaleWrite)
        .collect();
    assert_eq!(stale.len(), 1, "{found:?}");
    assert_eq!((stale[0].seq, stale[0].other_seq), (0, Some(1)));
    assert_eq!(stale[0].conflicts_with, Some(newer));
    // The state left is seq 0, not 1: a final mismatch naming that last write.
    let fm = found
        .iter()
        .find(|x| x.kind == AnomalyKind::FinalMismatch)
        .expect("final mismatch");
    assert_eq!((fm.seq, fm.other_seq, fm.t), (1, Some(0), 30));
    assert_eq!(fm.conflicts_with, Some(old));
}

#[test]
fn a_lost_message_names_its_discard() {
    let (a, b) = (m(0, 0), m(0, 1));
    let discard = Event::Discard {
        t: 15,
        msg: a,
        reason: DiscardReason::BrokerCrash,
    };
    let found = annotate(
        WorkloadKind::State,
        1,
        &[produce(10, a), produce(11, b), discard, apply(20, b, 0)],
    );
    assert_eq!(found.len(), 1, "{found:?}");
    let x = &found[0];
    assert_eq!((x.kind, x.key, x.seq, x.t), (AnomalyKind::Lost, 0, 0, 15));
    assert_eq!(x.conflicts_with, Some(discard));
}

#[test]
fn a_dropped_innocent_message_names_the_drop_and_a_poison_one_is_no_anomaly() {
    let (a, b) = (m(0, 0), m(0, 1));
    let drop_a = Event::Drop {
        t: 15,
        msg: a,
        broker: 0,
    };
    let poison_b = Event::Produce {
        t: 11,
        msg: b,
        producer: 0,
        timestamp: 11,
        poison: true,
    };
    let drop_b = Event::Drop {
        t: 16,
        msg: b,
        broker: 0,
    };
    let found = annotate(
        WorkloadKind::Command,
        1,
        &[produce(10, a), poison_b, drop_a, drop_b],
    );
    let dropped: Vec<_> = found
        .iter()
        .filter(|x| x.kind == AnomalyKind::Dropped)
        .collect();
    assert_eq!(dropped.len(), 1, "{found:?}");
    assert_eq!((dropped[0].seq, dropped[0].t), (0, 15));
    assert_eq!(dropped[0].conflicts_with, Some(drop_a));
}

#[test]
fn a_final_mismatch_without_any_write_names_nothing() {
    let a = m(1, 0);
    let found = annotate(
        WorkloadKind::State,
        2,
        &[produce(10, a), Event::Pending { t: 20, msg: a }],
    );
    assert_eq!(found.len(), 1, "{found:?}");
    let x = &found[0];
    assert_eq!(
        (x.kind, x.key, x.seq, x.other_seq),
        (AnomalyKind::FinalMismatch, 1, 0, None)
    );
    assert_eq!(x.conflicts_with, None);
}

#[test]
fn annotations_change_no_figure() {
    let (a, b) = (m(0, 0), m(0, 1));
    let h = [
        produce(10, a),
        produce(11, b),
        apply(20, b, 0),
        apply(30, a, 1),
        apply(35, a, 1),
        ack(40, a),
        ack(40, b),
    ];
    let mut plain = Checkers::new(1, WorkloadKind::State);
    let mut noted = Checkers::with_sink(1, WorkloadKind::State, Vec::new());
    for e in &h {
        plain.observe(e);
        noted.observe(e);
    }
    let p = plain.finish(7, 40).unwrap();
    let (n, found) = noted.finish_into(7, 40);
    let n = n.unwrap();
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        serde_json::to_string(&n).unwrap()
    );
    let count = |k| found.iter().filter(|x| x.kind == k).count() as u64;
    assert_eq!(count(AnomalyKind::Violation), p.ordering_violations);
    assert_eq!(count(AnomalyKind::Duplicate), p.duplicates);
    assert_eq!(count(AnomalyKind::StaleWrite), p.stale_writes);
    assert_eq!(count(AnomalyKind::FinalMismatch), p.final_state_mismatches);
}

#[test]
fn an_anomaly_serializes_as_a_line_no_event_reader_accepts() {
    let a = Anomaly {
        kind: AnomalyKind::Violation,
        t: 1,
        key: 2,
        seq: 3,
        other_seq: Some(4),
        event: None,
        conflicts_with: None,
    };
    let line = serde_json::to_string(&a).unwrap();
    assert!(
        line.starts_with(r#"{"type":"anomaly","kind":"violation""#),
        "{line}"
    );
    assert!(serde_json::from_str::<Event>(&line).is_err());
    assert_eq!(serde_json::from_str::<Anomaly>(&line).unwrap(), a);
}

/// A message lost behind an unresolved predecessor is still in its key's window at the end: its
/// annotation, written then, names its own seq (the window's base plus its place in it).
#[test]
fn a_loss_found_at_the_end_names_the_lost_seq() {
    let (a, b, c) = (m(0, 0), m(0, 1), m(0, 2));
    let discard = Event::Discard {
        t: 30,
        msg: c,
        reason: DiscardReason::BrokerCrash,
    };
    let found = annotate(
        WorkloadKind::State,
        1,
        &[
            produce(10, a),
            produce(11, b),
            produce(12, c),
            apply(20, a, 0),
            ack(20, a),
            discard,
            Event::Pending { t: 40, msg: b },
        ],
    );
    let lost: Vec<_> = found
        .iter()
        .filter(|x| x.kind == AnomalyKind::Lost)
        .collect();
    assert_eq!(lost.len(), 1, "{found:?}");
    assert_eq!((lost[0].key, lost[0].seq), (0, 2));
    assert_eq!(lost[0].conflicts_with, Some(discard));
}
