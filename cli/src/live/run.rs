//! One live run: a broker process, producer and consumer threads following the scenario's
//! workload, the fault driver, the recorder, and the final read of what is left in the queue and
//! the dead-letter queue.

use super::broker::{BrokerConf, Process};
use super::stomp::{close_socket, Conn, Frame};
use super::target::Target;
pub use crate::pacing::{outages, pacing, FaultTiming, Pacing};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sim::history::{DiscardReason, Event, FailReason, MsgRef, Node};
use sim::time::Time;
use sim::Scenario;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The queue every producer sends to.
pub const QUEUE: &str = "/queue/ordsim";
/// The receipt id of a consumer's SUBSCRIBE.
const SUBSCRIBED: &str = "subscribed";
/// ActiveMQ's default dead-letter queue.
pub const DLQ: &str = "/queue/ActiveMQ.DLQ";

/// The strategies `sim live` stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveStrategy {
    /// Every consumer takes what the broker gives it.
    Competing,
    /// An exclusive consumer (`activemq.exclusive:true`).
    Single,
    /// `JMSXGroupID` = the key.
    MessageGroups,
    /// RabbitMQ's single active consumer (`x-single-active-consumer`).
    RabbitmqSac,
    /// RabbitMQ's consistent-hash exchange over queues with single active consumer.
    RabbitmqHash,
    /// Round-robin; the handler's versioned write against PostgreSQL ([`super::db`]).
    DbOptimistic,
    /// Round-robin; the handler reads the source database and writes the target ([`super::db`]).
    Notifier,
}

impl LiveStrategy {
    /// By scenario name.
    pub fn parse(name: &str) -> Option<LiveStrategy> {
        match name {
            "competing" => Some(LiveStrategy::Competing),
            "single" => Some(LiveStrategy::Single),
            "message_groups" => Some(LiveStrategy::MessageGroups),
            "rabbitmq_sac" => Some(LiveStrategy::RabbitmqSac),
            "rabbitmq_hash" => Some(LiveStrategy::RabbitmqHash),
            "db_optimistic" => Some(LiveStrategy::DbOptimistic),
            "notifier" => Some(LiveStrategy::Notifier),
            _ => None,
        }
    }
}

/// A fault, as the driver performs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// SIGKILL broker `b` (by index).
    KillBroker(u16),
    /// Start broker `b` again on the same store.
    RestartBroker(u16),
    /// Consumer `c` dies now and comes back after `down`.
    CrashConsumer {
        /// Consumer.
        c: u32,
        /// Down for.
        down: Duration,
    },
    /// `--consumer`: consumer `c`'s process group is stopped (SIGSTOP).
    PauseConsumer(u32),
    /// `--consumer`: consumer `c`'s process group continues (SIGCONT).
    ResumeConsumer(u32),
    /// `--consumer`: consumer `c`'s connections are cut and refused (`network_blip`,
    /// [`super::proxy`]).
    CutConsumer(u32),
    /// `--consumer`: consumer `c` may connect again.
    HealConsumer(u32),
    /// `db_outage` starts: the target database refuses connections ([`super::postgres`]).
    DbDown,
    /// `db_outage` ends.
    DbUp,
}

/// What happens to a message whose processing fails (a poison message), as staged live.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveRedelivery {
    /// The consumer NACKs it at once (STOMP `NACK`, a poison ack): the broker, without the
    /// redelivery plugin, dead-letters it (`[redelivery] max_redeliveries = 0`).
    Nack,
    /// ActiveMQ's JMS client's blocking redelivery, emulated in the consumer: the session holds
    /// the message and serves it again after `delays[i]` (the (i + 2)-th delivery), ahead of
    /// everything it prefetched; after the last it NACKs it (`mode = "blocking"`). `None` in
    /// `delays` past its end: unlimited (the last delay repeats).
    Client {
        /// Delay before each redelivery, in order.
        delays: Vec<Duration>,
        /// Whether redeliveries go on forever (the last delay repeating).
        unlimited: bool,
    },
    /// The broker's `redeliveryPlugin` (with `schedulerSupport`): the consumer NACKs, the
    /// broker's scheduler sends the message back to the tail of the queue after the policy's
    /// delay, up to `max_redeliveries`, then dead-letters it (`mode = "non_blocking"`).
    Plugin(super::broker::PluginPolicy),
    /// RabbitMQ: the consumer NACKs with requeue and the broker delivers the message again at
    /// once (a classic queue at its original position, a quorum queue 3.x at the back), up to
    /// `x-delivery-limit` returns (`None`: for ever), then drops or dead-letters it.
    Requeue(Option<u32>),
}

impl LiveRedelivery {
    /// NACKs after which a poison message is settled (dead-lettered or dropped): None when it
    /// is redelivered forever.
    pub fn final_nacks(&self) -> Option<u32> {
        match self {
            LiveRedelivery::Nack
            | LiveRedelivery::Client {
                unlimited: false, ..
            } => Some(1),
            LiveRedelivery::Client { .. } => None,
            LiveRedelivery::Plugin(p) if p.max_redeliveries < 0 => None,
            LiveRedelivery::Plugin(p) => Some(p.max_redeliveries as u32 + 1),
            LiveRedelivery::Requeue(limit) => limit.map(|n| n + 1),
        }
    }

    /// The delay before the client-side redelivery that follows delivery `n` (1-based), if any.
    pub fn client_delay(&self, n: u32) -> Option<Duration> {
        match self {
            LiveRedelivery::Client { delays, unlimited } => {
                delays.get(n as usize - 1).copied().or_else(|| {
                    if *unlimited {
                        delays.last().copied()
                    } else {
                        None
                    }
                })
            }
            _ => None,
        }
    }
}

/// What a run needs, resolved from the scenario and the seed.
pub struct Plan {
    /// The live broker.
    pub target: Target,
    /// The strategy.
    pub strategy: LiveStrategy,
    /// Keys.
    pub keys: u32,
    /// `state` or `command`.
    pub kind: sim::scenario::WorkloadKind,
    /// Producers.
    pub producers: u32,
    /// Consumers.
    pub consumers: u32,
    /// Prefetch.
    pub prefetch: u32,
    /// Persistent messages (every broker's store is persistent).
    pub persistent: bool,
    /// Broker names, in file order.
    pub brokers: Vec<String>,
    /// With several brokers: the network bridges' prefetch (a `networkConnector` from each
    /// broker toward each other one).
    pub bridge_prefetch: u32,
    /// Per producer: its failover list (broker indices, the preferred first).
    pub producer_lists: Vec<Vec<u16>>,
    /// Per consumer: its failover list.
    pub consumer_lists: Vec<Vec<u16>>,
    /// Service time of one message.
    pub service: sim::dist::DurDist,
    /// Apply to ack.
    pub ack_latency: Duration,
    /// Before a consumer reconnects.
    pub reconnect_delay: Duration,
    /// Before a producer reconnects.
    pub producer_reconnect_delay: Duration,
    /// (time from start, producer, key), by time.
    pub schedule: Vec<(Duration, u32, u32)>,
    /// Per message of the schedule: whether it is poison (its processing always fails).
    pub poison: Vec<bool>,
    /// What a consumer does with a poison message.
    pub redelivery: LiveRedelivery,
    /// (time from start, action), by time.
    pub faults: Vec<(Duration, Action)>,
    /// The longest wait for the queue to drain after production and faults.
    pub drain_timeout: Duration,
    /// Seed of the service times.
    pub seed: u64,
    /// The db handler, run against a private PostgreSQL (`db_optimistic`, `notifier`).
    pub db: Option<super::db::DbStrategy>,
    /// `--consumer`: the consumers are copies of the user's command, not threads of ordsim.
    pub own: Option<super::own::OwnConsumer>,
}

/// The producers' schedule: (time from the start, producer, key) per message, in order.
pub type Schedule = Vec<(Duration, u32, u32)>;

