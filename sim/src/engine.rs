//! The engine: one run of one strategy against one scenario and seed.
//!
//! A single-threaded discrete-event loop over integer microseconds. Two phases, as in TigerBeetle's
//! simulator and Jepsen: the fault phase (the workload and its fault plan), then the drain phase (no
//! new messages; faults end as planned; suspended endpoints resume) until every message is settled
//! or the drain bound passes. What is still unsettled is reported `pending_at_end`.

use crate::checkers::{Checkers, SelfCheckError};
use crate::dist::Sampler;
use crate::event_queue::EventQueue;
use crate::faults::FaultPlan;
use crate::history::{Event, MsgRef, Observer};
use crate::rng::{stream, Component};
use crate::scenario::{Connect, ConsumerMode, Scenario};
use crate::strategy::{ConsumerSlot, Control, MsgView, Row, Strategy};
use crate::summary::{EndReason, Metrics};
use crate::time::Time;
use crate::world::broker::BrokerState;
use crate::world::consumer::ConsumerState;
use crate::world::producer::{KeyPicker, ProducerState};
use crate::world::{Delivery, Loc, Msg, Slab};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Engine events. Small and `Copy`: the queue moves them by value, so they are kept to 16 bytes
/// (checked below); a larger payload lives in an engine table and the event carries its index.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    Arrival,
    ProducerReconnect(u32),
    ServiceDone {
        c: u32,
        epoch: u32,
    },
    BlockingRetry {
        c: u32,
        epoch: u32,
    },
    /// `ack`: index into [`Engine::acks`].
    AckArrive {
        c: u32,
        ack: u32,
    },
    RedeliveryDue {
        slot: u32,
        id: u64,
    },
    ForwardArrive {
        slot: u32,
        id: u64,
    },
    ConsumerReconnect {
        c: u32,
        epoch: u32,
    },
    ParkTimeout {
        c: u32,
        epoch: u32,
        serial: u32,
    },
    JobStart(u32),
    ProducerRetry(u32),
    Resume {
        c: u32,
        epoch: u32,
    },
    FaultStart(u32),
    FaultEnd(u32),
    Wake(u64),
    DrainDeadline,
}

const _: () = assert!(std::mem::size_of::<Ev>() <= 16);

/// Why a run could not produce a trustworthy summary.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine broke one of its own invariants: a bug, reported with the repro line.
    #[error("self-check failed: {0}")]
    SelfCheck(#[from] SelfCheckError),
}

/// Options of one run beyond the scenario.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// The seed.
    pub seed: u64,
    /// Overrides `[run] max_events`.
    pub max_events: Option<u64>,
    /// Stops the run at this simulated time, whatever the phase.
    pub max_sim_time: Option<Time>,
}

/// The world plus the loop.
pub(crate) struct Engine<'a, S: Strategy, O: Observer> {
    pub sc: &'a Scenario,
    pub plan: &'a FaultPlan,
    pub strategy: S,
    pub observer: &'a mut O,
    pub checkers: Checkers,
    pub q: EventQueue<Ev>,
    pub now: Time,
    pub events: u64,
    pub slab: Slab,
    pub producers: Vec<ProducerState>,
    pub brokers: Vec<BrokerState>,
    pub consumers: Vec<ConsumerState>,
    /// Per consumer, its [`ConsumerState::load`] (unacked deliveries held), kept dense so that
    /// dispatch reads one `u32` per candidate instead of three fields of a large struct.
    pub load: Vec<u32>,
    /// The target database, per key.
    pub rows: Vec<Row>,
    pub db_down: u32,
    /// The source database (newest produced state per key), for strategies that read it.
    pub source: Vec<Row>,
    pub source_down: u32,
    pub keys: KeyPicker,
    pub arrivals: crate::world::producer::Arrivals,
    pub produced: u64,
    pub service: Sampler,
    pub ctl: Control,
    pub scratch: Vec<ConsumerSlot>,
    /// Consumers that received messages in the current dispatch call (reused buffer).
    pub started_scratch: Vec<u32>,
    /// Which brokers are up (mirrors `brokers[i].up`, for routing).
    pub broker_up: Vec<bool>,
    pub returned: Vec<Delivery>,
    /// Deliveries whose ack is travelling to the broker (`Ev::AckArrive` carries the index);
    /// slots are reused through `acks_free`.
    pub acks: Vec<Delivery>,
    pub acks_free: Vec<u32>,
    /// Things that keep the fault phase open: messages still to produce + faults not yet over.
    pub phase_open: u64,
    pub draining: bool,
    pub poison_boost: Vec<f64>,
    /// Messages the strategy took over ([`crate::strategy::Outcome::Buffered`], acked upstream)
    /// and has neither applied nor lost yet, by id: the run is not settled while it holds any,
    /// and what it still holds at the end is pending. Looked up only, never iterated in hash
    /// order.
    pub held: BTreeMap<u64, Held>,
}

