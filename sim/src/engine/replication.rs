//! A Kafka topic's replicas (`[broker.replication]`): the broker leads every partition and its
//! followers fetch what it writes. A record is written at the leader (with `acks = "1"` the
//! producer is answered then: `Enqueue`), reaches the followers `replication_lag` later, and
//! only then is below the high watermark: readable by consumers, and with `acks = "all"`
//! acknowledged (`Enqueue`). Kafka 4.0's `Partition.scala`: `appendRecordsToLeader` refuses an
//! `acks = all` write while the in-sync replicas are fewer than `min.insync.replicas`
//! (`NotEnoughReplicas`, retriable), and `maybeIncrementLeaderHW` does not move the high
//! watermark then (KAFKA-15583).
//!
//! This file keeps the log's state (the [`Log`] node: which replicas are up and in sync, the
//! records above the high watermark) and moves the high watermark; a leader's crash, the
//! election and a replica's return are broker failover (`failover.rs`), which asks this file
//! to cut the log back. A scenario without `[broker.replication]` has no log and pays one
//! test per send ([`Engine::store_sent`]).
//!
//! Logs are numbered: without `brokers` broker `b`'s one log (every partition, one leader) is
//! log `b`; with `[broker.replication] brokers` (a [`Cluster`]) each partition has its own log,
//! numbered after the brokers' and made at its first write, its replicas placed on the
//! cluster's brokers as KRaft's `StripedReplicaPlacer` places them (without racks: partition
//! `p`'s replicas on brokers `p, p+1, ...` modulo the brokers, the first its preferred leader;
//! the placer's random start is taken as broker 0, and its reshuffle after every `brokers`
//! partitions is not modelled) [K45].

use super::events::Ev;
use super::state::Loc;
use super::walk::walk;
use super::Engine;
use crate::dist::Sampler;
use crate::history::{DiscardReason, Event, Observer};
use crate::rng::{stream, Component, ELECTION, REPLICATION_LAG};
use crate::scenario::{Acks, Replication};
use crate::time::Time;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// One record of the log, by its slot and id, at its offset.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub slot: u32,
    pub id: u64,
    pub offset: u64,
    /// When the followers in sync have it (above the high watermark only).
    pub due: Time,
    /// When the leader wrote it: under `acks = "all"` the producer's request for it is still
    /// outstanding, and its delivery deadline runs from (at the latest) then.
    pub written: Time,
}

/// One copy of the partitions.
#[derive(Clone, Copy, Debug)]
pub(super) struct Replica {
    /// The cluster's broker it is on (with `brokers`; else its index).
    pub node: u16,
    pub up: bool,
    /// Its broker is alive and does not fetch (a `replica_stall`): in the ISR it holds the high
    /// watermark until its leader drops it.
    pub stalled: bool,
    /// In the ISR (the controller keeps the last member of an ISR in it, dead or alive).
    pub in_sync: bool,
    /// Its log's end while it is out of sync or down (an in-sync follower has the high
    /// watermark, the leader everything).
    pub end: u64,
}

/// Who leads the partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Leadership {
    Leader(u8),
    /// Its leader's broker is down and the controller has not fenced it yet (`brokers`): no
    /// leader, writes are refused; the election comes with the fence ([`Engine::node_fenced`]).
    Leaderless,
    /// The controller is electing this replica (`unclean`: from out of sync).
    Electing {
        to: u8,
        unclean: bool,
    },
    /// No replica may lead: the partitions are offline until one returns.
    Offline,
}