/// What the producers send, in order: (time from the start, producer, key) per message, and
/// which messages are poison. These are the draws `sim run --seed` makes (its arrivals, keys and
/// producers from their own streams, poison with the fault plan's windows), read from the
/// simulator's history of `strategy` at `seed`: a live run and the simulator at one seed handle
/// one workload, so a calibration compares how each handles it, not two samples of the arrivals
/// (docs/calibration.md, "One workload on both sides").
pub fn workload(sc: &Scenario, strategy: &str, seed: u64) -> Result<(Schedule, Vec<bool>), String> {
    let plan = sim::faults::FaultPlan::resolve(sc, seed);
    let opts = sim::RunOptions {
        seed,
        max_events: None,
        max_sim_time: None,
    };
    let (mut schedule, mut poison) = (Vec::new(), Vec::new());
    let mut observe = |e: &Event| {
        if let Event::Produce {
            t,
            msg,
            producer,
            poison: p,
            ..
        } = *e
        {
            schedule.push((Duration::from_micros(t), producer, msg.key));
            poison.push(p);
        }
    };
    strategies::run_named(strategy, sc, &plan, &opts, Some(&mut observe))
        .map_err(|e| format!("the simulator's workload at seed {seed}: {e}"))?;
    if schedule.len() as u64 != sc.workload.messages {
        return Err(format!(
            "the simulator produced {} of {} messages at seed {seed} (its run ended early)",
            schedule.len(),
            sc.workload.messages
        ));
    }
    Ok((schedule, poison))
}

/// The history as it is recorded: events timed from the start, in recording order (so time
/// never goes backwards), messages numbered as they are produced.
pub struct Recorder {
    start: Instant,
    /// `start` on the system clock, microseconds since the Unix epoch (a database's commit
    /// times, `--writes`, are on it).
    start_unix_us: i64,
    inner: Mutex<RecInner>,
}

struct RecInner {
    events: Vec<Event>,
    next_seq: Vec<u32>,
    produced: Vec<MsgRef>,
    /// Messages applied or rejected as stale (settled by the handler).
    applied: HashSet<u64>,
    /// NACKs sent, per message.
    nacks: BTreeMap<u64, u32>,
}

