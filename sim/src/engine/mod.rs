//! The engine: one run of one strategy against one scenario and seed.
//!
//! A single-threaded discrete-event loop over integer microseconds. Two phases, as in TigerBeetle's
//! simulator and Jepsen: the fault phase (the workload and its fault plan), then the drain phase (no
//! new messages; faults end as planned; suspended endpoints resume) until every message is settled
//! or the drain bound passes. What is still unsettled is reported `pending_at_end`.
//!
//! # Map
//!
//! Plain state lives in [`state`] (messages and where they are, every node's state, the target
//! and source databases) and [`workload`] (arrivals and key draws); the events the queue carries
//! in [`events`]. Each kind of node is handled in its own file, and a message's life reads
//! top to bottom through them:
//!
//! | file | what happens there |
//! |---|---|
//! | `producer.rs` | the producer node (`Producer`); a message is produced, routed by the strategy, stored at a broker; failed sends (`send_error`) are retried, overtaken by at most `max_in_flight - 1` later ones without idempotence, and given up at the `delivery_timeout` |
//! | `replication.rs` | a Kafka topic's replicas (`[broker.replication]`): a send written at the partitions' leader, committed (readable; answered under `acks = "all"`) once its followers have it; the log cut back for a new leader |
//! | `txn.rs` | Kafka transactions (`[producers] transactional`): a transactional producer's records written in transactions committed every `commit_interval`; under `read_committed` a partition is readable only up to its last stable offset |
//! | `broker.rs` | the broker node (`Broker`: its store, attached consumers, bridges and dead-letter queue as private state; it chooses what dispatch hands out, through the strategy's `select`, and hands it to a consumer or a bridge), the one requeue, settlement (ack, dead-letter), a delivery's lease |
//! | `network.rs` | the network of brokers: ActiveMQ's bridge (one more consumer, driven by the peer's demand) or idle store-and-forward: forwards arriving, credit coming back, demand |
//! | `consumer.rs` | processing (`begin`, `handle`), the ack; attach/detach |
//! | `lifecycle.rs` | a consumer process's life: crash, restart, network blip, suspension |
//! | `commit.rs` | a log's consumer settles what it processed by offset commits at its polls (after each poll's records, or Kafka's auto-commit at a poll once its interval is over) or on a rebalance; a commit of records no longer its own is refused |
//! | `membership.rs` | a consumer leaves its group gracefully and joins again (`consumer_leave`) |
//! | `redelivery.rs` | a rollback: redelivery after the policy's delay (blocking or not), or the dead-letter queue |
//! | `lease.rs` | delivery leases (visibility timeout, lock duration): expiry hands the message to another consumer, renewal, the late ack refused |
//! | `pause.rs` | a consumer process that stops with its connection open (`consumer_pause`): dropped after `failure_detection`, then a zombie write |
//! | `detection.rs` | how the broker learns a consumer died: at once, after a timeout, or never (its leases expire) |
//! | `batch.rs` | consumers hosted as a scheduled batch job |
//! | `failover.rs` | **broker failover**: a broker crashes and restarts; producers and consumers reconnect through their lists |
//! | `faults.rs` | the fault plan acting on the world |
//! | `control.rs` | a strategy's applies and discards outside a transaction; world changes told to it |
//! | `walk.rs` | test builds only: the file transitions of a message's walk |
//!
//! Where is a redelivery scheduled? `redelivery.rs`. Where does broker failover live?
//! `failover.rs`. Every handler is a method of [`Engine`]; the broker, the consumer and the
//! producer are nodes that own their state (other files change it only through their methods).
//!
//! # The router
//!
//! Calls between the files go one way, down this list read from the bottom: broker, txn, replication, producer,
//! network, consumer, lease, failover, detection, lifecycle, pause, commit, poll, membership,
//! faults, batch, redelivery. What a lower file needs done above it (a rollback, a reconnect, a
//! batch job's end, a consumer starting what it received) is an effect ([`Fx`]) it asks for with
//! [`Engine::then`]; the router here carries the effects out once the step that asked is over,
//! each a step of its own, in the order asked and depth first, which is the order the nested
//! calls had, so every history is what it was. A handler called while effects of its step still
//! wait (`dispatch`, `start_next`, `apply_control`) waits its turn behind them
//! ([`Engine::waiting`]); a handler that calls several nodes in turn lets each one's effects
//! finish first ([`Engine::flush`]). Nothing re-enters a handler through another file, so no
//! stack guard is needed; `scripts/engine-calls.py` checks the direction.

mod batch;
mod broker;
mod commit;
mod consumer;
mod control;
mod detection;
mod events;
mod failover;
mod faults;
mod lease;
mod lifecycle;
mod membership;
mod network;
mod pause;
mod poll;
mod producer;
mod redelivery;
mod replication;
mod state;
mod txn;
mod walk;
mod workload;

use crate::checkers::{Checkers, SelfCheckError};
use crate::dist::Sampler;
use crate::event_queue::EventQueue;
use crate::faults::FaultPlan;
use crate::history::{DynObserver, Event, FailReason, MsgRef, NoObserver, Observer};
use crate::rng::{
    stream, Component, ELECTION, REPLICATION_LAG, RESTART, SEND_ERRORS, TAKEOVER, TRANSIT,
};
use crate::scenario::{Commit, Connect, ConsumerMode, FieldError, Receive, Resolved, Scenario};
use crate::strategy::{ConsumerSlot, Control, Hooks, MsgView, Request, Row, Strategy};
use crate::summary::{EndReason, Metrics};
use crate::time::Time;
use broker::Broker;
use consumer::Consumer;
use events::Ev;
use producer::Producer;
use rand_chacha::ChaCha8Rng;
use state::{Loc, Msg, Slab, World};
use std::collections::BTreeMap;
use workload::{Arrivals, KeyPicker};

