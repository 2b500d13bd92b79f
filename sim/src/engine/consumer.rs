//! Consumer sessions: processing what was delivered to the prefetch buffer, one message at a time
//! through the strategy's `begin` and `handle`, the ack (after the apply: a crash in between
//! makes a duplicate), attach/detach at a broker; its own
//! copies of expired receives and its timers held while it is stopped. The process's life
//! (crash, restart, blips, suspension) is `lifecycle.rs`.

use super::events::Ev;
use super::state::{Delivery, Job, Phase};
use super::walk::walk;
use super::{Engine, Fx};
use crate::history::{Event, FailReason, MsgRef, Node, Observer};
use crate::ring::Ring;
use crate::scenario::Commit;
use crate::strategy::{plain_handle, Begin, HandlerCtx, MsgView, Outcome, Row};
use crate::time::Time;
use rand_chacha::ChaCha8Rng;

/// The handler's view of the world.
#[allow(clippy::too_many_arguments)]
#[inline]
fn handler_ctx<'a>(
    now: u64,
    consumer: u32,
    step: u32,
    poison: bool,
    db_down: u32,
    source_down: u32,
    rows: &'a [Row],
    source: &'a [Row],
) -> HandlerCtx<'a> {
    HandlerCtx {
        now,
        consumer,
        step,
        db_up: db_down == 0,
        source_up: source_down == 0,
        poison,
        rows,
        source,
    }
}