impl Recorder {
    /// Starts the clock.
    pub fn new(keys: u32) -> Recorder {
        let unix = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as i64)
        };
        // The two clocks read back to back, the system clock's reading the middle of two.
        let before = unix();
        let start = Instant::now();
        let after = unix();
        Recorder {
            start,
            start_unix_us: before + (after - before) / 2,
            inner: Mutex::new(RecInner {
                events: Vec::new(),
                next_seq: vec![0; keys as usize],
                produced: Vec::new(),
                applied: HashSet::new(),
                nacks: BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Microseconds since the start.
    pub fn now(&self) -> Time {
        self.start.elapsed().as_micros() as Time
    }

    /// Records the event `f` builds from the current time.
    pub fn push(&self, f: impl FnOnce(Time) -> Event) {
        self.push_if(|t| Some(f(t)));
    }

    /// Records the event `f` builds, if it builds one: `f` runs under the recorder's lock, so
    /// what it does (a kill, an ACK on the wire) and its event are one step of the history.
    pub fn push_if(&self, f: impl FnOnce(Time) -> Option<Event>) -> bool {
        let mut g = self.lock();
        let t = self.now();
        let Some(e) = f(t) else {
            return false;
        };
        // A stale rejection settles its message as an apply does (acked, not written).
        if let Event::Apply { msg, .. } | Event::Reject { msg, .. } = e {
            g.applied.insert(msg.id);
        }
        g.events.push(e);
        true
    }

    /// Records the event `f` builds at `at`, an instant already past, in its place by time
    /// (after every event recorded at or before it): a fault is recorded at the instant it was
    /// done, without waiting for the lock while it is done.
    pub fn insert_at(&self, at: Instant, f: impl FnOnce(Time) -> Event) {
        let mut g = self.lock();
        let t = at.saturating_duration_since(self.start).as_micros() as Time;
        let i = g.events.partition_point(|e| e.time() <= t);
        g.events.insert(i, f(t));
    }

    /// Time 0 of the history on the system clock, microseconds since the Unix epoch.
    pub fn origin_unix_us(&self) -> i64 {
        self.start_unix_us
    }

    /// Records an apply found in the write log (`--writes`) in its place by time `t` (its
    /// commit), settling its message.
    pub fn insert_apply(&self, t: Time, msg: MsgRef, consumer: u32) {
        let mut g = self.lock();
        g.applied.insert(msg.id);
        let i = g.events.partition_point(|e| e.time() <= t);
        g.events.insert(
            i,
            Event::Apply {
                t,
                msg,
                consumer,
                state_seq: msg.seq,
            },
        );
    }

    /// The instant time 0 of the history stands for.
    pub fn origin(&self) -> Instant {
        self.start
    }

    /// A new message of `key` from `producer`: numbered and recorded.
    pub fn produce(&self, producer: u32, key: u32, poison: bool) -> MsgRef {
        let mut g = self.lock();
        let t = self.now();
        let seq = g.next_seq[key as usize];
        g.next_seq[key as usize] += 1;
        let msg = MsgRef {
            id: g.produced.len() as u64,
            key,
            seq,
        };
        g.produced.push(msg);
        g.events.push(Event::Produce {
            t,
            msg,
            producer,
            timestamp: t,
            poison,
        });
        msg
    }

    /// A NACK of `id` was sent: how many so far.
    pub fn nacked(&self, id: u64) -> u32 {
        let mut g = self.lock();
        let n = g.nacks.entry(id).or_default();
        *n += 1;
        *n
    }

    /// How many NACKs of `id` were sent.
    pub fn nacks(&self, id: u64) -> u32 {
        self.lock().nacks.get(&id).copied().unwrap_or(0)
    }

    /// Messages produced, and those settled: applied, or NACKed `final_nacks` times (a poison
    /// message the broker has dead-lettered or dropped by now).
    pub fn progress(&self, final_nacks: Option<u32>) -> (usize, usize) {
        let g = self.lock();
        let given_up = final_nacks.map_or(0, |n| {
            g.nacks
                .iter()
                .filter(|(id, k)| **k >= n && !g.applied.contains(id))
                .count()
        });
        (g.produced.len(), g.applied.len() + given_up)
    }

    /// The message of `key` numbered `seq`, if it was produced.
    pub fn find(&self, key: u32, seq: u32) -> Option<MsgRef> {
        let g = self.lock();
        g.produced
            .iter()
            .rev()
            .find(|m| m.key == key && m.seq == seq)
            .copied()
    }

    /// What was produced of `key` so far, for an error message.
    pub fn produced_of(&self, key: u32) -> String {
        let g = self.lock();
        match g.next_seq.get(key as usize) {
            None => format!("keys are 0..{}", g.next_seq.len()),
            Some(0) => format!("nothing of key {key} yet"),
            Some(n) => format!("key {key} has seq 0..{n} so far"),
        }
    }

    /// The messages produced.
    pub fn produced(&self) -> Vec<MsgRef> {
        self.lock().produced.clone()
    }

    /// Whether `id` was applied.
    pub fn applied(&self, id: u64) -> bool {
        self.lock().applied.contains(&id)
    }

    /// The history.
    pub fn into_events(self) -> Vec<Event> {
        self.inner
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .events
    }
}

/// The message a MESSAGE frame carries (headers `ordsim-id`, `-key`, `-seq`).
pub fn msg_of(f: &Frame) -> Option<MsgRef> {
    Some(MsgRef {
        id: f.get("ordsim-id")?.parse().ok()?,
        key: f.get("ordsim-key")?.parse().ok()?,
        seq: f.get("ordsim-seq")?.parse().ok()?,
    })
}

/// Whether a MESSAGE frame carries a poison message (header `ordsim-poison`; only its processing
/// finds out).
pub fn poison_of(f: &Frame) -> bool {
    f.get("ordsim-poison") == Some("1")
}

/// The SEND frame of `msg`.
pub fn send_frame(msg: MsgRef, strategy: LiveStrategy, persistent: bool, poison: bool) -> Frame {
    let mut f = Frame::new("SEND")
        .header("destination", QUEUE)
        .header("persistent", if persistent { "true" } else { "false" })
        .header("ordsim-id", msg.id.to_string())
        .header("ordsim-key", msg.key.to_string())
        .header("ordsim-seq", msg.seq.to_string());
    if strategy == LiveStrategy::MessageGroups {
        f = f.header("JMSXGroupID", format!("k{}", msg.key));
    }
    if poison {
        f = f.header("ordsim-poison", "1");
    }
    f.body(format!("k{}s{}", msg.key, msg.seq))
}

/// The SUBSCRIBE frame of a consumer.
pub fn subscribe_frame(strategy: LiveStrategy, prefetch: u32) -> Frame {
    let mut f = Frame::new("SUBSCRIBE")
        .header("id", "0")
        .header("destination", QUEUE)
        .header("ack", "client-individual")
        .header("activemq.prefetchSize", prefetch.max(1).to_string());
    if strategy == LiveStrategy::Single {
        f = f.header("activemq.exclusive", "true");
    }
    f
}

/// A consumer process's life, shared with the fault driver, which crashes it at the planned
/// instant whatever the consumer's thread is doing (waiting for a frame, serving, between an apply
/// and its ack).
#[derive(Default)]
pub(super) struct Life {
    /// A handle on its connection's socket while connected: the driver closes it at the crash.
    socket: Option<TcpStream>,
    /// Crashed: back at this instant (set at the crash, cleared at the recovery).
    pub(super) down_until: Option<Instant>,
    /// `--consumer`: the process group of the user's consumer while it runs.
    pub(super) pgid: Option<i32>,
}

/// What the threads of a run share.
pub(super) struct Shared {
    pub(super) rec: Recorder,
    /// Producers and the fault driver are done: consumers finish and disconnect.
    pub(super) stop_consumers: AtomicBool,
    /// Abandon everything (an error or Ctrl-C).
    abort: AtomicBool,
    /// Per consumer: its life.
    lives: Vec<Mutex<Life>>,
    /// Held from numbering a message until it is written, so per-key order on the wire is
    /// production order whatever the producer count.
    produce_lock: Mutex<()>,
    /// Per consumer: its first subscription is registered (the broker's RECEIPT arrived).
    pub(super) subscribed: Vec<AtomicBool>,
    /// Each broker's STOMP port.
    pub(super) ports: Vec<u16>,
    /// The PostgreSQL server's port, when the handler writes to it.
    pub(super) db_port: Option<u16>,
    /// What stopped the run from a producer's thread (its source database failed) or from an
    /// own consumer's (`--consumer`).
    pub(super) error: Mutex<Option<String>>,
    /// The consumers are the user's processes (`--consumer`).
    own: bool,
    /// `--consumer`: per consumer, the tail of its stderr.
    pub(super) tails: Vec<super::own::Tail>,
    /// `--consumer` with a `network_blip`: per consumer, a proxy to each broker (by index), the
    /// ports the copy is given; empty otherwise.
    pub(super) proxies: Vec<Vec<super::proxy::Proxy>>,
}

impl Shared {
    pub(super) fn new(rec: Recorder, consumers: u32, ports: Vec<u16>) -> Shared {
        Shared {
            rec,
            stop_consumers: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            lives: (0..consumers)
                .map(|_| Mutex::new(Life::default()))
                .collect(),
            produce_lock: Mutex::new(()),
            subscribed: (0..consumers).map(|_| AtomicBool::new(false)).collect(),
            ports,
            db_port: None,
            error: Mutex::new(None),
            own: false,
            tails: (0..consumers)
                .map(|_| super::own::Tail::default())
                .collect(),
            proxies: Vec::new(),
        }
    }

    /// The brokers' ports as consumer `c` reaches them: through its proxies when it has them.
    pub(super) fn ports_of(&self, c: u32) -> Vec<u16> {
        match self.proxies.get(c as usize) {
            Some(p) => p.iter().map(super::proxy::Proxy::port).collect(),
            None => self.ports.clone(),
        }
    }

    /// Stops the run with `e` (a producer's source database failed): returns `r`.
    pub(super) fn fail<R>(&self, e: String, r: R) -> R {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        self.abort.store(true, Ordering::SeqCst);
        r
    }

    pub(super) fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst) || crate::interrupt::interrupted()
    }

    /// Consumer `c`'s life (always taken under the recorder's lock or alone, never the other
    /// way round).
    pub(super) fn life(&self, c: u32) -> std::sync::MutexGuard<'_, Life> {
        self.lives[c as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// When consumer `c`, crashed, comes back.
    pub(super) fn down(&self, c: u32) -> Option<Instant> {
        self.life(c).down_until
    }

    /// Records what consumer `c` did (and does `f`'s side effect) unless it has crashed: the
    /// driver marks it down before closing its socket, so a step checked alive either happened
    /// before the crash (timed before it) or fails on the closed socket; nothing a consumer does
    /// is recorded after its crash. `false`: crashed.
    fn record(&self, c: u32, f: impl FnOnce(Time) -> Option<Event>) -> bool {
        self.rec.push_if(|t| {
            if self.life(c).down_until.is_some() {
                return None;
            }
            f(t)
        })
    }

    /// Crashes consumer `c` now, for `down`: marked down (so none of its steps is recorded from
    /// now on), its socket closed, the crash recorded at this instant. `None` if it was down
    /// already.
    fn crash_consumer(&self, c: u32, down: Duration) -> Option<Instant> {
        let now = {
            let mut l = self.life(c);
            if l.down_until.is_some() {
                return None;
            }
            let now = Instant::now();
            l.down_until = Some(now + down);
            if let Some(s) = l.socket.take() {
                close_socket(&s);
            }
            if let Some(g) = l.pgid {
                super::own::signal(g, libc::SIGKILL);
            }
            now
        };
        // `--consumer`: its thread records the crash once it has read the last line the
        // process wrote before the kill.
        if !self.own {
            self.rec.insert_at(now, |t| Event::Crash {
                t,
                node: Node::Consumer(c),
            });
        }
        Some(now)
    }

    /// Sends `sig` to consumer `c`'s process group (`--consumer`): when it was sent, `None` if
    /// no process of it runs now.
    fn signal_consumer(&self, c: u32, sig: libc::c_int) -> Option<Instant> {
        let l = self.life(c);
        let g = l.pgid?;
        let now = Instant::now();
        super::own::signal(g, sig);
        Some(now)
    }
}

/// Connects to the first broker of `list` that accepts (a failover transport with
/// `randomize=false`, as the model's clients go through their lists).
fn connect_first(sh: &Shared, list: &[u16]) -> Option<(Conn, u16)> {
    list.iter().find_map(|&b| {
        Conn::connect(sh.ports[b as usize], Duration::from_secs(1))
            .ok()
            .map(|c| (c, b))
    })
}

pub(super) fn sleep_until(sh: &Shared, deadline: Instant) -> bool {
    loop {
        if sh.aborted() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Longest wait for a SEND's receipt before the connection counts as lost.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(5);

/// A producer's connection and its messages not yet confirmed: numbered but unwritten (the
/// connection is down), and written awaiting their RECEIPT (pipelined: the producer does not
/// wait for one before the next SEND; receipts come back in order).
struct Outbox {
    conn: Option<Conn>,
    /// Not yet reconnected: the next attempt.
    next_try: Instant,
    first: bool,
    n: u64,
    /// (schedule index, message, frame).
    unsent: VecDeque<(usize, MsgRef, Frame)>,
    /// (receipt id, written at, schedule index, message, frame).
    inflight: VecDeque<(String, Instant, usize, MsgRef, Frame)>,
    /// Per schedule index of this producer: when it was first written.
    written: Vec<(usize, Instant)>,
}

impl Outbox {
    /// Writes what is unsent, if connected; on a failure the connection is lost.
    fn flush(&mut self, sh: &Shared, p: u32, reconnect: Duration) {
        while let Some(c) = self.conn.as_mut() {
            let Some((i, msg, frame)) = self.unsent.pop_front() else {
                return;
            };
            self.n += 1;
            let id = format!("p{p}-{}", self.n);
            let ok = c
                .send(&frame.clone().header("receipt", id.as_str()))
                .is_ok();
            let now = Instant::now();
            if !self.written.iter().any(|(j, _)| *j == i) {
                self.written.push((i, now));
            }
            self.inflight.push_back((id, now, i, msg, frame));
            if !ok {
                self.lose(sh, p, reconnect);
            }
        }
    }

    /// The connection is lost: every message without its receipt is sent again after
    /// reconnecting (the broker may or may not have it: perhaps a duplicate, as a JMS failover
    /// producer makes), recorded as `send_fail`.
    fn lose(&mut self, sh: &Shared, p: u32, reconnect: Duration) {
        if let Some(c) = self.conn.take() {
            c.abort();
        }
        let lost: Vec<_> = self.inflight.drain(..).collect();
        for (_, _, _, msg, _) in &lost {
            sh.rec.push(|t| Event::SendFail {
                t,
                msg: *msg,
                producer: p,
            });
        }
        // Ahead of what was never written, in their order.
        for (_, _, i, msg, frame) in lost.into_iter().rev() {
            self.unsent.push_front((i, msg, frame));
        }
        self.next_try = Instant::now() + reconnect;
    }

    /// Reconnects if disconnected and it is time.
    fn reconnect(&mut self, sh: &Shared, p: u32, list: &[u16], reconnect: Duration) {
        if self.conn.is_some() || Instant::now() < self.next_try {
            return;
        }
        match connect_first(sh, list) {
            Some((c, broker)) => {
                let failover = !self.first;
                self.first = false;
                sh.rec.push(|t| Event::Connect {
                    t,
                    node: Node::Producer(p),
                    broker,
                    failover,
                });
                self.conn = Some(c);
            }
            None => self.next_try = Instant::now() + reconnect,
        }
    }

    /// Waits until `until` for receipts (or a loss).
    fn await_receipts(&mut self, sh: &Shared, p: u32, until: Instant, reconnect: Duration) {
        let now = Instant::now();
        let wait = until
            .saturating_duration_since(now)
            .min(Duration::from_millis(20));
        let Some(c) = self.conn.as_mut() else {
            std::thread::sleep(wait);
            return;
        };
        let lost = match c.recv(Some(wait)) {
            Ok(Some(f)) if f.command == "RECEIPT" => {
                let id = f.get("receipt-id").unwrap_or("");
                if self.inflight.iter().any(|x| x.0 == id) {
                    while let Some(x) = self.inflight.pop_front() {
                        if x.0 == id {
                            break;
                        }
                    }
                }
                false
            }
            Ok(Some(f)) => f.command == "ERROR",
            Ok(None) => false,
            Err(_) => true,
        };
        let overdue = self
            .inflight
            .front()
            .is_some_and(|x| x.1.elapsed() > RECEIPT_TIMEOUT);
        if lost || overdue {
            self.lose(sh, p, reconnect);
        }
    }
}

/// A producer: numbers each of its messages at its scheduled time (whether or not it is
/// connected) and writes it at once when connected, collecting receipts between sends. Returns
/// when each of its schedule's messages was first written.
fn producer(sh: &Shared, p: u32, plan: &Plan, t0: Instant) -> Vec<(usize, Instant)> {
    let list = &plan.producer_lists[p as usize];
    let reconnect = plan.producer_reconnect_delay;
    let mine: Vec<(usize, Duration, u32)> = plan
        .schedule
        .iter()
        .enumerate()
        .filter(|(_, (_, q, _))| *q == p)
        .map(|(i, &(at, _, key))| (i, at, key))
        .collect();
    let mut out = Outbox {
        conn: None,
        next_try: Instant::now(),
        first: true,
        n: 0,
        unsent: VecDeque::new(),
        inflight: VecDeque::new(),
        written: Vec::new(),
    };
    let mut source = match (plan.strategy, sh.db_port) {
        (LiveStrategy::Notifier, Some(port)) => match super::db::Source::connect(port) {
            Ok(s) => Some(s),
            Err(e) => return sh.fail(e, out.written),
        },
        _ => None,
    };
    let mut next = 0;
    loop {
        if sh.aborted() {
            return out.written;
        }
        out.reconnect(sh, p, list, reconnect);
        {
            let _order = sh.produce_lock.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(&(i, at, key)) = mine.get(next) {
                if t0 + at > Instant::now() {
                    break;
                }
                let poison = plan.poison.get(i).copied().unwrap_or(false);
                let msg = sh.rec.produce(p, key, poison);
                // The notifier's source commits the state before its notification is sent.
                if let Some(Err(e)) = source.as_mut().map(|s| s.publish(msg.key, msg.seq)) {
                    return sh.fail(e, out.written);
                }
                let frame = plan
                    .target
                    .send(send_frame(msg, plan.strategy, plan.persistent, poison), key);
                out.unsent.push_back((i, msg, frame));
                next += 1;
            }
            out.flush(sh, p, reconnect);
        }
        if next == mine.len() && out.unsent.is_empty() && out.inflight.is_empty() {
            break;
        }
        let mut until = mine
            .get(next)
            .map_or(Instant::now() + Duration::from_millis(20), |m| t0 + m.1);
        if out.conn.is_none() {
            until = until.min(out.next_try);
        }
        out.await_receipts(sh, p, until, reconnect);
    }
    if let Some(c) = out.conn.take() {
        c.disconnect();
    }
    out.written
}

enum ConnEnd {
    /// Lost (the broker died or closed it): reconnect as a failover.
    Lost,
    /// The process crashed; it is back now.
    Crashed,
    /// Finished (stop) or aborted.
    Done,
}

fn consumer(sh: &Shared, c: u32, plan: &Plan) {
    let sampler = plan.service.sampler();
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed.wrapping_mul(31).wrapping_add(c as u64));
    let mut failover = false;
    let mut handler = plan
        .db
        .zip(sh.db_port)
        .map(|(d, port)| super::db::Handler::new(d, port));
    loop {
        if sh.aborted() {
            return;
        }
        // Crashed (by the driver, at its instant): the process is down until then.
        if let Some(until) = sh.down(c) {
            if !sleep_until(sh, until) {
                return;
            }
            sh.rec.push(|t| {
                sh.life(c).down_until = None;
                Event::Recover {
                    t,
                    node: Node::Consumer(c),
                }
            });
            failover = false;
        }
        let list = &plan.consumer_lists[c as usize];
        let attached = connect_first(sh, list).and_then(|(mut k, b)| {
            // Registered in order; the last one's receipt says all are.
            let subs = plan.target.subscriptions(plan.strategy, plan.prefetch);
            let n = subs.len();
            for (i, f) in subs.into_iter().enumerate() {
                let f = if i + 1 == n {
                    f.header("receipt", SUBSCRIBED)
                } else {
                    f
                };
                k.send(&f).ok()?;
            }
            Some((k, b))
        });
        let (mut conn, broker) = match attached {
            Some(k) => k,
            None => {
                if sh.stop_consumers.load(Ordering::SeqCst) {
                    return;
                }
                sleep_until(sh, Instant::now() + plan.reconnect_delay);
                continue;
            }
        };
        // The socket is the driver's to close from now on, unless a crash came meanwhile.
        let socket = conn.socket().ok();
        let connected = sh.record(c, |t| {
            let mut l = sh.life(c);
            if l.down_until.is_some() {
                return None;
            }
            l.socket = socket;
            Some(Event::Connect {
                t,
                node: Node::Consumer(c),
                broker,
                failover,
            })
        });
        if !connected {
            conn.abort();
            continue;
        }
        let end = consume(
            sh,
            c,
            broker,
            plan,
            &mut conn,
            &sampler,
            &mut rng,
            &mut handler,
        );
        sh.life(c).socket = None;
        match end {
            ConnEnd::Done => {
                conn.disconnect();
                return;
            }
            ConnEnd::Crashed => {
                // The process died: whatever it held (prefetched messages, acks not yet sent)
                // is gone; the broker redelivers what it had not seen acknowledged. Its database
                // sessions close with it (an open transaction rolls back).
                conn.abort();
                if let Some(h) = handler.as_mut() {
                    h.reset();
                }
                failover = false;
            }
            ConnEnd::Lost => {
                conn.abort();
                failover = true;
                sleep_until(sh, Instant::now() + plan.reconnect_delay);
            }
        }
    }
}

/// How a connection that failed ends: crashed (the driver closed it) or lost.
fn ended(sh: &Shared, c: u32) -> ConnEnd {
    if sh.down(c).is_some() {
        ConnEnd::Crashed
    } else {
        ConnEnd::Lost
    }
}

#[allow(clippy::too_many_arguments)]
fn consume(
    sh: &Shared,
    c: u32,
    broker: u16,
    plan: &Plan,
    conn: &mut Conn,
    sampler: &sim::dist::Sampler,
    rng: &mut ChaCha8Rng,
    handler: &mut Option<super::db::Handler>,
) -> ConnEnd {
    let mut acks: VecDeque<(Instant, String, MsgRef)> = VecDeque::new();
    // Every step is recorded through `sh.record`: `false` means the driver crashed the
    // consumer meanwhile (its socket is closed), and the step did not happen.
    macro_rules! step {
        ($e:expr) => {
            if !sh.record(c, |t| Some($e(t))) {
                return ConnEnd::Crashed;
            }
        };
    }
    loop {
        if sh.aborted() {
            return ConnEnd::Done;
        }
        if sh.down(c).is_some() {
            return ConnEnd::Crashed;
        }
        let stopping = sh.stop_consumers.load(Ordering::SeqCst);
        if send_due_acks(sh, c, conn, &mut acks, stopping).is_err() {
            return ended(sh, c);
        }
        if stopping {
            return ConnEnd::Done;
        }
        // An idle consumer waits in poll(2) on its socket: a crash closes the socket, which
        // wakes it at once (the wait's cap only bounds how late it sees a stop or an abort).
        let wait = acks
            .front()
            .map(|(d, _, _)| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(20))
            .clamp(Duration::from_millis(1), Duration::from_millis(20));
        let f = match conn.recv(Some(wait)) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(_) => return ended(sh, c),
        };
        if f.command != "MESSAGE" {
            if f.command == "ERROR" {
                return ended(sh, c);
            }
            if f.command == "RECEIPT" && f.get("receipt-id") == Some(SUBSCRIBED) {
                sh.subscribed[c as usize].store(true, Ordering::SeqCst);
            }
            continue;
        }
        let (Some(msg), Some(ack_id)) = (msg_of(&f), f.get("ack").map(str::to_string)) else {
            continue;
        };
        let redelivered = f.get("redelivered") == Some("true");
        let poison = poison_of(&f);
        step!(|t| Event::Dispatch {
            t,
            msg,
            broker,
            consumer: c,
            // A quorum queue counts its returns (`x-delivery-count`).
            delivery: f
                .get("x-delivery-count")
                .and_then(|n| n.parse::<u32>().ok())
                .map_or(if redelivered { 2 } else { 1 }, |n| n + 1),
            redelivered,
        });
        let mut delivery = 1u32;
        loop {
            step!(|t| Event::Start {
                t,
                msg,
                consumer: c,
            });
            let outcome = match process(sh, c, conn, &mut acks, sampler, rng, handler, msg, poison)
            {
                Ok(o) => o,
                Err(end) => return end,
            };
            match outcome {
                Handled::Applied => {
                    acks.push_back((Instant::now() + plan.ack_latency, ack_id, msg));
                    break;
                }
                Handled::Rejected => {
                    step!(|t| Event::Reject {
                        t,
                        msg,
                        consumer: c,
                    });
                    acks.push_back((Instant::now() + plan.ack_latency, ack_id, msg));
                    break;
                }
                Handled::Failed(reason) => step!(|t| Event::Rollback {
                    t,
                    msg,
                    consumer: c,
                    reason,
                }),
            }
            match plan.redelivery.client_delay(delivery) {
                Some(delay) => {
                    // The JMS client's blocking redelivery: the session holds the message for
                    // the delay (what it prefetched waits), then delivers it again to itself.
                    step!(|t| Event::Redelivery {
                        t,
                        msg,
                        delay_us: delay.as_micros() as u64,
                        blocking: true,
                    });
                    if let Err(end) = hold(sh, c, conn, &mut acks, Instant::now() + delay) {
                        return end;
                    }
                    delivery += 1;
                    step!(|t| Event::Dispatch {
                        t,
                        msg,
                        broker,
                        consumer: c,
                        delivery,
                        redelivered: true,
                    });
                }
                None => {
                    // STOMP NACK: a poison ack. The broker dead-letters the message, or, with
                    // the redelivery plugin, schedules its redelivery. Written under the
                    // recorder's lock, so never after a crash.
                    let mut failed = false;
                    let requeue = matches!(plan.redelivery, LiveRedelivery::Requeue(_));
                    let nack = plan.target.nack(&ack_id, requeue);
                    sh.record(c, |_| {
                        failed = conn.send(&nack).is_err();
                        None
                    });
                    if failed || sh.down(c).is_some() {
                        return ended(sh, c);
                    }
                    let n = sh.rec.nacked(msg.id);
                    // RabbitMQ without a dead-letter exchange deletes the message at its last
                    // NACK: a drop then, as the model records it (not a loss found at the end).
                    if plan.target.drops() && plan.redelivery.final_nacks() == Some(n) {
                        sh.rec.push(|t| Event::Drop { t, msg, broker });
                    }
                    break;
                }
            }
        }
    }
}

/// What processing a delivery came to (its `apply` is recorded already).
enum Handled {
    Applied,
    Rejected,
    Failed(FailReason),
}

/// Processes a delivery whose start is recorded: the handler's `begin` (a db handler's reads),
/// the service time, then the write: a plain apply, or a db handler's transaction, committed and
/// recorded as one step under the recorder's lock. A crash meanwhile abandons it (`Err`).
#[allow(clippy::too_many_arguments)]
fn process(
    sh: &Shared,
    c: u32,
    conn: &mut Conn,
    acks: &mut VecDeque<(Instant, String, MsgRef)>,
    sampler: &sim::dist::Sampler,
    rng: &mut ChaCha8Rng,
    handler: &mut Option<super::db::Handler>,
    msg: MsgRef,
    poison: bool,
) -> Result<Handled, ConnEnd> {
    // `sh.record` refused the step: the driver crashed the consumer meanwhile.
    let crashed = |_: &Shared| Err(ConnEnd::Crashed);
    if let Some(h) = handler.as_mut() {
        match h.begin(msg.key) {
            Ok(Some(seq)) => {
                if !sh.record(c, |t| {
                    Some(Event::SourceRead {
                        t,
                        key: msg.key,
                        consumer: c,
                        seq,
                    })
                }) {
                    return crashed(sh);
                }
            }
            Ok(None) => {}
            Err(r) => return Ok(Handled::Failed(r)),
        }
    }
    let service = Duration::from_micros(sampler.sample(rng));
    // Serve. Acks of earlier applies fall due meanwhile and are sent on time: in the model an
    // ack reaches the broker `ack_latency` after its apply whatever the consumer does next. A
    // crash meanwhile abandons the message (no apply).
    hold(sh, c, conn, acks, Instant::now() + service)?;
    let Some(h) = handler.as_mut() else {
        if poison {
            // Processing failed (only processing finds a poison message out).
            return Ok(Handled::Failed(FailReason::Poison));
        }
        let applied = sh.record(c, |t| {
            Some(Event::Apply {
                t,
                msg,
                consumer: c,
                state_seq: msg.seq,
            })
        });
        return if applied {
            Ok(Handled::Applied)
        } else {
            crashed(sh)
        };
    };
    let wait = h.extra_wait();
    if !wait.is_zero() {
        hold(sh, c, conn, acks, Instant::now() + wait)?;
    }
    match h.handle(msg.key, msg.seq, poison) {
        super::db::Outcome::Applied(state_seq) => {
            let mut failed = None;
            let applied = sh.record(c, |t| match h.commit() {
                Ok(()) => Some(Event::Apply {
                    t,
                    msg,
                    consumer: c,
                    state_seq,
                }),
                Err(r) => {
                    failed = Some(r);
                    None
                }
            });
            match failed {
                Some(r) => Ok(Handled::Failed(r)),
                None if applied => Ok(Handled::Applied),
                None => {
                    // Crashed before the commit: the session dies with the process.
                    h.reset();
                    crashed(sh)
                }
            }
        }
        super::db::Outcome::Rejected => Ok(Handled::Rejected),
        super::db::Outcome::Failed(r) => Ok(Handled::Failed(r)),
    }
}

/// Waits until `until`, sending acks as they fall due and watching for a crash and an abort:
/// `Err` with how the connection ends if one comes.
fn hold(
    sh: &Shared,
    c: u32,
    conn: &mut Conn,
    acks: &mut VecDeque<(Instant, String, MsgRef)>,
    until: Instant,
) -> Result<(), ConnEnd> {
    while Instant::now() < until {
        if sh.aborted() {
            return Err(ConnEnd::Done);
        }
        if sh.down(c).is_some() {
            return Err(ConnEnd::Crashed);
        }
        if send_due_acks(sh, c, conn, acks, false).is_err() {
            return Err(ended(sh, c));
        }
        let next_ack = acks.front().map_or(until, |(due, _, _)| (*due).min(until));
        std::thread::sleep(
            next_ack
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(5)),
        );
    }
    Ok(())
}

