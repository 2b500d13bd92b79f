//! Checker tests in the style of Jepsen's: one anomaly per test, each a tiny hand-built history
//! with a short narration, then assertions on exact figures.

use super::*;
use crate::history::{DiscardReason, Event, FailReason, MsgRef, Node};
use crate::scenario::WorkloadKind;
use crate::summary::{Coverage, Latency, Metrics};
use crate::time::{Time, MILLI};

/// Message `id` (global order) of `key`, `seq`-th of its key.
fn m(id: u64, key: u32, seq: u32) -> MsgRef {
    MsgRef { id, key, seq }
}

/// A history under construction, fed to the checkers as it is written.
struct H {
    c: Checkers,
    events: u64,
}

impl H {
    fn new(keys: u32, kind: WorkloadKind) -> Self {
        H {
            c: Checkers::new(keys, kind),
            events: 0,
        }
    }

    fn state() -> Self {
        H::new(1, WorkloadKind::State)
    }

    fn command() -> Self {
        H::new(1, WorkloadKind::Command)
    }

    fn ev(&mut self, e: Event) -> &mut Self {
        self.events += 1;
        self.c.observe(&e);
        self
    }

    fn produce_as(&mut self, t: Time, msg: MsgRef, poison: bool) -> &mut Self {
        self.ev(Event::Produce {
            t,
            msg,
            producer: 0,
            timestamp: t,
            poison,
        })
    }

    fn produce(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.produce_as(t, msg, false)
    }

    fn poison(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.produce_as(t, msg, true)
    }

    fn enqueue(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::Enqueue { t, msg, broker: 0 })
    }

    fn dispatch_n(&mut self, t: Time, msg: MsgRef, delivery: u32) -> &mut Self {
        self.ev(Event::Dispatch {
            t,
            msg,
            broker: 0,
            consumer: 0,
            delivery,
            redelivered: delivery > 1,
        })
    }

    fn dispatch(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.dispatch_n(t, msg, 1)
    }

    /// Writes the message's own state.
    fn apply(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::Apply {
            t,
            msg,
            consumer: 0,
            state_seq: msg.seq,
        })
    }

    fn ack(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::Ack {
            t,
            msg,
            consumer: 0,
        })
    }

    fn reject(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::Reject {
            t,
            msg,
            consumer: 0,
        })
    }

    fn rollback(&mut self, t: Time, msg: MsgRef, reason: FailReason) -> &mut Self {
        self.ev(Event::Rollback {
            t,
            msg,
            consumer: 0,
            reason,
        })
    }

    fn start(&mut self, t: Time, msg: MsgRef, consumer: u32) -> &mut Self {
        self.ev(Event::Start { t, msg, consumer })
    }

    fn apply_by(&mut self, t: Time, msg: MsgRef, consumer: u32) -> &mut Self {
        self.ev(Event::Apply {
            t,
            msg,
            consumer,
            state_seq: msg.seq,
        })
    }

    fn rollback_by(
        &mut self,
        t: Time,
        msg: MsgRef,
        consumer: u32,
        reason: FailReason,
    ) -> &mut Self {
        self.ev(Event::Rollback {
            t,
            msg,
            consumer,
            reason,
        })
    }

    fn dead_letter(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::DeadLetter { t, msg, broker: 0 })
    }

    fn discard(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::Discard {
            t,
            msg,
            reason: DiscardReason::BrokerCrash,
        })
    }

    fn pending(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.ev(Event::Pending { t, msg })
    }

    /// Produce, enqueue, dispatch, apply and ack, all at `t` (zero latency).
    fn deliver(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.produce(t, msg)
            .enqueue(t, msg)
            .dispatch(t, msg)
            .apply(t, msg)
            .ack(t, msg)
    }

    /// Dispatch, apply and ack of a message already stored, all at `t`.
    fn deliver_stored(&mut self, t: Time, msg: MsgRef) -> &mut Self {
        self.dispatch(t, msg).apply(t, msg).ack(t, msg)
    }

    fn finish(self, end: Time) -> Result<Metrics, SelfCheckError> {
        self.c.finish(self.events, end)
    }

    /// The metrics of a history that must pass its self-checks.
    fn metrics(self, end: Time) -> Metrics {
        match self.finish(end) {
            Ok(x) => x,
            Err(e) => panic!("self-check failed: {e}"),
        }
    }

    /// The message of a history that must be malformed.
    fn malformed(self, end: Time) -> String {
        match self.finish(end) {
            Err(SelfCheckError::Malformed(s)) => s,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }
}

const MS: Time = MILLI;

// --- 1. The clean case -----------------------------------------------------------------------

#[test]
fn in_order_applies_and_acks_are_clean() {
    // Two messages of one key, produced at 0 and 1ms, applied in order 1ms and 2ms after their
    // production and acked; the run ends at 4ms.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(MS, b).enqueue(MS, b);
    h.dispatch(MS, a).apply(MS, a).ack(MS, a);
    h.dispatch(3 * MS, b).apply(3 * MS, b).ack(3 * MS, b);
    let events = h.events;
    assert_eq!(events, 10);
    assert_eq!(
        h.metrics(4 * MS),
        Metrics {
            produced: 2,
            applied: 2,
            events: 10,
            // 2 applies over 3ms.
            throughput_per_s: 666.667,
            // Latencies 1000us and 2000us: below 2048us, the histogram is exact.
            latency_ms: Latency {
                p50: 1.0,
                p99: 2.0,
                max: 2.0,
            },
            // b was enqueued at 1ms, a resolved at 1ms: no wait.
            max_block_ms: 0.0,
            sim_time_s: 0.004,
            // No DrainStart: the drain "starts" at the end.
            drain_start_s: 0.004,
            ..Metrics::default()
        }
    );
}

#[test]
fn latency_is_produce_to_first_apply_with_three_significant_digits() {
    // Produced at 0, applied at 5ms: the latency is 5000us, which the histogram (3 significant
    // digits, buckets 4us wide at this magnitude) reports as the top of its bucket, 5003us.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a);
    h.apply(5 * MS, a).ack(5 * MS, a);
    let x = h.metrics(5 * MS);
    assert_eq!(x.latency_ms.p50, 5.003);
    assert_eq!(x.latency_ms.p99, 5.003);
    assert_eq!(x.latency_ms.max, 5.003);
    assert!((x.latency_ms.p50 - 5.0).abs() / 5.0 <= 1e-3);
}

#[test]
fn latency_counts_only_the_first_apply() {
    // Produced at 0, applied at 1ms (ack lost), redelivered and applied again at 2s: the latency
    // is 1ms; the second apply is a duplicate, not a 2s latency.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a).apply(MS, a);
    h.dispatch_n(2000 * MS, a, 2)
        .apply(2000 * MS, a)
        .ack(2000 * MS, a);
    let x = h.metrics(2000 * MS);
    assert_eq!(x.latency_ms.max, 1.0);
    assert_eq!(x.duplicates, 1);
}

#[test]
fn latency_percentiles_over_several_messages() {
    // Four keys, one message each, latencies 100, 200, 300 and 1000us.
    let mut h = H::new(4, WorkloadKind::State);
    for k in 0..4u32 {
        let x = m(k as u64, k, 0);
        h.produce(0, x).enqueue(0, x);
    }
    for (k, lat) in [100, 200, 300, 1000].into_iter().enumerate() {
        let x = m(k as u64, k as u32, 0);
        h.dispatch(lat, x).apply(lat, x).ack(lat, x);
    }
    let x = h.metrics(MS);
    assert_eq!(x.applied, 4);
    // p50: the 2nd of 4 values; p99: ceil(3.96) = the 4th.
    assert_eq!(x.latency_ms.p50, 0.2);
    assert_eq!(x.latency_ms.p99, 1.0);
    assert_eq!(x.latency_ms.max, 1.0);
    assert_eq!(x.final_state_mismatches, 0);
}

// --- 2. Ordering violations ------------------------------------------------------------------

#[test]
fn newer_applied_before_older_is_an_ordering_violation_and_stale_state() {
    // seq 1 overtakes seq 0: applied first, then seq 0 overwrites it. The target ends with
    // seq 0's state although seq 1 is the newest.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).produce(0, b).enqueue(0, b);
    h.dispatch(MS, b).apply(MS, b).ack(MS, b);
    h.dispatch(2 * MS, a).apply(2 * MS, a).ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(x.ordering_violations, 1);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.applied, 2);
    assert_eq!(x.duplicates, 0);
}

#[test]
fn each_overtaken_apply_counts_once() {
    // seq 2 applied first, then seq 0, then seq 1: both older applies come after a newer one.
    let (a, b, c) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).produce(0, c);
    h.apply(MS, c).ack(MS, c);
    h.apply(2 * MS, a).ack(2 * MS, a);
    h.apply(3 * MS, b).ack(3 * MS, b);
    let x = h.metrics(3 * MS);
    assert_eq!(x.ordering_violations, 2);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.applied, 3);
}

#[test]
fn interleaving_across_keys_is_not_a_violation() {
    // Key 1's seq 0 is applied before key 0's seq 0, though produced later: order is per key.
    let (a, b) = (m(0, 0, 0), m(1, 1, 0));
    let mut h = H::new(2, WorkloadKind::State);
    h.produce(0, a).produce(0, b);
    h.apply(MS, b).ack(MS, b).apply(2 * MS, a).ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(x.ordering_violations, 0);
    assert_eq!(x.final_state_mismatches, 0);
}

#[test]
fn state_written_from_the_source_is_graded_by_state_seq() {
    // A notifier: message seq 0 arrives late but writes the state it read from the source, seq 1.
    // Out of order (an ordering violation) but the final state is right.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, b).ack(MS, b);
    h.ev(Event::Apply {
        t: 2 * MS,
        msg: a,
        consumer: 0,
        state_seq: 1,
    });
    h.ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(x.ordering_violations, 1);
    assert_eq!(x.stale_writes, 0, "the state written never went backwards");
    assert_eq!(x.final_state_mismatches, 0);
}

#[test]
fn writing_an_older_state_after_a_newer_one_is_a_stale_write() {
    // A notifier read seq 1's state, then a slower handler writes seq 0's state it read before:
    // the target goes backwards (and ends wrong). Rewriting the newest state again is not stale.
    let (a, b, c) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).produce(0, c);
    let write = |h: &mut H, t, msg, state_seq| {
        h.ev(Event::Apply {
            t,
            msg,
            consumer: 0,
            state_seq,
        });
    };
    write(&mut h, MS, b, 1);
    write(&mut h, 2 * MS, a, 1);
    write(&mut h, 3 * MS, c, 0);
    let x = h.metrics(3 * MS);
    assert_eq!(x.stale_writes, 1);
    assert_eq!(x.ordering_violations, 1, "seq 0 handled after seq 1");
    assert_eq!(x.final_state_mismatches, 1);
}

#[test]
fn command_workloads_have_no_stale_writes() {
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::command();
    h.produce(0, a).produce(0, b);
    h.apply(MS, b).ack(MS, b).apply(2 * MS, a).ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!((x.stale_writes, x.ordering_violations), (0, 1));
}

