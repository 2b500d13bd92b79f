//! `notifier`: the message is only a notification ("RECORD_ID changed"); the consumer goes back to
//! the source database for the current record and writes that ([Coherence+Hibernate], "use the
//! message queue simply as a notifier with the consumers going back to the source system to get the
//! most current record"; see docs/sources.md).
//!
//! The model: round-robin dispatch (as `competing`). `begin` reads the key's current row from the
//! source database ([`HandlerCtx::source`], recorded in the history with [`Control::source_read`]);
//! a source outage fails the delivery at once (rolls back, redelivered; dead-lettered after
//! `max_redeliveries`). The read takes `read_latency` (added after the service time, so the
//! read-to-write window is service + `read_latency`). `handle` then runs the business processing
//! ([`HandlerCtx::process`]: a target outage or a poison message fails and rolls back) and writes
//! the state it read. The source commits a state before its notification is sent, so a read always
//! finds at least the notified state; a missing source row (a deleted record; cannot happen in the
//! simulated world) leaves nothing to write: the notification is acked without a write
//! ([`Outcome::Rejected`]).
//!
//! Order and duplicates of notifications do not matter (every read returns the newest state), but
//! the post's "regardless of the messaging order, the most recent payload for a record is selected"
//! is only true of the read, not of the write: two consumers that read at t1 < t2 may write in the
//! opposite order, leaving the older state in the target (a read-then-write race; research section
//! 2, "(inferred)"). `conditional_write = true` closes it: the write is `UPDATE .. WHERE
//! stored_version < :read_version`, and a write whose state is not newer than the row's changes
//! nothing (the notification is acked as [`Outcome::Rejected`]).
//!
//! What the checkers' numbers mean here: an apply is recorded for the *notification* (its `seq`)
//! with the *state read* (`state_seq`, usually newer than the notification's seq). So
//! - `final_state_mismatches` (graded by `state_seq`) is the correctness measure;
//! - `ordering_violations` (graded by message seq) counts notifications handled out of order, which
//!   is harmless as such: an old notification handled late writes the newest state it reads;
//! - a stale write (a state older than the row's) is not counted by any checker unless it is the
//!   last write of its key; the tests count them from the history (Apply events whose `state_seq`
//!   goes down);
//! - `stale_rejected` counts conditional writes that changed nothing (not lost data: the state
//!   they carried, or a newer one, is already in the target);
//! - `coverage.source_reads` is the load put on the source: one SELECT per delivery processed.
//!
//! Poison: the hidden flag still makes processing fail, but the source already holds the poison
//! message's state, so another notification of the key may read and write it; the checkers expect
//! the final state of the last non-poison message, so poison workloads are not meaningful for
//! this strategy.
//!
//! Parameters (`[strategy.notifier]`): `read_latency` (default "2ms", a SELECT by primary key over
//! a LAN), `conditional_write` (default false: a plain UPDATE, as in the post), `source_access`
//! (default true; false: the consumers cannot reach the source system, and the strategy is not
//! applicable, the post's "it however crumbles when the consuming end ... does not have access to
//! the source system").

use crate::competing::Competing;
use serde::{Deserialize, Serialize};
use sim::strategy::{
    Begin, Control, DispatchCtx, Handler, HandlerCtx, MsgView, Outcome, Select, Strategy,
};
use sim::time::{Dur, Time};

fn default_read_latency() -> Dur {
    Dur::from_millis(2)
}

fn default_true() -> bool {
    true
}

/// `[strategy.notifier]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NotifierParams {
    /// Time the source read takes (default "2ms").
    #[serde(default = "default_read_latency")]
    pub read_latency: Dur,
    /// Write only a state newer than the stored one (default false).
    #[serde(default)]
    pub conditional_write: bool,
    /// Whether the consumers can read the source database at all (default true).
    #[serde(default = "default_true")]
    pub source_access: bool,
}

impl Default for NotifierParams {
    fn default() -> Self {
        NotifierParams {
            read_latency: default_read_latency(),
            conditional_write: false,
            source_access: true,
        }
    }
}

/// What `begin` read for the delivery in hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    /// Nothing read (idle, or the read failed).
    None,
    /// The source's state seq, or None if it had no row.
    Read(Option<u32>),
}

/// Round-robin dispatch; the handler reads the current state from the source and writes it.
#[derive(Debug)]
pub struct Notifier {
    params: NotifierParams,
    dispatch: Competing,
    /// Per consumer: the source read for the delivery in hand.
    reads: Vec<Read>,
}

