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
//! non-blocking redelivery lets it (seed 000: "m3 processed in the gap, m2 later overwrites").
//!
//! Parameters (`[strategy.single]`): `takeover_delay` (default "0s").

use serde::Deserialize;
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};
use sim::time::{Dur, Time};

/// `[strategy.single]` parameters.
#[derive(Clone, Debug, Default, Deserialize)]
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
                    blocked_until: 0
                };
                brokers
            ],
        }
    }
}

impl Handler for Single {}

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
                side.owner = Some(o);
                ctl.reassigned(ctx.broker, o);
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
            side.owner = Some(consumer);
            ctl.reassigned(broker, consumer);
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