// --- 3, 4. Duplicates --------------------------------------------------------------------------

#[test]
fn lost_ack_and_redelivery_reapplies_as_a_duplicate() {
    // Applied, the ack is lost (the consumer crashed after commit), the broker redelivers
    // (JMSRedelivered), the message is applied again and this time acked.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a).apply(MS, a);
    h.ev(Event::Crash {
        t: MS,
        node: Node::Consumer(0),
    });
    h.dispatch_n(2 * MS, a, 2).apply(3 * MS, a).ack(3 * MS, a);
    let x = h.metrics(3 * MS);
    assert_eq!(x.duplicates, 1);
    assert_eq!(x.applied, 1);
    assert_eq!(x.redeliveries, 1);
    // Re-applying the newest message neither reorders nor changes the state.
    assert_eq!(x.ordering_violations, 0);
    assert_eq!(x.final_state_mismatches, 0);
    assert_eq!(x.coverage.consumer_crashes, 1);
    // Still one message, counted once.
    assert_eq!(x.produced, 1);
}

#[test]
fn old_duplicate_after_newer_is_a_duplicate_and_a_violation() {
    // seq 0 is applied and acked (settled, gone from the window); seq 1 is applied; then a stray
    // copy of seq 0 (from a failed-over broker) is applied again: a stale overwrite.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, a).ack(MS, a);
    h.apply(2 * MS, b).ack(2 * MS, b);
    h.dispatch_n(3 * MS, a, 2).apply(3 * MS, a);
    let x = h.metrics(3 * MS);
    assert_eq!(x.duplicates, 1);
    assert_eq!(x.ordering_violations, 1);
    assert_eq!(x.applied, 2);
    assert_eq!(x.redeliveries, 1);
    assert_eq!(x.final_state_mismatches, 1);
}

#[test]
fn old_duplicate_of_an_unacked_message_is_a_duplicate_and_a_violation() {
    // As above, but seq 0's ack was lost (applied wins: its record is final at its apply all the
    // same, and the copy applied after seq 1 is a duplicate).
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, a);
    h.apply(2 * MS, b).ack(2 * MS, b);
    h.dispatch_n(3 * MS, a, 2).apply(3 * MS, a).ack(3 * MS, a);
    let x = h.metrics(3 * MS);
    assert_eq!(x.duplicates, 1);
    assert_eq!(x.ordering_violations, 1);
    assert_eq!(x.applied, 2);
    assert_eq!(x.final_state_mismatches, 1);
}

#[test]
fn a_duplicate_behind_an_unresolved_message_counts_once_with_the_first_latency() {
    // seq 0 is never resolved, so seq 1's record stays in the window behind it. seq 1 is applied
    // at 1ms, its ack is lost, and it is applied again at 5ms: one duplicate, one message
    // applied, and its latency is the first apply's (1ms).
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, b);
    h.dispatch_n(5 * MS, b, 2).apply(5 * MS, b).ack(5 * MS, b);
    assert_eq!(h.c.keys[0].window.len(), 2);
    h.pending(6 * MS, a);
    let x = h.metrics(6 * MS);
    assert_eq!((x.duplicates, x.applied, x.pending_at_end), (1, 1, 1));
    // Two samples: seq 1's first apply (1ms) and seq 0, never delivered, counted at the end (6ms,
    // 6.003 to the histogram's 3 significant digits).
    assert_eq!((x.latency_ms.p50, x.latency_ms.max), (1.0, 6.003));
}

#[test]
fn late_ack_of_a_settled_message_is_harmless() {
    // Applied twice (the first ack was only delayed) and acked twice.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(MS, a).ack(MS, a);
    h.apply(2 * MS, a).ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(x.applied, 1);
    assert_eq!(x.duplicates, 1);
}

// --- 5. Stale rejection ----------------------------------------------------------------------

#[test]
fn stale_rejection_is_neither_applied_nor_lost() {
    // seq 1 overtakes seq 0 and is applied; the version-checking handler then sees seq 0, rejects
    // it as stale and acks it. No overwrite, no violation, nothing lost.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, b).ack(MS, b);
    h.dispatch(2 * MS, a).reject(2 * MS, a).ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(x.stale_rejected, 1);
    assert_eq!(x.applied, 1);
    assert_eq!(x.lost, 0);
    assert_eq!(x.ordering_violations, 0);
    assert_eq!(x.final_state_mismatches, 0);
    // Memory: both records settled.
    assert_eq!(x.produced, 2);
}

#[test]
fn wrongly_rejecting_the_newest_leaves_the_state_stale() {
    // A skewed producer clock: seq 1 looks older than seq 0 and is rejected. Final state seq 0.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, a).ack(MS, a);
    h.reject(2 * MS, b).ack(2 * MS, b);
    let x = h.metrics(2 * MS);
    assert_eq!(x.stale_rejected, 1);
    assert_eq!(x.final_state_mismatches, 1);
}

#[test]
fn a_message_rejected_and_acked_behind_an_unresolved_one_leaves_the_window_with_it() {
    // seq 1 is rejected (stale) and acked while seq 0 is unresolved: final, it waits behind seq 0
    // in the window, and both leave it when seq 0 is applied. (An ack of a message past the
    // window's base is recorded like one at the base.)
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).reject(MS, b).ack(MS, b);
    assert_eq!((h.c.keys[0].base, h.c.keys[0].window.len()), (0, 2));
    h.apply(2 * MS, a).ack(2 * MS, a);
    assert!(h.c.keys[0].window.is_empty(), "seq 1 settled with seq 0");
    assert_eq!(h.c.keys[0].base, 2);
    let x = h.metrics(2 * MS);
    assert_eq!((x.applied, x.stale_rejected), (1, 1));
    assert_eq!(x.final_state_mismatches, 1, "the newest was rejected");
}

// --- 6. Dead letters -------------------------------------------------------------------------

#[test]
fn poison_dead_lettered_is_not_innocent_and_not_a_mismatch() {
    // seq 0 applies; seq 1 is poison: it fails twice and goes to the backout queue. The final
    // state, seq 0's, is what applying all non-poison messages gives.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).poison(0, b);
    h.apply(MS, a).ack(MS, a);
    h.dispatch(MS, b).rollback(MS, b, FailReason::Poison);
    h.dispatch_n(2 * MS, b, 2)
        .rollback(2 * MS, b, FailReason::Poison);
    h.dead_letter(2 * MS, b);
    let x = h.metrics(2 * MS);
    assert_eq!(x.dead_lettered, 1);
    assert_eq!(x.poison_dead_lettered, 1);
    assert_eq!(x.innocent_dead_lettered, 0);
    assert_eq!(x.final_state_mismatches, 0);
    assert_eq!(x.applied, 1);
    assert_eq!(x.redeliveries, 1);
    assert_eq!(x.coverage.rollbacks, 2);
}

#[test]
fn innocent_dead_letter_of_the_last_message_is_a_mismatch() {
    // seq 1 is fine, but the database is down: retries run out and it is dead-lettered. The
    // target keeps seq 0's state.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.apply(MS, a).ack(MS, a);
    h.ev(Event::Crash {
        t: MS,
        node: Node::TargetDb,
    });
    h.dispatch(MS, b).rollback(MS, b, FailReason::Outage);
    h.dead_letter(2 * MS, b);
    let x = h.metrics(2 * MS);
    assert_eq!(x.dead_lettered, 1);
    assert_eq!(x.poison_dead_lettered, 0);
    assert_eq!(x.innocent_dead_lettered, 1);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.coverage.db_outages, 1);
}

#[test]
fn innocent_dead_letter_overwritten_by_a_newer_state_is_no_mismatch() {
    // seq 0 is dead-lettered but seq 1, the newest, is applied: full-state last writer wins.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.dead_letter(MS, a);
    h.apply(2 * MS, b).ack(2 * MS, b);
    let x = h.metrics(2 * MS);
    assert_eq!(x.innocent_dead_lettered, 1);
    assert_eq!(x.final_state_mismatches, 0);
}

#[test]
fn applied_then_dead_lettered_counts_as_applied() {
    // Applied, ack lost, then the redelivery fails until the backout threshold: the message did
    // take effect, so it is applied, not dead-lettered.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(MS, a);
    h.dispatch_n(2 * MS, a, 2)
        .rollback(2 * MS, a, FailReason::Outage);
    h.dead_letter(3 * MS, a);
    let x = h.metrics(3 * MS);
    assert_eq!(x.applied, 1);
    assert_eq!(x.dead_lettered, 0);
    assert_eq!(x.final_state_mismatches, 0);
}

// --- 7. Pending and lost ---------------------------------------------------------------------

#[test]
fn pending_at_end_is_accounted_for() {
    // seq 0 is stuck on a broker when the run ends; the engine reports it as pending.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).pending(10 * MS, a);
    let x = h.metrics(10 * MS);
    assert_eq!(x.pending_at_end, 1);
    assert_eq!(x.lost, 0);
    assert_eq!(x.applied, 0);
    // The target never saw it.
    assert_eq!(x.final_state_mismatches, 1);
}

#[test]
fn an_applied_message_still_held_at_the_end_is_applied_and_unacked() {
    // seq 0 was applied but its ack (an offset commit) never reached the broker; seq 1 was
    // applied and acked; seq 2, applied after it and never acked, is unacked too.
    let (a, b, c) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let mut h = H::new(2, WorkloadKind::State);
    for x in [a, b, c] {
        h.produce(0, x).enqueue(0, x).dispatch(0, x);
    }
    h.apply(MS, a)
        .apply(2 * MS, b)
        .apply(3 * MS, c)
        .ack(3 * MS, b);
    // Key 1: seq 1 applied (unacked) while seq 0, never applied, is still held: seq 1 is not
    // final in its key's window yet, and unacked all the same.
    let (d, e) = (m(3, 1, 0), m(4, 1, 1));
    for x in [d, e] {
        h.produce(3 * MS, x).enqueue(3 * MS, x);
    }
    h.dispatch(4 * MS, e).apply(4 * MS, e);
    for x in [a, c, e] {
        h.ev(Event::Unacked { t: 9 * MS, msg: x });
    }
    h.pending(9 * MS, d);
    let x = h.metrics(9 * MS);
    assert_eq!((x.applied, x.unacked_at_end, x.pending_at_end), (4, 3, 1));
    assert_eq!(x.duplicates, 0);
}

#[test]
fn unacked_of_a_message_never_applied_is_malformed() {
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a);
    h.produce(0, b).enqueue(0, b).dispatch(0, b).apply(MS, b);
    h.ev(Event::Unacked { t: 9 * MS, msg: a });
    assert!(h.malformed(9 * MS).contains("never applied"));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a).apply(MS, a);
    h.ev(Event::Unacked {
        t: 9 * MS,
        msg: m(7, 0, 1),
    });
    assert!(h.malformed(9 * MS).contains("never produced"));
}

