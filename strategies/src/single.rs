//! `single`: one active consumer, with standbys (ActiveMQ exclusive consumer, RabbitMQ single
//! active consumer).
//!
//! Each broker dispatches only to its exclusive consumer: the earliest attached one. When the
//! exclusive consumer leaves (crash, disconnect, suspension), its unacked and prefetched messages go
//! back to the queue, and a standby takes over only after `takeover_delay` (the time to notice the
//! failure). A process that merely lost its connection may still be applying a message when the
//! standby starts: the duplicate and the reorder this makes are real, and reported.
//!
//! Order then depends on redelivery: blocking redelivery (ActiveMQ Classic's default, consumer
//! side) holds the session, so a later message of the key cannot overtake a failed one;
//! non-blocking redelivery lets it ([Coherence+Hibernate]: "m3 processed in the gap, m2 later
//! overwrites").
//!
//! Parameters (`[strategy.single]`): `takeover_delay` (default "0s").

use serde::{Deserialize, Serialize};
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};
use sim::time::{Dur, Time};

/// `[strategy.single]` parameters.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SingleParams {
    /// Time for a standby to take over after the exclusive consumer leaves.
    #[serde(default)]
    pub takeover_delay: Dur,
}

#[derive(Clone, Copy, Debug)]
struct BrokerSide {
    /// The exclusive consumer, once chosen.
    owner: Option<u32>,
    /// No standby may take over before this time.
    blocked_until: Time,
    /// An owner was chosen before: a new choice is a takeover (recorded as a reassignment).
    had_owner: bool,
}

impl BrokerSide {
    fn take(&mut self, broker: u16, consumer: u32, ctl: &mut Control) {
        self.owner = Some(consumer);
        if self.had_owner {
            ctl.reassigned(broker, consumer);
        }
        self.had_owner = true;
    }
}

/// Exclusive consumer with standbys.
#[derive(Debug)]
pub struct Single {
    params: SingleParams,
    brokers: Vec<BrokerSide>,
}

impl Single {
    /// A new instance for `brokers` brokers.
    pub fn new(brokers: usize, params: SingleParams) -> Self {
        Single {
            params,
            brokers: vec![
                BrokerSide {
                    owner: None,
                    blocked_until: 0,
                    had_owner: false
                };
                brokers
            ],
        }
    }
}

impl Handler for Single {}

impl Single {
    /// The exclusive consumer at broker `broker`, if one holds it now.
    pub fn owner(&self, broker: u16) -> Option<u32> {
        self.brokers[broker as usize].owner
    }

    /// `consumer` becomes the exclusive consumer at `broker` now (a queue that chooses among its
    /// consumers by its own rule, e.g. RabbitMQ's consumer priorities); a change of owner is
    /// recorded as a reassignment.
    pub fn take_over(&mut self, broker: u16, consumer: u32, ctl: &mut Control) {
        let side = &mut self.brokers[broker as usize];
        if side.owner != Some(consumer) {
            side.take(broker, consumer, ctl);
        }
    }
}

impl crate::Named for Single {
    const NAME: &'static str = "single";
    const SUMMARY: &'static str =
        "exclusive consumer + standby after takeover_delay; order hinges on blocking redelivery";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    type Params = SingleParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "takeover_delay",
            meaning: "time before a standby takes over after the exclusive consumer leaves (the time to notice the failure)",
            unit: "duration",
            default: "0s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "failure detection: ActiveMQ exclusive consumer / RabbitMQ single active consumer switch-over after the connection or session is declared dead",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: SingleParams) -> Result<Self, String> {
        Ok(Single::new(sc.brokers.len(), p))
    }
}

impl Strategy for Single {
    fn select(&mut self, ctx: &DispatchCtx, _msg: &MsgView, ctl: &mut Control) -> Select {
        let side = &mut self.brokers[ctx.broker as usize];
        let owner = match side.owner {
            Some(o) => o,
            None => {
                if ctx.now < side.blocked_until || ctx.consumers.is_empty() {
                    return Select::Stop;
                }
                // The earliest attached consumer becomes exclusive.
                let o = ctx.consumers[0].id;
                side.take(ctx.broker, o, ctl);
                o
            }
        };
        match ctx.consumers.iter().position(|c| c.id == owner) {
            Some(i) if ctx.consumers[i].free > 0 => Select::Consumer(i),
            _ => Select::Stop,
        }
    }

    fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        let side = &mut self.brokers[broker as usize];
        if side.owner.is_none() && now >= side.blocked_until {
            side.take(broker, consumer, ctl);
        }
    }

    fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        let side = &mut self.brokers[broker as usize];
        if side.owner == Some(consumer) {
            side.owner = None;
            side.blocked_until = now + self.params.takeover_delay.micros();
            ctl.wake_at(side.blocked_until, broker as u64);
        }
    }

    fn on_wake(&mut self, _now: Time, _token: u64, ctl: &mut Control) {
        ctl.redispatch();
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::{run, simple};

    /// Strength: order is kept with any number of standbys, even through a DB outage with blocking
    /// redelivery.
    #[test]
    fn keeps_order_with_standbys_and_blocking_redelivery() {
        let outage = "[[fault]]\nkind = \"db_outage\"\nat = \"10s\"\nfor = \"3s\"\n";
        let m = run(&simple("\"single\"", 4, 50, outage), "single", 2);
        assert!(m.coverage.rollbacks > 0);
        assert_eq!(m.ordering_violations, 0);
        assert_eq!(m.final_state_mismatches, 0);
        assert_eq!(m.applied, 3000);
    }

    /// Weakness: one consumer is the throughput cap. At 400/s with 10ms service it drains at
    /// ~100/s however many standbys it has; latency grows with the backlog.
    #[test]
    fn throughput_is_capped_by_one_consumer() {
        let m = run(&simple("\"single\"", 8, 400, ""), "single", 1);
        assert!(m.throughput_per_s < 110.0, "{}", m.throughput_per_s);
        assert!(m.latency_ms.p50 > 5_000.0, "{}", m.latency_ms.p50);
    }

    /// The standby takes over only after `takeover_delay`; the crashed owner's unacked message is
    /// redelivered to it.
    #[test]
    fn standby_takes_over_after_the_delay() {
        let extra = "[strategy.single]\ntakeover_delay = \"5s\"\n[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"10s\"\nfor = \"1m\"\n";
        let m = run(&simple("\"single\"", 2, 50, extra), "single", 3);
        assert_eq!(m.coverage.consumer_crashes, 1);
        assert_eq!(
            m.coverage.reassignments, 1,
            "the takeover (the first choice is not a reassignment)"
        );
        assert!(
            m.max_block_ms >= 4_000.0,
            "messages wait for the takeover: {}",
            m.max_block_ms
        );
        assert_eq!(m.ordering_violations, 0);
        assert_eq!(m.applied, 3000);
    }

    // --- `select` and the hooks called directly with hand-built contexts.

    use super::{Single, SingleParams};
    use sim::strategy::{Control, MsgView, Select, Strategy};
    use sim::time::{Dur, Time, SECOND};

    /// `select` at broker 0 with `slots` (consumer id, free prefetch): the consumer id chosen.
    fn select(s: &mut Single, now: Time, slots: &[(u32, u32)], ctl: &mut Control) -> Option<u32> {
        let msg = MsgView {
            id: 0,
            key: 0,
            seq: 0,
            timestamp: 0,
            producer: 0,
            redeliveries: 0,
            group: None,
        };
        match crate::test_util::select_at(s, now, slots, &msg, ctl) {
            Ok(id) => Some(id),
            Err(Select::Stop) => None,
            Err(_) => panic!("single never holds"),
        }
    }

    #[test]
    fn the_exclusive_consumer_gets_everything_and_a_full_one_stops_the_queue() {
        let mut s = Single::new(1, SingleParams::default());
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_attach(0, 0, 1, ctl);
        assert_eq!(select(&mut s, 0, &[(0, 1), (1, 5)], ctl), Some(0));
        assert_eq!(
            select(&mut s, 0, &[(0, 0), (1, 5)], ctl),
            None,
            "no standby"
        );
        // A standby leaving changes nothing.
        s.on_detach(1, 0, 1, ctl);
        assert_eq!(select(&mut s, 1, &[(0, 1)], ctl), Some(0));
        assert_eq!(ctl.wakes(), vec![]);
        assert_eq!(
            ctl.reassignments(),
            vec![],
            "the first owner is no owner change"
        );
    }

    #[test]
    fn a_standby_takes_over_when_the_delay_is_over_and_the_timer_redispatches() {
        // The owner (0) leaves at 10s; takeover_delay 5s: a timer at 15s. Consumer 2, attaching
        // at 12s, does not take over then; at 15s the first attached consumer does.
        let mut s = Single::new(
            1,
            SingleParams {
                takeover_delay: Dur::from_secs(5),
            },
        );
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_detach(10 * SECOND, 0, 0, ctl);
        assert_eq!(ctl.wakes(), vec![(15 * SECOND, 0)]);
        s.on_attach(12 * SECOND, 0, 2, ctl);
        assert_eq!(select(&mut s, 15 * SECOND - 1, &[(2, 5)], ctl), None);
        assert!(!ctl.redispatch_requested());
        s.on_wake(15 * SECOND, 0, ctl);
        assert!(ctl.redispatch_requested());
        assert_eq!(select(&mut s, 15 * SECOND, &[], ctl), None);
        assert_eq!(select(&mut s, 15 * SECOND, &[(2, 5), (1, 5)], ctl), Some(2));
        assert_eq!(ctl.reassignments(), vec![(0, 2)]);
    }

    #[test]
    fn without_a_delay_the_next_consumer_to_attach_takes_over_at_once() {
        let mut s = Single::new(1, SingleParams::default());
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_detach(10 * SECOND, 0, 0, ctl);
        s.on_attach(10 * SECOND, 0, 1, ctl);
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
        assert_eq!(select(&mut s, 10 * SECOND, &[(1, 5)], ctl), Some(1));
    }
}
