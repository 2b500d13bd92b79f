//! `cache_pessimistic`: competing consumers that serialise each record through a lock in a
//! distributed cache and reject messages older than the timestamp cached for the record (the
//! [Coherence+Hibernate] post's "Cache based Pessimistic Lock based Versioning", with Oracle
//! Coherence; sources and facts in docs/sources.md).
//!
//! Dispatch is round-robin, as [`crate::competing`]. The strategy also *is* the cache cluster: per
//! key a lock (its holder, or free, with a FIFO of waiting consumers) and a cached timestamp with
//! an expiry time. The handler follows the post's `doCacheAction` line by line:
//!
//! ```text
//! idCache.lock(cacheKey, -1);                       // begin: wait for the lock (forever)
//! Long cacheTime = (Long) idCache.get(cacheKey);    //   read when the lock is granted
//! if (cacheTime == null || timeStamp > cacheTime) { //   strictly greater: a tie is stale
//!     T result = action.doAction();                 // handle: the DB work (may throw)
//!     idCache.put(cacheKey, timeStamp);             //   put only AFTER the DB work succeeded
//!     return result;                                //   -> Applied
//! }
//! throw new StaleObjectException(...);              //   -> Rejected (caught, logged, acked)
//! finally { idCache.unlock(cacheKey); }             // every outcome, failures included
//! ```
//!
//! - **Lock** ([`Handler::begin`]): a free lock is taken and processing proceeds; a held one parks
//!   the consumer ([`Begin::Wait`]) in the key's FIFO. `unlock` hands the lock to the next waiter
//!   and unparks it. Coherence's `lock(key, -1)` waits forever, which is the default
//!   (`lock_wait = "forever"`). A finite `lock_wait` models a caller that checks `lock`'s boolean
//!   result and rolls the message back when it times out (the post ignores that result; with -1 it
//!   never matters).
//! - **Get and compare** happen when the lock is granted (at `begin`, or when a waiter is handed the
//!   lock), i.e. before the DB work, as in the post; an entry older than its expiry counts as
//!   absent (a `get` of an expired entry returns null).
//! - **DB work, put, unlock** ([`Handler::handle`], at the end of the service time): an accepted
//!   message runs [`HandlerCtx::process`]; if it fails (target outage, poison) nothing is put, the
//!   lock is released and the message rolls back (redelivered by the broker's policy). If it
//!   succeeds, the timestamp is put with expiry `now + ttl` and the message is applied. The put is
//!   not part of the JMS transaction: if the ack is later lost (crash, blip), the redelivered copy
//!   meets its own timestamp in the cache and is rejected (a tie), which is how the cache filters
//!   duplicates. A rejected message is acked (the post's listener catches `StaleObjectException`
//!   and logs "Rejecting the Stale Record").
//! - **Leases**: Coherence releases the locks of a cluster member that leaves. A consumer crash
//!   ([`Handler::abandon`] and [`WorldChange::ConsumerCrashed`]) releases its lock (handing it to
//!   the next waiter) and removes it from every wait queue; a lock wait that times out
//!   ([`Handler::abandon`]) removes the waiter. A consumer that only lost its broker connection
//!   (network blip) is still a cluster member: it keeps its lock and finishes.
//! - **Cache collapse** ([`WorldChange::CacheCollapse`]): every cached timestamp and every lock is
//!   lost. Holders are not told: they finish and `put` into the new, empty cache, and their
//!   `unlock` is a harmless no-op (Coherence's `unlock` by a non-owner returns false). The pending
//!   `lock` requests are re-issued to the restarted cluster, where the key now looks free: the first
//!   waiter of each key gets the lock and goes on (it reads the *empty* cache), the others wait
//!   behind it. A rolled-back older message redelivered after the collapse then finds no cached
//!   timestamp and is accepted: the [Coherence+Hibernate] post's "if all the node's in the cache
//!   collapse, and there were message's that were rolled back to be delivered later, unless the
//!   cache is primed or restored in some fashion, the solution could fail". A `ttl` shorter than
//!   the redelivery window does the same without any fault ("one would need to be careful regarding
//!   how often the cache is expired").
//!
//! Known weak spots that emerge: stale writes after a collapse or an expiry; stale *rejections*
//! drop commands ("in cases where incremental updates and their order needs to be preserved ...
//! the above mentioned locking strategies will not work"); equal timestamps (coarse clocks) reject
//! the newer message; lock contention on hot keys parks consumers (prefetch slots stay occupied).
//!
//! Simplifications: a rejected message takes the same service time as an accepted one (the engine
//! draws one service time per delivery); the cache is one logical map (no partitions, backups or
//! size-based eviction); lock requests are granted FIFO.
//!
//! Parameters (`[strategy.cache_pessimistic]`):
//! - `lock_wait`: how long `begin` waits for a held lock before the delivery rolls back; default
//!   `"forever"` (the post's `lock(key, -1)`).
//! - `ttl`: expiry of a cached timestamp after its put; default `"never"` (the post's `put` without
//!   expiry uses the cache scheme's `expiry-delay`, whose Coherence default 0 means never).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sim::strategy::{
    Begin, Control, DispatchCtx, Handler, HandlerCtx, MsgView, Outcome, Select, Strategy,
    WorldChange,
};
use sim::time::{Dur, Time};
use std::collections::VecDeque;