#[test]
fn discarded_message_is_lost() {
    // A non-persistent broker crashes holding seq 0.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.ev(Event::Crash {
        t: MS,
        node: Node::Broker(0),
    });
    h.discard(MS, a);
    let x = h.metrics(MS);
    assert_eq!(x.lost, 1);
    assert_eq!(x.pending_at_end, 0);
    assert_eq!(x.applied, 0);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.coverage.broker_crashes, 1);
}

#[test]
fn applied_then_discarded_counts_as_applied() {
    // Applied, ack lost, then the broker holding the unacked copy crashes: not lost.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(MS, a).discard(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(x.applied, 1);
    assert_eq!(x.lost, 0);
}

#[test]
fn discarded_while_in_hand_then_applied_is_applied_once_and_not_lost() {
    // A non-persistent broker crashes while consumer 0 processes seq 0: the broker's copy is
    // gone, but the consumer still writes it. Applied wins: applied 1, lost 0, duplicates 0.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a).start(0, a, 0);
    h.discard(MS, a);
    assert_eq!(h.c.keys[0].window.len(), 1, "still open while in hand");
    h.apply(2 * MS, a);
    assert!(
        h.c.keys[0].window.is_empty(),
        "final once applied (no ack can come)"
    );
    let x = h.metrics(2 * MS);
    assert_eq!((x.applied, x.lost, x.duplicates), (1, 0, 0));
    assert_eq!(x.final_state_mismatches, 0);
}

#[test]
fn dead_lettered_while_a_zombie_has_it_then_applied_is_applied() {
    // Consumer 0 lost its connection mid-processing; the broker redelivered to consumer 1, which
    // failed until the redelivery limit dead-lettered it; consumer 0 then finished and wrote it.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).dispatch(0, a).start(0, a, 0);
    h.start(MS, a, 1).rollback_by(MS, a, 1, FailReason::Outage);
    h.dead_letter(2 * MS, a);
    h.apply(3 * MS, a);
    let x = h.metrics(3 * MS);
    assert_eq!((x.applied, x.dead_lettered, x.duplicates), (1, 0, 0));
}

#[test]
fn discarded_while_in_hand_then_the_consumer_crashes_is_lost() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).start(0, a, 3).discard(MS, a);
    h.ev(Event::Crash {
        t: 2 * MS,
        node: Node::Consumer(3),
    });
    assert!(
        h.c.keys[0].window.is_empty(),
        "final once out of every hand"
    );
    let x = h.metrics(2 * MS);
    assert_eq!((x.applied, x.lost), (0, 1));
}

#[test]
fn discarded_while_in_hand_then_rolled_back_is_lost() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).start(0, a, 0).discard(MS, a);
    h.rollback(2 * MS, a, FailReason::Outage);
    assert!(h.c.keys[0].window.is_empty());
    assert_eq!(h.metrics(2 * MS).lost, 1);
}

#[test]
fn a_new_start_by_the_same_consumer_ends_its_previous_hand() {
    // Consumer 0 abandoned seq 0 (no event) and started seq 1: seq 0's discard is final.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).start(0, a, 0).discard(MS, a);
    h.start(2 * MS, b, 0);
    assert_eq!(h.c.keys[0].base, 1, "seq 0 settled as lost");
    h.apply(3 * MS, b).ack(3 * MS, b);
    let x = h.metrics(3 * MS);
    assert_eq!((x.applied, x.lost), (1, 1));
}

#[test]
fn handed_to_another_consumer_and_applied_by_both_is_one_duplicate() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).start(0, a, 0).start(MS, a, 1);
    h.apply_by(2 * MS, a, 1).apply_by(3 * MS, a, 0);
    let x = h.metrics(3 * MS);
    assert_eq!((x.applied, x.duplicates, x.lost), (1, 1, 0));
}

#[test]
fn a_consumer_that_starts_a_message_after_it_is_gone_does_not_end_the_holder_s_hand() {
    // Consumer 0 has seq 0 in hand when a broker crash discards the broker's copy. Consumer 1
    // then starts a copy it had buffered and rolls it back: it did not hold seq 0 when the copy
    // went, so seq 0 stays open for consumer 0, which writes it: applied once, not lost.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).start(0, a, 0).discard(MS, a);
    h.start(2 * MS, a, 1)
        .rollback_by(2 * MS, a, 1, FailReason::Outage);
    assert_eq!(h.c.keys[0].window.len(), 1, "open while consumer 0 has it");
    h.apply_by(3 * MS, a, 0);
    let x = h.metrics(3 * MS);
    assert_eq!((x.applied, x.lost, x.duplicates), (1, 0, 0));
}

#[test]
fn a_message_held_by_many_and_gone_many_times_costs_work_linear_in_the_history() {
    // n consumers take the same message, then its broker copy goes n times: finding its holders
    // must not walk every hand on every departure (n x n), few hands are walked, many indexed.
    for n in [10u32, 2000] {
        let a = m(0, 0, 0);
        let mut h = H::state();
        h.produce(0, a);
        for c in 0..n {
            h.start(MS, a, c);
        }
        for _ in 0..n {
            h.discard(2 * MS, a);
        }
        let bound = u64::from(n) * u64::from(n).min(WALK_HANDS as u64);
        assert!(h.c.hand_visits <= bound, "{n}: {}", h.c.hand_visits);
        for c in 0..n {
            assert_eq!(h.c.keys[0].window.len(), 1, "open while consumers hold it");
            h.ev(Event::Crash {
                t: 3 * MS,
                node: Node::Consumer(c),
            });
        }
        assert!(
            h.c.keys[0].window.is_empty(),
            "final once out of every hand"
        );
        let x = h.metrics(3 * MS);
        assert_eq!((x.lost, x.applied), (1, 0), "{n}");
    }
}

#[test]
fn consumer_ids_from_a_hostile_history_do_not_allocate() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).start(0, a, u32::MAX).discard(MS, a);
    assert!(h.c.hands.len() <= 1);
    assert_eq!(h.metrics(MS).lost, 1);
}

#[test]
fn dropped_poison_and_innocent_are_counted_apart_from_dead_letters() {
    // The broker gives up on a poison message and an innocent one and deletes them (no DLQ).
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::command();
    h.poison(0, a).produce(0, b);
    h.ev(Event::Drop {
        t: MS,
        msg: a,
        broker: 0,
    });
    h.ev(Event::Drop {
        t: MS,
        msg: b,
        broker: 0,
    });
    let x = h.metrics(MS);
    assert_eq!((x.dropped, x.poison_dropped, x.innocent_dropped), (2, 1, 1));
    assert_eq!((x.dead_lettered, x.lost), (0, 0));
    assert_eq!(x.lost_commands, 1, "the innocent command never took effect");
}

#[test]
fn dropped_while_in_hand_then_applied_is_applied() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).start(0, a, 2);
    h.ev(Event::Drop {
        t: MS,
        msg: a,
        broker: 0,
    });
    h.apply_by(2 * MS, a, 2);
    let x = h.metrics(2 * MS);
    assert_eq!((x.applied, x.dropped, x.duplicates), (1, 0, 0));
}

impl H {
    fn replay(&mut self, t: Time, msg: MsgRef, poison: bool) -> &mut Self {
        self.ev(Event::Replay {
            t,
            msg,
            broker: 0,
            poison,
        })
    }
}

#[test]
fn a_replayed_dead_letter_applied_late_is_applied_once_and_out_of_order() {
    // seq 0 is dead-lettered (its record leaves the window: final), seq 1 applied; then an
    // operator replays the DLQ and seq 0 is applied after seq 1.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).dead_letter(MS, a);
    h.apply(2 * MS, b).ack(2 * MS, b);
    h.replay(3 * MS, a, false).apply(4 * MS, a).ack(4 * MS, a);
    let x = h.metrics(4 * MS);
    assert_eq!(
        (x.applied, x.dead_lettered, x.innocent_dead_lettered),
        (2, 0, 0)
    );
    assert_eq!(
        (x.duplicates, x.ordering_violations, x.stale_writes),
        (0, 1, 1)
    );
    assert_eq!(
        x.final_state_mismatches, 1,
        "the replayed older state is the last written"
    );
    assert_eq!(x.coverage.dlq_replays, 1);
}

#[test]
fn a_replayed_message_still_in_its_window_is_open_again() {
    // seq 0 is unresolved, so seq 1's dead-letter record stays in the window; replayed, seq 1 is
    // pending at the end, not dead-lettered.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a)
        .poison(0, b)
        .dead_letter(MS, b)
        .replay(2 * MS, b, true);
    h.apply(3 * MS, a).ack(3 * MS, a).pending(4 * MS, b);
    let x = h.metrics(4 * MS);
    assert_eq!((x.applied, x.dead_lettered, x.pending_at_end), (1, 0, 1));
}

#[test]
fn a_replayed_poison_message_dead_lettered_again_counts_once() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.poison(0, a)
        .dead_letter(MS, a)
        .replay(2 * MS, a, true)
        .dead_letter(3 * MS, a);
    let x = h.metrics(3 * MS);
    assert_eq!(
        (x.dead_lettered, x.poison_dead_lettered, x.applied),
        (1, 1, 0)
    );
}

#[test]
fn replaying_a_message_a_consumer_had_applied_makes_its_next_apply_a_duplicate() {
    // Applied wins: the consumer wrote it while the broker dead-lettered it; a replay then
    // brings the broker's copy back and it is written again.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a)
        .start(0, a, 0)
        .dead_letter(MS, a)
        .apply_by(2 * MS, a, 0);
    h.replay(3 * MS, a, false).apply(4 * MS, a);
    let x = h.metrics(4 * MS);
    assert_eq!((x.applied, x.dead_lettered, x.duplicates), (1, 0, 1));
}

#[test]
fn a_replayed_copy_of_an_applied_message_may_be_pending_at_the_end() {
    // As above, but the replayed copy is still queued when the run ends: the message counts as
    // applied (once), and its pending copy is not a malformed history (a pending message that
    // was never replayed still is: `pending_of_a_settled_message_is_malformed`).
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a)
        .start(0, a, 0)
        .dead_letter(MS, a)
        .apply_by(2 * MS, a, 0);
    h.replay(3 * MS, a, false).pending(4 * MS, a);
    let x = h.metrics(4 * MS);
    assert_eq!((x.applied, x.dead_lettered, x.pending_at_end), (1, 0, 0));
}