/// A message the strategy took over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub msg: MsgRef,
    /// Its slot when it was taken over (valid while the slot still holds that message id).
    pub slot: u32,
    /// The strategy dropped it while the broker still had it unacked (the ack may yet be lost
    /// and the message redelivered): lost only if that ack settles it.
    pub dropped: bool,
}

impl<'a, S: Strategy, O: Observer> Engine<'a, S, O> {
    fn new(
        sc: &'a Scenario,
        plan: &'a FaultPlan,
        seed: u64,
        strategy: S,
        observer: &'a mut O,
    ) -> Self {
        let nb = sc.brokers.len();
        let order = |list: &Option<Vec<String>>, i: usize, connect: Connect| -> Vec<u16> {
            let mut l: Vec<u16> = match list {
                Some(names) => names
                    .iter()
                    .map(|n| sc.broker_index(n).expect("validated") as u16)
                    .collect(),
                None => (0..nb as u16).collect(),
            };
            if connect == Connect::Spread && !l.is_empty() {
                let n = l.len();
                l.rotate_left(i % n);
            }
            l
        };
        let producers = (0..sc.producers.count as usize)
            .map(|i| {
                let mut rng: ChaCha8Rng = stream(seed, Component::Producer, i as u32, 0);
                ProducerState::new(
                    order(&sc.producers.brokers, i, sc.producers.connect),
                    &sc.producers,
                    &mut rng,
                )
            })
            .collect();
        let consumers = (0..sc.consumers.count as usize)
            .map(|i| {
                ConsumerState::new(
                    order(&sc.consumers.brokers, i, sc.consumers.connect),
                    stream(seed, Component::Consumer, i as u32, 0),
                )
            })
            .collect();
        let phase_open = sc.workload.messages
            + plan
                .faults
                .iter()
                .map(|f| if f.duration.is_some() { 2 } else { 1 })
                .sum::<u64>();
        Engine {
            sc,
            plan,
            strategy,
            observer,
            checkers: Checkers::new(sc.workload.keys, sc.workload.kind),
            q: EventQueue::new(),
            now: 0,
            events: 0,
            slab: Slab::default(),
            producers,
            brokers: sc.brokers.iter().map(BrokerState::new).collect(),
            consumers,
            load: vec![0; sc.consumers.count as usize],
            rows: vec![Row::default(); sc.workload.keys as usize],
            db_down: 0,
            source: vec![Row::default(); sc.workload.keys as usize],
            source_down: 0,
            keys: KeyPicker::new(sc, seed),
            arrivals: crate::world::producer::Arrivals::new(sc, seed),
            produced: 0,
            service: sc.consumers.service.0.sampler(),
            ctl: Control::default(),
            scratch: Vec::with_capacity(sc.consumers.count as usize),
            started_scratch: Vec::with_capacity(sc.consumers.count as usize),
            broker_up: vec![true; sc.brokers.len()],
            returned: Vec::new(),
            acks: Vec::new(),
            acks_free: Vec::new(),
            phase_open,
            draining: false,
            poison_boost: Vec::new(),
            held: BTreeMap::new(),
        }
    }

    /// Records a history event: checkers first, then the observer (trace file, tests).
    #[inline]
    pub fn emit(&mut self, e: Event) {
        self.checkers.observe(&e);
        self.observer.event(&e);
    }

    /// A view of a message for the strategy.
    #[inline]
    pub fn view(&self, slot: u32) -> MsgView {
        let m = self.slab.get(slot);
        MsgView {
            id: m.r.id,
            key: m.r.key,
            seq: m.r.seq,
            timestamp: m.timestamp,
            producer: m.producer,
            redeliveries: m.deliveries.saturating_sub(1),
            group: m.group.then_some(m.r.key),
        }
    }

    #[inline]
    pub fn msg_ref(&self, slot: u32) -> MsgRef {
        self.slab.get(slot).r
    }

    /// One thing keeping the fault phase open is done; when none remain, the drain phase begins.
    pub fn phase_step(&mut self) {
        self.phase_open -= 1;
        if self.phase_open == 0 && !self.draining {
            self.start_drain();
        }
    }

    fn start_drain(&mut self) {
        self.draining = true;
        self.emit(Event::DrainStart { t: self.now });
        self.q.push(
            self.now.saturating_add(self.sc.run.drain_timeout.0),
            Ev::DrainDeadline,
        );
        // Endpoints suspended "forever" come back so the drain can settle their messages.
        for c in 0..self.consumers.len() as u32 {
            if self.consumers[c as usize].suspended {
                self.resume(c);
            }
        }
    }

