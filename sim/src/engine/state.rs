//! The engine's plain state: messages and where they are, and the state of every node (producers,
//! brokers, consumers, the target and source databases). No behaviour lives here beyond keeping
//! this state's own invariants; each node kind's handling is in its own file.

use super::broker::Broker;
use super::consumer::Consumer;
use super::producer::Producer;
use crate::history::MsgRef;
use crate::strategy::{MsgView, Row};
use crate::time::Time;
use std::collections::BTreeMap;

/// The world a run acts on.
pub(super) struct World {
    /// Messages in flight.
    pub slab: Slab,
    pub producers: Vec<Producer>,
    pub brokers: Vec<Broker>,
    pub consumers: Vec<Consumer>,
    /// Which brokers a send can be routed to (for strategies' routing): those up, and both
    /// members of an HA pair while either serves (a send to the pair reaches the one serving).
    pub broker_up: Vec<bool>,
    /// The target database, per key.
    pub rows: Vec<Row>,
    /// Overlapping target outages in force.
    pub db_down: u32,
    /// The source database (newest produced state per key), for strategies that read it.
    pub source: Vec<Row>,
    /// Overlapping source outages in force.
    pub source_down: u32,
    /// Poison fractions of the `poison` faults in force.
    pub poison_boost: Vec<f64>,
    /// The `send_error` and `send_timeout` faults in force: (producer, or every producer;
    /// failure probability; whether the broker stored the send whose answer failed). Empty (the
    /// one test the send path pays) unless such a fault is in its window.
    pub send_errors: Vec<(Option<u32>, f64, bool)>,
    /// A send takes the slow path: a `send_error` or `send_timeout` is in force, or producers
    /// batch their records (`[producers] linger`). The one test the send path pays for both.
    pub send_slow: bool,
    /// Messages produced so far.
    pub produced: u64,
    /// The id the next message stored gets: a produced one, or a resend stored again (a
    /// duplicate is a new message at the broker, a new offset or message id, with the same
    /// key and seq). Equal to `produced` until a resend is stored.
    pub next_id: u64,
    /// Deliveries going back to their brokers' queues (reused buffer).
    pub returned: Vec<Delivery>,
    /// Deliveries whose ack is travelling to the broker (`Ev::AckArrive` carries the index);
    /// slots are reused through `acks_free`.
    pub acks: Vec<(Delivery, MsgRef)>,
    pub acks_free: Vec<u32>,
    /// Messages the strategy took over ([`crate::strategy::Outcome::Buffered`], acked upstream)
    /// and has neither applied nor lost yet, by id: the run is not settled while it holds any,
    /// and what it still holds at the end is pending. Looked up only, never iterated in hash
    /// order.
    pub held: BTreeMap<u64, Held>,
    /// Consumers' own copies of received messages whose lease expired before they started them
    /// (their buffer entry has `delivery == 0`): they still process them, as a client that
    /// received a batch does.
    pub orphans: Vec<(u32, Job)>,
    /// Sends a broker goes on holding (`Route::Wait`) after their producer's blocking call timed
    /// out (`call_timeout`): the broker stores each when the strategy lets it (`producer.rs`).
    pub held_sends: Vec<HeldSend>,
    /// Per broker, its replicated log (`[broker.replication]` without `brokers`,
    /// `replication.rs`); None for every broker of a scenario without one.
    /// Beyond the brokers' (with `[broker.replication] brokers`), each partition's log of a
    /// [`super::replication::Cluster`] in the order they were made.
    pub logs: Vec<Option<Box<super::replication::Log>>>,
    /// Per broker, its Kafka cluster (`[broker.replication] brokers`); empty when no broker
    /// has one.
    pub clusters: Vec<Option<Box<super::replication::Cluster>>>,
}

/// The world's own bookkeeping: messages strategies took over, and the target rows.
impl World {
    /// Forgets that the strategy holds message `id` (it was applied, rejected or dead-lettered).
    /// Most strategies never take messages over: skip the map lookup when it is empty.
    #[inline]
    pub fn unhold(&mut self, id: u64) {
        if !self.held.is_empty() {
            self.held.remove(&id);
        }
    }

