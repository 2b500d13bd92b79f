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

/// The anomalies of one kind, in order.
fn of_kind(found: &[Anomaly], kind: AnomalyKind) -> Vec<&Anomaly> {
    found.iter().filter(|x| x.kind == kind).collect()
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
    let stale = of_kind(&found, AnomalyKind::StaleWrite);
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
    let dropped = of_kind(&found, AnomalyKind::Dropped);
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
    let lost = of_kind(&found, AnomalyKind::Lost);
    assert_eq!(lost.len(), 1, "{found:?}");
    assert_eq!((lost[0].key, lost[0].seq), (0, 2));
    assert_eq!(lost[0].conflicts_with, Some(discard));
}

#[test]
fn each_kind_is_named_as_a_trace_writes_it() {
    for (kind, name) in [
        (AnomalyKind::Violation, "violation"),
        (AnomalyKind::Duplicate, "duplicate"),
        (AnomalyKind::StaleWrite, "stale_write"),
        (AnomalyKind::Lost, "lost"),
        (AnomalyKind::Dropped, "dropped"),
        (AnomalyKind::FinalMismatch, "final_mismatch"),
    ] {
        assert_eq!(kind.name(), name);
        assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
    }
}

/// The first applies remembered are the newest [`FIRST_APPLIES_REMEMBERED`], exactly: after one
/// more, a duplicate of the oldest is reported without its first apply, and one of the next
/// oldest still names it.
#[test]
fn the_newest_first_applies_remembered_are_exactly_the_bound() {
    let n = FIRST_APPLIES_REMEMBERED as u32 + 1;
    let mut c = Checkers::with_sink(1, WorkloadKind::Command, Vec::new());
    for seq in 0..n {
        let x = m(0, seq);
        let t = Time::from(seq);
        for e in [produce(t, x), apply(t, x, 0), ack(t, x)] {
            c.observe(&e);
        }
    }
    let end = Time::from(n);
    let (oldest, next) = (m(0, 0), m(0, 1));
    c.observe(&apply(end, oldest, 1));
    c.observe(&apply(end, next, 1));
    let (r, found) = c.finish_into(3 * u64::from(n) + 2, end);
    r.expect("a well-formed history");
    let dup: Vec<_> = found
        .iter()
        .filter(|x| x.kind == AnomalyKind::Duplicate)
        .map(|x| (x.seq, x.conflicts_with))
        .collect();
    assert_eq!(dup, [(0, None), (1, Some(apply(1, next, 0)))]);
}

/// An apply of a message, or of a state, never produced is a malformed history (the self-check
/// says so): it is not annotated, whatever it would have been.
#[test]
fn an_apply_of_anything_never_produced_is_not_annotated() {
    let (a, b) = (m(0, 0), m(0, 1));
    for bad in [
        // A produced message writing a state never produced (after b: a violation if annotated).
        Event::Apply {
            t: 30,
            msg: a,
            consumer: 1,
            state_seq: 7,
        },
        // A message never produced writing an old state (a stale write if annotated).
        Event::Apply {
            t: 30,
            msg: m(0, 5),
            consumer: 1,
            state_seq: 0,
        },
    ] {
        let mut c = Checkers::with_sink(1, WorkloadKind::State, Vec::new());
        for e in [
            produce(10, a),
            produce(11, b),
            apply(20, b, 0),
            ack(20, b),
            bad,
        ] {
            c.observe(&e);
        }
        let (r, found) = c.finish_into(5, 30);
        assert!(
            matches!(r, Err(crate::checkers::SelfCheckError::Malformed(_))),
            "{r:?}"
        );
        assert!(found.is_empty(), "{bad:?}: {found:?}");
    }
}

/// A second apply of a message still in its key's window (behind an unresolved predecessor) is
/// a duplicate too, naming the first apply.
#[test]
fn a_duplicate_behind_an_unresolved_message_names_the_first_apply() {
    let (a, b) = (m(0, 0), m(0, 1));
    let first = apply(20, b, 0);
    let again = apply(30, b, 1);
    let found = annotate(
        WorkloadKind::State,
        1,
        &[
            produce(10, a),
            produce(11, b),
            first,
            ack(25, b),
            again,
            Event::Pending { t: 40, msg: a },
        ],
    );
    assert_eq!(found.len(), 1, "{found:?}");
    let x = &found[0];
    assert_eq!((x.kind, x.seq, x.t), (AnomalyKind::Duplicate, 1, 30));
    assert_eq!((x.event, x.conflicts_with), (Some(again), Some(first)));
}

/// A violation names the apply that first reached the newest seq: not the apply of an older
/// seq before it, nor a later duplicate of the newest.
#[test]
fn a_violation_names_the_first_apply_of_the_newest_seq() {
    let (a, b, c) = (m(0, 0), m(0, 1), m(0, 2));
    let c_first = apply(30, c, 0);
    let late = apply(40, a, 2);
    let found = annotate(
        WorkloadKind::Command,
        1,
        &[
            produce(10, a),
            produce(11, b),
            produce(12, c),
            apply(20, b, 0),
            c_first,
            apply(35, c, 1),
            late,
            ack(50, a),
            ack(50, b),
            ack(50, c),
        ],
    );
    let v = of_kind(&found, AnomalyKind::Violation);
    assert_eq!(v.len(), 1, "{found:?}");
    assert_eq!((v[0].seq, v[0].other_seq), (0, Some(2)));
    assert_eq!(
        (v[0].event, v[0].conflicts_with),
        (Some(late), Some(c_first))
    );
}