/// `[strategy.cache_pessimistic]` parameters.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CachePessimisticParams {
    /// Longest wait for a held lock before the delivery rolls back; `"forever"` (default).
    #[serde(
        default,
        deserialize_with = "forever_or_dur",
        serialize_with = "ser_forever"
    )]
    pub lock_wait: Option<Dur>,
    /// Expiry of a cached timestamp after its put; `"never"` (default).
    #[serde(
        default,
        deserialize_with = "forever_or_dur",
        serialize_with = "ser_never"
    )]
    pub ttl: Option<Dur>,
}

/// None as `"forever"`.
fn ser_forever<S: Serializer>(v: &Option<Dur>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_str("forever"),
        Some(d) => d.serialize(s),
    }
}

/// None as `"never"`.
fn ser_never<S: Serializer>(v: &Option<Dur>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_str("never"),
        Some(d) => d.serialize(s),
    }
}

/// `"never"` / `"forever"` -> None; a duration string -> Some.
fn forever_or_dur<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
    let s = String::deserialize(d)?;
    match s.trim() {
        "never" | "forever" => Ok(None),
        t => Dur::parse(t)
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format!("{e}, or \"never\" / \"forever\""))),
    }
}

const NONE: u32 = u32::MAX;

/// A cached timestamp and when it expires (`Time::MAX`: never).
#[derive(Clone, Copy, Debug)]
struct Entry {
    ts: u64,
    expires: Time,
}

/// What a consumer is doing with the cache.
#[derive(Clone, Copy, Debug)]
struct Session {
    /// Key whose lock it (believes it) holds, or NONE.
    held: u32,
    /// Key whose lock it waits for, or NONE.
    waiting: u32,
    /// Timestamp of the message in hand.
    ts: u64,
    /// The compare made when the lock was granted: accept (process and put) or reject.
    accept: bool,
}

/// Round-robin dispatch; a per-key cache lock and cached-timestamp compare in the handler.
#[derive(Debug)]
pub struct CachePessimistic {
    params: CachePessimisticParams,
    /// Round-robin dispatch, as `competing`.
    dispatch: crate::Competing,
    /// Per key: the lock holder, or NONE.
    holder: Vec<u32>,
    /// Per key: consumers waiting for the lock, in request order.
    waiters: Vec<VecDeque<u32>>,
    /// Per key: the cached timestamp.
    cache: Vec<Option<Entry>>,
    /// Per consumer.
    sessions: Vec<Session>,
}

