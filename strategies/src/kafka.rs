//! `kafka`: a Kafka topic's partitions consumed by one consumer group.
//!
//! What Kafka does (docs/sources.md [K1]-[K6], ../shared/research/brokers.md section 8):
//! - a keyed record goes to partition `toPositive(murmur2(keyBytes)) % partitions` (the default
//!   partitioner). The key bytes here are those of Kafka's `StringSerializer` over the key written
//!   in decimal (key 42 is the two bytes `"42"`); a record without a key (`group_header_missing`)
//!   goes round-robin by record number. The partition is decided when the record is first sent,
//!   so adding partitions (`add_partitions`) moves later records of some keys to a new partition
//!   while earlier ones wait in the old one [K4];
//! - added partitions are seen late (`Metadata` below, [K20]-[K22]): each producer switches at its
//!   own metadata refresh, the group rebalances at its leader's, and a new partition's first
//!   owner starts at `auto.offset.reset` (`latest` skips what was written to it before). Not
//!   modelled: a new partition that changes owner before anything of it was committed is reset
//!   again; a leader that leaves before its refresh (the refresh still happens at its time); a
//!   record sent before the reset and stored after it (skipped here, read by Kafka);
//! - each partition has one owner in the group, chosen by the assignor: `range` (Kafka's default
//!   `partition.assignment.strategy` is `[RangeAssignor, CooperativeStickyAssignor]`, and the
//!   first is used), `round_robin`, or `cooperative_sticky` (each member keeps what it owned as far
//!   as balance allows: [`sticky`]). Members are the consumers connected, ordered by index (a
//!   member id's order);
//! - a rebalance (a member joins, leaves, or is dropped after `session.timeout.ms`) is eager: every
//!   member commits what it processed, and a partition that moves to another member is handed
//!   over only once its old owner has processed what it had fetched of it and committed (its next
//!   `poll()` joins the rebalance). A member dropped for silence (a crash, a pause past the
//!   session timeout) commits nothing: its partitions resume from their last commit (duplicates);
//!   a paused member that wakes up still writes what it had in hand, and its commit fails;
//! - a member restarted before the group dropped its dead session (no `group.instance.id`:
//!   `[consumers] restart_takes_over = false`, the flavour's) joins as a new member, and the
//!   rebalance waits for the old session's timeout: nothing is handed out meanwhile [K7]. A
//!   static member's `consumer_leave` sends no LeaveGroup (the engine's `membership.rs`): no
//!   rebalance until its session times out. A member
//!   dropped for a slow poll loop (`max_poll_interval`) is the engine's (`poll.rs`).
//!
//! The log, the offset commits and the session timeout are the broker's: run it with
//! `flavour = "kafka"` (poll batches of `prefetch` = `max.poll.records`, session timeout 45s,
//! and the `[consumers] client`'s commits and retries: Spring Kafka's container by default, a
//! commit after each poll's records and a blocking retry of a failed record then skip; the plain
//! client's auto-commit at a poll every 5s and no retry).
//!
//! Strength: one consumer per partition and a replay from the last commit keep per-key order
//! through crashes, leaves and joins (at the price of duplicates). Weakness: a member the group
//! dropped while it was alive (a pause past the session timeout) writes late, and adding
//! partitions splits a key across two partitions with different owners.

use serde::{Deserialize, Serialize};
use sim::strategy::{
    Control, DispatchCtx, Handler, MsgView, Outcome, Route, RouteCtx, Select, Strategy, WorldChange,
};
use sim::time::Time;
use std::collections::BTreeMap;

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 with seed `0x9747b28c`, as the default
/// partitioner hashes a record's key bytes.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = 0x9747_b28c ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The default partitioner's hash of entity `key`: `toPositive(murmur2("KEY"))`.
pub fn key_hash(key: u32) -> u32 {
    (murmur2(key.to_string().as_bytes()) as u32) & 0x7fff_ffff
}

/// How partitions are spread over the group's members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Assignor {
    /// `RangeAssignor`: contiguous ranges, the first `partitions % members` members one more.
    #[default]
    Range,
    /// `RoundRobinAssignor`: partition `p` to member `p % members`.
    RoundRobin,
    /// `CooperativeStickyAssignor`: balanced, and each member keeps as many of the partitions it
    /// owned as balance allows, so a join or a leave moves few partitions ([`sticky`]).
    CooperativeSticky,
}

impl Assignor {
    /// The owner (an index into `members`) of each of `partitions` partitions.
    pub fn assign(self, partitions: u32, members: usize) -> Vec<Option<usize>> {
        if members == 0 {
            return vec![None; partitions as usize];
        }
        let n = members as u32;
        match self {
            // Without previous owners (the group's first assignment) sticky is round robin's
            // order of filling: every member up to the minimum quota, then one more each.
            Assignor::CooperativeSticky => {
                let none = vec![None; partitions as usize];
                let ids: Vec<u32> = (0..n).collect();
                sticky(&none, &ids)
                    .into_iter()
                    .map(|o| o.map(|m| m as usize))
                    .collect()
            }
            Assignor::RoundRobin => (0..partitions).map(|p| Some((p % n) as usize)).collect(),
            Assignor::Range => {
                let (each, extra) = (partitions / n, partitions % n);
                let mut owners = Vec::with_capacity(partitions as usize);
                for m in 0..n {
                    let count = each + u32::from(m < extra);
                    owners.extend((0..count).map(|_| Some(m as usize)));
                }
                owners
            }
        }
    }
}

impl Assignor {
    /// The new owner of each partition, given `owned` (each partition's current owner, a member
    /// id or none) and the group's `members` (ids, sorted).
    pub fn reassign(self, owned: &[Option<u32>], members: &[u32]) -> Vec<Option<u32>> {
        match self {
            Assignor::CooperativeSticky => sticky(owned, members),
            _ => self
                .assign(owned.len() as u32, members.len())
                .into_iter()
                .map(|o| o.map(|i| members[i]))
                .collect(),
        }
    }
}