/// A run that goes this many engine events without progress ([`Event::is_progress`], or a
/// fault starting or ending) while no planned fault is left to start or end can never settle
/// what it holds: it ends as [`EndReason::Stuck`] at once (about a second of wall time at most)
/// instead of spinning until `drain_timeout` or `max_events`. A poison message looping without a
/// backout threshold rolls back on every delivery, which is progress by this definition: such a
/// run ends at its drain bound, as designed.
pub const STUCK_AFTER_EVENTS: u64 = 1_000_000;

/// Why a run could not produce a trustworthy summary.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine broke one of its own invariants: a bug, reported with the repro line.
    #[error("self-check failed: {0}")]
    SelfCheck(#[from] SelfCheckError),
    /// The scenario needs a default its flavour does not give (an unvalidated scenario: a
    /// library caller's, or a `flavour = "native"` one resolved for a strategy's broker).
    #[error("the scenario does not resolve on its flavour: {}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Unresolved(Vec<FieldError>),
}

/// What a handler asks the engine to do after it, instead of calling another node's handler
/// (issue 35: the nodes return effects, one router carries them out).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fx {
    /// Broker `b` hands out what its consumers have room for.
    Dispatch(u16),
    /// Consumer `c` starts the next message it holds, if it is idle.
    StartNext(u32),
    /// Consumer `c` leaves `poll()` with a batch (`poll.rs`).
    Polled(u32),
    /// The strategy's requests, carried out in the order made.
    ApplyControl,
    /// [`Fx::StartNext`], then [`Fx::ApplyControl`], as one step (the end of a dispatch).
    StartThenApply(u32),
    /// [`Fx::ApplyControl`], then [`Fx::StartNext`], as one step (the end of a message).
    ApplyThenStart(u32),
    /// [`Fx::StartThenApply`], then [`Fx::ApplyThenStart`], of one consumer: a message's end
    /// that dispatched the consumer's next one (the common case, as one effect).
    StartApplyStart(u32),
    /// The fault phase is over: the drain begins.
    StartDrain,
    /// Consumer `c`, if it runs a batch job, takes its next message.
    StartNextInJob(u32),
    /// Broker `b` lost its consumers, if none is left: its bridges lose their demand.
    DemandLost(u16),
    /// Broker `b` has its first consumer, if it has just one: its peers' bridges gain demand.
    DemandGained(u16),
    /// Consumer `c` leaves its group now that it is idle (`membership.rs`).
    LeaveNow(u32),
    /// Consumer `c` connects (again) through its failover list (`failover.rs`).
    Reconnect { c: u32, epoch: u32 },
    /// Consumer `c`'s batch job found nothing more: its run ends (`batch.rs`).
    EndJob(u32),
    /// The message consumer `c` has in hand failed: rolled back (`redelivery.rs`).
    Failed { c: u32, reason: FailReason },
    /// What the failure below set off is over (`Engine::failures_open`).
    FailureOver,
    /// Consumer `c` is back in `poll()` with nothing of its last poll left (`commit.rs`).
    AtPoll(u32),
    /// Producer `p` lost its broker: it fails over (`failover.rs`).
    ProducerLostBroker(u32),
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

/// The world plus the loop: the strategy, the history's consumers (checkers, observer), the
/// event queue and the clock.
///
/// The strategy is a trait object: the engine is compiled once (twice: observed or not) rather
/// than once per strategy and composed pair, which is what kept the build slow (docs/performance.md,
/// "Build time"); an indirect call per strategy hook costs little against the work around it.
struct Engine<'a, O: Observer> {
    sc: &'a Scenario,
    plan: &'a FaultPlan,
    strategy: &'a mut dyn Strategy,
    /// The hooks the strategy uses; the others are skipped.
    hooks: Hooks,
    observer: &'a mut O,
    checkers: Checkers,
    q: EventQueue<Ev>,
    now: Time,
    events: u64,
    w: World,
    keys: KeyPicker,
    arrivals: Arrivals,
    service: Sampler,
    /// The scenario with its flavour's defaults filled in: every setting the engine reads.
    cfg: Resolved,
    /// `cfg.max_poll_interval` in µs (at least 1), when consumers poll under one (`poll.rs`).
    max_poll: Option<Time>,
    /// Consumers take batches (`[consumers] receive = "batch"`), not a topped-up prefetch.
    batch_receive: bool,
    /// A consumer handed a batch has work to do as it leaves `poll()`: its poll deadline
    /// (`max_poll`), or its auto-commit timer's wake-ups while it waited (`commit.rs`).
    poll_hook: bool,
    /// Some broker has a `dispatch_latency`: a delivery may not have reached its consumer yet.
    transit: bool,
    /// Consumers run as batch jobs (`mode = "batch"` with `[consumers.batch]`): only then is
    /// one ever in a job run ([`Consumer::in_job`]), which an ack need not look up otherwise.
    jobs: bool,
    /// The producers' timestamp resolution, at least 1 (a message's timestamp is its
    /// producer's clock rounded down to it): read once per message.
    timestamp_resolution: u64,
    /// A dispatch only offers, selects and delivers: no redrive on receive, batch receives,
    /// promises kept for held messages, poll hook or transit. `dispatch_some` has an instance
    /// for it in which their tests fold away.
    plain_dispatch: bool,
    /// Some broker has `[broker.replication]`: a send is written at a partition leader
    /// (`replication.rs`); or the producers are transactional (`txn.rs`). The send path's one
    /// test for both.
    replicated: bool,
    /// The producers' transactions (`[producers] transactional`, `txn.rs`).
    txns: Option<Box<txn::Txns>>,
    /// How many later sends may overtake one that failed by a `send_error` (`max_in_flight -
    /// 1`, or 0 with idempotence).
    send_overtakes: u32,
    ctl: Control,
    /// Rollbacks whose effects are not all carried out yet: nested failures, each set off by
    /// the one before in the same instant (a zero-delay requeue dispatches, and the consumer it
    /// reaches may fail at once again; `redelivery.rs` bounds the chain).
    failures_open: u32,
    /// Dispatch's candidate list (reused buffer).
    scratch: Vec<ConsumerSlot>,
    /// Consumers that received messages in the current dispatch call (reused buffer).
    started_scratch: Vec<u32>,
    /// What the current dispatch call's broker handed out, in order (reused buffer).
    handouts: Vec<(u32, broker::Handout)>,
    /// Effects asked for and not yet carried out, the next on top ([`Engine::route`]).
    fx: Vec<Fx>,
    /// Where the current step's effects begin in `fx`: above it wait effects this step asked for.
    step_base: usize,
    /// Debug builds: the current step deferred an effect, so whatever it does after must be
    /// deferred too (checked where it emits: [`Engine::emit`]).
    #[cfg(debug_assertions)]
    deferred: Option<&'static std::panic::Location<'static>>,
    /// Things that keep the fault phase open: messages still to produce + faults not yet over.
    phase_open: u64,
    /// Planned fault starts and ends still to come.
    fault_transitions_left: u64,
    /// The engine event count at the last progress (see [`STUCK_AFTER_EVENTS`]).
    last_progress: u64,
    draining: bool,
}