impl CachePessimistic {
    /// A new instance for `brokers` brokers, `keys` keys and `consumers` consumers.
    pub fn new(
        brokers: usize,
        keys: usize,
        consumers: usize,
        params: CachePessimisticParams,
    ) -> Self {
        CachePessimistic {
            params,
            dispatch: crate::Competing::new(brokers),
            holder: vec![NONE; keys],
            waiters: (0..keys).map(|_| VecDeque::new()).collect(),
            cache: vec![None; keys],
            sessions: vec![
                Session {
                    held: NONE,
                    waiting: NONE,
                    ts: 0,
                    accept: false,
                };
                consumers
            ],
        }
    }

    /// `get(key)` under the lock, then the post's compare: accept iff nothing is cached (or it
    /// expired) or the message is strictly newer.
    fn compare(&self, now: Time, key: u32, ts: u64) -> bool {
        match self.cache[key as usize] {
            Some(e) if now < e.expires => ts > e.ts,
            _ => true,
        }
    }

    /// Consumer `c` now holds the lock of `key` and reads the cache (the post's `get` right after
    /// `lock` returns).
    fn grant(&mut self, now: Time, c: u32, key: u32) {
        self.holder[key as usize] = c;
        let accept = self.compare(now, key, self.sessions[c as usize].ts);
        let s = &mut self.sessions[c as usize];
        s.held = key;
        s.waiting = NONE;
        s.accept = accept;
    }

    /// The lock of `key` becomes free: the next waiter (if any) gets it and goes on.
    fn hand_over(&mut self, now: Time, key: u32, ctl: &mut Control) {
        self.holder[key as usize] = NONE;
        if let Some(w) = self.waiters[key as usize].pop_front() {
            self.grant(now, w, key);
            ctl.unpark(w);
        }
    }

    /// `unlock(key)` by `c`: releases the lock only if `c` owns it (after a collapse it may not).
    fn unlock(&mut self, now: Time, c: u32, key: u32, ctl: &mut Control) {
        let s = &mut self.sessions[c as usize];
        if s.held == key {
            s.held = NONE;
        }
        if self.holder[key as usize] == c {
            self.hand_over(now, key, ctl);
        }
    }

    /// Consumer `c` leaves the cluster or gives up: its lock goes, its lock request is withdrawn.
    fn release_all(&mut self, now: Time, c: u32, ctl: &mut Control) {
        let s = self.sessions[c as usize];
        if s.waiting != NONE {
            let q = &mut self.waiters[s.waiting as usize];
            if let Some(i) = q.iter().position(|&x| x == c) {
                q.remove(i);
            }
            self.sessions[c as usize].waiting = NONE;
        }
        if s.held != NONE {
            self.unlock(now, c, s.held, ctl);
        }
    }
}

impl Handler for CachePessimistic {
    /// `idCache.lock(cacheKey, lock_wait)`, then `get` and compare once it is granted.
    fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Begin {
        let (c, key) = (ctx.consumer, msg.key);
        self.sessions[c as usize].ts = msg.timestamp;
        let h = self.holder[key as usize];
        if h == NONE || h == c {
            // Free (or already ours: Coherence locks are re-entrant for their owner).
            self.grant(ctx.now, c, key);
            return Begin::Proceed;
        }
        self.waiters[key as usize].push_back(c);
        self.sessions[c as usize].waiting = key;
        Begin::Wait {
            timeout: self.params.lock_wait.map(|d| d.micros()),
        }
    }

    /// The DB work if the compare accepted, then `put`; `unlock` in `finally`.
    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Outcome {
        let (c, key) = (ctx.consumer, msg.key);
        let accept = self.sessions[c as usize].accept;
        let outcome = if !accept {
            Outcome::Rejected
        } else {
            match ctx.process() {
                Ok(()) => {
                    let expires = match self.params.ttl {
                        Some(d) => ctx.now.saturating_add(d.micros()),
                        None => Time::MAX,
                    };
                    // Into whatever cache there is now (a fresh one after a collapse).
                    self.cache[key as usize] = Some(Entry {
                        ts: msg.timestamp,
                        expires,
                    });
                    Outcome::Applied { state_seq: msg.seq }
                }
                Err(r) => Outcome::Failed(r),
            }
        };
        self.unlock(ctx.now, c, key, ctl);
        outcome
    }