    /// Notes that a copy of message `id` (in `slot`, if it is still there) has been applied.
    pub fn mark_applied(&mut self, slot: u32, id: u64) {
        let m = self.slab.get_mut(slot);
        if m.view.id == id && m.loc != Loc::Free {
            m.applied = true;
        }
    }

    /// The strategy took message `msg` (delivered in `slot`) over: it holds it until it applies
    /// or discards it. A copy of a message already applied, or one the broker has settled
    /// meanwhile (its slot freed or reused: acked, dropped, dead-lettered or lost while this
    /// consumer held a copy whose lease had ended), is not held: it can no longer be pending,
    /// only duplicated or written late.
    pub fn take_over(&mut self, slot: u32, msg: MsgRef) {
        let m = self.slab.get(slot);
        if m.view.id != msg.id || m.loc == Loc::Free || m.applied {
            return;
        }
        self.held.insert(
            msg.id,
            Held {
                msg,
                slot,
                dropped: false,
            },
        );
    }

    /// Writes the target row of `key` with the state of `state_seq`.
    pub fn write_row(&mut self, key: u32, state_seq: u32, timestamp: u64) {
        let row = &mut self.rows[key as usize];
        row.state = state_seq + 1;
        row.timestamp = timestamp;
        row.version += 1;
    }
}

/// A send a broker holds whose producer gave up waiting for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct HeldSend {
    pub slot: u32,
    pub producer: u32,
    /// The node that received it (its `RouteCtx::connected`).
    pub broker: u16,
    /// Since when it has been held.
    pub since: Time,
}

/// A message the strategy took over.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub msg: MsgRef,
    /// Its slot when it was taken over (valid while the slot still holds that message id).
    pub slot: u32,
    /// The strategy dropped it while the broker still had it unacked (the ack may yet be lost
    /// and the message redelivered): lost only if that ack settles it.
    pub dropped: bool,
}

/// Where a message is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Loc {
    /// Slot is free.
    Free,
    /// Buffered in a producer that has no broker connection.
    Producer(u32),
    /// In a broker's queue (its store).
    Queued(u16),
    /// Pushed to a consumer, unacknowledged; `delivery` identifies this delivery.
    Delivered {
        broker: u16,
        consumer: u32,
        delivery: u32,
    },
    /// Waiting at the broker for a non-blocking redelivery delay.
    Held(u16),
    /// Travelling between brokers; `due` is the low 32 bits of its arrival time, so that an
    /// arrival event of an earlier trip (recalled when a broker crashed) is told apart.
    /// `orphan`: its source died after the bridge had sent it (it still reaches the peer, and
    /// its arrival gives no credit back to a bridge that is gone).
    Forwarding {
        from: u16,
        to: u16,
        due: u32,
        orphan: bool,
    },
}

/// A message and where it is.
#[derive(Clone, Copy, Debug)]
pub(super) struct Msg {
    /// What a strategy sees of it, kept whole so that a dispatch lends it rather than building
    /// a copy per offer: its `redeliveries` follows `deliveries` ([`Msg::delivered`],
    /// [`Msg::undelivered`], [`Msg::fresh_copy`]); its `group` is its key when the producer set
    /// the group header.
    pub view: MsgView,
    pub poison: bool,
    /// Deliveries so far (the view's `redeliveries` is one less): changed only through the
    /// methods that keep the view in step.
    deliveries: u32,
    pub loc: Loc,
    /// Some copy of it has been applied (so a strategy still holding another copy at the end of
    /// the run does not make it pending).
    pub applied: bool,
    /// It came over a network bridge: with `networkTTL` 1 no bridge takes it again.
    pub crossed: bool,
    /// With `[lease]`: when the current delivery's lease ends (renewals move it).
    pub lease_due: Time,
    /// With `[lease]`: when the current delivery was made (bounds renewal).
    pub leased_at: Time,
    /// With `[[broker]] dispatch_latency`: when the current delivery reaches its consumer.
    pub arrives: Time,
}

// Every live message has one: the slab's size, and the copy per `alloc`.
const _: () = assert!(std::mem::size_of::<Msg>() <= 88);

