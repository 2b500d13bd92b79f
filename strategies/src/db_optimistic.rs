//! `db_optimistic`: competing consumers that keep order with the target database itself: a
//! `LAST_UPDATE` (JMS timestamp) column to reject stale messages, and a Hibernate `@Version`
//! column to catch concurrent writers ([Coherence+Hibernate], "Database Optimistic Lock based
//! Versioning"; see docs/sources.md).
//!
//! The real mechanism, from the post's sample (`PersonDaoImpl.saveOrUpdate`, a Person entity with
//! a `JMS_TIMESTAMP` column and `@Version OPT_VER`):
//! 1. read the row (`session.get`); no row: create it;
//! 2. `if (row.jmsTimestamp.compareTo(msg.jmsTimestamp) > 0) throw StaleObjectException`: the
//!    message is rejected only if the stored timestamp is **strictly** newer; an equal timestamp is
//!    accepted and overwrites (a tie between an older and a newer message lets the older win if it
//!    is processed last; a redelivered duplicate is applied again);
//! 3. copy the message into the row and `merge` + `flush`: Hibernate's `UPDATE .. WHERE OPT_VER =
//!    :read` fails with an optimistic-lock exception if another transaction wrote the row since the
//!    read; a new row whose key another transaction inserted meanwhile hits the primary key. Either
//!    way the transaction rolls back and the message is redelivered (a transacted listener; the
//!    post's test listener happens to swallow every `RuntimeException`, which would ack and lose the
//!    message instead: we model the transacted container, which is what the post argues for).
//!    A stale message is acked without writing ([`Outcome::Rejected`]): the post logs "Rejecting
//!    the Stale Record" and returns normally.
//!
//! The model: round-robin dispatch (as `competing`). `begin` reads the target row (with
//! `read_at = "begin"`, the default) and remembers it per consumer; the service time is the window
//! between that read and the flush. `handle` first runs the business processing
//! ([`HandlerCtx::process`]: a DB outage or a poison message fails and rolls back), then compares
//! the message with the row *as read*, then writes guarded by the version read. A target outage
//! when `begin` reads fails the delivery at once (the SELECT fails). With `read_at = "end"` the
//! read, the comparison and the write happen at the same instant (the post's sample reads just
//! before the flush, after its processing): no optimistic-lock failures can occur.
//!
//! What is compared (`compare`):
//! - `"timestamp"` (default, the post): the message's producer timestamp (JMS timestamp, truncated
//!   to `[producers] timestamp_resolution`, skewed by the producer's clock) against the stored
//!   `LAST_UPDATE`. The post's own caveat, "this assumption can be wrong", is what the model
//!   exposes: producers sharing keys with skewed clocks make newer messages look older (rejected:
//!   the newest state is lost), and coarse timestamps make ties that let older messages win.
//! - `"version"`: a producer-assigned per-key version carried in the message (its `seq`), stored
//!   with the row; same comparison (reject only if the stored version is strictly greater). Immune
//!   to clocks; needs a producer that numbers its updates.
//!
//! Either way a rejected message is not applied: fine for full-state messages (last writer wins),
//! fatal for commands/deltas (`kind = "command"`: a rejected delta is a lost update, the post's "in
//! cases where incremental updates and their order needs to be preserved ... the above mentioned
//! locking strategies will not work").
//!
//! Parameters (`[strategy.db_optimistic]`): `compare` (`"timestamp"` | `"version"`, default
//! `"timestamp"`), `read_at` (`"begin"` | `"end"`, default `"begin"`).

use crate::competing::Competing;
use serde::{Deserialize, Serialize};
use sim::history::FailReason;
use sim::strategy::{
    Begin, Control, DispatchCtx, Handler, HandlerCtx, MsgView, Outcome, Row, Select, Strategy,
};
use sim::time::Time;

/// What the stale check compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compare {
    /// The message's producer (JMS) timestamp against the stored LAST_UPDATE
    /// ([Coherence+Hibernate]).
    #[default]
    Timestamp,
    /// A producer-assigned per-key version (the message seq) against the stored one.
    Version,
}

/// When the handler reads the row it compares against (and whose version guards the write).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadAt {
    /// When processing begins: the service time separates the read from the write.
    #[default]
    Begin,
    /// Right before the write, after the processing (read, compare and write are one instant).
    End,
}

/// `[strategy.db_optimistic]` parameters.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DbOptimisticParams {
    /// What is compared to decide a message is stale (default `timestamp`).
    #[serde(default)]
    pub compare: Compare,
    /// When the row is read (default `begin`).
    #[serde(default)]
    pub read_at: ReadAt,
}

/// Round-robin dispatch; reject stale messages by stored timestamp/version; optimistic write.
#[derive(Debug)]
pub struct DbOptimistic {
    params: DbOptimisticParams,
    dispatch: Competing,
    /// Per consumer: the row read by `begin` for the delivery in hand.
    reads: Vec<Option<Row>>,
}