    /// Carries out what a strategy hook asked for.
    #[inline]
    pub fn apply_control(&mut self) {
        // Called after every hook; most hooks ask for nothing, so only the flag test is inlined.
        if !self.ctl.is_empty() {
            self.apply_control_slow();
        }
    }

    #[inline(never)]
    fn apply_control_slow(&mut self) {
        let mut ctl = std::mem::take(&mut self.ctl);
        for &(at, token) in &ctl.wakes {
            self.q.push(at.max(self.now), Ev::Wake(token));
        }
        for &(broker, consumer) in &ctl.reassigned {
            self.emit(Event::Reassign {
                t: self.now,
                broker,
                consumer,
            });
        }
        for &(key, consumer, seq) in &ctl.reads {
            self.emit(Event::SourceRead {
                t: self.now,
                key,
                consumer,
                seq,
            });
        }
        for &(msg, state_seq, worker) in &ctl.applies {
            let r = MsgRef {
                id: msg.id,
                key: msg.key,
                seq: msg.seq,
            };
            if let Some(h) = self.held.remove(&msg.id) {
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
        for &msg in &ctl.discards {
            // Only a message the strategy still held (neither applied nor discarded before) is
            // lost by this: a discarded copy of an applied message is no loss. One whose delivery
            // the broker has not settled yet may still come back (if the ack is lost): it is
            // lost when the ack settles it.
            let Some(h) = self.held.get_mut(&msg.id) else {
                continue;
            };
            let m = self.slab.get(h.slot);
            if m.r.id == msg.id && m.loc != Loc::Free {
                h.dropped = true;
                continue;
            }
            self.held.remove(&msg.id);
            let r = MsgRef {
                id: msg.id,
                key: msg.key,
                seq: msg.seq,
            };
            self.emit(Event::Discard {
                t: self.now,
                msg: r,
                reason: crate::history::DiscardReason::BufferLost,
            });
        }
        let redispatch = ctl.redispatch;
        let mut unparks = std::mem::take(&mut ctl.unparks);
        ctl.wakes.clear();
        ctl.reassigned.clear();
        ctl.reads.clear();
        ctl.applies.clear();
        ctl.discards.clear();
        ctl.redispatch = false;
        ctl.dirty = false;
        self.ctl = ctl;
        for &c in &unparks {
            self.unpark(c);
        }
        // Give the buffer back, so a lock hand-over does not allocate on every release.
        unparks.clear();
        if self.ctl.unparks.is_empty() {
            self.ctl.unparks = unparks;
        }
        if redispatch {
            for b in 0..self.brokers.len() as u16 {
                self.dispatch(b);
            }
        }
    }

    /// Forgets that the strategy holds message `id` (it was applied, rejected or dead-lettered).
    /// Most strategies never take messages over: skip the map lookup when it is empty.
    #[inline]
    pub fn unhold(&mut self, id: u64) {
        if !self.held.is_empty() {
            self.held.remove(&id);
        }
    }

    /// Notes that a copy of message `id` (in `slot`, if it is still there) has been applied.
    pub fn mark_applied(&mut self, slot: u32, id: u64) {
        let m = self.slab.get_mut(slot);
        if m.r.id == id && m.loc != Loc::Free {
            m.applied = true;
        }
    }

    /// The strategy took message `msg` (delivered in `slot`) over: it holds it until it applies
    /// or discards it. A redelivered copy of a message already applied is not held (it can no
    /// longer be pending, only duplicated).
    pub fn take_over(&mut self, slot: u32, msg: MsgRef) {
        let m = self.slab.get(slot);
        if m.r.id == msg.id && m.loc != Loc::Free && m.applied {
            return;
        }
        self.held.insert(
            msg.id,
            Held {
                msg,
                slot,
                dropped: false,
            },
        );
    }

    /// Writes the target row of `key` with the state of `state_seq`.
    pub fn write_row(&mut self, key: u32, state_seq: u32, timestamp: u64) {
        let row = &mut self.rows[key as usize];
        row.state = state_seq + 1;
        row.timestamp = timestamp;
        row.version += 1;
    }

    /// Tells the strategy about a change in the world, and carries out what it asks.
    pub fn world_change(&mut self, change: crate::strategy::WorldChange) {
        self.strategy.on_world(self.now, change, &mut self.ctl);
        self.apply_control();
    }

    // One call site (the loop): inlined, so the loop does not pay a call frame per event.
    #[inline(always)]
    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrival => self.arrival(),
            Ev::ProducerReconnect(p) => self.producer_reconnect(p),
            Ev::ServiceDone { c, epoch } => self.service_done(c, epoch),
            Ev::BlockingRetry { c, epoch } => self.blocking_retry(c, epoch),
            Ev::AckArrive { c, ack } => {
                let d = self.acks[ack as usize];
                self.acks_free.push(ack);
                self.ack_arrive(c, d)
            }
            Ev::RedeliveryDue { slot, id } => self.redelivery_due(slot, id),
            Ev::ForwardArrive { slot, id } => self.forward_arrive(slot, id),
            Ev::ConsumerReconnect { c, epoch } => self.consumer_reconnect(c, epoch),
            Ev::ParkTimeout { c, epoch, serial } => self.park_timeout(c, epoch, serial),
            Ev::ProducerRetry(p) => self.producer_retry(p),
            Ev::JobStart(c) => self.job_start(c),
            Ev::Resume { c, epoch } => {
                let cs = &self.consumers[c as usize];
                if cs.suspended && cs.suspend_epoch == epoch {
                    self.resume(c);
                }
            }
            Ev::FaultStart(i) => self.fault_start(i),
            Ev::FaultEnd(i) => self.fault_end(i),
            Ev::Wake(token) => {
                self.strategy.on_wake(self.now, token, &mut self.ctl);
                self.ctl.redispatch();
                self.apply_control();
            }
            Ev::DrainDeadline => unreachable!("handled by the loop"),
        }
    }