impl<O: Observer> Engine<'_, O> {
    /// The work of delivery `d`: the message as the consumer received it (its own copy).
    #[inline]
    pub(super) fn job_of(&self, d: Delivery) -> Job {
        walk!();
        self.w.slab.job(d)
    }

    /// A delivery reached consumer `c` (`dispatch_latency`): it starts it if it is idle.
    pub(super) fn transit_done(&mut self, c: u32) {
        walk!();
        let cs = &mut self.w.consumers[c as usize];
        if cs.transit_wake == Some(self.now) {
            cs.transit_wake = None;
        }
        self.start_next(c);
    }

    /// An idle, connected consumer takes the next message from its buffer; the strategy's `begin`
    /// may let it proceed, park it (waiting for a lock), or fail it.
    // Only the tests are inlined: most calls find the consumer busy and pay no call for it;
    // the start itself is out of line, as the router calls it from several arms.
    #[inline(always)]
    pub(super) fn start_next(&mut self, c: u32) {
        walk!();
        // Behind effects still waiting: after them, as the call came after theirs.
        if self.waiting() {
            self.then(Fx::StartNext(c));
            return;
        }
        // A message that fails at once in `begin` is rolled back and the next one started
        // after it, by the router (`Fx::Failed`, then `Fx::StartNext`): no loop here.
        let cs = &self.w.consumers[c as usize];
        if cs.ready() && cs.may_start() {
            self.start_one(c);
        }
    }

    /// [`Self::start_next`]'s work: starts one message, for a ready consumer.
    #[inline(never)]
    fn start_one(&mut self, c: u32) {
        let cs = &mut self.w.consumers[c as usize];
        if cs.take_leaving() {
            self.then(Fx::LeaveNow(c));
            return;
        }
        if self.transit {
            if let Some(d) = cs.buffer.front().filter(|d| d.delivery != 0) {
                let at = self.w.slab.get(d.slot).arrives;
                if at > self.now {
                    // Still on its way (`dispatch_latency`): start it when it arrives.
                    if cs.transit_wake.is_none_or(|w| w > at) {
                        cs.transit_wake = Some(at);
                        self.q.push(at, Ev::Transit(c));
                    }
                    return;
                }
            }
        }
        let Some(d) = cs.buffer.pop_front() else {
            if cs.take_rejoin() {
                // Its next poll: it joins the group again (`poll.rs`).
                let epoch = cs.epoch();
                self.then(Fx::Reconnect { c, epoch });
                return;
            }
            if cs.in_job() && cs.ack_pending.is_empty() && cs.broker.is_some() {
                // receiveNoWait() returned nothing: the queue is drained for this run.
                self.then(Fx::EndJob(c));
            }
            return;
        };
        // The job is written where it is kept, in the consumer's phase, before `begin` is asked
        // (nothing `begin` or the history sees reads the phase): built on the stack and
        // copied (`job_of`), its 80 bytes were moved twice per message.
        let (msg, poison) = if d.delivery == 0 {
            // Its lease ended before it got here: the consumer's own copy (`lease.rs`).
            let job = self
                .take_orphan(c, d.id)
                .expect("an expired receive keeps its copy");
            self.w.consumers[c as usize].phase = Phase::Serving { job, step: 0 };
            (job.view.msg_ref(), job.poison)
        } else {
            let m = self.w.slab.get(d.slot);
            let (msg, poison) = (m.r(), m.poison);
            cs.phase = Phase::Serving {
                job: self.w.slab.job(d),
                step: 0,
            };
            (msg, poison)
        };
        self.emit(Event::Start {
            t: self.now,
            msg,
            consumer: c,
        });
        // The handler's context is built only where `begin` is called: built before the test,
        // its stores were paid for every message of a strategy without `begin`.
        let ctx = || {
            handler_ctx(
                self.now,
                c,
                0,
                poison,
                self.w.db_down,
                self.w.source_down,
                &self.w.rows,
                &self.w.source,
            )
        };
        let begin = {
            if self.hooks.begin {
                let view = self.w.consumers[c as usize].job().view;
                self.strategy.begin(&ctx(), &view, &mut self.ctl)
            } else {
                if cfg!(debug_assertions) {
                    let view = self.w.consumers[c as usize].job().view;
                    let before = self.ctl.requests.len();
                    assert_eq!(
                        self.strategy.begin(&ctx(), &view, &mut self.ctl),
                        Begin::Proceed,
                        "begin left out of hooks()"
                    );
                    assert_eq!(self.ctl.requests.len(), before, "begin left out of hooks()");
                }
                Begin::Proceed
            }
        };
        match begin {
            Begin::Proceed => self.serve_started(c, d),
            Begin::Wait { timeout } => {
                let cs = &mut self.w.consumers[c as usize];
                let job = *cs.job();
                cs.park_serial += 1;
                let serial = cs.park_serial;
                cs.phase = Phase::Parked { job, serial };
                if let Some(t) = timeout {
                    let epoch = cs.epoch();
                    self.q
                        .push(self.now + t, Ev::ParkTimeout { c, epoch, serial });
                }
                self.sync_load(c);
            }
            Begin::Fail(reason) => {
                // Its phase is already the job's, at step 0.
                self.sync_load(c);
                // Rolled back, then the strategy's requests, then its next message.
                self.then(Fx::Failed { c, reason });
                self.apply_then_start(c);
                return;
            }
        }
        self.apply_control();
    }

    /// Service of `job` starts (a parked job going on: `unpark`); the processing time is drawn
    /// now.
    pub(super) fn serve(&mut self, c: u32, job: Job) {
        walk!();
        self.w.consumers[c as usize].phase = Phase::Serving { job, step: 0 };
        self.serve_started(c, job.d);
    }

    /// [`Self::serve`] for a job already in the consumer's phase (at step 0): `start_one`
    /// writes it there itself, so that the job is not copied per message.
    #[inline(always)]
    fn serve_started(&mut self, c: u32, d: Delivery) {
        let cs = &mut self.w.consumers[c as usize];
        let svc = self.service.sample(&mut cs.rng);
        let svc = if cs.slow == 1.0 {
            svc
        } else {
            (svc as f64 * cs.slow).round() as u64
        };
        let epoch = cs.epoch();
        self.q
            .push_inline(self.now + svc, Ev::ServiceDone { c, epoch });
        // No `sync_load`: the load is what it was before the job left the buffer (or the parked
        // phase) for this one, and the broker already has it.
        debug_assert!(self.load_in_sync(c), "serve changed consumer {c}'s load");
        self.lease_work_started(d);
    }

    /// A parked consumer may go on (the strategy released what it waited for).
    pub(super) fn unpark(&mut self, c: u32) {
        walk!();
        if let Phase::Parked { job, .. } = self.w.consumers[c as usize].phase {
            if self.w.consumers[c as usize].is_up() {
                self.serve(c, job);
            }
        }
    }

    /// A parked consumer waited too long: the strategy releases its claim, and the delivery fails.
    pub(super) fn park_timeout(&mut self, c: u32, epoch: u32, serial: u32) {
        walk!();
        let cs = &self.w.consumers[c as usize];
        let Phase::Parked { job, serial: s } = cs.phase else {
            return;
        };
        if !cs.current(epoch) || s != serial {
            return;
        }
        if self.defer_if_paused(c, Ev::ParkTimeout { c, epoch, serial }) {
            return;
        }
        self.strategy.abandon(self.now, c, &job.view, &mut self.ctl);
        self.then(Fx::Failed {
            c,
            reason: FailReason::Strategy,
        });
        self.apply_then_start(c);
    }

    /// Processing is over: run the handler, then ack, or roll back. A consumer that lost its
    /// connection meanwhile still runs the handler (the side effect happens); its ack will be lost.
    pub(super) fn service_done(&mut self, c: u32, epoch: u32) {
        walk!();
        if !self.w.consumers[c as usize].alive_in(epoch) {
            return;
        }
        // The event built only when deferred: built before the test (`defer_if_paused`), it was
        // stored in memory at every service's end.
        if self.w.consumers[c as usize].is_paused() {
            self.defer_if_paused(c, Ev::ServiceDone { c, epoch });
            return;
        }
        // The job is read where it is (a copy of it per message cost as much as the test).
        let Phase::Serving { ref job, step } = self.w.consumers[c as usize].phase else {
            return;
        };
        let outcome = {
            // Built in each branch: the plain handler's reads only what it needs of it, where
            // one context built for both was stored in full for every message.
            let ctx = || {
                handler_ctx(
                    self.now,
                    c,
                    step,
                    job.poison,
                    self.w.db_down,
                    self.w.source_down,
                    &self.w.rows,
                    &self.w.source,
                )
            };
            if self.hooks.handle {
                self.strategy.handle(&ctx(), &job.view, &mut self.ctl)
            } else {
                let plain = plain_handle(&ctx(), &job.view);
                if cfg!(debug_assertions) {
                    let before = self.ctl.requests.len();
                    assert_eq!(
                        self.strategy.handle(&ctx(), &job.view, &mut self.ctl),
                        plain,
                        "handle left out of hooks()"
                    );
                    assert_eq!(
                        self.ctl.requests.len(),
                        before,
                        "handle left out of hooks()"
                    );
                }
                plain
            }
        };
        if self.hooks.on_handled {
            self.strategy
                .on_handled(self.now, c, &job.view, &outcome, &mut self.ctl);
        } else if cfg!(debug_assertions) {
            let before = self.ctl.requests.len();
            self.strategy
                .on_handled(self.now, c, &job.view, &outcome, &mut self.ctl);
            self.skipped_hook_did_nothing(before, "on_handled");
        }
        let msg = job.view.msg_ref();
        let (d, timestamp) = (job.d, job.view.timestamp);
        match outcome {
            Outcome::Applied { state_seq } => {
                self.w.unhold(msg.id);
                self.w.mark_applied(d.slot, msg.id);
                self.w.write_row(msg.key, state_seq, timestamp);
                self.emit(Event::Apply {
                    t: self.now,
                    msg,
                    consumer: c,
                    state_seq,
                });
            }
            Outcome::Rejected => {
                self.w.unhold(msg.id);
                self.emit(Event::Reject {
                    t: self.now,
                    msg,
                    consumer: c,
                });
            }
            Outcome::Buffered => self.w.take_over(d.slot, msg),
            Outcome::Failed(reason) => {
                self.then(Fx::Failed { c, reason });
                self.apply_then_start(c);
                return;
            }
            Outcome::After { delay, step } => {
                if let Phase::Serving { step: s, .. } = &mut self.w.consumers[c as usize].phase {
                    *s = step;
                }
                self.q.push(self.now + delay, Ev::ServiceDone { c, epoch });
                self.apply_control();
                return;
            }
        }
        self.succeeded(c, d, msg);
        self.apply_then_start_last(c);
    }

    pub(super) fn succeeded(&mut self, c: u32, d: Delivery, msg: MsgRef) {
        walk!();
        let cs = &mut self.w.consumers[c as usize];
        cs.failures_in_row = 0;
        cs.job_retries = 0;
        cs.phase = Phase::Idle;
        if self.cfg.commit != Commit::Each {
            // Settled by its next offset commit; it no longer counts against the consumer's
            // fetch (`max.poll.records`), so it may fetch more. Nothing received is left: it
            // goes back to `poll()`, where it commits (`commit.rs`).
            cs.hold_for_commit(d, msg);
            let polls = !cs.has_buffered();
            self.sync_load(c);
            if polls {
                self.then(Fx::AtPoll(c));
            }
            if let Some(b) = self.w.consumers[c as usize].connected_to() {
                self.dispatch(b);
            }
            return;
        }
        let latency = self.sc.consumers.ack_latency.0;
        if latency != 0 {
            cs.ack_pending.push(d);
        }
        let (b, load) = (cs.connected_to(), cs.load());
        self.sync_load_as(c, b, load);
        if latency == 0 {
            // Nothing waits in `ack_pending` without an ack latency: past `ack_arrive`'s search.
            debug_assert!(self.w.consumers[c as usize].ack_pending.is_empty());
            self.ack_reaches(c, d, msg);
        } else {
            let ack = match self.w.acks_free.pop() {
                Some(i) => {
                    self.w.acks[i as usize] = (d, msg);
                    i
                }
                None => {
                    self.w.acks.push((d, msg));
                    (self.w.acks.len() - 1) as u32
                }
            };
            self.q.push(self.now + latency, Ev::AckArrive { c, ack });
        }
    }

    /// The ack reaches the broker: settled if the delivery is still current (else it was already
    /// given back for redelivery, and this ack is lost or refused).
    #[inline(always)]
    pub(super) fn ack_arrive(&mut self, c: u32, d: Delivery, msg: MsgRef) {
        walk!();
        let cs = &mut self.w.consumers[c as usize];
        if let Some(i) = cs.ack_pending.iter().position(|x| *x == d) {
            cs.ack_pending.swap_remove(i);
            self.sync_load(c);
        }
        self.ack_reaches(c, d, msg);
    }

    /// [`Self::ack_arrive`] once the ack is out of the consumer's pending list.
    #[inline(always)]
    fn ack_reaches(&mut self, c: u32, d: Delivery, msg: MsgRef) {
        if !self.w.slab.valid(&d, c) || !self.w.brokers[d.broker as usize].is_up() {
            self.ack_refused(c, d, msg);
            // Refused or lost, the ack freed the consumer's window all the same: its broker may
            // send it more (nothing else would if the queue is otherwise quiet).
            if let Some(b) = self.w.consumers[c as usize].broker {
                self.dispatch(b);
            }
            self.then_in_job(c);
            return;
        }
        self.emit(Event::Ack {
            t: self.now,
            msg,
            consumer: c,
        });
        self.settle(d.slot);
        self.apply_control();
        self.dispatch(d.broker);
        self.then_in_job(c);
    }

    /// A batch job's consumer goes on with its run once what waits is done (a running job takes
    /// its next message itself; a listener is started by its broker's dispatch).
    #[inline]
    fn then_in_job(&mut self, c: u32) {
        // Only a `JobStart` event starts a job run: one not running now is not running later.
        if self.jobs && self.w.consumers[c as usize].in_job() {
            if self.waiting() {
                self.then(Fx::StartNextInJob(c));
            } else {
                self.start_next(c);
            }
        }
    }

    /// Consumer `c` leaves its broker (crash, blip, broker down, suspension): the broker takes back
    /// every unacknowledged delivery. `keep_current`: the process is alive and goes on with the
    /// message in hand (it will apply it, but its ack will be lost).
    pub(super) fn detach(&mut self, c: u32, keep_current: bool) {
        walk!();
        let Some(b) = self.w.consumers[c as usize].broker.take() else {
            return;
        };
        self.w.brokers[b as usize].detach(c);
        let cs = &mut self.w.consumers[c as usize];
        let mut back: Vec<Delivery> = cs.buffer.take_all().collect();
        back.append(&mut cs.ack_pending);
        // Processed but not committed: the group resumes from the last commit. A process that
        // goes on (a zombie) still tries to commit them later, and is refused.
        back.extend(cs.uncommitted.iter().map(|(d, _)| *d));
        // The client's negative-ack timers die with its connection: the broker has those back
        // at once, with the rest of its unacked messages.
        back.extend(cs.nacked.drain(..).map(|(d, _)| d));
        if !keep_current {
            cs.uncommitted.clear();
        }
        let mut abandoned = None;
        match cs.phase {
            Phase::Serving { job, .. } | Phase::Parked { job, .. } => {
                back.push(job.d);
                if !keep_current {
                    abandoned = Some(job.view);
                }
            }
            Phase::Waiting { d } => {
                back.push(d);
                cs.phase = Phase::Idle;
            }
            Phase::Idle => {}
        }
        if !keep_current {
            cs.phase = Phase::Idle;
        }
        self.sync_load(c);
        self.drop_orphans(c);
        // The message in hand is dropped: the strategy releases what `begin` took for it (locks).
        if let Some(view) = abandoned {
            self.strategy.abandon(self.now, c, &view, &mut self.ctl);
        }
        if !self.cfg.redelivery.count_lost {
            self.uncount(c, &back);
        }
        self.return_deliveries(back);
        self.strategy.on_detach(self.now, b, c, &mut self.ctl);
        self.w.brokers[b as usize].members_changed();
        self.apply_control();
        self.dispatch(b);
        self.demand_lost_if_none(b);
    }

    /// Consumer `c`'s deliveries `back`, given back because its connection closed, do not count
    /// against the redelivery limit (`count_lost = false`: a Service Bus session closed with
    /// messages not completed raises no delivery count [Z1]).
    #[cold]
    #[inline(never)]
    fn uncount(&mut self, c: u32, back: &[Delivery]) {
        for d in back {
            if self.w.slab.valid(d, c) {
                self.w.slab.uncount(d.slot);
            }
        }
    }

    pub(super) fn attach(&mut self, c: u32, b: u16) {
        walk!();
        let cs = &mut self.w.consumers[c as usize];
        cs.broker = Some(b);
        // It joins its group: its auto-commit interval starts now (`onJoinComplete`).
        cs.auto_committed(self.now + self.cfg.commit_interval.0);
        let failover = cs.connects();
        let free = self.free_prefetch(c);
        self.w.brokers[b as usize].attach(c, free);
        self.emit(Event::Connect {
            t: self.now,
            node: Node::Consumer(c),
            broker: b,
            failover,
        });
        self.strategy.on_attach(self.now, b, c, &mut self.ctl);
        self.w.brokers[b as usize].members_changed();
        self.apply_control();
        self.dispatch(b);
        self.demand_gained_if_first(b);
    }

    /// Whether consumer `c`'s process is stopped; if so, `ev` (one of its own timers, due now)
    /// waits until it resumes, with the time it had left when the process stopped.
    #[inline]
    pub(super) fn defer_if_paused(&mut self, c: u32, ev: Ev) -> bool {
        walk!();
        self.w.consumers[c as usize].defer(self.now, ev)
    }

    /// Consumer `c` starts working on `job`: with renewal on, it will extend the lease.
    #[inline]
    pub(super) fn lease_work_started(&mut self, d: Delivery) {
        walk!();
        if let Some(every) = self.cfg.lease.and_then(|l| l.renew_every) {
            self.q.push(
                self.now + every.0,
                Ev::LeaseRenew {
                    slot: d.slot,
                    id: d.id,
                },
            );
        }
    }

    /// The consumer's own copy of a message whose lease ended before it started it.
    pub(super) fn take_orphan(&mut self, c: u32, id: u64) -> Option<Job> {
        walk!();
        let i = self
            .w
            .orphans
            .iter()
            .position(|(oc, j)| *oc == c && j.d.id == id)?;
        Some(self.w.orphans.swap_remove(i).1)
    }

    /// Consumer `c` lost its buffer (it left its broker): its copies go too.
    pub(super) fn drop_orphans(&mut self, c: u32) {
        walk!();
        if !self.w.orphans.is_empty() {
            self.w.orphans.retain(|(oc, _)| *oc != c);
        }
    }
}