/// As above, with the replay made while the message is still in its key's window (an earlier
/// seq still open): once the window settles past it, its replayed copy pending at the end is not
/// malformed either. Found by the property tests (a lease, a DLQ replay, `rabbitmq_sac`).
#[test]
fn a_replayed_copy_of_an_applied_message_still_in_its_window_may_be_pending() {
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a)
        .produce(0, b)
        .start(0, b, 0)
        .dead_letter(MS, b)
        .apply_by(2 * MS, b, 0);
    h.replay(3 * MS, b, false)
        .deliver_stored(4 * MS, a)
        .pending(5 * MS, b);
    let x = h.metrics(5 * MS);
    assert_eq!((x.applied, x.dead_lettered, x.pending_at_end), (2, 0, 0));
    // Replayed first, then applied by another instance (a strategy's held copy): the same.
    let mut h = H::state();
    h.produce(0, a)
        .produce(0, b)
        .start(0, b, 0)
        .dead_letter(MS, b)
        .replay(2 * MS, b, false)
        .apply_by(3 * MS, b, 0);
    h.deliver_stored(4 * MS, a).pending(5 * MS, b);
    let x = h.metrics(5 * MS);
    assert_eq!((x.applied, x.dead_lettered, x.pending_at_end), (2, 0, 0));
}

#[test]
fn a_reopened_record_hides_no_message_still_in_its_window() {
    // seq 0 is dead-lettered and leaves the window (seq 1 is now its base), then replayed: its
    // record is reopened outside the window. The messages still in the window are looked up
    // there, not among the reopened records: seq 2 (past the base) is dead-lettered behind seq
    // 1, then seq 1 (the base) is, which settles both. The replayed seq 0 is pending at the end.
    let (a, b, c) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let mut h = H::state();
    h.produce(0, a)
        .produce(0, b)
        .produce(0, c)
        .dead_letter(MS, a);
    assert_eq!(h.c.keys[0].base, 1);
    h.replay(2 * MS, a, false).dead_letter(3 * MS, c);
    assert!(
        h.c.keys[0].window[1].dead_lettered,
        "seq 2 found in the window"
    );
    h.dead_letter(4 * MS, b);
    assert_eq!(h.c.keys[0].base, 3, "seq 1 found at the window's base");
    h.pending(5 * MS, a);
    let x = h.metrics(5 * MS);
    assert_eq!(
        (x.dead_lettered, x.innocent_dead_lettered, x.pending_at_end),
        (2, 2, 1)
    );
    assert_eq!((x.applied, x.coverage.dlq_replays), (0, 1));
}

#[test]
fn replaying_an_applied_message_leaves_another_dead_letter_counted() {
    // seq 0 is dead-lettered and stays in the DLQ. seq 1 is dead-lettered while consumer 0 has
    // it in hand, and the consumer then writes it (applied wins: it was never counted
    // dead-lettered). A replay of seq 1 takes nothing back: seq 0 is still dead-lettered, and
    // seq 1's replayed copy, still queued at the end, is not a pending message.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).dead_letter(MS, a);
    h.start(MS, b, 0)
        .dead_letter(2 * MS, b)
        .apply_by(3 * MS, b, 0);
    h.replay(4 * MS, b, false).pending(5 * MS, b);
    let x = h.metrics(5 * MS);
    assert_eq!(
        (
            x.dead_lettered,
            x.innocent_dead_lettered,
            x.applied,
            x.pending_at_end
        ),
        (1, 1, 1, 0)
    );
    assert_eq!(x.final_state_mismatches, 0);
}

#[test]
fn a_replayed_dead_letter_applied_twice_is_applied_once_and_one_duplicate() {
    // seq 0 is dead-lettered (its record leaves the window), replayed, applied, and applied
    // again (the first apply's ack was lost).
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).dead_letter(MS, a).replay(2 * MS, a, false);
    h.apply(3 * MS, a).apply(4 * MS, a).ack(4 * MS, a);
    let x = h.metrics(4 * MS);
    assert_eq!(
        (x.applied, x.duplicates, x.dead_lettered, x.pending_at_end),
        (1, 1, 0, 0)
    );
}

// --- 8. Conservation -------------------------------------------------------------------------

#[test]
fn unaccounted_message_fails_conservation() {
    // seq 1 is produced and then nothing happens to it, and the engine did not report it pending.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b).enqueue(0, b);
    h.apply(MS, a).ack(MS, a);
    assert_eq!(
        h.finish(MS),
        Err(SelfCheckError::Conservation {
            produced: 2,
            applied: 1,
            stale: 0,
            dlq: 0,
            dropped: 0,
            pending: 0,
            lost: 0,
            given_up: 0,
            unaccounted: 1,
        })
    );
}

#[test]
fn acked_but_never_applied_fails_conservation() {
    // An ack without apply or reject (auto-acknowledge) and then nothing: not accounted for.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).dispatch(0, a).ack(MS, a);
    assert!(matches!(
        h.finish(MS),
        Err(SelfCheckError::Conservation {
            produced: 1,
            unaccounted: 1,
            ..
        })
    ));
}

#[test]
fn ack_before_apply_settles_on_apply() {
    // Auto-acknowledge: acked on dispatch, applied afterwards. Fully accounted and settled.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).dispatch(0, a).ack(0, a).apply(MS, a);
    assert!(h.c.keys[0].window.is_empty());
    let x = h.metrics(MS);
    assert_eq!(x.applied, 1);
}

#[test]
fn conservation_holds_across_every_outcome() {
    // One message of each outcome on one key: applied, stale-rejected, dead-lettered, lost,
    // pending, dropped. Every produced message is accounted for exactly once.
    let ms: Vec<MsgRef> = (0..6).map(|s| m(s as u64, 0, s)).collect();
    let mut h = H::state();
    for &x in &ms {
        h.produce(0, x);
    }
    h.apply(MS, ms[1]).ack(MS, ms[1]);
    h.reject(MS, ms[0]).ack(MS, ms[0]);
    h.dead_letter(MS, ms[2]);
    h.discard(MS, ms[3]);
    h.pending(2 * MS, ms[4]);
    h.ev(Event::Drop {
        t: 2 * MS,
        msg: ms[5],
        broker: 0,
    });
    let x = h.metrics(2 * MS);
    assert_eq!(x.produced, 6);
    assert_eq!(
        (
            x.applied,
            x.stale_rejected,
            x.dead_lettered,
            x.lost,
            x.pending_at_end,
            x.dropped
        ),
        (1, 1, 1, 1, 1, 1)
    );
}

// --- 9. Malformed histories --------------------------------------------------------------------

#[test]
fn time_going_backwards_is_malformed() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(5 * MS, a).apply(4 * MS, a).ack(6 * MS, a);
    assert!(h.malformed(6 * MS).contains("time went backwards"));
}

/// The engine feeds its events without the per-event time test (`observe_in_order`) and tests
/// its clock instead: a clock that went back makes the history malformed all the same.
#[test]
fn a_clock_that_went_back_is_malformed() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.c.observe_in_order(&Event::Produce {
        t: 5 * MS,
        msg: a,
        producer: 0,
        timestamp: 5 * MS,
        poison: false,
    });
    h.c.clock_went_back(4 * MS, 5 * MS);
    h.apply(4 * MS, a).ack(6 * MS, a);
    assert!(h.malformed(6 * MS).contains("time went backwards"));
}

#[test]
fn skipped_seq_is_malformed() {
    // Key 0's seq 1 is produced before its seq 0.
    let mut h = H::state();
    h.produce(0, m(0, 0, 1));
    assert!(h.malformed(0).contains("produced seq 1 where 0 was next"));
}

#[test]
fn repeated_seq_is_malformed() {
    // seq 0 produced twice.
    let mut h = H::state();
    h.produce(0, m(0, 0, 0)).produce(0, m(1, 0, 0));
    assert!(h.malformed(0).contains("produced seq 0 where 1 was next"));
}

#[test]
fn apply_of_a_message_never_produced_is_malformed() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(MS, a).ack(MS, a);
    h.apply(2 * MS, m(1, 0, 1));
    assert!(h.malformed(2 * MS).contains("never produced"));
}

#[test]
fn events_about_messages_never_produced_are_malformed() {
    let ghost = m(7, 0, 3);
    let cases: [fn(&mut H); 5] = [
        |h| {
            h.enqueue(0, m(7, 0, 3));
        },
        |h| {
            h.dispatch(0, m(7, 0, 3));
        },
        |h| {
            h.reject(0, m(7, 0, 3));
        },
        |h| {
            h.dead_letter(0, m(7, 0, 3));
        },
        |h| {
            h.discard(0, m(7, 0, 3));
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let mut h = H::state();
        h.produce(0, m(0, 0, 0)).apply(0, m(0, 0, 0));
        case(&mut h);
        let s = h.malformed(0);
        assert!(s.contains("never produced"), "case {i}: {s}");
        assert!(s.contains(&format!("{ghost:?}")), "case {i}: {s}");
    }
}

#[test]
fn key_out_of_range_is_malformed() {
    // One key; events about key 1.
    let x = m(0, 1, 0);
    let mut h = H::state();
    h.produce(0, x);
    assert!(h.malformed(0).contains("key 1 out of range"));

    let mut h = H::state();
    h.apply(0, x);
    assert!(h.malformed(0).contains("key 1 out of range"));

    let mut h = H::state();
    h.enqueue(0, x);
    assert!(h.malformed(0).contains("never produced"));
}

#[test]
fn pending_of_a_settled_message_is_malformed() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(MS, a).ack(MS, a).pending(2 * MS, a);
    assert!(h.malformed(2 * MS).contains("already settled"));
}

impl H {
    /// Producer 0 resends `msg` at `t`: stored again as `copy` (a new id), or refused.
    fn resend(&mut self, t: Time, copy: MsgRef, of: u64, deduplicated: bool) -> &mut Self {
        self.ev(Event::Resend {
            t,
            msg: copy,
            of,
            producer: 0,
            broker: 0,
            deduplicated,
        })
    }
}

/// A resend stored again is a second message at the broker with the first one's key and seq:
/// applying it is a duplicate, and it may still be queued at the end after the message it
/// copies is settled (not malformed, not pending: the message was applied).
#[test]
fn a_stored_resend_applied_is_a_duplicate_and_may_be_pending_after_its_message_settled() {
    let (a, copy) = (m(0, 0, 0), m(1, 0, 0));
    let mut h = H::state();
    h.produce(0, a)
        .enqueue(0, a)
        .resend(MS, copy, 0, false)
        .enqueue(MS, copy)
        .dispatch(2 * MS, a)
        .apply(2 * MS, a)
        .ack(2 * MS, a)
        .pending(3 * MS, copy);
    let r = h.metrics(3 * MS);
    assert_eq!((r.applied, r.pending_at_end, r.duplicates), (1, 0, 0));
    assert_eq!(r.coverage.resends_stored, 1);
    assert_eq!(r.coverage.resends_deduplicated, 0);

    let mut h = H::state();
    h.produce(0, a)
        .enqueue(0, a)
        .resend(MS, copy, 0, false)
        .enqueue(MS, copy)
        .deliver_stored(2 * MS, a)
        .deliver_stored(3 * MS, copy);
    let r = h.metrics(3 * MS);
    assert_eq!((r.applied, r.duplicates, r.ordering_violations), (1, 1, 0));
}