/// The sticky assignors' `constrainedAssign` (Kafka's `AbstractStickyAssignor`, every member
/// subscribed to the one topic): with `min`/`max` the floor and ceiling of partitions per member,
/// (1) each member keeps the partitions it owned, lowest first, up to `max`; (2) members below
/// `min` are filled in turn from the unowned partitions, lowest first; (3) if those run out, a
/// member still below `min` takes the lowest partition of a member at `max`; (4) what is left goes
/// one each to members at `min`. Members are taken in id order where Kafka sorts member ids.
pub fn sticky(owned: &[Option<u32>], members: &[u32]) -> Vec<Option<u32>> {
    use std::collections::VecDeque;
    let p = owned.len();
    let n = members.len();
    let mut out = vec![None; p];
    if n == 0 {
        return out;
    }
    let (min, max) = (p / n, p.div_ceil(n));
    let mut count = vec![0usize; n];
    let mut unfilled = Vec::new();
    let (mut at_min, mut at_max) = (VecDeque::new(), VecDeque::new());
    for (i, &m) in members.iter().enumerate() {
        let mine: Vec<usize> = (0..p).filter(|&q| owned[q] == Some(m)).collect();
        for &q in mine.iter().take(max) {
            out[q] = Some(m);
            count[i] += 1;
        }
        if mine.len() < min {
            unfilled.push(i);
        } else {
            if count[i] == min {
                at_min.push_back(i);
            }
            if count[i] == max {
                at_max.push_back(i);
            }
        }
    }
    let mut unassigned: VecDeque<usize> = (0..p).filter(|&q| out[q].is_none()).collect();
    while !unfilled.is_empty() && !unassigned.is_empty() {
        let mut k = 0;
        while k < unfilled.len() {
            let Some(q) = unassigned.pop_front() else {
                break;
            };
            let i = unfilled[k];
            out[q] = Some(members[i]);
            count[i] += 1;
            if count[i] == min {
                at_min.push_back(i);
                unfilled.remove(k);
            } else {
                k += 1;
            }
        }
    }
    for i in unfilled {
        while count[i] < min {
            let Some(j) = at_max.pop_front() else { break };
            let Some(q) = (0..p).find(|&q| out[q] == Some(members[j])) else {
                continue;
            };
            out[q] = Some(members[i]);
            count[j] -= 1;
            count[i] += 1;
        }
        at_min.push_back(i);
    }
    for q in unassigned {
        // Kafka throws if no member is left at the minimum; the quotas make that impossible.
        let i = at_min
            .pop_front()
            .unwrap_or_else(|| (0..n).min_by_key(|&i| (count[i], i)).expect("members"));
        out[q] = Some(members[i]);
        count[i] += 1;
    }
    out
}

/// `[strategy.kafka]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaParams {
    /// Partitions of the topic (`num.partitions`, 1 by default).
    #[serde(default = "default_partitions")]
    pub partitions: u32,
    /// `range`, `round_robin` or `cooperative_sticky`.
    #[serde(default)]
    pub assignor: Assignor,
}

fn default_partitions() -> u32 {
    1
}

impl Default for KafkaParams {
    fn default() -> Self {
        KafkaParams {
            partitions: default_partitions(),
            assignor: Assignor::default(),
        }
    }
}

/// Records of one partition handed to its owner and not yet processed.
#[derive(Clone, Copy, Debug, Default)]
struct Partition {
    /// The member that owns it (a consumer id).
    owner: Option<u32>,
    /// The previous owner, still a member, that must finish what it fetched and commit before
    /// the new owner gets any record.
    revoking: Option<u32>,
    /// Records delivered to a consumer and neither processed, settled nor given back.
    unprocessed: u32,
    /// Added to the topic and not yet fetched by the group: no committed offset, so its first
    /// owner starts at `auto.offset.reset` ([`Kafka::position_new`]).
    fresh: bool,
    /// Records with a lower id were sent before the group's position in it was reset to the
    /// log's end (`latest`): skipped, never read.
    reset_below: u64,
}

/// What `n` partitions cost a run of `sc`: a [`Partition`] each plus the owners the rebalance
/// copies, and each rebalance (a member joining or leaving) visits every (partition, member) pair.
fn partitions_cost(n: u64, sc: &sim::Scenario) -> crate::Footprint {
    crate::Footprint {
        bytes: n.saturating_mul(std::mem::size_of::<Partition>() as u64 + 16),
        steps: n
            .saturating_mul(sc.dispatch_targets() as u64)
            .saturating_mul(crate::rebalances(sc)),
    }
}

/// A Kafka consumer group over a partitioned topic.
#[derive(Debug)]
pub struct Kafka {
    assignor: Assignor,
    partitions: Vec<Partition>,
    /// Per key, the default partitioner's hash.
    hash: Vec<u32>,
    /// `(first record id, partition count)`: records from that id on are partitioned over that
    /// many partitions (a new entry per `add_partitions`).
    counts: Vec<(u64, u32)>,
    /// Partitions added and not yet in force: the next record sent starts a new entry.
    added: u32,
    /// Group members (connected consumers), by id.
    members: Vec<u32>,
    /// Per record delivered and not processed yet: its partition and holder.
    holding: BTreeMap<u64, (u32, u32)>,
    /// Members whose process restarted while the group still holds their dead session: the
    /// rebalance their new JoinGroup starts waits for that session to time out, and the whole
    /// group fetches nothing meanwhile (an eager rebalance stops every member).
    rejoining: Vec<u32>,
    /// When producers and the group see added partitions ([`Metadata`]).
    md: Metadata,
}

/// The `on_wake` token of the group leader's metadata refresh that finds added partitions.
const METADATA_WAKE: u64 = 0x6d65_7461_6461_7461;

/// Purposes of the [`sim::rng::Component::Strategy`] draws of a client's refresh phase.
const PRODUCER_PHASE: u8 = 1;
const CONSUMER_PHASE: u8 = 2;