/// One consumer: what it holds (public to the engine's handlers) and its lifecycle (private: the
/// handlers change it only through the transitions below, each of which says what it did).
pub(super) struct Consumer {
    /// Failover list.
    list: Vec<u16>,
    /// Connected broker.
    broker: Option<u16>,
    /// Polls so far (`poll.rs`: a deadline is for one poll).
    poll_serial: u32,
    phase: Phase,
    /// Delivered, not yet started.
    buffer: Ring<Delivery>,
    /// Applied (or rejected), ack not yet at the broker.
    ack_pending: Vec<Delivery>,
    /// Processed, waiting for its next offset commit (`[consumers] commit = "batch"` or
    /// `"interval"`): not part of its load (a log's consumer fetches on regardless).
    uncommitted: Vec<(Delivery, MsgRef)>,
    /// Deliveries it negatively acknowledged whose redelivery its own timer asks for when due
    /// (`delay_in_client`: Pulsar's `NegativeAcksTracker`); still its unacked ones at the
    /// broker, not part of its load.
    nacked: Vec<(Delivery, Time)>,
    /// Auto-commit: an `Ev::CommitDue` is scheduled for `auto_commit_due`.
    commit_armed: bool,
    /// Auto-commit: when its interval since the last auto-commit (or its join) is over.
    auto_commit_due: Time,
    failures_in_row: u32,
    park_serial: u32,
    /// Batch mode: a job run is in progress.
    job_running: bool,
    /// Batch mode: in-job retries used on the message in hand. Kept beside `job_running`, not
    /// folded into an `Option`: `succeeded` resets it with one plain store per message.
    job_retries: u32,
    slow: f64,
    /// With `dispatch_latency`: the time of the `Ev::Transit` scheduled to start what arrives.
    transit_wake: Option<Time>,
    rng: ChaCha8Rng,
    /// The process: alive, dead, or restarted and waiting for its old session to go.
    life: Life,
    /// Process or session incarnation: timers of an earlier one are ignored.
    epoch: u32,
    /// `consumer_pause`: the process is stopped.
    pause: Pause,
    /// The endpoint stopped after too many failures in a row.
    suspended: bool,
    /// Tells a suspension's resume timer from an earlier suspension's.
    suspend_serial: u32,
    /// Network blip nesting: reconnects when it returns to 0.
    blips: u32,
    /// The last disconnect was involuntary (crash, blip, broker loss): the next connect is a
    /// failover.
    lost_connection: bool,
    /// `consumer_leave` nesting: it stays out of its group while above 0.
    away: u32,
    /// `consumer_leave`: it leaves its group once the message in hand is done.
    leaving: bool,
    /// It closed as a static member (`group.instance.id`): no LeaveGroup; the group holds its
    /// session (a pause) until it comes back or the session times out (`membership.rs`).
    static_away: bool,
    /// Dropped by its group for a slow poll loop: it joins again at its next poll, once the
    /// records it polled are done.
    rejoin_when_idle: bool,
    /// It asks for messages (`receive = "batch"`: an SQS receive, a Kafka poll): a process
    /// that is dead or stopped asks for nothing, so nothing is handed to it.
    pull: bool,
    /// Added to its load: `u32::MAX / 2` (full) while it is a pulling consumer that cannot ask,
    /// else 0 ([`Consumer::refresh_kept_flags`]); kept so that `load` stays branch-free.
    blocked: u32,
    /// Its process is not running or is paused, or its endpoint is suspended
    /// ([`Consumer::refresh_kept_flags`]): kept so that [`Consumer::ready`], asked for every
    /// message, tests one flag, not three (measured 2.0 M fewer instructions on mmc).
    held_back: bool,
}