/// While a copy stored by a resend is left at a broker, another copy dead-lettered or discarded
/// does not make the message gone: it is pending if the last copy is, applied (once, not a
/// duplicate, not lost) if the last copy is applied, dead-lettered when every copy is.
#[test]
fn a_copy_gone_while_another_is_left_does_not_settle_the_message() {
    let (a, copy) = (m(0, 0, 0), m(1, 0, 0));
    let stored = |h: &mut H| {
        h.produce(0, a)
            .enqueue(0, a)
            .resend(MS, copy, 0, false)
            .enqueue(MS, copy);
    };
    let mut h = H::state();
    stored(&mut h);
    h.dead_letter(2 * MS, copy).pending(3 * MS, a);
    let r = h.metrics(3 * MS);
    assert_eq!((r.pending_at_end, r.dead_lettered, r.applied), (1, 0, 0));

    let mut h = H::state();
    stored(&mut h);
    h.discard(2 * MS, a).deliver_stored(3 * MS, copy);
    let r = h.metrics(3 * MS);
    assert_eq!((r.applied, r.lost, r.duplicates), (1, 0, 0));

    let mut h = H::state();
    stored(&mut h);
    h.dead_letter(2 * MS, copy).dead_letter(3 * MS, a);
    let r = h.metrics(3 * MS);
    assert_eq!((r.dead_lettered, r.pending_at_end, r.lost), (1, 0, 0));
}

/// A refused resend names the message itself and is no copy: the message pending after it
/// settled is still malformed, and the refusal is counted as such.
#[test]
fn a_deduplicated_resend_is_counted_and_makes_no_copy() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a)
        .enqueue(0, a)
        .resend(MS, a, 0, true)
        .deliver_stored(2 * MS, a);
    let r = h.metrics(2 * MS);
    assert_eq!(r.coverage.resends_deduplicated, 1);
    assert_eq!(r.coverage.resends_stored, 0);
    assert_eq!(r.duplicates, 0);

    let mut h = H::state();
    h.produce(0, a)
        .enqueue(0, a)
        .resend(MS, a, 0, true)
        .deliver_stored(2 * MS, a)
        .pending(3 * MS, a);
    assert!(h.malformed(3 * MS).contains("already settled"));
}

/// Copied messages are looked up among several (kept sorted whatever order they come in): a
/// copy of each may be pending at the end, a message never copied may not.
#[test]
fn several_copies_are_each_known_whatever_their_order() {
    let (a, b, c) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let (ca, cb) = (m(5, 0, 1), m(3, 0, 0));
    let copies = |h: &mut H| {
        h.produce(0, a)
            .produce(0, b)
            .produce(0, c)
            .resend(MS, ca, 1, false)
            .resend(MS, cb, 0, false)
            .deliver_stored(2 * MS, a)
            .deliver_stored(2 * MS, b)
            .deliver_stored(2 * MS, c);
    };
    let mut h = H::state();
    copies(&mut h);
    h.pending(3 * MS, ca).pending(3 * MS, cb);
    let r = h.metrics(3 * MS);
    assert_eq!((r.applied, r.pending_at_end), (3, 0));
    assert_eq!(r.coverage.resends_stored, 2);

    let mut h = H::state();
    copies(&mut h);
    h.pending(3 * MS, c);
    assert!(h.malformed(3 * MS).contains("already settled"));
}

#[test]
fn malformed_takes_precedence_over_conservation_and_keeps_the_first_cause() {
    // seq 0 is never resolved (would fail conservation), then two malformations: the report is
    // the first one.
    let mut h = H::state();
    h.produce(5 * MS, m(0, 0, 0));
    h.produce(4 * MS, m(1, 0, 2));
    let s = h.malformed(5 * MS);
    assert!(s.contains("time went backwards"), "{s}");
    assert!(!s.contains("produced seq"), "{s}");
}

#[test]
fn apply_with_seq_u32_max_is_malformed_not_a_panic() {
    // A recorded history with a corrupt seq: an apply of (key 0, seq u32::MAX), never produced.
    let r = std::panic::catch_unwind(|| {
        let mut h = H::state();
        h.produce(0, m(0, 0, 0));
        h.apply(MS, m(1, 0, u32::MAX));
        h.finish(MS)
    });
    assert!(
        matches!(r, Ok(Err(SelfCheckError::Malformed(_)))),
        "panicked or not malformed"
    );
}

#[test]
fn apply_with_state_seq_u32_max_is_malformed_not_a_panic() {
    // A real message, applied with a corrupt state_seq.
    let r = std::panic::catch_unwind(|| {
        let a = m(0, 0, 0);
        let mut h = H::state();
        h.produce(0, a);
        h.ev(Event::Apply {
            t: MS,
            msg: a,
            consumer: 0,
            state_seq: u32::MAX,
        });
        h.ack(MS, a);
        h.finish(MS)
    });
    assert!(
        matches!(r, Ok(Err(SelfCheckError::Malformed(_)))),
        "panicked or not malformed"
    );
}

#[test]
fn ack_of_a_message_never_produced_is_malformed() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(MS, a).ack(MS, a);
    h.ack(2 * MS, m(1, 0, 1));
    assert!(h.malformed(2 * MS).contains("never produced"));

    let mut h = H::state();
    h.ack(0, m(0, 3, 0));
    h.malformed(0);
}

// --- 10. Command workloads -------------------------------------------------------------------

/// Three commands of key 0, produced at 0; seq 1 poison when `poison_1`.
fn three_commands(poison_1: bool) -> (H, [MsgRef; 3]) {
    let ms = [m(0, 0, 0), m(1, 0, 1), m(2, 0, 2)];
    let mut h = H::command();
    h.produce(0, ms[0]).produce_as(0, ms[1], poison_1);
    h.produce(0, ms[2]);
    (h, ms)
}

#[test]
fn commands_applied_once_in_order_match() {
    let (mut h, [a, b, c]) = three_commands(false);
    h.apply(MS, a).ack(MS, a);
    h.apply(2 * MS, b).ack(2 * MS, b);
    h.apply(3 * MS, c).ack(3 * MS, c);
    let x = h.metrics(3 * MS);
    assert_eq!(x.final_state_mismatches, 0);
    assert_eq!(x.applied, 3);
}

#[test]
fn missing_command_is_a_mismatch() {
    // The middle command is dead-lettered (an innocent casualty): a delta never took effect,
    // even though the last one did.
    let (mut h, [a, b, c]) = three_commands(false);
    h.apply(MS, a).ack(MS, a);
    h.dead_letter(2 * MS, b);
    h.apply(3 * MS, c).ack(3 * MS, c);
    let x = h.metrics(3 * MS);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.innocent_dead_lettered, 1);
}

#[test]
fn command_applied_twice_is_a_mismatch() {
    // seq 1's ack is lost and it is applied again: the delta took effect twice.
    let (mut h, [a, b, c]) = three_commands(false);
    h.apply(MS, a).ack(MS, a);
    h.apply(2 * MS, b);
    h.dispatch_n(2 * MS, b, 2).apply(2 * MS, b).ack(2 * MS, b);
    h.apply(3 * MS, c).ack(3 * MS, c);
    let x = h.metrics(3 * MS);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.duplicates, 1);
    assert_eq!(x.ordering_violations, 0);
}

#[test]
fn commands_swapped_are_a_mismatch() {
    // All three applied exactly once, but seq 2 before seq 1: commands do not commute.
    let (mut h, [a, b, c]) = three_commands(false);
    h.apply(MS, a).ack(MS, a);
    h.apply(2 * MS, c).ack(2 * MS, c);
    h.apply(3 * MS, b).ack(3 * MS, b);
    let x = h.metrics(3 * MS);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.ordering_violations, 1);
}

#[test]
fn poison_command_dead_lettered_is_not_a_mismatch() {
    // seq 1 is poison: it can never take effect, so the expectation excludes it.
    let (mut h, [a, b, c]) = three_commands(true);
    h.apply(MS, a).ack(MS, a);
    h.rollback(2 * MS, b, FailReason::Poison)
        .dead_letter(2 * MS, b);
    h.apply(3 * MS, c).ack(3 * MS, c);
    let x = h.metrics(3 * MS);
    assert_eq!(x.final_state_mismatches, 0);
    assert_eq!(x.poison_dead_lettered, 1);
}

#[test]
fn mismatches_count_keys_not_messages() {
    // Two keys: key 0 misses two commands, key 1 is complete. One mismatching key.
    let mut h = H::new(2, WorkloadKind::Command);
    let (a0, a1, a2) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let b0 = m(3, 1, 0);
    h.produce(0, a0)
        .produce(0, a1)
        .produce(0, a2)
        .produce(0, b0);
    h.apply(MS, a0).ack(MS, a0);
    h.discard(MS, a1).discard(MS, a2);
    h.apply(MS, b0).ack(MS, b0);
    let x = h.metrics(MS);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.lost, 2);
}

// --- 11. Head-of-line blocking -----------------------------------------------------------------

#[test]
fn max_block_is_the_wait_for_the_predecessor() {
    // seq 0 enqueued at 0, applied at 10ms. seq 1 reached the broker at 1ms and waited until
    // seq 0 was resolved at 10ms (9ms), then was applied at 12ms.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(MS, b).enqueue(MS, b);
    h.dispatch(MS, a);
    h.apply(10 * MS, a).ack(10 * MS, a);
    h.dispatch(11 * MS, b).apply(12 * MS, b).ack(12 * MS, b);
    let x = h.metrics(12 * MS);
    assert_eq!(x.max_block_ms, 9.0);
}

#[test]
fn max_block_with_unacked_predecessor() {
    // As above, but seq 0's ack never arrives: seq 0 is resolved (and final) at its apply all
    // the same.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(MS, b).enqueue(MS, b);
    h.apply(10 * MS, a);
    h.apply(12 * MS, b).ack(12 * MS, b);
    let x = h.metrics(12 * MS);
    assert_eq!(x.max_block_ms, 9.0);
    assert_eq!(x.applied, 2);
}

#[test]
fn max_block_counts_a_resolved_predecessor_still_in_the_window() {
    // seq 0 is rejected at 10ms and its ack never comes: resolved, but not final, so it stays in
    // the window. seq 1, enqueued at 1ms, waited for it until 10ms (9ms), applied at 12ms.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(MS, b).enqueue(MS, b);
    h.reject(10 * MS, a);
    h.apply(12 * MS, b).ack(12 * MS, b);
    assert_eq!(h.c.keys[0].window.len(), 2);
    h.pending(12 * MS, a);
    assert_eq!(h.metrics(12 * MS).max_block_ms, 9.0);
}

#[test]
fn max_block_counts_a_dead_lettered_predecessor() {
    // seq 0 is retried until dead-lettered at 20ms; seq 1, enqueued at 2ms, waits 18ms.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(2 * MS, b).enqueue(2 * MS, b);
    h.rollback(5 * MS, a, FailReason::Outage);
    h.dead_letter(20 * MS, a);
    h.apply(21 * MS, b).ack(21 * MS, b);
    let x = h.metrics(21 * MS);
    assert_eq!(x.max_block_ms, 18.0);
}