/// Partitions added to the topic are seen late (issue 38 §7, [K20]-[K22]): a client learns of
/// them at its next metadata refresh, `metadata.max.age.ms` after its last one
/// (`Metadata.timeToNextUpdate`); a producer's partitioner then hashes keys over the new count
/// (`KafkaProducer.partition`: `cluster.partitionsForTopic(topic).size()`), and the group
/// rebalances onto them when its leader's refresh shows them (only the leader watches for
/// partition changes: `ConsumerCoordinator.onJoinComplete` clears `assignmentSnapshot` on the
/// others, and `rejoinNeededOrPending` compares it with the metadata at its next poll). Each
/// client refreshes on its own cycle: it started at an unknown time before the run, so the
/// cycle's phase is drawn per client, uniform over the period, from the run's seed. A new
/// partition has no committed offset: its first owner starts at `auto.offset.reset`
/// (`SubscriptionState.resetInitializingPositions`, `OffsetFetcher.resetPositionsIfNeeded`),
/// and under `latest` the records written to it before are skipped (KAFKA-12261).
#[derive(Debug, Default)]
struct Metadata {
    /// The producers' `metadata.max.age.ms` (0: they see added partitions at once).
    producer_age: Time,
    /// The consumers' (0: the group rebalances at once).
    consumer_age: Time,
    /// `auto.offset.reset = latest`.
    latest: bool,
    /// The run's seed, for the refresh phases.
    seed: u64,
    /// The partitions of the topic (the group may know fewer: `Kafka::partitions`).
    topic: u32,
    /// Each `add_partitions` (with `producer_age` > 0): when, and the topic's partitions then.
    adds: Vec<(Time, u32)>,
    /// Per producer, once it has seen an add: `(first record id, partition count)`, as
    /// `Kafka::counts` for all of them when they switch at once.
    by_producer: Vec<Vec<(u64, u32)>>,
    /// Per producer, its refresh phase, once drawn.
    phases: Vec<Option<Time>>,
    /// One more than the highest record id sent so far.
    next_id: u64,
    /// Partitions the group knows with `fresh` set.
    fresh: u32,
}

impl Metadata {
    /// The first refresh at or after `at` of a client refreshing every `age` from `phase`.
    fn next_refresh(phase: Time, age: Time, at: Time) -> Time {
        if at <= phase {
            phase
        } else {
            phase + (at - phase).div_ceil(age) * age
        }
    }

    /// Client `index`'s refresh phase (`purpose`: producer or consumer), uniform below `age`.
    fn phase(&self, purpose: u8, index: u32, age: Time) -> Time {
        sim::rng::draw_below(
            self.seed,
            sim::rng::Component::Strategy,
            index,
            purpose,
            age,
        )
    }
}

impl Kafka {
    /// A group over `partitions` partitions of a topic keyed by `keys` entities.
    pub fn new(keys: u32, partitions: u32, assignor: Assignor) -> Self {
        Kafka {
            assignor,
            partitions: vec![Partition::default(); partitions as usize],
            hash: (0..keys).map(key_hash).collect(),
            counts: vec![(0, partitions)],
            added: 0,
            members: Vec::new(),
            holding: BTreeMap::new(),
            rejoining: Vec::new(),
            md: Metadata {
                topic: partitions,
                ..Metadata::default()
            },
        }
    }

    /// Sets when clients see added partitions and where a new partition's first owner starts:
    /// `producer_age` and `consumer_age` are `metadata.max.age.ms` (0: at once), `latest` is
    /// `auto.offset.reset = latest` (else `earliest`).
    pub fn with_metadata(mut self, producer_age: Time, consumer_age: Time, latest: bool) -> Self {
        self.md.producer_age = producer_age;
        self.md.consumer_age = consumer_age;
        self.md.latest = latest;
        self
    }

    /// The partition count producer `msg.producer`'s partitioner used for `msg`, if it has
    /// switched since the start on its own refresh cycle.
    fn producer_count(&self, msg: &MsgView) -> Option<u32> {
        let list = self.md.by_producer.get(msg.producer as usize)?;
        list.iter()
            .rev()
            .find(|(from, _)| msg.id >= *from)
            .map(|&(_, n)| n)
    }

    /// A send by `msg.producer` at `now`: from its first refresh after an `add_partitions` its
    /// partitioner hashes over the new count.
    fn producer_refresh(&mut self, now: Time, msg: &MsgView) {
        let p = msg.producer as usize;
        let age = self.md.producer_age;
        if self.md.phases.len() <= p {
            self.md.phases.resize(p + 1, None);
            self.md.by_producer.resize(p + 1, Vec::new());
        }
        let phase = match self.md.phases[p] {
            Some(ph) => ph,
            None => {
                let ph = self.md.phase(PRODUCER_PHASE, msg.producer, age);
                self.md.phases[p] = Some(ph);
                ph
            }
        };
        let seen = self.md.adds.iter().rev().find_map(|&(at, total)| {
            (Metadata::next_refresh(phase, age, at) <= now).then_some(total)
        });
        let list = &mut self.md.by_producer[p];
        if let Some(n) = seen.filter(|&n| list.last().map(|l| l.1) != Some(n)) {
            list.push((msg.id, n));
        }
    }

    /// `count` partitions were added at `now`: producers see them at their next refreshes, the
    /// group at its leader's (taken to be the member with the lowest id, the first to join at
    /// the run's start), or at once when the group is empty (its first member reads fresh
    /// metadata when it starts).
    fn partitions_added(&mut self, now: Time, count: u32, ctl: &mut Control) {
        let total = self.md.topic.saturating_add(count).min(10_000);
        self.md.topic = total;
        if self.md.producer_age == 0 {
            self.added += count;
        } else {
            self.md.adds.push((now, total));
        }
        let leader = self.members.first().copied();
        match leader.filter(|_| self.md.consumer_age > 0) {
            Some(l) => {
                let age = self.md.consumer_age;
                let phase = self.md.phase(CONSUMER_PHASE, l, age);
                ctl.wake_at(Metadata::next_refresh(phase, age, now), METADATA_WAKE);
            }
            None => self.learn_partitions(ctl),
        }
    }

