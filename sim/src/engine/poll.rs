//! A poll loop's deadline (`[consumers] max_poll_interval`, Kafka's `max.poll.interval.ms`): a
//! consumer that spends longer than that on the records of one poll is dropped from its group
//! by its own heartbeat thread, which is alive and so keeps the session open past
//! `failure_detection`. The group rebalances at once; the process does not know and goes on with
//! every record it polled (its own copies now: written late, beside their new owner's), and at
//! its next poll it joins again, its commit of them refused [K3][K5].

use super::events::Ev;
use super::state::Job;
use super::walk::walk;
use super::Engine;
use crate::history::Observer;
use crate::scenario::Commit;

impl<O: Observer> Engine<'_, O> {
    /// Consumer `c` just polled a batch: its deadline for this poll, `max_poll` from now,
    /// starts; under auto-commit, the poll commits first if its interval is over.
    #[inline(never)]
    pub(super) fn polled(&mut self, c: u32) {
        walk!();
        if let Some(limit) = self.max_poll {
            let cs = &mut self.w.consumers[c as usize];
            let serial = cs.next_poll();
            self.q
                .push(self.now + limit, Ev::PollDeadline { c, serial });
        }
        if self.cfg.commit == Commit::Interval {
            self.auto_commit_leaving_poll(c);
        }
    }

    /// The deadline of consumer `c`'s poll `serial`: if it is still on that poll's records, the
    /// group drops it and it keeps them.
    pub(super) fn poll_overdue(&mut self, c: u32, serial: u32) {
        walk!();
        let cs = &self.w.consumers[c as usize];
        if !cs.on_poll(serial) || !cs.is_up() || !cs.is_connected() {
            return;
        }
        // Back in `poll()` (nothing left of the batch): within the deadline.
        if cs.is_drained() {
            return;
        }
        // A stopped process's heartbeat thread is stopped too (its session timeout applies).
        if self.defer_if_paused(c, Ev::PollDeadline { c, serial }) {
            return;
        }
        let kept: Vec<Job> = self.w.consumers[c as usize]
            .received()
            .map(|d| self.job_of(d))
            .collect();
        self.lose_connection_keep_work(c);
        let cs = &mut self.w.consumers[c as usize];
        for job in kept {
            cs.keep_own_copy(job.d);
            self.w.orphans.push((c, job));
        }
        cs.dropped_from_group();
        self.sync_load(c);
        self.apply_control();
        if self.w.consumers[c as usize].is_idle() {
            self.start_next(c);
        }
    }
}