/// Where a consumer's process is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// Running.
    Up,
    /// Dead, with this many overlapping `consumer_crash` faults in force (at least 1).
    Dead { crashes: u32 },
    /// Restarted while the broker still holds its dead session, and waiting for the broker to
    /// drop it before joining (`[consumers] restart_takes_over = false`: `detection.rs`).
    Rejoining,
}

/// A stopped process (`consumer_pause`, `pause.rs`).
#[derive(Default)]
struct Pause {
    /// Overlapping pauses in force: stopped while above 0.
    depth: u32,
    /// When the current pause began.
    at: Time,
    /// Tells a pause's detection timer from an earlier pause's.
    serial: u32,
    /// The process's own timers that came due while it was stopped, with the time they had left
    /// when it stopped: they run again when it resumes.
    deferred: Vec<(Time, Ev)>,
}

/// What the end of a lease did to a delivery in a consumer's buffer ([`Consumer::lease_ended`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expiry {
    /// It was not there (in hand, acked, or never received).
    NotReceived,
    /// A running process keeps it as its own copy.
    OwnCopy,
    /// A dead process's receive is gone.
    Dropped,
}

/// What a `consumer_crash` did ([`Consumer::crash`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Crash {
    /// It was dead already: one more crash in force.
    Again,
    /// It died while waiting to rejoin: its old session still waits for its timeout.
    BeforeRejoin,
    /// The process died now (a new incarnation; its session's flags are reset).
    Died,
}