/// A broker's replicated log ([`Replication`], resolved).
pub(super) struct Log {
    /// The `[[broker]]` whose queue it feeds (its own number without `brokers`).
    pub broker: u16,
    /// One partition's log in a [`Cluster`] (`brokers`): the `[[broker]]` serves on through its
    /// brokers' crashes.
    pub spread: bool,
    pub acks: Acks,
    pub min_in_sync: u8,
    pub unclean: bool,
    lag: (Sampler, ChaCha8Rng),
    election: (Sampler, ChaCha8Rng),
    pub replicas: Vec<Replica>,
    pub leadership: Leadership,
    /// Replicas down, in the order they went down (a crash's end brings back the first).
    pub down: VecDeque<u8>,
    /// Crashes that found no leader to take down (their ends bring nobody back).
    pub idle_crashes: u32,
    /// Written at the leader, not yet on every follower in sync, in log order.
    pub above: VecDeque<Entry>,
    /// Below the high watermark and missed by a replica out of sync: kept only while one is,
    /// for an unclean election (what its new leader lacks).
    pub missed: VecDeque<Entry>,
    /// Sent to the partition while it has no leader (`Leadership::Leaderless`), in order, as
    /// (slot, id, when): they wait in their producers' accumulators (`RecordAccumulator.ready`
    /// drains no batch of a partition whose leader is unknown, the others' go on) and are sent
    /// again once a leader is elected.
    pub waiting: Vec<(u32, u64, Time)>,
    /// When its leader's broker died (`Leadership::Leaderless`): its followers fetched until
    /// then.
    pub leader_lost: Time,
    /// The leader's log end (the next offset).
    pub end: u64,
    /// The high watermark.
    pub hw: u64,
    /// An `Ev::Replicated` is scheduled.
    armed: bool,
    /// When the last record written reaches the followers (they fetch in log order).
    last_due: Time,
}

impl Log {
    pub fn new(r: &Replication, acks: Acks, lag_rng: ChaCha8Rng, election_rng: ChaCha8Rng) -> Log {
        let n = r.replication_factor.clamp(1, u8::MAX as u32) as u8;
        let replicas = (0..n)
            .map(|i| Replica {
                node: i as u16,
                up: true,
                stalled: false,
                in_sync: true,
                end: 0,
            })
            .collect();
        Log {
            broker: 0,
            spread: false,
            acks,
            min_in_sync: r.min_insync_replicas.min(n as u32).max(1) as u8,
            unclean: r.unclean_leader_election,
            lag: (r.replication_lag.0.sampler(), lag_rng),
            election: (r.leader_election_time.0.sampler(), election_rng),
            replicas,
            leadership: Leadership::Leader(0),
            down: VecDeque::new(),
            idle_crashes: 0,
            above: VecDeque::new(),
            missed: VecDeque::new(),
            waiting: Vec::new(),
            leader_lost: 0,
            end: 0,
            hw: 0,
            armed: false,
            last_due: 0,
        }
    }

    /// Replicas alive and in sync, the leader's included.
    pub fn in_sync_up(&self) -> u8 {
        self.replicas.iter().filter(|r| r.up && r.in_sync).count() as u8
    }

    /// The ISR's size, and whether all of it is alive and fetching. A follower whose broker is
    /// down stays in the ISR until the controller fences the broker, one that stalls until its
    /// leader drops it, and the high watermark waits for it meanwhile
    /// (`Partition.maybeIncrementLeaderHW` counts the ISR's log ends) [K46][K48]; without
    /// `brokers` a leader never has such a follower.
    fn isr(&self) -> (u8, bool) {
        let mut n = 0;
        let mut all_up = true;
        for r in self.replicas.iter().filter(|r| r.in_sync) {
            n += 1;
            all_up &= r.up && !r.stalled;
        }
        (n, all_up)
    }

    /// Its replica on the cluster's broker `node`, if any.
    pub fn on_node(&self, node: u16) -> Option<u8> {
        self.replicas
            .iter()
            .position(|r| r.node == node)
            .map(|i| i as u8)
    }

    /// Some replica is out of sync (down, or catching up).
    fn someone_behind(&self) -> bool {
        self.replicas.iter().any(|r| !r.up || !r.in_sync)
    }

    /// A draw of the followers' fetch of a record.
    pub fn lag(&mut self) -> Time {
        self.lag.0.sample(&mut self.lag.1)
    }

