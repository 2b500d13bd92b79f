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
//!   owner starts at `auto.offset.reset` (`latest` skips what was written to it before: also
//!   what producers wrote while the rebalance that assigns it waited for its members). Not
//!   modelled: a new partition that changes owner before anything of it was committed is reset
//!   again; a leader that leaves before its refresh (the refresh still happens at its time); a
//!   record sent before the reset and stored after it (skipped here, read by Kafka);
//! - each partition has one owner in the group, chosen by the assignor: `range` (Kafka's default
//!   `partition.assignment.strategy` is `[RangeAssignor, CooperativeStickyAssignor]`, and the
//!   first is used), `round_robin`, or `cooperative_sticky` (each member keeps what it owned as far
//!   as balance allows: [`sticky`]). Members are the consumers connected, ordered by index (a
//!   member id's order);
//! - a rebalance (a member joins, leaves, or is dropped after `session.timeout.ms`; the leader
//!   sees added partitions) waits for every member to rejoin, which a member does only from `poll()`: at once
//!   if it is waiting there, else once it has processed every record of its last poll (or is
//!   dropped at `max.poll.interval.ms`, the rebalance timeout, by `poll.rs`). Each commits as it
//!   rejoins (`onJoinPrepare`). The protocol follows the assignor [K12][K13]: `range` and
//!   `round_robin` are eager (so is the default list, which negotiates eager): a member revokes
//!   all it owns when it rejoins, so nothing flows to anyone until the last busy member has
//!   polled and the new assignment is made (stop-the-world, KIP-429 [K14]). `cooperative_sticky`
//!   is cooperative: the members keep fetching what they own while the group waits; the
//!   assignment gives unowned partitions out at once, and a partition that moves is revoked by
//!   its owner at its next poll (`onJoinComplete`) and given to its new owner in a second round,
//!   which again waits for every member's next poll. A member dropped for silence (a crash, a
//!   pause past the session timeout) commits nothing: its partitions resume from their last
//!   commit (duplicates); a paused member that wakes up still writes what it had in hand, and
//!   its commit fails;
//! - a member restarted before the group dropped its dead session (no `group.instance.id`:
//!   `[consumers] restart_takes_over = false`, the flavour's) joins as a new member, and the
//!   rebalance waits for the old session's timeout (under eager nothing is handed out
//!   meanwhile; under cooperative only the dead session's partitions wait) [K7]. A
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

/// A group's rebalance protocol (`ConsumerPartitionAssignor.RebalanceProtocol`): the consumer
/// takes the highest protocol every configured assignor supports (`ConsumerCoordinator`'s
/// constructor), so only `cooperative_sticky` alone is cooperative; the default list
/// `[RangeAssignor, CooperativeStickyAssignor]` negotiates eager, since `RangeAssignor` supports
/// only eager [K12][K13].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Every member revokes all it owns when it rejoins (`onJoinPrepare`): nothing flows until
    /// the new assignment (stop-the-world).
    Eager,
    /// Members keep what they own while they rejoin; a partition that moves is revoked by its
    /// owner when the assignment arrives (`onJoinComplete`) and handed out in a second round.
    Cooperative,
}

