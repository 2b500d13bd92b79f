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
//! This is the `single` strategy with no takeover delay of its own (RabbitMQ activates the next
//! consumer as soon as it learns the active one is gone): it calls [`Single`]. Not modelled:
//! consumer priorities (`x-priority`, which let a higher-priority consumer take over an active
//! one), `basic.get`, and a graceful `basic.cancel` (a consumer leaving here closes its channel).
//!
//! Weakness: one consumer is the queue's throughput cap. Strength: per-key order through crashes
//! of the active consumer, where competing consumers reorder.
//!
//! Parameters: none (`[strategy.rabbitmq_sac]` must be empty); the queue type is the flavour.

use crate::single::{Single, SingleParams};
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};
use sim::time::Time;

/// A queue with single active consumer.
#[derive(Debug)]
pub struct RabbitmqSac(Single);

impl RabbitmqSac {
    /// A new instance for `brokers` brokers (one queue each).
    pub fn new(brokers: usize) -> Self {
        RabbitmqSac(Single::new(brokers, SingleParams::default()))
    }
}

impl Handler for RabbitmqSac {}

impl crate::Named for RabbitmqSac {
    const NAME: &'static str = "rabbitmq_sac";
    const SUMMARY: &'static str = "RabbitMQ single active consumer: the first registered consumer gets the queue, the next takes over when it goes; run with flavour = \"rabbitmq\" or \"rabbitmq_quorum\"";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Rabbitmq;
    type Params = crate::NoParams;
    const PARAMS: &'static [crate::ParamInfo] = &[];
    fn build(sc: &sim::Scenario, _p: crate::NoParams) -> Result<Self, String> {
        Ok(RabbitmqSac::new(sc.brokers.len()))
    }
}

impl Strategy for RabbitmqSac {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        self.0.select(ctx, msg, ctl)
    }

    fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.0.on_attach(now, broker, consumer, ctl)
    }

    fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.0.on_detach(now, broker, consumer, ctl)
    }

    fn on_wake(&mut self, now: Time, token: u64, ctl: &mut Control) {
        self.0.on_wake(now, token, ctl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, scenario, select_at, view};

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

    /// 3000 messages over 40 keys at `rate`/s to four consumers (prefetch 10, 10ms each), on
    /// `flavour`.
    fn rabbit(flavour: &str, strategies: &str, rate: u32, extra: &str) -> sim::Scenario {
        scenario(&format!(
            r#"
flavour = "{flavour}"
strategies = [{strategies}]
[workload]
messages = 3000
rate = "{rate}/s"
keys = 40
[[broker]]
name = "rabbit"
[consumers]
count = 4
prefetch = 10
service = {{ dist = "exponential", mean = "10ms" }}
{extra}
"#
        ))
    }

    const CRASHES: &str = r#"
[[fault]]
kind = "consumer_crash"
rate = "6/min"
for = "2s"
"#;

    /// Strength: the active consumer crashes (its socket closes; at 10s, and others at random);
    /// its unacked messages come back first and the next consumer takes over: order kept on
    /// both queue types, where competing consumers reorder.
    #[test]
    fn takeover_after_a_crash_keeps_order() {
        let faults = format!(
            "{CRASHES}[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"10s\"\nfor = \"2s\"\n"
        );
        for flavour in ["rabbitmq", "rabbitmq_quorum"] {
            let sc = rabbit(flavour, r#""rabbitmq_sac", "competing""#, 80, &faults);
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
        let sc = rabbit("rabbitmq", r#""rabbitmq_sac", "competing""#, 400, "");
        let s = run(&sc, "rabbitmq_sac", 1);
        let c = run(&sc, "competing", 1);
        assert!(s.throughput_per_s < 110.0, "{}", s.throughput_per_s);
        assert!(c.throughput_per_s > 300.0, "{}", c.throughput_per_s);
        assert!(s.latency_ms.p50 > 5_000.0, "{}", s.latency_ms.p50);
    }

    const OUTAGE: &str = r#"
[[fault]]
kind = "db_outage"
at = "10s"
for = "3s"
"#;

    /// Weakness (quorum queue, 4.0-4.2, or 4.3 with a client that rejects): during a 3s
    /// database outage each failing message is requeued at once and redelivered in a hot loop;
    /// the 21st return exceeds the default delivery limit (20) and the message is dropped: a lost
    /// update. 4.3 does not count a `basic.nack` (the default client's verb): nothing is dropped.
    /// A classic queue has no limit: it loops until the database is back and loses nothing.
    /// Either way a nacked message comes back behind the messages its consumer had prefetched:
    /// with prefetch 10 a few reorder, with prefetch 1 none.
    #[test]
    fn the_quorum_delivery_limit_drops_messages_in_an_outage() {
        let reject = format!("return_with = \"reject\"\n{OUTAGE}");
        let q = run(
            &rabbit("rabbitmq_quorum", r#""rabbitmq_sac""#, 80, &reject),
            "rabbitmq_sac",
            1,
        );
        assert!(q.dropped > 0, "{q:?}");
        assert_eq!(
            q.innocent_dropped, q.dropped,
            "no poison: every drop is a loss"
        );
        let nack = run(
            &rabbit("rabbitmq_quorum", r#""rabbitmq_sac""#, 80, OUTAGE),
            "rabbitmq_sac",
            1,
        );
        assert_eq!((nack.dropped, nack.lost), (0, 0), "4.3 counts no nack");
        assert!(
            nack.redeliveries > 100,
            "the hot loop: {}",
            nack.redeliveries
        );
        let c = run(
            &rabbit("rabbitmq", r#""rabbitmq_sac""#, 80, OUTAGE),
            "rabbitmq_sac",
            1,
        );
        assert_eq!((c.dropped, c.lost), (0, 0));
        assert_eq!(c.applied, 3000);
        assert!(c.redeliveries > 100, "the hot loop: {}", c.redeliveries);
        let one = format!("[consumers]\nprefetch = 1\n{OUTAGE}");
        for flavour in ["rabbitmq", "rabbitmq_quorum"] {
            let sc = scenario(&format!(
                "flavour = \"{flavour}\"\nstrategies = [\"rabbitmq_sac\"]\n[workload]\nmessages = 3000\nrate = \"80/s\"\nkeys = 40\n[[broker]]\nname = \"rabbit\"\n{}",
                one.replace("[consumers]\n", "[consumers]\ncount = 4\nservice = { dist = \"exponential\", mean = \"10ms\" }\n")
            ));
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
        let limited = run(
            &rabbit("rabbitmq_quorum", r#""rabbitmq_sac""#, 80, OUTAGE),
            "rabbitmq_sac",
            1,
        );
        let unlimited = format!("[redelivery]\nmax_redeliveries = -1\n{OUTAGE}");
        let sc = rabbit("rabbitmq_quorum", r#""rabbitmq_sac""#, 80, &unlimited);
        let m = run(&sc, "rabbitmq_sac", 1);
        assert!(
            m.ordering_violations > 5 * limited.ordering_violations.max(1),
            "{} vs {}",
            m.ordering_violations,
            limited.ordering_violations
        );
        assert_eq!((m.dropped, m.lost), (0, 0));
        // A crash's returns still come back first: order kept.
        let sc = rabbit(
            "rabbitmq_quorum",
            r#""rabbitmq_sac""#,
            80,
            &format!("[redelivery]\nmax_redeliveries = -1\n{CRASHES}"),
        );
        let m = run(&sc, "rabbitmq_sac", 1);
        assert!(m.coverage.consumer_crashes > 0 && m.coverage.reassignments > 0);
        assert_eq!(m.ordering_violations, 0);
    }
}