    /// A draw of the time to elect a new leader.
    pub fn election_time(&mut self) -> Time {
        self.election.0.sample(&mut self.election.1)
    }

    /// The log end of its replica `r`, in the ISR, as a new leader of a partition of a
    /// [`Cluster`]: a follower that fetches has what its fetches brought by `until` (now, or
    /// when the old leader died), above the high watermark too; a stalled one what it had
    /// when it stopped.
    pub fn in_sync_end(&self, r: u8, until: Time) -> u64 {
        let rep = self.replicas[r as usize];
        if rep.stalled {
            return rep.end.min(self.end);
        }
        self.hw + self.above.iter().take_while(|e| e.due <= until).count() as u64
    }

    /// The high watermark may move: a leader, enough replicas in sync, all of them alive.
    fn may_commit(&self) -> bool {
        let (n, all_up) = self.isr();
        matches!(self.leadership, Leadership::Leader(_)) && all_up && n >= self.min_in_sync
    }
}

/// One broker of a [`Cluster`].
#[derive(Clone, Copy, Debug)]
pub(super) struct NodeState {
    pub up: bool,
    /// Crashes that found it down already (their ends bring nothing back).
    pub idle: u32,
    /// It does not fetch (a `replica_stall`).
    pub stalled: bool,
    /// Stalls so far: an ISR check of an earlier one is stale.
    pub stalls: u32,
}

/// A Kafka cluster's brokers, over which one `[[broker]]`'s partitions are spread
/// (`[broker.replication] brokers`): which are up, and each partition's log.
pub(super) struct Cluster {
    pub nodes: Vec<NodeState>,
    /// Per partition, its log's number (made at the partition's first write).
    pub parts: Vec<u16>,
    replication: Replication,
    acks: Acks,
    seed: u64,
    /// The controller's fence of a crashed broker: `leader_election_time` after its crash.
    fence: (Sampler, ChaCha8Rng),
    /// `leader.imbalance.check.interval.seconds` under `auto.leader.rebalance.enable`.
    pub balance_every: Option<Time>,
    /// A leader imbalance check is scheduled.
    pub balance_armed: bool,
    /// `replica.lag.time.max.ms`; the leaders check their ISRs every half of it.
    pub lag_time_max: Time,
}

/// `leader.imbalance.check.interval.seconds`: 300 [K47].
const LEADER_IMBALANCE_CHECK: Time = 300_000_000;

/// `replica.lag.time.max.ms`: 30000 [K25].
const REPLICA_LAG_TIME_MAX: Time = 30_000_000;

impl Cluster {
    pub fn new(r: &Replication, acks: Acks, seed: u64, fence_rng: ChaCha8Rng) -> Cluster {
        let n = r.brokers.unwrap_or(r.replication_factor).max(1) as usize;
        Cluster {
            nodes: vec![
                NodeState {
                    up: true,
                    idle: 0,
                    stalled: false,
                    stalls: 0,
                };
                n
            ],
            parts: Vec::new(),
            replication: r.clone(),
            acks,
            seed,
            fence: (r.leader_election_time.0.sampler(), fence_rng),
            balance_every: r
                .auto_leader_rebalance
                .unwrap_or(true)
                .then_some(LEADER_IMBALANCE_CHECK),
            balance_armed: false,
            lag_time_max: r.replica_lag_time_max.map_or(REPLICA_LAG_TIME_MAX, |d| d.0),
        }
    }

    /// When the leaders' ISR check (`ReplicaManager`'s `isr-expiration`, every half of
    /// `replica.lag.time.max.ms` from the start) first finds a follower whose last fetch was at
    /// `since` out of sync: the first check more than `replica.lag.time.max.ms` after it
    /// (`isCaughtUp`) [K48].
    pub fn isr_check_after(&self, since: Time) -> Time {
        let every = (self.lag_time_max / 2).max(1);
        (since + self.lag_time_max) / every * every + every
    }