impl Assignor {
    /// The rebalance protocol this assignor (alone in the group's list) negotiates.
    pub fn protocol(self) -> Protocol {
        match self {
            Assignor::CooperativeSticky => Protocol::Cooperative,
            Assignor::Range | Assignor::RoundRobin => Protocol::Eager,
        }
    }

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

/// One partition's ownership in the group.
#[derive(Clone, Copy, Debug, Default)]
struct Partition {
    /// The member that owns it (a consumer id).
    owner: Option<u32>,
    /// Cooperative: the assignment moved it away from its owner, which fetches no more of it
    /// and revokes it at its next poll; the second round hands it to its new owner.
    revoking: bool,
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
    /// Per record delivered and not processed yet: its holder.
    holding: BTreeMap<u64, u32>,
    /// Per consumer id: records delivered to it and neither processed, settled nor given back.
    /// A member with none is in `poll()`: that is where it rejoins a rebalance.
    held: Vec<u32>,
    /// A rebalance in progress: the members still to rejoin (each does at its next poll; a
    /// dead one never, until its session goes). None while the group is stable.
    round: Option<Vec<u32>>,
    /// Eager: a rebalance is in progress and every member has revoked (or will revoke at its
    /// next poll, fetching nothing more meanwhile) all it owned: nothing is handed out.
    stopped: bool,
    /// Members whose process died while the group still holds their session (a crash not yet
    /// noticed, or a restart whose new JoinGroup waits for the old session): they never rejoin
    /// a rebalance, which waits for their session to time out [K7].
    dead: Vec<u32>,
    /// Cooperative: members with partitions the last assignment moved away, to revoke at their
    /// next poll.
    revokers: Vec<u32>,
    /// Restarted processes whose JoinGroup waits in the rebalance for their old session to time
    /// out: the round takes them in when they join, rather than ending without them.
    replacing: Vec<u32>,
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
            held: Vec::new(),
            round: None,
            stopped: false,
            dead: Vec::new(),
            revokers: Vec::new(),
            replacing: Vec::new(),
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
        self.rebalance(ctl);
    }

    /// When a round's assignment takes effect (`maybe_complete`: under eager, once the last
    /// busy member has polled; under cooperative a new partition, owned by nobody, is given out
    /// in the first round): each new partition that got an owner is positioned by
    /// `auto.offset.reset` as its owner first fetches it; under `latest`, past every record
    /// sent so far, so what producers wrote to it while the round waited is skipped too.
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

    /// Whether a rebalance is in progress (for tests).
    pub fn rebalancing(&self) -> bool {
        self.round.is_some()
    }

    /// A member joined or left, a dead member's replacement asked to join, or partitions were
    /// added: a rebalance starts, or the one in progress takes the change in (a joiner is in
    /// `poll()`, so already rejoined; a leaver is no longer waited for).
    fn rebalance(&mut self, ctl: &mut Control) {
        match &mut self.round {
            Some(pending) => pending
                .retain(|m| self.members.binary_search(m).is_ok() || self.replacing.contains(m)),
            None => self.start_round(&[], ctl),
        }
        self.maybe_complete(ctl);
    }

    /// A rebalance starts (the coordinator asks every member to rejoin; those in `already` just
    /// did). A member in `poll()` (nothing held) rejoins at once; a busy one at its next poll,
    /// that is once it has processed every record of its last poll. Each commits as it rejoins
    /// (`onJoinPrepare`'s auto-commit; Spring's container commits in `onPartitionsRevoked`).
    /// Under eager each also revokes everything it owns: from now nothing is handed out.
    fn start_round(&mut self, already: &[u32], ctl: &mut Control) {
        let mut pending = Vec::new();
        for &m in &self.members {
            if already.contains(&m) {
                continue;
            }
            if self.dead.contains(&m) || self.held_by(m) > 0 {
                pending.push(m);
            } else {
                ctl.commit(m);
            }
        }
        self.round = Some(pending);
        if self.assignor.protocol() == Protocol::Eager {
            self.stopped = true;
            // Promises made to owners are withdrawn: nothing goes to anyone now.
            ctl.holds_changed(0);
        }
    }

    /// Records of member `m` delivered and not yet processed or given back.
    fn held_by(&self, m: u32) -> u32 {
        self.held.get(m as usize).copied().unwrap_or(0)
    }

    /// Member `m` is back in `poll()` (it processed, or gave back, every record it held). Under
    /// cooperative it revokes the partitions the last assignment moved away from it, commits,
    /// and rejoins: the second round (started by the first such member). It rejoins the round in
    /// progress, committing first.
    fn polls(&mut self, m: u32, ctl: &mut Control) {
        if self.dead.contains(&m) {
            return;
        }
        let revoked = self.revoke(m);
        match &mut self.round {
            Some(pending) => {
                // It rejoins this round, or had already and revokes in it: a commit either way.
                let waited = pending
                    .iter()
                    .position(|&x| x == m)
                    .map(|i| pending.remove(i));
                if revoked || waited.is_some() {
                    ctl.commit(m);
                }
            }
            None if revoked => {
                ctl.commit(m);
                self.start_round(&[m], ctl);
            }
            None => {}
        }
        self.maybe_complete(ctl);
    }

