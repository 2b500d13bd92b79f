//! Sends stored whose answer is lost (issue 14): the `send_timeout` fault. The broker stores the
//! message, the producer sees a failure and sends it again after its `retry_backoff`; the resend
//! is a duplicate at the broker (a new message with the same key and seq) unless the producer is
//! idempotent (Kafka's sequence numbers) or the broker's `dedup_window` still remembers the first
//! store (SQS FIFO's five minutes).

use crate::common::{self, history};

use sim::history::Event;

/// [`common::one_key`] with resends after 300ms.
fn one_key(producers: &str, broker: &str, faults: &str) -> String {
    common::one_key(
        &format!("retry_backoff = \"300ms\"\n{producers}"),
        broker,
        faults,
    )
}

/// A window around exactly one send (seq 4, produced at 500ms): stored, its answer lost.
const ONE_ANSWER_LOST: &str = r#"
[[fault]]
kind = "send_timeout"
at = "450ms"
for = "100ms"
"#;

/// (time, copy, of, deduplicated) of every resend.
fn resends(events: &[Event]) -> Vec<(u64, sim::history::MsgRef, u64, bool)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Resend {
                t,
                msg,
                of,
                deduplicated,
                ..
            } => Some((t, msg, of, deduplicated)),
            _ => None,
        })
        .collect()
}

/// The ids stored with seq `seq`, in store order.
fn stored_ids(events: &[Event], seq: u32) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { msg, .. } if msg.seq == seq => Some(msg.id),
            _ => None,
        })
        .collect()
}

const MS: u64 = 1_000;

#[test]
fn without_idempotence_a_lost_answer_stores_the_message_twice() {
    let (m, ev) = history(
        &one_key("idempotence = false", "", ONE_ANSWER_LOST),
        "single",
    );
    let r = resends(&ev);
    assert_eq!(r.len(), 1, "{r:?}");
    let (t, copy, of, dedup) = r[0];
    assert_eq!((t, copy.seq, copy.key, dedup), (800 * MS, 4, 0, false));
    // The copy is a message of its own: an id nothing else has, stored after the original.
    assert_ne!(copy.id, of);
    assert!(!ev
        .iter()
        .any(|e| matches!(e, Event::Produce { msg, .. } if msg.id == copy.id)));
    assert_eq!(stored_ids(&ev, 4), vec![of, copy.id]);
    let sent_fail: Vec<_> = ev
        .iter()
        .filter_map(|e| match *e {
            Event::SendFail { t, msg, .. } => Some((t, msg.id)),
            _ => None,
        })
        .collect();
    assert_eq!(sent_fail, vec![(500 * MS, of)]);
    // The one consumer applies both: one duplicate, nothing lost or pending.
    assert_eq!(
        (m.applied, m.duplicates, m.lost, m.pending_at_end),
        (30, 1, 0, 0)
    );
    assert_eq!(m.coverage.resends_stored, 1);
    assert_eq!(m.coverage.send_failures, 1);
}

#[test]
fn an_idempotent_producer_s_resend_is_refused() {
    let (m, ev) = history(
        &one_key("idempotence = true", "", ONE_ANSWER_LOST),
        "single",
    );
    let r = resends(&ev);
    assert_eq!(r.len(), 1, "{r:?}");
    let (t, msg, of, dedup) = r[0];
    assert_eq!((t, msg.id, msg.seq, dedup), (800 * MS, of, 4, true));
    assert_eq!(stored_ids(&ev, 4), vec![of]);
    assert_eq!((m.applied, m.duplicates), (30, 0));
    assert_eq!(m.coverage.resends_deduplicated, 1);
    assert_eq!(m.coverage.resends_stored, 0);
}

/// The broker refuses a resend while `now < first store + dedup_window`: at 800ms a store at
/// 500ms is remembered by a window of 301ms, not by one of 300ms.
#[test]
fn the_dedup_window_refuses_a_resend_inside_it_and_stores_one_after() {
    for (window, dedup) in [("301ms", true), ("300ms", false), ("0s", false)] {
        let (m, ev) = history(
            &one_key("", &format!("dedup_window = \"{window}\""), ONE_ANSWER_LOST),
            "single",
        );
        let r = resends(&ev);
        assert_eq!(r.len(), 1, "{window}: {r:?}");
        assert_eq!(r[0].3, dedup, "{window}");
        assert_eq!(m.duplicates, u64::from(!dedup), "{window}");
    }
}