/// What the end of a `consumer_crash` did ([`Consumer::restart`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Restart {
    /// Still dead (another crash in force), or it was not dead.
    No,
    /// Running again, in incarnation `epoch`; `stale`: the broker still held its dead session.
    Up { epoch: u32, stale: bool },
    /// Restarted, waiting for the broker to drop its dead session before it joins.
    Waits,
}

impl Consumer {
    pub fn new(list: Vec<u16>, pull: bool, rng: ChaCha8Rng) -> Self {
        Consumer {
            list,
            broker: None,
            poll_serial: 0,
            phase: Phase::Idle,
            buffer: Ring::new(),
            ack_pending: Vec::new(),
            uncommitted: Vec::new(),
            nacked: Vec::new(),
            commit_armed: false,
            auto_commit_due: 0,
            failures_in_row: 0,
            park_serial: 0,
            job_running: false,
            job_retries: 0,
            slow: 1.0,
            transit_wake: None,
            rng,
            life: Life::Up,
            epoch: 0,
            pause: Pause::default(),
            suspended: false,
            suspend_serial: 0,
            blips: 0,
            lost_connection: false,
            away: 0,
            leaving: false,
            static_away: false,
            rejoin_when_idle: false,
            pull,
            blocked: 0,
            held_back: false,
        }
    }

    /// The job in hand, serving or parked (the caller knows there is one).
    #[inline]
    pub(super) fn job(&self) -> &Job {
        match &self.phase {
            Phase::Serving { job, .. } | Phase::Parked { job, .. } => job,
            Phase::Idle | Phase::Waiting { .. } => unreachable!("no job in hand"),
        }
    }

    /// Every unacknowledged delivery it holds: prefetched, in hand, or acked but not yet settled.
    /// Free prefetch capacity is `prefetch` minus this. A pulling consumer that is dead or
    /// stopped counts as full.
    #[inline]
    pub fn load(&self) -> u32 {
        let busy = u32::from(!matches!(self.phase, Phase::Idle));
        self.buffer.len() as u32 + busy + self.ack_pending.len() as u32 + self.blocked
    }

    /// Recomputes `blocked` and `held_back` after the process died, restarted, stopped or
    /// resumed, or its endpoint was suspended or resumed.
    fn refresh_kept_flags(&mut self) {
        self.blocked = if self.pull && (!self.is_up() || self.is_paused()) {
            u32::MAX / 2
        } else {
            0
        };
        self.held_back = !self.is_up() || self.suspended || self.is_paused();
    }

    /// The process is running (it may be stopped by a pause).
    #[inline]
    pub fn is_up(&self) -> bool {
        self.life == Life::Up
    }

    /// Restarted, waiting for the broker to drop its dead session.
    pub fn rejoining(&self) -> bool {
        self.life == Life::Rejoining
    }

    /// The current incarnation, for timers to carry.
    #[inline]
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// A timer of incarnation `epoch` still concerns it (same incarnation).
    #[inline]
    pub fn current(&self, epoch: u32) -> bool {
        self.epoch == epoch
    }

    /// A timer of incarnation `epoch` still concerns a live process.
    #[inline]
    pub fn alive_in(&self, epoch: u32) -> bool {
        self.epoch == epoch && self.is_up()
    }

    /// It may take the next message: running, not stopped, not suspended, idle.
    #[inline]
    pub fn ready(&self) -> bool {
        debug_assert_eq!(
            self.held_back,
            !self.is_up() || self.suspended || self.is_paused(),
            "stale held_back flag"
        );
        !self.held_back && matches!(self.phase, Phase::Idle)
    }