    /// A draw of the time from a broker's crash to its fence (and its leaders' election).
    pub fn fence_time(&mut self) -> Time {
        self.fence.0.sample(&mut self.fence.1)
    }

    /// Partition `p`'s log, new, for `[[broker]]` `b`: its replicas on brokers `p, p+1, ...`
    /// (`StripedReplicaPlacer` without racks). A replica on a broker down now is out of the
    /// ISR (made during a crash: as if fenced); the first alive leads (else the partition is
    /// offline, its preferred replica the ISR).
    fn new_log(&self, b: u16, p: u32) -> Log {
        let index = u32::from(b) | (p + 1) << 16;
        let mut log = Log::new(
            &self.replication,
            self.acks,
            stream(self.seed, Component::Broker, index, REPLICATION_LAG),
            stream(self.seed, Component::Broker, index, ELECTION),
        );
        log.broker = b;
        log.spread = true;
        let n = self.nodes.len() as u32;
        for (i, r) in log.replicas.iter_mut().enumerate() {
            r.node = ((p + i as u32) % n) as u16;
            let state = self.nodes[r.node as usize];
            r.up = state.up;
            r.in_sync = r.up;
            r.stalled = state.stalled;
        }
        match log.replicas.iter().position(|r| r.up) {
            Some(l) => log.leadership = Leadership::Leader(l as u8),
            None => {
                log.leadership = Leadership::Offline;
                log.replicas[0].in_sync = true;
            }
        }
        log
    }
}