impl<'a, O: Observer> Engine<'a, O> {
    fn new(
        sc: &'a Scenario,
        cfg: Resolved,
        plan: &'a FaultPlan,
        seed: u64,
        strategy: &'a mut dyn Strategy,
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
                Producer::new(
                    order(&sc.producers.brokers, i, sc.producers.connect),
                    &sc.producers,
                    &mut rng,
                    stream(seed, Component::Producer, i as u32, SEND_ERRORS),
                )
            })
            .collect();
        let consumers = (0..sc.consumers.count as usize)
            .map(|i| {
                Consumer::new(
                    order(&sc.consumers.brokers, i, sc.consumers.connect),
                    cfg.receive == Receive::Batch,
                    stream(seed, Component::Consumer, i as u32, 0),
                )
            })
            .collect();
        let fault_transitions_left = plan
            .faults
            .iter()
            .map(|f| if f.duration.is_some() { 2 } else { 1 })
            .sum::<u64>();
        let phase_open = sc.workload.messages + fault_transitions_left;
        let w = World {
            slab: Slab::default(),
            producers,
            brokers: (0..sc.brokers.len())
                .map(|i| {
                    let rngs = [TRANSIT, RESTART, TAKEOVER]
                        .map(|p| stream(seed, Component::Broker, i as u32, p));
                    Broker::new(sc, &cfg, i, rngs)
                })
                .collect(),
            consumers,
            broker_up: vec![true; sc.brokers.len()],
            rows: vec![Row::default(); sc.workload.keys as usize],
            db_down: 0,
            source: vec![Row::default(); sc.workload.keys as usize],
            source_down: 0,
            poison_boost: Vec::new(),
            send_errors: Vec::new(),
            send_slow: cfg.batching.is_some(),
            produced: 0,
            next_id: 0,
            returned: Vec::new(),
            acks: Vec::new(),
            acks_free: Vec::new(),
            held: BTreeMap::new(),
            orphans: Vec::new(),
            held_sends: Vec::new(),
            logs: sc
                .brokers
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    b.replication
                        .as_ref()
                        .filter(|r| r.brokers.is_none())
                        .map(|r| {
                            let mut log = replication::Log::new(
                                r,
                                sc.producers.acks.unwrap_or_default(),
                                stream(seed, Component::Broker, i as u32, REPLICATION_LAG),
                                stream(seed, Component::Broker, i as u32, ELECTION),
                            );
                            log.broker = i as u16;
                            Box::new(log)
                        })
                })
                .collect(),
            clusters: if sc
                .brokers
                .iter()
                .any(|b| b.replication.as_ref().is_some_and(|r| r.brokers.is_some()))
            {
                sc.brokers
                    .iter()
                    .enumerate()
                    .map(|(i, b)| {
                        b.replication
                            .as_ref()
                            .filter(|r| r.brokers.is_some())
                            .map(|r| {
                                Box::new(replication::Cluster::new(
                                    r,
                                    sc.producers.acks.unwrap_or_default(),
                                    seed,
                                    stream(seed, Component::Broker, i as u32, ELECTION),
                                ))
                            })
                    })
                    .collect()
            } else {
                Vec::new()
            },
        };
        let hooks = strategy.hooks();
        let transit = sc.brokers.iter().any(|b| b.dispatch_latency.is_some());
        Engine {
            sc,
            plan,
            hooks,
            strategy,
            observer,
            checkers: Checkers::new(sc.workload.keys, sc.workload.kind)
                .grouped(sc.workload.group_size),
            q: EventQueue::new(),
            now: 0,
            events: 0,
            w,
            keys: KeyPicker::new(sc, seed),
            arrivals: Arrivals::new(sc, seed),
            service: sc.consumers.service.0.sampler(),
            max_poll: cfg.max_poll_interval.map(|d| d.0.max(1)),
            batch_receive: cfg.receive == Receive::Batch,
            poll_hook: cfg.receive == Receive::Batch
                && (cfg.max_poll_interval.is_some() || cfg.commit == Commit::Interval),
            transit,
            jobs: sc.consumers.mode == ConsumerMode::Batch && sc.consumers.batch.is_some(),
            timestamp_resolution: sc.producers.timestamp_resolution.0.max(1),
            plain_dispatch: !cfg.redelivery.redrive_on_receive
                && cfg.receive != Receive::Batch
                && !hooks.promises
                && !transit,
            replicated: sc.brokers.iter().any(|b| b.replication.is_some())
                || cfg.producer_commits.is_some(),
            txns: cfg.producer_commits.map(|interval| {
                Box::new(txn::Txns::new(
                    interval.0,
                    cfg.transactional,
                    cfg.read_committed,
                    sc.producers.count as usize,
                    sc.brokers.len(),
                ))
            }),
            send_overtakes: if cfg.idempotence {
                0
            } else {
                cfg.max_in_flight.saturating_sub(1)
            },
            cfg,
            ctl: Control::default(),
            failures_open: 0,
            scratch: Vec::with_capacity(sc.consumers.count as usize),
            started_scratch: Vec::with_capacity(sc.consumers.count as usize),
            handouts: Vec::new(),
            fx: Vec::new(),
            step_base: 0,
            #[cfg(debug_assertions)]
            deferred: None,
            phase_open,
            fault_transitions_left,
            last_progress: 0,
            draining: false,
        }
    }

    /// Records a history event: checkers first, then the observer (trace file, tests).
    // Always inlined: at each call site the event's variant is known, so the progress test and
    // the checkers' match fold away (a call would pass the event by value and match at run time).
    #[inline(always)]
    #[cfg_attr(debug_assertions, track_caller)]
    fn emit(&mut self, e: Event) {
        #[cfg(debug_assertions)]
        if let Some(at) = self.deferred {
            panic!(
                "{e:?} emitted after an effect deferred in the same step (at {at}): it would come \
                 before the effect's own events; defer it too"
            );
        }
        // Inlined at each call site, where the variant is known: a store or nothing.
        if e.is_progress() {
            self.last_progress = self.events;
        }
        // Every event is at the engine's clock, which the loop checks never goes back.
        self.checkers.observe_in_order(&e);
        self.observer.event(&e);
    }

    /// Carries out what a strategy hook asked for.
    #[inline(always)]
    pub(super) fn apply_control(&mut self) {
        // Behind effects still waiting: after them, as the call came after theirs (they may
        // leave requests of their own for it).
        if self.waiting() {
            self.then(Fx::ApplyControl);
            return;
        }
        // Called after every hook; most hooks ask for nothing, so only the flag test is inlined.
        if !self.ctl.is_empty() {
            self.apply_control_slow();
        }
    }

    #[inline(never)]
    fn apply_control_slow(&mut self) {
        let mut requests = std::mem::take(&mut self.ctl.requests);
        let redispatch = std::mem::take(&mut self.ctl.redispatch);
        // Both taken: nothing pending until what the requests set off asks for more.
        self.ctl.pending = false;
        for &r in &requests {
            // Each request, with what it set off, is over before the next, as each call was.
            self.flush();
            match r {
                Request::Wake { at, token } => self.q.push(at.max(self.now), Ev::Wake(token)),
                Request::Reassigned { broker, consumer } => self.emit(Event::Reassign {
                    t: self.now,
                    broker,
                    consumer,
                }),
                Request::SourceRead { key, consumer, seq } => self.emit(Event::SourceRead {
                    t: self.now,
                    key,
                    consumer,
                    seq,
                }),
                Request::Apply {
                    msg,
                    state_seq,
                    worker,
                } => self.apply_for_strategy(msg, state_seq, worker),
                Request::Discard(msg) => self.discard_for_strategy(msg),
                Request::Unpark(c) => self.unpark(c),
                Request::Commit(c) => self.commit_now(c),
                Request::EndLeases(c) => self.end_leases(c),
            }
        }
        // Give the buffer back, so that a lock hand-over does not allocate on every release;
        // unless what the requests set off asked for more, which the buffer now holds.
        self.flush();
        if self.ctl.requests.is_empty() {
            requests.clear();
            self.ctl.requests = requests;
        }
        if redispatch {
            for b in 0..self.w.brokers.len() as u16 {
                self.dispatch(b);
            }
        }
    }

    /// Debug builds: a second `start_next(c)` right after the first, nothing in between, does
    /// nothing (what lets the router skip it, `Fx::StartApplyStart`). Run here, so that a debug
    /// build does what a release build does whenever the assertion holds.
    #[cold]
    #[inline(never)]
    fn start_twice_is_once(&mut self, c: u32) {
        let state = |e: &Self| {
            let cs = &e.w.consumers[c as usize];
            (
                e.q.len(),
                e.fx.len(),
                cs.load(),
                cs.ready(),
                e.ctl.is_empty(),
            )
        };
        let before = state(self);
        self.apply_control();
        self.start_next(c);
        assert_eq!(
            before,
            state(self),
            "a second start of consumer {c} did something"
        );
    }

    /// Whether effects this step asked for are waiting: a handler run now would come before
    /// them, so it must wait its turn too ([`Engine::then`]).
    #[inline(always)]
    fn waiting(&self) -> bool {
        self.fx.len() > self.step_base
    }

    /// The strategy's requests, then consumer `c`'s next message: at once, or as one effect
    /// behind those still waiting (the end of a message's processing).
    #[inline(always)]
    fn apply_then_start(&mut self, c: u32) {
        if self.waiting() {
            match self.fx.last_mut() {
                // Right behind the start it asked for: one effect for both.
                Some(last) if *last == Fx::StartThenApply(c) => *last = Fx::StartApplyStart(c),
                _ => self.then(Fx::ApplyThenStart(c)),
            }
        } else {
            self.apply_control();
            self.start_next(c);
        }
    }

    /// [`Self::apply_then_start`] as the last call of a step of the event loop's own (a
    /// message's processing ends: `service_done`). When all the step asked for is the start of
    /// this consumer's next message (its broker handed it the next one), the router's turn for
    /// both is taken here, as the router would take it next: without the effect's round trip.
    #[inline(always)]
    fn apply_then_start_last(&mut self, c: u32) {
        debug_assert_eq!(self.step_base, 0, "a step of the loop's own");
        if self.fx.len() == 1 && self.fx[0] == Fx::StartThenApply(c) {
            self.fx.clear();
            #[cfg(debug_assertions)]
            {
                self.deferred = None;
            }
            if self.start_apply_start(c, 0) {
                // Pushed on top of what the start asked for: the router's first reversal
                // puts it below them, where `then_below` would have.
                self.then(Fx::ApplyThenStart(c));
            }
        } else {
            self.apply_then_start(c);
        }
    }

    /// The router's `Fx::StartApplyStart(c)`, a step whose effects begin at `top`: consumer
    /// `c` starts its next message, then the strategy's requests are carried out, and if
    /// nothing was asked for in between, the second half (`Fx::ApplyThenStart`) at once; true
    /// when something was, and that second half is left to the caller to put behind it.
    #[inline(always)]
    fn start_apply_start(&mut self, c: u32, top: usize) -> bool {
        self.start_next(c);
        // No requests after the start: the first `apply_control` has nothing to do, and if
        // nothing was asked for either, neither has the second, nor the second start, which
        // would find the consumer as the first left it (a start with nothing in between
        // changes nothing: `start_twice_is_once`).
        let quiet = self.ctl.is_empty();
        self.apply_control();
        if self.fx.len() != top {
            return true;
        }
        if !quiet {
            self.apply_control();
            self.start_next(c);
        } else if cfg!(debug_assertions) {
            self.start_twice_is_once(c);
        }
        false
    }

    /// Asks for `e` after the current step: the router carries it out once the step is over,
    /// after the effects the step asked for before it (and theirs), before those asked after.
    #[inline(always)]
    #[cfg_attr(debug_assertions, track_caller)]
    fn then(&mut self, e: Fx) {
        self.fx.push(e);
        #[cfg(debug_assertions)]
        {
            self.deferred = Some(std::panic::Location::caller());
        }
    }

    /// The router: carries out the effects the step that just ended asked for, each one a
    /// step of its own, in the order they were asked and depth first (an effect's own effects
    /// before the next one's), which is the order of the nested calls they replace; no handler
    /// calls another node's handler, so nothing re-enters.
    #[inline(always)]
    fn route(&mut self) {
        debug_assert_eq!(self.step_base, 0);
        // Here, once per event, the router's loop is inlined (no call frame per message).
        if !self.fx.is_empty() {
            self.carry_out();
        }
    }

    /// Carries out, now, the effects the current step has asked for so far (and theirs): for a
    /// loop over nodes whose every turn must be over before the next begins, as each call was
    /// over before the next was made.
    #[inline(always)]
    fn flush(&mut self) {
        if self.fx.len() != self.step_base {
            self.flush_waiting();
        }
    }

    /// [`Self::flush`] past its test.
    #[inline(never)]
    fn flush_waiting(&mut self) {
        self.carry_out();
    }

    /// The router's loop: carries out the effects the current step asked for (and theirs).
    #[inline(always)]
    fn carry_out(&mut self) {
        let base = self.step_base;
        // The step pushed them in order: the first goes on top (most steps push one).
        if self.fx.len() - base > 1 {
            self.fx[base..].reverse();
        }
        while let Some(e) = self.fx.pop() {
            let top = self.fx.len();
            self.step_base = top;
            #[cfg(debug_assertions)]
            {
                self.deferred = None;
            }
            // The effects of nearly every message, carried out here; the rest in `exec`.
            match e {
                Fx::StartNext(c) => self.start_next(c),
                Fx::StartThenApply(c) => {
                    self.start_next(c);
                    self.apply_control();
                }
                Fx::ApplyThenStart(c) => {
                    self.apply_control();
                    self.start_next(c);
                }
                Fx::StartApplyStart(c) => {
                    if self.start_apply_start(c, top) {
                        self.then_below(top, Fx::ApplyThenStart(c));
                        continue;
                    }
                }
                Fx::ApplyControl => self.apply_control(),
                Fx::Dispatch(b) => self.dispatch(b),
                Fx::Failed { .. } => {
                    self.exec(e);
                    // Its failure is over when what the rollback set off is.
                    self.then_below(top, Fx::FailureOver);
                    continue;
                }
                _ => self.exec(e),
            }
            if self.fx.len() - top > 1 {
                self.fx[top..].reverse();
            }
            if self.fx.len() == base {
                break;
            }
        }
        self.step_base = base;
        #[cfg(debug_assertions)]
        {
            self.deferred = None;
        }
    }

    /// In the router's loop, after an effect that asked for more (those above `top`): puts them
    /// in order and `e` below them, so that `e` is carried out once they are, as a step of its
    /// own (the stack is never empty after this, so the loop goes on).
    fn then_below(&mut self, top: usize, e: Fx) {
        if self.fx.len() - top > 1 {
            self.fx[top..].reverse();
        }
        self.fx.insert(top, e);
    }

    /// Carries out one of the rarer effects (the router's loop carries out the others itself).
    #[inline(never)]
    fn exec(&mut self, e: Fx) {
        match e {
            Fx::Polled(c) => self.polled(c),
            Fx::StartDrain => self.start_drain(),
            Fx::StartNextInJob(c) => {
                if self.w.consumers[c as usize].in_job() {
                    self.start_next(c);
                }
            }
            Fx::DemandLost(b) => self.demand_lost_if_none(b),
            Fx::DemandGained(b) => self.demand_gained_if_first(b),
            Fx::LeaveNow(c) => self.leave_now(c),
            Fx::Reconnect { c, epoch } => self.consumer_reconnect(c, epoch),
            Fx::EndJob(c) => self.end_job(c, false),
            Fx::Failed { c, reason } => {
                let job = self.w.consumers[c as usize]
                    .job_in_hand()
                    .expect("a failed message is in hand until the rollback");
                self.failures_open += 1;
                self.failed(c, job, reason);
            }
            Fx::FailureOver => self.failures_open -= 1,
            Fx::AtPoll(c) => self.at_poll(c),
            Fx::Dispatch(_)
            | Fx::StartNext(_)
            | Fx::StartThenApply(_)
            | Fx::ApplyThenStart(_)
            | Fx::StartApplyStart(_)
            | Fx::ApplyControl => unreachable!("carried out in the router's loop"),
            Fx::ProducerLostBroker(p) => self.producer_lost_broker(p),
        }
    }

    /// Checks, in debug builds, that a hook the strategy said it leaves out ([`Hooks`]) did
    /// nothing: called with the control's request count before the skipped call.
    #[inline(always)]
    fn skipped_hook_did_nothing(&self, requests_before: usize, hook: &str) {
        debug_assert!(
            self.ctl.requests.len() == requests_before,
            "a strategy left out {hook} in its hooks() but its {hook} made requests"
        );
    }

    /// A view of a message for the strategy.
    #[inline]
    fn view(&self, slot: u32) -> MsgView {
        *self.w.slab.view(slot)
    }

    #[inline]
    fn msg_ref(&self, slot: u32) -> MsgRef {
        self.w.slab.get(slot).r()
    }

    /// Allocates a new message slot.
    fn alloc(&mut self, m: Msg) -> u32 {
        self.w.slab.alloc(m)
    }

    /// One thing keeping the fault phase open is done; when none remain, the drain phase begins.
    fn phase_step(&mut self) {
        self.phase_open -= 1;
        if self.phase_open == 0 && !self.draining {
            // After what the step that ended the phase asked for (as the call did when made
            // last in that step).
            self.then(Fx::StartDrain);
        }
    }

    fn start_drain(&mut self) {
        self.draining = true;
        self.emit(Event::DrainStart { t: self.now });
        self.q.push(
            self.now.saturating_add(self.sc.run.drain_timeout.0),
            Ev::DrainDeadline,
        );
        // Endpoints suspended for a while come back now, so the drain settles their messages;
        // one stopped for good (`resume_after = "never"`) stays stopped.
        if self.sc.consumers.resume_after.is_some() {
            for c in 0..self.w.consumers.len() as u32 {
                self.flush();
                if self.w.consumers[c as usize].is_suspended() {
                    self.resume(c);
                }
            }
        }
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
                let (d, msg) = self.w.acks[ack as usize];
                self.w.acks_free.push(ack);
                self.ack_arrive(c, d, msg)
            }
            Ev::RedeliveryDue { slot, id } => self.redelivery_due(slot, id),
            Ev::ReturnDue { slot, id } => self.return_due(slot, id),
            Ev::ForwardArrive { slot, id } => self.forward_arrive(slot, id),
            Ev::BridgeAck { from, to, link } => self.bridge_ack(from, to, link),
            Ev::ConsumerReconnect { c, epoch } => self.consumer_reconnect(c, epoch),
            Ev::ParkTimeout { c, epoch, serial } => self.park_timeout(c, epoch, serial),
            Ev::ProducerRetry(p) => self.producer_retry(p),
            Ev::DeliveryTimeout(p) => self.delivery_timeout(p),
            Ev::Linger(p) => self.linger(p),
            Ev::HeldSend { slot, id } => self.held_send(slot, id),
            Ev::JobStart(c) => self.job_start(c),
            Ev::Transit(c) => self.transit_done(c),
            Ev::Takeover(b) => self.takeover(b),
            Ev::Resume { c, serial } => {
                if self.w.consumers[c as usize].suspended_by(serial) {
                    self.resume(c);
                }
            }
            Ev::PauseDetected { c, serial } => self.pause_detected(c, serial),
            Ev::PollDeadline { c, serial } => self.poll_overdue(c, serial),
            Ev::LeaseExpire { slot, id } => self.lease_expire(slot, id),
            Ev::LeaseRenew { slot, id } => self.lease_renew(slot, id),
            Ev::CrashDetected { c, epoch } => self.crash_detected(c, epoch),
            Ev::CommitDue { c, epoch } => self.commit_due(c, epoch),
            Ev::Replicated(l) => self.replicated(l),
            Ev::TxnCommit { p, number } => self.txn_commit(p, number),
            Ev::ProducerReplaced { p, serial } => self.producer_replaced(p, serial),
            Ev::LeaderElected(l) => self.leader_elected(l),
            Ev::CaughtUp { l, r } => self.caught_up(l, r),
            Ev::NodeFenced { b, node } => self.node_fenced(b, node),
            Ev::LeaderBalance(b) => self.leader_balance(b),
            Ev::IsrCheck { b, node, epoch } => self.isr_check(b, node, epoch),
            Ev::FaultStart(i) => self.fault_start(i),
            Ev::FaultEnd(i) => self.fault_end(i),
            Ev::Wake(token) => {
                self.strategy.on_wake(self.now, token, &mut self.ctl);
                self.ctl.redispatch();
                self.apply_control();
            }
            Ev::Dispatch(b) => self.dispatch(b),
            // The loop ends the run on it before handing events here.
            Ev::DrainDeadline => {}
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
        for p in 0..self.w.producers.len() as u32 {
            self.producer_reconnect(p);
            self.route();
        }
        for c in 0..self.w.consumers.len() as u32 {
            match &self.sc.consumers.batch {
                // A batch job connects only when its run starts.
                Some(b) if self.sc.consumers.mode == ConsumerMode::Batch => {
                    self.q.push(b.interval.0, Ev::JobStart(c));
                }
                _ => self.consumer_reconnect(c, 0),
            }
            self.route();
        }
        if self.phase_open == 0 {
            self.start_drain();
            self.route();
        }
        let max_events = opts.max_events.unwrap_or(self.sc.run.max_events);
        let max_time = opts.max_sim_time.unwrap_or(Time::MAX);
        let mut ended_by = EndReason::Stuck;
        let mut check_at = max_events.min(STUCK_AFTER_EVENTS + 1);
        while !self.q.is_empty() {
            let (t, ev) = self.q.pop_pending();
            if t > max_time {
                self.now = max_time;
                ended_by = EndReason::MaxSimTime;
                break;
            }
            debug_assert!(t >= self.now, "time went backwards");
            if t < self.now {
                // The checkers' time test, once per engine event (`Checkers::observe_in_order`).
                self.checkers.clock_went_back(t, self.now);
            }
            self.now = t;
            if let Ev::DrainDeadline = ev {
                ended_by = EndReason::DrainTimeout;
                break;
            }
            self.events += 1;
            self.handle(ev);
            self.route();
            if self.draining {
                if self.w.slab.live == 0 && self.w.held.is_empty() && !self.zombies() {
                    ended_by = EndReason::Settled;
                    break;
                }
                // Nothing left to happen but the drain's own deadline: what is unsettled can
                // never move (a message that crossed a bridge to a broker with no consumer
                // left, issue 41), so the run is stuck now; waiting for the deadline would
                // report a timeout that no longer drain_timeout could cure.
                if self.q.len() == 1 {
                    ended_by = EndReason::Stuck;
                    break;
                }
            }
            // One comparison per event covers both bounds: the event bound, and the next event
            // count at which the run would have gone STUCK_AFTER_EVENTS without progress.
            if self.events >= check_at {
                if self.events >= max_events {
                    ended_by = EndReason::MaxEvents;
                    break;
                }
                if self.events - self.last_progress > STUCK_AFTER_EVENTS
                    && self.fault_transitions_left == 0
                {
                    ended_by = EndReason::Stuck;
                    break;
                }
                check_at = max_events.min(self.last_progress + STUCK_AFTER_EVENTS + 1);
            }
        }
        if self.q.is_empty()
            && self.w.slab.live == 0
            && self.w.held.is_empty()
            && self.w.produced == self.sc.workload.messages
        {
            ended_by = EndReason::Settled;
        }
        // Unsettled because an endpoint stopped for good: say so rather than "stuck".
        if matches!(ended_by, EndReason::Stuck | EndReason::DrainTimeout)
            && self.w.consumers.iter().any(|c| c.is_suspended())
            && self.sc.consumers.resume_after.is_none()
        {
            ended_by = EndReason::Suspended;
        }
        let mut metrics = self.finish()?;
        metrics.ended_by = ended_by;
        Ok(metrics)
    }

    /// Whether a live consumer is still working on a message the broker no longer holds (it lost
    /// its connection mid-message, was paused past its failure detection, or its lease ended),
    /// or still holds its own copy of one whose lease ended before it started it: it will still
    /// write, so the run is not over. Asked only when nothing else is left.
    fn zombies(&self) -> bool {
        self.w.consumers.iter().any(|c| c.is_up() && c.has_work())
    }

    fn finish(mut self) -> Result<Metrics, RunError> {
        // A resend the producer never made: its message is at the broker (or was settled there).
        let unsent: Vec<u32> = self
            .w
            .producers
            .iter()
            .flat_map(|p| p.unsent_resends())
            .collect();
        // Each is still its producer's (an entry outliving its send would hide whatever message
        // took its slot since).
        debug_assert!(
            unsent
                .iter()
                .all(|&s| matches!(self.w.slab.get(s).loc, Loc::Producer(_))),
            "a resend the producer never made is not at its producer"
        );
        // An applied message is settled whatever copy is left; the copy is reported unacked (its
        // ack or offset commit never reached the broker, which would deliver it again).
        let (unacked, pending): (Vec<&Msg>, Vec<&Msg>) = (self.w.slab.msgs.iter().enumerate())
            .filter(|&(i, m)| m.loc != Loc::Free && !unsent.contains(&(i as u32)))
            .map(|(_, m)| m)
            .partition(|m| m.applied);
        let unacked: Vec<MsgRef> = unacked.into_iter().map(|m| m.r()).collect();
        let mut pending: Vec<MsgRef> = pending.into_iter().map(|m| m.r()).collect();
        // And every message the strategy still holds (taken over, acked upstream).
        pending.extend(self.w.held.values().filter(|h| !h.dropped).map(|h| h.msg));
        pending.sort_by_key(|m| m.id);
        pending.dedup_by_key(|m| m.id);
        // Every message the engine still holds is listed; the checker fails the run if one of them
        // was already final in the history, or if a message neither final nor listed is left.
        for msg in pending {
            self.emit(Event::Pending { t: self.now, msg });
        }
        for msg in unacked {
            self.emit(Event::Unacked { t: self.now, msg });
        }
        Ok(self.checkers.finish(self.events, self.now)?)
    }

    /// Tells consumer `c`'s broker its free prefetch from its [`Consumer::load`] (the broker
    /// keeps it in its attached list, which dispatch offers as it is). Called after every change
    /// of its buffer, phase or pending acks, before anything that may dispatch; dispatch checks
    /// the broker's copy in debug builds.
    // Always inlined: a few loads and stores, called several times per message, where a call
    // frame cost as much as the work.
    #[inline(always)]
    pub(super) fn sync_load(&mut self, c: u32) {
        let cs = &self.w.consumers[c as usize];
        let (b, load) = (cs.connected_to(), cs.load());
        self.sync_load_as(c, b, load);
    }

    /// [`Self::sync_load`] with what it reads of the consumer, `broker` and `load`, read by a
    /// caller that has the consumer at hand (one lookup of it instead of two).
    #[inline(always)]
    pub(super) fn sync_load_as(&mut self, c: u32, broker: Option<u16>, load: u32) {
        if let Some(b) = broker {
            let free = broker::free_of(load, self.sc.consumers.prefetch, self.batch_receive);
            self.w.brokers[b as usize].set_free(c, free);
        }
    }

    /// Consumer `c`'s free prefetch as its load stands now (what its broker keeps in its
    /// attached list).
    #[inline]
    pub(super) fn free_prefetch(&self, c: u32) -> u32 {
        let load = self.w.consumers[c as usize].load();
        broker::free_of(load, self.sc.consumers.prefetch, self.batch_receive)
    }

    /// Whether consumer `c`'s broker, if it lists it, has its free prefetch as its load stands
    /// (for a debug check).
    pub(super) fn load_in_sync(&self, c: u32) -> bool {
        let Some(b) = self.w.consumers[c as usize].connected_to() else {
            return true;
        };
        self.w.brokers[b as usize]
            .free_copy(c)
            .is_none_or(|free| free == self.free_prefetch(c))
    }
}

