//! `resequencer`: competing consumers, each running the Apache Camel route of [ActiveMQ+Camel]
//! (joshdreagan, "Ordered Messaging With ActiveMQ & Camel", and its sample
//! `ordered-activemq-consumer`): JMS consumer -> aggregator (correlation = the group header, an
//! `ArrayList` aggregation strategy, a JDBC or in-memory aggregation repository) -> splitter ->
//! resequencer -> the business apply. Semantics from the Camel sources listed in docs/sources.md
//! (C1-C6) and the Camel sources it cites: `AggregateProcessor` (locking, completion, timeout map,
//! optimistic retry), `OptimisticLockRetryPolicy`, `JdbcAggregationRepository` before and after
//! CAMEL-7810, `ResequencerEngine` / `StreamResequencer`, `Resequencer` (batch, `BatchSender`).
//!
//! # The model
//!
//! - **Dispatch**: round-robin over the consumers with free prefetch (ActiveMQ's default), as
//!   `competing`. Each consumer is one route instance (one JVM): its own aggregator (lock,
//!   timeout checker, single-threaded completion executor), its own resequencer and apply thread.
//! - **Aggregation** = the consumer's service time (`get`, aggregate, `add` or `remove` in the
//!   repository). `begin` reads the group's aggregate; `handle` writes back what it read plus
//!   this message, and the message is acked upstream ([`Outcome::Buffered`]): from then on only
//!   the repository (after completion: the resequencer) holds it. The target database is not
//!   touched, so a target outage does not fail this step. A poison message fails here
//!   ([`HandlerCtx::validate`]: the route cannot parse it to evaluate its correlation and sequence
//!   expressions) and rolls back as usual. A message without the group header fails with Camel's
//!   "Invalid correlation key" and rolls back (it ends in the DLQ), unless
//!   `ignore_invalid_correlation_keys` (then it is acked and dropped: lost). An instance's own
//!   timeout checker waits for its aggregation (they share the aggregator's lock); other instances
//!   do not.
//! - **Repository**. `persistent = true` (default): one `JdbcAggregationRepository` shared by all
//!   instances. `repository = "unversioned"` is the one before CAMEL-7810: `add` checks whether the
//!   row is present *now*, then UPDATEs it by key alone (or INSERTs it), and `remove` (on
//!   completion) DELETEs by key: another instance's additions since our read are overwritten or
//!   deleted, silently lost (and a read whose row was completed meanwhile is re-inserted: its
//!   messages are applied twice). `repository = "versioned"` (default: Camel 3.4+, and the
//!   sample's custom repository) has a version column: a stale UPDATE, duplicate INSERT or stale
//!   DELETE fails with an optimistic-locking exception. With `optimistic_locking = true` (the
//!   aggregator's `optimisticLocking()`) the aggregation is retried in the route, re-reading the
//!   group, after `retry_delay << attempt` capped at `max_retry_delay` (Camel's policy computes
//!   100, 200, 400, 800, 1000 ms...; the JMS thread waits, the message stays unacked); with
//!   `false` the exception fails the exchange (the sample throws a plain `RuntimeException`) and
//!   the message rolls back to the broker. Versions restart at 1 on INSERT, as in the table. The
//!   stale DELETE is checked as since CAMEL-24048 (before it, a stale `remove` went unnoticed: not
//!   modelled). `persistent = false`: a `MemoryAggregationRepository` per instance: each consumer
//!   aggregates only what it received (a group is split across the instances), nothing is lost to
//!   concurrency, everything dies with the process.
//! - **Completion**: `completion_size` (size read + 1) and/or `completion_timeout` (inactivity).
//!   Each instance keeps its own timeout map, re-armed only by its own adds and checked every
//!   `completion_timeout_checker_interval`; the instances' checkers run out of phase (instance `i`
//!   of `n` started `i/n` of an interval late). So in a cluster a group completes as soon as the
//!   timeout of *any* instance that added to it expires, with whatever the repository holds then.
//!   Completing by size clears only the completing instance's entry. A restarted instance re-arms
//!   an entry for every group of a persistent repository. With fixed-size correlation groups
//!   (`[workload] group_size = n`, an order and its lines) the correlation expression is the order
//!   (key, seq / n) and the completion size n, whatever `completion_size` says (Camel's
//!   `completionSizeExpression`, which takes precedence over `completionSize` in
//!   `AggregateProcessor.isCompleted`: C8): an order a line of which never arrives (dead-lettered)
//!   never completes by size, and stays in the repository unless the timeout releases it.
//! - **Resequencer**: the completed aggregate is split, in aggregation order, into the
//!   resequencer of the instance that completed it (`resequencer_scope = "route"`, default: what
//!   deploying the post's route on every consumer gives), or into one shared resequencer
//!   (`"single"`: an idealised singleton that never fails, e.g. a dedicated instance behind a
//!   queue). `resequencer = "stream"` (default) follows `ResequencerEngine`: an element is ready
//!   when it is the immediate successor of the last delivered seq of its key, or its immediate
//!   predecessor is waiting, or its `timeout` fired (so the first element of a key always waits
//!   `timeout`); only the lowest element of a key goes out, so a timed-out gap is skipped and the
//!   missing seq, arriving later, waits its own timeout and is delivered out of order
//!   (`reject_old = false`) or rejected with `MessageRejectedException` (`reject_old = true`: lost).
//!   One delivery thread per resequencer wakes on each insert, else every
//!   `delivery_attempt_interval`: a timed-out element waits for one of them. At `capacity`
//!   elements the inserting (completion) thread waits. `resequencer = "batch"` follows
//!   `BatchSender`: the first `batch_size` queued elements are sorted and sent as soon as that many
//!   are queued, or after `batch_timeout` without a new one (the wait restarts after each send);
//!   no order across batches (`Resequencer.BatchSender` drains into a fresh `TreeSet` and empties
//!   it as it sends; nothing remembers the last sent element). So with several consumers an
//!   element overtaken on its way (a slower consumer, an optimistic-lock retry, a network bridge,
//!   an aggregate that completed with its successor) misses its batch and is sent after its
//!   successors: the route reorders without any fault (the parameter's warning; issue 39). Real
//!   Camel, not a flaw of the model: the [ActiveMQ+Camel] sample's `<resequence>` is this batch
//!   mode. Simplification: elements are ordered by (key, seq) with a last
//!   delivered seq per key, as if each key had its own `ResequencerEngine` (one real engine on a
//!   per-key seq would take equal seqs of different keys for duplicates; one on (key, seq) keeps a
//!   single last-delivered element and lets a waiting key block the others).
//! - **Apply**: the delivery thread applies one element at a time ([`Control::apply`], worker =
//!   the consumer index for `"route"`, `u32::MAX - 1` for `"single"`), each taking `apply_time`
//!   (default 0: the cost is in the consumers' service time). While the target is down the
//!   route's error handler retries every `apply_redelivery_delay`, holding the thread and all
//!   behind it; `apply_redeliveries = -1` (default) retries forever, `0` is Camel's
//!   `DefaultErrorHandler` default: the element is logged and lost.
//! - **Crash** of a consumer: what only its memory held is lost: its `MemoryAggregationRepository`,
//!   and with `"route"` its resequencer and the apply in progress (acked upstream, and confirmed in
//!   the JDBC repository once handed to the resequencer, so lost even with `persistent = true`).
//!   The JDBC repository survives.
//!
//! What it shows: one resequencer behind competing consumers keeps order at their throughput when
//! its gap timeout exceeds the real disorder (aggregation delay, stuck broker messages), at the
//! cost of that timeout in latency; a shorter timeout reorders (or loses, with `reject_old`); the
//! unversioned JDBC repository loses acked messages (CAMEL-7810); in-memory state dies with its
//! consumer; and the route deployed on every consumer resequences only within an aggregate, so
//! consecutive aggregates of a key, completed on different instances, reorder; the batch
//! resequencer cannot repair disorder that straddles its batches.
//!
//! Parameters (`[strategy.resequencer]`, defaults): `completion_size = 10`, `completion_timeout =
//! "1s"` ("0s": none; at least one of the two), `completion_timeout_checker_interval = "1s"`,
//! `persistent = true`, `repository = "versioned"`, `optimistic_locking = true`, `retry_delay =
//! "50ms"`, `max_retry_delay = "1s"`, `resequencer = "stream"`, `resequencer_scope = "route"`,
//! `capacity = 1000`, `timeout = "1s"`, `delivery_attempt_interval = "1s"`, `reject_old = false`,
//! `batch_size = 100`, `batch_timeout = "1s"`, `apply_time = "0s"`, `apply_redeliveries = -1`,
//! `apply_redelivery_delay = "1s"`, `ignore_invalid_correlation_keys = false`.

use serde::{Deserialize, Serialize};
use sim::history::FailReason;
use sim::strategy::{
    Begin, Control, DispatchCtx, Handler, HandlerCtx, MsgView, Outcome, Select, Strategy,
    WorldChange,
};
use sim::time::{Dur, Time};
use std::collections::{BTreeMap, VecDeque};

const NONE: Time = Time::MAX;

/// The aggregation repository's update semantics.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Repository {
    /// With a version column (CAMEL-7810, Camel 3.4+; the sample's custom repository).
    #[default]
    Versioned,
    /// Before CAMEL-7810: UPDATE and DELETE by key only (lost updates).
    Unversioned,
}

/// The resequencer algorithm.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `ResequencerEngine`: gap timeouts.
    #[default]
    Stream,
    /// `Resequencer` (batch): sort each batch.
    Batch,
}

/// Where the resequencer runs.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// In each route instance (consumer), fed by the aggregates that instance completed.
    #[default]
    Route,
    /// One shared resequencer that never fails.
    Single,
}

/// `[strategy.resequencer]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResequencerParams {
    /// Aggregator `completionSize` (0: none).
    pub completion_size: u32,
    /// Aggregator `completionTimeout`, inactivity (0: none).
    pub completion_timeout: Dur,
    /// How often each route instance's timeout checker runs.
    pub completion_timeout_checker_interval: Dur,
    /// JDBC repository shared by all instances (true) or one in-memory repository per instance.
    pub persistent: bool,
    /// Versioned or not (a JDBC repository only).
    pub repository: Repository,
    /// The aggregator retries on an optimistic-locking failure (else the exchange fails).
    pub optimistic_locking: bool,
    /// `OptimisticLockRetryPolicy.retryDelay` (doubled per attempt, from `<< 1`).
    pub retry_delay: Dur,
    /// `OptimisticLockRetryPolicy.maximumRetryDelay` (0: no cap).
    pub max_retry_delay: Dur,
    /// Stream or batch resequencer.
    pub resequencer: Mode,
    /// One resequencer per route instance or a single one.
    pub resequencer_scope: Scope,
    /// Stream: capacity (the inserting thread waits at this size).
    pub capacity: u32,
    /// Stream: gap timeout.
    pub timeout: Dur,
    /// Stream: the delivery thread's polling interval.
    pub delivery_attempt_interval: Dur,
    /// Stream: reject an element older than the last delivered one (it is lost).
    pub reject_old: bool,
    /// Batch: batch size.
    pub batch_size: u32,
    /// Batch: send after this long without a new element.
    pub batch_timeout: Dur,
    /// How long one apply takes on the delivery thread.
    pub apply_time: Dur,
    /// Error-handler redeliveries of a failed apply (-1: forever; 0: none, the element is lost).
    pub apply_redeliveries: i64,
    /// Delay between apply redeliveries.
    pub apply_redelivery_delay: Dur,
    /// Ack and drop a message without the group header instead of failing it.
    pub ignore_invalid_correlation_keys: bool,
}

