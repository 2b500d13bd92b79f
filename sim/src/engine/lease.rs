//! Delivery leases (`[lease]`): a delivery is the consumer's only until its lease ends (SQS
//! visibility timeout, Service Bus lock duration, Pulsar ack timeout). Then the broker makes the
//! message deliverable again, counted as a delivery, while the first consumer may still be
//! working on it: both process it, and the first one's late ack (delete) is refused. A consumer
//! working on a message may renew its lease (`renew_every`, up to `renew_max` after the
//! delivery); a paused process cannot, so a pause past the lease hands its work to another.
//!
//! A received message the consumer has not started when its lease ends stays in its buffer as
//! the consumer's own copy (`World::orphans`): it is processed later, as a client that received a
//! batch goes through it. A lease starts where the broker hands the message over (`broker.rs`),
//! and its renewal timer where the consumer starts working on it (`consumer.rs`); this file
//! handles their ends.

use super::consumer::Expiry;
use super::events::Ev;
use super::state::{Delivery, Job, Loc};
use super::walk::walk;
use super::Engine;
use crate::history::{Event, Observer};

impl<O: Observer> Engine<'_, O> {
    /// The lease of the current delivery of `slot` ends (unless renewed, settled or redelivered
    /// meanwhile): the broker takes the message back.
    pub(super) fn lease_expire(&mut self, slot: u32, id: u64) {
        walk!();
        let m = self.w.slab.get(slot);
        let Loc::Delivered {
            broker: b,
            consumer: c,
            delivery,
        } = m.loc
        else {
            return;
        };
        if m.view.id != id || m.lease_due != self.now {
            return;
        }
        let (msg, deliveries, poison) = (m.r(), self.w.slab.counted(slot), m.poison);
        self.emit(Event::Expire {
            t: self.now,
            msg,
            broker: b,
            consumer: c,
        });
        let d = Delivery {
            slot,
            id,
            delivery,
            broker: b,
        };
        // A received message not started yet stays with the consumer, as its own copy.
        match self.w.consumers[c as usize].lease_ended(d) {
            Expiry::OwnCopy => {
                let view = self.view(slot);
                self.w.orphans.push((c, Job { d, view, poison }));
            }
            // A dead process's receives (crash detection by timeout) are simply gone.
            Expiry::Dropped => self.sync_load(c),
            Expiry::NotReceived => {}
        }
        let r = &self.cfg.redelivery;
        // SQS redrives on the next receive ([`Self::hand_over`]), not when the lease ends.
        if r.gives_up(deliveries) && !r.redrive_on_receive && self.w.brokers[b as usize].is_up() {
            self.give_up(b, slot);
        } else {
            self.requeue(b, slot);
        }
        self.apply_control();
        self.dispatch(b);
    }

    /// [`crate::strategy::Control::end_leases`]: every delivery consumer `c` holds (in hand,
    /// received, or acked with the ack still on its way) has its lease end now. The expiries are
    /// events at this instant, after the one being handled (no strategy hook runs from here).
    pub(super) fn end_leases(&mut self, c: u32) {
        walk!();
        if self.cfg.lease.is_none() {
            return;
        }
        let cs = &self.w.consumers[c as usize];
        for d in cs.held() {
            if !self.w.slab.valid(&d, c) {
                continue;
            }
            let m = self.w.slab.get_mut(d.slot);
            if m.lease_due == self.now {
                continue;
            }
            m.lease_due = self.now;
            self.q.push(
                self.now,
                Ev::LeaseExpire {
                    slot: d.slot,
                    id: d.id,
                },
            );
        }
    }

    /// The consumer working on the message in `slot` extends its lease (a paused process only
    /// when it runs again, if the lease has not ended by then).
    pub(super) fn lease_renew(&mut self, slot: u32, id: u64) {
        walk!();
        let Some(l) = self.cfg.lease else { return };
        let m = self.w.slab.get(slot);
        let Loc::Delivered {
            consumer: c,
            delivery,
            ..
        } = m.loc
        else {
            return;
        };
        if m.view.id != id {
            return;
        }
        let cs = &self.w.consumers[c as usize];
        if !cs.working_on(slot, delivery) || !cs.is_up() {
            return;
        }
        if self.defer_if_paused(c, Ev::LeaseRenew { slot, id }) {
            return;
        }
        let m = self.w.slab.get_mut(slot);
        if l.renew_max
            .is_some_and(|max| self.now >= m.leased_at + max.0)
        {
            return;
        }
        let due = self.now + l.duration.0;
        m.lease_due = due;
        self.q.push(due, Ev::LeaseExpire { slot, id });
        if let Some(every) = l.renew_every {
            self.q.push(self.now + every.0, Ev::LeaseRenew { slot, id });
        }
    }
}