/// A stale write names the write that first put the newest state: not the write of an older
/// state before it, nor a later rewrite of the same newest state (which is not stale).
#[test]
fn a_stale_write_names_the_first_write_of_the_newest_state() {
    let (a, b, c, d) = (m(0, 0), m(0, 1), m(0, 2), m(0, 3));
    // Notifier-style writers: each writes the state it read.
    let write = |t, msg, consumer, state_seq| Event::Apply {
        t,
        msg,
        consumer,
        state_seq,
    };
    let newest = write(30, c, 0, 2);
    let stale = write(40, a, 2, 0);
    let found = annotate(
        WorkloadKind::State,
        1,
        &[
            produce(10, a),
            produce(11, b),
            produce(12, c),
            produce(13, d),
            write(20, b, 0, 1),
            newest,
            write(35, d, 1, 2),
            stale,
        ],
    );
    let s = of_kind(&found, AnomalyKind::StaleWrite);
    assert_eq!(s.len(), 1, "{found:?}");
    assert_eq!((s[0].seq, s[0].other_seq), (0, Some(2)));
    assert_eq!(
        (s[0].event, s[0].conflicts_with),
        (Some(stale), Some(newest))
    );
}

/// In a command workload a final mismatch names the last command applied (`other_seq`) and its
/// apply; `seq` is the last command produced.
#[test]
fn a_command_final_mismatch_names_the_last_command_applied() {
    let (a, b) = (m(0, 0), m(0, 1));
    let last = apply(30, a, 1);
    let found = annotate(
        WorkloadKind::Command,
        1,
        &[
            produce(10, a),
            produce(11, b),
            apply(20, b, 0),
            last,
            ack(40, a),
            ack(40, b),
        ],
    );
    assert_eq!(
        found.last(),
        Some(&Anomaly {
            kind: AnomalyKind::FinalMismatch,
            t: 40,
            key: 0,
            seq: 1,
            other_seq: Some(0),
            event: None,
            conflicts_with: Some(last),
        }),
        "{found:?}"
    );
}

/// Applied wins: a message discarded or dropped while a consumer had it in hand, then applied by
/// that consumer, is neither lost nor dropped; one rejected as stale and then discarded (before
/// its ack) is stale-rejected, not lost. None of them is an anomaly.
#[test]
fn applied_or_rejected_messages_gone_from_the_broker_are_no_anomaly() {
    let (a, b, c, d) = (m(0, 0), m(0, 1), m(0, 2), m(0, 3));
    let discard = |t, msg| Event::Discard {
        t,
        msg,
        reason: DiscardReason::BrokerCrash,
    };
    let found = annotate(
        WorkloadKind::State,
        1,
        &[
            produce(10, a),
            produce(11, b),
            produce(12, c),
            produce(13, d),
            Event::Start {
                t: 20,
                msg: a,
                consumer: 0,
            },
            discard(21, a),
            apply(22, a, 0),
            Event::Start {
                t: 23,
                msg: b,
                consumer: 1,
            },
            Event::Drop {
                t: 24,
                msg: b,
                broker: 0,
            },
            apply(25, b, 1),
            Event::Start {
                t: 26,
                msg: c,
                consumer: 2,
            },
            Event::Reject {
                t: 27,
                msg: c,
                consumer: 2,
            },
            discard(28, c),
            apply(30, d, 0),
            ack(30, d),
        ],
    );
    assert!(found.is_empty(), "{found:?}");
}

/// Annotations follow the counts' order: a message whose broker copy was discarded while a
/// consumer had it in hand, and which is still held at the end (pending), counts as pending,
/// so it is not annotated as lost.
#[test]
fn a_discarded_message_still_pending_at_the_end_is_not_lost() {
    let a = m(0, 0);
    let h = [
        produce(10, a),
        Event::Start {
            t: 20,
            msg: a,
            consumer: 0,
        },
        Event::Discard {
            t: 21,
            msg: a,
            reason: DiscardReason::BrokerCrash,
        },
        Event::Pending { t: 30, msg: a },
    ];
    let mut plain = Checkers::new(1, WorkloadKind::Command);
    for e in &h {
        plain.observe(e);
    }
    let x = plain.finish(4, 30).expect("a well-formed history");
    assert_eq!((x.pending_at_end, x.lost), (1, 0));
    let found = annotate(WorkloadKind::Command, 1, &h);
    assert_eq!(
        found.iter().map(|x| x.kind).collect::<Vec<_>>(),
        [AnomalyKind::FinalMismatch],
        "{found:?}"
    );
}