impl Notifier {
    /// A new instance for `brokers` brokers and `consumers` consumers.
    pub fn new(brokers: usize, consumers: usize, params: NotifierParams) -> Self {
        Notifier {
            params,
            dispatch: Competing::new(brokers),
            reads: vec![Read::None; consumers],
        }
    }
}

impl Handler for Notifier {
    fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Begin {
        match ctx.source(msg.key) {
            Ok(row) => {
                ctl.source_read(msg.key, ctx.consumer, row.seq());
                self.reads[ctx.consumer as usize] = Read::Read(row.seq());
                Begin::Proceed
            }
            Err(r) => {
                self.reads[ctx.consumer as usize] = Read::None;
                Begin::Fail(r)
            }
        }
    }

    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Outcome {
        let latency = self.params.read_latency.micros();
        if ctx.step == 0 && latency > 0 {
            return Outcome::After {
                delay: latency,
                step: 1,
            };
        }
        let read = std::mem::replace(&mut self.reads[ctx.consumer as usize], Read::None);
        if let Err(r) = ctx.process() {
            return Outcome::Failed(r);
        }
        let state = match read {
            Read::Read(Some(s)) => s,
            // No source row (or, defensively, no read): nothing to write.
            Read::Read(None) | Read::None => return Outcome::Rejected,
        };
        if self.params.conditional_write && ctx.row(msg.key).seq().is_some_and(|s| s >= state) {
            return Outcome::Rejected;
        }
        Outcome::Applied { state_seq: state }
    }

    fn abandon(&mut self, _now: Time, consumer: u32, _msg: &MsgView, _ctl: &mut Control) {
        self.reads[consumer as usize] = Read::None;
    }
}

impl crate::Named for Notifier {
    const NAME: &'static str = "notifier";
    const SUMMARY: &'static str =
        "round-robin; message = key only, read the current state from the source and write it ([Coherence+Hibernate])";
    const GUARANTEE: &'static str = "stale_writes";
    const ROLE: crate::Role = crate::Role::Handler { rank: 1 };
    type Params = NotifierParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "read_latency",
            meaning: "time the read of the current state from the source system takes",
            unit: "duration",
            default: "2ms",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "a SELECT by primary key on the source database over a LAN",
            hazard: None,
        },
        crate::ParamInfo {
            name: "conditional_write",
            meaning: "write only a state newer than the stored one; false is a plain UPDATE",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models:
                "UPDATE .. WHERE stored_version < :read_version instead of the post's plain UPDATE",
            hazard: Some(crate::Hazard {
                when: "false with more than one consumer",
                applies: |v, sc| v == "false" && sc.consumers.count > 1,
                effect: "two handlers of one key race between read and write: the slower writes the older state over the newer (stale_writes without any fault)",
            }),
        },
        crate::ParamInfo {
            name: "source_access",
            meaning:
                "whether the consumers can reach the source system at all (false: not applicable)",
            unit: "bool",
            default: "true",
            range: crate::Range::Any,
            sizes: None,
            models: "network/security access from the consuming side to the source database",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: NotifierParams) -> Result<Self, String> {
        if !p.source_access {
            return Err("the consumers cannot read the source database \
                        ([strategy.notifier] source_access = false): a notification carries only \
                        the key, so there is no state to write"
                .to_string());
        }
        Ok(Notifier::new(
            sc.brokers.len(),
            sc.consumers.count as usize,
            p,
        ))
    }
}

impl Strategy for Notifier {
    #[inline]
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        self.dispatch.select(ctx, msg, ctl)
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::simple_with;
    use sim::history::Event;
    use sim::{FaultPlan, Metrics, RunOptions, Scenario};