    /// The group's leader sees the topic's partitions: the new ones (no committed offset) join
    /// the assignment.
    fn learn_partitions(&mut self, ctl: &mut Control) {
        let total = self.md.topic as usize;
        if total <= self.partitions.len() {
            return;
        }
        let fresh = Partition {
            fresh: true,
            ..Partition::default()
        };
        self.md.fresh += (total - self.partitions.len()) as u32;
        self.partitions.resize(total, fresh);
        self.rebalance(0, ctl);
    }

    /// After a rebalance: each new partition that got an owner is positioned by
    /// `auto.offset.reset` as its owner first fetches it; under `latest`, past every record
    /// sent so far.
    fn position_new(&mut self) {
        if self.md.fresh == 0 {
            return;
        }
        let below = if self.md.latest { self.md.next_id } else { 0 };
        for part in self.partitions.iter_mut() {
            if part.fresh && part.owner.is_some() {
                part.fresh = false;
                part.reset_below = below;
                self.md.fresh -= 1;
            }
        }
    }

    /// The partition of a record, as the producer's partitioner chose it when it was sent.
    pub fn partition_of(&self, msg: &MsgView) -> u32 {
        let count = self
            .producer_count(msg)
            .unwrap_or_else(|| self.count_of(msg));
        match msg.group {
            Some(k) => self.hash[k as usize] % count,
            None => (msg.id % u64::from(count)) as u32,
        }
    }

    /// The partition count for `msg` when every producer switches at once.
    fn count_of(&self, msg: &MsgView) -> u32 {
        self.counts
            .iter()
            .rev()
            .find(|(from, _)| msg.id >= *from)
            .map_or(self.counts[0].1, |&(_, n)| n)
    }

    /// The owner of partition `p` (for tests).
    pub fn owner(&self, p: u32) -> Option<u32> {
        self.partitions[p as usize].owner
    }

    /// Recomputes the assignment after a membership or topology change (an eager rebalance).
    fn rebalance(&mut self, broker: u16, ctl: &mut Control) {
        let owned: Vec<Option<u32>> = self.partitions.iter().map(|p| p.owner).collect();
        let owners = self.assignor.reassign(&owned, &self.members);
        // Every member commits what it processed before the group is re-formed.
        for &m in &self.members {
            ctl.commit(m);
        }
        for (p, new) in owners.into_iter().enumerate() {
            let part = &mut self.partitions[p];
            if part.owner == new {
                continue;
            }
            let old = part.owner;
            part.owner = new;
            // The old owner, if it is still a member, finishes what it fetched of it first.
            part.revoking = old.filter(|o| self.members.contains(o) && part.unprocessed > 0);
            if let Some(n) = new {
                ctl.reassigned(broker, n);
            }
        }
        self.position_new();
        ctl.holds_changed(broker);
        ctl.redispatch();
    }

    /// One record of partition `p` is no longer waiting to be processed by its holder: when the
    /// old owner of a partition being handed over has none left, it commits, and the new owner
    /// may have the partition.
    fn done(&mut self, p: u32, ctl: &mut Control) {
        let part = &mut self.partitions[p as usize];
        part.unprocessed = part.unprocessed.saturating_sub(1);
        if part.unprocessed == 0 {
            if let Some(old) = part.revoking.take() {
                ctl.commit(old);
                ctl.holds_changed(0);
                ctl.redispatch();
            }
        }
    }

    /// The record left the broker's hands for good, or came back to the log: forget it.
    fn forget(&mut self, id: u64, ctl: &mut Control) {
        // A record already processed was forgotten then (`on_handled`).
        if let Some((p, _)) = self.holding.remove(&id) {
            self.done(p, ctl);
        }
    }
}

impl Handler for Kafka {}

impl crate::Named for Kafka {
    const NAME: &'static str = "kafka";
    const SUMMARY: &'static str = "Kafka consumer group: key -> partition by murmur2, one owner per partition (range assignor), eager rebalance; run with flavour = \"kafka\" (offset commits, session timeout)";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Kafka;
    type Params = KafkaParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "partitions",
            meaning: "partitions of the topic: at most this many consumers get records",
            unit: "count",
            default: "1",
            range: crate::Range::Int(1, i32::MAX as i64),
            sizes: Some(crate::Sizing {
                what: "a record per partition; every (partition, consumer) pair visited at each rebalance",
                cost: partitions_cost,
            }),
            models: "the topic's partition count (broker default num.partitions = 1)",
            hazard: Some(crate::Hazard {
                when: "fewer than [consumers] count",
                applies: |v, sc| v.parse::<u32>().is_ok_and(|n| n < sc.consumers.count),
                effect: "fewer partitions than consumers: the extra consumers get nothing",
            }),
        },
        crate::ParamInfo {
            name: "assignor",
            meaning: "how partitions are spread over the group's members",
            unit: "range | round_robin | cooperative_sticky",
            default: "range",
            range: crate::Range::Any,
            sizes: None,
            models: "partition.assignment.strategy (default [RangeAssignor, CooperativeStickyAssignor]: range); cooperative_sticky keeps owners where balance allows",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: KafkaParams) -> Result<Self, String> {
        if sc.brokers.len() != 1 {
            return Err(
                "a Kafka cluster is one [[broker]] here (partition leaders fail over inside it)"
                    .into(),
            );
        }
        let d = sc.flavour_defaults();
        let age = |set: Option<sim::time::Dur>| set.or(d.metadata_max_age).map_or(0, |a| a.0);
        let reset = sc.consumers.auto_offset_reset.or(d.auto_offset_reset);
        Ok(
            Kafka::new(sc.workload.keys, p.partitions, p.assignor).with_metadata(
                age(sc.producers.metadata_max_age),
                age(sc.consumers.metadata_max_age),
                reset == Some(sim::scenario::OffsetReset::Latest),
            ),
        )
    }
}

