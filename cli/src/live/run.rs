//! One live run: a broker process, producer and consumer threads following the scenario's
//! workload, the fault driver, the recorder, and the final read of what is left in the queue and
//! the dead-letter queue.

use super::broker::{Broker, TempDir, INTERRUPTED};
use super::stomp::{Conn, Frame};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::history::{DiscardReason, Event, MsgRef, Node};
use sim::scenario::Arrival;
use sim::time::Time;
use sim::Scenario;
use std::collections::{HashSet, VecDeque};
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
}

impl LiveStrategy {
    /// By scenario name.
    pub fn parse(name: &str) -> Option<LiveStrategy> {
        match name {
            "competing" => Some(LiveStrategy::Competing),
            "single" => Some(LiveStrategy::Single),
            "message_groups" => Some(LiveStrategy::MessageGroups),
            _ => None,
        }
    }
}

/// A fault, as the driver performs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// SIGKILL the broker.
    KillBroker,
    /// Start it again on the same store.
    RestartBroker,
    /// Consumer `c` dies now and comes back after `down`.
    CrashConsumer {
        /// Consumer.
        c: u32,
        /// Down for.
        down: Duration,
    },
}

/// What a run needs, resolved from the scenario and the seed.
pub struct Plan {
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
    /// Persistent messages.
    pub persistent: bool,
    /// Broker name.
    pub broker: String,
    /// Service time of one message.
    pub service: sim::dist::DurDist,
    /// Apply to ack.
    pub ack_latency: Duration,
    /// Before a reconnect.
    pub reconnect_delay: Duration,
    /// (time from start, producer, key), by time.
    pub schedule: Vec<(Duration, u32, u32)>,
    /// (time from start, action), by time.
    pub faults: Vec<(Duration, Action)>,
    /// The longest wait for the queue to drain after production and faults.
    pub drain_timeout: Duration,
    /// Seed of the service times.
    pub seed: u64,
}

/// The producers' schedule: `messages` arrivals at `rate` (Poisson or constant), keys uniform,
/// producers in turn.
pub fn schedule(sc: &Scenario, seed: u64) -> Vec<(Duration, u32, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6c69_7665);
    let rate = sc.workload.rate.as_per_sec();
    let producers = sc.producers.count.max(1);
    let mut t = 0f64;
    (0..sc.workload.messages)
        .map(|i| {
            t += match sc.workload.arrival {
                Arrival::Constant => 1.0 / rate,
                Arrival::Poisson => -(1.0 - rng.random::<f64>()).ln() / rate,
            };
            let key = rng.random_range(0..sc.workload.keys);
            (
                Duration::from_secs_f64(t),
                (i % producers as u64) as u32,
                key,
            )
        })
        .collect()
}

/// The history as it is recorded: events timed from the start, in recording order (so time
/// never goes backwards), messages numbered as they are produced.
pub struct Recorder {
    start: Instant,
    inner: Mutex<RecInner>,
}

struct RecInner {
    events: Vec<Event>,
    next_seq: Vec<u32>,
    produced: Vec<MsgRef>,
    applied: HashSet<u64>,
}

