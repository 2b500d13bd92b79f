//! The strategy interface: a dispatch policy on the broker side and a handler on the consumer side.
//!
//! The engine is generic over [`Strategy`], so every call is static (no dynamic dispatch per event).
//! The hooks are enough to carry every mechanism in DESIGN.md:
//! - sticky ownership (message groups, exclusive consumer, Kafka partitions, Pulsar Key_Shared):
//!   [`Strategy::select`] picks a consumer or holds the message; [`Strategy::on_detach`] /
//!   [`Strategy::on_attach`] see membership change; [`Control::reassigned`] records owner changes;
//! - at most one unacknowledged message per unit (WebLogic Unit-of-Order, SQS FIFO groups): `select`
//!   holds while [`Strategy::on_settled`] has not released the unit;
//! - timers (resequencer gap timeouts, takeover delays): [`Control::wake_at`] + [`Strategy::on_wake`];
//! - downstream reads and locks (notifier, cache lock): [`Handler::handle`] returns
//!   [`Outcome::After`] to continue the same message later, and reads the target row through
//!   [`HandlerCtx`].

use crate::time::Time;

/// What a strategy may know of a message (never its hidden poison flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgView {
    /// Global id.
    pub id: u64,
    /// Entity key.
    pub key: u32,
    /// Per-key seq (a producer-assigned version, when a strategy chooses to trust one).
    pub seq: u32,
    /// Producer clock reading (JMS timestamp), microseconds.
    pub timestamp: u64,
    /// Producer index.
    pub producer: u32,
    /// How many times it has been delivered before this delivery.
    pub redeliveries: u32,
}

/// A consumer attached to the dispatching broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerSlot {
    /// Consumer index.
    pub id: u32,
    /// Free prefetch capacity (0 = full).
    pub free: u32,
}

/// What a broker's dispatch sees.
pub struct DispatchCtx<'a> {
    /// Now.
    pub now: Time,
    /// The broker.
    pub broker: u16,
    /// Consumers attached to this broker, in attach order.
    pub consumers: &'a [ConsumerSlot],
}

/// The dispatch decision for one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    /// Deliver to `consumers[i]` (it must have free capacity).
    Consumer(usize),
    /// Leave it in the queue for now; dispatch looks at the next one.
    Hold,
    /// Leave it, and stop dispatching from this broker until something changes (e.g. the only
    /// eligible consumer is full): saves scanning a page of messages that would all be held.
    Stop,
}

/// The outcome of handling one delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The target was written with the state of `state_seq`; the message will be acked.
    Applied {
        /// Seq whose state was written.
        state_seq: u32,
    },
    /// Deliberately not written (stale); the message will be acked.
    Rejected,
    /// Processing failed; the transaction rolls back and the message is redelivered.
    Failed(crate::history::FailReason),
    /// Not done yet: call `handle` again for this message after `delay`, with `step`.
    After {
        /// How long.
        delay: Time,
        /// Strategy-defined continuation step.
        step: u32,
    },
}

/// The target database row of a key, as the handler may read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetRow {
    /// Seq of the state stored (+1; 0 = no row yet).
    pub state: u32,
    /// Producer timestamp of the message that wrote it.
    pub timestamp: u64,
}

/// What the handler sees while processing.
pub struct HandlerCtx<'a> {
    /// Now.
    pub now: Time,
    /// The consumer.
    pub consumer: u32,
    /// Continuation step (0 on the first call).
    pub step: u32,
    pub(crate) db_up: bool,
    pub(crate) poison: bool,
    pub(crate) rows: &'a [TargetRow],
}

impl HandlerCtx<'_> {
    /// Tries the message's business processing: fails when the target is down or the message is
    /// poison (only processing discovers it). A strategy calls this before deciding to write.
    pub fn process(&self) -> Result<(), crate::history::FailReason> {
        if !self.db_up {
            Err(crate::history::FailReason::Outage)
        } else if self.poison {
            Err(crate::history::FailReason::Poison)
        } else {
            Ok(())
        }
    }

    /// The target row of `key`.
    pub fn row(&self, key: u32) -> TargetRow {
        self.rows[key as usize]
    }
}

/// Requests a strategy makes of the engine from its hooks.
#[derive(Default)]
pub struct Control {
    pub(crate) wakes: Vec<(Time, u64)>,
    pub(crate) redispatch: bool,
    pub(crate) reassigned: Vec<(u16, u32)>,
}

impl Control {
    /// Calls [`Strategy::on_wake`] with `token` at `at`, then redispatches every broker.
    pub fn wake_at(&mut self, at: Time, token: u64) {
        self.wakes.push((at, token));
    }

    /// Asks every broker to run dispatch again (e.g. a held message may now go).
    pub fn redispatch(&mut self) {
        self.redispatch = true;
    }

    /// Records in the history that `broker` gave ownership to `consumer`.
    pub fn reassigned(&mut self, broker: u16, consumer: u32) {
        self.reassigned.push((broker, consumer));
    }
}

/// The consumer-side half of a strategy.
pub trait Handler {
    /// Handles one delivery. The default is the plain handler: process, then write the message.
    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView) -> Outcome {
        match ctx.process() {
            Ok(()) => Outcome::Applied { state_seq: msg.seq },
            Err(r) => Outcome::Failed(r),
        }
    }
}

/// An ordering strategy: dispatch policy + handler + reactions to membership and settlement.
pub trait Strategy: Handler {
    /// Picks a consumer for `msg` at this broker, or holds it. An owner change made here is
    /// recorded with [`Control::reassigned`].
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select;

    /// A consumer attached to a broker (connected, resumed).
    fn on_attach(&mut self, _now: Time, _broker: u16, _consumer: u32, _ctl: &mut Control) {}

    /// A consumer left a broker (crash, disconnect, suspension). Its unacked messages are already
    /// back in the broker's queue.
    fn on_detach(&mut self, _now: Time, _broker: u16, _consumer: u32, _ctl: &mut Control) {}

    /// A message left the broker for good (acked or dead-lettered).
    fn on_settled(&mut self, _now: Time, _msg: &MsgView, _ctl: &mut Control) {}

    /// A wake-up requested with [`Control::wake_at`].
    fn on_wake(&mut self, _now: Time, _token: u64, _ctl: &mut Control) {}
}