    /// Crash or lock-wait timeout: the lock request is withdrawn, a held lock released.
    fn abandon(&mut self, now: Time, consumer: u32, _msg: &MsgView, ctl: &mut Control) {
        self.release_all(now, consumer, ctl);
    }
}

impl crate::Named for CachePessimistic {
    const NAME: &'static str = "cache_pessimistic";
    const SUMMARY: &'static str =
        "round-robin; Coherence-style per-key lock + cached timestamp compare ([Coherence+Hibernate]); stale after cache collapse/expiry, drops commands, ties rejected";
    const GUARANTEE: &'static str = "stale_writes";
    const ROLE: crate::Role = crate::Role::Handler { rank: 2 };
    type Params = CachePessimisticParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "lock_wait",
            meaning: "longest wait for a held lock before the delivery rolls back and is redelivered; \"forever\" waits as long as it takes",
            unit: "duration or \"forever\"",
            default: "forever",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "the timeout of Coherence NamedCache.lock(key, timeout) (-1 = forever, as in the post)",
            hazard: None,
        },
        crate::ParamInfo {
            name: "ttl",
            meaning: "expiry of a cached timestamp after its put; an expired entry reads as absent, so an older message is accepted",
            unit: "duration or \"never\"",
            default: "never",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "Coherence cache expiry (<expiry-delay> / put(key, value, ttl))",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: CachePessimisticParams) -> Result<Self, String> {
        Ok(CachePessimistic::new(
            sc.brokers.len(),
            sc.workload.keys as usize,
            sc.consumers.count as usize,
            p,
        ))
    }
}

impl Strategy for CachePessimistic {
    #[inline]
    fn select(&mut self, ctx: &DispatchCtx, _msg: &MsgView, _ctl: &mut Control) -> Select {
        self.dispatch
            .pick(ctx)
            .map_or(Select::Stop, Select::Consumer)
    }

