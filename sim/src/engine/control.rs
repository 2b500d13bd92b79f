//! Carrying out what strategies request (`Control`): wake-ups, redispatch, reassignments, unparks,
//! applies and discards outside a consumer's transaction, source reads; and the bookkeeping of
//! messages a strategy took over.

use super::events::Ev;
use super::state::{Held, Loc};
use super::Engine;
use crate::history::{DiscardReason, Event, MsgRef, Observer};
use crate::strategy::{MsgView, Request, WorldChange};

impl<O: Observer> Engine<'_, O> {
    /// Carries out what a strategy hook asked for.
    #[inline]
    pub(super) fn apply_control(&mut self) {
        // Called after every hook; most hooks ask for nothing, so only the flag test is inlined.
        if !self.ctl.is_empty() {
            self.apply_control_slow();
        }
    }

    #[inline(never)]
    fn apply_control_slow(&mut self) {
        let mut requests = std::mem::take(&mut self.ctl.requests);
        let redispatch = std::mem::take(&mut self.ctl.redispatch);
        for &r in &requests {
            match r {
                Request::Wake { at, token } => self.q.push(at.max(self.now), Ev::Wake(token)),
                Request::Reassigned { broker, consumer } => self.emit(Event::Reassign {
                    t: self.now,
                    broker,
                    consumer,
                }),
                Request::SourceRead { key, consumer, seq } => self.emit(Event::SourceRead {
                    t: self.now,
                    key,
                    consumer,
                    seq,
                }),
                Request::Apply {
                    msg,
                    state_seq,
                    worker,
                } => self.apply_for_strategy(msg, state_seq, worker),
                Request::Discard(msg) => self.discard_for_strategy(msg),
                Request::Unpark(c) => self.unpark(c),
                Request::Commit(c) => self.commit_now(c),
                Request::EndLeases(c) => self.end_leases(c),
            }
        }
        // Give the buffer back (nothing above calls a strategy hook, so nothing new was asked
        // meanwhile), so that a lock hand-over does not allocate on every release.
        debug_assert!(self.ctl.requests.is_empty());
        requests.clear();
        self.ctl.requests = requests;
        if redispatch {
            for b in 0..self.w.brokers.len() as u16 {
                self.dispatch(b);
            }
        }
    }

    /// [`Request::Apply`]: a write outside any consumer's transaction.
    fn apply_for_strategy(&mut self, msg: MsgView, state_seq: u32, worker: u32) {
        let r = msg.msg_ref();
        if let Some(h) = self.w.held.remove(&msg.id) {
            self.mark_applied(h.slot, msg.id);
        }
        self.write_row(msg.key, state_seq, msg.timestamp);
        self.emit(Event::Apply {
            t: self.now,
            msg: r,
            consumer: worker,
            state_seq,
        });
    }

    /// [`Request::Discard`]: only a message the strategy still held (neither applied nor
    /// discarded before) is lost by this: a discarded copy of an applied message is no loss. One
    /// whose delivery the broker has not settled yet may still come back (if the ack is lost): it
    /// is lost when the ack settles it.
    fn discard_for_strategy(&mut self, msg: MsgView) {
        let Some(h) = self.w.held.get_mut(&msg.id) else {
            return;
        };
        let m = self.w.slab.get(h.slot);
        if m.r.id == msg.id && m.loc != Loc::Free {
            h.dropped = true;
            return;
        }
        self.w.held.remove(&msg.id);
        let r = msg.msg_ref();
        self.emit(Event::Discard {
            t: self.now,
            msg: r,
            reason: DiscardReason::BufferLost,
        });
    }

    /// Forgets that the strategy holds message `id` (it was applied, rejected or dead-lettered).
    /// Most strategies never take messages over: skip the map lookup when it is empty.
    #[inline]
    pub(super) fn unhold(&mut self, id: u64) {
        if !self.w.held.is_empty() {
            self.w.held.remove(&id);
        }
    }

    /// Notes that a copy of message `id` (in `slot`, if it is still there) has been applied.
    pub(super) fn mark_applied(&mut self, slot: u32, id: u64) {
        let m = self.w.slab.get_mut(slot);
        if m.r.id == id && m.loc != Loc::Free {
            m.applied = true;
        }
    }

    /// The strategy took message `msg` (delivered in `slot`) over: it holds it until it applies
    /// or discards it. A copy of a message already applied, or one the broker has settled
    /// meanwhile (its slot freed or reused: acked, dropped, dead-lettered or lost while this
    /// consumer held a copy whose lease had ended), is not held: it can no longer be pending,
    /// only duplicated or written late.
    pub(super) fn take_over(&mut self, slot: u32, msg: MsgRef) {
        let m = self.w.slab.get(slot);
        if m.r.id != msg.id || m.loc == Loc::Free || m.applied {
            return;
        }
        self.w.held.insert(
            msg.id,
            Held {
                msg,
                slot,
                dropped: false,
            },
        );
    }

    /// Writes the target row of `key` with the state of `state_seq`.
    pub(super) fn write_row(&mut self, key: u32, state_seq: u32, timestamp: u64) {
        let row = &mut self.w.rows[key as usize];
        row.state = state_seq + 1;
        row.timestamp = timestamp;
        row.version += 1;
    }

    /// Tells the strategy about a change in the world, and carries out what it asks.
    pub(super) fn world_change(&mut self, change: WorldChange) {
        self.strategy.on_world(self.now, change, &mut self.ctl);
        self.apply_control();
    }
}
