//! The engine's plain state: messages and where they are, and the state of every node (producers,
//! brokers, consumers, the target and source databases). No behaviour lives here beyond keeping
//! this state's own invariants; each node kind's handling is in its own file.

use super::broker::Broker;
use super::events::Ev;
use super::producer::Producer;
use crate::history::MsgRef;
use crate::strategy::{MsgView, Row};
use crate::time::Time;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};

/// The world a run acts on.
pub(super) struct World {
    /// Messages in flight.
    pub slab: Slab,
    pub producers: Vec<Producer>,
    pub brokers: Vec<Broker>,
    pub consumers: Vec<ConsumerState>,
    /// Per consumer, its [`ConsumerState::load`] (unacked deliveries held), kept dense so that
    /// dispatch reads one `u32` per candidate instead of three fields of a large struct.
    pub load: Vec<u32>,
    /// Which brokers are up (mirrors `brokers[i].up`, for routing).
    pub broker_up: Vec<bool>,
    /// The target database, per key.
    pub rows: Vec<Row>,
    /// Overlapping target outages in force.
    pub db_down: u32,
    /// The source database (newest produced state per key), for strategies that read it.
    pub source: Vec<Row>,
    /// Overlapping source outages in force.
    pub source_down: u32,
    /// Poison fractions of the `poison` faults in force.
    pub poison_boost: Vec<f64>,
    /// The `send_error` and `send_timeout` faults in force: (producer, or every producer;
    /// failure probability; whether the broker stored the send whose answer failed). Empty (the
    /// one test the send path pays) unless such a fault is in its window.
    pub send_errors: Vec<(Option<u32>, f64, bool)>,
    /// Messages produced so far.
    pub produced: u64,
    /// The id the next message stored gets: a produced one, or a resend stored again (a
    /// duplicate is a new message at the broker, a new offset or message id, with the same
    /// key and seq). Equal to `produced` until a resend is stored.
    pub next_id: u64,
    /// Deliveries going back to their brokers' queues (reused buffer).
    pub returned: Vec<Delivery>,
    /// Deliveries whose ack is travelling to the broker (`Ev::AckArrive` carries the index);
    /// slots are reused through `acks_free`.
    pub acks: Vec<(Delivery, MsgRef)>,
    pub acks_free: Vec<u32>,
    /// Messages the strategy took over ([`crate::strategy::Outcome::Buffered`], acked upstream)
    /// and has neither applied nor lost yet, by id: the run is not settled while it holds any,
    /// and what it still holds at the end is pending. Looked up only, never iterated in hash
    /// order.
    pub held: BTreeMap<u64, Held>,
    /// Consumers' own copies of received messages whose lease expired before they started them
    /// (their buffer entry has `delivery == 0`): they still process them, as a client that
    /// received a batch does.
    pub orphans: Vec<(u32, Job)>,
}

/// A message the strategy took over.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub msg: MsgRef,
    /// Its slot when it was taken over (valid while the slot still holds that message id).
    pub slot: u32,
    /// The strategy dropped it while the broker still had it unacked (the ack may yet be lost
    /// and the message redelivered): lost only if that ack settles it.
    pub dropped: bool,
}

/// Where a message is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Loc {
    /// Slot is free.
    Free,
    /// Buffered in a producer that has no broker connection.
    Producer(u32),
    /// In a broker's queue (its store).
    Queued(u16),
    /// Pushed to a consumer, unacknowledged; `delivery` identifies this delivery.
    Delivered {
        broker: u16,
        consumer: u32,
        delivery: u32,
    },
    /// Waiting at the broker for a non-blocking redelivery delay.
    Held(u16),
    /// Travelling between brokers; `due` is the low 32 bits of its arrival time, so that an
    /// arrival event of an earlier trip (recalled when a broker crashed) is told apart.
    Forwarding { from: u16, to: u16, due: u32 },
}

/// A message and where it is.
#[derive(Clone, Copy, Debug)]
pub(super) struct Msg {
    pub r: MsgRef,
    pub timestamp: u64,
    pub producer: u32,
    pub poison: bool,
    /// The producer set the group header.
    pub group: bool,
    pub deliveries: u32,
    pub loc: Loc,
    /// Some copy of it has been applied (so a strategy still holding another copy at the end of
    /// the run does not make it pending).
    pub applied: bool,
    /// It came over a network bridge: with `networkTTL` 1 no bridge takes it again.
    pub crossed: bool,
    /// With `[lease]`: when the current delivery's lease ends (renewals move it).
    pub lease_due: Time,
    /// With `[lease]`: when the current delivery was made (bounds renewal).
    pub leased_at: Time,
    /// With `[[broker]] dispatch_latency`: when the current delivery reaches its consumer.
    pub arrives: Time,
}

/// A reference to one delivery of a message, held by a consumer. It is valid only while the
/// message is still `Delivered` to that consumer with that delivery number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Delivery {
    pub slot: u32,
    pub id: u64,
    pub delivery: u32,
    pub broker: u16,
}

/// Messages in flight, in reusable slots: memory follows messages in flight, not produced.
#[derive(Default)]
pub(super) struct Slab {
    pub msgs: Vec<Msg>,
    free: Vec<u32>,
    pub live: u64,
}