/// Sends the acks whose latency has passed (all of them when `all`), in order, each written
/// and recorded under the recorder's lock unless the consumer has crashed (an ack not sent by
/// the crash instant is lost with the process).
fn send_due_acks(
    sh: &Shared,
    c: u32,
    conn: &mut Conn,
    acks: &mut VecDeque<(Instant, String, MsgRef)>,
    all: bool,
) -> Result<(), ()> {
    while let Some((due, _, _)) = acks.front() {
        if !all && *due > Instant::now() {
            break;
        }
        let (_, id, msg) = acks.pop_front().expect("front");
        let ack = Frame::new("ACK").header("id", id);
        let sent = sh.record(c, |t| {
            conn.send(&ack).ok()?;
            Some(Event::Ack {
                t,
                msg,
                consumer: c,
            })
        });
        if !sent {
            return Err(());
        }
    }
    Ok(())
}

/// Reads every message left in `dest` (auto-ack) until `quiet` passes without one.
fn drain(port: u16, dest: &str, quiet: Duration) -> Result<Vec<MsgRef>, String> {
    let mut conn = Conn::connect(port, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    conn.send(
        &Frame::new("SUBSCRIBE")
            .header("id", "drain")
            .header("destination", dest)
            .header("ack", "auto")
            .header("activemq.prefetchSize", "1000"),
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(f) = conn.recv(Some(quiet)).map_err(|e| e.to_string())? {
        if f.command == "MESSAGE" {
            if let Some(m) = msg_of(&f) {
                out.push(m);
            }
        }
    }
    conn.disconnect();
    Ok(out)
}

/// The brokers' configurations: ports for all first (each bridge names its peer's port), then
/// one `networkConnector` toward every other broker when there are several.
pub fn broker_confs(plan: &Plan) -> Result<Vec<BrokerConf>, String> {
    let mut confs = plan
        .brokers
        .iter()
        .map(|n| BrokerConf::single(n, plan.persistent))
        .collect::<Result<Vec<_>, _>>()?;
    let plugin = match &plan.redelivery {
        LiveRedelivery::Plugin(p) => Some(p.clone()),
        _ => None,
    };
    let all: Vec<(String, u16)> = confs
        .iter()
        .map(|c| (c.name.clone(), c.openwire_port))
        .collect();
    for (i, c) in confs.iter_mut().enumerate() {
        c.plugin = plugin.clone();
        c.bridge_prefetch = plan.bridge_prefetch;
        if all.len() > 1 {
            c.peers = all
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, p)| p.clone())
                .collect();
        }
    }
    Ok(confs)
}