impl DbOptimistic {
    /// A new instance for `brokers` brokers and `consumers` consumers.
    pub fn new(brokers: usize, consumers: usize, params: DbOptimisticParams) -> Self {
        DbOptimistic {
            params,
            dispatch: Competing::new(brokers),
            reads: vec![None; consumers],
        }
    }

    /// Whether the message is older than the row (strictly: an equal value is accepted).
    #[inline]
    fn stale(&self, row: &Row, msg: &MsgView) -> bool {
        match (self.params.compare, row.seq()) {
            (_, None) => false,
            (Compare::Timestamp, Some(_)) => row.timestamp > msg.timestamp,
            (Compare::Version, Some(stored)) => stored > msg.seq,
        }
    }
}

impl Handler for DbOptimistic {
    fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Begin {
        if self.params.read_at == ReadAt::End {
            return Begin::Proceed;
        }
        if !ctx.target_up() {
            // The SELECT itself fails.
            return Begin::Fail(FailReason::Outage);
        }
        self.reads[ctx.consumer as usize] = Some(ctx.row(msg.key));
        Begin::Proceed
    }

    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Outcome {
        let now = ctx.row(msg.key);
        let read = match self.params.read_at {
            ReadAt::Begin => self.reads[ctx.consumer as usize].take().unwrap_or(now),
            ReadAt::End => now,
        };
        if let Err(r) = ctx.process() {
            return Outcome::Failed(r);
        }
        if self.stale(&read, msg) {
            return Outcome::Rejected;
        }
        if now.version != read.version {
            // UPDATE .. WHERE OPT_VER = :read matched no row (another consumer wrote it), or the
            // INSERT of a row absent at the read hit the primary key: roll back, redeliver.
            return Outcome::Failed(FailReason::Strategy);
        }
        Outcome::Applied { state_seq: msg.seq }
    }

    fn abandon(&mut self, _now: Time, consumer: u32, _msg: &MsgView, _ctl: &mut Control) {
        self.reads[consumer as usize] = None;
    }
}

impl crate::Named for DbOptimistic {
    const NAME: &'static str = "db_optimistic";
    const SUMMARY: &'static str =
        "round-robin; reject messages older than the stored timestamp/version, @Version-guarded write ([Coherence+Hibernate])";
    const GUARANTEE: &'static str = "stale_writes";
    const ROLE: crate::Role = crate::Role::Handler { rank: 0 };
    type Params = DbOptimisticParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "compare",
            meaning: "what decides that a message is stale: its producer timestamp or a producer-assigned per-key version, against the value stored in the row",
            unit: "\"timestamp\" | \"version\"",
            default: "timestamp",
            range: crate::Range::Any,
            sizes: None,
            models: "the LAST_UPDATE (JMS timestamp) column compared in PersonDaoImpl.saveOrUpdate, or a version column filled by the producer",
            hazard: None,
        },
        crate::ParamInfo {
            name: "read_at",
            meaning: "when the target row is read: when processing begins (the service time separates read and write) or right before the write",
            unit: "\"begin\" | \"end\"",
            default: "begin",
            range: crate::Range::Any,
            sizes: None,
            models: "where session.get runs in the transaction relative to the business processing, before Hibernate's @Version-guarded flush",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: DbOptimisticParams) -> Result<Self, String> {
        Ok(DbOptimistic::new(
            sc.brokers.len(),
            sc.consumers.count as usize,
            p,
        ))
    }
}

impl Strategy for DbOptimistic {
    #[inline]
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        self.dispatch.select(ctx, msg, ctl)
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::{run, simple_with};
    use sim::history::Event;
    use sim::{FaultPlan, Metrics, RunOptions, Scenario};

    const NB: &str = "[redelivery]\nmode = \"non_blocking\"\n";
    const OUTAGE: &str = "[[fault]]\nkind = \"db_outage\"\nat = \"3s\"\nfor = \"2s\"\n";
    const SKEW: &str =
        "[producers]\ncount = 4\nkey_ownership = \"shared\"\nclock_skew = \"50ms\"\n";
    const COARSE: &str = "[producers]\ntimestamp_resolution = \"1s\"\n";
    const BY_VERSION: &str = "[strategy.db_optimistic]\ncompare = \"version\"\n";

    /// 3000 messages at 400/s over 50 keys (`workload`: extra `[workload]` lines), one broker,
    /// 8 consumers with exponential service of mean 10ms, prefetch 1, plus `extra` TOML.
    fn sc(workload: &str, extra: &str) -> Scenario {
        simple_with(
            r#""db_optimistic", "competing""#,
            8,
            400,
            50,
            workload,
            extra,
        )
    }