impl Slab {
    /// The strategy's view of the message in `slot`.
    #[inline]
    pub fn view(&self, slot: u32) -> MsgView {
        let m = self.get(slot);
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

    pub fn alloc(&mut self, m: Msg) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(s) => {
                self.msgs[s as usize] = m;
                s
            }
            None => {
                self.msgs.push(m);
                (self.msgs.len() - 1) as u32
            }
        }
    }

    pub fn release(&mut self, slot: u32) {
        debug_assert!(self.msgs[slot as usize].loc != Loc::Free);
        self.msgs[slot as usize].loc = Loc::Free;
        self.free.push(slot);
        self.live -= 1;
    }

    #[inline]
    pub fn get(&self, slot: u32) -> &Msg {
        &self.msgs[slot as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> &mut Msg {
        &mut self.msgs[slot as usize]
    }

    /// Whether `d` still names the current delivery of its message to `consumer`.
    #[inline]
    pub fn valid(&self, d: &Delivery, consumer: u32) -> bool {
        let m = &self.msgs[d.slot as usize];
        m.r.id == d.id
            && m.loc
                == Loc::Delivered {
                    broker: d.broker,
                    consumer,
                    delivery: d.delivery,
                }
    }
}

/// The message in hand: its delivery, and the consumer's own copy of the message (a consumer
/// that lost its connection goes on with it even after the broker gave it to someone else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Job {
    pub d: Delivery,
    pub view: MsgView,
    pub poison: bool,
}

/// What the session is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
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

/// One consumer.
pub(super) struct ConsumerState {
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
    /// Restarted while the broker still holds its dead session, and waiting for the broker to
    /// drop it before joining (`[consumers] restart_takes_over = false`: `detection.rs`).
    pub rejoin_pending: bool,
    /// Polls so far (`poll.rs`: a deadline is for one poll).
    pub poll_serial: u32,
    /// Dropped by its group for a slow poll loop: it joins again at its next poll, once the
    /// records it polled are done.
    pub rejoin_when_idle: bool,
    pub phase: Phase,
    /// Delivered, not yet started.
    pub buffer: VecDeque<Delivery>,
    /// Applied (or rejected), ack not yet at the broker.
    pub ack_pending: Vec<Delivery>,
    /// Processed, waiting for its next offset commit (`[consumers] commit = "batch"` or
    /// `"interval"`): not part of its load (a log's consumer fetches on regardless).
    pub uncommitted: Vec<(Delivery, MsgRef)>,
    /// A periodic commit is scheduled.
    pub commit_armed: bool,
    /// `consumer_leave`: it leaves its group once the message in hand is done.
    pub leaving: bool,
    /// `consumer_leave` nesting: it stays out of its group while above 0.
    pub away_depth: u32,
    pub failures_in_row: u32,
    pub suspended: bool,
    pub suspend_epoch: u32,
    pub park_serial: u32,
    /// Batch mode: a job run is in progress.
    pub job_running: bool,
    /// Batch mode: in-job retries used on the message in hand.
    pub job_retries: u32,
    pub slow: f64,
    /// `consumer_pause` nesting: the process is stopped while above 0 (see `pause.rs`).
    pub pause_depth: u32,
    /// When the current pause began.
    pub paused_at: Time,
    /// Tells a pause's detection timer from an earlier pause's.
    pub pause_serial: u32,
    /// The process's own timers that came due while it was stopped, with the time they had left
    /// when it stopped: they run again when it resumes.
    pub deferred: Vec<(Time, Ev)>,
    /// It asks for messages (`receive = "batch"`: an SQS receive, a Kafka poll): a process
    /// that is dead or stopped asks for nothing, so nothing is handed to it.
    pub pull: bool,
    /// Added to its load: `u32::MAX / 2` (full) while it is a pulling consumer that cannot ask,
    /// else 0 ([`ConsumerState::refresh_blocked`]); kept so that `load` stays branch-free.
    pub blocked: u32,
    /// With `dispatch_latency`: the time of the `Ev::Transit` scheduled to start what arrives.
    pub transit_wake: Option<Time>,
    pub rng: ChaCha8Rng,
}

impl ConsumerState {
    pub fn new(list: Vec<u16>, pull: bool, rng: ChaCha8Rng) -> Self {
        ConsumerState {
            list,
            up: true,
            epoch: 0,
            broker: None,
            lost_connection: false,
            blip_depth: 0,
            crash_depth: 0,
            rejoin_pending: false,
            poll_serial: 0,
            rejoin_when_idle: false,
            phase: Phase::Idle,
            buffer: VecDeque::new(),
            ack_pending: Vec::new(),
            uncommitted: Vec::new(),
            commit_armed: false,
            leaving: false,
            away_depth: 0,
            failures_in_row: 0,
            suspended: false,
            suspend_epoch: 0,
            park_serial: 0,
            job_running: false,
            job_retries: 0,
            pause_depth: 0,
            paused_at: 0,
            pause_serial: 0,
            deferred: Vec::new(),
            slow: 1.0,
            pull,
            blocked: 0,
            transit_wake: None,
            rng,
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

    /// Recomputes `blocked` after the process died, restarted, stopped or resumed.
    pub fn refresh_blocked(&mut self) {
        self.blocked = if self.pull && (!self.up || self.pause_depth > 0) {
            u32::MAX / 2
        } else {
            0
        };
    }
}
