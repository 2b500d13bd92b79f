//! `rabbitmq_sac`: a RabbitMQ queue declared with `x-single-active-consumer = true`.
//!
//! What it models, from RabbitMQ's documentation (consumers.md#single-active-consumer, queues.md
//! #message-ordering: B1, B2 in docs/sources.md) and its quorum-queue state machine
//! (`deps/rabbit/src/rabbit_fifo.erl`: `activate_next_consumer`, `waiting_consumers`,
//! `handle_down`, `return_all`):
//!
//! - **One active consumer per queue.** The first consumer registered on the queue is the active
//!   one and gets every message; the others wait (`waiting_consumers`, in registration order for
//!   equal priorities).
//! - **Takeover.** When the active consumer is cancelled or its channel or connection goes (a
//!   closed socket at once; a silent host after the heartbeat timeout, 60s: the flavour's
//!   `failure_detection`), its unacknowledged messages go back to the queue and the next waiting
//!   consumer becomes active. A consumer that comes back registers again, at the end of the list.
//!   The requeued messages are the first the new consumer gets (a quorum queue's `returns` are
//!   served before its `messages`; a classic queue puts them back at their original position), so
//!   order is kept through the takeover.
//! - **What the queue type decides** is the engine's, through the flavour: `rabbitmq` (classic
//!   queue: a nacked message back at its original position, no delivery limit) or
//!   `rabbitmq_quorum` (returns first; `delivery-limit` 20, then dropped; with
//!   `max_redeliveries = -1` a nack goes to the back of the queue: a later message of the key
//!   overtakes it).
//!
//! - **Consumer priorities** (`x-priority` on `basic.consume`: `priorities`, one per consumer,
//!   default 0) decide by the queue type and release ([`PriorityRule`]):
//!   - a classic queue (`rabbitmq`) never displaces its active consumer; when it goes, the next is
//!     the first of the highest priority (`rabbit_amqqueue_process`:
//!     `new_single_active_consumer_after_channel_down` takes the head of
//!     `rabbit_queue_consumers`' priority queue);
//!   - a quorum queue before 4.0 ignores them: the next active is the first registered
//!     (`rabbit_fifo` v3's `activate_next_consumer` filters `waiting_consumers` in order);
//!   - a quorum queue from 4.0 ("SAC consumers honour consumer priorities", rabbitmq-server
//!     #10637) keeps `waiting_consumers` sorted by priority, then registration, and a waiting
//!     consumer of a higher priority than the active one takes over: at once when the active one
//!     has no unsettled message, else the active one is `quiescing` (it gets nothing new) until
//!     every message it holds is settled. Order is kept through the switch; the queue stalls
//!     while the old consumer finishes what it holds.
//!
//! This is the `single` strategy with no takeover delay of its own (RabbitMQ activates the next
//! consumer as soon as it learns the active one is gone): it calls [`Single`]. Not modelled:
//! `basic.get`, and a graceful `basic.cancel` (a consumer leaving here closes its channel).
//!
//! Weakness: one consumer is the queue's throughput cap. Strength: per-key order through crashes
//! of the active consumer, where competing consumers reorder.
//!
//! Parameters (`[strategy.rabbitmq_sac]`): `priorities` ([]); the queue type is the flavour.

use crate::single::{Single, SingleParams};
use serde::{Deserialize, Serialize};
use sim::scenario::Flavour;
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};
use sim::time::Time;

/// `[strategy.rabbitmq_sac]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitmqSacParams {
    /// `x-priority` of each consumer's subscription, by consumer index (missing: 0).
    #[serde(default)]
    pub priorities: Vec<i64>,
}

/// How a queue with single active consumer weighs its consumers' priorities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriorityRule {
    /// Ignored: the first registered waiting consumer is next (quorum queues before 4.0).
    Ignored,
    /// The highest waiting priority is next when the active consumer goes; an active consumer
    /// is never displaced (classic queues).
    AtTakeover,
    /// As [`PriorityRule::AtTakeover`], and a waiting consumer of a higher priority displaces
    /// the active one once it holds nothing unsettled (quorum queues from 4.0).
    Displaces,
}