    /// Runs db_optimistic and counts, from the history, rejections of a message newer than every
    /// message of its key applied so far (a newer message wrongly judged stale).
    fn run_counting(sc: &Scenario, seed: u64) -> (Metrics, u64) {
        let plan = FaultPlan::resolve(sc, seed);
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        let mut newest = vec![0u32; sc.workload.keys as usize];
        let mut wrongly_rejected = 0;
        let mut obs = |e: &Event| match *e {
            Event::Apply { msg, .. } => {
                let n = &mut newest[msg.key as usize];
                *n = (*n).max(msg.seq + 1);
            }
            Event::Reject { msg, .. } if msg.seq + 1 > newest[msg.key as usize] => {
                wrongly_rejected += 1
            }
            _ => {}
        };
        let m = crate::run_named("db_optimistic", sc, &plan, &opts, Some(&mut obs))
            .unwrap_or_else(|e| panic!("{e}"))
            .metrics
            .expect("applicable");
        (m, wrongly_rejected)
    }

    /// Strength ([Coherence+Hibernate]): with 8 competing consumers processing out of order,
    /// without faults and through a DB outage with non-blocking redelivery (rolled-back messages
    /// come back after newer ones), every key ends in its newest state: late messages are rejected
    /// as stale instead of overwriting. The baseline on the same scenarios ends keys in stale
    /// states.
    #[test]
    fn newest_state_wins_despite_out_of_order_processing() {
        let mut baseline_mismatches = 0;
        for extra in [NB.to_string(), format!("{NB}{OUTAGE}")] {
            let s = sc("", &extra);
            for seed in 1..4 {
                let m = run(&s, "db_optimistic", seed);
                assert_eq!(m.final_state_mismatches, 0, "seed {seed} {extra}");
                assert!(m.stale_rejected > 50, "seed {seed}: {}", m.stale_rejected);
                assert_eq!(m.applied + m.stale_rejected, 3000);
                assert_eq!(m.lost + m.dead_lettered + m.pending_at_end, 0);
                // Only 1ms timestamp ties can let an older message through (see the coarse test).
                assert!(m.ordering_violations <= 2, "{}", m.ordering_violations);
                if extra.contains("db_outage") {
                    assert_eq!(m.coverage.db_outages, 1);
                    assert!(m.coverage.rollbacks > 500, "{}", m.coverage.rollbacks);
                }
                let c = run(&s, "competing", seed);
                assert!(c.ordering_violations > 50, "{}", c.ordering_violations);
                baseline_mismatches += c.final_state_mismatches;
            }
        }
        assert!(baseline_mismatches > 0);
        // With microsecond timestamps there are no ties at all: not a single late apply.
        let s = sc(
            "",
            &format!("[producers]\ntimestamp_resolution = \"1us\"\n{NB}{OUTAGE}"),
        );
        for seed in 1..4 {
            let m = run(&s, "db_optimistic", seed);
            assert_eq!(m.ordering_violations, 0);
            assert_eq!(m.final_state_mismatches, 0);
        }
    }

    /// Two consumers holding messages of one key both read version v; the second to flush fails
    /// (`UPDATE .. WHERE OPT_VER = v` matches nothing, or the duplicate INSERT hits the key) and
    /// rolls back. Each conflict costs a redelivery delay: with ActiveMQ Classic's default blocking
    /// redelivery (1s, the session holds the message) consumers stall and latency soars. Reading
    /// just before the flush (`read_at = "end"`, the post's sample) leaves no window.
    #[test]
    fn optimistic_lock_conflicts_roll_back_and_cost_a_redelivery_delay() {
        let blocking = run(&sc("", ""), "db_optimistic", 1);
        let non_blocking = run(&sc("", NB), "db_optimistic", 1);
        for m in [&blocking, &non_blocking] {
            assert!(m.coverage.rollbacks > 50, "{}", m.coverage.rollbacks);
            assert_eq!(
                m.redeliveries, m.coverage.rollbacks,
                "every conflict is redelivered"
            );
            assert_eq!(m.final_state_mismatches, 0);
        }
        assert!(
            blocking.latency_ms.p99 > 1_000.0,
            "{}",
            blocking.latency_ms.p99
        );
        assert!(
            non_blocking.latency_ms.p99 < 100.0,
            "{}",
            non_blocking.latency_ms.p99
        );
        let at_end = run(
            &sc(
                "",
                &format!("{NB}[strategy.db_optimistic]\nread_at = \"end\"\n"),
            ),
            "db_optimistic",
            1,
        );
        assert_eq!(at_end.coverage.rollbacks, 0);
        assert!(at_end.stale_rejected > 0);
    }