impl Strategy for Kafka {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, _ctl: &mut Control) -> Select {
        if !self.rejoining.is_empty() {
            // The group is stopped: every record waits, so the rest of the log is not asked.
            return Select::Stop;
        }
        let p = self.partition_of(msg);
        let Some(part) = self.partitions.get(p as usize) else {
            // Added to the topic, and the group's leader has not seen it yet.
            return Select::HoldWhileMembers;
        };
        if msg.id < part.reset_below {
            return Select::Skip;
        }
        let Some(owner) = part.owner.filter(|_| part.revoking.is_none()) else {
            return Select::Hold;
        };
        match ctx.consumers.iter().position(|c| c.id == owner) {
            Some(i) if ctx.consumers[i].free > 0 => {
                self.partitions[p as usize].unprocessed += 1;
                self.holding.insert(msg.id, (p, owner));
                Select::Consumer(i)
            }
            // Until its owner has room, or the partition moves (`rebalance` and `done` withdraw
            // the promise): the broker skips the partition's backlog without asking.
            Some(i) => Select::HoldFor(i),
            None => Select::Hold,
        }
    }

    fn route(&mut self, ctx: &RouteCtx, msg: &MsgView) -> Route {
        if self.added > 0 {
            self.added = 0;
            self.counts.push((msg.id, self.md.topic));
        }
        self.md.next_id = self.md.next_id.max(msg.id + 1);
        if !self.md.adds.is_empty() {
            self.producer_refresh(ctx.now, msg);
        }
        Route::Connected
    }

    fn on_start(&mut self, seed: u64) {
        self.md.seed = seed;
    }

    fn on_wake(&mut self, _now: Time, token: u64, ctl: &mut Control) {
        if token == METADATA_WAKE {
            self.learn_partitions(ctl);
        }
    }

    fn on_attach(&mut self, _now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        if let Err(i) = self.members.binary_search(&consumer) {
            self.members.insert(i, consumer);
            self.rebalance(broker, ctl);
        }
    }

    fn on_detach(&mut self, _now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.rejoining.retain(|&c| c != consumer);
        if let Ok(i) = self.members.binary_search(&consumer) {
            self.members.remove(i);
            // What it held came back to the log: a handover waiting on it is over.
            for part in &mut self.partitions {
                if part.revoking == Some(consumer) {
                    part.revoking = None;
                }
            }
            self.rebalance(broker, ctl);
        }
    }

    fn on_handled(
        &mut self,
        _now: Time,
        consumer: u32,
        msg: &MsgView,
        outcome: &Outcome,
        ctl: &mut Control,
    ) {
        // Processed (written, or refused as stale by a guarding handler); only the record's
        // current holder counts (a zombie's copy was given back).
        if matches!(outcome, Outcome::Applied { .. } | Outcome::Rejected)
            && self.holding.get(&msg.id).is_some_and(|h| h.1 == consumer)
        {
            let (p, _) = self.holding.remove(&msg.id).expect("present");
            self.done(p, ctl);
        }
    }

    fn on_returned(&mut self, _now: Time, _broker: u16, msg: &MsgView, ctl: &mut Control) {
        self.forget(msg.id, ctl);
    }

    fn on_settled(&mut self, _now: Time, msg: &MsgView, ctl: &mut Control) {
        self.forget(msg.id, ctl);
    }

    fn on_world(&mut self, now: Time, change: WorldChange, ctl: &mut Control) {
        match change {
            // Its old session is still a member (no `group.instance.id`): the new member's join
            // starts a rebalance that waits for the old one; every member commits as it rejoins.
            WorldChange::ConsumerRestarted(c)
                if self.members.binary_search(&c).is_ok() && !self.rejoining.contains(&c) =>
            {
                self.rejoining.push(c);
                for &m in self.members.iter().filter(|&&m| m != c) {
                    ctl.commit(m);
                }
            }
            WorldChange::PartitionsAdded(n) => self.partitions_added(now, n, ctl),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{kafka_topic, load, run, scenario, select_at, view as msg};

    /// A topic has one partition unless the file says more (the broker's `num.partitions`),
    /// and the group uses the range assignor.
    #[test]
    fn defaults_are_one_partition_and_the_range_assignor() {
        let p: KafkaParams = toml::from_str("").unwrap();
        assert_eq!((p.partitions, p.assignor), (1, Assignor::Range));
        let d = KafkaParams::default();
        assert_eq!((d.partitions, d.assignor), (1, Assignor::Range));
    }

    /// Kafka's own `UtilsTest.testMurmur2` cases.
    #[test]
    fn murmur2_matches_kafkas_test_vectors() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (data, want) in cases {
            assert_eq!(murmur2(data), want, "{}", String::from_utf8_lossy(data));
        }
        // A key is hashed as its decimal string, made positive as `Utils.toPositive` does.
        assert_eq!(key_hash(21), (-973_932_308i32 as u32) & 0x7fff_ffff);
    }

    #[test]
    fn range_gives_the_first_members_one_more_and_round_robin_deals() {
        let range = Assignor::Range.assign(7, 3);
        let owners: Vec<usize> = range.into_iter().map(Option::unwrap).collect();
        assert_eq!(owners, [0, 0, 0, 1, 1, 2, 2]);
        let rr: Vec<usize> = Assignor::RoundRobin
            .assign(5, 2)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(rr, [0, 1, 0, 1, 0]);
        assert_eq!(Assignor::Range.assign(2, 4), [Some(0), Some(1)]);
        assert_eq!(Assignor::Range.assign(2, 0), [None, None]);
    }

    /// Cooperative sticky keeps owners where balance allows: a join takes only what the new
    /// member's quota needs (range moves three of six partitions here, sticky two), a leave moves
    /// only the leaver's partitions, a member under its quota takes the lowest partition of one at
    /// the maximum, and a member owning more than the maximum gives up its highest.
    #[test]
    fn cooperative_sticky_moves_only_what_balance_needs() {
        let s = |owned: &[u32], members: &[u32]| -> Vec<u32> {
            let owned: Vec<Option<u32>> = owned.iter().map(|&o| Some(o)).collect();
            sticky(&owned, members)
                .into_iter()
                .map(Option::unwrap)
                .collect()
        };
        assert_eq!(s(&[0, 0, 0, 1, 1, 1], &[0, 1, 2]), [0, 0, 2, 1, 1, 2]);
        let range: Vec<u32> = Assignor::Range
            .reassign(&[Some(0); 6], &[0, 1, 2])
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(range, [0, 0, 1, 1, 2, 2]);
        assert_eq!(s(&[0, 0, 1, 1, 2, 2], &[0, 2]), [0, 0, 0, 2, 2, 2]);
        assert_eq!(s(&[0, 0, 1, 1], &[0, 1, 2]), [2, 0, 1, 1]);
        assert_eq!(s(&[0, 0, 0, 0], &[0, 1]), [0, 0, 1, 1]);
        // Fewer partitions than members: one each, the first members first; none without members.
        assert_eq!(sticky(&[None, None], &[3, 5, 7]), [Some(3), Some(5)]);
        assert_eq!(sticky(&[Some(1)], &[]), [None]);
        // The group's first assignment fills members in turn.
        assert_eq!(
            Assignor::CooperativeSticky.assign(5, 2),
            [Some(0), Some(1), Some(0), Some(1), Some(0)]
        );
        // What the strategy does with it: a join moves one partition (range would move two).
        let mut k = Kafka::new(50, 3, Assignor::CooperativeSticky);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        let before: Vec<_> = (0..3).map(|p| k.owner(p)).collect();
        k.on_attach(0, 0, 2, &mut ctl);
        let after: Vec<_> = (0..3).map(|p| k.owner(p)).collect();
        assert_eq!(before, [Some(0), Some(0), Some(1)]);
        assert_eq!(after, [Some(0), Some(2), Some(1)]);
    }

    /// The quotas with fewer partitions than members: the minimum is 0 (`p / n`), so an owner
    /// keeps its one partition when members join and nobody takes it from it.
    #[test]
    fn cooperative_sticky_keeps_an_owner_with_fewer_partitions_than_members() {
        assert_eq!(sticky(&[Some(0)], &[0, 1]), [Some(0)]);
        assert_eq!(sticky(&[Some(1)], &[0, 1, 2]), [Some(1)]);
        assert_eq!(sticky(&[Some(2), None], &[0, 1, 2]), [Some(2), Some(0)]);
    }

    /// A member that owned more than the maximum keeps the maximum; what it gives up goes to
    /// the members at the minimum, never back to it (it is not at the minimum).
    #[test]
    fn cooperative_sticky_gives_an_owners_excess_to_the_members_at_the_minimum() {
        // Five partitions among three: at most 2 each. Members 1 and 2 take one each up to the
        // minimum, then the fifth goes to the first at the minimum (1), not to 0.
        assert_eq!(
            sticky(&[Some(0); 5], &[0, 1, 2]),
            [Some(0), Some(0), Some(1), Some(2), Some(1)]
        );
        // Two among three (minimum 0, maximum 1): 0 keeps one, the other goes to 1.
        assert_eq!(sticky(&[Some(0); 2], &[0, 1, 2]), [Some(0), Some(1)]);
    }

    /// A member restarted while its dead session is still in the group: nothing is handed out
    /// until that session goes, the others commit; a restart of a member already dropped, or a
    /// second notice, changes nothing.
    #[test]
    fn a_restart_before_the_old_session_goes_stalls_the_group() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        let key0 = (0..50)
            .find(|&key| k.partition_of(&msg(0, key)) == 0)
            .unwrap();
        let slots = [(0, 5), (1, 5)];
        let mut ctl = Control::default();
        k.on_world(1, WorldChange::ConsumerRestarted(1), &mut ctl);
        k.on_world(1, WorldChange::ConsumerRestarted(1), &mut ctl);
        assert_eq!(ctl.commits(), [0]);
        assert_eq!(
            select_at(&mut k, 1, &slots, &msg(1, key0), &mut ctl),
            Err(Select::Stop),
            "the whole group waits: nothing else is asked"
        );
        k.on_detach(2, 0, 1, &mut ctl);
        assert_eq!(select_at(&mut k, 2, &slots, &msg(1, key0), &mut ctl), Ok(0));
        let mut ctl = Control::default();
        k.on_world(3, WorldChange::ConsumerRestarted(1), &mut ctl);
        assert!(ctl.commits().is_empty());
        assert_eq!(select_at(&mut k, 3, &slots, &msg(2, key0), &mut ctl), Ok(0));
    }

    /// Two keys in different partitions of two: each record goes only to its partition's owner,
    /// and waits (while other partitions go on) when that owner has no room.
    #[test]
    fn a_record_goes_only_to_its_partitions_owner() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        let (a, b) = {
            let p = |key| k.partition_of(&msg(0, key));
            let a = (0..50).find(|&key| p(key) == 0).unwrap();
            let b = (0..50).find(|&key| p(key) == 1).unwrap();
            (a, b)
        };
        assert_eq!((k.owner(0), k.owner(1)), (Some(0), Some(1)));
        let slots = [(0, 5), (1, 5)];
        assert_eq!(select_at(&mut k, 1, &slots, &msg(1, a), &mut ctl), Ok(0));
        assert_eq!(select_at(&mut k, 1, &slots, &msg(2, b), &mut ctl), Ok(1));
        let full = [(0, 0), (1, 5)];
        assert_eq!(
            select_at(&mut k, 1, &full, &msg(3, a), &mut ctl),
            Err(Select::HoldFor(0)),
            "a promise until owner 0 has room"
        );
        assert_eq!(select_at(&mut k, 1, &full, &msg(4, b), &mut ctl), Ok(1));
        // The partitions move (a member leaves): the promise is withdrawn.
        let mut ctl = Control::default();
        k.on_detach(2, 0, 0, &mut ctl);
        assert_eq!(ctl.holds_changes(), vec![0]);
        assert_eq!(select_at(&mut k, 2, &[(1, 5)], &msg(3, a), &mut ctl), Ok(1));
    }

    /// A member joins: a partition that moves waits until its old owner has processed what it
    /// fetched of it, then the old owner commits and the new one gets it.
    #[test]
    fn a_moved_partition_waits_for_its_old_owner_to_finish_and_commit() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        let key1 = (0..50)
            .find(|&key| k.partition_of(&msg(0, key)) == 1)
            .unwrap();
        let slots = [(0, 5), (1, 5)];
        assert_eq!(select_at(&mut k, 1, &slots, &msg(1, key1), &mut ctl), Ok(0));
        let mut ctl = Control::default();
        k.on_attach(2, 0, 1, &mut ctl);
        // Every member commits when the group re-forms; partition 1 now belongs to consumer 1.
        assert_eq!(ctl.commits(), [0, 1]);
        assert_eq!(k.owner(1), Some(1));
        assert_eq!(
            select_at(&mut k, 2, &slots, &msg(2, key1), &mut ctl),
            Err(Select::Hold),
            "consumer 0 still has record 1 of partition 1"
        );
        // Consumer 0 processes record 1: it commits, and consumer 1 may have the partition.
        let applied = Outcome::Applied { state_seq: 1 };
        let mut ctl = Control::default();
        k.on_handled(3, 0, &msg(1, key1), &applied, &mut ctl);
        assert_eq!(ctl.commits(), [0]);
        assert!(ctl.redispatch_requested());
        assert_eq!(
            ctl.holds_changes(),
            [0],
            "what waited for the handover is asked again"
        );
        assert_eq!(select_at(&mut k, 3, &slots, &msg(2, key1), &mut ctl), Ok(1));
        // A zombie's copy (not its holder's) changes nothing; nor does a failure.
        let mut ctl = Control::default();
        k.on_handled(4, 0, &msg(2, key1), &applied, &mut ctl);
        let failed = Outcome::Failed(sim::history::FailReason::Outage);
        k.on_handled(4, 1, &msg(2, key1), &failed, &mut ctl);
        assert!(ctl.commits().is_empty());
        assert_eq!(k.partitions[1].unprocessed, 1);
    }

    /// A member leaving (a clean leave, or dropped at the session timeout) rebalances the group
    /// at once: the members left commit, its partitions go to them, and a handover that waited
    /// on it is over (what it held is back in the log).
    #[test]
    fn a_member_leaving_hands_its_partitions_to_the_others_at_once() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        let key1 = (0..50)
            .find(|&key| k.partition_of(&msg(0, key)) == 1)
            .unwrap();
        let slots = [(0, 5), (1, 5), (2, 5)];
        assert_eq!(select_at(&mut k, 1, &slots, &msg(1, key1), &mut ctl), Ok(0));
        k.on_attach(2, 0, 1, &mut ctl);
        assert_eq!(k.owner(1), Some(1));
        // Consumer 0 leaves with record 1 of partition 1 unprocessed: partition 0 goes to 1,
        // and partition 1 no longer waits for 0.
        let mut ctl = Control::default();
        k.on_detach(3, 0, 0, &mut ctl);
        assert_eq!(ctl.commits(), [1]);
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
        assert!(ctl.redispatch_requested());
        assert_eq!((k.owner(0), k.owner(1)), (Some(1), Some(1)));
        let left = [(1, 5), (2, 5)];
        assert_eq!(select_at(&mut k, 3, &left, &msg(1, key1), &mut ctl), Ok(1));
    }

    /// A record without a key (`group_header_missing`) goes round-robin by record number.
    #[test]
    fn a_record_without_a_key_goes_round_robin_by_record_number() {
        let k = Kafka::new(50, 3, Assignor::Range);
        let keyless = |id| MsgView {
            group: None,
            ..msg(id, 7)
        };
        let parts: Vec<u32> = (0..7).map(|id| k.partition_of(&keyless(id))).collect();
        assert_eq!(parts, [0, 1, 2, 0, 1, 2, 0]);
    }

    /// A record given back to the log (its holder's delivery returned) or settled without being
    /// processed no longer holds up the handover of its partition: the old owner commits and
    /// the new owner may have the partition.
    #[test]
    fn a_record_back_in_the_log_or_settled_no_longer_holds_up_a_handover() {
        let slots = [(0, 5), (1, 5)];
        let returned = |k: &mut Kafka, id: u64, key: u32, ctl: &mut Control| {
            k.on_returned(3, 0, &msg(id, key), ctl)
        };
        let settled = |k: &mut Kafka, id: u64, key: u32, ctl: &mut Control| {
            k.on_settled(3, &msg(id, key), ctl)
        };
        for give_back in [returned, settled] {
            let mut k = Kafka::new(50, 2, Assignor::Range);
            let mut ctl = Control::default();
            k.on_attach(0, 0, 0, &mut ctl);
            let key1 = (0..50)
                .find(|&key| k.partition_of(&msg(0, key)) == 1)
                .unwrap();
            assert_eq!(select_at(&mut k, 1, &slots, &msg(1, key1), &mut ctl), Ok(0));
            k.on_attach(2, 0, 1, &mut ctl);
            assert_eq!(
                select_at(&mut k, 2, &slots, &msg(2, key1), &mut ctl),
                Err(Select::Hold)
            );
            let mut ctl = Control::default();
            give_back(&mut k, 1, key1, &mut ctl);
            assert_eq!(ctl.commits(), [0]);
            assert!(ctl.redispatch_requested());
            assert_eq!(select_at(&mut k, 3, &slots, &msg(2, key1), &mut ctl), Ok(1));
        }
    }

    /// Added partitions take effect from the next record sent: earlier records keep the
    /// partition they were sent to, later ones are spread over all the partitions.
    #[test]
    fn added_partitions_take_effect_from_the_next_record_sent() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let ctl = &mut Control::default();
        k.on_attach(0, 0, 0, ctl);
        let route = |k: &mut Kafka, id: u64| {
            let ctx = RouteCtx {
                now: 0,
                producer: 0,
                connected: 0,
                up: &[true],
                held_since: None,
            };
            k.route(&ctx, &msg(id, 0))
        };
        assert_eq!(route(&mut k, 0), Route::Connected);
        let ctl = &mut Control::default();
        k.on_world(5, WorldChange::PartitionsAdded(3), ctl);
        assert_eq!(ctl.commits(), [0], "the group rebalances");
        assert_eq!(k.partitions.len(), 5);
        assert_eq!(k.owner(4), Some(0));
        route(&mut k, 10);
        // A key whose partition over 5 is not its partition over 2.
        let key = (0..50)
            .find(|&key| key_hash(key) % 5 != key_hash(key) % 2)
            .unwrap();
        assert_eq!(k.partition_of(&msg(9, key)), key_hash(key) % 2);
        assert_eq!(k.partition_of(&msg(10, key)), key_hash(key) % 5);
        assert_eq!(k.partition_of(&msg(11, key)), key_hash(key) % 5);
        // More partitions again: in force from the next record on.
        k.on_world(6, WorldChange::PartitionsAdded(1), ctl);
        route(&mut k, 20);
        let key = (0..50)
            .find(|&key| key_hash(key) % 6 != key_hash(key) % 5)
            .unwrap();
        assert_eq!(k.partition_of(&msg(19, key)), key_hash(key) % 5);
        assert_eq!(k.partition_of(&msg(20, key)), key_hash(key) % 6);
    }

    /// Hazard: fewer partitions than consumers (the extra consumers get nothing) warns; as many
    /// does not.
    #[test]
    fn fewer_partitions_than_consumers_warns() {
        let sc = |partitions: u32| {
            scenario(&format!(
                "flavour = \"kafka\"\nstrategies = [\"kafka\"]\n[workload]\nmessages = 10\nrate = \"100/s\"\nkeys = 4\n[[broker]]\nname = \"kafka\"\n[consumers]\ncount = 3\nservice = \"1ms\"\n[strategy.kafka]\npartitions = {partitions}\n"
            ))
        };
        let warning = |n| {
            crate::test_util::warning(&crate::test_util::summary(&sc(n), "kafka", 1), "partitions")
        };
        assert!(warning(2).is_some());
        assert!(warning(3).is_none());
        assert!(warning(4).is_none());
    }

    /// Strength: crashes, a leave and a join, with a commit per record: per-key order holds
    /// (competing consumers on the same log reorder).
    #[test]
    fn order_survives_crashes_and_rebalances() {
        let rebalances = kafka_topic(&["kafka", "competing"])
            .section("consumers")
            .with("commit", "each")
            .fault_for("consumer_crash", "5s", "10s")
            .with("consumer", 0);
        let sc = load(
            &rebalances
                .fault_for("consumer_leave", "20s", "5s")
                .with("consumer", 1),
        );
        let m = run(&sc, "kafka", 1);
        assert_eq!(
            (m.ordering_violations, m.applied, m.lost, m.pending_at_end),
            (0, 4000, 0, 0)
        );
        assert!(run(&sc, "competing", 1).ordering_violations > 0);
    }

    /// Weakness: with auto-commit (the plain client), a crash replays what was processed since
    /// the last poll that committed (5s or more): older states written again (stale writes) and
    /// duplicates.
    #[test]
    fn auto_commit_replays_older_states_after_a_crash() {
        let crash = kafka_topic(&["kafka"])
            .section("consumers")
            .with("client", "plain")
            .fault_for("consumer_crash", "7s", "10s");
        let sc = load(&crash.with("consumer", 0));
        let m = run(&sc, "kafka", 1);
        assert!(m.duplicates > 10, "{m:?}");
        assert!(m.stale_writes > 0, "{m:?}");
        assert_eq!((m.final_state_mismatches, m.lost), (0, 0));
    }

    /// Each producer's partitioner switches to the added partitions at its own metadata refresh
    /// (a phase drawn from the seed, then every `metadata.max.age.ms`), not at the add; the
    /// group's leader sees them at its own refresh, and under `latest` the records sent to a new
    /// partition before then are skipped.
    #[test]
    fn producers_switch_at_their_own_refresh_and_latest_skips_what_came_before() {
        let age: Time = 300_000_000;
        let mut k = Kafka::new(200, 2, Assignor::Range).with_metadata(age, age, true);
        k.on_start(7);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        let add: Time = 60_000_000;
        let mut ctl = Control::default();
        k.on_world(add, WorldChange::PartitionsAdded(2), &mut ctl);
        let leader = ctl.wakes()[0].0;
        assert!(leader >= add && leader < add + age, "{leader}");
        let switch = |p: u32| {
            let phase = k.md.phase(PRODUCER_PHASE, p, age);
            Metadata::next_refresh(phase, age, add)
        };
        let (s0, s1) = (switch(0), switch(1));
        assert_ne!(s0, s1);
        let up = [true];
        let mut id = 0;
        // A key that moves to a new partition over 4 partitions.
        let key = (0..200).find(|&k| key_hash(k) % 4 >= 2).unwrap();
        let mut send = |k: &mut Kafka, now: Time, producer: u32| {
            id += 1;
            let msg = MsgView {
                producer,
                ..msg(id, key)
            };
            let ctx = RouteCtx {
                now,
                producer,
                connected: 0,
                up: &up,
                held_since: None,
            };
            k.route(&ctx, &msg);
            (msg, k.partition_of(&msg))
        };
        for p in [0, 1] {
            let at = if p == 0 { s0 } else { s1 };
            let (_, before) = send(&mut k, at - 1, p);
            let (_, after) = send(&mut k, at, p);
            assert_eq!(before, key_hash(key) % 2, "producer {p} before its refresh");
            assert_eq!(after, key_hash(key) % 4, "producer {p} at its refresh");
        }
        // The producer that refreshed first sends to the new partition before the leader
        // refreshes: once the group has seen it, that record is skipped, a later one is not.
        let first = s0.min(s1);
        let p = if s0 < s1 { 0 } else { 1 };
        let early = (first < leader).then(|| send(&mut k, first, p).0);
        let mut ctl = Control::default();
        k.on_wake(leader, METADATA_WAKE, &mut ctl);
        let late = send(&mut k, leader.max(first) + 1, p).0;
        let ctx = DispatchCtx {
            now: leader,
            broker: 0,
            consumers: &[sim::strategy::ConsumerSlot { id: 0, free: 10 }],
        };
        if let Some(early) = early {
            assert_eq!(k.select(&ctx, &early, &mut ctl), Select::Skip);
        }
        assert_eq!(k.select(&ctx, &late, &mut ctl), Select::Consumer(0));
    }
}