impl PriorityRule {
    /// The rule of a queue of `flavour` on release line `version`.
    pub fn of(flavour: Flavour, version: Option<&str>) -> Self {
        if flavour != Flavour::RabbitmqQuorum {
            return PriorityRule::AtTakeover;
        }
        match version.map(sim::scenario::release) {
            Some(r) if r < (4, 0) => PriorityRule::Ignored,
            _ => PriorityRule::Displaces,
        }
    }
}

/// A queue with single active consumer.
#[derive(Debug)]
pub struct RabbitmqSac {
    single: Single,
    /// Priority by consumer id (bridges and consumers past the list: 0).
    priorities: Vec<i64>,
    /// The rule of each broker's queue; `None` where priorities cannot matter (all equal).
    rules: Vec<Option<PriorityRule>>,
    /// Room of a consumer that holds nothing unsettled (its prefetch).
    prefetch: u32,
}

impl RabbitmqSac {
    /// A new instance for `brokers` brokers (one queue each), without priorities.
    pub fn new(brokers: usize) -> Self {
        RabbitmqSac {
            single: Single::new(brokers, SingleParams::default()),
            priorities: Vec::new(),
            rules: vec![None; brokers],
            prefetch: 0,
        }
    }

    /// A new instance with consumer `i` subscribed at `priorities[i]`, each broker's queue
    /// following `rules[broker]`, consumers holding up to `prefetch` unsettled messages.
    pub fn with_priorities(priorities: Vec<i64>, rules: Vec<PriorityRule>, prefetch: u32) -> Self {
        let differ = priorities.iter().any(|&p| p != 0);
        RabbitmqSac {
            single: Single::new(rules.len(), SingleParams::default()),
            rules: rules
                .into_iter()
                .map(|r| (differ && r != PriorityRule::Ignored).then_some(r))
                .collect(),
            priorities,
            prefetch,
        }
    }

    fn priority(&self, consumer: u32) -> i64 {
        self.priorities.get(consumer as usize).copied().unwrap_or(0)
    }

    /// The first candidate of the highest priority, above `floor` if given.
    fn best(&self, ctx: &DispatchCtx, floor: Option<i64>) -> Option<usize> {
        let mut best: Option<(usize, i64)> = None;
        for (i, c) in ctx.consumers.iter().enumerate() {
            let p = self.priority(c.id);
            if floor.is_some_and(|f| p <= f) {
                continue;
            }
            if best.is_none_or(|(_, b)| p > b) {
                best = Some((i, p));
            }
        }
        best.map(|(i, _)| i)
    }
}

impl Handler for RabbitmqSac {}

impl crate::Named for RabbitmqSac {
    const NAME: &'static str = "rabbitmq_sac";
    const SUMMARY: &'static str = "RabbitMQ single active consumer: the first registered consumer gets the queue, the next takes over when it goes; run with flavour = \"rabbitmq\" or \"rabbitmq_quorum\"";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Rabbitmq;
    type Params = RabbitmqSacParams;
    const PARAMS: &'static [crate::ParamInfo] = &[crate::ParamInfo {
        name: "priorities",
        meaning: "each consumer's subscription priority, by consumer index (missing entries: 0): the highest waiting one takes over when the active consumer goes (classic queues, quorum queues from 4.0), and on a quorum queue from 4.0 displaces a lower active one once it has settled what it holds; quorum queues before 4.0 ignore them",
        unit: "list of integers, at most one per consumer",
        default: "[]",
        models: "the x-priority argument of basic.consume",
        hazard: None,
        range: crate::Range::Any,
        sizes: None,
    }];
    fn check(sc: &sim::Scenario, p: &RabbitmqSacParams) -> Vec<(&'static str, String)> {
        let count = sc.consumers.count as usize;
        if p.priorities.len() > count {
            return vec![(
                "priorities",
                format!(
                    "[strategy.rabbitmq_sac] priorities lists {} values for {count} consumer(s): at most one per consumer",
                    p.priorities.len()
                ),
            )];
        }
        let range = i64::from(i32::MIN)..=i64::from(i32::MAX);
        match p.priorities.iter().position(|v| !range.contains(v)) {
            Some(i) => vec![(
                "priorities",
                format!(
                    "[strategy.rabbitmq_sac] priorities[{i}] = {} is out of range: x-priority is a 32-bit signed integer",
                    p.priorities[i]
                ),
            )],
            None => Vec::new(),
        }
    }
    fn build(sc: &sim::Scenario, p: RabbitmqSacParams) -> Result<Self, String> {
        let flavour = sc.flavour.product();
        let rules = (0..sc.brokers.len())
            .map(|b| PriorityRule::of(flavour, sc.broker_version(b)))
            .collect();
        Ok(RabbitmqSac::with_priorities(
            p.priorities,
            rules,
            sc.consumers.prefetch,
        ))
    }
}

