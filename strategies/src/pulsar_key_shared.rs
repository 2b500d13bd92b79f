//! `pulsar_key_shared`: an Apache Pulsar `Key_Shared` subscription (`AUTO_SPLIT` mode), by the
//! broker's `[[broker]] version` ([`Dispatcher`]).
//!
//! - 4.0 on (`"4.0"` to `"5.0"`, the default: the current release): PIP-379's dispatcher, the
//!   default since 4.0 and the only one in 5.0. **Draining hashes** (`DrainingHashesTracker`):
//!   when a join or a leave moves a sticky key hash to another consumer while the consumer it
//!   left still has pending acks of it, the hash is blocked for every other consumer until
//!   those are acknowledged, redelivered (a nack's delay over) or their consumer closes; a hash
//!   moving back to that consumer is free at once. No join gate: the joiner gets its other keys
//!   at once, and a message read and held before a join still waits behind its key's earlier
//!   one. Ring points at `consumerName + "\0" + i`.
//! - 3.x (`"3.0"`, `"3.3"`; 4.x's `...Classic` behind
//!   `subscriptionKeySharedUseClassicPersistentImplementation`): the "recently joined consumers"
//!   gate on the cursor's read position (below, without PIP-282's last-sent positions), ring
//!   points at `consumerName + i`.
//!
//! What the broker does, from its own code (`PersistentStickyKeyDispatcherMultipleConsumers`,
//! `ConsistentHashingStickyKeyConsumerSelector`, `HashRangeAutoSplitStickyKeyConsumerSelector`,
//! `StickyKeyConsumerSelector.makeStickyKeyHash`, `Murmur3_32Hash`, `ServiceConfiguration`,
//! `DrainingHashesTracker`; docs/sources.md [P4][P7][P8]):
//!
//! - **Key -> hash -> consumer.** A message's sticky key (its key as the producer's
//!   `key(String)` writes it: here the key in decimal, UTF-8; a message without a key has the
//!   sticky key `"NONE_KEY"`, so all of them go to one consumer) is hashed with 32-bit
//!   MurmurHash3 (seed 0) masked to 31 bits. The selector maps the hash to a consumer:
//!   - `consistent_hashing`, the broker default since 2.10 (`subscriptionKeySharedUseConsistentHashing
//!     = true`, PIP-119): each consumer puts `replica_points` (100,
//!     `subscriptionKeySharedConsistentHashingReplicaPoints`) points on a ring, at the hash of
//!     its name followed by the point's index (`"c0" + "17"`); a key goes to the first point at
//!     or after its hash (wrapping), and among consumers sharing a point to the one at
//!     `hash % count` in name order. A joining consumer takes a few keys from every other; a
//!     leaving one's keys go to the next points;
//!   - `auto_split` (`subscriptionKeySharedUseConsistentHashing = false`): ranges over
//!     `hash % 65536`; the first consumer owns `[0, 65536]`; a joining one takes the lower half
//!     of the largest range (the first of equal ones); a leaving one's range goes to the range
//!     above it (the top range to the one below).
//!
//!   Consumer names are the scenario's (`[consumers] names`, else `c0`, `c1`...): a consumer
//!   that comes back with its configured `consumerName` gets its keys back (the client's default
//!   is a random name per consumer instance, which would move them elsewhere).
//! - **The join gate** (3.x; `allowOutOfOrderDelivery = false`, the default). When a consumer joins
//!   while another is connected and something read is not acknowledged yet, the broker records
//!   the cursor's read position (here: one past the newest message dispatch has looked at).
//!   Until the mark-delete position reaches it (every message before it acknowledged, or
//!   dead-lettered), the new consumer gets only messages older than that position; newer ones
//!   of its keys wait. A replayed message (one read before: redelivered, or held for want of
//!   permits) is limited by the earliest such position of any recently joined consumer. So a
//!   stuck or slow existing consumer, or a message waiting out its negative-ack delay, stalls the
//!   new consumer's keys ([P3] #15705); the other keys go on (below). A consumer that
//!   leaves hands its keys to existing consumers at once: its unacknowledged messages are
//!   replayed first, in position order. A held message older than the join position goes to the
//!   new owner even while the old owner still holds an earlier one of its key: the reordering
//!   PIP-282 was written to fix. Measured with crashes and leaves (3000 messages, 4 consumers,
//!   seeds 1-5): with the client's receiver queue of 1000, 0 violations at 200/s and at 350/s;
//!   with 50 at 350/s, 0-55 (the test `a_held_message_goes_to_the_joiner_before_an_earlier_one`).
//!   `allow_out_of_order_delivery = true`: no gate.
//! - **Reading on past a full consumer** (`trySendMessagesToConsumers`, `readMoreEntries`): a
//!   message read for a consumer without permits (its receiver queue full: a slow consumer), or
//!   held by the join gate, goes to the replay set (`addMessageToReplay`) and the dispatcher reads
//!   the next batch of `dispatcherMaxReadBatchSize` (100) "which might hopefully contain also keys
//!   meant for other consumers" (`isDispatcherStuckOnReplays`); replays whose consumer has no
//!   permits are filtered out before a read (`filterOutEntriesWillBeDiscarded`, 3.0.5 on), and a
//!   normal read happens while a consumer that is not recently joined has permits
//!   (`hasConsumersNeededNormalRead`). So one slow consumer's keys wait and the others keep their
//!   latency: the `pulsar` flavour's dispatch looks through the whole queue
//!   ([`Flavour::page_size`](sim::scenario::Flavour::page_size) unbounded), a message for a full
//!   consumer is a [`Select::HoldFor`] the broker skips until that consumer has room, and an
//!   unread message with only recently joined consumers having permits is a [`Select::Stop`]
//!   (the cursor stays). Nothing else bounds the replay set in 3.x (the broker's memory,
//!   apache/pulsar#26677) but `maxUnackedMessagesPerSubscription` (200,000 dispatched and
//!   unacknowledged; not modelled: it takes 200 consumers' full receiver queues); 4.0's
//!   dispatcher caps it (`keySharedLookAheadMsgInReplayThresholdPerConsumer` 2000,
//!   `...PerSubscription` 20,000; not modelled). Reading on also puts more read-and-held
//!   messages behind each join, for the reorder below.
//! - **Negative acks and redelivery** are the broker's and the client's: run it with
//!   `flavour = "pulsar"` (a failed message is redelivered after `negativeAckRedeliveryDelay`,
//!   60s, while later messages of its key go on: "negative acknowledgments on ordered
//!   subscription types ... might cause failed messages being sent to consumers out of the
//!   original order" [P1]).
//!
//! What it does not model: the `STICKY` mode (client-chosen ranges), batching (producers must
//! use key-based batching or none [P1]), PIP-282's last-sent positions, 4.0's look-ahead limits
//! and `keySharedUnblockingIntervalMs` (10ms before the read after a hash is unblocked), and the
//! per-read grouping (a replayed message
//! blocks newer ones of its hash, which the queue's position order already gives here). One
//! `[[broker]]`: the broker that owns the topic. Dispatch positions are message ids (production
//! order).
//!
//! Parameters (`[strategy.pulsar_key_shared]`): `selector` (`consistent_hashing`),
//! `replica_points` (100), `allow_out_of_order_delivery` (false).