impl Recorder {
    /// Starts the clock.
    pub fn new(keys: u32) -> Recorder {
        Recorder {
            start: Instant::now(),
            inner: Mutex::new(RecInner {
                events: Vec::new(),
                next_seq: vec![0; keys as usize],
                produced: Vec::new(),
                applied: HashSet::new(),
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
        let mut g = self.lock();
        let t = self.now();
        let e = f(t);
        if let Event::Apply { msg, .. } = e {
            g.applied.insert(msg.id);
        }
        g.events.push(e);
    }

    /// A new message of `key` from `producer`: numbered and recorded.
    pub fn produce(&self, producer: u32, key: u32) -> MsgRef {
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
            poison: false,
        });
        msg
    }

    /// Messages produced and applied.
    pub fn progress(&self) -> (usize, usize) {
        let g = self.lock();
        (g.produced.len(), g.applied.len())
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

/// The SEND frame of `msg`.
pub fn send_frame(msg: MsgRef, strategy: LiveStrategy, persistent: bool) -> Frame {
    let mut f = Frame::new("SEND")
        .header("destination", QUEUE)
        .header("persistent", if persistent { "true" } else { "false" })
        .header("ordsim-id", msg.id.to_string())
        .header("ordsim-key", msg.key.to_string())
        .header("ordsim-seq", msg.seq.to_string());
    if strategy == LiveStrategy::MessageGroups {
        f = f.header("JMSXGroupID", format!("k{}", msg.key));
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

struct Shared {
    rec: Recorder,
    /// Producers and the fault driver are done: consumers finish and disconnect.
    stop_consumers: AtomicBool,
    /// Abandon everything (an error or Ctrl-C).
    abort: AtomicBool,
    /// Per consumer: crash now, down until.
    crash: Vec<Mutex<Option<Instant>>>,
    /// Held from numbering a message until the broker's receipt, so per-key order on the wire is
    /// production order whatever the producer count.
    produce_lock: Mutex<()>,
    /// Per consumer: its first subscription is registered (the broker's RECEIPT arrived).
    subscribed: Vec<AtomicBool>,
    port: u16,
}

impl Shared {
    fn aborted(&self) -> bool {
        self.abort.load(Ordering::SeqCst) || INTERRUPTED.load(Ordering::SeqCst)
    }
}

fn sleep_until(sh: &Shared, deadline: Instant) -> bool {
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

fn producer(sh: &Shared, p: u32, plan: &Plan, t0: Instant) {
    let mut conn: Option<Conn> = None;
    let mut first = true;
    let mut n = 0u64;
    for &(at, _, key) in plan.schedule.iter().filter(|(_, q, _)| *q == p) {
        if !sleep_until(sh, t0 + at) {
            return;
        }
        let _order = sh.produce_lock.lock().unwrap_or_else(|e| e.into_inner());
        let msg = sh.rec.produce(p, key);
        let frame = send_frame(msg, plan.strategy, plan.persistent);
        loop {
            if sh.aborted() {
                return;
            }
            if conn.is_none() {
                match Conn::connect(sh.port, Duration::from_secs(1)) {
                    Ok(c) => {
                        let failover = !first;
                        first = false;
                        sh.rec.push(|t| Event::Connect {
                            t,
                            node: Node::Producer(p),
                            broker: 0,
                            failover,
                        });
                        conn = Some(c);
                    }
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                }
            }
            let c = conn.as_mut().expect("connected");
            n += 1;
            let mut skipped = Vec::new();
            match c.send_with_receipt(
                frame.clone(),
                &format!("p{p}-{n}"),
                Duration::from_secs(5),
                &mut skipped,
            ) {
                Ok(()) => break,
                Err(_) => {
                    // No receipt: the broker may or may not have it. Send again (a JMS producer
                    // with a failover transport does the same): perhaps a duplicate.
                    sh.rec.push(|t| Event::SendFail {
                        t,
                        msg,
                        producer: p,
                    });
                    if let Some(c) = conn.take() {
                        c.abort();
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
    if let Some(c) = conn {
        c.disconnect();
    }
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
    loop {
        if sh.aborted() {
            return;
        }
        // A crash ordered while disconnected (the broker is down): the process dies now.
        if let Some(until) = crash_order(sh, c) {
            sh.rec.push(|t| Event::Crash {
                t,
                node: Node::Consumer(c),
            });
            if !sleep_until(sh, until) {
                return;
            }
            sh.rec.push(|t| Event::Recover {
                t,
                node: Node::Consumer(c),
            });
            failover = false;
        }
        let mut conn = match Conn::connect(sh.port, Duration::from_secs(1)).and_then(|mut k| {
            k.send(&subscribe_frame(plan.strategy, plan.prefetch).header("receipt", SUBSCRIBED))?;
            Ok(k)
        }) {
            Ok(k) => k,
            Err(_) => {
                if sh.stop_consumers.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(plan.reconnect_delay.max(Duration::from_millis(100)));
                continue;
            }
        };
        sh.rec.push(|t| Event::Connect {
            t,
            node: Node::Consumer(c),
            broker: 0,
            failover,
        });
        match consume(sh, c, plan, &mut conn, &sampler, &mut rng) {
            ConnEnd::Done => {
                conn.disconnect();
                return;
            }
            ConnEnd::Crashed => failover = false,
            ConnEnd::Lost => {
                conn.abort();
                failover = true;
                std::thread::sleep(plan.reconnect_delay);
            }
        }
    }
}

/// Takes a pending crash order of consumer `c`: the time it comes back.
fn crash_order(sh: &Shared, c: u32) -> Option<Instant> {
    sh.crash[c as usize]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
}

fn crash(sh: &Shared, c: u32, conn: &Conn, until: Instant) -> ConnEnd {
    // The process dies: its socket closes (the broker redelivers what was unacked), and
    // whatever it held (prefetched messages, acks not yet sent) is gone.
    conn.abort();
    sh.rec.push(|t| Event::Crash {
        t,
        node: Node::Consumer(c),
    });
    if !sleep_until(sh, until) {
        return ConnEnd::Done;
    }
    sh.rec.push(|t| Event::Recover {
        t,
        node: Node::Consumer(c),
    });
    ConnEnd::Crashed
}

fn consume(
    sh: &Shared,
    c: u32,
    plan: &Plan,
    conn: &mut Conn,
    sampler: &sim::dist::Sampler,
    rng: &mut ChaCha8Rng,
) -> ConnEnd {
    let mut acks: VecDeque<(Instant, String, MsgRef)> = VecDeque::new();
    loop {
        if sh.aborted() {
            return ConnEnd::Done;
        }
        if let Some(until) = crash_order(sh, c) {
            return crash(sh, c, conn, until);
        }
        let stopping = sh.stop_consumers.load(Ordering::SeqCst);
        if send_due_acks(sh, c, conn, &mut acks, stopping).is_err() {
            return ConnEnd::Lost;
        }
        if stopping {
            return ConnEnd::Done;
        }
        let wait = acks
            .front()
            .map(|(d, _, _)| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(20))
            .clamp(Duration::from_millis(1), Duration::from_millis(20));
        let f = match conn.recv(Some(wait)) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(_) => return ConnEnd::Lost,
        };
        if f.command != "MESSAGE" {
            if f.command == "ERROR" {
                return ConnEnd::Lost;
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
        sh.rec.push(|t| Event::Dispatch {
            t,
            msg,
            broker: 0,
            consumer: c,
            delivery: if redelivered { 2 } else { 1 },
            redelivered,
        });
        sh.rec.push(|t| Event::Start {
            t,
            msg,
            consumer: c,
        });
        let service = Duration::from_micros(sampler.sample(rng));
        let done = Instant::now() + service;
        // Serve, watching for a crash order: a crash before the apply abandons the message.
        // Acks of earlier applies fall due meanwhile and are sent on time: in the model an ack
        // reaches the broker `ack_latency` after its apply whatever the consumer does next.
        while Instant::now() < done {
            if sh.aborted() {
                return ConnEnd::Done;
            }
            if let Some(until) = crash_order(sh, c) {
                return crash(sh, c, conn, until);
            }
            if send_due_acks(sh, c, conn, &mut acks, false).is_err() {
                return ConnEnd::Lost;
            }
            let next_ack = acks.front().map_or(done, |(due, _, _)| (*due).min(done));
            std::thread::sleep(
                next_ack
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(5)),
            );
        }
        sh.rec.push(|t| Event::Apply {
            t,
            msg,
            consumer: c,
            state_seq: msg.seq,
        });
        acks.push_back((Instant::now() + plan.ack_latency, ack_id, msg));
    }
}

/// Sends the acks whose latency has passed (all of them when `all`), in order, recording each.
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
        if conn.send(&Frame::new("ACK").header("id", id)).is_err() {
            return Err(());
        }
        sh.rec.push(|t| Event::Ack {
            t,
            msg,
            consumer: c,
        });
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

/// One live run of `plan` against a fresh broker: the history.
pub fn run(plan: &Plan) -> Result<Vec<Event>, String> {
    let dir = TempDir::new(&plan.broker).map_err(|e| format!("temporary directory: {e}"))?;
    let mut broker = Broker::configure(&plan.broker, plan.persistent, dir.path())?;
    broker.start(Duration::from_secs(60))?;
    let sh = Arc::new(Shared {
        rec: Recorder::new(plan.keys),
        stop_consumers: AtomicBool::new(false),
        abort: AtomicBool::new(false),
        crash: (0..plan.consumers).map(|_| Mutex::new(None)).collect(),
        produce_lock: Mutex::new(()),
        subscribed: (0..plan.consumers)
            .map(|_| AtomicBool::new(false))
            .collect(),
        port: broker.port,
    });
    let result = std::thread::scope(|s| -> Result<(), String> {
        // Consumers attach in order, each once the previous one's subscription is registered, as
        // the model attaches them at time 0 in index order: the broker's consumer list (its
        // dispatch order, and which one `single`'s exclusive subscription picks) is then the
        // model's. The schedule and the faults start when all are attached.
        let mut consumers = Vec::new();
        for c in 0..plan.consumers {
            let sh = &*sh;
            consumers.push(s.spawn(move || consumer(sh, c, plan)));
            let deadline = Instant::now() + Duration::from_secs(10);
            while !sh.subscribed[c as usize].load(Ordering::SeqCst)
                && Instant::now() < deadline
                && !sh.aborted()
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let t0 = Instant::now();
        let producers: Vec<_> = (0..plan.producers)
            .map(|p| {
                let sh = &*sh;
                s.spawn(move || producer(sh, p, plan, t0))
            })
            .collect();
        let r = drive(&sh, plan, &mut broker, t0);
        for p in producers {
            let _ = p.join();
        }
        let r = r.and_then(|_| {
            if sh.aborted() {
                return Err("interrupted".into());
            }
            sh.rec.push(|t| Event::DrainStart { t });
            let deadline = Instant::now() + plan.drain_timeout;
            loop {
                let (produced, applied) = sh.rec.progress();
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
        for c in consumers {
            let _ = c.join();
        }
        r
    });
    if let Err(e) = result {
        broker.kill();
        return Err(e);
    }
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err("interrupted".into());
    }
    // What is left: the queue (pending) and the dead-letter queue, read from the broker.
    let left = drain(broker.port, QUEUE, Duration::from_millis(1500))?;
    let dead = drain(broker.port, DLQ, Duration::from_millis(500))?;
    broker.kill();
    let sh = Arc::try_unwrap(sh).map_err(|_| "threads still hold the run".to_string())?;
    let rec = sh.rec;
    let mut seen = HashSet::new();
    for m in &dead {
        if !rec.applied(m.id) && seen.insert(m.id) {
            rec.push(|t| Event::DeadLetter {
                t,
                msg: *m,
                broker: 0,
            });
        }
    }
    for m in &left {
        if !rec.applied(m.id) && seen.insert(m.id) {
            rec.push(|t| Event::Pending { t, msg: *m });
        }
    }
    // Produced, never applied, and neither in the queue nor the DLQ: gone.
    for m in rec.produced() {
        if !rec.applied(m.id) && !seen.contains(&m.id) {
            rec.push(|t| Event::Discard {
                t,
                msg: m,
                reason: DiscardReason::BrokerCrash,
            });
        }
    }
    Ok(rec.into_events())
}

/// The fault driver: performs each action at its time.
fn drive(sh: &Shared, plan: &Plan, broker: &mut Broker, t0: Instant) -> Result<(), String> {
    for (at, a) in &plan.faults {
        if !sleep_until(sh, t0 + *at) {
            return Err("interrupted".into());
        }
        match a {
            Action::KillBroker => {
                broker.kill();
                sh.rec.push(|t| Event::Crash {
                    t,
                    node: Node::Broker(0),
                });
            }
            Action::RestartBroker => {
                broker.start(Duration::from_secs(60))?;
                sh.rec.push(|t| Event::Recover {
                    t,
                    node: Node::Broker(0),
                });
            }
            Action::CrashConsumer { c, down } => {
                *sh.crash[*c as usize]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + *down);
            }
        }
    }
    Ok(())
}