impl Strategy for RabbitmqSac {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        let Some(rule) = self.rules[ctx.broker as usize] else {
            return self.single.select(ctx, msg, ctl);
        };
        let b = ctx.broker;
        let owner = self.single.owner(b);
        let active =
            owner.and_then(|o| ctx.consumers.iter().position(|c| c.id == o).map(|i| (o, i)));
        let chosen = match active {
            // None active (or it is not among the candidates, e.g. paused): as `single`, except
            // that a queue with none active picks the highest priority.
            None if owner.is_some() => return self.single.select(ctx, msg, ctl),
            None => match self.best(ctx, None) {
                Some(i) => {
                    self.single.take_over(b, ctx.consumers[i].id, ctl);
                    i
                }
                None => return self.single.select(ctx, msg, ctl),
            },
            Some((o, i)) if rule == PriorityRule::Displaces => {
                match self.best(ctx, Some(self.priority(o))) {
                    // Quiescing: nothing new for it until it has settled what it holds.
                    Some(_) if ctx.consumers[i].free < self.prefetch => return Select::Stop,
                    Some(next) => {
                        self.single.take_over(b, ctx.consumers[next].id, ctl);
                        next
                    }
                    None => i,
                }
            }
            Some((_, i)) => i,
        };
        if ctx.consumers[chosen].free > 0 {
            Select::Consumer(chosen)
        } else {
            Select::Stop
        }
    }

    fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.single.on_attach(now, broker, consumer, ctl)
    }

    fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.single.on_detach(now, broker, consumer, ctl)
    }

    fn on_wake(&mut self, now: Time, token: u64, ctl: &mut Control) {
        self.single.on_wake(now, token, ctl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{load, run, select_at, view};
    use sim::scenario::{exponential, ScenarioBuilder};

    const SAC: &str = "rabbitmq_sac";

    #[test]
    fn the_first_registered_consumer_is_active_and_the_next_takes_over_at_once() {
        let mut s = RabbitmqSac::new(1);
        let ctl = &mut Control::default();
        for c in [0, 1, 2] {
            s.on_attach(0, 0, c, ctl);
        }
        let all = [(0, 5), (1, 5), (2, 5)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 0), ctl), Ok(0));
        // A full active consumer stops the queue: the waiting ones get nothing.
        assert_eq!(
            select_at(&mut s, 0, &[(0, 0), (1, 5), (2, 5)], &view(1, 1), ctl),
            Err(Select::Stop)
        );
        // It goes: the next registered (1) is active at once.
        s.on_detach(10, 0, 0, ctl);
        assert_eq!(
            select_at(&mut s, 10, &[(1, 5), (2, 5)], &view(1, 1), ctl),
            Ok(1)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
        // The old active consumer registers again, at the end: it waits.
        s.on_attach(20, 0, 0, ctl);
        assert_eq!(
            select_at(&mut s, 20, &[(1, 5), (2, 5), (0, 5)], &view(2, 2), ctl),
            Ok(1)
        );
    }

    /// RabbitMQ activates a consumer when it registers on a queue that has no active one
    /// (`rabbit_fifo` activates it at once): the takeover is recorded then, before any
    /// message is dispatched.
    #[test]
    fn a_consumer_registering_on_a_queue_without_an_active_one_is_active_at_once() {
        let mut s = RabbitmqSac::new(1);
        s.on_attach(0, 0, 0, &mut Control::default());
        s.on_detach(5, 0, 0, &mut Control::default());
        let ctl = &mut Control::default();
        s.on_attach(7, 0, 1, ctl);
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
    }

    /// No takeover delay: the active consumer going asks for a wake-up at that instant, and
    /// the wake-up redispatches the queue to the next consumer.
    #[test]
    fn the_active_consumer_going_wakes_the_queue_at_once_to_redispatch() {
        let mut s = RabbitmqSac::new(1);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_attach(0, 0, 1, ctl);
        s.on_detach(10, 0, 0, ctl);
        assert_eq!(ctl.wakes(), vec![(10, 0)]);
        assert!(!ctl.redispatch_requested());
        s.on_wake(10, 0, ctl);
        assert!(ctl.redispatch_requested());
    }

    #[test]
    fn the_priority_rule_is_the_queue_types_and_the_releases() {
        use sim::scenario::Flavour;
        assert_eq!(
            PriorityRule::of(Flavour::Rabbitmq, None),
            PriorityRule::AtTakeover
        );
        for v in ["3.8", "3.10", "3.13"] {
            assert_eq!(
                PriorityRule::of(Flavour::RabbitmqQuorum, Some(v)),
                PriorityRule::Ignored
            );
        }
        for v in [Some("4.0"), Some("4.3"), None] {
            assert_eq!(
                PriorityRule::of(Flavour::RabbitmqQuorum, v),
                PriorityRule::Displaces
            );
        }
    }

    /// Consumers 0, 1, 2 registered in that order, consumer 2 at priority 5, prefetch 5.
    fn prioritised(rule: PriorityRule) -> (RabbitmqSac, Control) {
        let mut s = RabbitmqSac::with_priorities(vec![0, 0, 5], vec![rule], 5);
        let mut ctl = Control::default();
        for c in [0, 1, 2] {
            s.on_attach(0, 0, c, &mut ctl);
        }
        (s, ctl)
    }

    /// A quorum queue from 4.0: the higher-priority consumer displaces the active one, but only
    /// once the active one has settled everything it holds (quiescing: nothing new meanwhile).
    #[test]
    fn a_higher_priority_consumer_displaces_the_active_one_once_it_holds_nothing() {
        let (s, ctl) = &mut prioritised(PriorityRule::Displaces);
        // Consumer 0 registered first and is active; it holds 2 unsettled messages.
        assert_eq!(
            select_at(s, 1, &[(0, 3), (1, 5), (2, 5)], &view(0, 0), ctl),
            Err(Select::Stop),
            "quiescing: nothing new for the active one, nothing yet for the next"
        );
        assert_eq!(ctl.reassignments(), vec![]);
        // It has settled them: the switch.
        assert_eq!(
            select_at(s, 2, &[(0, 5), (1, 5), (2, 5)], &view(0, 0), ctl),
            Ok(2)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 2)]);
        // A full active consumer of the highest priority stops the queue.
        assert_eq!(
            select_at(s, 3, &[(0, 5), (1, 5), (2, 0)], &view(1, 1), ctl),
            Err(Select::Stop)
        );
        // It goes: the first registered of the rest.
        s.on_detach(4, 0, 2, ctl);
        assert_eq!(select_at(s, 4, &[(0, 5), (1, 5)], &view(1, 1), ctl), Ok(0));
    }

    /// A classic queue never displaces its active consumer, but the next one is the first of the
    /// highest priority; a quorum queue before 4.0 takes the first registered.
    #[test]
    fn a_classic_queue_weighs_priorities_only_at_a_takeover_and_an_old_quorum_queue_never() {
        for (rule, next) in [(PriorityRule::AtTakeover, 2), (PriorityRule::Ignored, 1)] {
            let (s, ctl) = &mut prioritised(rule);
            assert_eq!(
                select_at(s, 1, &[(0, 5), (1, 5), (2, 5)], &view(0, 0), ctl),
                Ok(0),
                "{rule:?}: the first registered stays active"
            );
            s.on_detach(2, 0, 0, ctl);
            assert_eq!(
                select_at(s, 2, &[(1, 5), (2, 5)], &view(1, 1), ctl),
                Ok(next),
                "{rule:?}"
            );
            assert_eq!(ctl.reassignments(), vec![(0, next)]);
        }
    }

    /// Strength and its limit (quorum queue from 4.0 against 3.13 and a classic queue): the
    /// preferred consumer (`x-priority` 10) crashes and comes back; the standby that took over
    /// runs at half speed. From 4.0 the preferred one takes the queue back once the standby has
    /// settled what it holds, and the backlog clears; before, and on a classic queue, the slow
    /// standby keeps it and the backlog grows to the end. Order is kept either way.
    #[test]
    fn a_preferred_consumer_takes_the_queue_back_from_4_0() {
        let run_on = |flavour: &str, version: Option<&str>| {
            let mut b = rabbit(flavour, &[SAC], 150).consumers(3, exponential("4ms"));
            if let Some(v) = version {
                b = b.last("broker").with("version", v);
            }
            let b = b
                .section("strategy.rabbitmq_sac")
                .with("priorities", vec![10]);
            let b = b
                .fault_for("consumer_crash", "5s", "2s")
                .with("consumer", 0);
            let b = b
                .fault("slow_consumer")
                .with("consumer", 1)
                .with("at", "0s");
            run(&load(&b.with("factor", 2)), SAC, 1)
        };
        let back = run_on("rabbitmq_quorum", Some("4.0"));
        assert_eq!(back.coverage.reassignments, 2, "to the standby and back");
        assert!(back.latency_ms.p50 < 50.0, "{}", back.latency_ms.p50);
        for (flavour, version) in [("rabbitmq_quorum", Some("3.13")), ("rabbitmq", None)] {
            let kept = run_on(flavour, version);
            assert_eq!(kept.coverage.reassignments, 1, "{flavour} {version:?}");
            assert!(
                kept.latency_ms.p50 > 500.0,
                "{flavour}: {}",
                kept.latency_ms.p50
            );
            assert_eq!(kept.ordering_violations, 0);
        }
        assert_eq!((back.ordering_violations, back.applied), (0, 3000));
    }

    /// 3000 messages over 40 keys at `rate`/s to four consumers (prefetch 10, 10ms each), on
    /// `flavour`.
    fn rabbit(flavour: &str, strategies: &[&str], rate: u32) -> ScenarioBuilder {
        ScenarioBuilder::new(strategies)
            .flavour(flavour)
            .workload(3000, &format!("{rate}/s"), 40)
            .broker("rabbit")
            .consumers(4, exponential("10ms"))
            .prefetch(10)
    }

    /// Consumers crash at random, 6 a minute, each down for 2s.
    fn crashes(b: ScenarioBuilder) -> ScenarioBuilder {
        b.fault("consumer_crash")
            .with("rate", "6/min")
            .with("for", "2s")
    }

    /// Strength: the active consumer crashes (its socket closes; at 10s, and others at random);
    /// its unacked messages come back first and the next consumer takes over: order kept on
    /// both queue types, where competing consumers reorder.
    #[test]
    fn takeover_after_a_crash_keeps_order() {
        for flavour in ["rabbitmq", "rabbitmq_quorum"] {
            let b = crashes(rabbit(flavour, &[SAC, "competing"], 80));
            let sc = load(
                &b.fault_for("consumer_crash", "10s", "2s")
                    .with("consumer", 0),
            );
            for seed in 1..=3 {
                let m = run(&sc, "rabbitmq_sac", seed);
                assert!(m.coverage.consumer_crashes > 0);
                assert!(m.coverage.reassignments > 0, "{flavour} {seed}: takeovers");
                assert_eq!(m.ordering_violations, 0, "{flavour} seed {seed}");
                assert_eq!((m.applied, m.lost), (3000, 0));
                let c = run(&sc, "competing", seed);
                assert!(c.ordering_violations > 10, "competing reorders");
            }
        }
    }

    /// Weakness: one active consumer is the queue's throughput cap: at 400/s with 10ms per
    /// message it drains at ~100/s, whatever the other three do.
    #[test]
    fn one_active_consumer_is_the_throughput_cap() {
        let sc = load(&rabbit("rabbitmq", &[SAC, "competing"], 400));
        let s = run(&sc, "rabbitmq_sac", 1);
        let c = run(&sc, "competing", 1);
        assert!(s.throughput_per_s < 110.0, "{}", s.throughput_per_s);
        assert!(c.throughput_per_s > 300.0, "{}", c.throughput_per_s);
        assert!(s.latency_ms.p50 > 5_000.0, "{}", s.latency_ms.p50);
    }

    /// The database down from 10s to 13s.
    fn outage(b: ScenarioBuilder) -> sim::Scenario {
        load(&b.fault_for("db_outage", "10s", "3s"))
    }

    /// Weakness (quorum queue, 4.0-4.2, or 4.3 with a client that rejects): during a 3s
    /// database outage each failing message is requeued at once and redelivered in a hot loop;
    /// the 21st return exceeds the default delivery limit (20) and the message is dropped: a lost
    /// update. 4.3 does not count a `basic.nack` (the default client's verb): nothing is dropped.
    /// A classic queue has no limit: it loops until the database is back and loses nothing.
    /// Either way a nacked message comes back behind the messages its consumer had prefetched:
    /// with prefetch 10 a few reorder, with prefetch 1 none.
    #[test]
    fn the_quorum_delivery_limit_drops_messages_in_an_outage() {
        let quorum = rabbit("rabbitmq_quorum", &[SAC], 80);
        let reject = quorum.section("consumers").with("return_with", "reject");
        let q = run(&outage(reject), SAC, 1);
        assert!(q.dropped > 0, "{q:?}");
        assert_eq!(
            q.innocent_dropped, q.dropped,
            "no poison: every drop is a loss"
        );
        let nack = run(&outage(rabbit("rabbitmq_quorum", &[SAC], 80)), SAC, 1);
        assert_eq!((nack.dropped, nack.lost), (0, 0), "4.3 counts no nack");
        assert!(
            nack.redeliveries > 100,
            "the hot loop: {}",
            nack.redeliveries
        );
        let c = run(&outage(rabbit("rabbitmq", &[SAC], 80)), SAC, 1);
        assert_eq!((c.dropped, c.lost), (0, 0));
        assert_eq!(c.applied, 3000);
        assert!(c.redeliveries > 100, "the hot loop: {}", c.redeliveries);
        for flavour in ["rabbitmq", "rabbitmq_quorum"] {
            let sc = outage(rabbit(flavour, &[SAC], 80).prefetch(1));
            let m = run(&sc, "rabbitmq_sac", 1);
            assert_eq!(m.ordering_violations, 0, "{flavour}, prefetch 1");
        }
    }

    /// Weakness (quorum queue without a delivery limit, `x-delivery-limit = -1`): a nacked
    /// message is re-enqueued at the back, behind later messages of its key: far more reorders
    /// than with the limit ("for quorum queues set a delivery limit so requeued messages go to
    /// the front" [B1]).
    #[test]
    fn a_quorum_queue_without_a_limit_requeues_at_the_back_and_reorders() {
        let limited = run(&outage(rabbit("rabbitmq_quorum", &[SAC], 80)), SAC, 1);
        let unlimited = || {
            let b = rabbit("rabbitmq_quorum", &[SAC], 80);
            b.section("redelivery").with("max_redeliveries", -1)
        };
        let sc = outage(unlimited());
        let m = run(&sc, "rabbitmq_sac", 1);
        assert!(
            m.ordering_violations > 5 * limited.ordering_violations.max(1),
            "{} vs {}",
            m.ordering_violations,
            limited.ordering_violations
        );
        assert_eq!((m.dropped, m.lost), (0, 0));
        // A crash's returns still come back first: order kept.
        let sc = load(&crashes(unlimited()));
        let m = run(&sc, "rabbitmq_sac", 1);
        assert!(m.coverage.consumer_crashes > 0 && m.coverage.reassignments > 0);
        assert_eq!(m.ordering_violations, 0);
    }
}