    fn run(mut self, opts: &RunOptions) -> Result<Metrics, RunError> {
        if self.sc.workload.messages > 0 {
            let first = self.arrivals.next_gap();
            self.q.push(first, Ev::Arrival);
        }
        for (i, f) in self.plan.faults.iter().enumerate() {
            self.q.push(f.at, Ev::FaultStart(i as u32));
        }
        // Producers and consumers connect at time 0, in index order.
        for p in 0..self.producers.len() as u32 {
            self.producer_reconnect(p);
        }
        for c in 0..self.consumers.len() as u32 {
            match &self.sc.consumers.batch {
                // A batch job connects only when its run starts.
                Some(b) if self.sc.consumers.mode == ConsumerMode::Batch => {
                    self.q.push(b.interval.0, Ev::JobStart(c));
                }
                _ => self.consumer_reconnect(c, 0),
            }
        }
        if self.phase_open == 0 {
            self.start_drain();
        }
        let max_events = opts.max_events.unwrap_or(self.sc.run.max_events);
        let max_time = opts.max_sim_time.unwrap_or(Time::MAX);
        let mut ended_by = EndReason::Stuck;
        while let Some((t, ev)) = self.q.pop() {
            if t > max_time {
                self.now = max_time;
                ended_by = EndReason::MaxSimTime;
                break;
            }
            debug_assert!(t >= self.now, "time went backwards");
            self.now = t;
            if let Ev::DrainDeadline = ev {
                ended_by = EndReason::DrainTimeout;
                break;
            }
            self.events += 1;
            self.handle(ev);
            if self.draining && self.slab.live == 0 && self.held.is_empty() {
                ended_by = EndReason::Settled;
                break;
            }
            if self.events >= max_events {
                ended_by = EndReason::MaxEvents;
                break;
            }
        }
        if self.q.is_empty()
            && self.slab.live == 0
            && self.held.is_empty()
            && self.produced == self.sc.workload.messages
        {
            ended_by = EndReason::Settled;
        }
        let mut metrics = self.finish()?;
        metrics.ended_by = ended_by;
        Ok(metrics)
    }

    fn finish(mut self) -> Result<Metrics, RunError> {
        let mut pending: Vec<MsgRef> = self
            .slab
            .msgs
            .iter()
            .filter(|m| m.loc != Loc::Free)
            .map(|m| m.r)
            .collect();
        // And every message the strategy still holds (taken over, acked upstream).
        pending.extend(self.held.values().filter(|h| !h.dropped).map(|h| h.msg));
        pending.sort_by_key(|m| m.id);
        pending.dedup_by_key(|m| m.id);
        // Every message the engine still holds is listed; the checker fails the run if one of them
        // was already final in the history, or if a message neither final nor listed is left.
        for msg in pending {
            self.emit(Event::Pending { t: self.now, msg });
        }
        Ok(self.checkers.finish(self.events, self.now)?)
    }

    /// Allocates a new message slot.
    pub fn alloc(&mut self, m: Msg) -> u32 {
        self.slab.alloc(m)
    }
}

/// Runs `strategy` on `sc` with its resolved `plan`, feeding every history event to `observer`.
pub fn run<S: Strategy, O: Observer>(
    sc: &Scenario,
    plan: &FaultPlan,
    strategy: S,
    opts: &RunOptions,
    observer: &mut O,
) -> Result<Metrics, RunError> {
    Engine::new(sc, plan, opts.seed, strategy, observer).run(opts)
}