    /// Member `m`, in `poll()`, revokes the partitions the last assignment moved away from it
    /// (`onJoinComplete`): nobody's until the next round. Whether it had any.
    fn revoke(&mut self, m: u32) -> bool {
        let Some(i) = self.revokers.iter().position(|&r| r == m) else {
            return false;
        };
        self.revokers.remove(i);
        let mut any = false;
        for part in &mut self.partitions {
            if part.revoking && part.owner == Some(m) {
                part.revoking = false;
                part.owner = None;
                any = true;
            }
        }
        any
    }

    /// Every member has rejoined: the leader's assignment takes effect (`SyncGroup`). Eager: all
    /// partitions, from nothing. Cooperative (`CooperativeStickyAssignor.adjustAssignment`): a
    /// partition owned by nobody goes to its new owner now; one that moves from a member stays
    /// with it, revoking, until that member's next poll; the second round hands it out.
    fn maybe_complete(&mut self, ctl: &mut Control) {
        if self.round.as_ref().is_none_or(|p| !p.is_empty()) {
            return;
        }
        self.round = None;
        self.stopped = false;
        let owned: Vec<Option<u32>> = self
            .partitions
            .iter()
            .map(|p| p.owner.filter(|o| self.members.binary_search(o).is_ok()))
            .collect();
        let owners = self.assignor.reassign(&owned, &self.members);
        let cooperative = self.assignor.protocol() == Protocol::Cooperative;
        let mut revokers = std::mem::take(&mut self.revokers);
        for (p, new) in owners.into_iter().enumerate() {
            let part = &mut self.partitions[p];
            if part.owner == new {
                // Stays, or (assigned back before its owner polled) is no longer revoked.
                part.revoking = false;
                continue;
            }
            match owned[p] {
                Some(old) if cooperative && new.is_some() => {
                    part.revoking = true;
                    if !revokers.contains(&old) {
                        revokers.push(old);
                    }
                }
                _ => {
                    part.owner = new;
                    part.revoking = false;
                    if let Some(n) = new {
                        ctl.reassigned(0, n);
                    }
                }
            }
        }
        self.position_new();
        ctl.holds_changed(0);
        ctl.redispatch();
        self.revokers = revokers;
        // A member already in `poll()` gets the assignment there, revokes at once and rejoins:
        // the second round.
        let idle: Vec<u32> = (self.revokers.iter().copied())
            .filter(|&m| self.held_by(m) == 0 && !self.dead.contains(&m))
            .collect();
        let mut rejoined = Vec::new();
        for m in idle {
            if self.revoke(m) {
                ctl.commit(m);
                rejoined.push(m);
            }
        }
        if !rejoined.is_empty() {
            self.start_round(&rejoined, ctl);
            self.maybe_complete(ctl);
        }
    }

    /// One record of partition `p` held by member `holder` is no longer waiting to be
    /// processed: with none left the member is back in `poll()`.
    fn done(&mut self, holder: u32, ctl: &mut Control) {
        let Some(h) = self.held.get_mut(holder as usize) else {
            return;
        };
        *h = h.saturating_sub(1);
        if *h == 0 && (self.round.is_some() || !self.revokers.is_empty()) {
            self.polls(holder, ctl);
        }
    }

    /// The record left the broker's hands for good, or came back to the log: forget it.
    fn forget(&mut self, id: u64, ctl: &mut Control) {
        // A record already processed was forgotten then (`on_handled`).
        if let Some(holder) = self.holding.remove(&id) {
            self.done(holder, ctl);
        }
    }
}

impl Handler for Kafka {}