    fn on_world(&mut self, now: Time, change: WorldChange, ctl: &mut Control) {
        match change {
            // Coherence releases the locks of a member that leaves the cluster.
            WorldChange::ConsumerCrashed(c) => self.release_all(now, c, ctl),
            WorldChange::CacheCollapse => {
                // Every entry is gone.
                for e in &mut self.cache {
                    *e = None;
                }
                // Every lock is gone; holders are not told (their unlock becomes a no-op). The
                // pending lock requests reach the restarted cluster, where the key is free: the
                // first waiter gets it (and reads the empty cache), the others wait behind it.
                for key in 0..self.holder.len() {
                    if self.holder[key] != NONE {
                        self.hand_over(now, key as u32, ctl);
                    }
                }
            }
            WorldChange::ConsumerRestarted(_)
            | WorldChange::Target { .. }
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
    use crate::test_util::{run, scenario, simple_with};
    use sim::Metrics;

    const NAME: &str = "cache_pessimistic";

    /// 3000 messages at 400/s (7.5s) over 50 keys, 8 consumers (exponential 10ms, prefetch 1),
    /// `workload` and `producers` lines added to their tables, plus `extra` TOML.
    fn sc(workload: &str, producers: &str, extra: &str) -> sim::Scenario {
        let extra = format!("[producers]\n{producers}\n{extra}");
        simple_with(
            r#""competing", "cache_pessimistic""#,
            8,
            400,
            50,
            workload,
            &extra,
        )
    }

    /// Timestamps fine enough to be unique per key (the post's assumption).
    const FINE: &str = "timestamp_resolution = \"1us\"";

    /// A DB outage at 3s for 1s with non-blocking redelivery after 1s: messages that fail are
    /// overtaken by newer messages of their keys.
    const OUTAGE: &str = r#"
[redelivery]
mode = "non_blocking"
initial_delay = "1s"
[[fault]]
kind = "db_outage"
at = "3s"
for = "1s"
"#;

    /// The outage near the end of production (5s-6s), redelivery 5s later (10s-11s): newer
    /// messages produced after 6s are applied first, and nothing newer follows the redeliveries.
    const LATE_OUTAGE: &str = r#"
[redelivery]
mode = "non_blocking"
initial_delay = "5s"
[[fault]]
kind = "db_outage"
at = "5s"
for = "1s"
"#;

    /// The whole cluster collapses at 8.5s: after the newer applies, before the redeliveries.
    const COLLAPSE: &str = "[[fault]]\nkind = \"cache_collapse\"\nat = \"8500ms\"\n";

    fn settled(m: &Metrics) {
        assert_eq!(m.pending_at_end, 0, "{m:?}");
        assert_eq!(m.lost, 0, "{m:?}");
        assert_eq!(m.applied + m.stale_rejected, m.produced, "{m:?}");
    }

    /// Strength: with competing consumers, a DB outage and non-blocking redelivery (which make
    /// plain competing consumers reorder), every apply goes forward: the overtaken messages come
    /// back and meet a newer cached timestamp, and are rejected as stale. No key ends stale.
    #[test]
    fn rejects_overtaken_redeliveries_and_never_applies_backwards() {
        let s = sc("", FINE, OUTAGE);
        for seed in 1..=3 {
            let base = run(&s, "competing", seed);
            assert!(base.ordering_violations > 100, "seed {seed}: {base:?}");
            let m = run(&s, NAME, seed);
            assert!(m.coverage.rollbacks > 100, "seed {seed}: {m:?}");
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}: {m:?}");
            assert!(m.stale_rejected > 100, "seed {seed}: {m:?}");
            settled(&m);
        }
    }

    /// Strength: the cached timestamp also filters duplicates. A network blip loses the ack of an
    /// applied message; its redelivered copy meets its own timestamp (a tie) and is rejected.
    #[test]
    fn rejects_redelivered_duplicates_after_lost_acks() {
        let s = scenario(
            r#"
strategies = ["competing", "cache_pessimistic"]
[workload]
messages = 3000
rate = "400/s"
keys = 50
[producers]
timestamp_resolution = "1us"
[[broker]]
name = "a"
[consumers]
count = 8
ack_latency = "5ms"
service = { dist = "exponential", mean = "10ms" }
[[fault]]
kind = "network_blip"
rate = "2/s"
for = "200ms"
"#,
        );
        for seed in 1..=3 {
            let base = run(&s, "competing", seed);
            assert!(base.duplicates > 5, "seed {seed}: {base:?}");
            let m = run(&s, NAME, seed);
            assert!(m.redeliveries > 5, "seed {seed}: {m:?}");
            assert_eq!(m.duplicates, 0, "seed {seed}: {m:?}");
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}: {m:?}");
            settled(&m);
        }
    }

