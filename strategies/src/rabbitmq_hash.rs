//! `rabbitmq_hash`: a RabbitMQ consistent-hash exchange (`x-consistent-hash`) over several
//! queues, each declared with single active consumer.
//!
//! What it models, from the exchange's source
//! (`deps/rabbitmq_consistent_hash_exchange/src/rabbit_exchange_type_consistent_hash.erl`:
//! `route`, `chx_hash_ring_update_fun`, `ch_hash_ring_delete_fun`, `jump_consistent_hash`; B4 in
//! docs/sources.md) and RabbitMQ's single-active-consumer documentation (B1, B2):
//!
//! - **The ring.** Each binding's key is its weight: the number of buckets (ring points) the
//!   queue gets. Bindings take consecutive bucket numbers in the order they were made (queue 0
//!   first). A message's routing key (here the entity key in decimal; a message without one
//!   hashes the empty key, so all of them go to one queue) picks bucket
//!   `jump_consistent_hash(hash(key), buckets)`, and the bucket's queue gets the message. The
//!   exchange decides at publish time: a queue added or removed later moves only the messages
//!   published after it.
//! - **Adding a queue** (the `add_partitions` fault, `count` queues of the same weight) appends
//!   its buckets at the end: jump consistent hash moves only the keys that now land in the new
//!   buckets (`weight / total weight` of them) while their earlier messages are still in the old
//!   queue, consumed by another active consumer: the key is split, and reordered.
//! - **Removing a binding** (`unbind`) deletes its buckets and renumbers every later bucket
//!   downwards (`ch_hash_ring_delete_fun`): the keys of the removed queue and, because later
//!   buckets shift, some keys of other queues move. The queue itself stays, with its messages and
//!   its consumer; it gets nothing new.
//! - **One queue per partition of the engine's store, not a second engine.** The broker has one
//!   store; like the `kafka` strategy's partitions, a queue here is the set of messages the ring
//!   sent to it. Each queue has its own single active consumer (a [`Single`], called with the
//!   queue's registered consumers in its registration order): the first consumer registered on
//!   that queue. A message whose queue's active consumer is full waits; the other queues go on
//!   (the flavour's page size is unbounded: each queue dispatches from its own head).
//! - **Who is active where** (`registration`): RabbitMQ activates the first consumer registered
//!   on a queue. When every consumer subscribes to every queue as it starts (`same`), the first
//!   to start is active on all of them: the exchange spreads keys, but one consumer does all the
//!   work. `spread` models an application that registers on "its own" queues first (queue `q`
//!   first registered by consumer `q mod consumers`). A consumer that comes back registers again,
//!   at the end of every queue's list.
//!
//! The hash differs from RabbitMQ's in one respect: RabbitMQ seeds Erlang's `rand` with
//! `erlang:phash2(RoutingKey)` and draws jump consistent hash's uniforms from it; here the key's
//! hash is Kafka's murmur2 of the decimal key (`kafka::murmur2`) and the draws are the published
//! algorithm's LCG (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014).
//! Which key lands in which queue differs from a real broker; how many move when a queue is added
//! or removed is the same.
//!
//! Requeue position and delivery limit are the queue type's, through the flavour (`rabbitmq`,
//! `rabbitmq_quorum`), as in `rabbitmq_sac`.
//!
//! Parameters (`[strategy.rabbitmq_hash]`): `queues` (1), `weight` (1), `registration`
//! ("same"), `unbind` ([]).

use crate::single::{Single, SingleParams};
use serde::{Deserialize, Serialize};
use sim::strategy::{
    ConsumerSlot, Control, DispatchCtx, Handler, MsgView, Route, RouteCtx, Select, Strategy,
    WorldChange,
};
use sim::time::{Dur, Time};

/// Which consumer registers first on each queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Registration {
    /// Every consumer registers on every queue in the order they start: the first is active on
    /// all of them.
    #[default]
    Same,
    /// Queue `q` is first registered by consumer `q mod consumers`, then the others in order.
    Spread,
}

/// A binding removed at a time.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Unbind {
    /// The queue (0-based, in binding order).
    pub queue: u32,
    /// When.
    pub at: Dur,
}

/// `[strategy.rabbitmq_hash]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitmqHashParams {
    /// Queues bound to the exchange at the start.
    #[serde(default = "one")]
    pub queues: u32,
    /// Every binding's routing key: its number of buckets on the ring.
    #[serde(default = "one")]
    pub weight: u32,
    /// Who registers first on each queue.
    #[serde(default)]
    pub registration: Registration,
    /// Bindings removed during the run.
    #[serde(default)]
    pub unbind: Vec<Unbind>,
}