    /// A `consumer_crash` begins.
    pub fn crash(&mut self) -> Crash {
        match self.life {
            Life::Dead { crashes } => {
                self.life = Life::Dead {
                    crashes: crashes + 1,
                };
                Crash::Again
            }
            Life::Rejoining => {
                self.life = Life::Dead { crashes: 1 };
                Crash::BeforeRejoin
            }
            Life::Up => {
                self.life = Life::Dead { crashes: 1 };
                self.refresh_kept_flags();
                self.epoch += 1;
                self.job_running = false;
                self.commit_armed = false;
                self.leaving = false;
                self.rejoin_when_idle = false;
                self.lost_connection = true;
                Crash::Died
            }
        }
    }

    /// A `consumer_crash` ends. `stale`: the broker still holds its dead session; unless
    /// `takes_over`, the process then waits for the broker to drop it.
    pub fn restart(&mut self, takes_over: bool) -> Restart {
        match self.life {
            Life::Up => return Restart::No,
            Life::Dead { crashes } if crashes > 1 => {
                self.life = Life::Dead {
                    crashes: crashes - 1,
                };
                return Restart::No;
            }
            Life::Dead { .. } | Life::Rejoining => {}
        }
        let stale = self.broker.is_some();
        if stale && !takes_over {
            self.life = Life::Rejoining;
            return Restart::Waits;
        }
        Restart::Up {
            epoch: self.come_up(),
            stale,
        }
    }

    /// The process runs again (a restart, or a restart that waited for its dead session): a new
    /// incarnation, whose epoch it returns.
    pub fn come_up(&mut self) -> u32 {
        self.life = Life::Up;
        self.epoch += 1;
        self.refresh_kept_flags();
        self.epoch
    }

    /// Stopped by a `consumer_pause`.
    #[inline]
    pub fn is_paused(&self) -> bool {
        self.pause.depth > 0
    }

    /// A `consumer_pause` begins at `now`: the serial of the pause when this one stops a running
    /// process (its detection timer carries it), else None.
    pub fn pause(&mut self, now: Time) -> Option<u32> {
        self.pause.depth += 1;
        if self.pause.depth > 1 || !self.is_up() {
            return None;
        }
        self.pause.at = now;
        self.pause.serial += 1;
        self.refresh_kept_flags();
        Some(self.pause.serial)
    }

    /// Still stopped by pause `serial`.
    pub fn paused_by(&self, serial: u32) -> bool {
        self.is_paused() && self.pause.serial == serial
    }

    /// If stopped, keeps `ev` (one of its own timers, due `now`) to run when it resumes, with the
    /// time it had left when the process stopped; returns whether it did.
    // The deferral (a push that may grow the list) out of line: inlined, it cost mmc 0.8 M
    // instructions more (2026-12-06).
    #[inline]
    pub fn defer(&mut self, now: Time, ev: Ev) -> bool {
        if !self.is_paused() {
            return false;
        }
        self.defer_paused(now, ev);
        true
    }

    /// [`Self::defer`] past its test.
    #[cold]
    #[inline(never)]
    fn defer_paused(&mut self, now: Time, ev: Ev) {
        let left = now.saturating_sub(self.pause.at);
        self.pause.deferred.push((left, ev));
    }

    /// A `consumer_pause` ends: when the process runs again, the timers it deferred, with the
    /// time each had left.
    pub fn unpause(&mut self) -> Option<Vec<(Time, Ev)>> {
        self.pause.depth = self.pause.depth.saturating_sub(1);
        if self.is_paused() {
            return None;
        }
        let deferred = std::mem::take(&mut self.pause.deferred);
        self.refresh_kept_flags();
        Some(deferred)
    }

    /// Its endpoint is stopped after too many failures in a row.
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// Its endpoint stops: a new session incarnation (timers of the old one, blocking retries,
    /// must not fire into it); returns the suspension's serial for its resume timer.
    pub fn suspend(&mut self) -> u32 {
        self.suspended = true;
        self.refresh_kept_flags();
        self.epoch += 1;
        self.suspend_serial += 1;
        self.suspend_serial
    }

    /// Still suspended by suspension `serial`.
    pub fn suspended_by(&self, serial: u32) -> bool {
        self.suspended && self.suspend_serial == serial
    }

    /// Its endpoint starts again; returns the epoch to reconnect in.
    pub fn unsuspend(&mut self) -> u32 {
        self.suspended = false;
        self.refresh_kept_flags();
        self.failures_in_row = 0;
        self.epoch
    }

    /// A `network_blip` begins: true when it cuts a running process's connection now.
    pub fn blip(&mut self) -> bool {
        self.blips += 1;
        self.blips == 1 && self.is_up()
    }

    /// A `network_blip` ends: the epoch to reconnect in once no blip is in force.
    pub fn unblip(&mut self) -> Option<u32> {
        self.blips = self.blips.saturating_sub(1);
        (self.blips == 0).then_some(self.epoch)
    }

    /// Its network is cut.
    pub fn cut_off(&self) -> bool {
        self.blips > 0
    }

    /// Its connection dropped against its will: its next connect is a failover.
    pub fn lost_connection(&mut self) {
        self.lost_connection = true;
    }

    /// It connects: whether this is a failover (it lost its last connection).
    pub fn connects(&mut self) -> bool {
        std::mem::take(&mut self.lost_connection)
    }

    /// A `consumer_leave` begins: true when it should leave now (it is running and connected),
    /// else it only counts the fault.
    pub fn leave(&mut self) -> bool {
        self.away += 1;
        if self.away > 1 || !self.is_up() || self.broker.is_none() {
            return false;
        }
        self.leaving = true;
        true
    }

    /// Out of its group (a `consumer_leave` in force).
    pub fn is_away(&self) -> bool {
        self.away > 0
    }

    /// Whether [`Engine::start_next`]'s call would do something: a message is buffered, or a
    /// leave, a rejoin or the end of a job is due. (At mmc's load about one idle consumer in four
    /// finds nothing: its next message is dispatched after it asked; the call frame is saved.)
    #[inline(always)]
    pub fn may_start(&self) -> bool {
        !self.buffer.is_empty() || self.leaving || self.rejoin_when_idle || self.job_running
    }

