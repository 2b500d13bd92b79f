//! Batch-job hosting: a job started every interval that drains the queue and stops; in-job
//! retries on a resource outage; a poison message rolled back to the head until its backout
//! threshold.

use super::broker::{Delay, PutBack};
use super::events::Ev;
use super::state::Delivery;
use super::walk::walk;
use super::Engine;
use crate::history::{Event, FailReason, MsgRef, Observer};

impl<O: Observer> Engine<'_, O> {
    /// A scheduled batch run starts: the job connects and drains the queue.
    pub(super) fn job_start(&mut self, c: u32) {
        walk!();
        let interval = self
            .sc
            .consumers
            .batch
            .as_ref()
            .map_or(1, |b| b.interval.0.max(1));
        self.q.push(self.now + interval, Ev::JobStart(c));
        let cs = &mut self.w.consumers[c as usize];
        if !cs.start_job() {
            return;
        }
        let epoch = cs.epoch();
        self.emit(Event::JobStart {
            t: self.now,
            consumer: c,
        });
        self.consumer_reconnect(c, epoch);
        // Nothing delivered on connect: the queue is empty (or the broker unreachable) this run.
        self.start_next(c);
        if !self.w.consumers[c as usize].is_connected() && self.w.consumers[c as usize].in_job() {
            self.end_job(c, true);
        }
    }

    /// The run is over: drained, or given up on a resource outage (the rest waits for the next).
    pub(super) fn end_job(&mut self, c: u32, gave_up: bool) {
        walk!();
        self.w.consumers[c as usize].stop_job();
        self.emit(Event::JobEnd {
            t: self.now,
            consumer: c,
            gave_up,
        });
        self.detach(c, false);
    }

    /// A batch job's error handling ([MDB-or-batch]): retry a resource outage in the job with a
    /// growing delay, then stop the run; roll a poison message back to the queue (where the
    /// broker puts a failed one, `requeue`), where the next read finds it again until the backout
    /// threshold moves it to the backout queue. Every rollback counts toward that threshold as a
    /// listener's failure does ([`Engine::failed_deliveries`]), so a long outage can back out
    /// innocent messages.
    pub(super) fn batch_failed(&mut self, c: u32, d: Delivery, msg: MsgRef, reason: FailReason) {
        walk!();
        self.w.consumers[c as usize].go_idle();
        self.sync_load(c);
        if !self.w.slab.valid(&d, c) || !self.w.brokers[d.broker as usize].is_up() {
            self.start_next(c);
            return;
        }
        let job = self
            .sc
            .consumers
            .batch
            .as_ref()
            .expect("batch mode has a batch table");
        let r = self.cfg.redelivery;
        let deliveries = self.failed_deliveries(d.slot);
        if r.gives_up(deliveries) && !r.redrive_on_receive {
            self.give_up(d.broker, d.slot);
            self.dispatch(d.broker);
            self.start_next(c);
            return;
        }
        let cs = &mut self.w.consumers[c as usize];
        let retry = if reason == FailReason::Outage {
            cs.retry_in_job(job.retries)
        } else {
            None
        };
        if let Some(n) = retry {
            let delay = (job.retry_delay.0 as f64 * job.retry_multiplier.powi(n as i32 - 1))
                .min(3.2e15) as u64;
            cs.hold_for_retry(d);
            let epoch = cs.epoch();
            self.sync_load(c);
            self.emit(Event::Redelivery {
                t: self.now,
                msg,
                delay_us: delay,
                blocking: true,
            });
            self.q
                .push(self.now + delay, Ev::BlockingRetry { c, epoch });
            return;
        }
        // SQS: the job does not delete it; it is received again (or redriven, past the limit)
        // once the visibility timeout started by its receive ends [Q4][Q8]. Else a rollback:
        // the message returns to the queue at once, where the broker puts a failed one back
        // (`requeue`: the head, or its original place).
        self.returned_failed(d.slot);
        let how = if r.until_lease_end {
            PutBack {
                at: r.requeue,
                holder: Some(c),
                live_broker: true,
                delay: Delay::Invisible,
                announce: !r.gives_up(deliveries),
            }
        } else {
            PutBack {
                at: r.requeue,
                holder: Some(c),
                live_broker: true,
                delay: Delay::None,
                announce: true,
            }
        };
        self.put_back_one(d, how);
        if reason == FailReason::Outage {
            self.end_job(c, true);
        } else {
            self.dispatch(d.broker);
            self.start_next(c);
        }
    }
}