use serde::{Deserialize, Serialize};
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy, WorldChange};
use sim::time::Time;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// 32-bit MurmurHash3 (x86, seed 0) of `data`, as Pulsar's `Murmur3_32Hash.makeHash0`.
pub fn murmur3_32(data: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mix_k = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h: u32 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        h ^= mix_k(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let mut k: u32 = 0;
    for (i, &b) in chunks.remainder().iter().enumerate() {
        k ^= u32::from(b) << (8 * i);
    }
    h ^= mix_k(k);
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// `StickyKeyConsumerSelector.makeStickyKeyHash`: MurmurHash3 masked to 31 bits.
pub fn sticky_key_hash(key: &[u8]) -> u32 {
    murmur3_32(key) & 0x7fff_ffff
}

/// The hash range of `auto_split` (`StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE`, 2 << 15).
pub const RANGE_SIZE: u32 = 65_536;

/// The sticky key of a message without a key.
const NONE_KEY: &[u8] = b"NONE_KEY";

/// Which `AUTO_SPLIT` selector the broker uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectorKind {
    /// `ConsistentHashingStickyKeyConsumerSelector` (the default since 2.10).
    #[default]
    ConsistentHashing,
    /// `HashRangeAutoSplitStickyKeyConsumerSelector`.
    AutoSplit,
}

/// `[strategy.pulsar_key_shared]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PulsarKeySharedParams {
    /// `consistent_hashing` or `auto_split`.
    #[serde(default)]
    pub selector: SelectorKind,
    /// Points per consumer on the consistent-hashing ring.
    #[serde(default = "default_points")]
    pub replica_points: u32,
    /// `KeySharedPolicy.setAllowOutOfOrderDelivery`: no join gate.
    #[serde(default)]
    pub allow_out_of_order_delivery: bool,
}

fn default_points() -> u32 {
    100
}

/// What `n` replica points cost a run of `sc` under the consistent-hashing selector (nothing
/// under `auto_split`): a map entry per point and consumer, hashed at each join, and the whole
/// ring walked at each leave.
fn points_cost(n: u64, sc: &sim::Scenario) -> crate::Footprint {
    let selector = sc
        .strategy
        .get(<PulsarKeyShared as crate::Named>::NAME)
        .and_then(|t| t.get("selector"))
        .and_then(toml::Value::as_str);
    if selector == Some("auto_split") {
        return crate::Footprint::default();
    }
    let targets = sc.dispatch_targets() as u64;
    let ring = n.saturating_mul(targets);
    let leaves = crate::rebalances(sc).saturating_sub(targets);
    crate::Footprint {
        bytes: ring.saturating_mul(64),
        steps: ring.saturating_add(ring.saturating_mul(leaves)),
    }
}

impl Default for PulsarKeySharedParams {
    fn default() -> Self {
        PulsarKeySharedParams {
            selector: SelectorKind::default(),
            replica_points: default_points(),
            allow_out_of_order_delivery: false,
        }
    }
}

/// No consumer.
const NIL: u32 = u32::MAX;

/// Which Key_Shared dispatcher the broker's version runs: its ordering protection across a
/// membership change, and its ring's point names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatcher {
    /// 3.x (`PersistentStickyKeyDispatcherMultipleConsumers` before PIP-379, 4.x's
    /// `...Classic`): the "recently joined consumers" gate on the cursor's read position;
    /// ring points at `name + i`, colliding consumers picked by `hash % count`.
    RecentlyJoined,
    /// 4.0 on (PIP-379): draining hashes. A hash whose consumer changed is blocked for every
    /// other consumer while the one it left still has unacknowledged messages of it
    /// (`DrainingHashesTracker`); a joiner gets everything else at once. Ring points at
    /// `name + "\0" + i`, colliding consumers in name order.
    DrainingHashes,
}

impl Dispatcher {
    /// The dispatcher of release line `version` (`"3.3"`, `"4.0"`...; None: the current one).
    pub fn of_version(version: Option<&str>) -> Self {
        match version.map(sim::scenario::release) {
            Some(r) if r < (4, 0) => Dispatcher::RecentlyJoined,
            _ => Dispatcher::DrainingHashes,
        }
    }
}

/// The key -> consumer selector.
#[derive(Debug)]
enum Selector {
    /// Ring point -> consumers on it, in name order.
    Ring(BTreeMap<u32, Vec<u32>>),
    /// Range upper bound (inclusive) -> consumer.
    Ranges(BTreeMap<u32, u32>),
}

/// A Pulsar Key_Shared subscription's dispatcher.
#[derive(Debug)]
pub struct PulsarKeyShared {
    params: PulsarKeySharedParams,
    /// The broker version's dispatcher.
    dispatcher: Dispatcher,
    selector: Selector,
    /// Consumer names, by id.
    names: Vec<String>,
    /// Per key, its sticky key hash.
    key_hash: Vec<u32>,
    /// The hash of `NONE_KEY`.
    none_hash: u32,
    /// Per key, its consumer (NIL: none), and that of keyless messages.
    owner: Vec<u32>,
    none_owner: u32,
    /// Consumers in the selector, in join order.
    members: Vec<u32>,
    /// Recently joined consumers and the read position when each joined, in join order.
    recently_joined: VecDeque<(u32, u64)>,
    /// The cursor's read position: one past the newest message dispatch has looked at.
    read_pos: u64,
    /// The first message not settled (the mark-delete position's next).
    first_unsettled: u64,
    /// Messages settled after `first_unsettled`.
    settled_ahead: BTreeSet<u64>,
    /// Draining hashes (4.0 on): each dispatched and unacknowledged message (the consumers'
    /// `PendingAcksMap`), by id: its consumer and sticky key hash.
    pending: BTreeMap<u64, (u32, u32)>,
    /// Per sticky key hash with pending acks, the one consumer holding them and how many. A
    /// hash held by a consumer that no longer owns it is draining: blocked for the others
    /// (`DrainingHashesTracker`: the entry's ref count is those pending acks).
    holders: BTreeMap<u32, (u32, u32)>,
}

impl PulsarKeyShared {
    /// A subscription over `keys` keys, consumers named `names` (by id), on a broker running
    /// `dispatcher`.
    pub fn new(
        keys: u32,
        names: Vec<String>,
        params: PulsarKeySharedParams,
        dispatcher: Dispatcher,
    ) -> Self {
        let key_hash: Vec<u32> = (0..keys)
            .map(|k| sticky_key_hash(k.to_string().as_bytes()))
            .collect();
        PulsarKeyShared {
            selector: match params.selector {
                SelectorKind::ConsistentHashing => Selector::Ring(BTreeMap::new()),
                SelectorKind::AutoSplit => Selector::Ranges(BTreeMap::new()),
            },
            owner: vec![NIL; key_hash.len()],
            key_hash,
            none_hash: sticky_key_hash(NONE_KEY),
            none_owner: NIL,
            names,
            members: Vec::new(),
            recently_joined: VecDeque::new(),
            read_pos: 0,
            first_unsettled: 0,
            settled_ahead: BTreeSet::new(),
            pending: BTreeMap::new(),
            holders: BTreeMap::new(),
            params,
            dispatcher,
        }
    }

    fn name(&self, c: u32) -> String {
        self.names
            .get(c as usize)
            .cloned()
            .unwrap_or_else(|| format!("c{c}"))
    }

    /// The consumer for sticky key hash `hash` (`select(int hash)`), or NIL.
    pub fn select_hash(&self, hash: u32) -> u32 {
        match &self.selector {
            Selector::Ring(ring) => {
                let Some((_, list)) = ring.range(hash..).next().or_else(|| ring.iter().next())
                else {
                    return NIL;
                };
                match self.dispatcher {
                    Dispatcher::RecentlyJoined => list[(hash % list.len() as u32) as usize],
                    // The first in (priority, name) order: names are unique here.
                    Dispatcher::DrainingHashes => list[0],
                }
            }
            Selector::Ranges(ranges) => ranges
                .range(hash % RANGE_SIZE..)
                .next()
                .map_or(NIL, |(_, &c)| c),
        }
    }