    /// Whether it is to leave its group now that it is idle (asked once: it leaves).
    pub fn take_leaving(&mut self) -> bool {
        std::mem::take(&mut self.leaving)
    }

    /// A `consumer_leave` ends: the epoch to join again in once none is in force.
    pub fn come_back(&mut self) -> Option<u32> {
        self.away = self.away.saturating_sub(1);
        if self.away > 0 {
            return None;
        }
        self.leaving = false;
        Some(self.epoch)
    }

    /// It closed as a static member, its session held (`membership.rs`).
    pub fn close_static(&mut self) {
        self.static_away = true;
    }

    /// Whether it had closed as a static member (asked once, when it comes back).
    pub fn take_static_away(&mut self) -> bool {
        std::mem::take(&mut self.static_away)
    }

    /// Dropped by its group for a slow poll loop: it joins again at its next poll.
    pub fn dropped_from_group(&mut self) {
        self.rejoin_when_idle = true;
    }

    /// Whether it is to join its group again now that it is idle (asked once: it joins).
    pub fn take_rejoin(&mut self) -> bool {
        std::mem::take(&mut self.rejoin_when_idle)
    }

    /// The first broker of its failover list that `up` says is reachable.
    #[inline]
    pub fn first_reachable(&self, up: impl Fn(u16) -> bool) -> Option<u16> {
        self.list.iter().copied().find(|&b| up(b))
    }

    /// A `slow_consumer` fault begins: its service times are `factor` times longer.
    #[inline]
    pub fn slow_down(&mut self, factor: f64) {
        self.slow *= factor;
    }

    /// A `slow_consumer` fault ends.
    #[inline]
    pub fn speed_up(&mut self, factor: f64) {
        self.slow /= factor;
    }

    /// It polls (`poll.rs`): the new poll's serial, for its deadline timer to carry.
    #[inline]
    pub fn next_poll(&mut self) -> u32 {
        self.poll_serial = self.poll_serial.wrapping_add(1);
        self.poll_serial
    }

    /// Poll `serial` is still its latest.
    #[inline]
    pub fn on_poll(&self, serial: u32) -> bool {
        self.poll_serial == serial
    }

    /// A message failed: its failures in a row so far, this one included.
    #[inline]
    pub fn record_failure(&mut self) -> u32 {
        self.failures_in_row += 1;
        self.failures_in_row
    }

    /// A batch run starts if it is running and no run is in progress; returns whether it did.
    #[inline]
    pub fn start_job(&mut self) -> bool {
        if !self.is_up() || self.in_job() {
            return false;
        }
        self.job_running = true;
        self.job_retries = 0;
        true
    }

    /// The batch run is over.
    #[inline]
    pub fn stop_job(&mut self) {
        self.job_running = false;
        self.job_retries = 0;
    }

    /// Batch mode: a run is in progress.
    #[inline]
    pub fn in_job(&self) -> bool {
        self.job_running
    }

    /// One more in-job retry of the message in hand, if fewer than `max` were used: its number.
    #[inline]
    pub fn retry_in_job(&mut self, max: u32) -> Option<u32> {
        if self.job_retries >= max {
            return None;
        }
        self.job_retries += 1;
        Some(self.job_retries)
    }

    /// Auto-commit: when the interval since its last auto-commit (or its join) is over.
    #[inline]
    pub fn auto_commit_due(&self) -> Time {
        self.auto_commit_due
    }

    /// Auto-commit: it commits now (or joined its group now); the next is due at `next`.
    #[inline]
    pub fn auto_committed(&mut self, next: Time) {
        self.auto_commit_due = next;
    }

    /// Arms its auto-commit wake-up: true if it was not armed (the caller schedules it).
    #[inline]
    pub fn arm_commit(&mut self) -> bool {
        !std::mem::replace(&mut self.commit_armed, true)
    }

    /// Its auto-commit wake-up came (no longer armed).
    #[inline]
    pub fn disarm_commit(&mut self) {
        self.commit_armed = false;
    }

    /// Idle: no message in hand.
    #[inline]
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// Nothing of its last poll is left: idle, with nothing received waiting.
    #[inline]
    pub fn is_drained(&self) -> bool {
        self.is_idle() && self.buffer.is_empty()
    }

    /// Received messages wait in its buffer.
    #[inline]
    pub fn has_buffered(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// A message in hand (serving or parked), or its own copy of an expired receive: work it
    /// will still write.
    #[inline]
    pub fn has_work(&self) -> bool {
        matches!(self.phase, Phase::Serving { .. } | Phase::Parked { .. })
            || self.buffer.iter().any(|d| d.delivery == 0)
    }

    /// It is working on delivery `delivery` of the message in `slot` (serving or parked).
    #[inline]
    pub fn working_on(&self, slot: u32, delivery: u32) -> bool {
        matches!(self.phase,
            Phase::Serving { job, .. } | Phase::Parked { job, .. }
                if job.d.slot == slot && job.d.delivery == delivery)
    }

    /// It is done with the message in hand (processed, failed, or given up).
    #[inline]
    pub fn go_idle(&mut self) {
        self.phase = Phase::Idle;
    }

    /// Blocking redelivery: it holds `d` until its delay is over.
    #[inline]
    pub fn hold_for_retry(&mut self, d: Delivery) {
        self.phase = Phase::Waiting { d };
    }

    /// The delivery it held for a blocking redelivery, if any; it is idle again.
    #[inline]
    pub fn take_waiting(&mut self) -> Option<Delivery> {
        let Phase::Waiting { d } = self.phase else {
            return None;
        };
        self.phase = Phase::Idle;
        Some(d)
    }

    /// The job in hand (serving or parked), if any.
    pub fn job_in_hand(&self) -> Option<Job> {
        match self.phase {
            Phase::Serving { job, .. } | Phase::Parked { job, .. } => Some(job),
            _ => None,
        }
    }

    /// After its process died: nothing in hand, no failures in a row, and with no session left
    /// nothing it received.
    pub fn after_crash(&mut self) {
        self.phase = Phase::Idle;
        if self.broker.is_none() {
            self.forget_deliveries();
        }
        self.failures_in_row = 0;
    }

    /// It receives delivery `d`: at its buffer's back (a dispatch), or its front (a blocking
    /// redelivery, which the client makes to itself ahead of what it prefetched).
    #[inline(always)]
    pub fn receive(&mut self, d: Delivery, front: bool) {
        if front {
            self.buffer.push_front(d);
        } else {
            self.buffer.push_back(d);
        }
    }

    /// The deliveries it received and has not started (not its own copies of expired receives).
    #[inline]
    pub fn received(&self) -> impl Iterator<Item = Delivery> + '_ {
        self.buffer.iter().copied().filter(|d| d.delivery != 0)
    }