    /// Weakness 1 ([Coherence+Hibernate]): "in cases where incremental updates and their order
    /// needs to be preserved ... the above mentioned locking strategies will not work". A delta
    /// that arrives after a newer one is rejected: the command is lost, and the key's state is
    /// wrong.
    #[test]
    fn rejected_deltas_are_lost_commands() {
        for seed in 1..4 {
            let m = run(&sc("kind = \"command\"", NB), "db_optimistic", seed);
            assert!(m.lost_commands > 50, "seed {seed}: {}", m.lost_commands);
            assert_eq!(m.lost_commands, m.stale_rejected);
            assert!(
                m.final_state_mismatches > 10,
                "{}",
                m.final_state_mismatches
            );
            assert_eq!(
                m.lost, 0,
                "nothing vanished: the commands were dropped on purpose"
            );
        }
    }

    /// Weakness 2 ([Coherence+Hibernate]: the JMS timestamp ordering "assumption can be wrong"):
    /// producers sharing keys with clocks 50ms apart. A newer message from a producer whose clock
    /// is behind looks older than the stored one and is rejected; keys end in an older state. A
    /// producer-assigned version (`compare = "version"`) does not depend on clocks.
    #[test]
    fn clock_skew_rejects_newer_messages_unless_versions_are_compared() {
        for seed in 1..5 {
            let (m, wrong) = run_counting(&sc("", &format!("{SKEW}{NB}")), seed);
            assert!(wrong > 0, "seed {seed}: newer messages rejected as stale");
            assert!(m.final_state_mismatches > 0, "seed {seed}");
            let (v, wrong) = run_counting(&sc("", &format!("{SKEW}{NB}{BY_VERSION}")), seed);
            assert_eq!(wrong, 0);
            assert_eq!(v.final_state_mismatches, 0);
            assert_eq!(v.ordering_violations, 0);
            assert!(v.stale_rejected > 0);
        }
    }

    /// Weakness 2b: coarse timestamps (1s) make ties. The post compares `stored.compareTo(msg) >
    /// 0`: an equal timestamp is accepted, so an older message of the same second processed after a
    /// newer one overwrites it (never the other way round: with one clock, no newer message is
    /// ever rejected). Ordering violations and stale final states follow; versions fix it.
    #[test]
    fn coarse_timestamp_ties_let_older_messages_win() {
        for seed in 1..4 {
            let (m, wrong) = run_counting(&sc("", &format!("{COARSE}{NB}")), seed);
            assert_eq!(wrong, 0, "ties are accepted, not rejected");
            assert!(m.ordering_violations > 10, "{}", m.ordering_violations);
            assert!(m.final_state_mismatches > 0, "seed {seed}");
            let v = run(
                &sc("", &format!("{COARSE}{NB}{BY_VERSION}")),
                "db_optimistic",
                seed,
            );
            assert_eq!(v.ordering_violations, 0);
            assert_eq!(v.final_state_mismatches, 0);
        }
    }

    // --- `stale` called directly.

    use super::{Compare, DbOptimistic, DbOptimisticParams};
    use sim::strategy::{MsgView, Row};

    fn with(compare: Compare) -> DbOptimistic {
        DbOptimistic::new(
            1,
            1,
            DbOptimisticParams {
                compare,
                ..Default::default()
            },
        )
    }

    fn msg(seq: u32, timestamp: u64) -> MsgView {
        MsgView {
            id: 0,
            key: 0,
            seq,
            timestamp,
            producer: 0,
            redeliveries: 0,
            group: None,
        }
    }

    /// A row holding the state of `seq`, written by a message stamped `timestamp`.
    fn row(seq: u32, timestamp: u64) -> Row {
        Row {
            state: seq + 1,
            timestamp,
            version: 1,
        }
    }

    #[test]
    fn a_message_is_stale_only_if_the_stored_timestamp_is_strictly_newer() {
        let s = with(Compare::Timestamp);
        assert!(s.stale(&row(5, 100), &msg(9, 99)), "an older timestamp");
        assert!(!s.stale(&row(5, 100), &msg(0, 100)), "a tie is accepted");
        assert!(!s.stale(&row(5, 100), &msg(0, 101)), "a newer timestamp");
        let none = Row {
            state: 0,
            ..row(0, 100)
        };
        assert!(
            !s.stale(&none, &msg(0, 99)),
            "no row: nothing to be older than"
        );
    }

    #[test]
    fn a_message_is_stale_only_if_the_stored_version_is_strictly_greater() {
        let s = with(Compare::Version);
        assert!(
            s.stale(&row(5, 0), &msg(4, 100)),
            "older, whatever its timestamp"
        );
        assert!(
            !s.stale(&row(5, 100), &msg(5, 0)),
            "the same version (a redelivered duplicate) is written again"
        );
        assert!(!s.stale(&row(5, 100), &msg(6, 0)), "a newer version");
    }
}