/// A resend whose answer is lost too is resent again; the window runs from the first store, not
/// from the refused resend: stored at 500ms, refused at 800ms (inside 500ms), stored at 1100ms.
#[test]
fn the_window_runs_from_the_first_store_across_resends() {
    let faults = r#"
[[fault]]
kind = "send_timeout"
at = "450ms"
for = "100ms"
[[fault]]
kind = "send_timeout"
at = "750ms"
for = "100ms"
"#;
    let (m, ev) = history(&one_key("", "dedup_window = \"500ms\"", faults), "single");
    let r: Vec<_> = resends(&ev)
        .iter()
        .map(|&(t, c, _, d)| (t, c.seq, d))
        .collect();
    // (The later sends wait behind the resends, one in flight, and are sent after the faults.)
    assert_eq!(r, vec![(800 * MS, 4, true), (1100 * MS, 4, false)]);
    assert_eq!(m.duplicates, 1);
}

/// A producer still resending when the run ends (every answer lost from 450ms on, for good)
/// leaves the message it keeps resending at the broker: applied there, not pending, and the
/// run's self-checks pass. The sends behind it wait at the producer (one in flight): pending.
#[test]
fn a_resend_not_yet_made_at_the_end_is_not_pending() {
    let faults = r#"
[[fault]]
kind = "send_timeout"
at = "450ms"
[run]
drain_timeout = "2s"
"#;
    for idempotence in [true, false] {
        let text = one_key(&format!("idempotence = {idempotence}"), "", faults);
        let (m, ev) = history(&text, "single");
        let what = format!("idempotence {idempotence}");
        assert_eq!((m.applied, m.lost, m.pending_at_end), (5, 0, 25), "{what}");
        let r = resends(&ev);
        assert!(r.len() > 10, "{what}: {}", r.len());
        assert!(
            r.iter().all(|&(_, c, _, d)| c.seq == 4 && d == idempotence),
            "{what}"
        );
        // Every copy stored is applied again by the one consumer.
        assert_eq!(
            m.duplicates,
            if idempotence { 0 } else { r.len() as u64 },
            "{what}"
        );
    }
}

/// Without a `send_timeout` nothing is resent and every id is a produced message's.
#[test]
fn a_send_error_is_not_stored_and_makes_no_resend() {
    let faults = ONE_ANSWER_LOST.replace("send_timeout", "send_error");
    let (m, ev) = history(&one_key("", "dedup_window = \"1s\"", &faults), "single");
    assert!(resends(&ev).is_empty());
    assert_eq!(stored_ids(&ev, 4).len(), 1);
    assert_eq!((m.duplicates, m.coverage.send_failures), (0, 1));
}

/// SQS FIFO remembers a message for five minutes [Q5]; the other flavours do not; a broker's
/// own `dedup_window` wins over its flavour's.
#[test]
fn the_flavours_dedup_windows() {
    let sc = common::scenario(&one_key("", "", ""));
    assert_eq!(sc.resolve().unwrap().brokers[0].dedup_window, 0);
    let sc = common::scenario(&format!("flavour = \"sqs\"\n{}", one_key("", "", "")));
    assert_eq!(sc.resolve().unwrap().brokers[0].dedup_window, 300_000 * MS);
    let sc = common::scenario(&format!(
        "flavour = \"sqs\"\n{}",
        one_key("", "dedup_window = \"0s\"", "")
    ));
    assert_eq!(sc.resolve().unwrap().brokers[0].dedup_window, 0);
}

/// The plan line of a `send_timeout`, and its scripted form read back to the same plan.
#[test]
fn the_plan_describes_a_send_timeout() {
    let sc = common::scenario(&one_key("count = 2", "", ONE_ANSWER_LOST));
    let plan = sim::FaultPlan::resolve(&sc, 1);
    assert_eq!(
        plan.describe(&sc),
        ["t=450ms send_timeout every producer fraction 1 for 100ms"]
    );
    let again = common::scenario(&sc.to_toml());
    assert_eq!(sim::FaultPlan::resolve(&again, 1), plan);
}

/// Bad values are refused with their place in the file and what is allowed.
#[test]
fn bad_resend_settings_are_located() {
    for (broker, fault, field, says) in [
        ("dedup_window = \"soon\"", "", "dedup_window", ""),
        ("dedup_window = 5", "", "dedup_window", ""),
        (
            "",
            "[[fault]]\nkind = \"send_timeout\"\nat = \"1s\"\nfraction = -0.5",
            "fault[0].fraction",
            "[0, 1]",
        ),
        (
            "",
            "[[fault]]\nkind = \"send_timeout\"\nat = \"1s\"\nconsumer = 0",
            "fault[0].consumer",
            "",
        ),
    ] {
        let text = one_key("", broker, fault);
        let e = ordsim::load_text("p.toml", &text).unwrap_err().to_string();
        assert!(e.starts_with("p.toml:"), "{e}");
        assert!(e.contains(field), "{field}: {e}");
        assert!(e.contains(says), "{says}: {e}");
    }
}