    /// The ring points of consumer `c`: `consumerName + i` hashed (3.x), `consumerName + "\0" + i`
    /// from 4.0 (`KEY_SEPARATOR`).
    fn points(&self, c: u32) -> Vec<u32> {
        let name = self.name(c);
        let sep = match self.dispatcher {
            Dispatcher::RecentlyJoined => "",
            Dispatcher::DrainingHashes => "\0",
        };
        (0..self.params.replica_points)
            .map(|i| sticky_key_hash(format!("{name}{sep}{i}").as_bytes()))
            .collect()
    }

    /// `selector.addConsumer`.
    fn add_to_selector(&mut self, c: u32) {
        let points = match &self.selector {
            Selector::Ring(_) => self.points(c),
            Selector::Ranges(_) => Vec::new(),
        };
        let names = &self.names;
        let name_of = |x: u32| names.get(x as usize).cloned().unwrap_or_default();
        match &mut self.selector {
            Selector::Ring(ring) => {
                for p in points {
                    let list = ring.entry(p).or_default();
                    if !list.contains(&c) {
                        list.push(c);
                        list.sort_by_key(|&x| name_of(x));
                    }
                }
            }
            Selector::Ranges(ranges) => {
                if ranges.is_empty() {
                    ranges.insert(RANGE_SIZE, c);
                    return;
                }
                // findBiggestRange: the first of the largest ranges.
                let (mut lower, mut best, mut busiest) = (0, 0, RANGE_SIZE);
                for &upper in ranges.keys() {
                    if upper - lower > best {
                        best = upper - lower;
                        busiest = upper;
                    }
                    lower = upper;
                }
                let low = ranges.range(..busiest).next_back().map_or(0, |(&k, _)| k);
                // A range of one slot cannot be split: the broker refuses the consumer
                // (65,536 consumers); here it simply gets no keys.
                if busiest - low > 1 {
                    ranges.insert(busiest - ((busiest - low) >> 1), c);
                }
            }
        }
    }

    /// `selector.removeConsumer`.
    fn remove_from_selector(&mut self, c: u32) {
        match &mut self.selector {
            Selector::Ring(ring) => {
                ring.retain(|_, list| {
                    list.retain(|&x| x != c);
                    !list.is_empty()
                });
            }
            Selector::Ranges(ranges) => {
                let Some(&upper) = ranges.iter().find(|(_, &x)| x == c).map(|(k, _)| k) else {
                    return;
                };
                if upper == RANGE_SIZE && ranges.len() > 1 {
                    // The top range goes to the consumer below it.
                    let (&lk, &lc) = ranges.range(..RANGE_SIZE).next_back().expect("len > 1");
                    ranges.remove(&lk);
                    ranges.insert(RANGE_SIZE, lc);
                } else {
                    ranges.remove(&upper);
                }
            }
        }
    }

    /// Recomputes every key's consumer after a membership change, recording each consumer that
    /// took over keys from another (once per change).
    fn reassign(&mut self, broker: u16, ctl: &mut Control) {
        let mut gained: Vec<u32> = Vec::new();
        for k in 0..self.key_hash.len() {
            let new = self.select_hash(self.key_hash[k]);
            if new != self.owner[k] {
                if new != NIL && self.owner[k] != NIL && !gained.contains(&new) {
                    gained.push(new);
                }
                self.owner[k] = new;
            }
        }
        for c in gained {
            ctl.reassigned(broker, c);
        }
        self.none_owner = self.select_hash(self.none_hash);
    }

    /// Drops the recently joined consumers whose read position the mark-delete position has
    /// reached (`removeConsumersFromRecentJoinedConsumers`: in join order, up to the first that
    /// must still wait). Whether any was dropped.
    fn prune(&mut self) -> bool {
        let mut any = false;
        while let Some(&(_, pos)) = self.recently_joined.front() {
            if pos > self.first_unsettled {
                break;
            }
            self.recently_joined.pop_front();
            any = true;
        }
        any
    }

    /// Whether a consumer that is not recently joined has permits (`hasConsumersNeededNormalRead`).
    fn normal_read_wanted(&self, ctx: &DispatchCtx) -> bool {
        ctx.consumers
            .iter()
            .any(|s| s.free > 0 && !self.recently_joined.iter().any(|&(x, _)| x == s.id))
    }

    /// Whether draining hashes are tracked: 4.0 on, unless out-of-order delivery is allowed
    /// (`drainingHashesRequired`).
    fn drains(&self) -> bool {
        self.dispatcher == Dispatcher::DrainingHashes && !self.params.allow_out_of_order_delivery
    }

    /// A pending ack is gone (acknowledged, redelivered, or its consumer closed): the hash's
    /// count at its holder drops; a draining hash whose count reaches 0 is unblocked
    /// (`reduceRefCount`, `stickyKeyHashUnblocked`: a new read).
    fn pending_gone(&mut self, id: u64, ctl: &mut Control) {
        let Some((c, hash)) = self.pending.remove(&id) else {
            return;
        };
        let Some(h) = self.holders.get_mut(&hash) else {
            return;
        };
        debug_assert_eq!(h.0, c);
        h.1 -= 1;
        if h.1 == 0 {
            self.holders.remove(&hash);
            if self.select_hash(hash) != c {
                ctl.redispatch();
            }
        }
    }

    /// Whether sticky key hash `hash` is draining toward `c`: its messages are pending at another
    /// consumer, the one that had it before a membership change (`shouldBlockStickyKeyHash`).
    pub fn is_draining_for(&self, hash: u32, c: u32) -> bool {
        self.holders.get(&hash).is_some_and(|&(h, _)| h != c)
    }

    /// Whether consumer `c` is waiting for the messages before its join position (for tests).
    pub fn is_recently_joined(&self, c: u32) -> bool {
        self.recently_joined.iter().any(|&(x, _)| x == c)
    }
}

impl Handler for PulsarKeyShared {}

impl crate::Named for PulsarKeyShared {
    const NAME: &'static str = "pulsar_key_shared";
    const SUMMARY: &'static str = "Pulsar Key_Shared: key -> Murmur3 hash -> consumer (consistent hashing or auto-split ranges); 4.0 on (the default, [[broker]] version): a key that moved waits only until the consumer it left has acked its messages of it (draining hashes); 3.x: a joining consumer gets its keys' new messages only once everything before its join is acked; run with flavour = \"pulsar\" (negative acks redelivered after 60s)";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Pulsar;
    type Params = PulsarKeySharedParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "selector",
            meaning: "how hashes map to consumers: a ring with replica_points points per consumer (a joiner takes a few keys from each), or hash ranges split in half for a joiner",
            unit: "consistent_hashing | auto_split",
            default: "consistent_hashing",
            range: crate::Range::Any,
            sizes: None,
            models: "broker subscriptionKeySharedUseConsistentHashing (true since 2.10, PIP-119)",
            hazard: None,
        },
        crate::ParamInfo {
            name: "replica_points",
            meaning: "points per consumer on the consistent-hashing ring (more: a more even spread)",
            unit: "count",
            default: "100",
            range: crate::Range::Int(1, u32::MAX as i64),
            sizes: Some(crate::Sizing {
                what: "a hashed point on the ring per consumer; a leaving consumer's found by a walk of the ring",
                cost: points_cost,
            }),
            models: "broker subscriptionKeySharedConsistentHashingReplicaPoints",
            hazard: None,
        },
        crate::ParamInfo {
            name: "allow_out_of_order_delivery",
            meaning: "a joining consumer gets its keys at once, while their earlier messages may still be with another consumer",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models: "KeySharedPolicy allowOutOfOrderDelivery",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: PulsarKeySharedParams) -> Result<Self, String> {
        if sc.brokers.len() != 1 {
            return Err(
                "a Key_Shared subscription is served by the one broker that owns its topic: one [[broker]]"
                    .into(),
            );
        }
        let names = (0..sc.dispatch_targets() as u32)
            .map(|i| sc.consumer_name(i))
            .collect();
        Ok(PulsarKeyShared::new(
            sc.workload.keys,
            names,
            p,
            Dispatcher::of_version(sc.broker_version(0)),
        ))
    }
}