impl<O: Observer> Engine<'_, O> {
    /// A producer's send routed to broker `b` is stored there: at once, or, with
    /// `[broker.replication]`, written at the partition's leader. `Err(true)`: refused (the
    /// ISR is below `min.insync.replicas` under `acks = "all"`); the producer retries it,
    /// its later sends behind it.
    #[inline(always)]
    pub(super) fn store_sent(&mut self, b: u16, slot: u32) -> Result<(), bool> {
        if self.replicated {
            return self.write_at_leader(b, slot);
        }
        self.accept(b, slot);
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn write_at_leader(&mut self, b: u16, slot: u32) -> Result<(), bool> {
        walk!();
        let now = self.now;
        let l = match self.w.clusters.get(b as usize) {
            Some(Some(_)) => self.partition_log(b, slot),
            _ => b,
        };
        let Some(log) = self.w.logs[l as usize].as_deref_mut() else {
            // No log of replicas: a transactional producer's write (`txn.rs`), or a plain one.
            if self.txns.is_some() {
                self.store_in_txn(b, slot);
            } else {
                self.accept(b, slot);
            }
            return Ok(());
        };
        if log.spread && !matches!(log.leadership, Leadership::Leader(_)) {
            if log.leadership == Leadership::Leaderless {
                // Its leader's broker is down, not yet fenced: the record waits in its
                // producer's batch for the partition, the producer's other partitions go on.
                let id = self.w.slab.get(slot).view.id;
                log.waiting.push((slot, id, now));
                self.w.slab.get_mut(slot).loc = Loc::Queued(b);
                return Ok(());
            }
            // Offline: retried by the producer, its later sends behind it.
            return Err(true);
        }
        let in_sync = log.in_sync_up();
        // `appendRecordsToLeader` counts the ISR, a follower not yet fenced included.
        if log.acks == Acks::All && log.isr().0 < log.min_in_sync {
            return Err(true);
        }
        // With no follower in sync the leader alone is the ISR: its write is committed at once.
        let lag = if in_sync > 1 { log.lag() } else { 0 };
        let due = log.last_due.max(now + lag);
        log.last_due = due;
        let id = self.w.slab.get(slot).view.id;
        log.above.push_back(Entry {
            slot,
            id,
            offset: log.end,
            due,
            written: now,
        });
        log.end += 1;
        let acks = log.acks;
        self.flush();
        self.w.slab.get_mut(slot).loc = Loc::Queued(b);
        if acks == Acks::Leader {
            // Answered once the leader wrote it: stored, as far as the producer knows.
            let msg = self.msg_ref(slot);
            self.emit(Event::Enqueue {
                t: now,
                msg,
                broker: b,
            });
        }
        self.arm_replication(l);
        Ok(())
    }

    /// The number of the log of the partition `slot`'s record goes to, at broker `b` (a
    /// [`Cluster`]): made at its first write.
    #[inline(never)]
    fn partition_log(&mut self, b: u16, slot: u32) -> u16 {
        let view = self.view(slot);
        let p = self.strategy.partition(&view);
        let cluster = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        while cluster.parts.len() <= p as usize {
            let next = cluster.parts.len() as u32;
            let log = cluster.new_log(b, next);
            cluster.parts.push(self.w.logs.len() as u16);
            self.w.logs.push(Some(Box::new(log)));
        }
        cluster.parts[p as usize]
    }

    /// Schedules the next move of log `l`'s high watermark, if one may come.
    #[inline(never)]
    pub(super) fn arm_replication(&mut self, l: u16) {
        let now = self.now;
        let Some(log) = self.w.logs[l as usize].as_deref_mut() else {
            return;
        };
        if log.armed || !log.may_commit() {
            return;
        }
        if let Some(e) = log.above.front() {
            log.armed = true;
            self.q.push(e.due.max(now), Ev::Replicated(l));
        }
    }

    /// Log `l`'s followers have fetched what is due: the high watermark moves past it, and
    /// consumers may read it (with `acks = "all"` the producer is answered now: `Enqueue`).
    #[inline(never)]
    pub(super) fn replicated(&mut self, l: u16) {
        walk!();
        let now = self.now;
        let Some(log) = self.w.logs[l as usize].as_deref_mut() else {
            return;
        };
        log.armed = false;
        if !log.may_commit() {
            return;
        }
        let b = log.broker;
        let acks = log.acks;
        // Nothing below brings a replica up or down: who is behind is the same for each record.
        let someone_behind = log.someone_behind();
        let mut moved = false;
        loop {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            let Some(e) = log.above.front().copied().filter(|e| e.due <= now) else {
                break;
            };
            log.above.pop_front();
            log.hw = e.offset + 1;
            if someone_behind {
                log.missed.push_back(e);
            }
            let m = self.w.slab.get(e.slot);
            if m.view.id != e.id || m.loc != Loc::Queued(b) {
                continue;
            }
            moved = true;
            if acks == Acks::All {
                self.enqueue_back(b, e.slot);
            } else {
                self.w.brokers[b as usize].store(e.slot);
            }
        }
        if moved {
            self.dispatch(b);
        }
        self.arm_replication(l);
    }

    /// Log `l` is cut back to `end` (its new leader's end): the records above it are
    /// gone. Those the producer was told were written (`acks = "1"`, or committed and then
    /// lost by an unclean election) and nobody applied are discarded (lost); those never
    /// acknowledged (`acks = "all"`, above the high watermark) are returned as (producer,
    /// slot, when it was written), in log order, for their producers to send again.
    #[inline(never)]
    pub(super) fn truncate_log(&mut self, l: u16, end: u64) -> Vec<(u32, u32, Time)> {
        walk!();
        let Some(log) = self.w.logs[l as usize].as_deref_mut() else {
            return Vec::new();
        };
        let b = log.broker;
        let acks = log.acks;
        let mut cut: Vec<(Entry, bool)> = Vec::new();
        while log.missed.back().is_some_and(|e| e.offset >= end) {
            cut.push((log.missed.pop_back().expect("back"), true));
        }
        cut.reverse();
        if log.spread {
            // A partition of a cluster: what its new leader fetched above the high watermark
            // (held by a follower down or stalled, or under min.insync.replicas) it keeps.
            let keep = log.above.partition_point(|e| e.offset < end);
            cut.extend(log.above.drain(keep..).map(|e| (e, false)));
            log.last_due = log.above.back().map_or(0, |e| e.due);
        } else {
            // Every record above the high watermark is beyond a new leader's end: the in-sync
            // followers have the high watermark, one out of sync has less.
            cut.extend(log.above.drain(..).map(|e| (e, false)));
            log.last_due = 0;
        }
        log.end = end;
        log.hw = log.hw.min(end);
        let mut resend = Vec::new();
        let mut out_of_queue = Vec::new();
        for (e, committed) in cut {
            let m = *self.w.slab.get(e.slot);
            if m.view.id != e.id || m.loc == Loc::Free || m.applied {
                continue;
            }
            if !committed && acks == Acks::All {
                resend.push((m.view.producer, e.slot, e.written));
                continue;
            }
            if committed {
                // Committed: in the broker's queue, readable; one a consumer holds now is left
                // to it (not modelled: its fetch would fail).
                if m.loc != Loc::Queued(b) {
                    continue;
                }
                out_of_queue.push(e.slot);
            }
            self.emit(Event::Discard {
                t: self.now,
                msg: m.r(),
                reason: DiscardReason::Truncated,
            });
            self.w.slab.release(e.slot);
        }
        if !out_of_queue.is_empty() {
            self.w.brokers[b as usize].remove_queued(&out_of_queue);
        }
        resend
    }

    /// The records that waited for log `l`'s election, as (producer, slot, when sent), in
    /// order, for their producers to send again.
    pub(super) fn take_waiting(&mut self, l: u16) -> Vec<(u32, u32, Time)> {
        let Some(log) = self.w.logs[l as usize].as_deref_mut() else {
            return Vec::new();
        };
        let b = log.broker;
        let waiting = std::mem::take(&mut log.waiting);
        waiting
            .into_iter()
            .filter_map(|(slot, id, at)| {
                let m = self.w.slab.get(slot);
                (m.view.id == id && m.loc == Loc::Queued(b)).then_some((m.view.producer, slot, at))
            })
            .collect()
    }

    /// Replica `r` of log `l` has caught up with its leader: it joins the ISR.
    #[inline(never)]
    pub(super) fn caught_up(&mut self, l: u16, r: u8) {
        walk!();
        let Some(log) = self.w.logs[l as usize].as_deref_mut() else {
            return;
        };
        if !matches!(log.leadership, Leadership::Leader(_)) {
            return;
        }
        let rep = &mut log.replicas[r as usize];
        if !rep.up || rep.in_sync || rep.stalled {
            return;
        }
        rep.in_sync = true;
        if !log.someone_behind() {
            log.missed.clear();
        }
        self.arm_replication(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Component};

    fn log(text: &str) -> Log {
        let r: Replication = toml::from_str(text).expect("a replication table");
        let rng = || stream(1, Component::Broker, 0, 0);
        Log::new(&r, Acks::All, rng(), rng())
    }

    #[test]
    fn defaults_are_kafkas_and_min_isr_counts_at_most_the_factor() {
        let l = log("");
        assert_eq!((l.replicas.len(), l.min_in_sync, l.unclean), (1, 1, false));
        assert_eq!(l.leadership, Leadership::Leader(0));
        let mut l = log("replication_factor = 2\nmin_insync_replicas = 5");
        assert_eq!(l.min_in_sync, 2, "effectiveMinIsr");
        assert!(l.may_commit());
        l.replicas[1].up = false;
        assert_eq!(l.in_sync_up(), 1);
        assert!(
            !l.may_commit(),
            "the high watermark waits under min.insync.replicas"
        );
        assert!(l.someone_behind());
        // The default election: uniform 7s-9s; the default lag: 1ms.
        for _ in 0..100 {
            assert!((7_000_000..=9_000_000).contains(&l.election_time()));
            assert_eq!(l.lag(), 1_000);
        }
    }

    fn cluster(text: &str) -> Cluster {
        let r: Replication = toml::from_str(text).expect("a replication table");
        Cluster::new(&r, Acks::All, 1, stream(1, Component::Broker, 0, 0))
    }

    #[test]
    fn replicas_are_striped_over_the_brokers_the_first_the_preferred_leader() {
        // StripedReplicaPlacer without racks, its random start at broker 0: partition p on
        // brokers p, p+1, ... modulo the brokers.
        let c = cluster("replication_factor = 3\nbrokers = 4");
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.balance_every, Some(LEADER_IMBALANCE_CHECK));
        let placed: Vec<Vec<u16>> = (0..5)
            .map(|p| {
                let l = c.new_log(7, p);
                assert_eq!((l.broker, l.spread), (7, true));
                assert_eq!(l.leadership, Leadership::Leader(0), "the preferred leader");
                l.replicas.iter().map(|r| r.node).collect()
            })
            .collect();
        assert_eq!(
            placed,
            [[0, 1, 2], [1, 2, 3], [2, 3, 0], [3, 0, 1], [0, 1, 2]].map(Vec::from)
        );
        let off = cluster("replication_factor = 2\nbrokers = 2\nauto_leader_rebalance = false");
        assert_eq!(off.balance_every, None);
    }

    #[test]
    fn a_stalled_follower_is_dropped_at_the_first_isr_check_past_the_lag_time() {
        // Checks every 15s from the start; out of sync once its last fetch is over 30s old.
        let c = cluster("replication_factor = 3\nbrokers = 3");
        assert_eq!(c.lag_time_max, 30_000_000);
        assert_eq!(c.isr_check_after(20_000_000), 60_000_000);
        assert_eq!(
            c.isr_check_after(15_000_000),
            60_000_000,
            "strictly more than 30s"
        );
        assert_eq!(c.isr_check_after(14_999_999), 45_000_000);
        let c = cluster("replication_factor = 3\nbrokers = 3\nreplica_lag_time_max = \"10s\"");
        assert_eq!(c.isr_check_after(1_000_000), 15_000_000);
        // A stalled follower in the ISR holds the high watermark.
        let mut l = c.new_log(0, 0);
        assert!(l.may_commit());
        l.replicas[1].stalled = true;
        assert!(!l.may_commit());
        l.replicas[1].in_sync = false;
        assert!(l.may_commit());
    }

    #[test]
    fn a_partition_made_while_a_broker_is_down_leaves_it_out() {
        let mut c = cluster("replication_factor = 3\nbrokers = 3");
        c.nodes[1].up = false;
        // Partition 1 (brokers 1, 2, 0): broker 2 leads, broker 1 out of the ISR.
        let l = c.new_log(0, 1);
        assert_eq!(l.leadership, Leadership::Leader(1));
        assert!(!l.replicas[0].up && !l.replicas[0].in_sync);
        assert_eq!(l.isr(), (2, true));
        // Every broker down: offline, the preferred replica the ISR.
        for n in &mut c.nodes {
            n.up = false;
        }
        let l = c.new_log(0, 2);
        assert_eq!(l.leadership, Leadership::Offline);
        assert!(l.replicas[0].in_sync);
    }

    #[test]
    fn a_dead_follower_in_the_isr_holds_the_high_watermark() {
        let mut l = log("replication_factor = 3\nmin_insync_replicas = 1");
        assert!(l.may_commit());
        // Down, not yet fenced: still in the ISR, which counts it, and waits for it.
        l.replicas[2].up = false;
        assert_eq!(l.isr(), (3, false));
        assert_eq!(l.in_sync_up(), 2);
        assert!(!l.may_commit());
        // Fenced: out of the ISR, the high watermark moves with the rest.
        l.replicas[2].in_sync = false;
        assert_eq!(l.isr(), (2, true));
        assert!(l.may_commit());
        assert_eq!(l.on_node(2), Some(2));
        assert_eq!(l.on_node(3), None);
    }
}