    /// 8 consumers (exponential service, mean 10ms), prefetch 1, `keys` keys, `rate`/s, plus `extra`.
    fn sc(keys: u32, rate: u32, extra: &str) -> Scenario {
        simple_with(r#""notifier""#, 8, rate, keys, "", extra)
    }

    /// Counts from the history: deliveries started.
    #[derive(Default, Debug)]
    struct Seen {
        starts: u64,
    }

    fn run_seen(sc: &Scenario, seed: u64) -> (Metrics, Seen) {
        let plan = FaultPlan::resolve(sc, seed);
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        let mut seen = Seen::default();
        let mut obs = |e: &Event| {
            if let Event::Start { .. } = e {
                seen.starts += 1;
            }
        };
        let m = crate::run_named("notifier", sc, &plan, &opts, Some(&mut obs))
            .unwrap()
            .metrics
            .expect("applicable");
        (m, seen)
    }

    const NB: &str = "[redelivery]\nmode = \"non_blocking\"\n";
    const DB_OUTAGE: &str = "[[fault]]\nkind = \"db_outage\"\nat = \"3s\"\nfor = \"2s\"\n";
    const COND: &str = "[strategy.notifier]\nconditional_write = true\n";

    /// Strength: notifications may be handled in any order, duplicated, rolled back and
    /// redelivered late (DB outage, non-blocking redelivery): with a conditional write every key
    /// ends in its newest state and no write ever goes back to an older state. Each delivery
    /// processed costs one read of the source.
    #[test]
    fn conditional_write_keeps_the_newest_state_through_a_db_outage() {
        let s = sc(50, 400, &format!("{NB}{DB_OUTAGE}{COND}"));
        for seed in 1..4 {
            let (m, seen) = run_seen(&s, seed);
            assert_eq!(m.coverage.db_outages, 1);
            assert!(m.coverage.rollbacks > 500, "{}", m.coverage.rollbacks);
            assert!(
                m.ordering_violations > 0,
                "notifications were handled out of order"
            );
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}");
            assert_eq!(m.stale_writes, 0);
            assert_eq!(m.lost + m.dead_lettered + m.pending_at_end, 0);
            // One source read per delivery processed: applied, no-op (rejected) or rolled back.
            assert_eq!(m.coverage.source_reads, seen.starts);
            assert_eq!(
                m.coverage.source_reads,
                m.applied + m.duplicates + m.stale_rejected + m.coverage.rollbacks
            );
            assert!(
                m.coverage.source_reads > 3_500,
                "{}",
                m.coverage.source_reads
            );
        }
    }

    /// Weakness 1 ([Coherence+Hibernate]): "it however crumbles when the consuming end ... does not
    /// have access to the source system": not applicable, with the reason.
    #[test]
    fn not_applicable_without_source_access() {
        let s = sc(50, 400, "[strategy.notifier]\nsource_access = false\n");
        let plan = FaultPlan::resolve(&s, 1);
        let opts = RunOptions {
            seed: 1,
            max_events: None,
            max_sim_time: None,
        };
        let r = crate::run_named("notifier", &s, &plan, &opts, None).unwrap();
        assert_eq!(r.status, sim::Status::NotApplicable);
        assert!(r.metrics.is_none());
        let reason = r.reason.expect("a reason");
        assert!(reason.contains("source_access = false"), "{reason}");
    }

    /// Weakness 2 (tight coupling): the consumers depend on the source being up. A 20s source
    /// outage fails every read: with blocking redelivery (defaults: 1s, 6 redeliveries) each
    /// consumer retries the message in hand until it is dead-lettered, then the next, and latency
    /// grows to the outage's length; with non-blocking redelivery everything produced during the
    /// outage cycles through the retries and ends in the DLQ, so no key reaches its newest state.
    /// An outage that never heals with unlimited redelivery leaves the messages pending.
    #[test]
    fn source_outage_rolls_back_dead_letters_or_stalls() {
        let outage = "[[fault]]\nkind = \"source_outage\"\nat = \"3s\"\nfor = \"20s\"\n";
        let (m, seen) = run_seen(&sc(50, 400, outage), 1);
        assert_eq!(m.coverage.source_outages, 1);
        assert!(m.coverage.rollbacks > 100, "{}", m.coverage.rollbacks);
        assert!(m.innocent_dead_lettered > 0, "{}", m.innocent_dead_lettered);
        assert!(m.latency_ms.p99 > 15_000.0, "{}", m.latency_ms.p99);
        assert_eq!(m.coverage.source_reads + m.coverage.rollbacks, seen.starts);
        let (m, _) = run_seen(&sc(50, 400, &format!("{NB}{outage}")), 1);
        assert!(m.dead_lettered > 1_000, "{}", m.dead_lettered);
        assert_eq!(
            m.final_state_mismatches, 50,
            "every key's newest state is lost"
        );
        let forever = "[redelivery]\nmax_redeliveries = -1\n[run]\ndrain_timeout = \"10s\"\n\
                       [[fault]]\nkind = \"source_outage\"\nat = \"3s\"\n";
        let (m, _) = run_seen(&sc(50, 400, forever), 1);
        assert!(m.pending_at_end > 1_000, "{}", m.pending_at_end);
        assert_eq!(m.applied + m.pending_at_end, 3000);
        assert_eq!(m.ended_by, sim::summary::EndReason::DrainTimeout);
    }