/// Runs `strategy` on `sc` with its resolved `plan`, feeding every history event to `observer`
/// if there is one. Not generic, so the engine is compiled here, once for an unobserved run and
/// once for an observed one (which formats or hashes every event anyway, and pays one indirect
/// call per event for it).
pub fn run(
    sc: &Scenario,
    plan: &FaultPlan,
    strategy: &mut dyn Strategy,
    opts: &RunOptions,
    observer: Option<&mut dyn Observer>,
) -> Result<Metrics, RunError> {
    let cfg = sc.resolve().map_err(RunError::Unresolved)?;
    strategy.on_start(opts.seed);
    match observer {
        None => Engine::new(sc, cfg, plan, opts.seed, strategy, &mut NoObserver).run(opts),
        Some(o) => Engine::new(sc, cfg, plan, opts.seed, strategy, &mut DynObserver(o)).run(opts),
    }
}

#[cfg(test)]
mod tests {
    use crate::faults::FaultPlan;
    use crate::history::FailReason;
    use crate::strategy::Strategy;
    use crate::strategy::{Begin, Control, DispatchCtx, Handler, HandlerCtx, MsgView, Select};
    use crate::summary::EndReason;
    use crate::{run, RunOptions, Scenario};

    /// Fails every message in `begin`, and hands each to the first consumer with room.
    struct FailsAtOnce;
    impl Handler for FailsAtOnce {
        fn begin(&mut self, _ctx: &HandlerCtx, _msg: &MsgView, _ctl: &mut Control) -> Begin {
            Begin::Fail(FailReason::Outage)
        }
    }
    impl Strategy for FailsAtOnce {
        fn select(&mut self, ctx: &DispatchCtx, _msg: &MsgView, _ctl: &mut Control) -> Select {
            match ctx.consumers.iter().position(|c| c.free > 0) {
                Some(i) => Select::Consumer(i),
                None => Select::Hold,
            }
        }
    }