#[test]
fn apply_before_predecessor_resolved_is_not_blocked() {
    // seq 1 (enqueued 1ms) overtakes seq 0 and is applied at 2ms; seq 0 is applied at 10ms.
    // Nobody waited.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(MS, b).enqueue(MS, b);
    h.apply(2 * MS, b).ack(2 * MS, b);
    h.apply(10 * MS, a).ack(10 * MS, a);
    let x = h.metrics(10 * MS);
    assert_eq!(x.max_block_ms, 0.0);
    assert_eq!(x.ordering_violations, 1);
}

#[test]
fn message_enqueued_after_predecessor_resolved_is_not_blocked() {
    // seq 0 resolved at 1ms; seq 1 reaches the broker at 5ms: no wait.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).apply(MS, a).ack(MS, a);
    h.produce(5 * MS, b)
        .enqueue(5 * MS, b)
        .apply(6 * MS, b)
        .ack(6 * MS, b);
    assert_eq!(h.metrics(6 * MS).max_block_ms, 0.0);
}

#[test]
fn max_block_is_the_maximum_over_messages() {
    // seq 1 waits 2ms, seq 2 waits 5ms.
    let (a, b, c) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(0, b).enqueue(0, b);
    h.apply(2 * MS, a).ack(2 * MS, a);
    h.produce(3 * MS, c).enqueue(3 * MS, c);
    h.apply(8 * MS, b).ack(8 * MS, b);
    h.apply(9 * MS, c).ack(9 * MS, c);
    assert_eq!(h.metrics(9 * MS).max_block_ms, 5.0);
}

// --- 12. Coverage ------------------------------------------------------------------------------

#[test]
fn coverage_counters_follow_fault_events() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a);
    let t = MS;
    for e in [
        Event::Crash {
            t,
            node: Node::Broker(1),
        },
        Event::Crash {
            t,
            node: Node::Broker(0),
        },
        Event::Crash {
            t,
            node: Node::Consumer(3),
        },
        Event::Crash {
            t,
            node: Node::TargetDb,
        },
        // Producer crashes have no counter.
        Event::Crash {
            t,
            node: Node::Producer(0),
        },
        Event::Recover {
            t,
            node: Node::Broker(1),
        },
        Event::Connect {
            t,
            node: Node::Consumer(3),
            broker: 0,
            failover: true,
        },
        // A first connection is not a failover.
        Event::Connect {
            t,
            node: Node::Consumer(4),
            broker: 0,
            failover: false,
        },
        Event::Disconnect {
            t,
            node: Node::Consumer(3),
        },
        Event::Suspend { t, consumer: 3 },
        Event::Resume { t, consumer: 3 },
        Event::Reassign {
            t,
            broker: 0,
            consumer: 4,
        },
        Event::Rollback {
            t,
            msg: a,
            consumer: 3,
            reason: FailReason::Strategy,
        },
        Event::Forward {
            t,
            msg: a,
            from: 0,
            to: 1,
        },
        Event::Redelivery {
            t,
            msg: a,
            delay_us: 100,
            blocking: true,
        },
        Event::Start {
            t,
            msg: a,
            consumer: 4,
        },
    ] {
        h.ev(e);
    }
    h.apply(2 * MS, a).ack(2 * MS, a);
    let x = h.metrics(2 * MS);
    assert_eq!(
        x.coverage,
        Coverage {
            broker_crashes: 2,
            consumer_crashes: 1,
            disconnects: 1,
            failovers: 1,
            db_outages: 1,
            rollbacks: 1,
            forwards: 1,
            suspensions: 1,
            reassignments: 1,
            ..Coverage::default()
        }
    );
    assert_eq!(x.events, 19);
}

#[test]
fn drain_start_and_sim_time_are_reported_in_seconds() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.deliver(0, a);
    h.ev(Event::DrainStart { t: 1_500 * MS });
    let x = h.metrics(2_250 * MS);
    assert_eq!(x.drain_start_s, 1.5);
    assert_eq!(x.sim_time_s, 2.25);
}

// --- 13. Memory --------------------------------------------------------------------------------

#[test]
fn window_is_empty_after_many_settled_messages() {
    // 10,000 messages of one key produced, applied and acked in order.
    let mut h = H::state();
    for s in 0..10_000u32 {
        let x = m(s as u64, 0, s);
        let t = s as Time * 10;
        h.produce(t, x).apply(t + 5, x).ack(t + 5, x);
    }
    assert!(h.c.keys[0].window.is_empty());
    assert_eq!(h.c.keys[0].base, 10_000);
    let x = h.metrics(100_000);
    assert_eq!(x.applied, 10_000);
    assert_eq!(x.produced, 10_000);
    assert_eq!(x.final_state_mismatches, 0);
    assert_eq!(x.latency_ms.max, 0.005);
}

#[test]
fn window_keeps_only_from_the_oldest_unresolved_message() {
    // seq 0 is stuck; seqs 1..=3 are applied and acked but wait behind it in the window. When
    // seq 0 is finally dead-lettered, the whole window settles.
    let mut h = H::state();
    for s in 0..4u32 {
        h.produce(0, m(s as u64, 0, s));
    }
    for s in 1..4u32 {
        let x = m(s as u64, 0, s);
        h.apply(MS, x).ack(MS, x);
    }
    assert_eq!(h.c.keys[0].window.len(), 4);
    h.dead_letter(2 * MS, m(0, 0, 0));
    assert!(h.c.keys[0].window.is_empty());
    assert_eq!(h.c.keys[0].base, 4);
    let x = h.metrics(2 * MS);
    assert_eq!(x.applied, 3);
    assert_eq!(x.dead_lettered, 1);
}

// --- 14. Throughput ----------------------------------------------------------------------------

#[test]
fn throughput_is_applied_over_time_of_last_apply() {
    // Three messages applied by 500ms (the run goes on to 2s): 3 / 0.5s = 6/s.
    let mut h = H::state();
    for s in 0..3u32 {
        h.deliver(s as Time * 250 * MS, m(s as u64, 0, s));
    }
    let x = h.metrics(2_000 * MS);
    assert_eq!(x.throughput_per_s, 6.0);
}

#[test]
fn throughput_is_rounded_to_three_decimals() {
    // One apply at 3s: 0.333.../s.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).apply(3_000 * MS, a).ack(3_000 * MS, a);
    assert_eq!(h.metrics(3_000 * MS).throughput_per_s, 0.333);
}

#[test]
fn no_applies_means_zero_throughput_and_the_latency_of_the_whole_run() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).pending(MS, a);
    let x = h.metrics(MS);
    assert_eq!(x.throughput_per_s, 0.0);
    // Never delivered: counted as delivered at the end, not as no sample at all (a latency of 0).
    assert_eq!(
        x.latency_ms,
        Latency {
            p50: 1.0,
            p99: 1.0,
            max: 1.0
        }
    );
}

#[test]
fn an_empty_run_has_zero_latency() {
    let x = H::state().metrics(MS);
    assert_eq!(
        (x.throughput_per_s, x.latency_ms),
        (0.0, Latency::default())
    );
}

#[test]
fn message_events_about_unproduced_messages_are_malformed() {
    let ghost = MsgRef {
        id: 9,
        key: 0,
        seq: 3,
    };
    for e in [
        Event::Start {
            t: 1,
            msg: ghost,
            consumer: 0,
        },
        Event::Rollback {
            t: 1,
            msg: ghost,
            consumer: 0,
            reason: crate::history::FailReason::Outage,
        },
        Event::Redelivery {
            t: 1,
            msg: ghost,
            delay_us: 5,
            blocking: true,
        },
        Event::Forward {
            t: 1,
            msg: ghost,
            from: 0,
            to: 1,
        },
    ] {
        let mut c = Checkers::new(1, WorkloadKind::State);
        c.observe(&e);
        assert!(
            matches!(c.finish(1, 1), Err(SelfCheckError::Malformed(_))),
            "{e:?}"
        );
    }
}

// --- 15. Figures computed at the end or counted in aggregate (pinned by mutation testing) ------

#[test]
fn coverage_counts_source_outages_cache_collapses_reads_batch_runs_and_send_failures() {
    // The counters the fault-event test above leaves at 0: one source outage, one cache
    // collapse, two source reads, two batch runs of which one gave up, one failed send.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a);
    let t = MS;
    for e in [
        Event::Crash {
            t,
            node: Node::SourceDb,
        },
        Event::Crash {
            t,
            node: Node::Cache,
        },
        Event::SourceRead {
            t,
            key: 0,
            consumer: 0,
            seq: None,
        },
        Event::SourceRead {
            t,
            key: 0,
            consumer: 1,
            seq: Some(0),
        },
        Event::JobStart { t, consumer: 0 },
        // A job that drained the queue, then one that gave up: one given up.
        Event::JobEnd {
            t,
            consumer: 0,
            gave_up: false,
        },
        Event::JobStart { t, consumer: 0 },
        Event::JobEnd {
            t,
            consumer: 0,
            gave_up: true,
        },
        Event::SendFail {
            t,
            msg: a,
            producer: 0,
        },
    ] {
        h.ev(e);
    }
    h.apply(2 * MS, a).ack(2 * MS, a);
    assert_eq!(
        h.metrics(2 * MS).coverage,
        Coverage {
            source_outages: 1,
            cache_collapses: 1,
            source_reads: 2,
            batch_runs: 2,
            batch_runs_given_up: 1,
            send_failures: 1,
            ..Coverage::default()
        }
    );
}

#[test]
fn lease_expiries_failed_acks_and_commits_are_counted() {
    // Two leases end (the consumer is still working on the message), three acks come too late,
    // four commits: each counter counts its own events.
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).start(0, a, 0);
    let t = MS;
    for _ in 0..2 {
        h.ev(Event::Expire {
            t,
            msg: a,
            broker: 0,
            consumer: 0,
        });
    }
    for _ in 0..3 {
        h.ev(Event::AckFail {
            t,
            msg: a,
            consumer: 0,
        });
    }
    for records in 1..=4 {
        h.ev(Event::Commit {
            t,
            consumer: 0,
            records,
        });
    }
    h.apply(2 * MS, a).ack(2 * MS, a);
    assert_eq!(
        h.metrics(2 * MS).coverage,
        Coverage {
            lease_expiries: 2,
            failed_acks: 3,
            commits: 4,
            ..Coverage::default()
        }
    );
}

/// One key: 1 stale rejection, 2 discarded, 4 innocent dead letters, 8 innocent drops, plus one
/// poison dead letter and one poison drop (17 messages, every one settled at 0; the run ends at 1ms).
fn every_way_to_lose_a_command(kind: WorkloadKind) -> Metrics {
    let mut h = H::new(1, kind);
    let mut seq = 0u32;
    let mut next = |h: &mut H, poison: bool| {
        let x = m(seq as u64, 0, seq);
        seq += 1;
        h.produce_as(0, x, poison);
        x
    };
    let x = next(&mut h, false);
    h.reject(0, x).ack(0, x);
    for _ in 0..2 {
        let x = next(&mut h, false);
        h.discard(0, x);
    }
    for _ in 0..4 {
        let x = next(&mut h, false);
        h.dead_letter(0, x);
    }
    for _ in 0..8 {
        let x = next(&mut h, false);
        h.ev(Event::Drop {
            t: 0,
            msg: x,
            broker: 0,
        });
    }
    let x = next(&mut h, true);
    h.dead_letter(0, x);
    let x = next(&mut h, true);
    h.ev(Event::Drop {
        t: 0,
        msg: x,
        broker: 0,
    });
    h.metrics(MS)
}

