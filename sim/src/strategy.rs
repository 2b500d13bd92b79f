//! The strategy interface: a dispatch policy on the broker side, a handler on the consumer side,
//! and optionally a routing rule on the producer side.
//!
//! The engine is generic over [`Strategy`], so every call is static (no dynamic dispatch per event).
//! The hooks carry every mechanism in docs/design.md:
//! - sticky ownership (message groups, exclusive consumer, Kafka partitions, Pulsar Key_Shared):
//!   [`Strategy::select`] picks a consumer, holds the message, or stops the scan;
//!   [`Strategy::on_attach`] / [`Strategy::on_detach`] see membership change;
//!   [`Control::reassigned`] records owner changes in the history;
//! - at most one unacknowledged message per unit (WebLogic Unit-of-Order, SQS FIFO groups): `select`
//!   holds while [`Strategy::on_settled`] has not released the unit;
//! - producer-side routing (Unit-of-Order on a distributed destination): [`Strategy::route`];
//! - timers (resequencer gap timeouts, takeover delays): [`Control::wake_at`] + [`Strategy::on_wake`];
//! - downstream reads and locks (notifier, cache lock, optimistic versions): [`Handler::begin`] runs
//!   when processing starts (read a row, take a lock, or wait for one: [`Begin::Wait`] parks the
//!   consumer until [`Control::unpark`]); [`Handler::handle`] runs when it ends (write or reject);
//!   [`Outcome::After`] continues the same message later;
//! - work outside a consumer's transaction (a resequencer's apply thread): [`Control::apply`] and
//!   [`Control::discard`];
//! - resource faults the strategy owns (cache collapse): [`Strategy::on_world`].

use crate::history::FailReason;
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
    /// The group header (JMSXGroupID / Unit-of-Order name): the key, unless the producer did not set
    /// it (`[workload] group_header_missing`).
    pub group: Option<u32>,
}

impl MsgView {
    /// The message's identity as the history names it.
    #[inline]
    pub fn msg_ref(&self) -> crate::history::MsgRef {
        crate::history::MsgRef {
            id: self.id,
            key: self.key,
            seq: self.seq,
        }
    }
}

/// A consumer attached to the dispatching broker, or a network bridge toward a peer that has
/// consumers (`[network] kind = "bridge"`): the bridges come after the local consumers, with ids
/// `consumers.count + peer` ([`crate::Scenario::dispatch_targets`] counts them). A strategy treats
/// a bridge as any consumer: it may own a group or be the exclusive consumer; it gets
/// `on_attach` / `on_detach` when the peer's demand appears and goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerSlot {
    /// Consumer index (`consumers.count + peer` for the bridge toward broker `peer`).
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
    /// [`Select::Hold`], because it waits for `consumers[i]`, which has no room: a promise that
    /// until that candidate has room again, or the candidates or their attachments change, this
    /// message gets the same answer and asking again changes nothing. The broker then skips it
    /// without asking (message groups behind a full owner: a page of them is scanned on every
    /// dispatch otherwise).
    HoldFor(usize),
    /// [`Select::Hold`], with the promise that until the candidates or their attachments change
    /// (or the strategy calls [`Control::holds_changed`] for this broker), this message gets the
    /// same answer and asking again changes nothing (a group owned by a candidate it is not
    /// offered to; a unit waiting for its incomplete message).
    HoldWhileMembers,
    /// The record is not for the group: its partition's position was set past it (Kafka's
    /// `auto.offset.reset = latest` for a partition the group had no committed offset for). It
    /// leaves the queue, never delivered, and the history counts it lost
    /// ([`crate::history::DiscardReason::OffsetReset`]).
    Skip,
    /// Leave it, and stop dispatching from this broker until something changes (e.g. the only
    /// eligible consumer is full): saves scanning a page of messages that would all be held.
    Stop,
}

