//! Consumers: sessions that process one message at a time from a prefetch buffer; the handler; the
//! ack (after the apply: a crash in between makes a duplicate); rollback with blocking or
//! non-blocking redelivery and the backout threshold; crashes, network blips, reconnects (consumer
//! failover), and endpoint suspension after repeated failures.

use super::{Delivery, Loc};
use crate::engine::{Engine, Ev};
use crate::history::MsgRef;
use crate::history::{Event, FailReason, Node, Observer};
use crate::scenario::{ConsumerMode, RedeliveryMode};
use crate::strategy::{Begin, HandlerCtx, MsgView, Outcome, Strategy, WorldChange};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// The message in hand: its delivery, and the consumer's own copy of the message (a consumer
/// that lost its connection goes on with it even after the broker gave it to someone else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    pub d: Delivery,
    pub view: MsgView,
    pub poison: bool,
}

/// What the session is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
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
    rows: &'a [crate::strategy::Row],
    source: &'a [crate::strategy::Row],
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

/// One consumer.
pub(crate) struct ConsumerState {
    /// Failover list.
    pub list: Vec<u16>,
    /// Process alive.
    pub up: bool,
    /// Process incarnation: events of an earlier life are ignored.
    pub epoch: u32,
    /// Connected broker.
    pub broker: Option<u16>,
    /// The last disconnect was involuntary (crash, blip, broker loss): the next connect is a
    /// failover.
    pub lost_connection: bool,
    /// Network blip nesting: reconnects when it returns to 0.
    pub blip_depth: u32,
    pub crash_depth: u32,
    pub phase: Phase,
    /// Delivered, not yet started.
    pub buffer: VecDeque<Delivery>,
    /// Applied (or rejected), ack not yet at the broker.
    pub ack_pending: Vec<Delivery>,
    pub failures_in_row: u32,
    pub suspended: bool,
    pub suspend_epoch: u32,
    pub park_serial: u32,
    /// Batch mode: a job run is in progress.
    pub job_running: bool,
    /// Batch mode: in-job retries used on the message in hand.
    pub job_retries: u32,
    pub slow: f64,
    pub rng: ChaCha8Rng,
}

impl ConsumerState {
    pub fn new(list: Vec<u16>, rng: ChaCha8Rng) -> Self {
        ConsumerState {
            list,
            up: true,
            epoch: 0,
            broker: None,
            lost_connection: false,
            blip_depth: 0,
            crash_depth: 0,
            phase: Phase::Idle,
            buffer: VecDeque::new(),
            ack_pending: Vec::new(),
            failures_in_row: 0,
            suspended: false,
            suspend_epoch: 0,
            park_serial: 0,
            job_running: false,
            job_retries: 0,
            slow: 1.0,
            rng,
        }
    }

    /// Every unacknowledged delivery it holds: prefetched, in hand, or acked but not yet settled.
    /// Free prefetch capacity is `prefetch` minus this.
    #[inline]
    pub fn load(&self) -> u32 {
        let busy = u32::from(!matches!(self.phase, Phase::Idle));
        self.buffer.len() as u32 + busy + self.ack_pending.len() as u32
    }
}