    /// With zero-delay non-blocking redelivery and no limit, a message failing in `begin` is
    /// rolled back, requeued, dispatched and fails again, all in one instant: the router must
    /// hand the chain to the event queue now and then (`redelivery.rs`'s bound), so that the run's
    /// event bound ends it. Without that, the router would loop inside one event for ever.
    #[test]
    fn a_chain_of_instant_failures_is_made_of_events_and_ends_at_the_event_bound() {
        // Not through validation, which refuses such a spinning file: a library caller's.
        let sc: Scenario = toml::from_str(
            "strategies = [\"x\"]\n[workload]\nmessages = 1\nrate = \"10/s\"\nkeys = 1\n\
             [[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"\n\
             [redelivery]\nmode = \"non_blocking\"\ninitial_delay = \"0s\"\n\
             max_redeliveries = -1\n[run]\nmax_events = 20000\n",
        )
        .expect("parses");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let plan = FaultPlan::resolve(&sc, 1);
            let opts = RunOptions {
                seed: 1,
                max_events: None,
                max_sim_time: None,
            };
            let m = run(&sc, &plan, &mut FailsAtOnce, &opts, None).expect("runs");
            let _ = tx.send((m.ended_by, m.coverage.rollbacks));
        });
        let (ended_by, rolled_back) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the run never handed the chain to the event queue");
        assert_eq!(ended_by, EndReason::MaxEvents);
        // Chains of failures in one event, but none longer than the bound.
        assert!(
            rolled_back > 20_000
                && rolled_back <= u64::from(super::redelivery::MAX_FAIL_DEPTH) * 20_000,
            "{rolled_back} rollbacks in 20,000 events"
        );
    }
}