impl Msg {
    /// A new message, not yet delivered, at `loc`.
    #[inline(always)]
    pub fn new(
        r: MsgRef,
        timestamp: u64,
        producer: u32,
        poison: bool,
        group: bool,
        loc: Loc,
    ) -> Msg {
        Msg {
            view: MsgView {
                id: r.id,
                key: r.key,
                seq: r.seq,
                timestamp,
                producer,
                redeliveries: 0,
                group: group.then_some(r.key),
            },
            poison,
            deliveries: 0,
            loc,
            applied: false,
            crossed: false,
            lease_due: 0,
            leased_at: 0,
            arrives: 0,
        }
    }

    /// Its view, as lent to a strategy or copied into a job: checked, in debug builds, to say
    /// how often it was redelivered.
    #[inline(always)]
    fn lent_view(&self) -> &MsgView {
        debug_assert_eq!(self.view.redeliveries, self.deliveries.saturating_sub(1));
        &self.view
    }

    /// The message's reference in the history.
    #[inline(always)]
    pub fn r(&self) -> MsgRef {
        self.view.msg_ref()
    }

    /// Deliveries so far.
    #[inline(always)]
    pub fn deliveries(&self) -> u32 {
        self.deliveries
    }

    /// One more delivery: returns its number.
    #[inline(always)]
    pub fn delivered(&mut self) -> u32 {
        self.deliveries += 1;
        self.view.redeliveries = self.deliveries - 1;
        self.deliveries
    }

    /// Its last delivery does not count (it never reached the consumer).
    pub fn undelivered(&mut self) {
        self.deliveries -= 1;
        self.view.redeliveries = self.deliveries.saturating_sub(1);
    }

    /// A copy of it that starts over as a new message to its broker (a replay, a resend): id
    /// `id`, at `loc`, not delivered yet, nothing applied.
    pub fn fresh_copy(&self, id: u64, loc: Loc) -> Msg {
        let mut m = Msg {
            deliveries: 0,
            loc,
            crossed: false,
            ..*self
        };
        m.view.id = id;
        m.view.redeliveries = 0;
        m
    }
}

/// A reference to one delivery of a message, held by a consumer. It is valid only while the
/// message is still `Delivered` to that consumer with that delivery number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Delivery {
    pub slot: u32,
    pub id: u64,
    pub delivery: u32,
    pub broker: u16,
}

/// Orders deliveries to be put back one by one at `at`: at the head newest first, so that they
/// end up oldest first; at the tail oldest first.
pub(super) fn sort_for_put_back(back: &mut [Delivery], at: crate::scenario::Requeue) {
    if at == crate::scenario::Requeue::Head {
        back.sort_unstable_by_key(|d| std::cmp::Reverse(d.id));
    } else {
        back.sort_unstable_by_key(|d| d.id);
    }
}

/// Messages in flight, in reusable slots: memory follows messages in flight, not produced.
#[derive(Default)]
pub(super) struct Slab {
    pub msgs: Vec<Msg>,
    free: Vec<u32>,
    pub live: u64,
    /// Per message id in a slot, how many of its deliveries the broker does not count against
    /// its limit: given back when their consumer's connection closed, under a flavour that
    /// counts only lock expiries and abandons (`count_lost = false`: Service Bus), or failed
    /// under one that does not count failures (`count_failed = false`: a RabbitMQ 4.3 quorum
    /// queue's `basic.nack`). Out of line (empty under every other flavour) so that `Msg`
    /// stays 88 bytes (checked beside it).
    uncounted: BTreeMap<u64, u32>,
}

impl Slab {
    /// The strategy's view of the message in `slot`.
    #[inline(always)]
    pub fn view(&self, slot: u32) -> &MsgView {
        self.get(slot).lent_view()
    }

    /// The work of delivery `d`: the message in its slot as the consumer receives it (its own
    /// copy, [`Job`]).
    #[inline(always)]
    pub fn job(&self, d: Delivery) -> Job {
        let m = self.get(d.slot);
        Job {
            d,
            view: *m.lent_view(),
            poison: m.poison,
        }
    }