impl crate::Named for Kafka {
    const NAME: &'static str = "kafka";
    const SUMMARY: &'static str = "Kafka consumer group: key -> partition by murmur2, one owner per partition (range assignor), eager or cooperative rebalance; run with flavour = \"kafka\" (offset commits, session timeout)";
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
            models: "partition.assignment.strategy (default [RangeAssignor, CooperativeStickyAssignor]: range, eager protocol: a rebalance stops every member until the last has polled); cooperative_sticky keeps owners where balance allows and the cooperative protocol (only moved partitions stop, for two rounds)",
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
        // The resolved values (the flavour's defaults filled in once, in `Resolved`).
        let r = sc.resolve().map_err(|problems| {
            problems
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        let age = |a: Option<sim::time::Dur>| a.map_or(0, |a| a.0);
        Ok(
            Kafka::new(sc.workload.keys, p.partitions, p.assignor).with_metadata(
                age(r.producer_metadata_max_age),
                age(r.consumer_metadata_max_age),
                r.auto_offset_reset == Some(sim::scenario::OffsetReset::Latest),
            ),
        )
    }
}

impl Strategy for Kafka {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, _ctl: &mut Control) -> Select {
        if self.stopped {
            // An eager rebalance: every record waits, so the rest of the log is not asked.
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
        let Some(owner) = part.owner.filter(|_| !part.revoking) else {
            return Select::Hold;
        };
        match ctx.consumers.iter().position(|c| c.id == owner) {
            Some(i) if ctx.consumers[i].free > 0 => {
                if self.held.len() <= owner as usize {
                    self.held.resize(owner as usize + 1, 0);
                }
                self.held[owner as usize] += 1;
                self.holding.insert(msg.id, owner);
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

    fn partition(&self, msg: &MsgView) -> u32 {
        self.partition_of(msg)
    }

    fn on_start(&mut self, seed: u64) {
        self.md.seed = seed;
    }

    fn on_wake(&mut self, _now: Time, token: u64, ctl: &mut Control) {
        if token == METADATA_WAKE {
            self.learn_partitions(ctl);
        }
    }

    fn on_attach(&mut self, _now: Time, _broker: u16, consumer: u32, ctl: &mut Control) {
        if let Err(i) = self.members.binary_search(&consumer) {
            self.members.insert(i, consumer);
            // It joins from `poll()`: it has rejoined (a restarted process, the round that
            // waited for its old session).
            self.replacing.retain(|&c| c != consumer);
            if let Some(pending) = &mut self.round {
                pending.retain(|&m| m != consumer);
            }
            self.rebalance(ctl);
        }
    }

    fn on_detach(&mut self, _now: Time, _broker: u16, consumer: u32, ctl: &mut Control) {
        self.dead.retain(|&c| c != consumer);
        self.revokers.retain(|&c| c != consumer);
        if let Ok(i) = self.members.binary_search(&consumer) {
            self.members.remove(i);
            // Its partitions are nobody's until the rebalance assigns them (what it held came
            // back to the log: a revocation waiting on it is over).
            for part in &mut self.partitions {
                if part.owner == Some(consumer) {
                    part.owner = None;
                    part.revoking = false;
                }
            }
            self.rebalance(ctl);
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
            && self.holding.get(&msg.id).is_some_and(|&h| h == consumer)
        {
            self.holding.remove(&msg.id);
            self.done(consumer, ctl);
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
            // Its session stays in the group until it times out: it will not rejoin.
            WorldChange::ConsumerCrashed(c)
                if self.members.binary_search(&c).is_ok() && !self.dead.contains(&c) =>
            {
                self.dead.push(c);
            }
            // A restarted process died again before it could join: the round no longer waits
            // for it.
            WorldChange::ConsumerCrashed(c) if self.replacing.contains(&c) => {
                self.replacing.retain(|&r| r != c);
                if self.members.binary_search(&c).is_err() {
                    self.rebalance(ctl);
                }
            }
            // Its old session is still a member (no `group.instance.id`): the new member's join
            // starts a rebalance that waits for the old session to time out; every other member
            // rejoins (and commits) at its next poll.
            WorldChange::ConsumerRestarted(c) if self.members.binary_search(&c).is_ok() => {
                if !self.dead.contains(&c) {
                    self.dead.push(c);
                }
                if !self.replacing.contains(&c) {
                    self.replacing.push(c);
                }
                match &mut self.round {
                    Some(pending) if !pending.contains(&c) => pending.push(c),
                    Some(_) => {}
                    None => self.start_round(&[], ctl),
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
    /// until that session goes and the new process joins (its JoinGroup waited in the same
    /// rebalance), the others commit; a second notice, or a restart of a member already
    /// dropped, changes nothing; a restart of a member not in the group starts no rebalance.
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
        let mut ctl = Control::default();
        k.on_detach(2, 0, 1, &mut ctl);
        k.on_world(2, WorldChange::ConsumerRestarted(1), &mut ctl);
        assert!(ctl.commits().is_empty());
        assert!(
            k.rebalancing(),
            "the round waits for the new process's join"
        );
        k.on_attach(2, 0, 1, &mut ctl);
        assert!(!k.rebalancing());
        assert_eq!(select_at(&mut k, 2, &slots, &msg(1, key0), &mut ctl), Ok(0));
        // Member 0 processes its record; member 1 leaves; its restart, not a member's, starts
        // nothing.
        k.on_handled(
            3,
            0,
            &msg(1, key0),
            &Outcome::Applied { state_seq: 1 },
            &mut ctl,
        );
        k.on_detach(3, 0, 1, &mut ctl);
        let mut ctl = Control::default();
        k.on_world(3, WorldChange::ConsumerRestarted(1), &mut ctl);
        assert!(ctl.commits().is_empty());
        assert!(!k.rebalancing());
        assert_eq!(select_at(&mut k, 3, &slots, &msg(2, key0), &mut ctl), Ok(0));
    }

    /// A restarted process that dies again before it could join: the round waiting for it ends
    /// without it when its old session goes.
    #[test]
    fn a_restarted_process_dead_again_is_not_waited_for() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        k.on_world(1, WorldChange::ConsumerRestarted(1), &mut ctl);
        k.on_world(2, WorldChange::ConsumerCrashed(1), &mut ctl);
        assert!(k.rebalancing());
        k.on_detach(3, 0, 1, &mut ctl);
        assert!(!k.rebalancing());
        assert_eq!((k.owner(0), k.owner(1)), (Some(0), Some(0)));
    }

    /// Cooperative: the same restart stops only the dead session's partition; the member that
    /// stays keeps its own flowing while the rebalance waits, and the new process has the other
    /// once it joined (nobody owned it then: no second round).
    #[test]
    fn under_cooperative_a_restart_stalls_only_the_dead_sessions_partitions() {
        let mut k = Kafka::new(50, 2, Assignor::CooperativeSticky);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        let key = |p| (0..50).find(|&key| k.partition_of(&msg(0, key)) == p);
        let mine = |k: &Kafka, m| (0..2).find(|&p| k.owner(p) == Some(m)).unwrap();
        let (k0, k1) = (key(mine(&k, 0)).unwrap(), key(mine(&k, 1)).unwrap());
        let mut ctl = Control::default();
        k.on_world(1, WorldChange::ConsumerRestarted(1), &mut ctl);
        assert!(k.rebalancing());
        assert_eq!(ctl.commits(), [0]);
        let slots = [(0, 5)];
        assert_eq!(select_at(&mut k, 1, &slots, &msg(1, k0), &mut ctl), Ok(0));
        assert_eq!(
            select_at(&mut k, 1, &slots, &msg(2, k1), &mut ctl),
            Err(Select::Hold)
        );
        // Member 0 rejoined when the round started (it was in `poll()`).
        k.on_detach(2, 0, 1, &mut ctl);
        assert_eq!(select_at(&mut k, 2, &slots, &msg(3, k0), &mut ctl), Ok(0));
        k.on_attach(2, 0, 1, &mut ctl);
        assert!(!k.rebalancing());
        let both = [(0, 5), (1, 5)];
        assert_eq!(select_at(&mut k, 3, &both, &msg(2, k1), &mut ctl), Ok(1));
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
        // The partitions move (a member leaves): the promise is withdrawn. Consumer 1 rejoins
        // once it has processed what it holds; partition 0 is its own then.
        let mut ctl = Control::default();
        k.on_detach(2, 0, 0, &mut ctl);
        assert_eq!(ctl.holds_changes(), vec![0]);
        let applied = Outcome::Applied { state_seq: 1 };
        k.on_handled(2, 1, &msg(2, b), &applied, &mut ctl);
        k.on_handled(2, 1, &msg(4, b), &applied, &mut ctl);
        assert_eq!(select_at(&mut k, 2, &[(1, 5)], &msg(3, a), &mut ctl), Ok(1));
    }

    /// The protocol follows the assignor: the default (range, whose list with cooperative-sticky
    /// negotiates eager) and round robin are eager; cooperative-sticky is cooperative.
    #[test]
    fn only_cooperative_sticky_is_cooperative() {
        assert_eq!(Assignor::default().protocol(), Protocol::Eager);
        assert_eq!(Assignor::RoundRobin.protocol(), Protocol::Eager);
        assert_eq!(
            Assignor::CooperativeSticky.protocol(),
            Protocol::Cooperative
        );
    }

    /// Eager: a member joins while member 0 is busy on a record of partition 0. Every partition
    /// stops, member 1's too though it keeps it (it rejoined from `poll()` and revoked all it
    /// owned), until member 0 has processed its poll's records and rejoins, committing then
    /// and not before; then the new assignment flows.
    #[test]
    fn an_eager_rebalance_stops_every_partition_until_the_busy_member_polls() {
        let mut k = Kafka::new(50, 2, Assignor::Range);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        let key = |p| (0..50).find(|&key| k.partition_of(&msg(0, key)) == p);
        let (key0, key1) = (key(0).unwrap(), key(1).unwrap());
        let slots = [(0, 5), (1, 5), (2, 5)];
        assert_eq!(select_at(&mut k, 1, &slots, &msg(1, key0), &mut ctl), Ok(0));
        let mut ctl = Control::default();
        k.on_attach(2, 0, 2, &mut ctl);
        assert!(k.rebalancing());
        assert_eq!(
            ctl.commits(),
            [1, 2],
            "the members in poll() rejoin and commit at once"
        );
        assert_eq!(
            select_at(&mut k, 2, &slots, &msg(2, key1), &mut ctl),
            Err(Select::Stop),
            "member 1 revoked its partition too: nothing flows"
        );
        // Member 0 processes its record: back in `poll()`, it commits and rejoins; the range
        // assignment over three members gives partition 1 back to member 1.
        let applied = Outcome::Applied { state_seq: 1 };
        let mut ctl = Control::default();
        k.on_handled(3, 0, &msg(1, key0), &applied, &mut ctl);
        assert_eq!(ctl.commits(), [0]);
        assert!(!k.rebalancing());
        assert!(ctl.redispatch_requested());
        assert_eq!(ctl.holds_changes(), [0], "what waited is asked again");
        assert_eq!(select_at(&mut k, 3, &slots, &msg(2, key1), &mut ctl), Ok(1));
        // A zombie's copy (not its holder's) changes nothing; nor does a failure.
        let mut ctl = Control::default();
        k.on_handled(4, 0, &msg(2, key1), &applied, &mut ctl);
        let failed = Outcome::Failed(sim::history::FailReason::Outage);
        k.on_handled(4, 1, &msg(2, key1), &failed, &mut ctl);
        assert!(ctl.commits().is_empty());
        assert_eq!(k.held_by(1), 1);
    }

    /// Cooperative: member 2 joins two busy members owning two partitions each. The first
    /// round waits for both to rejoin from their next poll while their partitions keep flowing;
    /// then the one partition that moves (member 0's lowest: it is at the maximum) is revoked by
    /// member 0 in its `poll()` and nobody's until the second round, which waits for member 1's
    /// next poll; then member 2 has it.
    #[test]
    fn a_cooperative_rebalance_keeps_what_stays_flowing_and_moves_the_rest_in_a_second_round() {
        let mut k = Kafka::new(200, 4, Assignor::CooperativeSticky);
        let mut ctl = Control::default();
        k.on_attach(0, 0, 0, &mut ctl);
        k.on_attach(0, 0, 1, &mut ctl);
        let of = |k: &Kafka, m| {
            (0..4)
                .filter(|&p| k.owner(p) == Some(m))
                .collect::<Vec<_>>()
        };
        let (mine0, mine1) = (of(&k, 0), of(&k, 1));
        assert_eq!((mine0.len(), mine1.len()), (2, 2));
        let key = |p| (0..200).find(|&key| k.partition_of(&msg(0, key)) == p);
        let keys: Vec<u32> = (0..4).map(|p| key(p).unwrap()).collect();
        let slots = [(0, 5), (1, 5), (2, 5)];
        let sel = |k: &mut Kafka, id, p: u32, ctl: &mut Control| {
            select_at(k, 1, &slots, &msg(id, keys[p as usize]), ctl)
        };
        let applied = Outcome::Applied { state_seq: 1 };
        assert_eq!(sel(&mut k, 1, mine0[1], &mut ctl), Ok(0));
        assert_eq!(sel(&mut k, 2, mine1[0], &mut ctl), Ok(1));
        let mut ctl = Control::default();
        k.on_attach(2, 0, 2, &mut ctl);
        assert!(k.rebalancing());
        assert_eq!(ctl.commits(), [2]);
        assert_eq!(
            sel(&mut k, 3, mine1[1], &mut ctl),
            Ok(1),
            "nothing revoked yet"
        );
        // Member 1 polls (rejoins) and takes another record; member 0 polls last: the first
        // round is over.
        let mut ctl = Control::default();
        k.on_handled(2, 1, &msg(2, keys[mine1[0] as usize]), &applied, &mut ctl);
        k.on_handled(2, 1, &msg(3, keys[mine1[1] as usize]), &applied, &mut ctl);
        assert_eq!(ctl.commits(), [1]);
        assert_eq!(sel(&mut k, 4, mine1[0], &mut ctl), Ok(1));
        let mut ctl = Control::default();
        k.on_handled(3, 0, &msg(1, keys[mine0[1] as usize]), &applied, &mut ctl);
        // It rejoins; it revokes and rejoins again, and member 2, in `poll()`, with it.
        assert_eq!(ctl.commits(), [0, 0, 2]);
        assert!(k.rebalancing(), "the second round waits for member 1");
        let moved = mine0[0];
        assert_eq!(k.owner(moved), None);
        assert_eq!(sel(&mut k, 5, moved, &mut ctl), Err(Select::Hold));
        assert_eq!(
            sel(&mut k, 6, mine0[1], &mut ctl),
            Ok(0),
            "what stays flows"
        );
        // Member 1 polls: the second round gives the moved partition to member 2.
        let mut ctl = Control::default();
        k.on_handled(4, 1, &msg(4, keys[mine1[0] as usize]), &applied, &mut ctl);
        assert_eq!(ctl.commits(), [1]);
        assert!(!k.rebalancing());
        assert_eq!(ctl.reassignments(), vec![(0, 2)]);
        assert_eq!(sel(&mut k, 7, moved, &mut ctl), Ok(2));
    }

    /// A member leaving (a clean leave, or dropped at the session timeout) is no longer waited
    /// for: a rebalance that waited only for its next poll is over, and its partitions go to
    /// the members left (what it held is back in the log).
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
        assert_eq!(k.owner(1), Some(0), "not before consumer 0 rejoins");
        // Consumer 0 leaves with record 1 of partition 1 unprocessed: the rebalance no longer
        // waits for it (consumer 1 rejoined when it joined), partition 0 goes to 1.
        assert!(k.rebalancing());
        let mut ctl = Control::default();
        k.on_detach(3, 0, 0, &mut ctl);
        assert!(!k.rebalancing());
        assert_eq!(ctl.reassignments(), vec![(0, 1), (0, 1)]);
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
                Err(Select::Stop)
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
