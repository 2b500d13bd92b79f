//! Delivery leases (`[lease]`): a delivery is the consumer's only until its lease ends (SQS
//! visibility timeout, Service Bus lock duration, Pulsar ack timeout). Then the broker makes the
//! message deliverable again, counted as a delivery, while the first consumer may still be
//! working on it: both process it, and the first one's late ack (delete) is refused. A consumer
//! working on a message may renew its lease (`renew_every`, up to `renew_max` after the
//! delivery); a paused process cannot, so a pause past the lease hands its work to another.
//!
//! A received message the consumer has not started when its lease ends stays in its buffer as
//! the consumer's own copy (`World::orphans`): it is processed later, as a client that received a
//! batch goes through it.

use super::consumer::Expiry;
use super::events::Ev;
use super::state::{Delivery, Job, Loc};
use super::Engine;
use crate::history::{Event, MsgRef, Observer};

impl<O: Observer> Engine<'_, O> {
    /// A delivery of the message in `slot` was just made: its lease starts.
    #[inline]
    pub(super) fn lease_start(&mut self, slot: u32, id: u64) {
        if let Some(l) = self.cfg.lease {
            let due = self.now + l.duration.0;
            let m = self.w.slab.get_mut(slot);
            m.lease_due = due;
            m.leased_at = self.now;
            self.q.push(due, Ev::LeaseExpire { slot, id });
        }
    }

    /// Consumer `c` starts working on `job`: with renewal on, it will extend the lease.
    #[inline]
    pub(super) fn lease_work_started(&mut self, job: &Job) {
        if let Some(every) = self.cfg.lease.and_then(|l| l.renew_every) {
            self.q.push(
                self.now + every.0,
                Ev::LeaseRenew {
                    slot: job.d.slot,
                    id: job.d.id,
                },
            );
        }
    }

    /// The lease of the current delivery of `slot` ends (unless renewed, settled or redelivered
    /// meanwhile): the broker takes the message back.
    pub(super) fn lease_expire(&mut self, slot: u32, id: u64) {
        let m = self.w.slab.get(slot);
        let Loc::Delivered {
            broker: b,
            consumer: c,
            delivery,
        } = m.loc
        else {
            return;
        };
        if m.r.id != id || m.lease_due != self.now {
            return;
        }
        let (msg, deliveries, poison) = (m.r, self.w.slab.counted(slot), m.poison);
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
        if m.r.id != id {
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

    /// Consumer `c`'s ack (delete) of `d` reached a broker that no longer counts the delivery as
    /// its: with leases, the broker refuses it (recorded); else the connection it came over is
    /// gone and the ack with it.
    #[cold]
    #[inline(never)]
    pub(super) fn ack_refused(&mut self, c: u32, d: Delivery, msg: MsgRef) {
        let connected = self.w.consumers[c as usize].connected_to() == Some(d.broker);
        if self.cfg.lease.is_some() && connected && self.w.brokers[d.broker as usize].is_up() {
            self.emit(Event::AckFail {
                t: self.now,
                msg,
                consumer: c,
            });
        }
    }

    /// The consumer's own copy of a message whose lease ended before it started it.
    pub(super) fn take_orphan(&mut self, c: u32, id: u64) -> Option<Job> {
        let i = self
            .w
            .orphans
            .iter()
            .position(|(oc, j)| *oc == c && j.d.id == id)?;
        Some(self.w.orphans.swap_remove(i).1)
    }

    /// Consumer `c` lost its buffer (it left its broker): its copies go too.
    pub(super) fn drop_orphans(&mut self, c: u32) {
        if !self.w.orphans.is_empty() {
            self.w.orphans.retain(|(oc, _)| *oc != c);
        }
    }
}