impl Strategy for PulsarKeyShared {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, _ctl: &mut Control) -> Select {
        // Read before: a replay (redelivered, or held for want of permits).
        let replay = msg.id < self.read_pos;
        // A normal read happens only while a consumer that is not recently joined has permits
        // (`hasConsumersNeededNormalRead`): a recently joined one cannot take anything not read
        // yet, so the cursor stays where it is.
        if !replay && !self.recently_joined.is_empty() && !self.normal_read_wanted(ctx) {
            return Select::Stop;
        }
        self.read_pos = self.read_pos.max(msg.id + 1);
        let c = match msg.group {
            Some(k) => self.owner.get(k as usize).copied().unwrap_or(NIL),
            None => self.none_owner,
        };
        let Some(i) = ctx.consumers.iter().position(|s| s.id == c) else {
            // No consumer (none attached): held until one attaches.
            return Select::HoldWhileMembers;
        };
        if ctx.consumers[i].free == 0 {
            // Into the replay set, and reading goes on for the other consumers (the broker
            // skips it until its consumer has permits again).
            return Select::HoldFor(i);
        }
        if self.drains() {
            let hash = match msg.group {
                Some(k) => self
                    .key_hash
                    .get(k as usize)
                    .copied()
                    .unwrap_or(self.none_hash),
                None => self.none_hash,
            };
            let held = self.holders.entry(hash).or_insert((c, 0));
            if held.0 != c {
                // Draining: into the replay set until the previous consumer has acked its
                // messages of this hash (`canDispatchEntry`, the replay filter).
                return Select::Hold;
            }
            held.1 += 1;
            self.pending.insert(msg.id, (c, hash));
        }
        if let Some(&(_, joined_at)) = self.recently_joined.iter().find(|&&(x, _)| x == c) {
            let earliest = self.recently_joined.front().map_or(joined_at, |&(_, p)| p);
            let limit = if replay {
                joined_at.min(earliest)
            } else {
                joined_at
            };
            if msg.id >= limit {
                return Select::Hold;
            }
        }
        Select::Consumer(i)
    }

    fn on_attach(&mut self, _now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        if self.members.contains(&consumer) {
            return;
        }
        self.add_to_selector(consumer);
        self.members.push(consumer);
        self.reassign(broker, ctl);
        // "If this was the 1st consumer, or if all the messages are already acked, then we
        // don't need to do anything special."
        if self.dispatcher == Dispatcher::RecentlyJoined
            && !self.params.allow_out_of_order_delivery
            && self.members.len() > 1
            && self.first_unsettled < self.read_pos
        {
            self.recently_joined.push_back((consumer, self.read_pos));
        }
        ctl.redispatch();
    }

    fn on_detach(&mut self, _now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        let Some(i) = self.members.iter().position(|&c| c == consumer) else {
            return;
        };
        self.members.remove(i);
        // Its pending acks are removed as it closes, so the hashes it was draining are free
        // (`reduceRefCount(.., closing)`); its messages are replayed to the new owners.
        if !self.pending.is_empty() {
            let gone: Vec<u64> = self
                .pending
                .iter()
                .filter(|&(_, &(c, _))| c == consumer)
                .map(|(&id, _)| id)
                .collect();
            for id in gone {
                self.pending_gone(id, ctl);
            }
        }
        self.remove_from_selector(consumer);
        self.reassign(broker, ctl);
        self.recently_joined.retain(|&(c, _)| c != consumer);
        if self.members.len() <= 1 {
            self.recently_joined.clear();
        }
        self.prune();
        ctl.redispatch();
    }

    fn on_returned(&mut self, _now: Time, _broker: u16, msg: &MsgView, ctl: &mut Control) {
        // Redelivered (a negative ack's delay over, its consumer gone): out of the consumer's
        // pending acks (`redeliverUnacknowledgedMessages`).
        self.pending_gone(msg.id, ctl);
    }

    fn on_settled(&mut self, _now: Time, msg: &MsgView, ctl: &mut Control) {
        self.pending_gone(msg.id, ctl);
        if msg.id == self.first_unsettled {
            self.first_unsettled += 1;
            while self.settled_ahead.remove(&self.first_unsettled) {
                self.first_unsettled += 1;
            }
        } else if msg.id > self.first_unsettled {
            self.settled_ahead.insert(msg.id);
        }
        // markDeletePositionMoveForward
        if !self.recently_joined.is_empty() && self.prune() {
            ctl.redispatch();
        }
    }

    fn on_world(&mut self, _now: Time, change: WorldChange, _ctl: &mut Control) {
        // A restarted broker recovers the cursor at its mark-delete position: it reads again
        // from the first unacknowledged message, with no recently joined consumers.
        if let WorldChange::BrokerRestarted(_) = change {
            self.read_pos = self.first_unsettled;
            self.recently_joined.clear();
            // Its consumers' pending acks went with it: nothing drains.
            self.pending.clear();
            self.holders.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, scenario, select_at, view};

    /// A 3.x subscription (the join gate).
    fn key_shared(selector: SelectorKind, allow: bool) -> PulsarKeyShared {
        key_shared_on(Dispatcher::RecentlyJoined, selector, allow)
    }

    fn key_shared_on(d: Dispatcher, selector: SelectorKind, allow: bool) -> PulsarKeyShared {
        let names = (0..4).map(|i| format!("c{i}")).collect();
        PulsarKeyShared::new(
            64,
            names,
            PulsarKeySharedParams {
                selector,
                allow_out_of_order_delivery: allow,
                ..Default::default()
            },
            d,
        )
    }

    fn ranges(s: &PulsarKeyShared) -> Vec<(u32, u32)> {
        match &s.selector {
            Selector::Ranges(r) => r.iter().map(|(&k, &c)| (k, c)).collect(),
            Selector::Ring(_) => panic!("not auto_split"),
        }
    }

    #[test]
    fn defaults_are_pulsars() {
        let p: PulsarKeySharedParams = toml::from_str("").unwrap();
        assert_eq!(p.selector, SelectorKind::ConsistentHashing);
        assert_eq!(p.replica_points, 100);
        assert!(!p.allow_out_of_order_delivery);
        assert!(toml::from_str::<PulsarKeySharedParams>("selector = \"sticky\"").is_err());
    }

    /// MurmurHash3 x86_32 with seed 0 (the reference vectors), and Pulsar's documentation
    /// example: `murmur32("Order-3459134") = 3112179635`, slot `3112179635 mod 65536 = 6067`.
    #[test]
    fn the_hash_is_murmur3() {
        assert_eq!(murmur3_32(b""), 0);
        assert_eq!(murmur3_32(b"hello"), 0x248b_fa47);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog"),
            0x2e4f_f723
        );
        assert_eq!(murmur3_32(b"Order-3459134"), 3_112_179_635);
        assert_eq!(sticky_key_hash(b"Order-3459134") % RANGE_SIZE, 6067);
        assert!(sticky_key_hash(b"Order-3459134") <= i32::MAX as u32);
    }

    /// HashRangeAutoSplitStickyKeyConsumerSelector: the first consumer owns everything; a
    /// joiner takes the lower half of the first largest range; a leaver's range goes to the
    /// range above it, the top one to the consumer below.
    #[test]
    fn auto_split_halves_the_largest_range_and_merges_upwards() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        assert_eq!(ranges(&s), vec![(65536, 0)]);
        s.on_attach(0, 0, 1, ctl);
        assert_eq!(ranges(&s), vec![(32768, 1), (65536, 0)]);
        s.on_attach(0, 0, 2, ctl);
        assert_eq!(ranges(&s), vec![(16384, 2), (32768, 1), (65536, 0)]);
        s.on_attach(0, 0, 3, ctl);
        assert_eq!(
            ranges(&s),
            vec![(16384, 2), (32768, 1), (49152, 3), (65536, 0)]
        );
        // Slot 6067 (the documentation's example) is in (0, 16384]: consumer 2.
        assert_eq!(s.select_hash(3_112_179_635 & 0x7fff_ffff), 2);
        s.on_detach(0, 0, 1, ctl);
        assert_eq!(ranges(&s), vec![(16384, 2), (49152, 3), (65536, 0)]);
        s.on_detach(0, 0, 0, ctl);
        assert_eq!(ranges(&s), vec![(16384, 2), (65536, 3)]);
    }

    /// findBiggestRange compares each range's size: after leaves the largest range (here the
    /// third, 32768 slots, behind one of 16384 that ends at 24576) is the one a joiner splits.
    #[test]
    fn auto_split_halves_the_largest_range_wherever_it_lies() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let ctl = &mut Control::default();
        for c in 0..8 {
            s.on_attach(0, 0, c, ctl);
        }
        let uppers: Vec<u32> = ranges(&s).iter().map(|&(u, _)| u).collect();
        assert_eq!(
            uppers,
            [8192, 16384, 24576, 32768, 40960, 49152, 57344, 65536]
        );
        let at = |s: &PulsarKeyShared, upper| ranges(s).iter().find(|r| r.0 == upper).unwrap().1;
        for upper in [16384, 32768, 40960, 49152] {
            let c = at(&s, upper);
            s.on_detach(0, 0, c, ctl);
        }
        let uppers: Vec<u32> = ranges(&s).iter().map(|&(u, _)| u).collect();
        assert_eq!(uppers, [8192, 24576, 57344, 65536]);
        s.on_attach(0, 0, 8, ctl);
        assert_eq!(at(&s, 40960), 8, "(24576, 57344] split in half");
        assert_eq!(ranges(&s).len(), 5);
    }

    /// The last consumer leaving takes the whole range with it: no consumer for any hash.
    #[test]
    fn the_last_consumer_leaving_empties_the_ranges() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_detach(0, 0, 0, ctl);
        assert_eq!(ranges(&s), vec![]);
        assert_eq!(s.select_hash(6067), NIL);
    }

    /// Keys getting their first consumer, or left with none, are no takeover: only a key moving
    /// from one consumer to another records one (once per consumer that gained keys).
    #[test]
    fn only_keys_moving_between_consumers_are_recorded_as_reassigned() {
        for selector in [SelectorKind::AutoSplit, SelectorKind::ConsistentHashing] {
            let mut s = key_shared(selector, false);
            let ctl = &mut Control::default();
            s.on_attach(0, 0, 0, ctl);
            assert_eq!(ctl.reassignments(), vec![], "{selector:?}: first consumer");
            s.on_attach(0, 0, 1, ctl);
            assert_eq!(ctl.reassignments(), vec![(0, 1)], "{selector:?}");
            let ctl = &mut Control::default();
            s.on_detach(0, 0, 1, ctl);
            assert_eq!(ctl.reassignments(), vec![(0, 0)], "{selector:?}");
            let ctl = &mut Control::default();
            s.on_detach(0, 0, 0, ctl);
            assert_eq!(ctl.reassignments(), vec![], "{selector:?}: none left");
        }
    }

    /// A range of one slot cannot be split: with every range one slot wide a joiner gets no
    /// keys (the broker refuses it) and nobody loses theirs.
    #[test]
    fn a_joiner_gets_nothing_when_every_range_is_one_slot() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let full: BTreeMap<u32, u32> = (1..=RANGE_SIZE).map(|u| (u, u - 1)).collect();
        s.selector = Selector::Ranges(full.clone());
        s.add_to_selector(RANGE_SIZE);
        match &s.selector {
            Selector::Ranges(r) => assert!(*r == full, "unchanged"),
            Selector::Ring(_) => unreachable!(),
        }
    }

    /// ConsistentHashingStickyKeyConsumerSelector: 100 points each; a joiner takes keys from
    /// every other consumer, and only the leaver's keys move when it leaves.
    #[test]
    fn consistent_hashing_moves_only_the_changed_consumers_keys() {
        let mut s = key_shared(SelectorKind::ConsistentHashing, false);
        let ctl = &mut Control::default();
        for c in 0..3 {
            s.on_attach(0, 0, c, ctl);
        }
        match &s.selector {
            Selector::Ring(r) => assert_eq!(r.values().map(Vec::len).sum::<usize>(), 300),
            Selector::Ranges(_) => unreachable!(),
        }
        let before = s.owner.clone();
        assert!((0..3).all(|c| before.contains(&c)), "{before:?}");
        s.on_attach(0, 0, 3, ctl);
        let joined = s.owner.clone();
        for (b, j) in before.iter().zip(&joined) {
            assert!(b == j || *j == 3, "a join moves keys only to the joiner");
        }
        let taken_from: BTreeSet<u32> = before
            .iter()
            .zip(&joined)
            .filter(|(_, &j)| j == 3)
            .map(|(&b, _)| b)
            .collect();
        assert_eq!(taken_from.len(), 3, "from every consumer");
        s.on_detach(0, 0, 3, ctl);
        assert_eq!(s.owner, before, "same points, same keys");
        s.on_detach(0, 0, 1, ctl);
        for (b, a) in before.iter().zip(&s.owner) {
            assert!(b == a || *b == 1, "only the leaver's keys move");
        }
        // Past the last point, the ring wraps to the first.
        let ring_first = match &s.selector {
            Selector::Ring(r) => r.iter().next().map(|(_, l)| l[0]).unwrap(),
            Selector::Ranges(_) => unreachable!(),
        };
        assert_eq!(s.select_hash(i32::MAX as u32), ring_first);
    }

    /// Every message without a key has the sticky key "NONE_KEY": one consumer gets them all.
    #[test]
    fn keyless_messages_all_go_to_one_consumer() {
        let mut s = key_shared(SelectorKind::ConsistentHashing, false);
        let ctl = &mut Control::default();
        for c in 0..4 {
            s.on_attach(0, 0, c, ctl);
        }
        let slots = [(0, 100), (1, 100), (2, 100), (3, 100)];
        let mut got = BTreeSet::new();
        for id in 0..50 {
            let m = MsgView {
                group: None,
                ..view(id, id as u32 % 8)
            };
            got.insert(select_at(&mut s, 0, &slots, &m, ctl).unwrap());
        }
        assert_eq!(got.len(), 1);
        assert_eq!(
            got.first(),
            Some(&s.select_hash(sticky_key_hash(b"NONE_KEY")))
        );
    }

    /// Consumer 0 attaches and is handed message `i` of key `keys[i]`, each in turn; then
    /// consumer 1 joins.
    fn held_by_0_then_1_joins(s: &mut PulsarKeyShared, keys: &[u32], ctl: &mut Control) {
        s.on_attach(0, 0, 0, ctl);
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(select_at(s, 0, &[(0, 10)], &view(i as u64, k), ctl), Ok(0));
        }
        s.on_attach(0, 0, 1, ctl);
    }

    /// A key that moves to consumer 1 when it joins the auto-split ranges of consumer 0, and one
    /// that stays with 0.
    fn moving_and_staying(s: &PulsarKeyShared) -> (u32, u32) {
        let moving = (0..64).find(|&k| s.key_hash[k as usize] % RANGE_SIZE <= 32768);
        let staying = (0..64).find(|&k| s.key_hash[k as usize] % RANGE_SIZE > 32768);
        (moving.unwrap(), staying.unwrap())
    }

    /// The join gate: consumer 1 joins while message 0 (of a key that moves to it) is unacked
    /// at consumer 0. Its keys' newer messages wait until everything read before it joined is
    /// acknowledged; other keys go on; then dispatch resumes by itself.
    #[test]
    fn a_joiner_waits_until_everything_before_its_join_is_acked() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, b) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        let both = [(0, 10), (1, 10)];
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(0, a), ctl), Ok(0));
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(1, b), ctl), Ok(0));
        s.on_attach(0, 0, 1, ctl);
        assert!(s.is_recently_joined(1));
        assert_eq!(
            select_at(&mut s, 0, &both, &view(2, a), ctl),
            Err(Select::Hold)
        );
        assert_eq!(select_at(&mut s, 0, &both, &view(3, b), ctl), Ok(0));
        let ctl = &mut Control::default();
        s.on_settled(0, &view(1, b), ctl);
        assert!(!ctl.redispatch_requested(), "message 0 is still unacked");
        assert_eq!(
            select_at(&mut s, 0, &both, &view(2, a), ctl),
            Err(Select::Hold)
        );
        s.on_settled(0, &view(0, a), ctl);
        assert!(ctl.redispatch_requested());
        assert!(!s.is_recently_joined(1));
        assert_eq!(select_at(&mut s, 0, &both, &view(2, a), ctl), Ok(1));
    }

    /// No gate when nothing read is unacknowledged, nor for the first consumer; and none at
    /// all with allowOutOfOrderDelivery: the joiner gets message 2 while 0 holds message 0.
    #[test]
    fn no_gate_when_all_is_acked_or_out_of_order_is_allowed() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, _) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(0, a), ctl), Ok(0));
        s.on_settled(0, &view(0, a), ctl);
        s.on_attach(0, 0, 1, ctl);
        assert!(!s.is_recently_joined(1));

        let mut s = key_shared(SelectorKind::AutoSplit, true);
        held_by_0_then_1_joins(&mut s, &[a], ctl);
        assert!(!s.is_recently_joined(1));
        assert_eq!(
            select_at(&mut s, 0, &[(0, 10), (1, 10)], &view(2, a), ctl),
            Ok(1)
        );
    }

    /// A message read before the join (a replay) may go to the joiner: consumer 0 leaves with
    /// message 0 unacked, it comes back and goes to the key's new owner at once. A consumer
    /// leaving also ends its own wait.
    #[test]
    fn replays_from_before_the_join_go_to_the_new_owner() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, b) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_attach(0, 0, 2, ctl);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 10), (2, 10)], &view(0, b), ctl),
            Ok(0)
        );
        s.on_attach(0, 0, 1, ctl);
        assert!(s.is_recently_joined(1));
        // Consumer 0 leaves: message 0 (read before 1 joined) is replayed to whoever owns b.
        s.on_detach(0, 0, 0, ctl);
        let to = select_at(&mut s, 0, &[(1, 10), (2, 10)], &view(0, b), ctl).unwrap();
        assert_eq!(to, s.select_hash(s.key_hash[b as usize]));
        // Newer messages of 1's keys still wait for message 0.
        if s.select_hash(s.key_hash[a as usize]) == 1 {
            assert_eq!(
                select_at(&mut s, 0, &[(1, 10), (2, 10)], &view(5, a), ctl),
                Err(Select::Hold)
            );
        }
        s.on_detach(0, 0, 1, ctl);
        assert!(!s.is_recently_joined(1));
    }

    /// The only consumer is never gated, even with messages read and unacknowledged (its
    /// predecessor left with them): nobody else can hold its keys' earlier messages.
    #[test]
    fn the_only_consumer_is_not_gated() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, _) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(0, a), ctl), Ok(0));
        s.on_detach(0, 0, 0, ctl);
        s.on_attach(0, 0, 1, ctl);
        assert!(!s.is_recently_joined(1));
        assert_eq!(select_at(&mut s, 0, &[(1, 10)], &view(1, a), ctl), Ok(1));
    }

    /// A restarted broker recovers the cursor at its mark-delete position: it reads again from
    /// the first unacknowledged message, and no joiner waits any more.
    #[test]
    fn a_restarted_broker_reads_again_from_the_first_unacked_with_no_joiner_waiting() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, b) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(0, b), ctl), Ok(0));
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(1, a), ctl), Ok(0));
        s.on_settled(0, &view(0, b), ctl);
        s.on_attach(0, 0, 1, ctl);
        assert!(s.is_recently_joined(1));
        s.on_world(5, WorldChange::BrokerRestarted(0), ctl);
        assert!(!s.is_recently_joined(1));
        assert_eq!(s.read_pos, 1, "from message 1, the first unacknowledged");
        let both = [(0, 10), (1, 10)];
        assert_eq!(select_at(&mut s, 5, &both, &view(1, a), ctl), Ok(1));
        assert_eq!(select_at(&mut s, 5, &both, &view(2, a), ctl), Ok(1));
    }

    /// The broker's version picks the dispatcher: 3.x the join gate, 4.0 on (and the default)
    /// draining hashes.
    #[test]
    fn the_version_picks_the_dispatcher() {
        assert_eq!(
            Dispatcher::of_version(Some("3.0")),
            Dispatcher::RecentlyJoined
        );
        assert_eq!(
            Dispatcher::of_version(Some("3.3")),
            Dispatcher::RecentlyJoined
        );
        for v in [Some("4.0"), Some("4.2"), Some("5.0"), None] {
            assert_eq!(
                Dispatcher::of_version(v),
                Dispatcher::DrainingHashes,
                "{v:?}"
            );
        }
        let sc = pulsar_on("3.3", r#""pulsar_key_shared""#, 200, 10, "");
        let s = <PulsarKeyShared as crate::Named>::build(&sc, Default::default()).unwrap();
        assert_eq!(s.dispatcher, Dispatcher::RecentlyJoined);
        let sc = pulsar(r#""pulsar_key_shared""#, 200, 10, "");
        let s = <PulsarKeyShared as crate::Named>::build(&sc, Default::default()).unwrap();
        assert_eq!(s.dispatcher, Dispatcher::DrainingHashes);
    }

    /// 4.0's ring names its points `consumerName + "\0" + i` (3.x: `consumerName + i`), and a
    /// point two consumers share goes to the first by name (3.x: `hash % count`).
    #[test]
    fn the_4x_ring_separates_name_and_index() {
        let ctl = &mut Control::default();
        for (d, sep) in [
            (Dispatcher::RecentlyJoined, ""),
            (Dispatcher::DrainingHashes, "\0"),
        ] {
            let mut s = key_shared_on(d, SelectorKind::ConsistentHashing, false);
            s.on_attach(0, 0, 0, ctl);
            s.on_attach(0, 0, 1, ctl);
            let p = sticky_key_hash(format!("c1{sep}7").as_bytes());
            assert_eq!(s.select_hash(p), 1, "{d:?}: c1's 8th point");
            let q = sticky_key_hash(format!("c0{sep}7").as_bytes());
            assert_eq!(s.select_hash(q), 0, "{d:?}: c0's 8th point");
        }
        let mut a = key_shared_on(
            Dispatcher::RecentlyJoined,
            SelectorKind::ConsistentHashing,
            false,
        );
        let mut b = key_shared_on(
            Dispatcher::DrainingHashes,
            SelectorKind::ConsistentHashing,
            false,
        );
        for c in 0..4 {
            a.on_attach(0, 0, c, ctl);
            b.on_attach(0, 0, c, ctl);
        }
        assert_ne!(a.owner, b.owner, "the same keys land elsewhere");
    }

    /// Draining hashes (4.0 on): consumer 1 joins while c0 holds message 0 of key `a` (which
    /// moves to 1) and message 1 of key `b` (which stays). Only `a` waits, and only for message
    /// 0's ack: 1 gets no recently-joined gate, and the unacked message 1 of another key holds
    /// nothing back (3.x: the joiner waits for the mark-delete position to pass both).
    #[test]
    fn a_moved_key_drains_until_the_consumer_it_left_acks_it() {
        let mut s = key_shared_on(Dispatcher::DrainingHashes, SelectorKind::AutoSplit, false);
        let (a, b) = moving_and_staying(&s);
        let ha = s.key_hash[a as usize];
        let ctl = &mut Control::default();
        held_by_0_then_1_joins(&mut s, &[a, b], ctl);
        assert!(!s.is_recently_joined(1), "no join gate from 4.0");
        assert!(s.is_draining_for(ha, 1));
        let both = [(0, 10), (1, 10)];
        assert_eq!(
            select_at(&mut s, 0, &both, &view(2, a), ctl),
            Err(Select::Hold)
        );
        assert_eq!(select_at(&mut s, 0, &both, &view(3, b), ctl), Ok(0));
        // Message 0 acked: `a` is free although message 1 (key b) is still unacked.
        let ctl = &mut Control::default();
        s.on_settled(0, &view(0, a), ctl);
        assert!(ctl.redispatch_requested(), "stickyKeyHashUnblocked");
        assert!(!s.is_draining_for(ha, 1));
        assert_eq!(select_at(&mut s, 0, &both, &view(2, a), ctl), Ok(1));
        // The same run on 3.x: `a` waits for message 1 too (the mark-delete position).
        let mut s = key_shared_on(Dispatcher::RecentlyJoined, SelectorKind::AutoSplit, false);
        let ctl = &mut Control::default();
        held_by_0_then_1_joins(&mut s, &[a, b], ctl);
        s.on_settled(0, &view(0, a), ctl);
        assert_eq!(
            select_at(&mut s, 0, &both, &view(2, a), ctl),
            Err(Select::Hold)
        );
    }

    /// Draining ends when the consumer it left gives the messages back (a nack's redelivery, or
    /// it leaves: its pending acks go as it closes), and a key that moves back to the consumer
    /// that holds its messages is not draining at all.
    #[test]
    fn draining_ends_with_a_redelivery_a_leave_or_the_key_coming_back() {
        let mut s = key_shared_on(Dispatcher::DrainingHashes, SelectorKind::AutoSplit, false);
        let (a, _) = moving_and_staying(&s);
        let ha = s.key_hash[a as usize];
        let ctl = &mut Control::default();
        held_by_0_then_1_joins(&mut s, &[a, a], ctl);
        assert!(s.is_draining_for(ha, 1));
        // Redelivered (a nack's delay over): one of two pending acks gone, still draining.
        s.on_returned(0, 0, &view(0, a), ctl);
        assert!(s.is_draining_for(ha, 1));
        // Consumer 1 leaves: `a` comes back to 0, which holds its message: no draining.
        s.on_detach(0, 0, 1, ctl);
        assert!(!s.is_draining_for(ha, 0));
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(0, a), ctl), Ok(0));
        // 1 joins again, then 0 leaves: its pending acks go with it, 1 is served at once.
        s.on_attach(0, 0, 1, ctl);
        assert!(s.is_draining_for(ha, 1));
        s.on_detach(0, 0, 0, ctl);
        assert!(!s.is_draining_for(ha, 1));
        assert_eq!(select_at(&mut s, 0, &[(1, 10)], &view(0, a), ctl), Ok(1));
        // With allowOutOfOrderDelivery nothing drains.
        let mut s = key_shared_on(Dispatcher::DrainingHashes, SelectorKind::AutoSplit, true);
        held_by_0_then_1_joins(&mut s, &[a], ctl);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 10), (1, 10)], &view(1, a), ctl),
            Ok(1)
        );
    }

    /// A consumer without permits gets nothing (its keys wait, others go on).
    #[test]
    fn a_full_consumer_holds_only_its_keys() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, b) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_attach(0, 0, 1, ctl);
        let slots = [(0, 0), (1, 5)];
        assert_eq!(
            select_at(&mut s, 0, &slots, &view(0, b), ctl),
            Err(Select::HoldFor(0))
        );
        assert_eq!(select_at(&mut s, 0, &slots, &view(1, a), ctl), Ok(1));
    }

    /// While a recently joined consumer waits and only it has permits, the cursor does not read
    /// on (`hasConsumersNeededNormalRead`): an unread message stops dispatch and the read
    /// position stays; a replay is still offered to it.
    #[test]
    fn no_normal_read_while_only_a_joiner_has_permits() {
        let mut s = key_shared(SelectorKind::AutoSplit, false);
        let (a, b) = moving_and_staying(&s);
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        assert_eq!(select_at(&mut s, 0, &[(0, 10)], &view(0, b), ctl), Ok(0));
        assert_eq!(
            select_at(&mut s, 0, &[(0, 0)], &view(1, a), ctl),
            Err(Select::HoldFor(0))
        );
        s.on_attach(0, 0, 1, ctl);
        assert!(s.is_recently_joined(1));
        let joiner_only = [(0, 0), (1, 10)];
        assert_eq!(
            select_at(&mut s, 0, &joiner_only, &view(2, b), ctl),
            Err(Select::Stop)
        );
        assert_eq!(s.read_pos, 2, "the cursor stays");
        // Message 1 was read before the join: a replay, it goes to the joiner.
        assert_eq!(select_at(&mut s, 0, &joiner_only, &view(1, a), ctl), Ok(1));
        // Consumer 0 has permits again: reading goes on.
        assert_eq!(
            select_at(&mut s, 0, &[(0, 1), (1, 10)], &view(2, b), ctl),
            Ok(0)
        );
    }

    /// One slow consumer (a hundred times slower, for good) fills its receiver queue: its
    /// messages go to the replay set and the dispatcher reads on for the others ("read next
    /// batch of messages which might hopefully contain also keys meant for other consumers",
    /// `isDispatcherStuckOnReplays`), which keep their millisecond latency; its own keys wait,
    /// in order. (Dispatch that looked 100 messages deep stalled every key behind 100 of its
    /// messages: a median of seconds.)
    #[test]
    fn a_slow_consumer_does_not_starve_the_others() {
        let sc = pulsar(
            r#""pulsar_key_shared""#,
            200,
            100,
            r#"
[[fault]]
kind = "slow_consumer"
consumer = 0
at = "0s"
factor = 100
"#,
        );
        for seed in 1..=3 {
            let m = run(&sc, "pulsar_key_shared", seed);
            assert!(m.latency_ms.p50 < 50.0, "seed {seed}: {:?}", m.latency_ms);
            assert!(
                m.latency_ms.max > 10_000.0,
                "its own keys wait: {:?}",
                m.latency_ms
            );
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.applied, 3000);
        }
    }

    /// 3000 messages over 40 keys at `rate` per second to four consumers (10ms per message) with
    /// a receiver queue of `prefetch`, on the `pulsar` flavour (its current release).
    fn pulsar(strategies: &str, rate: u32, prefetch: u32, extra: &str) -> sim::Scenario {
        pulsar_on("", strategies, rate, prefetch, extra)
    }

    /// [`pulsar`] on release line `version` (`""`: the default).
    fn pulsar_on(
        version: &str,
        strategies: &str,
        rate: u32,
        prefetch: u32,
        extra: &str,
    ) -> sim::Scenario {
        let version = if version.is_empty() {
            String::new()
        } else {
            format!("version = \"{version}\"")
        };
        scenario(&format!(
            r#"
flavour = "pulsar"
strategies = [{strategies}]
[workload]
messages = 3000
rate = "{rate}/s"
keys = 40
[[broker]]
name = "pulsar"
{version}
[consumers]
count = 4
prefetch = {prefetch}
service = {{ dist = "exponential", mean = "10ms" }}
{extra}
"#
        ))
    }

    const CRASHES_AND_LEAVES: &str = r#"