/// What a producer's send sees.
pub struct RouteCtx<'a> {
    /// Now.
    pub now: Time,
    /// The producer.
    pub producer: u32,
    /// The broker it is connected to.
    pub connected: u16,
    /// Which brokers are up, by index.
    pub up: &'a [bool],
    /// Since when the broker has held this send (`Route::Wait`): None for a send asked about
    /// the first time. The engine keeps it per held send, so that a send the broker goes on
    /// holding after its producer gave up (the client's `call_timeout`) and the producer's own
    /// resend each have their own.
    pub held_since: Option<Time>,
}

/// Where a send goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the broker the producer is connected to (plain JMS).
    Connected,
    /// To this member of a distributed destination (it must be up, else the send fails).
    Broker(u16),
    /// The send fails (e.g. `JMSOrderException`); the producer tries again after its reconnect
    /// delay. `block`: later sends of this producer wait behind it (a blocking retry loop) rather
    /// than going on (a local buffer).
    Fail {
        /// Whether later sends wait.
        block: bool,
    },
    /// To this broker, stored for it even while it is down: the send succeeds and the message
    /// waits there until the broker serves again (an Artemis cluster's store-and-forward queue
    /// toward a node that is down, the node's binding kept). To its HA partner if that serves.
    Stored(u16),
    /// The broker answers the send only after this long (Artemis's grouping handler waiting for
    /// its arbiter): no failure is seen, the producer's later sends wait behind it, and then the
    /// send is routed again (the strategy is asked anew).
    Wait(Time),
}

/// What happens when processing of a delivery starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begin {
    /// Process it now (service time starts).
    Proceed,
    /// Park the consumer (e.g. waiting for a lock) until [`Control::unpark`]; after `timeout`, give
    /// up: the delivery fails and rolls back.
    Wait {
        /// How long to wait at most (None: forever).
        timeout: Option<Time>,
    },
    /// Fail at once (rolls back, redelivered).
    Fail(FailReason),
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
    /// Taken over by the strategy (e.g. into an aggregation repository); acked now, applied later
    /// (or lost) through [`Control::apply`] / [`Control::discard`]. The engine keeps the run open
    /// while the strategy holds such messages, and reports those it still holds at the end as
    /// pending; a discard while the broker has not settled the delivery yet counts as a loss only
    /// if the ack does settle it (a lost ack means a redelivery).
    Buffered,
    /// Processing failed; the transaction rolls back and the message is redelivered.
    Failed(FailReason),
    /// Not done yet: call `handle` again for this message after `delay`, with `step`.
    After {
        /// How long.
        delay: Time,
        /// Strategy-defined continuation step.
        step: u32,
    },
}

/// A database row of a key: the target's as written by the strategies, or the source's (the
/// newest state produced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// Seq of the state stored (+1; 0 = no row yet).
    pub state: u32,
    /// Producer timestamp of the message that wrote it.
    pub timestamp: u64,
    /// Incremented on every write (an optimistic-lock version column).
    pub version: u64,
}

impl Row {
    /// The stored seq, if there is a row.
    pub fn seq(&self) -> Option<u32> {
        self.state.checked_sub(1)
    }
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
    pub(crate) source_up: bool,
    pub(crate) poison: bool,
    pub(crate) rows: &'a [Row],
    pub(crate) source: &'a [Row],
}

impl HandlerCtx<'_> {
    /// Tries the message's business processing: fails when the target is down or the message is
    /// poison (only processing discovers it). A strategy calls this before deciding to write.
    pub fn process(&self) -> Result<(), FailReason> {
        if !self.db_up {
            Err(FailReason::Outage)
        } else if self.poison {
            Err(FailReason::Poison)
        } else {
            Ok(())
        }
    }

    /// The part of processing that needs no resource (parsing, validating the message): fails
    /// only for a poison message. For handlers that take a message over (e.g. into an
    /// aggregation repository) before anything touches the target.
    pub fn validate(&self) -> Result<(), FailReason> {
        if self.poison {
            Err(FailReason::Poison)
        } else {
            Ok(())
        }
    }

    /// Whether the target database is reachable.
    pub fn target_up(&self) -> bool {
        self.db_up
    }

    /// The target row of `key`.
    pub fn row(&self, key: u32) -> Row {
        self.rows[key as usize]
    }

    /// The source database's current row of `key` (its newest produced state), or an outage.
    /// Record the read with [`Control::source_read`].
    pub fn source(&self, key: u32) -> Result<Row, FailReason> {
        if self.source_up {
            Ok(self.source[key as usize])
        } else {
            Err(FailReason::Outage)
        }
    }
}