impl Default for ResequencerParams {
    fn default() -> Self {
        ResequencerParams {
            completion_size: 10,
            completion_timeout: Dur::from_secs(1),
            completion_timeout_checker_interval: Dur::from_secs(1),
            persistent: true,
            repository: Repository::Versioned,
            optimistic_locking: true,
            retry_delay: Dur::from_millis(50),
            max_retry_delay: Dur::from_secs(1),
            resequencer: Mode::Stream,
            resequencer_scope: Scope::Route,
            capacity: 1000,
            timeout: Dur::from_secs(1),
            delivery_attempt_interval: Dur::from_secs(1),
            reject_old: false,
            batch_size: 100,
            batch_timeout: Dur::from_secs(1),
            apply_time: Dur::ZERO,
            apply_redeliveries: -1,
            apply_redelivery_delay: Dur::from_secs(1),
            ignore_invalid_correlation_keys: false,
        }
    }
}

/// One group's row in an aggregation repository.
#[derive(Debug, Default)]
struct AggRow {
    exists: bool,
    version: u64,
    /// The aggregated messages, in aggregation order.
    contents: Vec<MsgView>,
}

/// What a consumer read of its group at service start.
#[derive(Debug, Default)]
struct Snap {
    exists: bool,
    version: u64,
    contents: Vec<MsgView>,
}

/// An element waiting in a stream resequencer.
#[derive(Clone, Copy, Debug)]
struct Elem {
    view: MsgView,
    /// When its timeout fires (NONE: not scheduled, or timed out: ready).
    deadline: Time,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ApplyPhase {
    /// The apply is running until `apply_wake`.
    Working,
    /// Waiting for the error handler's redelivery at `apply_wake`.
    Backoff,
}

/// A resequencer and its delivery (apply) thread.
#[derive(Debug)]
struct Host {
    up: bool,
    // Stream.
    seqs: Vec<VecDeque<Elem>>,
    last: Vec<Option<u32>>,
    size: usize,
    /// Inserts waiting for capacity.
    waiting: VecDeque<MsgView>,
    /// Keys whose lowest element may be ready.
    dirty: VecDeque<u32>,
    is_dirty: Vec<bool>,
    /// When the delivery thread last started waiting.
    idle_since: Time,
    tick_at: Time,
    // Batch.
    queue: VecDeque<MsgView>,
    out: VecDeque<MsgView>,
    batch_deadline: Time,
    // The apply in progress.
    applying: Option<(MsgView, u32, ApplyPhase)>,
    apply_wake: Time,
}

impl Host {
    fn new(keys: usize) -> Self {
        Host {
            up: true,
            seqs: (0..keys).map(|_| VecDeque::new()).collect(),
            last: vec![None; keys],
            size: 0,
            waiting: VecDeque::new(),
            dirty: VecDeque::new(),
            is_dirty: vec![false; keys],
            idle_since: 0,
            tick_at: NONE,
            queue: VecDeque::new(),
            out: VecDeque::new(),
            batch_deadline: NONE,
            applying: None,
            apply_wake: NONE,
        }
    }

    fn mark_dirty(&mut self, key: u32) {
        if !self.is_dirty[key as usize] {
            self.is_dirty[key as usize] = true;
            self.dirty.push_back(key);
        }
    }
}

// Wake tokens: kind in the top 4 bits, host or consumer in bits 32..60, key in the low 32.
const W_AGG: u64 = 1;
const W_RESEQ: u64 = 2;
const W_TICK: u64 = 3;
const W_BATCH: u64 = 4;
const W_APPLY: u64 = 5;

fn token(kind: u64, who: u32, key: u32) -> u64 {
    (kind << 60) | ((who as u64) << 32) | key as u64
}

/// The optimistic-locking aggregation failed (stale version, duplicate key).
struct Conflict;

/// Competing consumers running aggregator -> splitter -> resequencer.
#[derive(Debug)]
pub struct Resequencer {
    p: ResequencerParams,
    consumers: usize,
    /// `[workload] group_size` (0: none): the correlation expression is the order (key, seq /
    /// group_size) and the completion size this (Camel's `completionSizeExpression`).
    group_size: u32,
    /// Correlations seen so far: the key, or with groups the order's (key, group) numbered in
    /// the order first aggregated ([`Resequencer::corr`]).
    corrs: usize,
    corr_of: BTreeMap<(u32, u32), u32>,
    /// Round-robin dispatch, as `competing`.
    dispatch: crate::Competing,
    /// Repository rows: by correlation (persistent) or as [`Resequencer::fire_index`] (in
    /// memory).
    rows: Vec<AggRow>,
    snap: Vec<Snap>,
    /// By [`Resequencer::fire_index`]: when that instance's timeout checker completes the group.
    agg_fire: Vec<Time>,
    /// When each consumer (its timeout checker) started.
    started: Vec<Time>,
    /// Consumer is inside its aggregation (holding the aggregator's lock, which its own timeout
    /// checker needs too), and the evictions that wait for it.
    aggregating: Vec<bool>,
    deferred: Vec<Vec<u32>>,
    hosts: Vec<Host>,
    target_up: bool,
    /// Copies of each message in our custody (a redelivered message can be aggregated twice).
    copies: BTreeMap<u64, u32>,
    scratch: Vec<MsgView>,
    used: Vec<bool>,
}

impl Resequencer {
    /// A new instance.
    pub fn new(brokers: usize, consumers: usize, keys: usize, p: ResequencerParams) -> Self {
        let rows = if p.persistent { keys } else { keys * consumers };
        let hosts = match p.resequencer_scope {
            Scope::Route => consumers,
            Scope::Single => 1,
        };
        Resequencer {
            consumers,
            group_size: 0,
            corrs: keys,
            corr_of: BTreeMap::new(),
            dispatch: crate::Competing::new(brokers),
            rows: (0..rows).map(|_| AggRow::default()).collect(),
            snap: (0..consumers).map(|_| Snap::default()).collect(),
            agg_fire: vec![NONE; consumers * keys],
            // The instances started at different times: their timeout checkers run out of phase.
            started: (0..consumers as u64)
                .map(|c| c * p.completion_timeout_checker_interval.micros() / consumers as u64)
                .collect(),
            aggregating: vec![false; consumers],
            deferred: vec![Vec::new(); consumers],
            hosts: (0..hosts).map(|_| Host::new(keys)).collect(),
            target_up: true,
            copies: BTreeMap::new(),
            scratch: Vec::new(),
            used: Vec::new(),
            p,
        }
    }

    /// With fixed-size correlation groups of `n` (`[workload] group_size`; 0: none): the
    /// aggregator correlates on the order, not the key, and completes an order at `n` messages
    /// (a `completionSizeExpression` reading the order's size, which takes precedence over
    /// `completion_size`).
    pub fn with_groups(mut self, n: u32) -> Self {
        if n > 0 {
            self.group_size = n;
            self.corrs = 0;
            self.rows.clear();
            self.agg_fire.clear();
        }
        self
    }

    /// `msg`'s correlation: its key, or with groups its order, numbered on first sight (new
    /// repository rows and timeout entries for it).
    fn corr(&mut self, msg: &MsgView) -> u32 {
        if self.group_size == 0 {
            return msg.key;
        }
        let next = self.corrs as u32;
        let c = *self
            .corr_of
            .entry((msg.key, msg.seq / self.group_size))
            .or_insert(next);
        if c == next {
            self.corrs += 1;
            let rows = if self.p.persistent { 1 } else { self.consumers };
            self.rows.extend((0..rows).map(|_| AggRow::default()));
            self.agg_fire.extend((0..self.consumers).map(|_| NONE));
        }
        c
    }

    /// The completion size: the order's size with groups, else `completion_size` (0: none).
    fn completion_size(&self) -> u32 {
        if self.group_size > 0 {
            self.group_size
        } else {
            self.p.completion_size
        }
    }

    fn row_index(&self, c: u32, corr: u32) -> usize {
        if self.p.persistent {
            corr as usize
        } else {
            self.fire_index(c, corr)
        }
    }

    /// Index of consumer `c`'s entry for `corr` (its timeout; its in-memory row): consumer *
    /// keys + key without groups, where the keys are known at the start; with groups, which
    /// appear as they are produced, correlation * consumers + consumer.
    fn fire_index(&self, c: u32, corr: u32) -> usize {
        if self.group_size == 0 {
            c as usize * self.corrs + corr as usize
        } else {
            corr as usize * self.consumers + c as usize
        }
    }

    fn host_of(&self, c: u32) -> usize {
        match self.p.resequencer_scope {
            Scope::Route => c as usize,
            Scope::Single => 0,
        }
    }

    fn worker(&self, h: usize) -> u32 {
        match self.p.resequencer_scope {
            Scope::Route => h as u32,
            Scope::Single => u32::MAX - 1,
        }
    }

    /// A new copy of `m` enters our custody.
    fn hold(&mut self, m: MsgView) {
        *self.copies.entry(m.id).or_insert(0) += 1;
    }