/// Waits until every bridge forwards: for each ordered pair (x, y), a probe sent to broker x
/// reaches a consumer on broker y (the bridge x -> y formed and saw y's demand).
fn wait_bridges(ports: &[u16], timeout: Duration) -> Result<(), String> {
    if ports.len() < 2 {
        return Ok(());
    }
    let deadline = Instant::now() + timeout;
    for (y, &py) in ports.iter().enumerate() {
        let dest = format!("/queue/ordsim.probe.{y}");
        let mut sub = Conn::connect(py, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        sub.send(
            &Frame::new("SUBSCRIBE")
                .header("id", "probe")
                .header("destination", dest.as_str())
                .header("ack", "auto"),
        )
        .map_err(|e| e.to_string())?;
        for (x, &px) in ports.iter().enumerate() {
            if x == y {
                continue;
            }
            let mut pc = Conn::connect(px, Duration::from_secs(5)).map_err(|e| e.to_string())?;
            let mut skipped = Vec::new();
            pc.send_with_receipt(
                Frame::new("SEND")
                    .header("destination", dest.as_str())
                    .header("persistent", "false")
                    .body(format!("probe {x}")),
                "probe",
                Duration::from_secs(5),
                &mut skipped,
            )
            .map_err(|e| format!("probe send: {e}"))?;
            pc.disconnect();
            loop {
                if crate::interrupt::interrupted() {
                    return Err("interrupted".into());
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "the network bridge from broker {x} to broker {y} did not form within {timeout:?}"
                    ));
                }
                match sub.recv(Some(Duration::from_millis(100))) {
                    Ok(Some(f))
                        if f.command == "MESSAGE"
                            && f.body == format!("probe {x}").into_bytes() =>
                    {
                        break
                    }
                    Ok(_) => {}
                    Err(e) => return Err(format!("probe: {e}")),
                }
            }
        }
        sub.disconnect();
    }
    Ok(())
}

