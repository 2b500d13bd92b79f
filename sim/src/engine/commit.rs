//! Offset commits (`[consumers] commit = "batch"` or `"interval"`): a log's consumer does not ack
//! each record; it commits its position now and then, and that commit settles every record it
//! processed since the last one. Until then a processed record is still the consumer's: if the
//! consumer dies, or its partition moves to another member, the group resumes from the last
//! commit and the record is delivered again (a duplicate). A commit of records that are no longer
//! the consumer's (a zombie whose partition moved) is refused.
//!
//! Both are made at a poll: the moment a consumer has processed everything it received and
//! goes back to `poll()`. `batch` commits there every time (`commitSync()` after the loop over a
//! poll's records; Spring Kafka's `AckMode.BATCH`, committed at the top of the container's next
//! `pollAndInvoke`). `interval` is Kafka's auto-commit, which the client makes only inside
//! `poll()` (`ConsumerCoordinator.poll` -> `maybeAutoCommitOffsetsAsync`), and only once
//! `auto.commit.interval.ms` has passed since the last one (the timer starts when the member
//! joins: `onJoinComplete` resets it): a consumer busy on one poll's records commits none of
//! them until it polls again, however long they take. One waiting in `poll()` for records wakes
//! up when the interval is over (`timeToNextPoll` bounds its wait) and commits then
//! (`Ev::CommitDue`) [K3][K9].

use super::events::Ev;
use super::walk::walk;
use super::Engine;
use crate::history::{Event, Observer};
use crate::scenario::Commit;

impl<O: Observer> Engine<'_, O> {
    /// Consumer `c` has nothing left of its last poll and polls again: it commits what it
    /// processed (`batch`), or auto-commits if the interval is over (`interval`).
    pub(super) fn at_poll(&mut self, c: u32) {
        walk!();
        match self.cfg.commit {
            Commit::Batch => self.commit_now(c),
            Commit::Interval => self.auto_commit_at_poll(c),
            Commit::Each => {}
        }
    }

    /// Consumer `c`, waiting in `poll()` under auto-commit, gets records. Each time the interval
    /// ran out while it waited, its `poll()` woke up, committed and started the next interval
    /// (with nothing new, a commit of the same offsets): its timer is where those wake-ups left
    /// it. A commit still due at this instant is made before the records are returned.
    pub(super) fn auto_commit_leaving_poll(&mut self, c: u32) {
        walk!();
        let interval = self.cfg.commit_interval.0.max(1);
        let cs = &mut self.w.consumers[c as usize];
        let due = cs.auto_commit_due();
        if self.now < due {
            return;
        }
        if cs.has_uncommitted() {
            cs.auto_committed(self.now + interval);
            self.commit_now(c);
        } else {
            cs.auto_committed(due + ((self.now - due) / interval + 1) * interval);
        }
    }

    /// Consumer `c` is in `poll()` under auto-commit: it commits if the interval since its last
    /// auto-commit is over (and starts the next interval), else it wakes up when it is over,
    /// should it still be waiting in `poll()` then.
    fn auto_commit_at_poll(&mut self, c: u32) {
        let cs = &mut self.w.consumers[c as usize];
        let due = cs.auto_commit_due();
        if self.now >= due {
            cs.auto_committed(self.now + self.cfg.commit_interval.0);
            self.commit_now(c);
        } else if cs.has_uncommitted() && cs.arm_commit() {
            let epoch = cs.epoch();
            self.q.push(due, Ev::CommitDue { c, epoch });
        }
    }

    /// Consumer `c`'s auto-commit interval (of process incarnation `epoch`) is over: if it is
    /// waiting in `poll()`, it commits now; if it is busy on a poll's records, its next poll will.
    pub(super) fn commit_due(&mut self, c: u32, epoch: u32) {
        walk!();
        let cs = &self.w.consumers[c as usize];
        if !cs.alive_in(epoch) {
            return;
        }
        if self.defer_if_paused(c, Ev::CommitDue { c, epoch }) {
            return;
        }
        let cs = &mut self.w.consumers[c as usize];
        cs.disarm_commit();
        if cs.is_drained() {
            self.auto_commit_at_poll(c);
        }
    }

    /// Consumer `c` commits what it processed: each record still delivered to it is acked and
    /// settled; each one the broker has taken back meanwhile is refused (`ack_fail`).
    pub(super) fn commit_now(&mut self, c: u32) {
        walk!();
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