    /// A copy of `m` leaves our custody; `applied`: through an apply (else it is dropped, and the
    /// message is lost if that was its last copy).
    fn release(&mut self, m: MsgView, applied: bool, ctl: &mut Control) {
        let last = match self.copies.get_mut(&m.id) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                self.copies.remove(&m.id);
                true
            }
            None => true,
        };
        if !applied && last {
            ctl.discard(m);
        }
    }

    /// `get`: consumer `c` reads its group's aggregate (`corr`: [`Resequencer::corr`]).
    fn read(&mut self, c: u32, corr: u32) {
        let idx = self.row_index(c, corr);
        let row = &self.rows[idx];
        let s = &mut self.snap[c as usize];
        s.exists = row.exists;
        s.version = row.version;
        s.contents.clear();
        if row.exists {
            s.contents.extend_from_slice(&row.contents);
        }
    }

    fn retry_delay(&self, attempt: u32) -> Time {
        let d = self.p.retry_delay.micros();
        let d = if attempt >= 63 || d.leading_zeros() < attempt {
            Time::MAX
        } else {
            d << attempt
        };
        match self.p.max_retry_delay.micros() {
            0 => d,
            cap => d.min(cap),
        }
    }

    /// The aggregation step of `msg` at consumer `c`, from the snapshot read: aggregate, then
    /// `add` (not complete) or `remove` + hand over (complete).
    fn aggregate(
        &mut self,
        now: Time,
        c: u32,
        msg: MsgView,
        ctl: &mut Control,
    ) -> Result<(), Conflict> {
        let corr = self.corr(&msg);
        let idx = self.row_index(c, corr);
        let (s_exists, s_version, s_len) = {
            let s = &self.snap[c as usize];
            (s.exists, s.version, s.contents.len())
        };
        let size = s_len as u64 + 1;
        let n = self.completion_size();
        let complete = n > 0 && size >= n as u64;
        let row = &self.rows[idx];
        if self.p.persistent && self.p.repository == Repository::Versioned {
            let same = row.exists && row.version == s_version;
            let stale = if s_exists {
                !same
            } else {
                row.exists && !complete
            };
            if stale {
                return Err(Conflict);
            }
        }
        self.hold(msg);
        let ci = self.fire_index(c, corr);
        if complete {
            // Camel removes the group only if it read one (`original != null`).
            if s_exists {
                self.write(idx, c, msg, false, ctl);
            } else {
                self.scratch.clear();
                self.scratch.push(msg);
            }
            self.agg_fire[ci] = NONE;
            let h = self.host_of(c);
            self.hand_over(h, now, ctl);
        } else {
            self.write(idx, c, msg, true, ctl);
            self.arm_timeout(c, corr, now, ctl);
        }
        Ok(())
    }

    /// Writes snapshot + `msg` over row `idx` (`keep`: UPDATE if present now, else INSERT) or
    /// deletes it (`!keep`: the new contents are left in `scratch` for the resequencer). What the
    /// row held that the snapshot did not is overwritten: lost. What the snapshot held that the row
    /// no longer does (completed meanwhile by someone else) is a new copy.
    fn write(&mut self, idx: usize, c: u32, msg: MsgView, keep: bool, ctl: &mut Control) {
        let mut old = std::mem::take(&mut self.rows[idx].contents);
        let was = self.rows[idx].exists;
        if !was {
            old.clear();
        }
        let snap = std::mem::take(&mut self.snap[c as usize].contents);
        self.used.clear();
        self.used.resize(old.len(), false);
        for &n in &snap {
            match (0..old.len()).find(|&j| !self.used[j] && old[j].id == n.id) {
                Some(j) => self.used[j] = true,
                None => self.hold(n),
            }
        }
        for (j, &m) in old.iter().enumerate() {
            if !self.used[j] {
                self.release(m, false, ctl);
            }
        }
        old.clear();
        self.scratch.clear();
        self.scratch.extend_from_slice(&snap);
        self.scratch.push(msg);
        let row = &mut self.rows[idx];
        if keep {
            old.extend_from_slice(&self.scratch);
            row.version = if was { row.version + 1 } else { 1 };
            row.exists = true;
        } else {
            row.exists = false;
        }
        row.contents = old;
        self.snap[c as usize].contents = snap;
    }

    /// Consumer `c` added to the group `corr`: its timeout map entry is (re)set.
    fn arm_timeout(&mut self, c: u32, corr: u32, now: Time, ctl: &mut Control) {
        let t = self.p.completion_timeout.micros();
        if t == 0 {
            return;
        }
        let deadline = now.saturating_add(t);
        let start = self.started[c as usize];
        let i = self.p.completion_timeout_checker_interval.micros().max(1);
        let fire = if deadline <= start {
            start
        } else {
            start + (deadline - start).div_ceil(i) * i
        };
        let ci = self.fire_index(c, corr);
        self.agg_fire[ci] = fire;
        ctl.wake_at(fire, token(W_AGG, c, corr));
    }

    /// Consumer `c`'s timeout checker found the entry of group `corr` expired: it completes
    /// whatever the repository holds for the group.
    fn on_agg_timeout(&mut self, c: u32, corr: u32, now: Time, ctl: &mut Control) {
        let ci = self.fire_index(c, corr);
        if self.agg_fire[ci] != now {
            return;
        }
        self.agg_fire[ci] = NONE;
        if self.aggregating[c as usize] {
            // The checker waits for the aggregator's lock.
            self.deferred[c as usize].push(corr);
            return;
        }
        self.evict(c, corr, now, ctl);
    }

    /// `onEviction`: complete the group with what the repository holds.
    fn evict(&mut self, c: u32, corr: u32, now: Time, ctl: &mut Control) {
        let idx = self.row_index(c, corr);
        if !self.rows[idx].exists {
            return; // completed by someone else already ("eviction stolen")
        }
        let row = &mut self.rows[idx];
        row.exists = false;
        self.scratch.clear();
        self.scratch.append(&mut row.contents);
        let h = self.host_of(c);
        self.hand_over(h, now, ctl);
    }

    /// The completed aggregate in `scratch` is split into host `h`'s resequencer.
    fn hand_over(&mut self, h: usize, now: Time, ctl: &mut Control) {
        let items = std::mem::take(&mut self.scratch);
        for &e in &items {
            if !self.hosts[h].up {
                self.release(e, false, ctl);
                continue;
            }
            match self.p.resequencer {
                Mode::Stream => {
                    let host = &mut self.hosts[h];
                    if !host.waiting.is_empty() || host.size >= self.p.capacity as usize {
                        host.waiting.push_back(e);
                    } else {
                        self.insert_stream(h, e, now, ctl);
                    }
                }
                Mode::Batch => {
                    self.hosts[h].queue.push_back(e);
                    let host = &self.hosts[h];
                    if host.applying.is_none()
                        && host.out.is_empty()
                        && host.queue.len() < self.p.batch_size as usize
                    {
                        // The sender waits for more, or for the batch timeout.
                        let at = now.saturating_add(self.p.batch_timeout.micros());
                        self.hosts[h].batch_deadline = at;
                        ctl.wake_at(at, token(W_BATCH, h as u32, 0));
                    }
                }
            }
            self.pump(h, now, ctl);
        }
        let mut items = items;
        items.clear();
        self.scratch = items;
    }

    /// `ResequencerEngine.insert`.
    fn insert_stream(&mut self, h: usize, e: MsgView, now: Time, ctl: &mut Control) {
        let k = e.key as usize;
        let timeout = self.p.timeout.micros();
        let host = &mut self.hosts[h];
        let last = host.last[k];
        if self.p.reject_old && last.is_some_and(|l| e.seq < l) {
            // MessageRejectedException: the split part fails; the message is gone.
            self.release(e, false, ctl);
            return;
        }
        let v = &mut host.seqs[k];
        let i = match v.binary_search_by_key(&e.seq, |x| x.view.seq) {
            Ok(_) => {
                // The same message again (a duplicate copy): the sorted set keeps the first.
                self.release(e, false, ctl);
                return;
            }
            Err(i) => i,
        };
        v.insert(
            i,
            Elem {
                view: e,
                deadline: NONE,
            },
        );
        if let Some(nx) = v.get_mut(i + 1) {
            if nx.view.seq == e.seq + 1 {
                nx.deadline = NONE;
            }
        }
        let successor_of_last = e.seq > 0 && last == Some(e.seq - 1);
        let has_predecessor = i > 0 && v[i - 1].view.seq + 1 == e.seq;
        if !successor_of_last && !has_predecessor {
            let at = now.saturating_add(timeout);
            v[i].deadline = at;
            ctl.wake_at(at, token(W_RESEQ, h as u32, e.key));
        }
        host.size += 1;
        host.mark_dirty(e.key);
    }

    /// `deliverNext`: the lowest element of a dirty key, if it is ready.
    fn next_ready(&mut self, h: usize) -> Option<MsgView> {
        let host = &mut self.hosts[h];
        while let Some(&k) = host.dirty.front() {
            let v = &mut host.seqs[k as usize];
            if v.front().is_some_and(|x| x.deadline == NONE) {
                let e = v.pop_front().expect("non-empty").view;
                host.last[k as usize] = Some(e.seq);
                host.size -= 1;
                return Some(e);
            }
            host.dirty.pop_front();
            host.is_dirty[k as usize] = false;
        }
        None
    }

    /// Runs host `h`'s delivery thread as far as it can go now.
    fn pump(&mut self, h: usize, now: Time, ctl: &mut Control) {
        loop {
            if self.hosts[h].applying.is_some() || !self.hosts[h].up {
                return;
            }
            let next = match self.p.resequencer {
                Mode::Stream => {
                    while self.hosts[h].size < self.p.capacity as usize {
                        let Some(e) = self.hosts[h].waiting.pop_front() else {
                            break;
                        };
                        self.insert_stream(h, e, now, ctl);
                    }
                    self.next_ready(h)
                }
                Mode::Batch => {
                    let bs = self.p.batch_size as usize;
                    let host = &mut self.hosts[h];
                    if host.out.is_empty() && host.queue.len() >= bs {
                        self.drain_batch(h, ctl);
                    }
                    self.hosts[h].out.pop_front()
                }
            };
            match next {
                Some(e) => self.start_apply(h, e, now, ctl),
                None => {
                    let host = &mut self.hosts[h];
                    match self.p.resequencer {
                        Mode::Stream => {
                            host.idle_since = now;
                            host.tick_at = NONE;
                        }
                        Mode::Batch => {
                            if host.queue.is_empty() {
                                host.batch_deadline = NONE;
                            } else if host.batch_deadline == NONE {
                                // (A deadline that is set is still ahead: it is set only while
                                // the thread is idle, and the send it times clears it.)
                                let at = now.saturating_add(self.p.batch_timeout.micros());
                                host.batch_deadline = at;
                                ctl.wake_at(at, token(W_BATCH, h as u32, 0));
                            }
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Drains up to `batch_size` queued elements into the sorted batch to send.
    fn drain_batch(&mut self, h: usize, ctl: &mut Control) {
        let bs = self.p.batch_size as usize;
        let host = &mut self.hosts[h];
        host.batch_deadline = NONE;
        let n = bs.min(host.queue.len());
        let mut batch: Vec<MsgView> = host.queue.drain(..n).collect();
        batch.sort_by_key(|m| (m.key, m.seq));
        let mut prev: Option<(u32, u32)> = None;
        for m in batch {
            if prev == Some((m.key, m.seq)) {
                // allowDuplicates = false: the TreeSet keeps one.
                self.release(m, false, ctl);
                continue;
            }
            prev = Some((m.key, m.seq));
            self.hosts[h].out.push_back(m);
        }
    }

    fn start_apply(&mut self, h: usize, e: MsgView, now: Time, ctl: &mut Control) {
        self.hosts[h].applying = Some((e, 0, ApplyPhase::Working));
        self.begin_attempt(h, now, ctl);
    }

    fn begin_attempt(&mut self, h: usize, now: Time, ctl: &mut Control) {
        let t = self.p.apply_time.micros();
        if t == 0 {
            self.finish_attempt(h, now, ctl);
        } else {
            let host = &mut self.hosts[h];
            if let Some(a) = host.applying.as_mut() {
                a.2 = ApplyPhase::Working;
            }
            host.apply_wake = now + t;
            ctl.wake_at(now + t, token(W_APPLY, h as u32, 0));
        }
    }

    fn finish_attempt(&mut self, h: usize, now: Time, ctl: &mut Control) {
        let Some((e, fails, _)) = self.hosts[h].applying else {
            return;
        };
        if self.target_up {
            self.hosts[h].applying = None;
            ctl.apply(e, e.seq, self.worker(h));
            self.release(e, true, ctl);
            return;
        }
        let fails = fails + 1;
        let max = self.p.apply_redeliveries;
        if max >= 0 && fails as i64 > max {
            // Exhausted: the error handler logs it, the exchange is gone.
            self.hosts[h].applying = None;
            self.release(e, false, ctl);
            return;
        }
        let at = now + self.p.apply_redelivery_delay.micros().max(1);
        let host = &mut self.hosts[h];
        host.applying = Some((e, fails, ApplyPhase::Backoff));
        host.apply_wake = at;
        ctl.wake_at(at, token(W_APPLY, h as u32, 0));
    }

    fn on_apply_wake(&mut self, h: usize, now: Time, ctl: &mut Control) {
        let host = &self.hosts[h];
        if host.apply_wake != now {
            return;
        }
        let Some((_, _, phase)) = host.applying else {
            return;
        };
        self.hosts[h].apply_wake = NONE;
        match phase {
            ApplyPhase::Working => self.finish_attempt(h, now, ctl),
            ApplyPhase::Backoff => self.begin_attempt(h, now, ctl),
        }
        self.pump(h, now, ctl);
    }

    /// An element's gap timeout: it becomes ready; the delivery thread sees it at its next
    /// attempt (an insert, or its polling interval).
    fn on_reseq_timeout(&mut self, h: usize, key: u32, now: Time, ctl: &mut Control) {
        let host = &mut self.hosts[h];
        if !host.up {
            return;
        }
        let mut any = false;
        for el in host.seqs[key as usize].iter_mut() {
            if el.deadline == now {
                el.deadline = NONE;
                any = true;
            }
        }
        if !any {
            return;
        }
        host.mark_dirty(key);
        if host.applying.is_some() {
            return; // the busy thread goes on delivering when its apply is done
        }
        let i = self.p.delivery_attempt_interval.micros();
        if i == 0 {
            self.pump(h, now, ctl);
            return;
        }
        let n = (now - host.idle_since).div_ceil(i).max(1);
        let tick = host.idle_since + n * i;
        // While a poll is due, every timeout maps to it: the idle spell it was computed from
        // lasts until a pump finds nothing (which clears it) or the poll itself fires.
        if host.tick_at == NONE {
            host.tick_at = tick;
            ctl.wake_at(tick, token(W_TICK, h as u32, 0));
        }
    }

    fn crash(&mut self, c: u32, ctl: &mut Control) {
        for corr in 0..self.corrs as u32 {
            let i = self.fire_index(c, corr);
            self.agg_fire[i] = NONE;
        }
        self.aggregating[c as usize] = false;
        self.deferred[c as usize].clear();
        if !self.p.persistent {
            for corr in 0..self.corrs as u32 {
                let idx = self.row_index(c, corr);
                let row = &mut self.rows[idx];
                if row.exists {
                    row.exists = false;
                    let items = std::mem::take(&mut row.contents);
                    for &m in &items {
                        self.release(m, false, ctl);
                    }
                    self.rows[idx].contents = items;
                    self.rows[idx].contents.clear();
                }
            }
        }
        if self.p.resequencer_scope == Scope::Route {
            let h = c as usize;
            let mut lost: Vec<MsgView> = Vec::new();
            let host = &mut self.hosts[h];
            host.up = false;
            for v in &mut host.seqs {
                lost.extend(v.drain(..).map(|e| e.view));
            }
            lost.extend(host.waiting.drain(..));
            lost.extend(host.queue.drain(..));
            lost.extend(host.out.drain(..));
            if let Some((e, _, _)) = host.applying.take() {
                lost.push(e);
            }
            for l in &mut host.last {
                *l = None;
            }
            for d in &mut host.is_dirty {
                *d = false;
            }
            host.dirty.clear();
            host.size = 0;
            host.tick_at = NONE;
            host.batch_deadline = NONE;
            host.apply_wake = NONE;
            for m in lost {
                self.release(m, false, ctl);
            }
        }
    }

    fn restart(&mut self, c: u32, now: Time, ctl: &mut Control) {
        self.started[c as usize] = now;
        if self.p.resequencer_scope == Scope::Route {
            let host = &mut self.hosts[c as usize];
            host.up = true;
            host.idle_since = now;
        }
        if self.p.persistent {
            for corr in 0..self.corrs as u32 {
                if self.rows[corr as usize].exists {
                    self.arm_timeout(c, corr, now, ctl);
                }
            }
        }
    }
}

impl Handler for Resequencer {
    fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Begin {
        // `get`: read the group's aggregate (the aggregation spans the service time).
        if msg.group.is_some() {
            let corr = self.corr(msg);
            self.read(ctx.consumer, corr);
            self.aggregating[ctx.consumer as usize] = true;
        }
        Begin::Proceed
    }

    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Outcome {
        let c = ctx.consumer;
        let outcome = self.aggregate_step(ctx, msg, ctl);
        // The aggregator's lock is released: the timeout checker goes on.
        self.aggregating[c as usize] = false;
        let mut deferred = std::mem::take(&mut self.deferred[c as usize]);
        for &corr in &deferred {
            self.evict(c, corr, ctx.now, ctl);
        }
        deferred.clear();
        self.deferred[c as usize] = deferred;
        outcome
    }

    fn abandon(&mut self, _now: Time, consumer: u32, _msg: &MsgView, _ctl: &mut Control) {
        // The delivery is dropped mid-aggregation (its consumer crashed or left its broker): the
        // aggregator's lock is free again.
        self.aggregating[consumer as usize] = false;
        self.deferred[consumer as usize].clear();
    }
}

impl Resequencer {
    fn aggregate_step(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Outcome {
        let c = ctx.consumer;
        if ctx.step == 0 {
            if let Err(r) = ctx.validate() {
                return Outcome::Failed(r);
            }
            if msg.group.is_none() {
                if self.p.ignore_invalid_correlation_keys {
                    self.hold(*msg);
                    self.release(*msg, false, ctl);
                    return Outcome::Buffered;
                }
                return Outcome::Failed(FailReason::Strategy);
            }
        }
        if ctx.step > 0 {
            // A retry re-reads the aggregate (and aggregates at once); the first attempt uses
            // what `begin` read (a handle always follows the begin of its message).
            let corr = self.corr(msg);
            self.read(c, corr);
        }
        match self.aggregate(ctx.now, c, *msg, ctl) {
            Ok(()) => Outcome::Buffered,
            Err(Conflict) if self.p.optimistic_locking => {
                let attempt = ctx.step + 1;
                Outcome::After {
                    delay: self.retry_delay(attempt).max(1),
                    step: attempt,
                }
            }
            Err(Conflict) => Outcome::Failed(FailReason::Strategy),
        }
    }
}

impl crate::Named for Resequencer {
    const NAME: &'static str = "resequencer";
    const SUMMARY: &'static str =
        "Camel aggregator -> splitter -> resequencer per consumer; gap timeouts, lost updates";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Neither {
        as_dispatch: "its ordering happens in its handler",
        as_handler: "its handler owns dispatch state (it takes messages over into its aggregation repository and applies them from its own thread)",
    };
    type Params = ResequencerParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "completion_size",
            meaning: "an aggregate completes when it holds this many messages; 0 = no size condition",
            unit: "messages",
            default: "10",
            range: crate::Range::Int(0, u32::MAX as i64),
            sizes: None,
            models: "Camel aggregator completionSize",
            hazard: None,
        },
        crate::ParamInfo {
            name: "completion_timeout",
            meaning: "an aggregate completes after this long without an add by the same consumer; 0 = no timeout",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "Camel aggregator completionTimeout",
            hazard: None,
        },
        crate::ParamInfo {
            name: "completion_timeout_checker_interval",
            meaning: "how often each consumer's timeout checker runs",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::from_millis(1)),
            sizes: None,
            models: "Camel aggregator completionTimeoutCheckerInterval",
            hazard: None,
        },
        crate::ParamInfo {
            name: "persistent",
            meaning: "one JDBC aggregation repository shared by all consumers (true) or one in-memory repository per consumer (false)",
            unit: "bool",
            default: "true",
            range: crate::Range::Any,
            sizes: None,
            models: "JdbcAggregationRepository vs MemoryAggregationRepository",
            hazard: Some(crate::Hazard {
                when: "false with more than one consumer",
                applies: |v, sc| v == "false" && sc.consumers.count > 1,
                effect: "one in-memory aggregation repository per consumer: every group is split across the consumers and reordered without any fault",
            }),
        },
        crate::ParamInfo {
            name: "repository",
            meaning: "JDBC repository with a version column (optimistic locking) or without (UPDATE/DELETE by key)",
            unit: "\"versioned\" | \"unversioned\"",
            default: "versioned",
            range: crate::Range::Any,
            sizes: None,
            models: "JdbcAggregationRepository after (Camel 3.4+) or before CAMEL-7810",
            hazard: Some(crate::Hazard {
                when: "\"unversioned\" with more than one consumer and persistent = true",
                applies: |v, sc| {
                    v == "unversioned"
                        && sc.consumers.count > 1
                        && sc
                            .strategy
                            .get("resequencer")
                            .and_then(|t| t.get("persistent"))
                            .and_then(|p| p.as_bool())
                            != Some(false)
                },
                effect: "an aggregation repository without a version column: concurrent consumers overwrite each other's additions to a group and acked messages are lost without any fault (CAMEL-7810)",
            }),
        },
        crate::ParamInfo {
            name: "optimistic_locking",
            meaning: "on an optimistic-locking failure retry the aggregation in the route (true) or fail the exchange and roll the message back (false)",
            unit: "bool",
            default: "true",
            range: crate::Range::Any,
            sizes: None,
            models: "Camel aggregator optimisticLocking()",
            hazard: None,
        },
        crate::ParamInfo {
            name: "retry_delay",
            meaning: "first delay before an optimistic-locking retry, doubled per attempt",
            unit: "duration",
            default: "50ms",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "OptimisticLockRetryPolicy retryDelay (with exponentialBackOff)",
            hazard: None,
        },
        crate::ParamInfo {
            name: "max_retry_delay",
            meaning: "cap on that delay; 0 = no cap",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "OptimisticLockRetryPolicy maximumRetryDelay",
            hazard: None,
        },
        crate::ParamInfo {
            name: "resequencer",
            meaning: "stream resequencer (gap timeouts) or batch resequencer (sort each batch)",
            unit: "\"stream\" | \"batch\"",
            default: "stream",
            range: crate::Range::Any,
            sizes: None,
            models: "Camel resequence().stream() / .batch()",
            hazard: Some(crate::Hazard {
                when: "\"batch\" with more than one consumer",
                applies: |v, sc| v == "batch" && sc.consumers.count > 1,
                effect: "the batch resequencer sorts each batch alone (batch_size elements, or what came before batch_timeout without a new one) and keeps nothing across batches: a message overtaken on its way to it (competing consumers, an optimistic-lock retry, a network bridge; a key's aggregate that completed with its successor in it) misses its batch and is sent after its successors (reorders without any fault; Camel Resequencer.BatchSender)",
            }),
        },
        crate::ParamInfo {
            name: "resequencer_scope",
            meaning: "one resequencer per consumer, fed by the aggregates it completed (route), or one shared resequencer that never fails (single)",
            unit: "\"route\" | \"single\"",
            default: "route",
            range: crate::Range::Any,
            sizes: None,
            models: "deploying the whole Camel route on every consumer JVM vs a dedicated singleton resequencing instance",
            hazard: Some(crate::Hazard {
                when: "\"route\" with more than one consumer",
                applies: |v, sc| v == "route" && sc.consumers.count > 1,
                effect: "one resequencer per consumer: consecutive aggregates of a key complete on different consumers and are released independently (reorders without any fault; \"single\" keeps order)",
            }),
        },
        crate::ParamInfo {
            name: "capacity",
            meaning: "stream: elements a resequencer holds before the inserting thread waits",
            unit: "elements",
            default: "1000",
            range: crate::Range::Int(1, u32::MAX as i64),
            sizes: None,
            models: "Camel stream resequencer capacity",
            hazard: None,
        },
        crate::ParamInfo {
            name: "timeout",
            meaning: "stream: how long a gap is waited for before it is skipped",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "Camel stream resequencer timeout",
            hazard: None,
        },
        crate::ParamInfo {
            name: "delivery_attempt_interval",
            meaning: "stream: the delivery thread's polling interval",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "Camel stream resequencer deliveryAttemptInterval",
            hazard: None,
        },
        crate::ParamInfo {
            name: "reject_old",
            meaning: "stream: reject (lose) an element older than the last delivered one instead of delivering it late",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models: "Camel stream resequencer rejectOld",
            hazard: None,
        },
        crate::ParamInfo {
            name: "batch_size",
            meaning: "batch: elements sorted and sent together",
            unit: "elements",
            default: "100",
            range: crate::Range::Int(1, u32::MAX as i64),
            sizes: None,
            models: "Camel batch resequencer size",
            hazard: None,
        },
        crate::ParamInfo {
            name: "batch_timeout",
            meaning: "batch: send after this long without a new element",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "Camel batch resequencer timeout",
            hazard: None,
        },
        crate::ParamInfo {
            name: "apply_time",
            meaning: "time one apply takes on the delivery thread (0: the cost is in the consumers' service time)",
            unit: "duration",
            default: "0s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "the business processor after the resequencer",
            hazard: None,
        },
        crate::ParamInfo {
            name: "apply_redeliveries",
            meaning: "redeliveries of a failed apply; -1 = forever, 0 = none (the element is lost)",
            unit: "count",
            default: "-1",
            range: crate::Range::Int(-1, 1_000_000),
            sizes: None,
            models: "Camel error handler maximumRedeliveries (DefaultErrorHandler default 0)",
            hazard: None,
        },
        crate::ParamInfo {
            name: "apply_redelivery_delay",
            meaning: "delay between apply redeliveries",
            unit: "duration",
            default: "1s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "Camel error handler redeliveryDelay",
            hazard: None,
        },
        crate::ParamInfo {
            name: "ignore_invalid_correlation_keys",
            meaning: "ack and drop a message without the group header (lost) instead of failing it to the DLQ",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models: "Camel aggregator ignoreInvalidCorrelationKeys",
            hazard: Some(crate::Hazard {
                when: "true when [workload] group_header_missing > 0",
                applies: |v, sc| v == "true" && sc.workload.group_header_missing > 0.0,
                effect: "messages without the group header are acked and dropped: lost without any fault",
            }),
        },
    ];
    fn check(sc: &sim::Scenario, p: &ResequencerParams) -> Vec<(&'static str, String)> {
        // With correlation groups the order's size completes it (`completionSizeExpression`).
        let by_size = p.completion_size > 0 || sc.workload.group_size.is_some();
        if !by_size && p.completion_timeout == Dur::ZERO {
            return vec![(
                "completion_size",
                "[strategy.resequencer]: set completion_size or completion_timeout (both are 0: no aggregate would ever complete)".to_string(),
            )];
        }
        Vec::new()
    }
    fn build(sc: &sim::Scenario, p: ResequencerParams) -> Result<Self, String> {
        Ok(Resequencer::new(
            sc.brokers.len(),
            sc.consumers.count as usize,
            sc.workload.keys as usize,
            p,
        )
        .with_groups(sc.workload.group_size.unwrap_or(0)))
    }
}

impl Strategy for Resequencer {
    fn select(&mut self, ctx: &DispatchCtx, _msg: &MsgView, _ctl: &mut Control) -> Select {
        self.dispatch
            .pick(ctx)
            .map_or(Select::Stop, Select::Consumer)
    }

    fn on_wake(&mut self, now: Time, tok: u64, ctl: &mut Control) {
        let kind = tok >> 60;
        let who = ((tok >> 32) & 0x0fff_ffff) as u32;
        let key = tok as u32;
        match kind {
            W_AGG => self.on_agg_timeout(who, key, now, ctl),
            W_RESEQ => self.on_reseq_timeout(who as usize, key, now, ctl),
            W_TICK => {
                let h = who as usize;
                if self.hosts[h].tick_at == now {
                    self.hosts[h].tick_at = NONE;
                    self.pump(h, now, ctl);
                }
            }
            W_BATCH => {
                let h = who as usize;
                let host = &self.hosts[h];
                if host.batch_deadline == now && host.applying.is_none() && host.out.is_empty() {
                    self.drain_batch(h, ctl);
                    self.pump(h, now, ctl);
                }
            }
            W_APPLY => self.on_apply_wake(who as usize, now, ctl),
            _ => {}
        }
    }

    fn on_world(&mut self, now: Time, change: WorldChange, ctl: &mut Control) {
        match change {
            WorldChange::ConsumerCrashed(c) => self.crash(c, ctl),
            WorldChange::ConsumerRestarted(c) => self.restart(c, now, ctl),
            WorldChange::Target { up } => self.target_up = up,
            WorldChange::CacheCollapse
            | WorldChange::BrokerCrashed(_)
            | WorldChange::BrokerRestarted(_)
            | WorldChange::PartitionsAdded(_)
            | WorldChange::GroupsReset(_)
            | WorldChange::MemberLeft(_)
            | WorldChange::MemberJoined(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::{run, scenario, simple, simple_with};
    use sim::Metrics;

    /// `simple`'s scenario (one broker, exponential 10ms service, 3000 messages over 50 keys)
    /// with extra `[workload]` lines, `[strategy.resequencer]` parameters and faults.
    fn sc(consumers: u32, rate: u32, workload: &str, params: &str, faults: &str) -> sim::Scenario {
        let extra = format!("[strategy.resequencer]\n{params}\n{faults}");
        simple_with(r#""resequencer""#, consumers, rate, 50, workload, &extra)
    }

    fn reseq(m: &sim::Scenario, seed: u64) -> Metrics {
        run(m, "resequencer", seed)
    }

    const SINGLE: &str = "resequencer_scope = \"single\"";

    /// Orders of four lines (`group_size = 4`), some lines poison: each poison line goes to the
    /// DLQ after 3 deliveries.
    const ORDERS: &str = "group_size = 4\npoison_fraction = 0.003";
    const BACKOUT: &str = "[redelivery]\ninitial_delay = \"100ms\"\nbackout_threshold = 3";

    /// Issue 39 §2: the aggregator correlates on the order and completes it by its size
    /// (Camel's `completionSizeExpression`, which takes precedence over `completion_size`). An
    /// order with a poison line dead-lettered never reaches its size: without a completion timeout
    /// its other lines stay in the repository for ever (pending at the end, exactly the
    /// non-poison members of the incomplete orders), and the checker reports the order
    /// incomplete. (Correlating on the key, as without `group_size`, completes aggregates of
    /// lines of different orders: the pending lines are not those of the broken orders.)
    #[test]
    fn an_order_with_a_poison_line_is_held_for_ever_and_reported_incomplete() {
        let m = sc(
            4,
            200,
            ORDERS,
            "completion_timeout = \"0s\"\ncompletion_size = 10",
            BACKOUT,
        );
        for seed in 1..=3 {
            let x = reseq(&m, seed);
            let g = x.incomplete_groups.expect("grouped");
            assert!(x.poison_dead_lettered > 0 && g > 0, "seed {seed}: {x:?}");
            assert_eq!(
                x.pending_at_end,
                4 * g - x.poison_dead_lettered,
                "seed {seed}: {x:?}"
            );
            assert_eq!(
                (x.lost, x.innocent_dead_lettered),
                (0, 0),
                "seed {seed}: {x:?}"
            );
            assert_eq!(
                x.applied + x.pending_at_end + x.poison_dead_lettered,
                x.produced
            );
        }
    }

    /// Every line delivered: every order completes by size, nothing is held, none incomplete.
    #[test]
    fn orders_with_every_line_delivered_all_complete() {
        let m = sc(
            4,
            200,
            "group_size = 4",
            "completion_timeout = \"0s\"",
            BACKOUT,
        );
        for seed in 1..=3 {
            let x = reseq(&m, seed);
            assert_eq!(x.incomplete_groups, Some(0), "seed {seed}: {x:?}");
            assert_eq!(
                (x.pending_at_end, x.applied),
                (0, x.produced),
                "seed {seed}: {x:?}"
            );
        }
    }

    /// With a completion timeout the lines of an order missing one are released without it
    /// (Camel completes the group "by timeout"): nothing is held, the order is still incomplete.
    #[test]
    fn an_order_missing_a_line_is_released_by_the_timeout_without_it() {
        let m = sc(4, 200, ORDERS, "completion_timeout = \"1s\"", BACKOUT);
        for seed in 1..=3 {
            let x = reseq(&m, seed);
            assert!(
                x.incomplete_groups.is_some_and(|g| g > 0),
                "seed {seed}: {x:?}"
            );
            assert_eq!(x.pending_at_end, 0, "seed {seed}: {x:?}");
            assert_eq!(
                x.applied + x.poison_dead_lettered,
                x.produced,
                "seed {seed}: {x:?}"
            );
        }
    }
    const SINGLE_5S: &str = "resequencer_scope = \"single\"\ntimeout = \"5s\"";

    /// Strength: with one resequencer behind eight competing consumers, applies come out in seq
    /// order at the consumers' throughput (the single consumer's cap is 100/s here). With a gap
    /// timeout longer than the aggregation delay there is no violation at all; with the default
    /// 1s a few remain: a message whose versioned write lost the optimistic-lock race is retried
    /// 100ms later, after its successor's aggregate completed, and its group completes only at the
    /// next completion timeout (1-2s later, checked every second), after the gap was skipped.
    #[test]
    fn one_resequencer_keeps_order_at_competing_throughput() {
        for seed in 1..=3 {
            let competing = run(&simple("\"competing\"", 8, 400, ""), "competing", seed);
            let m = reseq(&sc(8, 400, "", SINGLE_5S, ""), seed);
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}");
            assert_eq!((m.applied, m.lost, m.pending_at_end), (3000, 0, 0));
            assert!(
                m.throughput_per_s > 0.8 * competing.throughput_per_s,
                "seed {seed}: {} vs {}",
                m.throughput_per_s,
                competing.throughput_per_s
            );
            // No backlog: latency is the aggregation plus the gap timeout, not a queue.
            assert!(
                m.latency_ms.p99 < 8_000.0,
                "seed {seed}: {}",
                m.latency_ms.p99
            );
            assert!(competing.ordering_violations > 50);

            let short = reseq(&sc(8, 400, "", SINGLE, ""), seed);
            assert!(short.ordering_violations <= 10, "seed {seed}: {short:?}");
            assert_eq!((short.applied, short.lost), (3000, 0));
        }
    }

    /// Weakness ([ActiveMQ+Camel], CAMEL-7810): a JDBC aggregation repository without a version
    /// column lets concurrent consumers overwrite each other's additions to a group: acked messages
    /// vanish. The versioned repository retries in the route and loses nothing; without
    /// `optimisticLocking()` the stale write rolls back to the broker instead.
    #[test]
    fn unversioned_repository_loses_concurrent_updates() {
        for seed in 1..=2 {
            let cmd = "kind = \"command\"";
            let lossy = reseq(
                &sc(
                    8,
                    400,
                    cmd,
                    &format!("{SINGLE_5S}\nrepository = \"unversioned\""),
                    "",
                ),
                seed,
            );
            assert!(lossy.lost > 50, "seed {seed}: {lossy:?}");
            assert_eq!(lossy.lost_commands, lossy.lost);
            assert!(lossy.final_state_mismatches > 10);

            let versioned = reseq(&sc(8, 400, cmd, SINGLE_5S, ""), seed);
            assert_eq!(
                (versioned.lost, versioned.lost_commands),
                (0, 0),
                "seed {seed}"
            );
            assert_eq!(versioned.final_state_mismatches, 0);
            assert_eq!(versioned.applied, 3000);

            let rollback = reseq(
                &sc(
                    8,
                    400,
                    cmd,
                    &format!("{SINGLE_5S}\noptimistic_locking = false"),
                    "",
                ),
                seed,
            );
            assert_eq!(rollback.lost, 0);
            assert!(rollback.coverage.rollbacks > 0);
            assert_eq!(rollback.applied, 3000);
        }
    }

    /// Broker `a` crashes for 10s holding messages prefetched by its consumers (the
    /// [ActiveMQ+Camel] post's network of brokers); producers fail over to `b`.
    fn broker_crash(params: &str) -> sim::Scenario {
        scenario(&format!(
            r#"
strategies = ["resequencer"]
[workload]
messages = 3000
rate = "150/s"
keys = 50
[producers]
brokers = ["a", "b"]
reconnect_delay = "500ms"
[[broker]]
name = "a"
[[broker]]
name = "b"
[consumers]
count = 4
prefetch = 10
service = {{ dist = "exponential", mean = "6ms" }}
connect = "spread"
reconnect_delay = "1s"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "5s"
for = "10s"
[strategy.resequencer]
{params}
"#
        ))
    }

    /// Weakness: a gap timeout shorter than the real disorder. The messages stuck in the crashed
    /// broker do not "sit patiently in the aggregation repository" ([ActiveMQ+Camel]): the
    /// completion timeout completes their groups without them, the resequencer skips the gap after
    /// 1s, and they are applied out of order when the broker returns (or, with `reject_old`, lost).
    /// A timeout longer than the outage keeps order at the price of ~30s latency. (A target outage
    /// cannot make this disorder: the aggregation does not touch the target.)
    #[test]
    fn a_gap_timeout_shorter_than_the_disorder_reorders() {
        let mut short_total = 0;
        for seed in 1..=3 {
            let short = reseq(&broker_crash(SINGLE), seed);
            assert_eq!(short.coverage.broker_crashes, 1);
            assert_eq!(short.lost, 0);
            short_total += short.ordering_violations;

            let long = reseq(&broker_crash(&format!("{SINGLE}\ntimeout = \"30s\"")), seed);
            // Only a duplicate (an applied message whose ack died with the broker) comes late.
            assert!(
                long.ordering_violations <= long.duplicates,
                "seed {seed}: {long:?}"
            );
            assert!(long.latency_ms.p50 > 20_000.0, "{}", long.latency_ms.p50);

            let reject = reseq(&broker_crash(&format!("{SINGLE}\nreject_old = true")), seed);
            assert!(reject.lost > 0, "seed {seed}: {reject:?}");
            assert!(reject.ordering_violations <= reject.duplicates);
        }
        assert!(short_total >= 5, "{short_total}");
    }

    /// Weakness: a consumer crash loses what only its memory held (acked upstream): the groups
    /// of its `MemoryAggregationRepository`, and the elements waiting in its own resequencer. A
    /// JDBC repository with one resequencer outside the consumers loses nothing.
    #[test]
    fn a_consumer_crash_loses_what_only_memory_held() {
        let crash =
            "[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"3s\"\nfor = \"3s\"\n";
        for seed in 1..=2 {
            let memory = reseq(&sc(8, 400, "", "persistent = false", crash), seed);
            assert_eq!(memory.coverage.consumer_crashes, 1);
            assert!(memory.lost > 50, "seed {seed}: {memory:?}");
            let memory_single = reseq(
                &sc(8, 400, "", &format!("persistent = false\n{SINGLE}"), crash),
                seed,
            );
            assert!(memory_single.lost > 50, "seed {seed}: {memory_single:?}");

            let jdbc_single = reseq(&sc(8, 400, "", SINGLE, crash), seed);
            assert_eq!(jdbc_single.lost, 0, "seed {seed}");
            assert_eq!(jdbc_single.applied, 3000);

            // Its own resequencer still dies with the consumer.
            let jdbc_route = reseq(&sc(8, 400, "", "", crash), seed);
            assert!(jdbc_route.lost > 0, "seed {seed}");
            assert!(jdbc_route.lost < memory.lost, "seed {seed}");
        }
    }

    /// Weakness of the default deployment (every consumer runs the whole route): each instance
    /// resequences only the aggregates it completed, and consecutive aggregates of a key complete
    /// on different instances, whose delivery threads release them independently (each waits the
    /// gap timeout, then its next insert or 1s poll). Order holds within an aggregate only: it
    /// reorders more than plain competing consumers. In-memory repositories split every group
    /// across the instances: far worse.
    #[test]
    fn a_resequencer_per_route_instance_reorders_across_instances() {
        for seed in 1..=2 {
            let competing = run(&simple("\"competing\"", 8, 400, ""), "competing", seed);
            let m = reseq(&sc(8, 400, "", "", ""), seed);
            assert!(
                m.ordering_violations > competing.ordering_violations,
                "seed {seed}: {} vs {}",
                m.ordering_violations,
                competing.ordering_violations
            );
            assert_eq!((m.applied, m.lost), (3000, 0));
            let memory = reseq(&sc(8, 400, "", "persistent = false", ""), seed);
            assert!(memory.ordering_violations > 3 * m.ordering_violations);
        }
    }

    /// Declared hazards, each with no fault at all: the run's parameters carry the warning and
    /// the bad effect shows; a safe setting neither warns nor has it. Note that the defaults
    /// (`resequencer_scope = "route"`, what deploying the route on every consumer gives) are
    /// themselves hazardous with several consumers: that is why the warning exists.
    #[test]
    fn hazards_reorder_or_lose_without_faults() {
        let w = crate::test_util::warning;
        let go = |params: &str, workload: &str| {
            let s = sc(8, 400, workload, params, "");
            assert!(s.faults.is_empty());
            crate::test_util::summary(&s, "resequencer", 1)
        };
        let m = |s: &sim::StrategySummary| s.metrics.clone().unwrap();

        // resequencer_scope = "route" (the default): reorders.
        let route = go("", "");
        assert!(m(&route).ordering_violations > 0, "{:?}", m(&route));
        assert!(w(&route, "resequencer_scope").is_some());
        let single = go(SINGLE_5S, "");
        assert_eq!(m(&single).ordering_violations, 0);
        assert_eq!((m(&single).applied, m(&single).lost), (3000, 0));
        assert!(single.params.0.iter().all(|p| p.warning.is_none()));

        // repository = "unversioned": loses acked messages.
        let cmd = "kind = \"command\"";
        let unversioned = go(&format!("{SINGLE_5S}\nrepository = \"unversioned\""), cmd);
        assert!(m(&unversioned).lost > 0, "{:?}", m(&unversioned));
        assert!(w(&unversioned, "repository").is_some());
        let versioned = go(SINGLE_5S, cmd);
        assert_eq!(m(&versioned).lost, 0);
        assert!(w(&versioned, "repository").is_none());
        // Only the shared JDBC repository has a version column to miss.
        let in_memory = go("persistent = false\nrepository = \"unversioned\"", "");
        assert!(w(&in_memory, "repository").is_none());

        // persistent = false: every group split across the consumers, reordered.
        let memory = go(&format!("{SINGLE_5S}\npersistent = false"), "");
        assert!(m(&memory).ordering_violations > 0, "{:?}", m(&memory));
        assert!(w(&memory, "persistent").is_some());
        assert!(w(&single, "persistent").is_none());

        // ignore_invalid_correlation_keys = true with headerless messages: they are lost.
        let headerless = "group_header_missing = 0.01";
        let ignored = go(
            &format!("{SINGLE_5S}\nignore_invalid_correlation_keys = true"),
            headerless,
        );
        assert!(m(&ignored).lost > 0, "{:?}", m(&ignored));
        assert!(w(&ignored, "ignore_invalid_correlation_keys").is_some());
        let failed = go(SINGLE_5S, headerless);
        assert_eq!(m(&failed).lost, 0);
        assert!(w(&failed, "ignore_invalid_correlation_keys").is_none());
        assert!(w(&single, "ignore_invalid_correlation_keys").is_none());

        // resequencer = "batch" (the [ActiveMQ+Camel] sample's `<resequence>`): each batch is
        // sorted alone; what misses its batch follows its successors. The same route with the
        // stream resequencer (above) keeps order.
        let batch = go(&format!("{SINGLE}\nresequencer = \"batch\""), "");
        assert!(m(&batch).ordering_violations > 0, "{:?}", m(&batch));
        assert!(w(&batch, "resequencer").is_some());
        assert!(w(&single, "resequencer").is_none());

        // One consumer: one route instance, nothing to warn about.
        let one = crate::test_util::summary(&sc(1, 50, "", "", ""), "resequencer", 1);
        assert!(one.params.0.iter().all(|p| p.warning.is_none()));
        // Nor with the batch resequencer: one consumer aggregates in order, and nothing reaches
        // the resequencer after its successors.
        let one = crate::test_util::summary(
            &sc(1, 50, "", &format!("{SINGLE}\nresequencer = \"batch\""), ""),
            "resequencer",
            1,
        );
        assert!(one.params.0.iter().all(|p| p.warning.is_none()));
        assert_eq!(m(&one).ordering_violations, 0, "{:?}", m(&one));
    }

    /// The apply thread holds while the target is down (the error handler retries every second)
    /// and everything waits behind it: no loss, no reorder. With Camel's default error handler
    /// (no redelivery) every element delivered during the outage is lost.
    #[test]
    fn a_target_outage_holds_the_apply_thread() {
        let outage = "[[fault]]\nkind = \"db_outage\"\nat = \"6s\"\nfor = \"3s\"\n";
        for seed in 1..=2 {
            let m = reseq(&sc(8, 400, "", SINGLE_5S, outage), seed);
            assert_eq!(m.coverage.db_outages, 1);
            assert_eq!((m.applied, m.lost, m.ordering_violations), (3000, 0, 0));
            assert_eq!(m.coverage.rollbacks, 0, "the aggregation never fails");
            assert!(m.max_block_ms > 2_500.0, "{}", m.max_block_ms);

            let dropped = reseq(
                &sc(
                    8,
                    400,
                    "",
                    &format!("{SINGLE_5S}\napply_redeliveries = 0"),
                    outage,
                ),
                seed,
            );
            assert!(dropped.lost > 100, "seed {seed}: {dropped:?}");
            assert_eq!(dropped.applied + dropped.lost, 3000);
        }
    }

    /// A poison message fails in the route before aggregation and goes to the DLQ like anywhere
    /// else; so does a message without the group header ("Invalid correlation key"), unless the
    /// aggregator ignores invalid keys: then it is acked and dropped.
    #[test]
    fn poison_and_missing_group_headers() {
        let w = "poison_fraction = 0.01\ngroup_header_missing = 0.01";
        let m = reseq(&sc(8, 400, w, SINGLE, ""), 1);
        assert!(m.poison_dead_lettered > 10, "{m:?}");
        assert!(m.innocent_dead_lettered > 10, "{m:?}");
        assert_eq!((m.lost, m.pending_at_end), (0, 0));
        assert_eq!(m.applied + m.dead_lettered, 3000);

        let ignored = reseq(
            &sc(
                8,
                400,
                w,
                &format!("{SINGLE}\nignore_invalid_correlation_keys = true"),
                "",
            ),
            1,
        );
        assert_eq!(ignored.innocent_dead_lettered, 0);
        assert!(ignored.lost > 10, "{ignored:?}");
    }

    /// The batch resequencer sorts each batch (100 elements, or what came before 1s without a
    /// new one) but not across batches; completion by size alone leaves the tail of every group
    /// in the repository forever (the sample has no completion timeout).
    #[test]
    fn batch_mode_and_completion_by_size_only() {
        let competing = run(&simple("\"competing\"", 8, 400, ""), "competing", 1);
        let batch = reseq(
            &sc(
                8,
                400,
                "",
                &format!("{SINGLE}\nresequencer = \"batch\""),
                "",
            ),
            1,
        );
        assert_eq!((batch.applied, batch.lost), (3000, 0));
        assert!(batch.ordering_violations > 0);
        assert!(batch.ordering_violations < competing.ordering_violations);

        let size_only = reseq(
            &sc(
                8,
                400,
                "",
                &format!("{SINGLE}\ncompletion_timeout = \"0s\""),
                "",
            ),
            1,
        );
        assert!(size_only.pending_at_end > 100, "{size_only:?}");
        assert_eq!(size_only.lost, 0);
    }

    /// At least one completion condition is required (Camel refuses to start otherwise).
    #[test]
    fn needs_a_completion_condition() {
        // Bad input, refused in validation at the parameter (not "not applicable" in the run).
        let text = "strategies = [\"resequencer\"]\n[workload]\nmessages = 10\nrate = \"10/s\"\nkeys = 4\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 2\nservice = \"1ms\"\n[strategy.resequencer]\ncompletion_size = 0\ncompletion_timeout = \"0s\"\n";
        let e = sim::scenario::load_str("test.toml", text, &crate::validate)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("test.toml:12:19: field `strategy.resequencer.completion_size`")
                && e.contains("set completion_size or completion_timeout"),
            "{e}"
        );
    }

    // --- Direct tests of the aggregator, the resequencer and the apply thread: the handler's
    // hooks, the wake-ups and the world changes called with hand-built contexts, no engine.

    use super::{Repository, Resequencer, ResequencerParams, Scope};
    use sim::strategy::{
        Control, Handler, HandlerCtx, MsgView, Outcome, Row, Strategy, WorldChange,
    };
    use sim::time::{Dur, Time, MILLI, SECOND};

    /// Resequencer parameters: the defaults changed by `f`.
    fn params(f: impl FnOnce(&mut ResequencerParams)) -> ResequencerParams {
        let mut p = ResequencerParams::default();
        f(&mut p);
        p
    }

    /// Message `id` of `key` with `seq` (the key as its group header).
    fn m(id: u64, key: u32, seq: u32) -> MsgView {
        MsgView {
            seq,
            ..crate::test_util::view(id, key)
        }
    }

    /// The resequencer alone, driven as the engine would: its wake-ups fire in time order (ties
    /// in the order asked for), and every apply is logged with its time.
    struct Drive {
        r: Resequencer,
        ctl: Control,
        now: Time,
        /// Wake-ups asked for and not fired: (at, token, order asked).
        pending: Vec<(Time, u64, usize)>,
        asked: usize,
        /// (time, message id, worker) of each apply.
        applied: Vec<(Time, u64, u32)>,
    }

    impl Drive {
        /// One broker, `consumers` consumers, `keys` keys.
        fn new(consumers: usize, keys: usize, p: ResequencerParams) -> Self {
            Drive {
                r: Resequencer::new(1, consumers, keys, p),
                ctl: Control::default(),
                now: 0,
                pending: Vec::new(),
                asked: 0,
                applied: Vec::new(),
            }
        }

        /// Takes in what the last hook asked for.
        fn collect(&mut self) {
            let wakes = self.ctl.wakes();
            for (i, &(at, token)) in wakes.iter().enumerate().skip(self.asked) {
                self.pending.push((at, token, i));
            }
            self.asked = wakes.len();
            let applies = self.ctl.applies();
            for &(id, _, worker) in &applies[self.applied.len()..] {
                self.applied.push((self.now, id, worker));
            }
        }

        /// Fires every wake-up due by `t`, then stands at `t`.
        fn until(&mut self, t: Time) {
            loop {
                self.collect();
                let next = (0..self.pending.len())
                    .filter(|&j| self.pending[j].0 <= t)
                    .min_by_key(|&j| (self.pending[j].0, self.pending[j].2));
                let Some(j) = next else { break };
                let (at, token, _) = self.pending.remove(j);
                self.now = self.now.max(at);
                self.r.on_wake(self.now, token, &mut self.ctl);
            }
            self.now = t;
        }

        fn begin(&mut self, c: u32, msg: MsgView) {
            let rows = [Row::default(); 8];
            let ctx = HandlerCtx::for_tests(self.now, c, 0, &rows);
            self.r.begin(&ctx, &msg, &mut self.ctl);
            self.collect();
        }

        fn handle(&mut self, c: u32, step: u32, msg: MsgView) -> Outcome {
            let rows = [Row::default(); 8];
            let ctx = HandlerCtx::for_tests(self.now, c, step, &rows);
            let out = self.r.handle(&ctx, &msg, &mut self.ctl);
            self.collect();
            out
        }

        /// One aggregation of `msg` by consumer `c` now: `begin` (the read), then `handle`.
        fn agg(&mut self, c: u32, msg: MsgView) -> Outcome {
            self.begin(c, msg);
            self.handle(c, 0, msg)
        }

        fn world(&mut self, change: WorldChange) {
            self.r.on_world(self.now, change, &mut self.ctl);
            self.collect();
        }

        /// The applies as (time in ms, message id).
        fn applied_ms(&self) -> Vec<(Time, u64)> {
            self.applied
                .iter()
                .map(|&(t, id, _)| (t / MILLI, id))
                .collect()
        }

        /// The ids a repository row holds.
        fn row(&self, i: usize) -> Vec<u64> {
            let row = &self.r.rows[i];
            assert!(row.exists || row.contents.is_empty());
            row.contents.iter().map(|m| m.id).collect()
        }
    }

    /// Each message is its own aggregate (completion size 1), handed at once to the single
    /// resequencer, whose delivery thread looks as soon as a gap timeout fires (no polling).
    fn one_by_one(f: impl FnOnce(&mut ResequencerParams)) -> ResequencerParams {
        params(|p| {
            p.completion_size = 1;
            p.resequencer_scope = Scope::Single;
            p.delivery_attempt_interval = Dur::ZERO;
            f(p);
        })
    }

    #[test]
    fn in_memory_repositories_are_one_per_consumer() {
        // Two consumers, two keys, one in-memory repository each: rows consumer * keys + key.
        let mut d = Drive::new(2, 2, params(|p| p.persistent = false));
        assert_eq!(d.agg(0, m(1, 1, 0)), Outcome::Buffered);
        assert_eq!(d.agg(1, m(2, 0, 0)), Outcome::Buffered);
        assert_eq!((d.row(1), d.row(2)), (vec![1], vec![2]));
        assert_eq!((d.row(0), d.row(3)), (Vec::<u64>::new(), Vec::<u64>::new()));
        // Consumer 1 aggregates key 1 apart from consumer 0's group of key 1.
        d.agg(1, m(3, 1, 1));
        assert_eq!((d.row(1), d.row(3)), (vec![1], vec![3]));
    }

    #[test]
    fn the_apply_thread_writes_as_its_consumer_or_as_the_single_resequencer() {
        // Seq 0 of a key waits out the gap timeout (1s) before it goes.
        for (scope, worker) in [(Scope::Route, 1), (Scope::Single, u32::MAX - 1)] {
            let mut d = Drive::new(2, 2, one_by_one(|p| p.resequencer_scope = scope));
            d.agg(1, m(7, 0, 0));
            d.until(SECOND - 1);
            assert!(d.applied.is_empty());
            d.until(SECOND);
            assert_eq!(d.applied, vec![(SECOND, 7, worker)], "{scope:?}");
        }
    }

    #[test]
    fn a_copy_leaving_custody_is_lost_only_if_it_was_the_last_and_not_applied() {
        let mut r = Resequencer::new(1, 1, 1, ResequencerParams::default());
        let ctl = &mut Control::default();
        let (a, b) = (m(1, 0, 0), m(2, 0, 1));
        r.hold(a);
        r.hold(a);
        r.release(a, false, ctl);
        assert!(ctl.discards().is_empty(), "another copy is left");
        r.release(a, false, ctl);
        assert_eq!(ctl.discards(), vec![1], "the last copy, dropped");
        r.hold(b);
        r.release(b, true, ctl);
        assert_eq!(ctl.discards(), vec![1], "the last copy, applied");
        r.hold(b);
        r.hold(b);
        r.release(b, true, ctl);
        r.release(b, false, ctl);
        assert_eq!(
            ctl.discards(),
            vec![1, 2],
            "the second copy dropped is the last"
        );
    }

    #[test]
    fn the_optimistic_retry_delay_doubles_up_to_its_cap() {
        let r = Resequencer::new(1, 1, 1, ResequencerParams::default());
        let ms = |a| r.retry_delay(a) / MILLI;
        assert_eq!(
            [1, 2, 3, 4, 5, 60].map(ms),
            [100, 200, 400, 800, 1000, 1000]
        );
        // Without a cap: doubling until it no longer fits, then the largest time.
        let r = Resequencer::new(1, 1, 1, params(|p| p.max_retry_delay = Dur::ZERO));
        assert_eq!(r.retry_delay(4), 800 * MILLI);
        assert_eq!(
            r.retry_delay(48),
            (50 * MILLI) << 48,
            "50ms has 48 leading zero bits"
        );
        for a in [49, 50, 62, 63, 64, 200] {
            assert_eq!(r.retry_delay(a), Time::MAX, "attempt {a}");
        }
    }

    #[test]
    fn an_optimistic_lock_retry_reads_the_group_again() {
        // Consumers 0 and 1 read the same version of key 0's group; 0 writes first, so 1's
        // write is stale: retried 100ms later, re-reading, it succeeds.
        let mut d = Drive::new(2, 1, params(|p| p.resequencer_scope = Scope::Single));
        d.agg(0, m(1, 0, 0));
        d.begin(0, m(2, 0, 1));
        d.begin(1, m(3, 0, 2));
        assert_eq!(d.handle(0, 0, m(2, 0, 1)), Outcome::Buffered);
        let retry = Outcome::After {
            delay: 100 * MILLI,
            step: 1,
        };
        assert_eq!(d.handle(1, 0, m(3, 0, 2)), retry);
        assert_eq!(d.row(0), vec![1, 2]);
        d.until(100 * MILLI);
        assert_eq!(d.handle(1, 1, m(3, 0, 2)), Outcome::Buffered);
        assert_eq!(d.row(0), vec![1, 2, 3]);
        assert!(d.ctl.discards().is_empty());
    }

    #[test]
    fn an_unversioned_write_loses_what_it_did_not_read_and_revives_what_it_did() {
        // Before CAMEL-7810: each write puts back what its writer read, plus its message.
        let mut d = Drive::new(
            3,
            1,
            params(|p| {
                p.repository = Repository::Unversioned;
                p.resequencer_scope = Scope::Single;
            }),
        );
        d.agg(0, m(1, 0, 0));
        d.begin(0, m(2, 0, 1));
        d.begin(1, m(3, 0, 2));
        d.handle(0, 0, m(2, 0, 1));
        d.begin(2, m(4, 0, 3));
        assert_eq!(d.row(0), vec![1, 2]);
        // 1 read [1]: its write drops 2, whose only copy was in the row.
        d.handle(1, 0, m(3, 0, 2));
        assert_eq!((d.row(0), d.ctl.discards()), (vec![1, 3], vec![2]));
        // 2 read [1, 2]: its write drops 3 and brings 2 back (a new copy).
        d.handle(2, 0, m(4, 0, 3));
        assert_eq!((d.row(0), d.ctl.discards()), (vec![1, 2, 4], vec![2, 3]));
        assert_eq!(d.r.copies.get(&2), Some(&1));
    }

    #[test]
    fn without_a_completion_size_a_group_completes_at_its_timeout() {
        // completion_size = 0: adds stay in the repository; the consumer's checker (every 1s,
        // from time 0) completes the group 1s after its last add, at the next check: 2s.
        let mut d = Drive::new(
            1,
            1,
            params(|p| {
                p.completion_size = 0;
                p.resequencer_scope = Scope::Single;
            }),
        );
        for (i, t) in [0, 200, 400].into_iter().enumerate() {
            d.until(t * MILLI);
            d.agg(0, m(i as u64, 0, i as u32));
        }
        d.until(2 * SECOND - 1);
        assert_eq!(d.row(0), vec![0, 1, 2]);
        d.until(2 * SECOND);
        assert_eq!(d.row(0), Vec::<u64>::new());
        // Split in order into the resequencer: seq 0 waits its gap timeout; 1 and 2 follow it,
        // at the delivery thread's next poll (every 1s since it went idle at 2s).
        d.until(10 * SECOND);
        assert_eq!(d.applied_ms(), vec![(3000, 0), (3000, 1), (3000, 2)]);
    }

    #[test]
    fn at_capacity_an_insert_waits_and_later_ones_wait_behind_it() {
        // Capacity 2, one apply at a time taking 100ms. Elements 1 and 2 go in at time 0, 3
        // waits. At 1s 1 times out and its apply starts: the resequencer is below capacity, but
        // 4, completed then, waits behind 3 (FIFO), which goes in only when the thread looks
        // again, after the apply (at 1.1s; its gap timeout then ends at 2.1s).
        let mut d = Drive::new(
            1,
            4,
            one_by_one(|p| {
                p.capacity = 2;
                p.apply_time = Dur::from_millis(100);
            }),
        );
        for k in 0..3 {
            d.agg(0, m(k as u64 + 1, k, 0));
        }
        assert_eq!(d.r.hosts[0].size, 2);
        d.until(SECOND);
        d.agg(0, m(4, 3, 0));
        d.until(10 * SECOND);
        assert_eq!(
            d.applied_ms(),
            vec![(1100, 1), (1200, 2), (2200, 3), (2300, 4)]
        );
    }

    #[test]
    fn a_failed_apply_is_redelivered_then_lost() {
        // apply_redeliveries = 2, every 1s: attempts at 1s, 2s and 3s, then the element is lost.
        let mut d = Drive::new(1, 2, one_by_one(|p| p.apply_redeliveries = 2));
        d.world(WorldChange::Target { up: false });
        d.agg(0, m(1, 0, 0));
        d.until(3 * SECOND - 1);
        assert!(d.ctl.discards().is_empty());
        d.until(3 * SECOND);
        assert_eq!(d.ctl.discards(), vec![1]);
        // The next: attempts at 4s and 5s fail; the target is back for the third, at 6s.
        d.agg(0, m(2, 1, 0));
        d.until(5 * SECOND + 500 * MILLI);
        d.world(WorldChange::Target { up: true });
        d.until(10 * SECOND);
        assert_eq!(d.applied_ms(), vec![(6000, 2)]);
        assert_eq!(d.ctl.discards(), vec![1]);
    }

    #[test]
    fn reject_old_rejects_only_what_is_older_than_the_last_delivered() {
        let mut d = Drive::new(1, 1, one_by_one(|p| p.reject_old = true));
        d.agg(0, m(11, 0, 1));
        d.until(SECOND);
        assert_eq!(d.applied_ms(), vec![(1000, 11)]);
        // Older than the last delivered (seq 1): rejected, lost.
        d.agg(0, m(10, 0, 0));
        assert_eq!(d.ctl.discards(), vec![10]);
        // The same seq again (a redelivered copy) is not older: it waits its timeout and goes.
        d.agg(0, m(11, 0, 1));
        d.until(2 * SECOND);
        // The successor of the last delivered goes at once.
        d.agg(0, m(12, 0, 2));
        assert_eq!(d.applied_ms(), vec![(1000, 11), (2000, 11), (2000, 12)]);
        assert_eq!(d.ctl.discards(), vec![10]);
    }

    #[test]
    fn a_timed_out_element_waits_for_the_delivery_threads_next_poll() {
        // Polls every 1s from when the thread last found nothing to do (the insert at 0.8s):
        // 1's timeout at 1.3s and 2's at 1.8s are both seen by the poll at 1.8s, one wake-up.
        let mut d = Drive::new(
            1,
            2,
            one_by_one(|p| p.delivery_attempt_interval = Dur::from_secs(1)),
        );
        d.until(300 * MILLI);
        d.agg(0, m(1, 0, 0));
        d.until(800 * MILLI);
        d.agg(0, m(2, 1, 0));
        d.until(10 * SECOND);
        assert_eq!(d.applied_ms(), vec![(1800, 1), (1800, 2)]);
        let polls = d
            .ctl
            .wakes()
            .iter()
            .filter(|w| w.1 >> 60 == super::W_TICK)
            .count();
        assert_eq!(polls, 1);
    }

    /// Batch resequencer, completion size 1, one shared resequencer.
    fn batch(size: u32, apply_ms: u64) -> Drive {
        Drive::new(
            1,
            4,
            one_by_one(|p| {
                p.resequencer = super::Mode::Batch;
                p.batch_size = size;
                p.apply_time = Dur::from_millis(apply_ms);
            }),
        )
    }

    #[test]
    fn a_batch_goes_a_timeout_after_its_last_element_sorted() {
        let mut d = batch(10, 0);
        d.agg(0, m(5, 1, 0));
        d.until(500 * MILLI);
        d.agg(0, m(4, 0, 0));
        d.until(10 * SECOND);
        assert_eq!(d.applied_ms(), vec![(1500, 4), (1500, 5)]);
        // One timer per element, restarting the wait; the sends clear it.
        assert_eq!(d.ctl.wakes().len(), 2);
    }

    #[test]
    fn a_full_batch_goes_at_once() {
        let mut d = batch(2, 0);
        d.agg(0, m(5, 1, 0));
        d.until(200 * MILLI);
        d.agg(0, m(4, 0, 0));
        assert_eq!(d.applied_ms(), vec![(200, 4), (200, 5)]);
        assert_eq!(d.ctl.wakes().len(), 1, "no timer for the full batch");
    }

    /// The hazard of issue 39, at the resequencer alone: Camel's `BatchSender` drains a full
    /// batch into a fresh sorted set and sends it; nothing remembers what it sent. Seq 1 of the
    /// key reaches the resequencer after seqs 0 and 2 filled a batch of 2 (it was overtaken
    /// upstream: a slower consumer, an optimistic-lock retry, a bridge, or an aggregate that
    /// completed without it), so it goes in the next batch, after seq 2.
    #[test]
    fn a_message_that_misses_its_batch_follows_its_successors() {
        let mut d = batch(2, 0);
        d.agg(0, m(3, 0, 2));
        d.agg(0, m(1, 0, 0));
        d.until(100 * MILLI);
        d.agg(0, m(2, 0, 1));
        d.until(10 * SECOND);
        // Ids 1, 3 are seqs 0, 2 (sorted, sent at once); id 2 is seq 1, a timeout later.
        assert_eq!(d.applied_ms(), vec![(0, 1), (0, 3), (1100, 2)]);
    }

    #[test]
    fn an_element_queued_during_an_apply_waits_a_timeout_after_it() {
        // Applies take 500ms. 1 goes at 1s (applied at 1.5s); 2, queued at 1.2s while the
        // sender is busy, waits a whole batch timeout from when the sender is free again.
        let mut d = batch(10, 500);
        d.agg(0, m(1, 0, 0));
        d.until(1200 * MILLI);
        d.agg(0, m(2, 1, 0));
        d.until(10 * SECOND);
        assert_eq!(d.applied_ms(), vec![(1500, 1), (3000, 2)]);
    }

    #[test]
    fn a_crash_loses_its_own_in_memory_groups_only() {
        // Three consumers, three keys, in-memory repositories (rows consumer * 3 + key).
        let mut d = Drive::new(3, 3, params(|p| p.persistent = false));
        d.agg(0, m(1, 0, 0));
        d.agg(1, m(2, 0, 1));
        d.agg(1, m(3, 2, 0));
        d.agg(2, m(4, 0, 2));
        d.world(WorldChange::ConsumerCrashed(1));
        assert_eq!(d.ctl.discards(), vec![2, 3]);
        assert_eq!((d.row(0), d.row(6)), (vec![1], vec![4]));
    }

    #[test]
    fn a_crash_stops_its_own_timeout_checker_only() {
        // A shared repository: consumer 0's group of key 0 and consumer 1's of key 2 are due at
        // 1s and 1.33s (consumer 1's checker runs a third of an interval late). Consumer 1
        // crashes at 0.5s: its group stays in the repository; consumer 0's completes.
        let mut d = Drive::new(3, 3, params(|_| {}));
        d.agg(0, m(1, 0, 0));
        d.agg(1, m(2, 2, 0));
        d.until(500 * MILLI);
        d.world(WorldChange::ConsumerCrashed(1));
        d.until(2 * SECOND);
        assert_eq!((d.row(0), d.row(2)), (Vec::<u64>::new(), vec![2]));
        assert!(d.ctl.discards().is_empty());
    }

    #[test]
    fn a_restarted_instance_completes_the_groups_left_in_the_repository() {
        // Consumer 0 crashes with its group of key 0 in the shared repository; restarted at 2s,
        // its checker completes the group 1s later into its own resequencer, back up.
        let mut d = Drive::new(2, 1, params(|_| {}));
        d.agg(0, m(1, 0, 0));
        d.until(500 * MILLI);
        d.world(WorldChange::ConsumerCrashed(0));
        d.until(2 * SECOND);
        assert_eq!(d.row(0), vec![1]);
        d.world(WorldChange::ConsumerRestarted(0));
        d.until(3 * SECOND);
        assert_eq!(d.row(0), Vec::<u64>::new());
        d.until(10 * SECOND);
        assert_eq!(d.applied, vec![(4 * SECOND, 1, 0)]);
        assert!(d.ctl.discards().is_empty());
    }

    #[test]
    fn an_abandoned_delivery_releases_the_aggregators_lock() {
        // While consumer 0 aggregates, its timeout checker waits; abandoning the delivery (its
        // consumer suspended mid-service) lets the checker complete key 0's group at 1s.
        let mut d = Drive::new(1, 2, params(|p| p.resequencer_scope = Scope::Single));
        d.agg(0, m(1, 0, 0));
        d.until(500 * MILLI);
        d.begin(0, m(2, 1, 0));
        d.r.abandon(d.now, 0, &m(2, 1, 0), &mut d.ctl);
        d.until(SECOND);
        assert_eq!(d.row(0), Vec::<u64>::new());
        // Without the abandon the check would wait for the aggregation to end.
        let mut d = Drive::new(1, 2, params(|p| p.resequencer_scope = Scope::Single));
        d.agg(0, m(1, 0, 0));
        d.until(500 * MILLI);
        d.begin(0, m(2, 1, 0));
        d.until(SECOND);
        assert_eq!(d.row(0), vec![1]);
    }

    #[test]
    fn the_hazards_need_more_than_one_consumer_or_a_headerless_message() {
        use crate::Named;
        let hazard = |name: &str| {
            Resequencer::PARAMS
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.hazard)
                .unwrap()
        };
        for (consumers, missing, warned) in [(1, "0.0", false), (2, "0.1", true)] {
            let sc = crate::test_util::simple_with(
                "\"resequencer\"",
                consumers,
                100,
                50,
                &format!("group_header_missing = {missing}"),
                "",
            );
            let (persistent, scope, ignore) = (
                hazard("persistent"),
                hazard("resequencer_scope"),
                hazard("ignore_invalid_correlation_keys"),
            );
            assert_eq!((persistent.applies)("false", &sc), warned);
            assert_eq!((scope.applies)("route", &sc), warned);
            assert_eq!((ignore.applies)("true", &sc), warned);
            assert_eq!((hazard("repository").applies)("unversioned", &sc), warned);
            assert_eq!((hazard("resequencer").applies)("batch", &sc), warned);
            assert!(!(hazard("resequencer").applies)("stream", &sc));
        }
    }

    /// A scenario made in code is never validated: the registry still refuses a value out of
    /// its range when it builds the strategy (not applicable, with the range), so `build` need
    /// not repeat the check.
    #[test]
    fn capacity_and_batch_size_must_be_positive() {
        let sc = crate::test_util::simple("\"resequencer\"", 2, 100, "");
        assert!(crate::builds("resequencer", &sc).is_ok());
        for field in ["capacity", "batch_size"] {
            let err =
                crate::test_util::builds_with("resequencer", &sc, field, 0.into()).unwrap_err();
            assert!(
                err.contains(&format!(
                    "[strategy.resequencer] {field}: 0 is out of range"
                )),
                "{err}"
            );
        }
    }
}