/// One live run of `plan` against fresh brokers: the history, how the producers kept to the
/// schedule, and when the faults happened.
pub fn run(plan: &Plan) -> Result<LiveRun, String> {
    let (dirs, mut brokers) = plan.target.processes(plan)?;
    for b in brokers.iter_mut() {
        b.start(Duration::from_secs(60))?;
    }
    let ports: Vec<u16> = brokers.iter().map(|b| b.port()).collect();
    wait_bridges(&ports, Duration::from_secs(30))?;
    // The handlers' PostgreSQL: started for this run, stopped by PID when `db` drops.
    // `--consumer` with a database: its `--schema` and the `--writes` log installed before the
    // copies start.
    let own_db = plan.own.as_ref().filter(|o| o.database);
    let mut db = match (plan.db, own_db) {
        (Some(_), _) => Some(super::postgres::Server::start(Duration::from_secs(60))?),
        (None, Some(o)) => {
            let server =
                super::postgres::Server::start_with(Duration::from_secs(60), o.schema.as_deref())?;
            if let Some(w) = &o.writes {
                server.install_write_log(w)?;
            }
            Some(server)
        }
        (None, None) => None,
    };
    let writes = plan.own.as_ref().and_then(|o| o.writes.as_ref());
    let writes_done = AtomicBool::new(false);
    let mut shared = Shared::new(Recorder::new(plan.keys), plan.consumers, ports.clone());
    shared.db_port = db.as_ref().map(|d| d.port);
    shared.own = plan.own.is_some();
    if plan.own.is_some()
        && plan
            .faults
            .iter()
            .any(|(_, a)| matches!(a, Action::CutConsumer(_)))
    {
        shared.proxies = (0..plan.consumers)
            .map(|_| {
                ports
                    .iter()
                    .map(|&p| super::proxy::Proxy::start(p))
                    .collect()
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("network_blip: cannot start a proxy on loopback: {e}"))?;
    }
    // `--consumer`: a scratch directory the copies share (ORDSIM_STATE_DIR), removed at the end.
    let scratch = match plan.own {
        Some(_) => Some(super::own::state_dir()?),
        None => None,
    };
    let scratch_path = scratch
        .as_ref()
        .map(|d| d.path().display().to_string())
        .unwrap_or_default();
    let sh = Arc::new(shared);
    let mut t0 = Instant::now();
    let mut written = Vec::new();
    let mut faults = Vec::new();
    let result = std::thread::scope(|s| -> Result<(), String> {
        // Consumers attach in order, each once the previous one's subscription is registered, as
        // the model attaches them at time 0 in index order: the broker's consumer list (its
        // dispatch order, and which one `single`'s exclusive subscription picks) is then the
        // model's. The schedule and the faults start when all are attached.
        let follower = writes.zip(sh.db_port).map(|(w, port)| {
            let (sh, done) = (&*sh, &writes_done);
            s.spawn(move || super::own::follow_writes(sh, w, port, done))
        });
        let mut consumers = Vec::new();
        for c in 0..plan.consumers {
            let sh = &*sh;
            let dir = scratch_path.as_str();
            consumers.push(match &plan.own {
                Some(own) => s.spawn(move || super::own::consumer(sh, c, plan, own, dir)),
                None => s.spawn(move || consumer(sh, c, plan)),
            });
            let deadline = Instant::now() + Duration::from_secs(10);
            while !sh.subscribed[c as usize].load(Ordering::SeqCst)
                && Instant::now() < deadline
                && !sh.aborted()
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        if ports.len() > 1 {
            // Consumers' demand travels to the other brokers as advisories: let the bridges
            // subscribe before the first message (the model's bridges exist at time 0).
            std::thread::sleep(Duration::from_millis(500));
        }
        t0 = Instant::now();
        let producers: Vec<_> = (0..plan.producers)
            .map(|p| {
                let sh = &*sh;
                s.spawn(move || producer(sh, p, plan, t0))
            })
            .collect();
        let r = drive(&sh, plan, &mut brokers, db.as_mut(), t0).map(|f| faults = f);
        for p in producers {
            written.extend(p.join().unwrap_or_default());
        }
        let r = r.and_then(|_| {
            if sh.aborted() {
                return Err("interrupted".into());
            }
            sh.rec.push(|t| Event::DrainStart { t });
            let deadline = Instant::now() + plan.drain_timeout;
            loop {
                let (produced, applied) = sh.rec.progress(plan.redelivery.final_nacks());
                if applied >= produced || Instant::now() >= deadline || sh.aborted() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        });
        if r.is_err() {
            sh.abort.store(true, Ordering::SeqCst);
        }
        sh.stop_consumers.store(true, Ordering::SeqCst);
        // `--consumer`: the processes are stopped (their stdout closes, their threads return).
        for c in 0..plan.consumers {
            sh.signal_consumer(c, libc::SIGKILL);
        }
        for c in consumers {
            let _ = c.join();
        }
        // The copies are gone: the follower takes the last committed writes and returns.
        writes_done.store(true, Ordering::SeqCst);
        if let Some(f) = follower {
            let _ = f.join();
        }
        r
    });
    let failed = sh.error.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Err(e) = failed.map_or(result, Err) {
        brokers.iter_mut().for_each(|b| b.kill());
        return Err(e);
    }
    if crate::interrupt::interrupted() {
        return Err("interrupted".into());
    }
    // What is left, read from every broker: its queue (pending) and its dead-letter queue.
    let mut left = Vec::new();
    let mut dead = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        for (dest, dlq) in plan.target.leftovers() {
            if dlq {
                dead.extend(
                    drain(port, &dest, Duration::from_millis(500))?
                        .into_iter()
                        .map(|m| (m, i as u16)),
                );
            } else {
                left.extend(drain(port, &dest, Duration::from_millis(1500))?);
            }
        }
    }
    brokers.iter_mut().for_each(|b| b.kill());
    drop(dirs);
    let sh = Arc::try_unwrap(sh).map_err(|_| "threads still hold the run".to_string())?;
    let sh_tails = sh.tails;
    let rec = sh.rec;
    let mut seen = HashSet::new();
    for (m, broker) in &dead {
        if !rec.applied(m.id) && seen.insert(m.id) {
            rec.push(|t| Event::DeadLetter {
                t,
                msg: *m,
                broker: *broker,
            });
        }
    }
    for m in &left {
        if !rec.applied(m.id) && seen.insert(m.id) {
            rec.push(|t| Event::Pending { t, msg: *m });
        }
    }
    // Produced, never applied, and neither in the queue nor the DLQ (nor dropped at its last
    // NACK): gone.
    let dropped = |id| {
        plan.target.drops()
            && plan
                .redelivery
                .final_nacks()
                .is_some_and(|n| rec.nacks(id) >= n)
    };
    for m in rec.produced() {
        if !rec.applied(m.id) && !seen.contains(&m.id) && !dropped(m.id) {
            rec.push(|t| Event::Discard {
                t,
                msg: m,
                reason: DiscardReason::BrokerCrash,
            });
        }
    }
    let origin = rec.origin();
    let events = rec.into_events();
    if let Some(own) = &plan.own {
        super::own::reported(own, &events, &sh_tails)?;
    }
    // The target's final rows, read back: what the checkers judge (the history's last applies)
    // must be what the database holds.
    if let Some(server) = db.as_mut().filter(|_| plan.own.is_none()) {
        let off = super::db::disagreements(&server.target_rows()?, &events);
        if !off.is_empty() {
            return Err(format!(
                "the database and the history disagree: {}",
                off.join("; ")
            ));
        }
    }
    // `--writes`: the table's final rows against the log's last write per key (a write the
    // trigger did not see, like a DELETE, makes them differ: said, not refused).
    if let Some((server, w)) = db.as_mut().zip(writes) {
        let rows: Vec<(u32, u32)> = server
            .written_rows(w)?
            .into_iter()
            .filter_map(|(k, s)| {
                let k = k?.trim().trim_start_matches('k').parse().ok()?;
                Some((k, s?.trim().parse().ok()?))
            })
            .collect();
        let off = super::db::disagreements(&rows, &events);
        if !off.is_empty() {
            eprintln!(
                "note: --writes {}: the table's final rows and the write log differ: {}",
                w.table,
                off.join("; ")
            );
        }
    }
    drop(db);
    let since = |i: Instant| i.saturating_duration_since(t0);
    let mut sent = vec![None; plan.schedule.len()];
    for (i, at) in written {
        sent[i] = Some(since(at));
    }
    let excused = outages(&faults, plan.producer_reconnect_delay);
    Ok(LiveRun {
        events,
        pacing: pacing(&plan.schedule, &sent, &excused),
        faults,
        t0_us: t0.saturating_duration_since(origin).as_micros() as u64,
    })
}

/// The fault driver: performs each action at its time, and says when each happened.
fn drive(
    sh: &Shared,
    plan: &Plan,
    brokers: &mut [Box<dyn Process>],
    mut db: Option<&mut super::postgres::Server>,
    t0: Instant,
) -> Result<Vec<FaultTiming>, String> {
    let mut out = Vec::new();
    for (at, a) in &plan.faults {
        if !sleep_until(sh, t0 + *at) {
            return Err("interrupted".into());
        }
        let since = |i: Instant| i.saturating_duration_since(t0);
        match a {
            Action::KillBroker(b) => {
                // The crash is recorded at the instant the SIGKILL goes out: in the history
                // before anything a client notices of it (a client's event is timed after it
                // noticed), without waiting for the recorder's lock first.
                let killed = Instant::now();
                brokers[*b as usize].sigkill();
                sh.rec.insert_at(killed, |t| Event::Crash {
                    t,
                    node: Node::Broker(*b),
                });
                brokers[*b as usize].kill();
                out.push(FaultTiming {
                    what: format!("broker {} killed", plan.brokers[*b as usize]),
                    planned: *at,
                    actual: Some(since(killed)),
                    ready: None,
                });
            }
            Action::RestartBroker(b) => {
                let started = Instant::now();
                let open = brokers[*b as usize].start(Duration::from_secs(60))?;
                sh.rec.push(|t| Event::Recover {
                    t,
                    node: Node::Broker(*b),
                });
                out.push(FaultTiming {
                    what: format!("broker {} restarted", plan.brokers[*b as usize]),
                    planned: *at,
                    actual: Some(since(started)),
                    ready: Some(since(open)),
                });
            }
            Action::DbDown | Action::DbUp => {
                let server = db.as_deref_mut().ok_or("db_outage without a database")?;
                let down = *a == Action::DbDown;
                // Recorded at the instant the refusal (or the admission) is sent; `ready` says
                // when the server had done it (the two statements' round trip).
                let sent = Instant::now();
                let done = if down {
                    server.refuse()?
                } else {
                    server.admit()?
                };
                sh.rec.insert_at(sent, |t| {
                    if down {
                        Event::Crash {
                            t,
                            node: Node::TargetDb,
                        }
                    } else {
                        Event::Recover {
                            t,
                            node: Node::TargetDb,
                        }
                    }
                });
                out.push(FaultTiming {
                    what: format!(
                        "target database {}",
                        if down {
                            "refuses connections"
                        } else {
                            "admits connections"
                        }
                    ),
                    planned: *at,
                    actual: Some(since(sent)),
                    ready: Some(since(done)),
                });
            }
            Action::PauseConsumer(c) | Action::ResumeConsumer(c) => {
                let pause = matches!(a, Action::PauseConsumer(_));
                let sent =
                    sh.signal_consumer(*c, if pause { libc::SIGSTOP } else { libc::SIGCONT });
                out.push(FaultTiming {
                    what: format!("consumer {c} {}", if pause { "paused" } else { "resumed" }),
                    planned: *at,
                    actual: sent.map(since),
                    ready: None,
                });
            }
            Action::CutConsumer(c) | Action::HealConsumer(c) => {
                let cut = matches!(a, Action::CutConsumer(_));
                let proxies = sh
                    .proxies
                    .get(*c as usize)
                    .ok_or("network_blip is staged for --consumer only")?;
                let now = Instant::now();
                if cut {
                    // Recorded at the cut, before anything the copy notices of it.
                    sh.rec.insert_at(now, |t| Event::Disconnect {
                        t,
                        node: Node::Consumer(*c),
                    });
                }
                for p in proxies {
                    if cut {
                        p.cut();
                    } else {
                        p.heal();
                    }
                }
                out.push(FaultTiming {
                    what: format!(
                        "consumer {c} {}",
                        if cut { "cut off" } else { "may reconnect" }
                    ),
                    planned: *at,
                    actual: Some(since(now)),
                    ready: None,
                });
            }
            Action::CrashConsumer { c, down } => {
                let crashed = sh.crash_consumer(*c, *down);
                out.push(FaultTiming {
                    what: format!("consumer {c} crashed"),
                    planned: *at,
                    actual: crashed.map(since),
                    ready: None,
                });
            }
        }
    }
    Ok(out)
}

/// What one live run gives.
pub struct LiveRun {
    /// The history.
    pub events: Vec<Event>,
    /// How the producers kept to the schedule.
    pub pacing: Pacing,
    /// When the faults happened.
    pub faults: Vec<FaultTiming>,
    /// Where the schedule's time 0 falls in the history's time (microseconds).
    pub t0_us: u64,
}

#[cfg(test)]
mod tests {
    //! The consumer against a fake transport: a thread on a loopback socket that speaks just
    //! enough STOMP (CONNECTED, RECEIPT, MESSAGE frames) and records the ACK and NACK frames.
    use super::super::stomp::parse;
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A fake broker for one connection: answers CONNECT and SUBSCRIBE, then sends `msgs`; returns
    /// the (command, id) of every ACK and NACK, once `want` of them arrived.
    fn fake_broker(
        msgs: Vec<Frame>,
        want: usize,
    ) -> (u16, std::thread::JoinHandle<Vec<(String, String)>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let (mut buf, mut out, mut chunk) = (Vec::new(), Vec::new(), [0u8; 4096]);
            loop {
                while let Some((f, used)) = parse(&buf).unwrap() {
                    buf.drain(..used);
                    match f.command.as_str() {
                        "CONNECT" => {
                            let r = Frame::new("CONNECTED").header("version", "1.2");
                            s.write_all(&r.encode()).unwrap();
                        }
                        "SUBSCRIBE" => {
                            let id = f.get("receipt").unwrap_or("").to_string();
                            let r = Frame::new("RECEIPT").header("receipt-id", id);
                            s.write_all(&r.encode()).unwrap();
                            for m in &msgs {
                                s.write_all(&m.encode()).unwrap();
                            }
                        }
                        "ACK" | "NACK" => {
                            let requeue = f
                                .get("requeue")
                                .map_or(String::new(), |r| format!(" requeue:{r}"));
                            let id = f.get("id").unwrap_or("");
                            out.push((f.command.clone(), format!("{id}{requeue}")));
                            if out.len() >= want {
                                return out;
                            }
                        }
                        _ => {}
                    }
                }
                let n = s.read(&mut chunk).unwrap();
                if n == 0 {
                    return out;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        });
        (port, h)
    }

    fn message(id: u64, poison: bool) -> Frame {
        let mut f = Frame::new("MESSAGE")
            .header("subscription", "0")
            .header("message-id", format!("m{id}"))
            .header("destination", QUEUE)
            .header("ack", format!("a{id}"))
            .header("ordsim-id", id.to_string())
            .header("ordsim-key", "0")
            .header("ordsim-seq", id.to_string());
        if poison {
            f = f.header("ordsim-poison", "1");
        }
        f.body("x")
    }

    /// Runs consumer 0 against the fake broker until it answered `want` frames.
    fn consume_with(
        redelivery: LiveRedelivery,
        want: usize,
    ) -> (Vec<(String, String)>, Vec<Event>) {
        consume_on(Target::ActiveMq, redelivery, want)
    }

    /// [`consume_with`] on `target`.
    fn consume_on(
        target: Target,
        redelivery: LiveRedelivery,
        want: usize,
    ) -> (Vec<(String, String)>, Vec<Event>) {
        let sc = crate::load_text(
            "t",
            "strategies = [\"competing\"]\n[workload]\nmessages = 3\nrate = \"10/s\"\nkeys = 1\n\
             [[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"\n",
        )
        .unwrap();
        let (port, fake) = fake_broker(
            vec![message(0, false), message(1, true), message(2, false)],
            want,
        );
        let plan = Plan {
            target,
            strategy: LiveStrategy::Competing,
            keys: 1,
            kind: sim::scenario::WorkloadKind::State,
            producers: 1,
            consumers: 1,
            prefetch: 3,
            persistent: true,
            brokers: vec!["a".into()],
            bridge_prefetch: 1000,
            producer_lists: vec![vec![0]],
            consumer_lists: vec![vec![0]],
            service: sc.consumers.service.0.clone(),
            ack_latency: Duration::ZERO,
            reconnect_delay: Duration::from_millis(100),
            producer_reconnect_delay: Duration::from_millis(100),
            schedule: Vec::new(),
            poison: Vec::new(),
            redelivery,
            faults: Vec::new(),
            drain_timeout: Duration::from_secs(5),
            seed: 1,
            db: None,
            own: None,
        };
        let sh = Shared::new(Recorder::new(1), 1, vec![port]);
        let frames = std::thread::scope(|s| {
            let c = s.spawn(|| consumer(&sh, 0, &plan));
            let frames = fake.join().unwrap();
            sh.stop_consumers.store(true, Ordering::SeqCst);
            c.join().unwrap();
            frames
        });
        (frames, sh.rec.into_events())
    }

    #[test]
    fn a_poison_message_is_nacked_and_the_others_acked() {
        let (frames, events) = consume_with(LiveRedelivery::Nack, 3);
        let mut got = frames.clone();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("ACK".to_string(), "a0".to_string()),
                ("ACK".to_string(), "a2".to_string()),
                ("NACK".to_string(), "a1".to_string()),
            ]
        );
        let applied: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::Apply { msg, .. } => Some(msg.id),
                _ => None,
            })
            .collect();
        assert_eq!(applied, vec![0, 2]);
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, Event::Rollback { msg, reason: FailReason::Poison, .. } if msg.id == 1))
                .count(),
            1
        );
    }

    #[test]
    fn rabbitmq_nacks_say_whether_to_requeue() {
        use super::super::rabbitmq::{QueueType, Topology};
        let t = Target::Rabbit(Topology {
            sac: false,
            delivery_limit: Some(3),
            ..Topology::sac_queue(QueueType::Quorum)
        });
        let nack = |r| {
            let (frames, _) = consume_on(t.clone(), r, 3);
            frames.into_iter().find(|(c, _)| c == "NACK").unwrap().1
        };
        // max_redeliveries = 0: dropped (or dead-lettered) by the queue, not requeued.
        assert_eq!(nack(LiveRedelivery::Nack), "a1 requeue:false");
        // A quorum queue's delivery limit: requeued (STOMP's default), counted by the queue.
        assert_eq!(nack(LiveRedelivery::Requeue(Some(3))), "a1");
        assert_eq!(LiveRedelivery::Requeue(Some(3)).final_nacks(), Some(4));
        assert_eq!(LiveRedelivery::Requeue(None).final_nacks(), None);
        // Without a dead-letter exchange the last NACK drops the message, recorded then.
        let (_, events) = consume_on(t.clone(), LiveRedelivery::Nack, 3);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Drop { msg, .. } if msg.id == 1)),
            "{events:?}"
        );
    }

    #[test]
    fn the_emulated_client_redelivery_holds_the_poison_message_then_nacks() {
        let r = LiveRedelivery::Client {
            delays: vec![Duration::from_millis(30)],
            unlimited: false,
        };
        let (frames, events) = consume_with(r, 3);
        assert!(
            frames.contains(&("NACK".to_string(), "a1".to_string())),
            "{frames:?}"
        );
        // Two deliveries, two failures, one client-side redelivery between them, 30 ms later.
        let rollbacks: Vec<Time> = events
            .iter()
            .filter_map(|e| match e {
                Event::Rollback { t, msg, .. } if msg.id == 1 => Some(*t),
                _ => None,
            })
            .collect();
        assert_eq!(rollbacks.len(), 2);
        assert!(rollbacks[1] - rollbacks[0] >= 30_000, "{rollbacks:?}");
        assert!(events.iter().any(|e| matches!(
            e,
            Event::Dispatch { msg, delivery: 2, redelivered: true, .. } if msg.id == 1
        )));
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::Redelivery { msg, blocking: true, .. } if msg.id == 1)));
        // The message behind it waited for the redelivery (the session holds it).
        let applied_2 = events
            .iter()
            .find_map(|e| match e {
                Event::Apply { t, msg, .. } if msg.id == 2 => Some(*t),
                _ => None,
            })
            .unwrap();
        assert!(applied_2 > rollbacks[1]);
    }
}
