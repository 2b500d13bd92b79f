//! Offset commits (`[consumers] commit = "batch"` or `"interval"`): a log's consumer does not ack
//! each record; it commits its position now and then, and that commit settles every record it
//! processed since the last one. Until then a processed record is still the consumer's: if the
//! consumer dies, or its partition moves to another member, the group resumes from the last
//! commit and the record is delivered again (a duplicate). A commit of records that are no longer
//! the consumer's (a zombie whose partition moved) is refused.

use super::events::Ev;
use super::state::Delivery;
use super::Engine;
use crate::history::{Event, MsgRef, Observer};
use crate::scenario::Commit;

impl<O: Observer> Engine<'_, O> {
    /// Consumer `c` processed the record of delivery `d`; it is settled by its next commit. It
    /// no longer counts against the consumer's fetch (`max.poll.records`), so it may fetch more.
    pub(super) fn processed(&mut self, c: u32, d: Delivery, msg: MsgRef) {
        let cs = &mut self.w.consumers[c as usize];
        cs.hold_for_commit(d, msg);
        match self.cfg.commit {
            Commit::Batch if !cs.has_buffered() => {
                self.sync_load(c);
                self.commit_now(c);
            }
            Commit::Interval => {
                if cs.arm_commit() {
                    let epoch = cs.epoch();
                    self.q.push(
                        self.now + self.cfg.commit_interval.0,
                        Ev::CommitDue { c, epoch },
                    );
                }
                self.sync_load(c);
            }
            _ => self.sync_load(c),
        }
        if let Some(b) = self.w.consumers[c as usize].connected_to() {
            self.dispatch(b);
        }
    }

    /// The periodic commit of consumer `c` (of process incarnation `epoch`).
    pub(super) fn commit_due(&mut self, c: u32, epoch: u32) {
        let cs = &self.w.consumers[c as usize];
        if !cs.alive_in(epoch) {
            return;
        }
        if self.defer_if_paused(c, Ev::CommitDue { c, epoch }) {
            return;
        }
        self.w.consumers[c as usize].disarm_commit();
        self.commit_now(c);
    }

    /// Consumer `c` commits what it processed: each record still delivered to it is acked and
    /// settled; each one the broker has taken back meanwhile is refused (`ack_fail`).
    pub(super) fn commit_now(&mut self, c: u32) {
        let cs = &mut self.w.consumers[c as usize];
        if !cs.has_uncommitted() || !cs.is_up() || cs.is_paused() {
            return;
        }
        let mut records = cs.take_uncommitted();
        self.emit(Event::Commit {
            t: self.now,
            consumer: c,
            records: records.len() as u32,
        });
        let mut settled_at = None;
        for &(d, msg) in &records {
            if self.w.slab.valid(&d, c) && self.w.brokers[d.broker as usize].is_up() {
                self.emit(Event::Ack {
                    t: self.now,
                    msg,
                    consumer: c,
                });
                self.settle(d.slot);
                settled_at = Some(d.broker);
            } else {
                self.emit(Event::AckFail {
                    t: self.now,
                    msg,
                    consumer: c,
                });
            }
        }
        records.clear();
        self.w.consumers[c as usize].reuse_uncommitted(records);
        self.apply_control();
        if let Some(b) = settled_at {
            self.dispatch(b);
        }
    }
}
