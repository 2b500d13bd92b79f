//! Rollback and redelivery: a failed delivery is dead-lettered or dropped once the redelivery limit
//! is reached, else redelivered after the policy's delay, held by the consumer (blocking: its session waits)
//! or by the broker (non-blocking: later messages go on).

use super::broker::{Delay, PutBack};
use super::events::Ev;
use super::state::{Delivery, Job, Loc};
use super::walk::walk;
use super::Engine;
use crate::history::{Event, FailReason, Observer};
use crate::scenario::{Commit, PartialFailure, RedeliveryMode};

/// Failures chained in one instant before the next dispatch waits for the event queue.
pub(super) const MAX_FAIL_DEPTH: u32 = 32;

impl<O: Observer> Engine<'_, O> {
    /// Delivery `job` of consumer `c` failed: rolled back, then redelivered or given up on.
    pub(super) fn failed(&mut self, c: u32, job: Job, reason: FailReason) {
        walk!();
        self.fail(c, job, reason);
    }

    /// The broker's next dispatch after a failure: at once, or, at the end of a chain of more
    /// than [`MAX_FAIL_DEPTH`] failures each set off by the one before in the same instant (a
    /// handler that fails in `begin` during an outage, with zero-delay non-blocking redelivery:
    /// fail, requeue, dispatch, fail, ...), from the event queue at the same instant (events
    /// already due then may go first), so that such a loop is made of events, which the run's
    /// bounds count (`max_events`, the stuck check).
    fn dispatch_after_failure(&mut self, b: u16) {
        if self.failures_open < MAX_FAIL_DEPTH {
            self.dispatch(b);
        } else {
            self.q.push(self.now, Ev::Dispatch(b));
        }
    }

    fn fail(&mut self, c: u32, job: Job, reason: FailReason) {
        let d = job.d;
        let msg = job.view.msg_ref();
        self.emit(Event::Rollback {
            t: self.now,
            msg,
            consumer: c,
            reason,
        });
        if self.w.consumers[c as usize].in_job() {
            self.batch_failed(c, d, msg, reason);
            return;
        }
        if self.cfg.commit_before_retry {
            // Spring Kafka's container commits what the poll processed before its error
            // handler seeks the failed record back (`invokeErrorHandler`) [K8].
            self.commit_now(c);
            // What the commit set off comes before the rollback goes on, as the call did.
            self.flush();
        }
        let cs = &mut self.w.consumers[c as usize];
        let failures = cs.record_failure();
        cs.go_idle();
        let n = self.sc.consumers.suspend_after_failures;
        // The endpoint stops after this failure (WebSphere's "sequential delivery failures"): it
        // must not start another message first, so nothing is dispatched to it below.
        let suspend = n > 0 && failures >= n && !cs.is_suspended();
        self.sync_load(c);
        // `partial_failure = "fail_rest"`: the rest of what it received goes back unprocessed,
        // before the failed message is requeued (so a head requeue keeps production order);
        // `"rollback"` (non-blocking): the session cancels its whole window back, uncounted.
        let window_back = match self.cfg.partial_failure {
            PartialFailure::Continue => None,
            PartialFailure::FailRest => Some(false),
            PartialFailure::Rollback => {
                (self.cfg.redelivery.mode == RedeliveryMode::NonBlocking).then_some(true)
            }
            PartialFailure::WholeBatch => Some(false),
        };
        let gave_back = window_back.is_some() && self.w.consumers[c as usize].has_rest_of_batch();
        match window_back {
            _ if !gave_back => {}
            Some(true) => self.cancel_window(c),
            _ if self.cfg.partial_failure == PartialFailure::WholeBatch => self.abandon_batch(c),
            _ => {
                self.give_back_rest(c);
                // The batch ends here: what it processed is settled by the batch's commit (Lambda
                // deletes the messages not named in `batchItemFailures`), not left to expire.
                if self.cfg.commit == Commit::Batch {
                    self.commit_now(c);
                }
            }
        }
        // What giving the window back set off (requeues, dispatches) comes first.
        self.flush();
        // A consumer whose connection is gone cannot roll back at the broker: the broker already
        // took the message back when the connection dropped.
        if self.w.slab.valid(&d, c) && self.w.brokers[d.broker as usize].is_up() {
            let r = self.cfg.redelivery;
            let deliveries = self.failed_deliveries(d.slot);
            self.returned_failed(d.slot);
            if r.gives_up(deliveries) && !r.redrive_on_receive {
                self.give_up(d.broker, d.slot);
                if !suspend {
                    // Skipped: with nothing else left of its poll the consumer polls again,
                    // and commits there as after a record it processed (`commit.rs`).
                    if self.cfg.commit != Commit::Each && self.w.consumers[c as usize].is_drained()
                    {
                        self.at_poll(c);
                    }
                    self.dispatch_after_failure(d.broker);
                }
            } else {
                let delay = self.invisible_for(d.slot, deliveries);
                let blocking = r.mode == RedeliveryMode::Blocking;
                // Past the limit (SQS): visible again, then redriven by the next receive, not
                // redelivered.
                if !r.gives_up(deliveries) {
                    self.emit(Event::Redelivery {
                        t: self.now,
                        msg,
                        delay_us: delay,
                        blocking,
                    });
                }
                if blocking {
                    let cs = &mut self.w.consumers[c as usize];
                    cs.hold_for_retry(d);
                    let epoch = cs.epoch();
                    self.q
                        .push(self.now + delay, Ev::BlockingRetry { c, epoch });
                    self.sync_load(c);
                } else {
                    if r.delay_in_client && delay != 0 {
                        // The client's timer: the message stays the consumer's unacked one.
                        let due = self.now + delay;
                        self.w.consumers[c as usize].nack_in_client(d, due);
                        let (slot, id) = (d.slot, d.id);
                        self.q.push(due, Ev::RedeliveryDue { slot, id });
                    } else {
                        // Without a delay back in its queue (at the head, unless `requeue` says
                        // otherwise) before the next dispatch decision, so nothing overtakes it
                        // in the same instant; with one, held at the broker until it ends.
                        let how = PutBack {
                            at: r.requeue,
                            holder: Some(c),
                            live_broker: true,
                            delay: Delay::Invisible,
                            announce: false,
                        };
                        self.put_back_one(d, how);
                    }
                    if !suspend {
                        self.dispatch_after_failure(d.broker);
                    }
                }
            }
        }
        if gave_back && !self.w.slab.valid(&d, c) {
            self.dispatch_after_failure(d.broker);
        }
        if suspend {
            self.flush();
            self.suspend(c);
        }
    }

    /// Consumer `c` gives every message it received and has not started back to the broker
    /// (AWS Powertools' `SqsFifoPartialProcessor`: the rest of a batch fails with the first
    /// failure, so that nothing overtakes it).
    fn give_back_rest(&mut self, c: u32) {
        let cs = &mut self.w.consumers[c as usize];
        // Copies of expired receives are not the broker's to take back: they are dropped.
        let rest = cs.take_buffered();
        self.drop_orphans(c);
        self.sync_load(c);
        self.return_deliveries(rest);
    }

    /// Consumer `c`'s invocation fails as a whole (`partial_failure = "whole_batch"`): nothing of
    /// its batch is settled. The rest (not processed) and the messages processed since its last
    /// commit stay with the broker as the failed one does: invisible until their lease ends
    /// (SQS), then received again and counted, the processed ones a second time (duplicates).
    /// AWS Lambda's SQS event source: "all messages in that batch become visible in the queue
    /// again by default, including messages that Lambda processed successfully" unless the
    /// function reports batch item failures (Lambda developer guide, "Handling errors for an
    /// SQS event source in Lambda").
    fn abandon_batch(&mut self, c: u32) {
        let cs = &mut self.w.consumers[c as usize];
        // Copies of expired receives are not the broker's to take back: they are dropped.
        let mut back = cs.take_buffered();
        back.extend(cs.drain_uncommitted());
        self.drop_orphans(c);
        self.sync_load(c);
        let how = PutBack {
            at: self.cfg.redelivery.requeue,
            holder: Some(c),
            live_broker: true,
            delay: Delay::Invisible,
            announce: true,
        };
        self.put_back(back, how);
    }

    /// Consumer `c`'s session rolls back (`partial_failure = "rollback"`): every message it
    /// received and has not started goes back to the broker, in message-id order, before the
    /// failed one is requeued, not counted as a delivery; each waits out its own redelivery delay
    /// at the broker. Artemis: `ClientSessionImpl.rollback` stops the session and clears the
    /// client's buffer, `ServerConsumerImpl.cancelRefs` returns every delivering reference
    /// (`decrementDeliveryCount` for the ones the client did not consume), and
    /// `QueueImpl.checkRedelivery` schedules each by its own count; `addSorted` and
    /// `ScheduledDeliveryHandlerImpl` put them back in order.
    fn cancel_window(&mut self, c: u32) {
        let cs = &mut self.w.consumers[c as usize];
        // Copies of expired receives are not the broker's to take back: they are dropped.
        let rest = cs.take_buffered();
        self.drop_orphans(c);
        self.sync_load(c);
        let how = PutBack {
            delay: Delay::Cancelled,
            ..PutBack::returned(self.cfg.redelivery.requeue)
        };
        self.put_back(rest, how);
    }

    /// Consumer `c`'s negative-ack timer for `d` (`delay_in_client`) has run out: true when the
    /// client now asks the broker to redeliver it. A timer of a dead process does not run (its
    /// broker takes the message back when it notices), a paused one's runs when it resumes,
    /// and an entry for an earlier delivery of the message is stale.
    fn nack_timer_due(&mut self, c: u32, d: Delivery) -> bool {
        let cs = &self.w.consumers[c as usize];
        let Some(i) = cs.nack_due(d, self.now) else {
            return false;
        };
        if !cs.is_up() {
            return false;
        }
        let (slot, id) = (d.slot, d.id);
        if self.defer_if_paused(c, Ev::RedeliveryDue { slot, id }) {
            return false;
        }
        self.w.consumers[c as usize].clear_nack(i);
        true
    }

    /// Blocking redelivery: the consumer redelivers the held message to itself.
    pub(super) fn blocking_retry(&mut self, c: u32, epoch: u32) {
        walk!();
        if !self.w.consumers[c as usize].alive_in(epoch) {
            return;
        }
        if self.defer_if_paused(c, Ev::BlockingRetry { c, epoch }) {
            return;
        }
        let Some(d) = self.w.consumers[c as usize].take_waiting() else {
            return;
        };
        self.sync_load(c);
        if !self.w.slab.valid(&d, c) {
            self.start_next(c);
            return;
        }
        // Redelivered to the same consumer, ahead of everything it has prefetched.
        self.hand_over::<false>(d.broker, c, d.slot, true, false);
        self.start_next(c);
    }

    /// The redelivery delay of a message cancelled back with a rolled-back window is over: it
    /// goes back to its queue ([`Self::cancel_window`]). The broker dispatches once the others
    /// due at this instant are back too (events at an instant run in the order scheduled).
    pub(super) fn return_due(&mut self, slot: u32, id: u64) {
        walk!();
        let m = self.w.slab.get(slot);
        let Loc::Held(b) = m.loc else { return };
        if m.view.id != id {
            return;
        }
        self.requeue(b, slot);
        self.apply_control();
        self.q.push(self.now, Ev::Dispatch(b));
    }

    /// A non-blocking redelivery delay is over: the message goes back to its queue (at the head,
    /// unless `requeue` says otherwise).
    pub(super) fn redelivery_due(&mut self, slot: u32, id: u64) {
        walk!();
        let m = self.w.slab.get(slot);
        if m.view.id != id {
            return;
        }
        let b = match m.loc {
            Loc::Held(b) => b,
            Loc::Delivered {
                broker,
                consumer,
                delivery,
            } => {
                let d = Delivery {
                    slot,
                    id,
                    delivery,
                    broker,
                };
                if !self.nack_timer_due(consumer, d) {
                    return;
                }
                broker
            }
            _ => return,
        };
        self.requeue(b, slot);
        self.apply_control();
        self.dispatch(b);
    }
}