impl<'a> HandlerCtx<'a> {
    /// A context for a strategy's unit tests (the engine builds its own): the target and the
    /// source up, the message not poison, `rows` as both the target's and the source's rows.
    pub fn for_tests(now: Time, consumer: u32, step: u32, rows: &'a [Row]) -> Self {
        HandlerCtx {
            now,
            consumer,
            step,
            db_up: true,
            source_up: true,
            poison: false,
            rows,
            source: rows,
        }
    }
}

/// A change in the world a strategy may care about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorldChange {
    /// A consumer process died (its locks and leases should go).
    ConsumerCrashed(u32),
    /// A consumer process is back.
    ConsumerRestarted(u32),
    /// The cache cluster lost every entry and lock (the `cache_collapse` fault).
    CacheCollapse,
    /// The target database went down / came back.
    Target {
        /// Whether it is up now.
        up: bool,
    },
    /// A broker crashed (its consumers and producers fail over).
    BrokerCrashed(u16),
    /// A broker is back.
    BrokerRestarted(u16),
    /// This many partitions were added to the topic (the `add_partitions` fault).
    PartitionsAdded(u32),
    /// An operator reset the message groups of this broker's queue (the `reset_groups` fault):
    /// every group loses its owner; what was already dispatched stays where it is.
    GroupsReset(u16),
    /// This broker left the distributed destination's member list (the `member_leave` fault):
    /// routing by member must pick among the others; the server stays up.
    MemberLeft(u16),
    /// This broker is a member again (the `member_leave` fault's end).
    MemberJoined(u16),
}

/// One request of a strategy to the engine (see the [`Control`] methods that make them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Request {
    /// [`Control::wake_at`].
    Wake {
        /// When.
        at: Time,
        /// Handed back to [`Strategy::on_wake`].
        token: u64,
    },
    /// [`Control::reassigned`].
    Reassigned {
        /// The broker.
        broker: u16,
        /// The new owner.
        consumer: u32,
    },
    /// [`Control::unpark`].
    Unpark(u32),
    /// [`Control::apply`].
    Apply {
        /// The message.
        msg: MsgView,
        /// The state written.
        state_seq: u32,
        /// Who wrote.
        worker: u32,
    },
    /// [`Control::discard`].
    Discard(MsgView),
    /// [`Control::commit`].
    Commit(u32),
    /// [`Control::end_leases`].
    EndLeases(u32),
    /// [`Control::source_read`].
    SourceRead {
        /// The key read.
        key: u32,
        /// Who read.
        consumer: u32,
        /// The state read.
        seq: Option<u32>,
    },
}

/// Requests a strategy makes of the engine from its hooks: one list, carried out in the order
/// the strategy issued them when the hook returns (as stateright's `Out`). A redispatch is not an
/// action but a hint ("something changed, look at the queues again"): asked once or many times
/// in a hook, every broker dispatches once, after the hook's other requests.
#[derive(Default)]
pub struct Control {
    pub(crate) requests: Vec<Request>,
    pub(crate) redispatch: bool,
    /// `requests` is not empty or `redispatch` is set: kept, so that the engine's test after
    /// every hook (most ask for nothing) reads one flag ([`Control::is_empty`]). Set by
    /// [`Control::request`] and [`Control::redispatch`], cleared by the engine when it takes both.
    pub(crate) pending: bool,
    /// Brokers told [`Control::holds_changed`], not yet dispatched since: each voids its kept
    /// answers at its next dispatch (read there, not after the hook, since a dispatch may run
    /// first).
    pub(crate) holds_changed: Vec<u16>,
}