[[fault]]
kind = "consumer_crash"
rate = "6/min"
for = "2s"
[[fault]]
kind = "consumer_leave"
rate = "6/min"
for = "1s"
"#;

    /// Strength: consumers crash and come back, and leave and join, with the client's default
    /// receiver queue (1000); the join gate and the replay of a leaver's messages keep every
    /// key in order, where competing consumers reorder.
    #[test]
    fn order_survives_crashes_and_joins() {
        let sc = pulsar(
            r#""pulsar_key_shared", "competing""#,
            200,
            1000,
            CRASHES_AND_LEAVES,
        );
        for seed in 1..=3 {
            let m = run(&sc, "pulsar_key_shared", seed);
            let c = run(&sc, "competing", seed);
            assert!(m.coverage.consumer_crashes > 0 && m.coverage.disconnects > 0);
            assert!(m.coverage.reassignments > 0, "keys moved");
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.applied, 3000);
            assert!(c.ordering_violations > 10, "competing reorders");
        }
    }

    /// Weakness: with allowOutOfOrderDelivery a joining consumer gets its keys while their
    /// earlier messages are still queued at the consumer that had them: joins reorder.
    #[test]
    fn out_of_order_delivery_reorders_on_joins() {
        let faults = r#"
[[fault]]
kind = "consumer_leave"
rate = "20/min"
for = "1s"
"#;
        let gated = pulsar(r#""pulsar_key_shared""#, 350, 1000, faults);
        let free = pulsar(
            r#""pulsar_key_shared""#,
            350,
            1000,
            &format!("[strategy.pulsar_key_shared]\nallow_out_of_order_delivery = true\n{faults}"),
        );
        for seed in 1..=3 {
            assert_eq!(
                run(&gated, "pulsar_key_shared", seed).ordering_violations,
                0
            );
            let f = run(&free, "pulsar_key_shared", seed);
            assert!(f.ordering_violations > 0, "seed {seed}: {f:?}");
        }
    }

    /// Weakness (3.x, what PIP-282 and PIP-379 fix in 4.0): with a small receiver queue under
    /// load, a message held because its consumer was full counts as read; when the key moves to
    /// a joining consumer, that message is older than the join position and goes to the joiner
    /// at once, while the old owner still has an earlier one of its key queued.
    #[test]
    fn a_held_message_goes_to_the_joiner_before_an_earlier_one() {
        for version in ["3.0", "3.3"] {
            let sc = pulsar_on(
                version,
                r#""pulsar_key_shared""#,
                350,
                50,
                CRASHES_AND_LEAVES,
            );
            for seed in 1..=2 {
                let m = run(&sc, "pulsar_key_shared", seed);
                assert!(m.ordering_violations > 0, "{version} seed {seed}: {m:?}");
            }
        }
    }

    /// 4.0 on (the default): the same run keeps every key in order. A key that moves is
    /// draining while the consumer it left has unacknowledged messages of it, so the held
    /// message waits for the earlier one's ack however old it is (`DrainingHashesTracker`).
    #[test]
    fn draining_hashes_keep_a_held_message_behind_the_earlier_one() {
        for version in ["", "4.0", "5.0"] {
            let sc = pulsar_on(
                version,
                r#""pulsar_key_shared""#,
                350,
                50,
                CRASHES_AND_LEAVES,
            );
            for seed in 1..=2 {
                let m = run(&sc, "pulsar_key_shared", seed);
                assert!(m.coverage.reassignments > 0, "keys moved");
                assert_eq!(m.ordering_violations, 0, "{version:?} seed {seed}: {m:?}");
                assert_eq!(m.final_state_mismatches, 0, "{version:?} seed {seed}");
                assert_eq!(m.applied, 3000);
            }
        }
    }

    /// The price of 3.x's gate next to 4.x's draining: a message nacked in a database outage
    /// waits a minute at its consumer (the client's `negativeAckRedeliveryDelay`), holding the
    /// mark-delete position back. A consumer that joins meanwhile (3.x) gets none of its keys'
    /// new messages until that minute is over; from 4.0 it waits only for the keys it took
    /// whose messages are still pending at the consumer it took them from.
    #[test]
    fn a_nacked_message_stalls_a_joiners_keys_in_3x_only() {
        let faults = r#"
[[fault]]
kind = "db_outage"
at = "2s"
for = "200ms"
[[fault]]
kind = "consumer_leave"
consumer = 3
at = "4s"
for = "1s"
"#;
        for seed in 1..=2 {
            let old = run(
                &pulsar_on("3.3", r#""pulsar_key_shared""#, 200, 1000, faults),
                "pulsar_key_shared",
                seed,
            );
            let new = run(
                &pulsar(r#""pulsar_key_shared""#, 200, 1000, faults),
                "pulsar_key_shared",
                seed,
            );
            assert!(old.redeliveries > 0 && new.redeliveries > 0);
            assert!(
                old.latency_ms.p99 > 20_000.0,
                "3.x: the joiner's keys wait for the nacks: {:?}",
                old.latency_ms
            );
            assert!(
                new.latency_ms.p99 < old.latency_ms.p99 / 2.0,
                "4.x: {:?} against 3.x {:?}",
                new.latency_ms,
                old.latency_ms
            );
        }
    }

    /// Weakness: a message whose processing fails (the target database is down) is negatively
    /// acknowledged and redelivered after a minute; the later messages of its key go on
    /// meanwhile and are applied first, and the late redelivery leaves an old state behind.
    #[test]
    fn a_negative_ack_is_overtaken_by_later_messages_of_its_key() {
        let sc = pulsar(
            r#""pulsar_key_shared""#,
            200,
            1000,
            r#"
[[fault]]
kind = "db_outage"
at = "5s"
for = "500ms"
"#,
        );
        let m = run(&sc, "pulsar_key_shared", 1);
        assert!(m.redeliveries > 0);
        assert!(m.ordering_violations > 0, "{m:?}");
        assert!(m.final_state_mismatches > 0, "{m:?}");
        assert!(m.latency_ms.max >= 60_000.0, "the nacked wait a minute");
        assert_eq!(m.applied, 3000);
    }
}