    /// Weakness ([Coherence+Hibernate]): "if all the node's in the cache collapse, and there were
    /// message's that were rolled back to be delivered later, unless the cache is primed or
    /// restored ... the solution could fail". The rolled-back older messages find an empty cache
    /// and are applied over newer ones; with nothing newer after them, the keys end stale. Without
    /// the collapse the same run is clean.
    #[test]
    fn cache_collapse_accepts_rolled_back_older_messages() {
        let clean = sc("", FINE, LATE_OUTAGE);
        let collapsed = sc("", FINE, &format!("{LATE_OUTAGE}{COLLAPSE}"));
        for seed in 1..=3 {
            let m = run(&clean, NAME, seed);
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}: {m:?}");
            assert!(m.stale_rejected > 100, "seed {seed}: {m:?}");
            let m = run(&collapsed, NAME, seed);
            assert_eq!(m.coverage.cache_collapses, 1);
            assert!(m.ordering_violations > 100, "seed {seed}: {m:?}");
            assert!(m.final_state_mismatches > 25, "seed {seed}: {m:?}");
            assert!(m.stale_rejected < 10, "seed {seed}: {m:?}");
            settled(&m);
        }
    }

    /// Weakness ([Coherence+Hibernate]): "one would need to be careful regarding how often the
    /// cache is expired": a `ttl` shorter than the redelivery window forgets the newer timestamps
    /// before the older messages come back, with no fault at all in the cache.
    #[test]
    fn ttl_shorter_than_the_redelivery_window_accepts_stale_messages() {
        let short = sc(
            "",
            FINE,
            &format!("{LATE_OUTAGE}[strategy.cache_pessimistic]\nttl = \"2s\"\n"),
        );
        let long = sc(
            "",
            FINE,
            &format!("{LATE_OUTAGE}[strategy.cache_pessimistic]\nttl = \"1h\"\n"),
        );
        for seed in 1..=3 {
            let m = run(&short, NAME, seed);
            assert!(m.ordering_violations > 100, "seed {seed}: {m:?}");
            assert!(m.final_state_mismatches > 25, "seed {seed}: {m:?}");
            settled(&m);
            let m = run(&long, NAME, seed);
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}: {m:?}");
        }
    }

    /// Weakness ([Coherence+Hibernate]): "in cases where incremental updates and their order needs
    /// to be preserved ..., the above mentioned locking strategies will not work": every overtaken
    /// command is rejected as stale, i.e. dropped, and the keys' final states are wrong.
    #[test]
    fn drops_overtaken_commands() {
        let s = sc("kind = \"command\"", FINE, OUTAGE);
        for seed in 1..=3 {
            let m = run(&s, NAME, seed);
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            assert!(m.lost_commands > 100, "seed {seed}: {m:?}");
            assert_eq!(m.lost_commands, m.stale_rejected, "seed {seed}: {m:?}");
            assert!(m.final_state_mismatches > 25, "seed {seed}: {m:?}");
        }
    }

    /// Weakness: the compare is strictly greater, so a newer message with the same (coarse)
    /// timestamp is rejected, even with one consumer and no fault at all; the last update of a
    /// second is lost whenever an earlier one of that second was applied.
    #[test]
    fn equal_timestamps_reject_the_newer_message() {
        let one = |res: &str| {
            scenario(&format!(
                r#"
strategies = ["cache_pessimistic"]
[workload]
messages = 1000
rate = "50/s"
keys = 50
[producers]
timestamp_resolution = "{res}"
[[broker]]
name = "a"
[consumers]
count = 1
service = {{ dist = "exponential", mean = "10ms" }}
"#
            ))
        };
        for seed in 1..=3 {
            let m = run(&one("1s"), NAME, seed);
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            assert!(m.stale_rejected > 100, "seed {seed}: {m:?}");
            assert!(m.final_state_mismatches > 5, "seed {seed}: {m:?}");
            let m = run(&one("1us"), NAME, seed);
            assert_eq!(m.stale_rejected, 0, "seed {seed}: {m:?}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}: {m:?}");
        }
    }

    /// Weakness: lock contention. With hot keys (Zipf 1.5) consumers park behind one another's
    /// locks (holding their prefetch slots): throughput falls well below the load, and latency
    /// grows by orders of magnitude, where competing consumers keep up. With uniform keys the cost
    /// is small.
    #[test]
    fn hot_keys_serialise_on_their_locks() {
        let hot = sc("key_distribution = \"zipf\"\nzipf_exponent = 1.5", FINE, "");
        let base = run(&hot, "competing", 1);
        let m = run(&hot, NAME, 1);
        assert!(base.throughput_per_s > 380.0, "{base:?}");
        assert!(m.throughput_per_s < 300.0, "{m:?}");
        assert!(m.latency_ms.p50 > 100.0 * base.latency_ms.p50, "{m:?}");
        assert_eq!(m.ordering_violations, 0);
        settled(&m);
        let uniform = sc("", FINE, "");
        let m = run(&uniform, NAME, 1);
        assert!(m.throughput_per_s > 380.0, "{m:?}");
        assert!(m.latency_ms.p50 < 20.0, "{m:?}");
    }

    /// Coherence releases the locks of a member that leaves the cluster: a consumer that crashes
    /// for good while holding (or waiting for) the only key's lock does not stall the others.
    #[test]
    fn a_crashed_holder_releases_its_lock() {
        let s = scenario(
            r#"
strategies = ["cache_pessimistic"]
[workload]
messages = 400
rate = "80/s"
keys = 1
[producers]
timestamp_resolution = "1us"
[[broker]]
name = "a"
[consumers]
count = 2
service = "20ms"
[[fault]]
kind = "consumer_crash"
consumer = 0
at = "2s"
"#,
        );
        for seed in 1..=5 {
            let m = run(&s, NAME, seed);
            assert_eq!(m.coverage.consumer_crashes, 1);
            assert_eq!(m.ordering_violations, 0, "seed {seed}: {m:?}");
            settled(&m);
        }
    }

    /// A finite `lock_wait` gives up: the delivery rolls back and is redelivered (here without any
    /// DB outage, the only rollbacks are lock timeouts), and still never applies backwards.
    #[test]
    fn lock_wait_timeouts_roll_back() {
        let s = sc(
            "key_distribution = \"zipf\"\nzipf_exponent = 1.5",
            FINE,
            "[redelivery]\nmode = \"non_blocking\"\ninitial_delay = \"100ms\"\nmax_redeliveries = -1\n[strategy.cache_pessimistic]\nlock_wait = \"5ms\"\n",
        );
        let m = run(&s, NAME, 1);
        assert!(m.coverage.rollbacks > 100, "{m:?}");
        assert_eq!(m.coverage.db_outages, 0);
        assert_eq!(m.ordering_violations, 0, "{m:?}");
        assert_eq!(m.final_state_mismatches, 0, "{m:?}");
        settled(&m);
    }

    /// Everything at once (crashes, blips, collapses, outages, a broker crash, prefetch): the lock
    /// bookkeeping never strands a consumer, and runs are deterministic.
    #[test]
    fn survives_every_fault_and_is_deterministic() {
        let text = |wait: &str| {
            format!(
                r#"
strategies = ["cache_pessimistic"]
[workload]
messages = 2000
rate = "300/s"
keys = 5
key_distribution = "zipf"
zipf_exponent = 1.2
[[broker]]
name = "a"
[[broker]]
name = "b"
[consumers]
count = 6
prefetch = 3
ack_latency = "2ms"
service = {{ dist = "exponential", mean = "5ms" }}
[redelivery]
mode = "non_blocking"
initial_delay = "200ms"
max_redeliveries = -1
[[fault]]
kind = "consumer_crash"
rate = "1/s"
for = "500ms"
[[fault]]
kind = "network_blip"
rate = "1/s"
for = "100ms"
[[fault]]
kind = "cache_collapse"
rate = "0.5/s"
[[fault]]
kind = "db_outage"
rate = "0.3/s"
for = "300ms"
[[fault]]
kind = "broker_crash"
rate = "0.1/s"
for = "2s"
[strategy.cache_pessimistic]
lock_wait = "{wait}"
"#
            )
        };
        for wait in ["forever", "20ms"] {
            let s = scenario(&text(wait));
            for seed in 1..=3 {
                let m = run(&s, NAME, seed);
                assert!(m.coverage.cache_collapses > 0 && m.coverage.consumer_crashes > 0);
                assert_eq!(
                    m.ended_by,
                    sim::summary::EndReason::Settled,
                    "{wait} {seed}"
                );
                settled(&m);
                assert_eq!(
                    m,
                    run(&s, NAME, seed),
                    "{wait} seed {seed}: not deterministic"
                );
            }
        }
    }

    #[test]
    fn parameters_parse_never_forever_and_durations() {
        let p: super::CachePessimisticParams =
            toml::from_str("lock_wait = \"250ms\"\nttl = \"never\"").unwrap();
        assert_eq!(p.lock_wait.map(|d| d.micros()), Some(250_000));
        assert!(p.ttl.is_none());
        let p: super::CachePessimisticParams = toml::from_str("lock_wait = \"forever\"").unwrap();
        assert!(p.lock_wait.is_none() && p.ttl.is_none());
        assert!(toml::from_str::<super::CachePessimisticParams>("ttl = \"soon\"").is_err());
        assert!(toml::from_str::<super::CachePessimisticParams>("lease = \"1s\"").is_err());
    }

    // --- The cache and its lock table, called directly.

    use super::{CachePessimistic, Entry, NONE};
    use sim::strategy::{Control, Handler, MsgView, Strategy, WorldChange};
    use sim::time::Time;

    /// Consumer `c` waits for the lock of `key` (what `begin` does when another holds it).
    fn wait(s: &mut CachePessimistic, c: u32, key: u32) {
        s.waiters[key as usize].push_back(c);
        s.sessions[c as usize].waiting = key;
    }

    #[test]
    fn the_compare_accepts_only_a_strictly_newer_timestamp_until_the_entry_expires() {
        let mut s = CachePessimistic::new(1, 1, 1, Default::default());
        assert!(s.compare(0, 0, 0), "nothing cached");
        s.cache[0] = Some(Entry {
            ts: 50,
            expires: 100,
        });
        assert!(s.compare(99, 0, 51));
        assert!(!s.compare(99, 0, 50), "a tie is stale");
        assert!(!s.compare(99, 0, 49));
        assert!(
            s.compare(100, 0, 10),
            "at its expiry the entry reads as absent"
        );
    }

    #[test]
    fn a_consumer_that_leaves_withdraws_its_lock_request_and_releases_its_lock() {
        let mut s = CachePessimistic::new(1, 1, 4, Default::default());
        let ctl = &mut Control::default();
        s.grant(0, 0, 0);
        for c in 1..=3 {
            wait(&mut s, c, 0);
        }
        // 2 gives up waiting (a lock_wait timeout): withdrawn, the others keep their places.
        let msg = MsgView {
            id: 0,
            key: 0,
            seq: 0,
            timestamp: 0,
            producer: 0,
            redeliveries: 0,
            group: None,
        };
        s.abandon(1, 2, &msg, ctl);
        assert_eq!(s.waiters[0], [1, 3]);
        assert_eq!(s.sessions[2].waiting, NONE);
        // The holder crashes: its lock goes to the first waiter.
        s.on_world(2, WorldChange::ConsumerCrashed(0), ctl);
        assert_eq!(s.holder[0], 1);
        assert_eq!(s.waiters[0], [3]);
    }

    #[test]
    fn a_cache_collapse_forgets_every_entry_and_gives_each_held_lock_to_its_first_waiter() {
        // Key 0 held by 0 with waiters 1 and 2; key 1 held by 3; key 2 free. 1's message is
        // older than the cached timestamp.
        let mut s = CachePessimistic::new(1, 3, 4, Default::default());
        let ctl = &mut Control::default();
        s.cache[0] = Some(Entry {
            ts: 5,
            expires: Time::MAX,
        });
        s.grant(0, 0, 0);
        s.sessions[1].ts = 3;
        wait(&mut s, 1, 0);
        wait(&mut s, 2, 0);
        s.grant(0, 3, 1);
        s.on_world(10, WorldChange::CacheCollapse, ctl);
        assert!(s.cache.iter().all(Option::is_none));
        assert_eq!(s.holder, [1, NONE, NONE]);
        assert_eq!(s.waiters[0], [2]);
        assert!(
            s.sessions[1].accept,
            "the older message meets the empty cache"
        );
        // The old holder was not told: its unlock leaves the lock to its new holder.
        s.unlock(11, 0, 0, ctl);
        assert_eq!(s.holder[0], 1);
    }
}