    pub fn alloc(&mut self, m: Msg) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(s) => {
                self.msgs[s as usize] = m;
                s
            }
            None => {
                self.msgs.push(m);
                (self.msgs.len() - 1) as u32
            }
        }
    }

    /// Frees `slot`; returns the id of the message that was in it (read in the same lookup, for
    /// a caller that needs it: the ack's `settle`).
    // Inlined: a few stores, once per settled message, where the call frame cost as much.
    #[inline]
    pub fn release(&mut self, slot: u32) -> u64 {
        if !self.uncounted.is_empty() {
            self.forget_uncounted(slot);
        }
        let m = &mut self.msgs[slot as usize];
        debug_assert!(m.loc != Loc::Free);
        m.loc = Loc::Free;
        let id = m.view.id;
        self.free.push(slot);
        self.live -= 1;
        id
    }

    #[cold]
    #[inline(never)]
    fn forget_uncounted(&mut self, slot: u32) {
        self.uncounted.remove(&self.msgs[slot as usize].view.id);
    }

    /// The deliveries of the message in `slot` the broker counts against its redelivery limit.
    #[inline]
    pub fn counted(&self, slot: u32) -> u32 {
        let m = &self.msgs[slot as usize];
        if self.uncounted.is_empty() {
            return m.deliveries;
        }
        let n = self.uncounted.get(&m.view.id).copied().unwrap_or(0);
        m.deliveries.saturating_sub(n)
    }

    /// The current delivery of the message in `slot` does not count against the limit.
    pub fn uncount(&mut self, slot: u32) {
        *self
            .uncounted
            .entry(self.msgs[slot as usize].view.id)
            .or_insert(0) += 1;
    }

    #[inline]
    pub fn get(&self, slot: u32) -> &Msg {
        &self.msgs[slot as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> &mut Msg {
        &mut self.msgs[slot as usize]
    }

    /// Whether `d` still names the current delivery of its message to `consumer`.
    #[inline]
    pub fn valid(&self, d: &Delivery, consumer: u32) -> bool {
        let m = &self.msgs[d.slot as usize];
        m.view.id == d.id
            && m.loc
                == Loc::Delivered {
                    broker: d.broker,
                    consumer,
                    delivery: d.delivery,
                }
    }
}

/// The message in hand: its delivery, and the consumer's own copy of the message (a consumer
/// that lost its connection goes on with it even after the broker gave it to someone else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Job {
    pub d: Delivery,
    pub view: MsgView,
    pub poison: bool,
}

/// What the session is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    /// Processing; `step` is the handler's continuation step.
    Serving {
        job: Job,
        step: u32,
    },
    /// Waiting in `begin` (e.g. for a lock) until the strategy unparks it or `serial`'s timeout.
    Parked {
        job: Job,
        serial: u32,
    },
    /// Blocking redelivery: holding the delivery until the delay is over.
    Waiting {
        d: Delivery,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view a dispatch lends says how often the message was redelivered: one less than its
    /// deliveries, through a delivery, one taken back, and a copy that starts over.
    #[test]
    fn the_view_follows_the_deliveries() {
        let r = MsgRef {
            id: 7,
            key: 3,
            seq: 1,
        };
        let mut m = Msg::new(r, 100, 2, false, true, Loc::Queued(0));
        assert_eq!((m.deliveries(), m.view.redeliveries), (0, 0));
        assert_eq!((m.r(), m.view.group, m.view.timestamp), (r, Some(3), 100));
        assert_eq!(m.delivered(), 1);
        assert_eq!(m.view.redeliveries, 0);
        assert_eq!(m.delivered(), 2);
        assert_eq!(m.view.redeliveries, 1);
        m.undelivered();
        assert_eq!((m.deliveries(), m.view.redeliveries), (1, 0));
        m.delivered();
        m.delivered();
        let copy = m.fresh_copy(9, Loc::Producer(2));
        assert_eq!((copy.deliveries(), copy.view.redeliveries), (0, 0));
        assert_eq!(
            (copy.r().id, copy.r().seq, copy.loc),
            (9, 1, Loc::Producer(2))
        );
        assert_eq!(Msg::new(r, 0, 0, false, false, Loc::Free).view.group, None);
    }
}