fn one() -> u32 {
    1
}

impl Default for RabbitmqHashParams {
    fn default() -> Self {
        RabbitmqHashParams {
            queues: 1,
            weight: 1,
            registration: Registration::Same,
            unbind: Vec::new(),
        }
    }
}

/// Jump consistent hash (Lamping & Veach): the bucket of `key` among `buckets` (at least 1);
/// growing `buckets` moves a key only into one of the new buckets.
pub fn jump_consistent_hash(mut key: u64, buckets: u32) -> u32 {
    let (mut b, mut j) = (-1i64, 0i64);
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

/// The hash of a routing key: murmur2 of the key in decimal, or of the empty key.
pub fn routing_hash(key: Option<u32>) -> u64 {
    let bytes = key.map(|k| k.to_string()).unwrap_or_default();
    u64::from(crate::kafka::murmur2(bytes.as_bytes()) as u32)
}

/// The exchange's bucket map: bucket number -> queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ring(pub Vec<u32>);

impl Ring {
    /// `chx_hash_ring_update_fun`: a new binding takes the next `weight` bucket numbers.
    pub fn bind(&mut self, queue: u32, weight: u32) {
        if !self.0.contains(&queue) {
            self.0.extend(std::iter::repeat_n(queue, weight as usize));
        }
    }

    /// `ch_hash_ring_delete_fun`: the binding's buckets go, later buckets are renumbered down.
    pub fn unbind(&mut self, queue: u32) {
        self.0.retain(|&q| q != queue);
    }

    /// `route`: the queue of a message with routing-key hash `hash` (None: no binding).
    pub fn route(&self, hash: u64) -> Option<u32> {
        if self.0.is_empty() {
            return None;
        }
        Some(self.0[jump_consistent_hash(hash, self.0.len() as u32) as usize])
    }
}

/// Wake-up tokens of the unbinds start here (the queues' [`Single`]s use token 0).
const UNBIND: u64 = 1 << 32;

/// What `queues` queues bound with `weight` cost a run of `sc`: a queue (a [`Single`]) each and a
/// ring bucket per unit of weight, and each rebalance looks at every queue.
fn ring_cost(queues: u64, weight: u64, sc: &sim::Scenario) -> crate::Footprint {
    let buckets = queues.saturating_mul(weight);
    crate::Footprint {
        bytes: queues
            .saturating_mul(std::mem::size_of::<Single>() as u64 + 64)
            .saturating_add(buckets.saturating_mul(4)),
        steps: buckets.saturating_add(queues.saturating_mul(crate::rebalances(sc))),
    }
}

/// A consistent-hash exchange over queues with single active consumer.
#[derive(Debug)]
pub struct RabbitmqHash {
    params: RabbitmqHashParams,
    /// Per key, its routing hash.
    hash: Vec<u64>,
    /// The empty routing key's hash.
    no_key: u64,
    /// `(first message id, queue per key)`: the routing in force from that message on.
    routes: Vec<(u64, Vec<u32>)>,
    /// The exchange's ring now.
    ring: Ring,
    /// The ring changed and the next message published starts a new `routes` entry.
    changed: bool,
    /// Per queue: its single active consumer.
    queues: Vec<Single>,
    /// Consumers of the first session (`[consumers] count`).
    consumers: u32,
    /// Per consumer id: None in its first session, else its registration rank (after every
    /// first-session consumer, in attach order). Every id is below `consumers`: the exchange
    /// is one broker, so there are no network bridges.
    rank: Vec<Option<u64>>,
    /// Attachments so far (for ranks).
    attaches: u64,
    /// The unbind timers are set.
    armed: bool,
    /// Scratch: the slots of one queue, best-ranked first.
    slots: Vec<ConsumerSlot>,
}

impl RabbitmqHash {
    /// An exchange over `params.queues` queues for `keys` keys, `consumers` consumers (and
    /// `targets` dispatch targets, bridges included).
    pub fn new(keys: u32, consumers: u32, targets: usize, params: RabbitmqHashParams) -> Self {
        let mut ring = Ring::default();
        for q in 0..params.queues {
            ring.bind(q, params.weight);
        }
        let hash: Vec<u64> = (0..keys).map(|k| routing_hash(Some(k))).collect();
        let no_key = routing_hash(None);
        let mut s = RabbitmqHash {
            queues: (0..params.queues)
                .map(|_| Single::new(1, SingleParams::default()))
                .collect(),
            params,
            hash,
            no_key,
            routes: Vec::new(),
            ring,
            changed: false,
            consumers,
            rank: vec![None; targets],
            attaches: 0,
            armed: false,
            slots: Vec::new(),
        };
        let table = s.table();
        s.routes.push((0, table));
        s
    }

    /// The queue of every key (and, last, of a message without a key) under the current ring.
    fn table(&self) -> Vec<u32> {
        self.hash
            .iter()
            .chain(std::iter::once(&self.no_key))
            .map(|&h| self.ring.route(h).expect("a binding is left"))
            .collect()
    }

    /// The queue the exchange routed `msg` to when it was published.
    pub fn queue_of(&self, msg: &MsgView) -> u32 {
        let table = &self
            .routes
            .iter()
            .rev()
            .find(|(from, _)| msg.id >= *from)
            .unwrap_or(&self.routes[0])
            .1;
        let i = msg.group.map_or(table.len() - 1, |k| k as usize);
        table[i]
    }

    /// Consumer `c`'s place in queue `q`'s registration order (lower registered earlier).
    fn rank_at(&self, c: u32, q: u32) -> u64 {
        match self.rank.get(c as usize).copied().flatten() {
            Some(r) => r,
            None => match self.params.registration {
                Registration::Same => u64::from(c),
                Registration::Spread => {
                    let n = self.consumers;
                    u64::from((c + n - q % n) % n)
                }
            },
        }
    }
}

impl Handler for RabbitmqHash {}

impl crate::Named for RabbitmqHash {
    const NAME: &'static str = "rabbitmq_hash";
    const SUMMARY: &'static str = "RabbitMQ consistent-hash exchange over queues with single active consumer each: keys on a jump-hash ring; a queue added or unbound splits keys";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Rabbitmq;
    type Params = RabbitmqHashParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "queues",
            meaning: "queues bound to the exchange at the start, each with its own single active consumer",
            unit: "count",
            default: "1",
            range: crate::Range::Int(1, u32::MAX as i64),
            sizes: Some(crate::Sizing {
                what: "a queue each, and weight ring buckets each; every queue visited at each rebalance",
                cost: |queues, sc| ring_cost(queues, crate::param_u64(sc, "rabbitmq_hash", "weight", 1), sc),
            }),
            models: "the queues bound to an x-consistent-hash exchange (one queue: a plain single-active-consumer queue)",
            hazard: None,
        },
        crate::ParamInfo {
            name: "weight",
            meaning: "buckets each binding takes on the ring (a queue added by add_partitions gets the same)",
            unit: "buckets",
            default: "1",
            range: crate::Range::Int(1, u32::MAX as i64),
            sizes: Some(crate::Sizing {
                what: "a ring bucket per unit of weight for each queue",
                cost: |weight, sc| ring_cost(crate::param_u64(sc, "rabbitmq_hash", "queues", 1), weight, sc),
            }),
            models: "the binding's routing key, the number of ring points (the plugin's examples bind with \"1\")",
            hazard: None,
        },
        crate::ParamInfo {
            name: "registration",
            meaning: "same: every consumer registers on every queue in start order, so the first is active on all; spread: queue q is first registered by consumer q mod count",
            unit: "same | spread",
            default: "same",
            range: crate::Range::Any,
            sizes: None,
            models: "single active consumer activates the first consumer registered on a queue; the order is the application's",
            hazard: None,
        },
        crate::ParamInfo {
            name: "unbind",
            meaning: "bindings removed during the run: [{ queue = Q, at = \"T\" }]; its buckets go and later ones are renumbered",
            unit: "list of { queue, at }",
            default: "[]",
            range: crate::Range::Any,
            sizes: None,
            models: "queue.unbind from the exchange (ch_hash_ring_delete_fun)",
            hazard: None,
        },
    ];
    fn check(_sc: &sim::Scenario, p: &RabbitmqHashParams) -> Vec<(&'static str, String)> {
        // Each queue unbound at most once, and one left bound: so the list is at most
        // `queues - 1` long, and checking it is linear.
        let mut gone = std::collections::BTreeSet::new();
        for u in &p.unbind {
            if u.queue >= p.queues {
                return vec![(
                    "unbind",
                    format!(
                        "[strategy.rabbitmq_hash] unbind names queue {}, but queues are 0 to {}",
                        u.queue,
                        p.queues.saturating_sub(1)
                    ),
                )];
            }
            if !gone.insert(u.queue) {
                return vec![(
                    "unbind",
                    format!(
                        "[strategy.rabbitmq_hash] unbind names queue {} twice",
                        u.queue
                    ),
                )];
            }
        }
        if gone.len() as u64 == u64::from(p.queues) {
            return vec![("unbind", "[strategy.rabbitmq_hash] unbind removes every binding: nothing would be routed (add a queue or unbind fewer)".into())];
        }
        Vec::new()
    }
    fn build(sc: &sim::Scenario, p: RabbitmqHashParams) -> Result<Self, String> {
        if sc.brokers.len() != 1 {
            return Err("the exchange and its queues are one [[broker]] here".into());
        }
        Ok(RabbitmqHash::new(
            sc.workload.keys,
            sc.consumers.count,
            sc.dispatch_targets(),
            p,
        ))
    }
}