impl Control {
    /// Whether nothing was requested since the engine last carried the requests out (the one
    /// test on the hot path).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        debug_assert_eq!(
            self.pending,
            !self.requests.is_empty() || self.redispatch,
            "stale pending flag"
        );
        !self.pending
    }

    /// Queues `r` (the one way a request is made).
    #[inline]
    fn request(&mut self, r: Request) {
        self.requests.push(r);
        self.pending = true;
    }

    /// Calls [`Strategy::on_wake`] with `token` at `at`, then redispatches every broker.
    pub fn wake_at(&mut self, at: Time, token: u64) {
        self.request(Request::Wake { at, token });
    }

    /// Asks every broker to run dispatch again (e.g. a held message may now go).
    pub fn redispatch(&mut self) {
        self.redispatch = true;
        self.pending = true;
    }

    /// The answers [`Select::HoldWhileMembers`] promised at broker `broker` may no longer stand
    /// (what held them changed without a change of candidates, e.g. the message a unit waited
    /// for completed): the broker asks again about every message it skipped.
    pub fn holds_changed(&mut self, broker: u16) {
        if !self.holds_changed.contains(&broker) {
            self.holds_changed.push(broker);
        }
    }

    /// Takes broker `broker`'s [`Self::holds_changed`] notice, if any.
    #[inline]
    pub(crate) fn take_holds_changed(&mut self, broker: u16) -> bool {
        if self.holds_changed.is_empty() {
            return false;
        }
        match self.holds_changed.iter().position(|&b| b == broker) {
            Some(i) => {
                self.holds_changed.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// The timers requested so far, `(at, token)` in order (for a strategy's unit tests).
    pub fn wakes(&self) -> Vec<(Time, u64)> {
        let wake = |r: &Request| match *r {
            Request::Wake { at, token } => Some((at, token)),
            _ => None,
        };
        self.requests.iter().filter_map(wake).collect()
    }

    /// The owner changes recorded so far, `(broker, consumer)` in order (for unit tests).
    pub fn reassignments(&self) -> Vec<(u16, u32)> {
        let reassigned = |r: &Request| match *r {
            Request::Reassigned { broker, consumer } => Some((broker, consumer)),
            _ => None,
        };
        self.requests.iter().filter_map(reassigned).collect()
    }

    /// The brokers told [`Self::holds_changed`] so far, in order (for unit tests).
    pub fn holds_changes(&self) -> Vec<u16> {
        self.holds_changed.clone()
    }

    /// Whether a redispatch was asked for (for unit tests).
    pub fn redispatch_requested(&self) -> bool {
        self.redispatch
    }

    /// The applies requested so far, `(message id, state seq, worker)` in order (for unit tests).
    pub fn applies(&self) -> Vec<(u64, u32, u32)> {
        let apply = |r: &Request| match *r {
            Request::Apply {
                msg,
                state_seq,
                worker,
            } => Some((msg.id, state_seq, worker)),
            _ => None,
        };
        self.requests.iter().filter_map(apply).collect()
    }

    /// The messages discarded so far, by id, in order (for unit tests).
    pub fn discards(&self) -> Vec<u64> {
        let discard = |r: &Request| match *r {
            Request::Discard(m) => Some(m.id),
            _ => None,
        };
        self.requests.iter().filter_map(discard).collect()
    }

    /// Records in the history that `broker` gave ownership to `consumer`.
    pub fn reassigned(&mut self, broker: u16, consumer: u32) {
        self.request(Request::Reassigned { broker, consumer });
    }

    /// Consumer `consumer` commits now what it processed (with `[consumers] commit = "batch"`
    /// or `"interval"`; a rebalance makes each member commit before giving up a partition). A
    /// consumer that is down or paused cannot.
    pub fn commit(&mut self, consumer: u32) {
        self.request(Request::Commit(consumer));
    }

    /// The commits requested so far, by consumer, in order (for unit tests).
    pub fn commits(&self) -> Vec<u32> {
        let commit = |r: &Request| match *r {
            Request::Commit(c) => Some(c),
            _ => None,
        };
        self.requests.iter().filter_map(commit).collect()
    }

    /// The broker ends now the leases of every delivery `consumer` holds (a Service Bus session
    /// lock lost when its renewal stopped): each is deliverable again, counted, as when a lease
    /// expires, and the consumer's late ack of it is refused. Without `[lease]`: nothing.
    pub fn end_leases(&mut self, consumer: u32) {
        self.request(Request::EndLeases(consumer));
    }

    /// The consumers whose leases were ended so far, in order (for unit tests).
    pub fn ended_leases(&self) -> Vec<u32> {
        let ended = |r: &Request| match *r {
            Request::EndLeases(c) => Some(c),
            _ => None,
        };
        self.requests.iter().filter_map(ended).collect()
    }

    /// A consumer parked by [`Begin::Wait`] may proceed with its message now.
    pub fn unpark(&mut self, consumer: u32) {
        self.request(Request::Unpark(consumer));
    }

    /// Writes `msg` to the target outside any consumer's transaction (e.g. a resequencer's apply
    /// thread, identified as `worker`), with the state of `state_seq`. The caller checks the target
    /// is up first (it is, at the instant a hook runs, if `HandlerCtx::target_up` or
    /// [`Strategy::on_world`] said so).
    pub fn apply(&mut self, msg: MsgView, state_seq: u32, worker: u32) {
        self.request(Request::Apply {
            msg,
            state_seq,
            worker,
        });
    }

    /// A message the strategy had taken over (acked upstream) is gone for good.
    pub fn discard(&mut self, msg: MsgView) {
        self.request(Request::Discard(msg));
    }

    /// Records a read of the source database by `consumer` (`seq`: the state read; None: no row).
    pub fn source_read(&mut self, key: u32, consumer: u32, seq: Option<u32>) {
        self.request(Request::SourceRead { key, consumer, seq });
    }
}

/// The consumer-side half of a strategy.
pub trait Handler {
    /// Processing of a delivery starts (read a row, take a lock). Default: proceed.
    fn begin(&mut self, _ctx: &HandlerCtx, _msg: &MsgView, _ctl: &mut Control) -> Begin {
        Begin::Proceed
    }

    /// Processing ends. The default is the plain handler: process, then write the message.
    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Outcome {
        plain_handle(ctx, msg)
    }

    /// The delivery in hand was abandoned (the consumer crashed, or it timed out waiting): release
    /// whatever `begin` took for it.
    fn abandon(&mut self, _now: Time, _consumer: u32, _msg: &MsgView, _ctl: &mut Control) {}
}

/// Which of a strategy's per-message hooks do anything beyond the trait's default. The strategy
/// is a trait object, so the engine would otherwise pay an indirect call (and build the message's
/// view) per message for a hook that does nothing; it skips the ones a strategy leaves out.
/// Debug builds (and so the tests) call a skipped hook anyway and check that it behaved as the
/// default: a strategy that overrides a hook it says it leaves out fails there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hooks {
    /// [`Strategy::route`] is not [`Route::Connected`] for every send.
    pub route: bool,
    /// [`Handler::begin`] may do something other than proceed.
    pub begin: bool,
    /// [`Handler::handle`] is not the plain handler.
    pub handle: bool,
    /// [`Strategy::on_handled`] listens.
    pub on_handled: bool,
    /// [`Strategy::on_returned`] listens.
    pub on_returned: bool,
    /// [`Strategy::on_settled`] listens.
    pub on_settled: bool,
    /// [`Strategy::select`] may promise ([`Select::HoldFor`], [`Select::HoldWhileMembers`]):
    /// the broker keeps those answers (else it treats them as [`Select::Hold`]).
    pub promises: bool,
}

impl Hooks {
    /// Every hook called (the default: correct for any strategy).
    pub const ALL: Hooks = Hooks {
        route: true,
        begin: true,
        handle: true,
        on_handled: true,
        on_returned: true,
        on_settled: true,
        promises: true,
    };
    /// Only `select` and the rare hooks (membership, timers, world changes): plain competing
    /// consumers.
    pub const NONE: Hooks = Hooks {
        route: false,
        begin: false,
        handle: false,
        on_handled: false,
        on_returned: false,
        on_settled: false,
        promises: false,
    };
}

/// The plain handler: process, then write the message ([`Handler::handle`]'s default).
#[inline]
pub fn plain_handle(ctx: &HandlerCtx, msg: &MsgView) -> Outcome {
    match ctx.process() {
        Ok(()) => Outcome::Applied { state_seq: msg.seq },
        Err(r) => Outcome::Failed(r),
    }
}

/// An ordering strategy: routing + dispatch policy + handler + reactions to membership,
/// settlement, timers and world changes.
pub trait Strategy: Handler {
    /// Which per-message hooks it uses ([`Hooks`]). Default: all of them.
    fn hooks(&self) -> Hooks {
        Hooks::ALL
    }

    /// The run starts under `seed` (before any other hook): a strategy that draws randomness of
    /// its own seeds its streams here ([`crate::rng::stream`] with
    /// [`crate::rng::Component::Strategy`]), so that each seed of a scenario draws anew.
    /// Default: nothing.
    fn on_start(&mut self, _seed: u64) {}

    /// Picks a consumer for `msg` at this broker, or holds it. An owner change made here is
    /// recorded with [`Control::reassigned`].
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select;

    /// Where a producer's send goes. Default: the broker it is connected to.
    fn route(&mut self, _ctx: &RouteCtx, _msg: &MsgView) -> Route {
        Route::Connected
    }

    /// The partition a producer's record goes to, for its batches (`[producers] linger`):
    /// records of one partition fill one batch. Asked only under a `linger`. Default: 0 (one
    /// batch per producer).
    fn partition(&self, _msg: &MsgView) -> u32 {
        0
    }

    /// A consumer attached to a broker (connected, resumed).
    fn on_attach(&mut self, _now: Time, _broker: u16, _consumer: u32, _ctl: &mut Control) {}

    /// A consumer left a broker (crash, disconnect, suspension). Its unacked messages are already
    /// back in the broker's queue.
    fn on_detach(&mut self, _now: Time, _broker: u16, _consumer: u32, _ctl: &mut Control) {}

    /// A consumer's process died unnoticed (`[consumers] crash_detection = "lease"`): the broker
    /// sends it nothing more, but its unacked messages stay its own until their leases end (they
    /// come back through [`Strategy::on_returned`]). Default: [`Strategy::on_detach`].
    fn on_silent_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.on_detach(now, broker, consumer, ctl)
    }

    /// A delivery came back to broker `broker`'s queue and is deliverable again: rolled back
    /// (after its redelivery delay, if any), its lease expired, or its consumer left. (A message a
    /// consumer holds for a blocking redelivery has not come back.)
    fn on_returned(&mut self, _now: Time, _broker: u16, _msg: &MsgView, _ctl: &mut Control) {}

    /// The handler returned `outcome` for `msg` on `consumer` (before the engine acts on it):
    /// the dispatch side's view of what the handler did, so that a dispatch policy does not
    /// depend on which handler runs (a composed strategy, `kafka+db_optimistic`, pairs one
    /// strategy's dispatch with another's handler).
    fn on_handled(
        &mut self,
        _now: Time,
        _consumer: u32,
        _msg: &MsgView,
        _outcome: &Outcome,
        _ctl: &mut Control,
    ) {
    }

    /// A message left the broker for good (acked or dead-lettered).
    fn on_settled(&mut self, _now: Time, _msg: &MsgView, _ctl: &mut Control) {}

    /// A wake-up requested with [`Control::wake_at`].
    fn on_wake(&mut self, _now: Time, _token: u64, _ctl: &mut Control) {}

    /// Something changed in the world.
    fn on_world(&mut self, _now: Time, _change: WorldChange, _ctl: &mut Control) {}
}