impl<S: Strategy, O: Observer> Engine<'_, S, O> {
    /// Copies consumer `c`'s [`ConsumerState::load`] into the dense `Engine::load` table that
    /// dispatch reads. Called after every change of its buffer, phase or pending acks, before
    /// anything that may dispatch; dispatch checks the copy in debug builds.
    #[inline]
    pub(crate) fn sync_load(&mut self, c: u32) {
        self.load[c as usize] = self.consumers[c as usize].load();
    }

    /// Broker `b` pushes a message to consumer `c`.
    pub(crate) fn deliver(&mut self, b: u16, c: u32, slot: u32) {
        let m = self.slab.get_mut(slot);
        m.deliveries += 1;
        let delivery = m.deliveries;
        m.loc = Loc::Delivered {
            broker: b,
            consumer: c,
            delivery,
        };
        let (msg, id) = (m.r, m.r.id);
        self.emit(Event::Dispatch {
            t: self.now,
            msg,
            broker: b,
            consumer: c,
            delivery,
            redelivered: delivery > 1,
        });
        self.consumers[c as usize].buffer.push_back(Delivery {
            slot,
            id,
            delivery,
            broker: b,
        });
        self.sync_load(c);
    }

    /// An idle, connected consumer takes the next message from its buffer; the strategy's `begin`
    /// may let it proceed, park it (waiting for a lock), or fail it.
    pub(crate) fn start_next(&mut self, c: u32) {
        let cs = &mut self.consumers[c as usize];
        if !cs.up || cs.suspended || !matches!(cs.phase, Phase::Idle) {
            return;
        }
        let Some(d) = cs.buffer.pop_front() else {
            if cs.job_running && cs.ack_pending.is_empty() && cs.broker.is_some() {
                // receiveNoWait() returned nothing: the queue is drained for this run.
                self.end_job(c, false);
            }
            return;
        };
        let view = self.view(d.slot);
        let poison = self.slab.get(d.slot).poison;
        let msg = MsgRef {
            id: view.id,
            key: view.key,
            seq: view.seq,
        };
        self.emit(Event::Start {
            t: self.now,
            msg,
            consumer: c,
        });
        let job = Job { d, view, poison };
        let begin = {
            let ctx = handler_ctx(
                self.now,
                c,
                0,
                poison,
                self.db_down,
                self.source_down,
                &self.rows,
                &self.source,
            );
            self.strategy.begin(&ctx, &view, &mut self.ctl)
        };
        match begin {
            Begin::Proceed => self.serve(c, job),
            Begin::Wait { timeout } => {
                let cs = &mut self.consumers[c as usize];
                cs.park_serial += 1;
                let serial = cs.park_serial;
                cs.phase = Phase::Parked { job, serial };
                if let Some(t) = timeout {
                    let epoch = cs.epoch;
                    self.q
                        .push(self.now + t, Ev::ParkTimeout { c, epoch, serial });
                }
                self.sync_load(c);
            }
            Begin::Fail(reason) => {
                self.consumers[c as usize].phase = Phase::Serving { job, step: 0 };
                self.sync_load(c);
                self.failed(c, job, reason);
            }
        }
        self.apply_control();
        if matches!(self.consumers[c as usize].phase, Phase::Idle) {
            self.start_next(c);
        }
    }

    /// Service starts: the processing time is drawn now.
    fn serve(&mut self, c: u32, job: Job) {
        let cs = &mut self.consumers[c as usize];
        cs.phase = Phase::Serving { job, step: 0 };
        let svc = self.service.sample(&mut cs.rng);
        let svc = if cs.slow == 1.0 {
            svc
        } else {
            (svc as f64 * cs.slow).round() as u64
        };
        let epoch = cs.epoch;
        self.q.push(self.now + svc, Ev::ServiceDone { c, epoch });
        self.sync_load(c);
    }

    /// A parked consumer may go on (the strategy released what it waited for).
    pub(crate) fn unpark(&mut self, c: u32) {
        if let Phase::Parked { job, .. } = self.consumers[c as usize].phase {
            if self.consumers[c as usize].up {
                self.serve(c, job);
            }
        }
    }

    /// A parked consumer waited too long: the strategy releases its claim, and the delivery fails.
    pub(crate) fn park_timeout(&mut self, c: u32, epoch: u32, serial: u32) {
        let cs = &self.consumers[c as usize];
        let Phase::Parked { job, serial: s } = cs.phase else {
            return;
        };
        if cs.epoch != epoch || s != serial {
            return;
        }
        self.strategy.abandon(self.now, c, &job.view, &mut self.ctl);
        self.failed(c, job, FailReason::Strategy);
        self.apply_control();
        self.start_next(c);
    }

    /// Processing is over: run the handler, then ack, or roll back. A consumer that lost its
    /// connection meanwhile still runs the handler (the side effect happens); its ack will be lost.
    pub(crate) fn service_done(&mut self, c: u32, epoch: u32) {
        let cs = &self.consumers[c as usize];
        if cs.epoch != epoch || !cs.up {
            return;
        }
        let Phase::Serving { job, step } = cs.phase else {
            return;
        };
        let outcome = {
            let ctx = handler_ctx(
                self.now,
                c,
                step,
                job.poison,
                self.db_down,
                self.source_down,
                &self.rows,
                &self.source,
            );
            self.strategy.handle(&ctx, &job.view, &mut self.ctl)
        };
        let msg = MsgRef {
            id: job.view.id,
            key: job.view.key,
            seq: job.view.seq,
        };
        match outcome {
            Outcome::Applied { state_seq } => {
                self.unhold(msg.id);
                self.mark_applied(job.d.slot, msg.id);
                self.write_row(msg.key, state_seq, job.view.timestamp);
                self.emit(Event::Apply {
                    t: self.now,
                    msg,
                    consumer: c,
                    state_seq,
                });
                self.succeeded(c, job.d);
            }
            Outcome::Rejected => {
                self.unhold(msg.id);
                self.emit(Event::Reject {
                    t: self.now,
                    msg,
                    consumer: c,
                });
                self.succeeded(c, job.d);
            }
            Outcome::Buffered => {
                self.take_over(job.d.slot, msg);
                self.succeeded(c, job.d)
            }
            Outcome::Failed(reason) => self.failed(c, job, reason),
            Outcome::After { delay, step } => {
                self.consumers[c as usize].phase = Phase::Serving { job, step };
                self.q.push(self.now + delay, Ev::ServiceDone { c, epoch });
                self.apply_control();
                return;
            }
        }
        self.apply_control();
        self.start_next(c);
    }

    fn succeeded(&mut self, c: u32, d: Delivery) {
        let cs = &mut self.consumers[c as usize];
        cs.failures_in_row = 0;
        cs.job_retries = 0;
        cs.phase = Phase::Idle;
        let latency = self.sc.consumers.ack_latency.0;
        if latency == 0 {
            self.sync_load(c);
            self.ack_arrive(c, d);
        } else {
            cs.ack_pending.push(d);
            self.sync_load(c);
            let ack = match self.acks_free.pop() {
                Some(i) => {
                    self.acks[i as usize] = d;
                    i
                }
                None => {
                    self.acks.push(d);
                    (self.acks.len() - 1) as u32
                }
            };
            self.q.push(self.now + latency, Ev::AckArrive { c, ack });
        }
    }

    /// The ack reaches the broker: settled if the delivery is still current (else it was already
    /// given back for redelivery, and this ack is lost).
    pub(crate) fn ack_arrive(&mut self, c: u32, d: Delivery) {
        let cs = &mut self.consumers[c as usize];
        if let Some(i) = cs.ack_pending.iter().position(|x| *x == d) {
            cs.ack_pending.swap_remove(i);
            self.sync_load(c);
        }
        if !self.slab.valid(&d, c) || !self.brokers[d.broker as usize].up {
            return;
        }
        let msg = self.msg_ref(d.slot);
        self.emit(Event::Ack {
            t: self.now,
            msg,
            consumer: c,
        });
        self.settle(d.slot);
        self.apply_control();
        self.dispatch(d.broker);
        if self.consumers[c as usize].job_running {
            self.start_next(c);
        }
    }

    fn failed(&mut self, c: u32, job: Job, reason: FailReason) {
        let d = job.d;
        let msg = MsgRef {
            id: job.view.id,
            key: job.view.key,
            seq: job.view.seq,
        };
        self.emit(Event::Rollback {
            t: self.now,
            msg,
            consumer: c,
            reason,
        });
        if self.consumers[c as usize].job_running {
            self.batch_failed(c, d, msg, reason);
            return;
        }
        let cs = &mut self.consumers[c as usize];
        cs.failures_in_row += 1;
        cs.phase = Phase::Idle;
        let n = self.sc.consumers.suspend_after_failures;
        // The endpoint stops after this failure (WebSphere's "sequential delivery failures"): it
        // must not start another message first, so nothing is dispatched to it below.
        let suspend = n > 0 && cs.failures_in_row >= n && !cs.suspended;
        self.sync_load(c);
        // A consumer whose connection is gone cannot roll back at the broker: the broker already
        // took the message back when the connection dropped.
        if self.slab.valid(&d, c) && self.brokers[d.broker as usize].up {
            let r = &self.sc.redelivery;
            let deliveries = self.slab.get(d.slot).deliveries;
            let redelivered_so_far = deliveries.saturating_sub(1) as i64;
            if r.max_redeliveries >= 0 && redelivered_so_far >= r.max_redeliveries {
                self.dead_letter(d.broker, d.slot);
                if !suspend {
                    self.dispatch(d.broker);
                }
            } else {
                let delay = r.delay(deliveries).0;
                let blocking = r.mode == RedeliveryMode::Blocking;
                self.emit(Event::Redelivery {
                    t: self.now,
                    msg,
                    delay_us: delay,
                    blocking,
                });
                if blocking {
                    let cs = &mut self.consumers[c as usize];
                    cs.phase = Phase::Waiting { d };
                    let epoch = cs.epoch;
                    self.q
                        .push(self.now + delay, Ev::BlockingRetry { c, epoch });
                    self.sync_load(c);
                } else {
                    self.slab.get_mut(d.slot).loc = Loc::Held(d.broker);
                    self.q.push(
                        self.now + delay,
                        Ev::RedeliveryDue {
                            slot: d.slot,
                            id: d.id,
                        },
                    );
                    if !suspend {
                        self.dispatch(d.broker);
                    }
                }
            }
        }
        if suspend {
            self.suspend(c);
        }
    }

    /// Blocking redelivery: the consumer redelivers the held message to itself.
    pub(crate) fn blocking_retry(&mut self, c: u32, epoch: u32) {
        let cs = &self.consumers[c as usize];
        if cs.epoch != epoch || !cs.up {
            return;
        }
        let Phase::Waiting { d } = cs.phase else {
            return;
        };
        self.consumers[c as usize].phase = Phase::Idle;
        self.sync_load(c);
        if !self.slab.valid(&d, c) {
            self.start_next(c);
            return;
        }
        // Redelivered to the same consumer, ahead of everything it has prefetched.
        let m = self.slab.get_mut(d.slot);
        m.deliveries += 1;
        let delivery = m.deliveries;
        m.loc = Loc::Delivered {
            broker: d.broker,
            consumer: c,
            delivery,
        };
        let msg = m.r;
        self.emit(Event::Dispatch {
            t: self.now,
            msg,
            broker: d.broker,
            consumer: c,
            delivery,
            redelivered: true,
        });
        let nd = Delivery { delivery, ..d };
        self.consumers[c as usize].buffer.push_front(nd);
        self.sync_load(c);
        self.start_next(c);
    }

    /// Consumer `c` leaves its broker (crash, blip, broker down, suspension): the broker takes back
    /// every unacknowledged delivery. `keep_current`: the process is alive and goes on with the
    /// message in hand (it will apply it, but its ack will be lost).
    fn detach(&mut self, c: u32, keep_current: bool) {
        let Some(b) = self.consumers[c as usize].broker.take() else {
            return;
        };
        let att = &mut self.brokers[b as usize].attached;
        if let Some(i) = att.iter().position(|&x| x == c) {
            att.remove(i);
        }
        let cs = &mut self.consumers[c as usize];
        let mut back: Vec<Delivery> = cs.buffer.drain(..).collect();
        back.append(&mut cs.ack_pending);
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
        // The message in hand is dropped: the strategy releases what `begin` took for it (locks).
        if let Some(view) = abandoned {
            self.strategy.abandon(self.now, c, &view, &mut self.ctl);
        }
        self.return_deliveries(back);
        self.strategy.on_detach(self.now, b, c, &mut self.ctl);
        self.apply_control();
        self.dispatch(b);
    }

    fn attach(&mut self, c: u32, b: u16) {
        let cs = &mut self.consumers[c as usize];
        cs.broker = Some(b);
        let failover = cs.lost_connection;
        cs.lost_connection = false;
        self.brokers[b as usize].attached.push(c);
        self.emit(Event::Connect {
            t: self.now,
            node: Node::Consumer(c),
            broker: b,
            failover,
        });
        self.strategy.on_attach(self.now, b, c, &mut self.ctl);
        self.apply_control();
        self.dispatch(b);
    }

    /// The consumer's broker crashed: its connection is gone (the process goes on); it fails over.
    pub(crate) fn consumer_lost_broker(&mut self, c: u32, b: u16) {
        debug_assert_eq!(self.consumers[c as usize].broker, Some(b));
        // The broker's attached list was already taken by the crash; detach does the rest.
        self.brokers[b as usize].attached.push(c);
        self.consumers[c as usize].lost_connection = true;
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, true);
        self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0);
    }

    fn schedule_reconnect(&mut self, c: u32, after: u64) {
        let epoch = self.consumers[c as usize].epoch;
        self.q
            .push(self.now + after, Ev::ConsumerReconnect { c, epoch });
    }

    /// A connection attempt through the failover list; retried after the reconnect delay.
    pub(crate) fn consumer_reconnect(&mut self, c: u32, epoch: u32) {
        let cs = &self.consumers[c as usize];
        if cs.epoch != epoch || !cs.up || cs.broker.is_some() || cs.blip_depth > 0 || cs.suspended {
            return;
        }
        if self.sc.consumers.mode == ConsumerMode::Batch && !cs.job_running {
            return;
        }
        match cs
            .list
            .iter()
            .copied()
            .find(|&b| self.brokers[b as usize].up)
        {
            Some(b) => self.attach(c, b),
            None => self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0.max(1)),
        }
    }

    /// The process dies: everything unacked goes back; the message in hand is abandoned.
    pub(crate) fn consumer_crash(&mut self, c: u32) {
        let cs = &mut self.consumers[c as usize];
        cs.crash_depth += 1;
        if cs.crash_depth > 1 {
            return;
        }
        cs.up = false;
        cs.epoch += 1;
        cs.job_running = false;
        cs.lost_connection = true;
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Consumer(c),
        });
        // Detaching abandons the message in hand (the strategy releases its locks).
        self.detach(c, false);
        self.world_change(WorldChange::ConsumerCrashed(c));
        let cs = &mut self.consumers[c as usize];
        cs.phase = Phase::Idle;
        cs.buffer.clear();
        cs.ack_pending.clear();
        cs.failures_in_row = 0;
        self.sync_load(c);
    }

    /// The process restarts and connects.
    pub(crate) fn consumer_restart(&mut self, c: u32) {
        let cs = &mut self.consumers[c as usize];
        cs.crash_depth = cs.crash_depth.saturating_sub(1);
        if cs.crash_depth > 0 || cs.up {
            return;
        }
        cs.up = true;
        cs.epoch += 1;
        let epoch = cs.epoch;
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.world_change(WorldChange::ConsumerRestarted(c));
        self.consumer_reconnect(c, epoch);
    }

    /// The connection drops; the process goes on with the message in hand.
    pub(crate) fn blip_start(&mut self, c: u32) {
        let cs = &mut self.consumers[c as usize];
        cs.blip_depth += 1;
        if cs.blip_depth > 1 || !cs.up {
            return;
        }
        cs.lost_connection = true;
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, true);
    }

    /// The network is back: reconnect.
    pub(crate) fn blip_end(&mut self, c: u32) {
        let cs = &mut self.consumers[c as usize];
        cs.blip_depth = cs.blip_depth.saturating_sub(1);
        if cs.blip_depth == 0 {
            let epoch = cs.epoch;
            self.consumer_reconnect(c, epoch);
        }
    }

    /// Endpoint stopped after too many failures in a row (the [MDB-or-batch] post's activation
    /// spec).
    fn suspend(&mut self, c: u32) {
        self.emit(Event::Suspend {
            t: self.now,
            consumer: c,
        });
        self.detach(c, false);
        let cs = &mut self.consumers[c as usize];
        cs.suspended = true;
        // A new session incarnation: timers of the old one (blocking retries) must not fire into it.
        cs.epoch += 1;
        cs.suspend_epoch += 1;
        let epoch = cs.suspend_epoch;
        if let Some(after) = self.sc.consumers.resume_after {
            self.q.push(self.now + after.0, Ev::Resume { c, epoch });
        }
    }

    /// A suspended endpoint starts again.
    pub(crate) fn resume(&mut self, c: u32) {
        let cs = &mut self.consumers[c as usize];
        cs.suspended = false;
        cs.failures_in_row = 0;
        let epoch = cs.epoch;
        self.emit(Event::Resume {
            t: self.now,
            consumer: c,
        });
        self.consumer_reconnect(c, epoch);
    }

    /// A scheduled batch run starts: the job connects and drains the queue.
    pub(crate) fn job_start(&mut self, c: u32) {
        let interval = self
            .sc
            .consumers
            .batch
            .as_ref()
            .map_or(1, |b| b.interval.0.max(1));
        self.q.push(self.now + interval, Ev::JobStart(c));
        let cs = &mut self.consumers[c as usize];
        if !cs.up || cs.job_running {
            return;
        }
        cs.job_running = true;
        cs.job_retries = 0;
        let epoch = cs.epoch;
        self.emit(Event::JobStart {
            t: self.now,
            consumer: c,
        });
        self.consumer_reconnect(c, epoch);
        // Nothing delivered on connect: the queue is empty (or the broker unreachable) this run.
        self.start_next(c);
        if self.consumers[c as usize].broker.is_none() && self.consumers[c as usize].job_running {
            self.end_job(c, true);
        }
    }

    /// The run is over: drained, or given up on a resource outage (the rest waits for the next).
    fn end_job(&mut self, c: u32, gave_up: bool) {
        let cs = &mut self.consumers[c as usize];
        cs.job_running = false;
        cs.job_retries = 0;
        self.emit(Event::JobEnd {
            t: self.now,
            consumer: c,
            gave_up,
        });
        self.detach(c, false);
    }

    /// A batch job's error handling ([MDB-or-batch]): retry a resource outage in the job with a
    /// growing delay, then stop the run; roll a poison message back to the head of the queue, where
    /// the next read finds it again until the backout threshold moves it to the backout queue.
    /// Every rollback counts toward that threshold, so a long outage can back out innocent
    /// messages.
    fn batch_failed(&mut self, c: u32, d: Delivery, msg: MsgRef, reason: FailReason) {
        self.consumers[c as usize].phase = Phase::Idle;
        self.sync_load(c);
        if !self.slab.valid(&d, c) || !self.brokers[d.broker as usize].up {
            self.start_next(c);
            return;
        }
        let job = self
            .sc
            .consumers
            .batch
            .as_ref()
            .expect("batch mode has a batch table");
        let deliveries = self.slab.get(d.slot).deliveries;
        let max = self.sc.redelivery.max_redeliveries;
        if max >= 0 && deliveries.saturating_sub(1) as i64 >= max {
            self.dead_letter(d.broker, d.slot);
            self.dispatch(d.broker);
            self.start_next(c);
            return;
        }
        let cs = &mut self.consumers[c as usize];
        if reason == FailReason::Outage && cs.job_retries < job.retries {
            cs.job_retries += 1;
            let n = cs.job_retries;
            let delay = (job.retry_delay.0 as f64 * job.retry_multiplier.powi(n as i32 - 1))
                .min(3.2e15) as u64;
            cs.phase = Phase::Waiting { d };
            let epoch = cs.epoch;
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
        // Roll back: the message returns to the head of the queue at once.
        self.emit(Event::Redelivery {
            t: self.now,
            msg,
            delay_us: 0,
            blocking: false,
        });
        self.slab.get_mut(d.slot).loc = Loc::Queued(d.broker);
        self.brokers[d.broker as usize].queue.push_front(d.slot);
        if reason == FailReason::Outage {
            self.end_job(c, true);
        } else {
            self.dispatch(d.broker);
            self.start_next(c);
        }
    }
}