    /// Keeps `d` as its own copy (the broker took it back), at its buffer's back.
    #[inline]
    pub fn keep_own_copy(&mut self, d: Delivery) {
        self.buffer.push_back(Delivery { delivery: 0, ..d });
    }

    /// Takes what it received and has not started, for the broker to take back; its own copies
    /// of expired receives are not the broker's: they are dropped.
    #[inline]
    pub fn take_buffered(&mut self) -> Vec<Delivery> {
        self.buffer.take_all().filter(|d| d.delivery != 0).collect()
    }

    /// The lease of `d` ended: if `d` waits in its buffer, a running process keeps it as its own
    /// copy, a dead one's is gone.
    #[inline]
    pub fn lease_ended(&mut self, d: Delivery) -> Expiry {
        let up = self.is_up();
        let Some(i) = self.buffer.iter().position(|x| *x == d) else {
            return Expiry::NotReceived;
        };
        if up {
            self.buffer[i].delivery = 0;
            Expiry::OwnCopy
        } else {
            self.buffer.remove(i);
            Expiry::Dropped
        }
    }

    /// Its process died unnoticed: the message in hand goes back to its buffer's front (the
    /// broker still counts it as its), it is idle, and its own copies of expired receives die
    /// with it. The view of the job it dropped, if it was working on one.
    #[inline]
    pub fn drop_work(&mut self) -> Option<MsgView> {
        let abandoned = match self.phase {
            Phase::Serving { job, .. } | Phase::Parked { job, .. } => {
                self.buffer.push_front(job.d);
                Some(job.view)
            }
            Phase::Waiting { d } => {
                self.buffer.push_front(d);
                None
            }
            Phase::Idle => None,
        };
        self.phase = Phase::Idle;
        self.buffer.retain(|d| d.delivery != 0);
        abandoned
    }

    /// Every delivery it holds: in hand, received, or acked with the ack still on its way.
    #[inline]
    pub fn held(&self) -> impl Iterator<Item = Delivery> + '_ {
        let in_hand = match self.phase {
            Phase::Serving { job, .. } | Phase::Parked { job, .. } => Some(job.d),
            Phase::Waiting { d } => Some(d),
            Phase::Idle => None,
        };
        in_hand
            .into_iter()
            .chain(self.buffer.iter().copied())
            .chain(self.ack_pending.iter().copied())
    }

    /// Forgets every delivery it received, acked, processed or nacked (its session is gone).
    #[inline]
    pub fn forget_deliveries(&mut self) {
        self.buffer.clear();
        self.ack_pending.clear();
        self.uncommitted.clear();
        self.nacked.clear();
    }

    /// Processed `d` (message `msg`): settled by its next offset commit.
    #[inline]
    pub fn hold_for_commit(&mut self, d: Delivery, msg: MsgRef) {
        self.uncommitted.push((d, msg));
    }

    /// It processed records since its last commit.
    #[inline]
    pub fn has_uncommitted(&self) -> bool {
        !self.uncommitted.is_empty()
    }

    /// Takes what it processed since its last commit, to commit it.
    #[inline]
    pub fn take_uncommitted(&mut self) -> Vec<(Delivery, MsgRef)> {
        std::mem::take(&mut self.uncommitted)
    }

    /// Gives back the (cleared) list a commit took, to reuse its allocation, unless it
    /// processed more meanwhile.
    #[inline]
    pub fn reuse_uncommitted(&mut self, records: Vec<(Delivery, MsgRef)>) {
        if self.uncommitted.is_empty() {
            self.uncommitted = records;
        }
    }

    /// Takes what it processed since its last commit, uncommitted (the broker takes it back).
    #[inline]
    pub fn drain_uncommitted(&mut self) -> impl Iterator<Item = Delivery> + '_ {
        self.uncommitted.drain(..).map(|(d, _)| d)
    }

    /// Something of its batch is left: received and not started, or processed and not
    /// committed.
    #[inline]
    pub fn has_rest_of_batch(&self) -> bool {
        !(self.buffer.is_empty() && self.uncommitted.is_empty())
    }

    /// It negatively acknowledged `d`; its own timer asks for the redelivery at `due`
    /// (`delay_in_client`).
    #[inline]
    pub fn nack_in_client(&mut self, d: Delivery, due: Time) {
        self.nacked.push((d, due));
    }

    /// Where its negative ack of `d`, due by `now`, is kept ([`Self::clear_nack`]).
    #[inline]
    pub fn nack_due(&self, d: Delivery, now: Time) -> Option<usize> {
        self.nacked
            .iter()
            .position(|&(x, due)| x == d && due <= now)
    }

    /// Its negative ack `i` ([`Self::nack_due`]) asked for the redelivery.
    #[inline]
    pub fn clear_nack(&mut self, i: usize) {
        self.nacked.swap_remove(i);
    }

    /// The broker it is connected to.
    #[inline]
    pub fn connected_to(&self) -> Option<u16> {
        self.broker
    }

    /// It is connected to a broker.
    #[inline]
    pub fn is_connected(&self) -> bool {
        self.broker.is_some()
    }

    /// Its connection is gone: the broker it was connected to, if any.
    #[inline]
    pub fn disconnect(&mut self) -> Option<u16> {
        self.broker.take()
    }
}