impl Strategy for RabbitmqHash {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        let q = self.queue_of(msg);
        // The queue's registered consumers, its first-registered first.
        let Some(best) =
            (0..ctx.consumers.len()).min_by_key(|&i| self.rank_at(ctx.consumers[i].id, q))
        else {
            return Select::Hold;
        };
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        slots.extend_from_slice(ctx.consumers);
        slots.swap(0, best);
        let qctx = DispatchCtx {
            now: ctx.now,
            broker: 0,
            consumers: &slots,
        };
        let picked = self.queues[q as usize].select(&qctx, msg, ctl);
        let out = match picked {
            Select::Consumer(i) => {
                let id = slots[i].id;
                let back = ctx.consumers.iter().position(|c| c.id == id);
                back.map_or(Select::Hold, Select::Consumer)
            }
            // This queue waits; the others go on. Behind a full active consumer it waits for
            // that consumer's room (its rank changes only with an attachment): a promise, so
            // the broker need not ask again about the queue's backlog on every dispatch (a
            // poison message redelivered for ever scanned all of it per redelivery).
            Select::Stop => match self.queues[q as usize].owner(0) {
                Some(o) => match ctx.consumers.iter().position(|c| c.id == o) {
                    Some(i) if ctx.consumers[i].free == 0 => Select::HoldFor(i),
                    _ => Select::Hold,
                },
                None => Select::Hold,
            },
            Select::Hold | Select::HoldFor(_) | Select::HoldWhileMembers => Select::Hold,
            // A queue's single-active-consumer dispatch never skips a message.
            Select::Skip => Select::Skip,
        };
        self.slots = slots;
        out
    }

    fn route(&mut self, _ctx: &RouteCtx, msg: &MsgView) -> Route {
        if self.changed {
            self.changed = false;
            let table = self.table();
            self.routes.push((msg.id, table));
        }
        Route::Connected
    }

    fn on_attach(&mut self, _now: Time, _broker: u16, consumer: u32, ctl: &mut Control) {
        if !self.armed {
            self.armed = true;
            for (i, u) in self.params.unbind.iter().enumerate() {
                ctl.wake_at(u.at.micros(), UNBIND + i as u64);
            }
        }
        let c = consumer as usize;
        if self.rank[c].is_some() {
            // A consumer registering again goes to the end of every queue's list.
            self.rank[c] = Some(u64::from(self.consumers) + self.attaches);
        }
        self.attaches += 1;
    }

    fn on_detach(&mut self, now: Time, _broker: u16, consumer: u32, ctl: &mut Control) {
        if let Some(r) = self.rank.get_mut(consumer as usize) {
            // Its next attachment is a new registration.
            r.get_or_insert(u64::MAX);
        }
        for q in &mut self.queues {
            q.on_detach(now, 0, consumer, ctl);
        }
    }

    fn on_wake(&mut self, now: Time, token: u64, ctl: &mut Control) {
        if token >= UNBIND {
            let i = (token - UNBIND) as usize;
            self.ring.unbind(self.params.unbind[i].queue);
            self.changed = true;
        } else if let Some(q) = self.queues.first_mut() {
            q.on_wake(now, token, ctl);
        }
        ctl.redispatch();
    }

    fn on_world(&mut self, _now: Time, change: WorldChange, ctl: &mut Control) {
        if let WorldChange::PartitionsAdded(n) = change {
            let total = (self.queues.len() as u32).saturating_add(n).min(1000);
            for q in self.queues.len() as u32..total {
                self.ring.bind(q, self.params.weight);
                self.queues.push(Single::new(1, SingleParams::default()));
            }
            self.changed = true;
            ctl.redispatch();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, scenario, select_at, view};

    fn hash(params: RabbitmqHashParams, consumers: u32) -> RabbitmqHash {
        RabbitmqHash::new(64, consumers, consumers as usize, params)
    }

    fn attach(s: &mut RabbitmqHash, ids: &[u32]) {
        for &c in ids {
            s.on_attach(0, 0, c, &mut Control::default());
        }
    }

    /// Keys 0..64 routed by `s` (as published now).
    fn queues_of(s: &RabbitmqHash, first_id: u64) -> Vec<u32> {
        (0..64)
            .map(|k| s.queue_of(&view(first_id + u64::from(k), k)))
            .collect()
    }

    #[test]
    fn defaults_are_one_queue_of_weight_one() {
        let p: RabbitmqHashParams = toml::from_str("").unwrap();
        assert_eq!((p.queues, p.weight), (1, 1));
        assert_eq!(p.registration, Registration::Same);
        assert!(p.unbind.is_empty());
    }

    /// Jump consistent hash: every key in range, key 0 always in bucket 0, and growing the ring
    /// moves a key only into a new bucket, about 1/(n+1) of them.
    #[test]
    fn jump_hash_moves_only_keys_that_land_in_new_buckets() {
        let mut moved = 0;
        for k in 0..10_000u32 {
            let h = routing_hash(Some(k));
            let (a, b) = (jump_consistent_hash(h, 4), jump_consistent_hash(h, 5));
            assert!(a < 4 && b < 5);
            if a != b {
                assert_eq!(b, 4, "key {k} moved between old buckets");
                moved += 1;
            }
        }
        assert!((1_800..2_200).contains(&moved), "{moved} of 10000 moved");
        assert_eq!(jump_consistent_hash(0, 1000), 0);
        assert_eq!(jump_consistent_hash(12_345, 1), 0);
    }

    /// The buckets the paper's reference code gives (computed by an independent port of its
    /// C++: the LCG 2862933555777941757 and `(b + 1) * 2^31 / ((key >> 33) + 1)`).
    #[test]
    fn jump_hash_matches_the_reference_code() {
        let keys = [0, 1, 2, 3, 12_345, 0xdead_beef, 1 << 63, u64::MAX];
        assert_eq!(
            keys.map(|k| jump_consistent_hash(k, 10)),
            [0, 6, 6, 8, 1, 5, 5, 9]
        );
        assert_eq!(
            keys.map(|k| jump_consistent_hash(k, 1000)),
            [0, 549, 338, 961, 938, 285, 453, 313]
        );
    }

    /// The ring as the plugin keeps it: consecutive bucket numbers per binding; removing one
    /// renumbers the later buckets down (and binding a queue twice changes nothing).
    #[test]
    fn the_ring_binds_and_unbinds_as_the_plugin_does() {
        let mut r = Ring::default();
        r.bind(0, 2);
        r.bind(1, 1);
        r.bind(2, 2);
        r.bind(1, 5);
        assert_eq!(r.0, vec![0, 0, 1, 2, 2]);
        r.unbind(1);
        assert_eq!(r.0, vec![0, 0, 2, 2]);
        assert_eq!(Ring::default().route(7), None);
    }

    /// `same`: the first consumer registered is active on every queue; `spread`: queue q's
    /// first registration is consumer q mod n. A full active consumer holds its queue only.
    #[test]
    fn who_is_active_on_each_queue() {
        let p = |registration| RabbitmqHashParams {
            queues: 4,
            registration,
            ..Default::default()
        };
        let all = [(0, 5), (1, 5), (2, 5), (3, 5)];
        let ctl = &mut Control::default();
        let mut same = hash(p(Registration::Same), 4);
        attach(&mut same, &[0, 1, 2, 3]);
        let mut spread = hash(p(Registration::Spread), 4);
        attach(&mut spread, &[0, 1, 2, 3]);
        let qs = queues_of(&same, 0);
        assert!(
            (0..4).all(|q| qs.contains(&q)),
            "64 keys reach all 4 queues"
        );
        for k in 0..64u32 {
            let m = view(u64::from(k), k);
            assert_eq!(select_at(&mut same, 0, &all, &m, ctl), Ok(0));
            assert_eq!(select_at(&mut spread, 0, &all, &m, ctl), Ok(qs[k as usize]));
        }
        // Queue 1's active consumer (1) is full: its message waits for it (a promise the broker
        // keeps until 1 has room), queue 2's goes.
        let k1 = qs.iter().position(|&q| q == 1).unwrap() as u32;
        let k2 = qs.iter().position(|&q| q == 2).unwrap() as u32;
        let busy = [(0, 5), (1, 0), (2, 5), (3, 5)];
        assert_eq!(
            select_at(&mut spread, 0, &busy, &view(100, k1), ctl),
            Err(Select::HoldFor(1))
        );
        assert_eq!(select_at(&mut spread, 0, &busy, &view(101, k2), ctl), Ok(2));
        assert!(ctl.reassignments().is_empty(), "first choices");
        // Consumer 1 goes: the next registered on queue 1 (2) takes over; when 1 comes back it
        // registers at the end and stays a standby.
        spread.on_detach(1, 0, 1, ctl);
        let rest = [(0, 5), (2, 5), (3, 5)];
        assert_eq!(select_at(&mut spread, 1, &rest, &view(102, k1), ctl), Ok(2));
        assert_eq!(ctl.reassignments(), vec![(0, 2)]);
        spread.on_attach(2, 0, 1, ctl);
        let back = [(0, 5), (2, 5), (3, 5), (1, 5)];
        assert_eq!(select_at(&mut spread, 2, &back, &view(103, k1), ctl), Ok(2));
        // 2 goes too: queue 1's next registration is 3, then 0; 1 registered last of all.
        spread.on_detach(3, 0, 2, ctl);
        let left = [(0, 5), (3, 5), (1, 5)];
        assert_eq!(select_at(&mut spread, 3, &left, &view(104, k1), ctl), Ok(3));
    }

    /// Consumers coming back register behind every first-session consumer, in the order they
    /// came back (whatever their place in the broker's list).
    #[test]
    fn consumers_registering_again_queue_up_in_the_order_they_came_back() {
        let mut s = hash(RabbitmqHashParams::default(), 4);
        attach(&mut s, &[0, 1, 2, 3]);
        let ctl = &mut Control::default();
        let m = view(0, 0);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 5), (1, 5), (2, 5), (3, 5)], &m, ctl),
            Ok(0)
        );
        s.on_detach(1, 0, 3, ctl);
        s.on_detach(1, 0, 1, ctl);
        s.on_attach(2, 0, 3, ctl);
        s.on_attach(2, 0, 1, ctl);
        // The active one (0) leaves: 2, the only first-session consumer left, takes over.
        s.on_detach(3, 0, 0, ctl);
        assert_eq!(
            select_at(&mut s, 3, &[(1, 5), (2, 5), (3, 5)], &m, ctl),
            Ok(2)
        );
        // Then 3, back before 1.
        s.on_detach(4, 0, 2, ctl);
        assert_eq!(select_at(&mut s, 4, &[(1, 5), (3, 5)], &m, ctl), Ok(3));
    }

    /// Each unbind has its own timer, and its wake-up removes its own binding.
    #[test]
    fn each_unbind_wakes_for_its_own_binding() {
        let mut s = hash(
            RabbitmqHashParams {
                queues: 3,
                unbind: vec![
                    Unbind {
                        queue: 2,
                        at: Dur::from_secs(1),
                    },
                    Unbind {
                        queue: 0,
                        at: Dur::from_secs(2),
                    },
                ],
                ..Default::default()
            },
            2,
        );
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_attach(0, 0, 1, ctl);
        assert_eq!(
            ctl.wakes(),
            vec![(1_000_000, UNBIND), (2_000_000, UNBIND + 1)]
        );
        s.on_wake(2_000_000, UNBIND + 1, ctl);
        assert_eq!(s.ring.0, vec![1, 2]);
    }

    /// `spread` with more queues than consumers: queue q is first registered by q mod n.
    #[test]
    fn spread_registration_wraps_over_the_consumers() {
        let p = RabbitmqHashParams {
            queues: 5,
            registration: Registration::Spread,
            ..Default::default()
        };
        let mut s = hash(p, 3);
        attach(&mut s, &[0, 1, 2]);
        let qs = queues_of(&s, 0);
        assert!(
            (0..5).all(|q| qs.contains(&q)),
            "64 keys reach all 5 queues"
        );
        let ctl = &mut Control::default();
        for k in 0..64u32 {
            let m = view(u64::from(k), k);
            let active = select_at(&mut s, 0, &[(0, 5), (1, 5), (2, 5)], &m, ctl);
            assert_eq!(active, Ok(qs[k as usize] % 3), "key {k}");
        }
    }

    /// A queue added (the `add_partitions` fault) takes about 1/5 of the keys from 4 queues,
    /// from the next message published; a message without a routing key always goes to the
    /// empty key's queue.
    #[test]
    fn an_added_queue_takes_keys_from_the_next_message_on() {
        let mut s = hash(
            RabbitmqHashParams {
                queues: 4,
                ..Default::default()
            },
            2,
        );
        let before = queues_of(&s, 0);
        let ctl = &mut Control::default();
        s.on_world(0, WorldChange::PartitionsAdded(1), ctl);
        assert!(ctl.redispatch_requested());
        assert_eq!(queues_of(&s, 0), before, "nothing published since");
        let rctx = RouteCtx {
            now: 0,
            producer: 0,
            connected: 0,
            up: &[true],
            held_since: None,
        };
        assert_eq!(s.route(&rctx, &view(1000, 0)), Route::Connected);
        let after = queues_of(&s, 1000);
        let moved: Vec<usize> = (0..64).filter(|&k| after[k] != before[k]).collect();
        assert!(
            moved.iter().all(|&k| after[k] == 4),
            "moved only to the new queue"
        );
        assert!(
            (6..=20).contains(&moved.len()),
            "{} of 64 moved",
            moved.len()
        );
        assert_eq!(
            queues_of(&s, 0),
            before,
            "earlier messages stay where they were"
        );
        let no_key = MsgView {
            group: None,
            ..view(2000, 3)
        };
        let q = s.queue_of(&no_key);
        assert_eq!(
            s.queue_of(&MsgView {
                group: None,
                ..view(2001, 9)
            }),
            q
        );
    }

    /// Unbinding queue 0 of 4 moves its keys and (the later buckets renumbered) others.
    #[test]
    fn an_unbind_moves_the_queues_keys_at_its_time() {
        let mut s = hash(
            RabbitmqHashParams {
                queues: 4,
                unbind: vec![Unbind {
                    queue: 0,
                    at: Dur::from_secs(5),
                }],
                ..Default::default()
            },
            2,
        );
        let ctl = &mut Control::default();
        s.on_attach(0, 0, 0, ctl);
        s.on_attach(0, 0, 1, ctl);
        assert_eq!(ctl.wakes(), vec![(5_000_000, UNBIND)], "armed once");
        let before = queues_of(&s, 0);
        s.on_wake(5_000_000, UNBIND, ctl);
        let rctx = RouteCtx {
            now: 0,
            producer: 0,
            connected: 0,
            up: &[true],
            held_since: None,
        };
        s.route(&rctx, &view(500, 0));
        let after = queues_of(&s, 500);
        assert!(after.iter().all(|&q| q != 0), "queue 0 gets nothing new");
        let moved = (0..64).filter(|&k| after[k] != before[k]).count();
        let had = before.iter().filter(|&&q| q == 0).count();
        assert!(moved >= had, "{moved} moved, queue 0 had {had}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let base = |extra: &str| {
            sim::scenario::load_str("test.toml", &format!(
                "strategies = [\"rabbitmq_hash\"]\n[workload]\nmessages = 10\nrate = \"10/s\"\nkeys = 4\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 2\nservice = \"1ms\"\n[strategy.rabbitmq_hash]\n{extra}"
            ), &crate::validate)
        };
        // Bad input: refused in validation at the parameter, never "not applicable".
        for (extra, says) in [
            (
                "queues = 0",
                "`strategy.rabbitmq_hash.queues`: 0 is out of range: allowed 1 to 4294967295",
            ),
            (
                "weight = 0",
                "`strategy.rabbitmq_hash.weight`: 0 is out of range: allowed 1 to 4294967295",
            ),
            (
                "queues = 2\nunbind = [{ queue = 2, at = \"1s\" }]",
                "queues are 0 to 1",
            ),
            (
                "queues = 2\nunbind = [{ queue = 1, at = \"1s\" }, { queue = 1, at = \"2s\" }]",
                "twice",
            ),
            ("unbind = [{ queue = 0, at = \"1s\" }]", "every binding"),
            // Bounded by what the file's limits leave, not by a fixed number.
            (
                "queues = 1000\nweight = 1000000\n[run]\nmemory_budget_mb = 64",
                "`strategy.rabbitmq_hash.weight`: 1000000 needs about",
            ),
        ] {
            let e = base(extra).unwrap_err().to_string();
            assert!(e.contains(says), "{extra}: {e}");
        }
    }

    /// 3000 messages over 40 keys at `rate`/s to four consumers (prefetch 10, 10ms each), on
    /// the classic-queue flavour, with `[strategy.rabbitmq_hash]` lines `params`.
    fn rabbit(strategies: &str, rate: u32, params: &str, extra: &str) -> sim::Scenario {
        rabbit_with(strategies, rate, 4, params, extra)
    }

    /// [`rabbit`] with `consumers` consumers.
    fn rabbit_with(
        strategies: &str,
        rate: u32,
        consumers: u32,
        params: &str,
        extra: &str,
    ) -> sim::Scenario {
        scenario(&format!(
            r#"
flavour = "rabbitmq"
strategies = [{strategies}]
[workload]
messages = 3000
rate = "{rate}/s"
keys = 40
[[broker]]
name = "rabbit"
[consumers]
count = {consumers}
prefetch = 10
service = {{ dist = "exponential", mean = "10ms" }}
[strategy.rabbitmq_hash]
{params}
{extra}
"#
        ))
    }

    /// Strength: four queues, their active consumers spread; consumers crash and come back:
    /// each queue's next registered consumer takes over with the requeued messages first, so
    /// every key stays in order where competing consumers reorder, at four consumers'
    /// throughput.
    #[test]
    fn hash_and_sac_keep_order_through_crashes() {
        let crashes = "[[fault]]\nkind = \"consumer_crash\"\nrate = \"6/min\"\nfor = \"2s\"\n";
        let sc = rabbit(
            r#""rabbitmq_hash", "competing""#,
            250,
            "queues = 4\nregistration = \"spread\"",
            crashes,
        );
        for seed in 1..=3 {
            let m = run(&sc, "rabbitmq_hash", seed);
            assert!(m.coverage.consumer_crashes > 0 && m.coverage.reassignments > 0);
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!((m.applied, m.lost), (3000, 0));
            assert!(m.throughput_per_s > 150.0, "{}", m.throughput_per_s);
            let c = run(&sc, "competing", seed);
            assert!(c.ordering_violations > 10, "competing reorders");
        }
    }

    /// Weakness: with every consumer registering on every queue in the same order, the first
    /// is active on all four queues: one consumer's throughput, as a single queue.
    #[test]
    fn same_registration_makes_one_consumer_the_cap() {
        let sc = rabbit(r#""rabbitmq_hash""#, 250, "queues = 4", "");
        let same = run(&sc, "rabbitmq_hash", 1);
        assert!(same.throughput_per_s < 110.0, "{}", same.throughput_per_s);
        let sc = rabbit(
            r#""rabbitmq_hash""#,
            250,
            "queues = 4\nregistration = \"spread\"",
            "",
        );
        let spread = run(&sc, "rabbitmq_hash", 1);
        assert!(
            spread.throughput_per_s > 200.0,
            "{}",
            spread.throughput_per_s
        );
    }

    /// Weakness: a fifth queue is added (with a fifth consumer, first registered on it) while
    /// the four others have a backlog: the keys that move have their newer messages applied by
    /// the idle new consumer while older ones still wait in their old queue.
    #[test]
    fn adding_a_queue_splits_keys() {
        let add = "[[fault]]\nkind = \"add_partitions\"\nat = \"5s\"\ncount = 1\n";
        let params = "queues = 4\nregistration = \"spread\"";
        let sc = rabbit_with(r#""rabbitmq_hash""#, 380, 5, params, add);
        let m = run(&sc, "rabbitmq_hash", 1);
        assert!(m.ordering_violations > 0, "{m:?}");
        assert_eq!((m.applied, m.lost), (3000, 0));
        let sc = rabbit_with(r#""rabbitmq_hash""#, 380, 5, params, "");
        assert_eq!(run(&sc, "rabbitmq_hash", 1).ordering_violations, 0);
    }

    /// Weakness: unbinding a queue moves its keys (and renumbered others) to queues whose
    /// consumers overtake its backlog.
    #[test]
    fn unbinding_a_queue_splits_keys() {
        let sc = rabbit(
            r#""rabbitmq_hash""#,
            380,
            "queues = 4\nregistration = \"spread\"\nunbind = [{ queue = 0, at = \"5s\" }]",
            "",
        );
        let m = run(&sc, "rabbitmq_hash", 1);
        assert!(m.ordering_violations > 0, "{m:?}");
        assert_eq!((m.applied, m.lost), (3000, 0));
    }
}