#[test]
fn lost_commands_sum_rejected_lost_and_innocent_dead_lettered_or_dropped() {
    // A command that never took effect for any of these reasons is a lost command; a poison one
    // could never take effect, so it is not. 1 + 2 + 4 + 8 = 15.
    let x = every_way_to_lose_a_command(WorkloadKind::Command);
    assert_eq!(
        (
            x.stale_rejected,
            x.lost,
            x.innocent_dead_lettered,
            x.innocent_dropped
        ),
        (1, 2, 4, 8)
    );
    assert_eq!((x.poison_dead_lettered, x.poison_dropped), (1, 1));
    assert_eq!(x.lost_commands, 15);
}

#[test]
fn a_state_workload_has_no_lost_commands() {
    // The same history of states: a later state supersedes a lost one, so nothing is a lost
    // command (losses show in `lost` and the final state).
    let x = every_way_to_lose_a_command(WorkloadKind::State);
    assert_eq!(x.lost, 2);
    assert_eq!(x.lost_commands, 0);
}

#[test]
fn pending_at_the_end_behind_an_unresolved_predecessor_is_blocked_until_the_end() {
    // seq 0 (enqueued at 0) and seq 1 (enqueued at 2ms) are both still pending when the run ends
    // at 10ms: seq 1 has waited 8ms for its predecessor so far. seq 0 has no predecessor.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(2 * MS, b).enqueue(2 * MS, b);
    h.pending(10 * MS, a).pending(10 * MS, b);
    let x = h.metrics(10 * MS);
    assert_eq!(x.pending_at_end, 2);
    assert_eq!(x.max_block_ms, 8.0);
}

#[test]
fn pending_at_the_end_behind_a_settled_predecessor_was_blocked_until_it_settled() {
    // seq 0 is dead-lettered at 6ms (it leaves the window); seq 1, enqueued at 2ms, is still
    // pending at the end (10ms): it waited 4ms for its predecessor, then for something else.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(2 * MS, b).enqueue(2 * MS, b);
    h.dead_letter(6 * MS, a);
    h.pending(10 * MS, b);
    assert_eq!(h.metrics(10 * MS).max_block_ms, 4.0);
}

#[test]
fn pending_at_the_end_behind_a_resolved_unsettled_predecessor_was_blocked_until_it_resolved() {
    // seq 0 is rejected at 5ms but its ack never comes (resolved, still in the window); seq 1,
    // enqueued at 2ms, is pending at the end (10ms): it waited 3ms for its predecessor.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(2 * MS, b).enqueue(2 * MS, b);
    h.reject(5 * MS, a);
    h.pending(10 * MS, a).pending(10 * MS, b);
    assert_eq!(h.metrics(10 * MS).max_block_ms, 3.0);
}

#[test]
fn the_first_message_pending_at_the_end_is_not_blocked() {
    // seq 0 of its key waits for nothing, however long it stays pending (0 to 10ms).
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a).pending(10 * MS, a);
    assert_eq!(h.metrics(10 * MS).max_block_ms, 0.0);
}

#[test]
fn a_message_applied_ahead_of_its_pending_predecessor_is_not_blocked_at_the_end() {
    // seq 1 (enqueued at 2ms) overtakes seq 0 and is applied at 3ms; seq 0 is still pending at
    // 10ms. seq 1 stays in the window behind seq 0, but it waited for nothing.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(2 * MS, b).enqueue(2 * MS, b);
    h.apply(3 * MS, b).ack(3 * MS, b);
    h.pending(10 * MS, a);
    assert_eq!(h.metrics(10 * MS).max_block_ms, 0.0);
}

#[test]
fn a_message_never_enqueued_is_not_blocked_at_the_end() {
    // seq 1 never reached a broker (its producer kept it): it waited at no broker.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).enqueue(0, a);
    h.produce(2 * MS, b);
    h.pending(10 * MS, a).pending(10 * MS, b);
    assert_eq!(h.metrics(10 * MS).max_block_ms, 0.0);
}

#[test]
fn a_missing_first_command_is_a_mismatch() {
    // seq 0 is dead-lettered (innocent), seqs 1 and 2 are applied in order: the digest must
    // tell "1, 2" from "0, 1, 2" (seq 0 folds in like any other seq, not as a no-op).
    let (mut h, [a, b, c]) = three_commands(false);
    h.dead_letter(MS, a);
    h.apply(2 * MS, b).ack(2 * MS, b);
    h.apply(3 * MS, c).ack(3 * MS, c);
    let x = h.metrics(3 * MS);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!(x.lost_commands, 1);
}

#[test]
fn a_message_discarded_in_hand_leaves_the_window_when_its_consumer_crashes() {
    // seq 0 is discarded while consumer 2 has it in hand: it stays open (the consumer may still
    // apply it). When consumer 2 crashes, seq 0 is final (lost) and leaves the window at once,
    // with seq 1 (applied) behind it.
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.produce(0, a).produce(0, b);
    h.start(MS, a, 2).discard(2 * MS, a);
    h.apply(3 * MS, b).ack(3 * MS, b);
    assert_eq!(h.c.keys[0].window.len(), 2);
    h.ev(Event::Crash {
        t: 4 * MS,
        node: Node::Consumer(2),
    });
    assert!(h.c.keys[0].window.is_empty());
    let x = h.metrics(4 * MS);
    assert_eq!((x.lost, x.applied), (1, 1));
}

#[test]
fn the_last_two_of_five_commands_swapped_are_a_mismatch() {
    // Five commands applied once each, seqs 3 and 4 swapped at the end. The digest must not
    // confuse this order with the production order (an OR in place of the XOR would: this is
    // the smallest missing, doubled or swapped command that such a digest misses).
    let ms: Vec<MsgRef> = (0..5).map(|s| m(s as u64, 0, s)).collect();
    let mut h = H::command();
    for &x in &ms {
        h.produce(0, x);
    }
    for (i, s) in [0, 1, 2, 4, 3].into_iter().enumerate() {
        let t = (i as Time + 1) * MS;
        h.apply(t, ms[s]).ack(t, ms[s]);
    }
    let x = h.metrics(5 * MS);
    assert_eq!(x.final_state_mismatches, 1);
    assert_eq!((x.applied, x.duplicates), (5, 0));
}

// --- Messages never delivered (issue 41) ---------------------------------------------------------