    /// Weakness 3 (research section 2, inferred): a plain write of what was read races. Consumer
    /// A reads state s, B reads the newer s + 1 and writes it, then A (slower) writes s over it.
    /// Under concurrency on a key this happens in every run, and when it hits a key's last
    /// messages the key stays stale; a conditional write removes both.
    #[test]
    fn plain_writes_race_and_leave_older_states() {
        let mut mismatches = 0;
        for seed in 1..6 {
            let (m, _) = run_seen(&sc(50, 400, ""), seed);
            assert!(m.stale_writes > 50, "seed {seed}: {}", m.stale_writes);
            mismatches += m.final_state_mismatches;
            let (m, _) = run_seen(&sc(50, 400, COND), seed);
            assert_eq!(m.stale_writes, 0);
            assert_eq!(m.final_state_mismatches, 0);
            assert!(m.stale_rejected > 0, "conditional no-op writes");
        }
        assert!(mismatches >= 3, "{mismatches}");
        // The effective parameters warn about the plain write (and not about the conditional one).
        let w = crate::test_util::warning;
        let plain = crate::test_util::summary(&sc(50, 400, ""), "notifier", 1);
        assert!(w(&plain, "conditional_write").is_some());
        let cond = crate::test_util::summary(&sc(50, 400, COND), "notifier", 1);
        assert!(w(&cond, "conditional_write").is_none());
        // Fewer, hotter keys: far more races.
        let (m, _) = run_seen(&sc(5, 600, ""), 1);
        assert!(m.stale_writes > 500, "{}", m.stale_writes);
    }

    /// `read_latency` widens the read-to-write window (it is added to the service time).
    #[test]
    fn read_latency_adds_to_processing() {
        let fast = run_seen(
            &sc(50, 100, "[strategy.notifier]\nread_latency = \"0s\"\n"),
            1,
        )
        .0;
        let slow = run_seen(
            &sc(50, 100, "[strategy.notifier]\nread_latency = \"50ms\"\n"),
            1,
        )
        .0;
        assert!(
            slow.latency_ms.p50 > fast.latency_ms.p50 + 45.0,
            "{} vs {}",
            slow.latency_ms.p50,
            fast.latency_ms.p50
        );
    }

    /// The defaults: a 2ms source read, a plain write, source access. The plain write's race
    /// warning applies only with more than one consumer (one consumer cannot race itself).
    #[test]
    fn defaults_and_the_race_warning() {
        let eff = crate::effective_params("notifier", &sc(50, 400, ""));
        let shown: Vec<(&str, &str)> = eff
            .0
            .iter()
            .map(|p| (p.name.as_str(), p.value.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("read_latency", "2ms"),
                ("conditional_write", "false"),
                ("source_access", "true")
            ]
        );
        let two = simple_with(r#""notifier""#, 2, 100, 50, "", "");
        let one = simple_with(r#""notifier""#, 1, 100, 50, "", "");
        let w = crate::test_util::warning;
        assert!(w(
            &crate::test_util::summary(&two, "notifier", 1),
            "conditional_write"
        )
        .is_some());
        assert!(w(
            &crate::test_util::summary(&one, "notifier", 1),
            "conditional_write"
        )
        .is_none());
    }

    /// The handler alone: the write follows the read after `read_latency` (a continuation
    /// step), or in the same call when there is none.
    #[test]
    fn the_write_follows_the_read_after_the_read_latency() {
        use super::{Notifier, NotifierParams};
        use sim::strategy::{Begin, Control, Handler, HandlerCtx, Outcome, Row};
        use sim::time::{Dur, MILLI};
        let source = [Row {
            state: 3,
            timestamp: 0,
            version: 1,
        }];
        let m = crate::test_util::view(5, 0);
        for (latency, first) in [
            (Dur::ZERO, Outcome::Applied { state_seq: 2 }),
            (
                Dur::from_millis(2),
                Outcome::After {
                    delay: 2 * MILLI,
                    step: 1,
                },
            ),
        ] {
            let p = NotifierParams {
                read_latency: latency,
                ..NotifierParams::default()
            };
            let mut n = Notifier::new(1, 1, p);
            let ctl = &mut Control::default();
            let ctx = HandlerCtx::for_tests(0, 0, 0, &source);
            assert_eq!(n.begin(&ctx, &m, ctl), Begin::Proceed);
            assert_eq!(n.handle(&ctx, &m, ctl), first, "{latency:?}");
            if latency > Dur::ZERO {
                let ctx = HandlerCtx::for_tests(2 * MILLI, 0, 1, &source);
                assert_eq!(n.handle(&ctx, &m, ctl), Outcome::Applied { state_seq: 2 });
            }
        }
    }
}