/// A message pending, one lost and one innocent dead-letter are never delivered: counted in
/// `undelivered`, their latency censored at the run's end (so the percentiles cannot come from
/// the one fast delivery alone), and the rate is over the whole run. A poison dead-letter is the
/// queue doing its job: not undelivered.
#[test]
fn undelivered_messages_count_in_the_latencies_at_the_run_end() {
    let (a, b, c, d, p) = (m(0, 0, 0), m(1, 1, 0), m(2, 2, 0), m(3, 3, 0), m(4, 4, 0));
    let mut h = H::new(5, WorkloadKind::State);
    for x in [a, b, c, d] {
        h.produce(0, x).enqueue(0, x);
    }
    h.poison(0, p).enqueue(0, p);
    h.dispatch(MS, a).apply(MS, a).ack(MS, a);
    h.dead_letter(2 * MS, c)
        .discard(3 * MS, d)
        .dead_letter(4 * MS, p);
    h.pending(100 * MS, b);
    let x = h.metrics(100 * MS);
    assert_eq!(
        (
            x.applied,
            x.pending_at_end,
            x.lost,
            x.innocent_dead_lettered
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(x.undelivered, 3);
    // Samples: 1ms delivered, three at 100ms (the end): the median is the end, not 1ms.
    assert!(
        (99.0..=100.1).contains(&x.latency_ms.p50),
        "{:?}",
        x.latency_ms
    );
    assert!(
        (99.0..=100.1).contains(&x.latency_ms.p99),
        "{:?}",
        x.latency_ms
    );
    assert!(
        (99.0..=100.1).contains(&x.latency_ms.max),
        "{:?}",
        x.latency_ms
    );
    // One apply over the whole 100ms run, not over the 1ms of the last apply.
    assert_eq!(x.throughput_per_s, 10.0);
}

/// A command rejected as stale never took effect: undelivered; a state rejected as stale was
/// superseded by a newer one already written: not.
#[test]
fn a_rejected_command_is_undelivered_and_a_rejected_state_is_not() {
    for (kind, want) in [(WorkloadKind::Command, 1), (WorkloadKind::State, 0)] {
        let (a, b) = (m(0, 0, 0), m(1, 0, 1));
        let mut h = H::new(1, kind);
        h.produce(0, a).produce(0, b);
        h.dispatch(MS, b).apply(MS, b).ack(MS, b);
        h.dispatch(2 * MS, a).reject(2 * MS, a).ack(2 * MS, a);
        let x = h.metrics(10 * MS);
        assert_eq!(x.stale_rejected, 1);
        assert_eq!(x.undelivered, want, "{kind:?}");
    }
}

/// A dead-letter replayed and applied is delivered after all; one replayed and pending at the end
/// counts once, its latency from its production.
#[test]
fn a_replayed_dead_letter_is_undelivered_only_if_it_never_arrives() {
    let (a, b) = (m(0, 0, 0), m(1, 1, 0));
    let mut h = H::new(2, WorkloadKind::State);
    h.produce(0, a)
        .produce(0, b)
        .dead_letter(MS, a)
        .dead_letter(MS, b);
    h.replay(3 * MS, a, false).replay(3 * MS, b, false);
    h.apply(4 * MS, a).ack(4 * MS, a).pending(50 * MS, b);
    let x = h.metrics(50 * MS);
    assert_eq!((x.applied, x.pending_at_end, x.dead_lettered), (1, 1, 0));
    assert_eq!(x.undelivered, 1);
    assert!(
        (49.0..=50.1).contains(&x.latency_ms.max),
        "{:?}",
        x.latency_ms
    );
}

/// Everything delivered: the latencies and the rate are those of the deliveries alone.
#[test]
fn a_run_that_delivers_everything_is_not_censored() {
    let a = m(0, 0, 0);
    let mut h = H::state();
    h.produce(0, a)
        .enqueue(0, a)
        .dispatch(2 * MS, a)
        .apply(2 * MS, a)
        .ack(2 * MS, a);
    let x = h.metrics(100 * MS);
    assert_eq!(x.undelivered, 0);
    assert_eq!(x.latency_ms.max, 2.0);
    assert_eq!(x.throughput_per_s, 500.0);
}

// --- Fixed-size correlation groups (`[workload] group_size`) ------------------------------------

/// Groups of two over two keys: a group with a poison member dead-lettered and one with a member
/// still pending are incomplete; groups whose members were all applied are not, whatever order
/// they were applied in. Without groups the figure is absent.
#[test]
fn a_group_with_a_member_never_applied_is_incomplete() {
    let history = |grouped: Option<u32>| {
        let mut h = H::new(2, WorkloadKind::State);
        h.c = Checkers::new(2, WorkloadKind::State).grouped(grouped);
        // key 0: group 0 = seqs 0, 1 (applied out of order); group 1 = seqs 2 (poison), 3.
        let (a0, a1, a2, a3) = (m(0, 0, 0), m(1, 0, 1), m(2, 0, 2), m(3, 0, 3));
        // key 1: group 0 = seqs 0 (pending at the end), 1; group 1 = seqs 2, 3.
        let (b0, b1, b2, b3) = (m(4, 1, 0), m(5, 1, 1), m(6, 1, 2), m(7, 1, 3));
        h.produce(0, a0).produce(0, a1).poison(0, a2).produce(0, a3);
        for x in [b0, b1, b2, b3] {
            h.produce(0, x);
        }
        h.deliver_stored(MS, a1).deliver_stored(MS, a0);
        h.dead_letter(2 * MS, a2).deliver_stored(2 * MS, a3);
        h.deliver_stored(3 * MS, b1)
            .deliver_stored(3 * MS, b2)
            .deliver_stored(3 * MS, b3);
        h.pending(9 * MS, b0);
        h.metrics(10 * MS)
    };
    let x = history(Some(2));
    assert_eq!(x.incomplete_groups, Some(2), "{x:?}");
    assert_eq!((x.poison_dead_lettered, x.pending_at_end), (1, 1));
    // As groups of four, each key's single group misses a member.
    assert_eq!(history(Some(4)).incomplete_groups, Some(2));
    // As groups of one, each unapplied message is its own incomplete group.
    assert_eq!(history(Some(1)).incomplete_groups, Some(2));
    assert_eq!(history(None).incomplete_groups, None);
}

/// Every member applied: no incomplete group.
#[test]
fn a_group_whose_members_were_all_applied_is_complete() {
    let mut h = H::state();
    h.c = Checkers::new(1, WorkloadKind::State).grouped(Some(3));
    for i in 0..6 {
        h.deliver(i as Time * MS, m(i, 0, i as u32));
    }
    assert_eq!(h.metrics(10 * MS).incomplete_groups, Some(0));
}

/// A member dead-lettered, counted, then replayed from the dead-letter queue and applied: its
/// group completed after all.
#[test]
fn a_replayed_member_applied_completes_its_group() {
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::state();
    h.c = Checkers::new(1, WorkloadKind::State).grouped(Some(2));
    h.produce(0, a).produce(0, b).dead_letter(MS, a);
    h.deliver_stored(2 * MS, b);
    h.replay(3 * MS, a, false).deliver_stored(4 * MS, a);
    let x = h.metrics(10 * MS);
    assert_eq!((x.applied, x.dead_lettered), (2, 0));
    assert_eq!(x.incomplete_groups, Some(0));
}

impl H {
    /// Producer 0 gave `msg` up at `t` (its delivery timeout); `resent`: the application sent
    /// it again.
    fn give_up(&mut self, t: Time, msg: MsgRef, resent: bool) -> &mut Self {
        self.ev(Event::DeliveryTimeout {
            t,
            msg,
            producer: 0,
            resent,
        })
    }
}

/// A message its producer gave up before any broker stored it is `given_up`: final, neither
/// lost nor pending, undelivered (its latency censored at the end), a lost command; the next
/// message of its key settles past it. One the application sent again is still open (here
/// stored and applied late: an ordering violation), and one whose first attempt was stored is
/// the broker's (applied).
#[test]
fn a_message_given_up_unstored_is_given_up_and_nothing_else() {
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    let mut h = H::command();
    h.produce(0, a)
        .produce(MS, b)
        .give_up(2 * MS, a, false)
        .enqueue(3 * MS, b)
        .deliver_stored(3 * MS, b);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.lost, r.pending_at_end), (1, 0, 0));
    assert_eq!((r.applied, r.undelivered, r.lost_commands), (1, 1, 1));
    assert_eq!(r.coverage.delivery_timeouts, 1);
    // Censored at the end: produced at 0, counted at 10ms (3 significant digits).
    assert!((r.latency_ms.max - 10.0).abs() < 0.01, "{:?}", r.latency_ms);

    let mut h = H::state();
    h.produce(0, a)
        .produce(MS, b)
        .give_up(2 * MS, a, true)
        .enqueue(3 * MS, b)
        .deliver_stored(3 * MS, b)
        .enqueue(4 * MS, a)
        .deliver_stored(4 * MS, a);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.applied, r.ordering_violations), (0, 2, 1));
    assert_eq!(r.coverage.delivery_timeouts, 1);

    let mut h = H::state();
    h.produce(0, a)
        .enqueue(MS, a)
        .give_up(2 * MS, a, false)
        .deliver_stored(3 * MS, a);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.applied, r.undelivered), (0, 1, 0));
}

/// A copy a resend announced that its producer gives up before any broker stored it never
/// existed: the message goes as its stored instance does, whether that went before the copy was
/// given up (its fate waits for the copy) or after. Before, a dead letter or drop while the copy was announced
/// counted the copy as still at a broker, and the message was never accounted for.
#[test]
fn a_copy_given_up_unstored_leaves_the_message_to_its_stored_instance() {
    let (a, copy) = (m(0, 0, 0), m(1, 0, 0));
    let announced = |h: &mut H| {
        h.produce(0, a).enqueue(0, a).resend(MS, copy, 0, false);
    };
    // The stored message is dead-lettered, then the copy is given up.
    let mut h = H::state();
    announced(&mut h);
    h.dead_letter(2 * MS, a).give_up(3 * MS, copy, false);
    let r = h.metrics(4 * MS);
    assert_eq!(
        (r.dead_lettered, r.given_up, r.lost, r.pending_at_end),
        (1, 0, 0, 0)
    );
    // The other way round.
    let mut h = H::state();
    announced(&mut h);
    h.give_up(2 * MS, copy, false).dead_letter(3 * MS, a);
    let r = h.metrics(4 * MS);
    assert_eq!(
        (r.dead_lettered, r.given_up, r.lost, r.pending_at_end),
        (1, 0, 0, 0)
    );
    // A copy that was stored is at a broker: the first's going leaves the message open.
    let mut h = H::state();
    announced(&mut h);
    h.enqueue(MS, copy)
        .dead_letter(2 * MS, a)
        .deliver_stored(3 * MS, copy);
    let r = h.metrics(4 * MS);
    assert_eq!((r.applied, r.dead_lettered, r.lost), (1, 0, 0));
    // Two copies: the message waits for the last.
    let copy2 = m(2, 0, 0);
    let mut h = H::state();
    announced(&mut h);
    h.resend(MS, copy2, 0, false)
        .dead_letter(2 * MS, a)
        .give_up(3 * MS, copy, false);
    h.enqueue(4 * MS, copy2).pending(5 * MS, copy2);
    let r = h.metrics(5 * MS);
    assert_eq!((r.pending_at_end, r.dead_lettered, r.lost), (1, 0, 0));
    // Never stored: refused (a fenced zombie's write) while its copy was announced, and the
    // copy given up unstored: given up, not lost.
    let mut h = H::state();
    h.produce(0, a)
        .resend(MS, copy, 0, false)
        .discard(2 * MS, a)
        .give_up(3 * MS, copy, false);
    let r = h.metrics(4 * MS);
    assert_eq!((r.given_up, r.lost, r.pending_at_end), (1, 0, 0));
    // Never stored, copied (a producer's new instance), and the copy stored: the original then
    // given up is one instance fewer, and the copy's drop is the message's.
    let mut h = H::state();
    h.produce(0, a)
        .resend(MS, copy, 0, false)
        .enqueue(2 * MS, copy)
        .give_up(3 * MS, a, false)
        .dead_letter(4 * MS, copy);
    let r = h.metrics(5 * MS);
    assert_eq!(
        (r.dead_lettered, r.given_up, r.lost, r.pending_at_end),
        (1, 0, 0, 0)
    );
    // Never stored, and both the copy and the original given up: given up.
    let mut h = H::state();
    h.produce(0, a)
        .resend(MS, copy, 0, false)
        .give_up(2 * MS, copy, false)
        .give_up(3 * MS, a, false);
    let r = h.metrics(4 * MS);
    assert_eq!((r.given_up, r.lost, r.pending_at_end), (1, 0, 0));
}

/// A write its producer gave up on before its broker had it stored, stored after (a record at a
/// leader until its followers fetch it, its answer lost; a send a broker held): the broker's, as
/// any stored message, not given up, whether its record was still in its key's window (an
/// earlier message open) or had been counted given up. Before, the later store left it counted
/// given up and its pending at the end 'already settled' (the property tests: notifier,
/// replication, send_timeout, seed 293).
#[test]
fn a_message_stored_after_its_producer_gave_it_up_is_the_brokers() {
    let (a, b) = (m(0, 0, 0), m(1, 0, 1));
    // Counted given up (first of its key), then stored: pending at the end.
    let mut h = H::state();
    h.produce(0, a)
        .give_up(MS, a, false)
        .enqueue(2 * MS, a)
        .pending(9 * MS, a);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.pending_at_end, r.undelivered), (0, 1, 1));
    // The same, applied: applied, nothing undelivered.
    let mut h = H::state();
    h.c = Checkers::new(1, WorkloadKind::State).grouped(Some(1));
    h.produce(0, a)
        .give_up(MS, a, false)
        .enqueue(2 * MS, a)
        .deliver_stored(3 * MS, a);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.applied, r.undelivered), (0, 1, 0));
    assert_eq!(r.incomplete_groups, Some(0));
    // Still in its window behind an open message, then stored.
    let stored_behind_a = || {
        let mut h = H::state();
        h.produce(0, a)
            .produce(0, b)
            .enqueue(0, a)
            .give_up(MS, b, false)
            .enqueue(2 * MS, b);
        h
    };
    // Applied.
    let mut h = stored_behind_a();
    h.deliver_stored(3 * MS, a).deliver_stored(4 * MS, b);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.applied, r.undelivered), (0, 2, 0));
    // Left pending behind its open predecessor: open again, so blocked from its store to the
    // end (its give-up is not its resolution).
    let mut h = stored_behind_a();
    h.pending(9 * MS, a).pending(9 * MS, b);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.pending_at_end, r.max_block_ms), (0, 2, 8.0));
    // Given up and never stored: given up.
    let mut h = H::state();
    h.produce(0, a).produce(0, b).give_up(MS, a, false);
    h.enqueue(2 * MS, b).deliver_stored(3 * MS, b);
    let r = h.metrics(10 * MS);
    assert_eq!((r.given_up, r.applied), (1, 1));
}
