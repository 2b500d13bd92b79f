//! `message_groups`: ActiveMQ Classic message groups (`JMSXGroupID`).
//!
//! What it models, and where the semantics come from (the ActiveMQ sources A1 and A6 in
//! docs/sources.md; ActiveMQ's `Queue.doActualDispatch`, `Queue.assignMessageGroup`,
//! `Queue.orderedCompare`, `Queue.addSubscription`/`removeSubscription`, `CachedMessageGroupMap`;
//! [ActiveMQ+Camel]):
//!
//! - **Sticky ownership, per broker.** Each broker keeps its own map from group (the header; here
//!   the key) to owning consumer. A message of an owner-less group is given, at dispatch, to the
//!   consumer being considered, which becomes the group's owner and receives the whole group until
//!   it leaves ([`Strategy::on_detach`]: close, crash, network blip, suspension, its broker's
//!   crash). Then the broker forgets the consumer's groups; its unacked and prefetched messages
//!   are already back at the head of the queue, marked redelivered, and go to whichever consumer
//!   owns their group at their next dispatch. Producers send no `JMSXGroupSeq`, so the
//!   "sequence 1 re-assigns the group" and "negative sequence closes the group" rules never apply.
//! - **Who is considered first.** ActiveMQ walks its consumer list and gives the message to the
//!   first consumer that is not full; after every dispatch it moves the target to the end of the
//!   list (round-robin) and, with the default `useConsumerPriority`, sorts the list stably by
//!   priority, then by *ascending number of assigned groups* ("to favour less loaded consumers").
//!   So the model picks, among attached consumers with free prefetch, the one with the fewest
//!   groups on this broker, ties broken by least recently attached-or-dispatched-to (the rotated
//!   list). Messages without the header (`msg.group == None`) take the same path, with no
//!   stickiness: plain competing consumers.
//! - **Full owner: hold, don't block.** A message whose owner is attached but full stays in the
//!   queue ([`Select::Hold`]); dispatch goes on with the next message, so other groups pass it.
//!   Later messages of the same group are held too (same owner, still full), so a group's order
//!   in the queue is kept. Only paged-in messages are considered (the engine's `page_size`,
//!   ActiveMQ `maxPageSize`): a long backlog of one group can still block the others.
//! - **Bounded group map.** The default `CachedMessageGroupMap` is an access-ordered LRU of 1024
//!   groups: every lookup of a group refreshes it, and inserting a group beyond the maximum evicts
//!   the least recently used one, which silently loses its owner ("if there are more groups than
//!   the maximum, ordering will be lost for the oldest groups", AMQ-6851). Its next message gets a
//!   new owner while the old owner may still hold earlier messages of the group. `max_groups = 0`
//!   is the unbounded `SimpleMessageGroupMap`. The LRU is an intrusive doubly linked list in Vecs
//!   indexed by group (deterministic, no allocation per message).
//! - **Dispatch gate.** `consumersBeforeDispatchStarts` / `timeBeforeDispatchStarts`: when a
//!   broker's first consumer attaches (its consumer count goes from 0 to 1), its queue's dispatch
//!   thread waits until `consumers_before_dispatch - 1` more consumers have attached, or
//!   `time_before_dispatch` (1s when only the count is set, as ActiveMQ documents and codes) has
//!   passed; with only the time set it waits that long. ActiveMQ blocks the whole queue's
//!   `iterate()`, so ungrouped messages wait too; the model does the same ([`Select::Stop`]).
//!
//! - **Operator reset** (the `reset_groups` fault: JMX `QueueView.removeAllMessageGroups` ->
//!   `MessageGroupMap.removeAll`): every group of the broker loses its owner and its next message
//!   is assigned as a new group's. Nothing is recalled: the old owner keeps the messages it was
//!   dispatched (prefetched or in hand), so with a prefetch above 1 the new owner may apply a
//!   later message first. `CachedMessageGroupMap.removeAll` also clears each consumer's assigned
//!   group count; `SimpleMessageGroupMap.removeAll` (`max_groups = 0`) does not, so the stale
//!   counts keep steering new groups away from the old owners.
//!
//! What it does not model: consumer priorities and selectors (all consumers are alike), the
//! network bridge as a group owner (the engine forwards only from a broker without consumers),
//! and `MessageGroupHashBucket` (a hash of groups into 1024 buckets: several groups share an
//! owner; ordering-wise it behaves like an unbounded map).
//!
//! Owner changes are recorded with [`Control::reassigned`] only when a group that had an owner on
//! this broker gets a new one: after the owner left (any new owner, even the same consumer index
//! reconnected, is a new JMS consumer), or after an LRU eviction when the new owner differs from
//! the evicted one. A group's first assignment on a broker is not recorded: it changes nobody's
//! ownership, and recording it would make `coverage.reassignments` count groups rather than
//! ownership changes. (In a network of brokers, the [ActiveMQ+Camel] failure is a *first*
//! assignment on the surviving broker while the crashed one still holds the group's older messages:
//! the history shows it as failovers and forwards, not as reassignments.)
//!
//! The handler is the plain one: process, write, ack. Redelivery is the engine's: blocking
//! redelivery keeps a failed message at its owner's session, ahead of the rest of its group;
//! non-blocking redelivery parks it at the broker while the same owner takes (or has prefetched)
//! the next messages of its group, which overtake it (as with `single`).
//!
//! Parameters (`[strategy.message_groups]`): `max_groups` (default 1024; 0 = unbounded),
//! `consumers_before_dispatch` (default 0 = no gate), `time_before_dispatch` (default "0s": 1s when
//! `consumers_before_dispatch` is set).

use serde::{Deserialize, Serialize};
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy, WorldChange};
use sim::time::{Dur, Time};

/// `[strategy.message_groups]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MessageGroupsParams {
    /// Size of the per-broker LRU group map (`CachedMessageGroupMap`, default 1024); 0 = unbounded
    /// (`SimpleMessageGroupMap`).
    #[serde(default = "default_max_groups")]
    pub max_groups: u32,
    /// `consumersBeforeDispatchStarts` (default 0: dispatch starts with the first consumer).
    #[serde(default)]
    pub consumers_before_dispatch: u32,
    /// `timeBeforeDispatchStarts` (default 0; 1s when only `consumers_before_dispatch` is set).
    #[serde(default)]
    pub time_before_dispatch: Dur,
}

fn default_max_groups() -> u32 {
    1024
}

impl Default for MessageGroupsParams {
    fn default() -> Self {
        MessageGroupsParams {
            max_groups: default_max_groups(),
            consumers_before_dispatch: 0,
            time_before_dispatch: Dur::ZERO,
        }
    }
}

/// No consumer / no list neighbour.
const NIL: u32 = u32::MAX;
/// `last_owner`: the group never had an owner on this broker.
const NEVER: u32 = u32::MAX;
/// `last_owner`: the group's last owner left the broker.
const GONE: u32 = u32::MAX - 1;

/// One broker's group map, LRU order and dispatch gate.
#[derive(Debug)]
struct BrokerGroups {
    /// Per group: its owner (a consumer index), or NIL.
    owner: Vec<u32>,
    /// Per group without an owner: who owned it last (a consumer index), GONE or NEVER.
    last_owner: Vec<u32>,
    /// LRU list (where the map can overflow): per group, the less / more recently used neighbour.
    older: Vec<u32>,
    newer: Vec<u32>,
    /// Least and most recently used groups in the map.
    lru: u32,
    mru: u32,
    /// Groups in the map (owned).
    len: u32,
    /// Consumers attached.
    attached: u32,
    /// Dispatch gate: open, or waiting for `latch` more attaches or for time `until`.
    open: bool,
    latch: u32,
    until: Time,
}

impl BrokerGroups {
    fn new(groups: usize, keep_lru: bool) -> Self {
        let lru_len = if keep_lru { groups } else { 0 };
        BrokerGroups {
            owner: vec![NIL; groups],
            last_owner: vec![NEVER; groups],
            older: vec![NIL; lru_len],
            newer: vec![NIL; lru_len],
            lru: NIL,
            mru: NIL,
            len: 0,
            attached: 0,
            open: true,
            latch: 0,
            until: 0,
        }
    }

    fn unlink(&mut self, g: u32) {
        let (o, n) = (self.older[g as usize], self.newer[g as usize]);
        if o == NIL {
            self.lru = n;
        } else {
            self.newer[o as usize] = n;
        }
        if n == NIL {
            self.mru = o;
        } else {
            self.older[n as usize] = o;
        }
        self.older[g as usize] = NIL;
        self.newer[g as usize] = NIL;
    }

    fn push_mru(&mut self, g: u32) {
        self.older[g as usize] = self.mru;
        self.newer[g as usize] = NIL;
        if self.mru == NIL {
            self.lru = g;
        } else {
            self.newer[self.mru as usize] = g;
        }
        self.mru = g;
    }
}

/// ActiveMQ Classic message groups.
#[derive(Debug)]
pub struct MessageGroups {
    params: MessageGroupsParams,
    brokers: Vec<BrokerGroups>,
    /// Per consumer: groups it owns on the broker it is attached to.
    assigned: Vec<u32>,
    /// Per consumer: position in the broker's rotated consumer list (smaller = considered first
    /// among consumers with as many groups).
    rank: Vec<u64>,
    tick: u64,
    /// The map is bounded and can overflow (more groups than `max_groups`): only then does its
    /// LRU order decide anything (which group an overflow evicts), so only then is it kept.
    lru: bool,
}

impl MessageGroups {
    /// A new instance for `brokers` brokers, `consumers` consumer ids (with the network bridges:
    /// [`sim::Scenario::dispatch_targets`]) and `groups` group ids (keys).
    pub fn new(
        brokers: usize,
        consumers: usize,
        groups: usize,
        params: MessageGroupsParams,
    ) -> Self {
        let lru = params.max_groups > 0 && groups > params.max_groups as usize;
        MessageGroups {
            brokers: (0..brokers)
                .map(|_| BrokerGroups::new(groups, lru))
                .collect(),
            assigned: vec![0; consumers],
            rank: vec![0; consumers],
            tick: 0,
            lru,
            params,
        }
    }

    /// A lookup of an owned group: the access-ordered LRU refreshes it.
    fn touch(&mut self, b: usize, g: u32) {
        if self.lru {
            let side = &mut self.brokers[b];
            if side.mru != g {
                side.unlink(g);
                side.push_mru(g);
            }
        }
    }

    /// Among attached consumers with free prefetch: fewest groups, then first in rotation order.
    fn pick(&self, ctx: &DispatchCtx) -> Option<usize> {
        ctx.consumers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.free > 0)
            .min_by_key(|(_, s)| (self.assigned[s.id as usize], self.rank[s.id as usize]))
            .map(|(i, _)| i)
    }

    /// Dispatch to `consumers[i]`: it moves to the end of the rotation.
    fn dispatch_to(&mut self, ctx: &DispatchCtx, i: usize) -> Select {
        self.tick += 1;
        self.rank[ctx.consumers[i].id as usize] = self.tick;
        Select::Consumer(i)
    }

    /// `g` becomes owned by `c` at broker `b` (inserted as most recently used; the least recently
    /// used group is evicted if the map is over its maximum).
    fn assign(&mut self, b: u16, g: u32, c: u32, ctl: &mut Control) {
        let (max, lru) = (self.params.max_groups, self.lru);
        let side = &mut self.brokers[b as usize];
        let last = side.last_owner[g as usize];
        if last == GONE || (last != NEVER && last != c) {
            ctl.reassigned(b, c);
        }
        side.owner[g as usize] = c;
        side.last_owner[g as usize] = NEVER;
        side.len += 1;
        self.assigned[c as usize] += 1;
        if lru {
            side.push_mru(g);
            if side.len > max {
                // CachedMessageGroupMap.removeEldestEntry: the eldest group loses its owner.
                let old = side.lru;
                side.unlink(old);
                let o = side.owner[old as usize];
                side.owner[old as usize] = NIL;
                side.last_owner[old as usize] = o;
                side.len -= 1;
                self.assigned[o as usize] -= 1;
            }
        }
    }

    /// Whether broker `b` may dispatch (the `consumersBeforeDispatchStarts` gate).
    fn gate_open(&mut self, b: usize, now: Time) -> bool {
        let side = &mut self.brokers[b];
        if !side.open && now >= side.until {
            side.open = true;
        }
        side.open
    }
}

impl Handler for MessageGroups {}

impl crate::Named for MessageGroups {
    const NAME: &'static str = "message_groups";
    const SUMMARY: &'static str =
        "ActiveMQ JMSXGroupID: sticky group owner per broker (LRU map of 1024); breaks on broker failover, missing headers, map overflow";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    type Params = MessageGroupsParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "max_groups",
            meaning: "size of each broker's LRU map from group to owning consumer; an evicted group loses its owner; 0 = unbounded",
            unit: "groups",
            default: "1024",
            range: crate::Range::Int(0, u32::MAX as i64),
            sizes: None,
            models: "ActiveMQ CachedMessageGroupMap maximum (messageGroupMapFactory cacheSize); 0 = SimpleMessageGroupMap",
            hazard: Some(crate::Hazard {
                when: "1 ..= [workload] keys - 1 (fewer groups than keys)",
                applies: |v, sc| v.parse::<u32>().is_ok_and(|n| n > 0 && n < sc.workload.keys),
                effect: "max_groups is smaller than the number of keys: evicted groups get a new owner while the old one may still hold earlier messages (reorders without any fault, AMQ-6851)",
            }),
        },
        crate::ParamInfo {
            name: "consumers_before_dispatch",
            meaning: "a broker's dispatch waits, after its first consumer attaches, until this many consumers are attached (or time_before_dispatch passes); 0 = no wait",
            unit: "consumers",
            default: "0",
            range: crate::Range::Int(0, 10_000),
            sizes: None,
            models: "ActiveMQ destination policy consumersBeforeDispatchStarts",
            hazard: None,
        },
        crate::ParamInfo {
            name: "time_before_dispatch",
            meaning: "longest wait of that dispatch gate (1s when only consumers_before_dispatch is set)",
            unit: "duration",
            default: "0s",
            range: crate::Range::dur_from(Dur::ZERO),
            sizes: None,
            models: "ActiveMQ destination policy timeBeforeDispatchStarts",
            hazard: None,
        },
    ];
    fn build(sc: &sim::Scenario, p: MessageGroupsParams) -> Result<Self, String> {
        // Network bridges can own groups too (a bridge subscription is a consumer of the queue).
        Ok(MessageGroups::new(
            sc.brokers.len(),
            sc.dispatch_targets(),
            sc.workload.keys as usize,
            p,
        ))
    }
}

impl Strategy for MessageGroups {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        let b = ctx.broker as usize;
        if !self.gate_open(b, ctx.now) {
            return Select::Stop;
        }
        let Some(g) = msg.group else {
            // No JMSXGroupID: plain competing consumers.
            return match self.pick(ctx) {
                Some(i) => self.dispatch_to(ctx, i),
                None => Select::Stop,
            };
        };
        let owner = self.brokers[b].owner[g as usize];
        if owner != NIL {
            self.touch(b, g);
            match ctx.consumers.iter().position(|s| s.id == owner) {
                Some(i) if ctx.consumers[i].free > 0 => return self.dispatch_to(ctx, i),
                // The owner is full: the message waits, other groups' messages may pass. Without
                // an LRU to refresh, asking again changes nothing until the owner has room.
                Some(i) if !self.lru => return Select::HoldFor(i),
                Some(_) => return Select::Hold,
                None => {
                    // The owner is attached but not offered this message: a network bridge that
                    // owns the group is never offered a message that came over a bridge
                    // (networkTTL 1). ActiveMQ's queue does the same (the network subscription's
                    // filter refuses the message, and no other consumer may take an owned group):
                    // the message waits until the group's owner changes.
                    return if self.lru {
                        Select::Hold
                    } else {
                        Select::HoldWhileMembers
                    };
                }
            }
        }
        // Owner-less group: the consumer being considered takes it.
        match self.pick(ctx) {
            Some(i) => {
                self.assign(ctx.broker, g, ctx.consumers[i].id, ctl);
                self.dispatch_to(ctx, i)
            }
            None => Select::Stop,
        }
    }

    fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.tick += 1;
        self.rank[consumer as usize] = self.tick;
        self.assigned[consumer as usize] = 0;
        let before = self.params.consumers_before_dispatch;
        let wait = match self.params.time_before_dispatch.micros() {
            0 if before > 0 => Dur::from_secs(1).micros(),
            t => t,
        };
        let side = &mut self.brokers[broker as usize];
        if side.attached == 0 {
            // Queue.addSubscription: the first consumer arms the gate (a latch of count - 1).
            // (A count alone waits 1s at most, so a gate always has a time.)
            if wait > 0 {
                side.latch = before.saturating_sub(1);
                side.open = before > 0 && side.latch == 0;
                side.until = now + wait;
                if !side.open {
                    ctl.wake_at(side.until, broker as u64);
                }
            }
        } else if !side.open && side.latch > 0 {
            // (A latch is armed only when the count is set.)
            side.latch -= 1;
            side.open = side.latch == 0;
        }
        side.attached += 1;
    }

    fn on_detach(&mut self, _now: Time, broker: u16, consumer: u32, _ctl: &mut Control) {
        // Queue.removeSubscription -> MessageGroupMap.removeConsumer: its groups are forgotten.
        // Its unacked messages are already back in the queue (the engine did it).
        let lru = self.lru;
        let side = &mut self.brokers[broker as usize];
        side.attached = side.attached.saturating_sub(1);
        for g in 0..side.owner.len() {
            if side.owner[g] == consumer {
                side.owner[g] = NIL;
                side.last_owner[g] = GONE;
                side.len -= 1;
                if lru {
                    side.unlink(g as u32);
                }
            } else if side.last_owner[g] == consumer {
                side.last_owner[g] = GONE;
            }
        }
        self.assigned[consumer as usize] = 0;
    }

    fn on_wake(&mut self, _now: Time, _token: u64, ctl: &mut Control) {
        // The dispatch gate's time is up (gate_open sees it): dispatch again.
        ctl.redispatch();
    }

    fn on_world(&mut self, _now: Time, change: WorldChange, ctl: &mut Control) {
        let WorldChange::GroupsReset(b) = change else {
            return;
        };
        // QueueView.removeAllMessageGroups -> MessageGroupMap.removeAll: the map is cleared; the
        // messages the owners were already sent stay with them.
        let cached = self.params.max_groups > 0;
        let side = &mut self.brokers[b as usize];
        if side.len == 0 {
            return;
        }
        for g in 0..side.owner.len() {
            let o = side.owner[g];
            if o != NIL {
                side.owner[g] = NIL;
                // The consumer is still there: a new owner other than it is a reassignment.
                side.last_owner[g] = o;
                if cached {
                    // CachedMessageGroupMap.removeAll: clearAssignedGroupCount on each consumer.
                    self.assigned[o as usize] = 0;
                }
            }
        }
        side.len = 0;
        side.lru = NIL;
        side.mru = NIL;
        side.older.fill(NIL);
        side.newer.fill(NIL);
        ctl.redispatch();
    }
}

#[cfg(test)]
mod tests {
    use crate::test_util::{run, scenario, simple_with};
    use sim::history::{Event, Observer};
    use sim::strategy::{Begin, Handler, HandlerCtx, Hooks, Outcome, Route, RouteCtx, WorldChange};
    use sim::{FaultPlan, Metrics, RunOptions, Scenario};

    /// Like `test_util::simple` (one broker, exponential 10ms service, prefetch 1, 3000 messages
    /// over 50 keys), with `workload` lines added to `[workload]` and `extra` appended.
    fn groups(consumers: u32, rate: u32, workload: &str, extra: &str) -> Scenario {
        let strategies = r#""competing", "single", "message_groups""#;
        simple_with(strategies, consumers, rate, 50, workload, extra)
    }

    fn groups_run(sc: &Scenario, seed: u64) -> Metrics {
        run(sc, "message_groups", seed)
    }

    /// Strength: with every header set and no faults, eight consumers keep every key in order
    /// (a group's messages all go to its owner, which processes them one at a time, in queue
    /// order), at the throughput of plain competing consumers (4 erlangs of work spread over 50
    /// groups and 8 consumers), while an exclusive consumer is capped at ~100/s.
    #[test]
    fn keeps_order_at_competing_throughput() {
        let sc = groups(8, 400, "", "");
        for seed in 1..=3 {
            let g = groups_run(&sc, seed);
            let c = run(&sc, "competing", seed);
            let s = run(&sc, "single", seed);
            assert!(c.ordering_violations > 10, "competing reorders here");
            assert_eq!(g.ordering_violations, 0, "seed {seed}");
            assert_eq!(g.final_state_mismatches, 0);
            assert_eq!(g.applied, 3000);
            assert_eq!(g.coverage.reassignments, 0, "no owner ever changes");
            assert!(
                g.throughput_per_s > 0.97 * c.throughput_per_s,
                "{} vs competing {}",
                g.throughput_per_s,
                c.throughput_per_s
            );
            assert!(g.throughput_per_s > 3.5 * s.throughput_per_s);
            assert!(g.latency_ms.p99 < 300.0, "{}", g.latency_ms.p99);
        }
    }

    /// Weakness (an operator's `removeAllMessageGroups`, the `reset_groups` fault):
    /// `scenarios/group-reset.toml` resets the groups three times while each owner holds up to
    /// 10 prefetched messages. The next message of a group goes to whichever consumer the broker
    /// picks for a new group; when that is another, quicker consumer it applies seq n+1 while the
    /// old owner still holds n. Without the faults the same runs keep every key in order and no
    /// owner ever changes.
    #[test]
    fn reset_groups_reorders_groups_held_in_prefetch() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/group-reset.toml");
        let sc = scenario(&std::fs::read_to_string(path).unwrap());
        let mut calm = sc.clone();
        calm.faults.clear();
        for seed in 1..=3 {
            let m = groups_run(&sc, seed);
            assert!(m.ordering_violations >= 1, "seed {seed}");
            assert!(m.coverage.reassignments > 0, "the resets move groups");
            assert_eq!((m.lost, m.applied), (0, 20_000));
            let c = groups_run(&calm, seed);
            assert_eq!(c.ordering_violations, 0, "seed {seed}");
            assert_eq!(c.coverage.reassignments, 0);
        }
    }

    /// Weakness ([ActiveMQ+Camel]): group ownership is per broker. In `scenarios/failover.toml`
    /// broker `a` dies at 30s holding persisted messages its consumers had not acked; producers
    /// fail over to `b`, which has never seen the groups and assigns them to its own consumers,
    /// which apply the newer messages. When `a` returns 45s later its consumers are on `b`, so it
    /// forwards the stranded messages over the bridge and `b` hands them to the groups' current
    /// owners: applied after newer messages of their keys. Two kinds are stranded: the message each
    /// of `a`'s consumers had in hand (applied at the crash, its ack lost: applied again 45s later,
    /// a duplicate and a violation), and messages prefetched but not started (the [ActiveMQ+Camel]
    /// post's m1: first applied 45s late). The load is light (45% per consumer), so few messages
    /// are in flight at the crash: a few violations per seed, and none for some seeds (2 and 5
    /// here: nothing was in flight at `a`'s consumers at that instant; forwards already on the
    /// wire to `b` arrive) -- "most of the time, things works fine", as the post says. Nothing is
    /// lost: the store is persistent.
    #[test]
    fn broker_failover_in_a_network_of_brokers_breaks_order() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/failover.toml");
        let sc = scenario(&std::fs::read_to_string(path).unwrap());
        let (mut seeds_with_violations, mut stranded_first_apply) = (0, false);
        for seed in 1..=5 {
            let m = groups_run(&sc, seed);
            assert_eq!(m.coverage.broker_crashes, 1);
            assert!(
                m.coverage.failovers >= 4,
                "producers and consumers fail over"
            );
            assert!(m.coverage.forwards > 0, "a forwards its store to b");
            assert_eq!(m.lost, 0);
            assert_eq!(m.applied, m.produced);
            if m.ordering_violations > 0 {
                seeds_with_violations += 1;
            }
            stranded_first_apply |= m.latency_ms.max >= 45_000.0;
        }
        assert_eq!(seeds_with_violations, 3, "seeds 1, 3 and 4");
        assert!(
            stranded_first_apply,
            "some message waits out the crash in a's store and is first applied after newer ones"
        );
    }

    /// Weakness: producers the team does not control send no JMSXGroupID. Those messages are
    /// dispatched like competing consumers' (to whichever consumer is least loaded with groups
    /// and has room), so consecutive messages of a key run on different consumers and overtake
    /// each other; the same scenario with every header set keeps order.
    #[test]
    fn messages_without_the_header_are_reordered() {
        let missing = groups(8, 400, "group_header_missing = 0.3", "");
        let all_set = groups(8, 400, "group_header_missing = 0.0", "");
        for seed in 1..=3 {
            let m = groups_run(&missing, seed);
            assert!(m.ordering_violations > 20, "seed {seed}: {m:?}");
            assert_eq!(m.applied, 3000);
            assert_eq!(groups_run(&all_set, seed).ordering_violations, 0);
        }
    }

    /// Weakness: the group map is an LRU (`CachedMessageGroupMap`); "if there are more groups than
    /// the maximum, ordering will be lost for the oldest groups". With 50 live groups and room for
    /// 8, a group's entry is usually evicted (8 other groups were used since) before its next
    /// message comes, which then goes to a new owner (the least loaded consumer) while the old
    /// owner may still be processing its predecessor; at a hot load (600/s, 75% utilization, so
    /// queues form) the new owner often finishes first. The unbounded map keeps order on the same
    /// runs, and so does the default 1024 (more than the 50 groups).
    #[test]
    fn a_group_map_smaller_than_the_live_groups_loses_order() {
        let lru = groups(8, 600, "", "[strategy.message_groups]\nmax_groups = 8\n");
        let unbounded = groups(8, 600, "", "[strategy.message_groups]\nmax_groups = 0\n");
        let default = groups(8, 600, "", "");
        for seed in 1..=3 {
            let m = groups_run(&lru, seed);
            assert!(m.ordering_violations > 10, "seed {seed}: {m:?}");
            assert!(
                m.coverage.reassignments > 1000,
                "evicted groups get new owners"
            );
            assert_eq!(m.applied, 3000);
            for sc in [&unbounded, &default] {
                let m = groups_run(sc, seed);
                assert_eq!(m.ordering_violations, 0, "seed {seed}");
                assert_eq!(m.coverage.reassignments, 0);
            }
        }
    }

    /// Declared hazard (`max_groups` below the number of keys): with no fault at all, an LRU map
    /// of 8 groups for 50 keys reorders, and the run's parameters carry the warning; the default
    /// (1024) neither reorders nor warns.
    #[test]
    fn hazard_a_group_map_smaller_than_the_keys_reorders_without_faults() {
        let lru = groups(8, 600, "", "[strategy.message_groups]\nmax_groups = 8\n");
        let default = groups(8, 600, "", "");
        assert!(lru.faults.is_empty() && default.faults.is_empty());
        let bad = crate::test_util::summary(&lru, "message_groups", 1);
        assert!(bad.metrics.as_ref().unwrap().ordering_violations > 0);
        assert!(crate::test_util::warning(&bad, "max_groups").is_some());
        let good = crate::test_util::summary(&default, "message_groups", 1);
        assert_eq!(good.metrics.unwrap().ordering_violations, 0);
        assert!(good.params.0.iter().all(|p| p.warning.is_none()));
    }

    /// A consumer crash during a DB outage: the broker forgets the crashed consumer's groups, its
    /// unacked messages go back to the head of the queue, and each group gets a new owner at its
    /// next dispatch (`reassignments`), which receives the returned messages first, in order.
    /// With blocking redelivery (ActiveMQ Classic's default) a failed message stays in its
    /// owner's session ahead of the rest of its group, so order survives both faults. With
    /// non-blocking redelivery the owner does not change, but the failed message waits at the
    /// broker while the owner takes the next messages of its group: they overtake it.
    #[test]
    fn consumer_crash_reassigns_groups_and_blocking_redelivery_keeps_order() {
        let faults = |mode: &str, crash: bool| {
            let mut f = format!(
                "[redelivery]\nmode = \"{mode}\"\n[[fault]]\nkind = \"db_outage\"\nat = \"2s\"\nfor = \"3s\"\n"
            );
            if crash {
                f.push_str("[[fault]]\nkind = \"consumer_crash\"\nconsumer = 2\nat = \"3s\"\nfor = \"2s\"\n");
            }
            groups(8, 400, "", &f)
        };
        for seed in 1..=3 {
            let m = groups_run(&faults("blocking", true), seed);
            assert_eq!(m.coverage.consumer_crashes, 1);
            assert!(m.coverage.rollbacks > 0);
            assert!(
                m.coverage.reassignments > 0,
                "the crashed consumer's groups move"
            );
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.final_state_mismatches, 0);
            assert_eq!(m.applied, 3000);
            let no_crash = groups_run(&faults("blocking", false), seed);
            assert_eq!(
                no_crash.coverage.reassignments, 0,
                "an outage moves no group"
            );
            assert_eq!(no_crash.ordering_violations, 0);
            let nb = groups_run(&faults("non_blocking", true), seed);
            assert!(nb.ordering_violations > 0, "seed {seed}");
        }
    }

    /// `consumersBeforeDispatchStarts`: with 4 consumers and a count of 8 that is never reached,
    /// the broker dispatches nothing for the default 1s after the first consumer attached (the
    /// messages produced in that second wait); a count of 4 is reached at once (every consumer
    /// attaches at time 0); `timeBeforeDispatchStarts` alone waits its own time.
    #[test]
    fn dispatch_waits_for_consumers_or_time() {
        let gate = |p: &str| {
            let m = groups_run(
                &groups(4, 200, "", &format!("[strategy.message_groups]\n{p}\n")),
                1,
            );
            assert_eq!(m.applied, 3000);
            assert_eq!(m.ordering_violations, 0);
            m.latency_ms.max
        };
        let never_reached = gate("consumers_before_dispatch = 8");
        assert!((950.0..1200.0).contains(&never_reached), "{never_reached}");
        assert!(gate("consumers_before_dispatch = 4") < 500.0);
        let three = gate("consumers_before_dispatch = 8\ntime_before_dispatch = \"3s\"");
        assert!((2950.0..3200.0).contains(&three), "{three}");
        let time_only = gate("time_before_dispatch = \"3s\"");
        assert!((2950.0..3200.0).contains(&time_only), "{time_only}");
    }

    // --- Direct tests of the map and the gate: `select` and the hooks with hand-built contexts.

    use super::{MessageGroups, MessageGroupsParams, NIL};
    use sim::strategy::{ConsumerSlot, Control, DispatchCtx, MsgView, Select, Strategy};
    use sim::time::{Dur, Time, SECOND};

    /// One broker (two for `brokers = 2`), consumers 0..4, groups 0..8.
    fn map(max_groups: u32) -> MessageGroups {
        gated(max_groups, 0, Dur::ZERO)
    }

    fn gated(max_groups: u32, before: u32, time: Dur) -> MessageGroups {
        MessageGroups::new(
            2,
            4,
            8,
            MessageGroupsParams {
                max_groups,
                consumers_before_dispatch: before,
                time_before_dispatch: time,
            },
        )
    }

    /// Consumers `ids` attached to broker 0 at time 0, in that order.
    fn attached(mut s: MessageGroups, ids: &[u32]) -> MessageGroups {
        for &c in ids {
            s.on_attach(0, 0, c, &mut Control::default());
        }
        s
    }

    fn msg(group: Option<u32>) -> MsgView {
        MsgView {
            id: 0,
            key: group.unwrap_or(0),
            seq: 0,
            timestamp: 0,
            producer: 0,
            redeliveries: 0,
            group,
        }
    }

    /// `select` at broker 0 with `slots` (consumer id, free prefetch): the consumer id chosen,
    /// or the `Select` when none.
    fn pick_at(
        s: &mut MessageGroups,
        now: Time,
        slots: &[(u32, u32)],
        group: Option<u32>,
        ctl: &mut Control,
    ) -> Result<u32, Select> {
        crate::test_util::select_at(s, now, slots, &msg(group), ctl)
    }

    /// A group's message dispatched now, with consumers 0 and 1 both free.
    fn send(s: &mut MessageGroups, g: u32, ctl: &mut Control) -> u32 {
        pick_at(s, 0, &[(0, 5), (1, 5)], Some(g), ctl).expect("dispatched")
    }

    fn owner(s: &MessageGroups, g: u32) -> Option<u32> {
        Some(s.brokers[0].owner[g as usize]).filter(|&c| c != NIL)
    }

    #[test]
    fn the_default_map_holds_1024_groups() {
        // ActiveMQ's CachedMessageGroupMap default, whether the table is absent or empty.
        assert_eq!(MessageGroupsParams::default().max_groups, 1024);
        let p: MessageGroupsParams = toml::from_str("").unwrap();
        assert_eq!(p.max_groups, 1024);
    }

    #[test]
    fn a_new_group_goes_to_the_consumer_with_fewest_groups_then_least_recently_used() {
        // Consumers 0 and 1 attach in that order; group 0 goes to 0 (first in rotation), group 1
        // to 1 (fewer groups), group 2 to 0 (as many groups, dispatched to longer ago).
        let mut s = attached(map(0), &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 0);
        assert_eq!(send(&mut s, 1, ctl), 1);
        assert_eq!(send(&mut s, 0, ctl), 0, "sticky");
        assert_eq!(
            send(&mut s, 2, ctl),
            1,
            "1 was dispatched to before 0's last"
        );
        // A message without the header goes like a new group's, and owns nothing.
        assert_eq!(pick_at(&mut s, 0, &[(0, 5), (1, 5)], None, ctl), Ok(0));
        assert_eq!(
            ctl.reassignments(),
            vec![],
            "first assignments are not owner changes"
        );
    }

    /// `reset_groups` (`MessageGroupMap.removeAll`): every group of the broker loses its owner,
    /// the next message of a group is assigned as a new group's, a new owner other than the old
    /// is recorded, and dispatch is asked to look again. The default `CachedMessageGroupMap`
    /// also clears the consumers' group counts; `SimpleMessageGroupMap` (`max_groups = 0`) does
    /// not, so the stale counts still steer new groups. Another broker's groups stay.
    #[test]
    fn a_reset_forgets_every_owner_and_only_the_cached_map_its_counts() {
        for (max_groups, new_group_to) in [(1024, 0), (0, 1)] {
            let mut s = attached(map(max_groups), &[0, 1]);
            s.on_attach(0, 1, 2, &mut Control::default());
            let ctl = &mut Control::default();
            assert_eq!(send(&mut s, 0, ctl), 0);
            assert_eq!(send(&mut s, 1, ctl), 1);
            assert_eq!(
                send(&mut s, 2, ctl),
                0,
                "as many groups, 0 dispatched to longer ago"
            );
            assert_eq!(send(&mut s, 1, ctl), 1, "sticky: 1 is now the most recent");
            s.brokers[1].owner[3] = 2;
            s.brokers[1].len = 1;
            s.on_world(5, WorldChange::GroupsReset(0), ctl);
            assert!(ctl.redispatch_requested(), "held groups may move now");
            assert_eq!((0..3).map(|g| owner(&s, g)).collect::<Vec<_>>(), [None; 3]);
            assert_eq!(s.brokers[1].owner[3], 2, "broker 1 was not reset");
            // Group 5 is new: fewest groups (cached: 0 and 0, so the least recent, 0; simple:
            // 2 and 1 still counted, so 1).
            assert_eq!(
                send(&mut s, 5, ctl),
                new_group_to,
                "max_groups {max_groups}"
            );
            assert_eq!(
                ctl.reassignments(),
                vec![],
                "a never-owned group is no change"
            );
            // Group 0's next message goes to a consumer other than its old owner 0: recorded.
            let to = send(&mut s, 0, ctl);
            assert_eq!(to, 1 - new_group_to);
            assert_eq!(
                ctl.reassignments(),
                if to == 0 { vec![] } else { vec![(0, to)] }
            );
        }
    }

    #[test]
    fn a_full_owner_holds_its_group_and_nobody_free_stops_the_scan() {
        let mut s = attached(map(0), &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 0);
        // The owner is full: the message waits (later groups may pass), not given to 1; asking
        // again changes nothing until the owner has room (the broker may skip it).
        assert_eq!(
            pick_at(&mut s, 0, &[(0, 0), (1, 5)], Some(0), ctl),
            Err(Select::HoldFor(0))
        );
        // A map that can overflow refreshes a group's LRU place on each lookup: no promise.
        let mut lru = attached(map(4), &[0, 1]);
        assert_eq!(send(&mut lru, 0, ctl), 0);
        assert_eq!(
            pick_at(&mut lru, 0, &[(0, 0), (1, 5)], Some(0), ctl),
            Err(Select::Hold)
        );
        // A consumer without room takes no new group; with no room anywhere the scan stops.
        assert_eq!(pick_at(&mut s, 0, &[(0, 0), (1, 5)], Some(3), ctl), Ok(1));
        assert_eq!(
            pick_at(&mut s, 0, &[(0, 0), (1, 0)], Some(4), ctl),
            Err(Select::Stop)
        );
        assert_eq!(
            pick_at(&mut s, 0, &[(0, 0), (1, 0)], None, ctl),
            Err(Select::Stop)
        );
    }

    #[test]
    fn consumers_are_considered_in_the_order_they_attached() {
        // 1 attached before 0: with as many groups, it is considered first.
        let mut s = attached(map(0), &[1, 0]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 1);
        assert_eq!(send(&mut s, 1, ctl), 0);
    }

    #[test]
    fn an_evicted_group_no_longer_counts_for_its_owner() {
        // A map of 1. Group 0 goes to 0; group 1 to 1 (fewer groups), evicting group 0, so 0
        // owns none. A message without the header then goes to 0 (fewer groups), which makes
        // 0 the most recently used; still, group 2 goes to 0, which owns fewer groups than 1.
        let mut s = attached(map(1), &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 0);
        assert_eq!(send(&mut s, 1, ctl), 1);
        assert_eq!(pick_at(&mut s, 0, &[(0, 5), (1, 5)], None, ctl), Ok(0));
        assert_eq!(send(&mut s, 2, ctl), 0);
    }

    #[test]
    fn a_lookup_keeps_a_group_from_eviction() {
        // An access-ordered LRU of 2 groups, not first-in-first-out: group 0 is looked up after
        // group 1 was inserted, so inserting group 2 evicts group 1.
        let mut s = attached(map(2), &[0, 1]);
        let ctl = &mut Control::default();
        send(&mut s, 0, ctl);
        send(&mut s, 1, ctl);
        send(&mut s, 0, ctl);
        send(&mut s, 2, ctl);
        assert!(owner(&s, 0).is_some(), "looked up: kept");
        assert_eq!(owner(&s, 1), None, "least recently used: evicted");
        assert!(owner(&s, 2).is_some());
        assert_eq!(s.brokers[0].len, 2);
    }

    #[test]
    fn an_evicted_group_returns_to_its_owner_without_an_owner_change() {
        // A map of 1 group, consumers 0 and 1. Group 1 (to 1) evicts group 0 (owned by 0), which
        // leaves 0 with no group, so group 0's next message goes back to 0: no owner change.
        // When 0 is then full, group 1 (evicted in turn) goes to 0: an owner change.
        let mut s = attached(map(1), &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 0);
        assert_eq!(send(&mut s, 1, ctl), 1);
        assert_eq!(owner(&s, 0), None);
        assert_eq!(send(&mut s, 0, ctl), 0, "0 has no group left");
        assert_eq!(ctl.reassignments(), vec![]);
        assert_eq!(pick_at(&mut s, 0, &[(0, 5), (1, 0)], Some(1), ctl), Ok(0));
        assert_eq!(ctl.reassignments(), vec![(0, 0)]);
        assert_eq!(s.brokers[0].len, 1);
    }

    #[test]
    fn a_consumer_leaving_frees_its_groups_places_in_the_map() {
        // A map of 2: groups 0 (to 0) and 1 (to 1). Consumer 1 leaves: one group left, so group
        // 2 fits without evicting group 0. Then group 3 evicts group 0 (the least recently used);
        // consumer 1 comes back, takes group 5 (evicting group 2) and leaves again: group 6 fits
        // without evicting group 3.
        let mut s = attached(map(2), &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 0);
        assert_eq!(send(&mut s, 1, ctl), 1);
        s.on_detach(0, 0, 1, ctl);
        assert_eq!((owner(&s, 1), s.brokers[0].len), (None, 1));
        assert_eq!(pick_at(&mut s, 0, &[(0, 5)], Some(2), ctl), Ok(0));
        assert_eq!(owner(&s, 0), Some(0), "room for group 2 without evicting");
        assert_eq!(pick_at(&mut s, 0, &[(0, 5)], Some(3), ctl), Ok(0));
        assert_eq!(owner(&s, 0), None, "group 0 evicted");
        assert_eq!(s.brokers[0].len, 2);
        s.on_attach(0, 0, 1, ctl);
        assert_eq!(pick_at(&mut s, 0, &[(0, 5), (1, 5)], Some(5), ctl), Ok(1));
        assert_eq!(owner(&s, 2), None, "group 5 evicted group 2");
        s.on_detach(0, 0, 1, ctl);
        assert_eq!(s.brokers[0].len, 1);
        assert_eq!(pick_at(&mut s, 0, &[(0, 5)], Some(6), ctl), Ok(0));
        assert_eq!(owner(&s, 3), Some(0), "room for group 6 without evicting");
    }

    #[test]
    fn a_group_whose_evicted_owner_left_gets_a_recorded_new_owner() {
        // Group 0 is evicted from consumer 0, which then leaves and comes back (a new JMS
        // consumer with the same index): giving it group 0 again is an owner change.
        let mut s = attached(map(1), &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, ctl), 0);
        assert_eq!(send(&mut s, 1, ctl), 1);
        s.on_detach(0, 0, 0, ctl);
        s.on_attach(0, 0, 0, ctl);
        assert_eq!(pick_at(&mut s, 0, &[(0, 5), (1, 0)], Some(0), ctl), Ok(0));
        assert_eq!(ctl.reassignments(), vec![(0, 0)]);
    }

    #[test]
    fn an_unbounded_map_never_evicts() {
        let mut s = attached(map(0), &[0, 1]);
        let ctl = &mut Control::default();
        for g in 0..8 {
            send(&mut s, g, ctl);
        }
        for g in 0..8 {
            assert!(owner(&s, g).is_some(), "group {g}");
        }
        assert_eq!(s.brokers[0].len, 8);
    }

    #[test]
    fn dispatch_waits_until_enough_consumers_attach() {
        // consumers_before_dispatch = 2: the first consumer arms the gate (and a 1s timer, the
        // default wait); the second opens it.
        let mut s = gated(0, 2, Dur::ZERO);
        let ctl = &mut Control::default();
        s.on_attach(5, 0, 0, ctl);
        assert_eq!(ctl.wakes(), vec![(5 + SECOND, 0)]);
        assert_eq!(pick_at(&mut s, 5, &[(0, 5)], None, ctl), Err(Select::Stop));
        s.on_attach(6, 0, 1, ctl);
        assert_eq!(pick_at(&mut s, 6, &[(0, 5), (1, 5)], None, ctl), Ok(0));
        // Once open, it stays open as consumers come and go, until the broker has none.
        s.on_attach(7, 0, 2, ctl);
        s.on_detach(8, 0, 2, ctl);
        assert_eq!(pick_at(&mut s, 8, &[(0, 5), (1, 5)], None, ctl), Ok(1));
        s.on_detach(9, 0, 0, ctl);
        s.on_detach(9, 0, 1, ctl);
        s.on_attach(10, 0, 3, ctl);
        assert_eq!(pick_at(&mut s, 10, &[(3, 5)], None, ctl), Err(Select::Stop));
        assert_eq!(ctl.wakes(), vec![(5 + SECOND, 0), (10 + SECOND, 0)]);
    }

    #[test]
    fn the_gate_opens_when_its_time_is_up_and_the_timer_redispatches() {
        // consumers_before_dispatch = 3 never reached: the gate opens 1s after the first attach,
        // at the timer's instant, not before; the timer's token is the broker (here broker 1).
        let mut s = gated(0, 3, Dur::ZERO);
        let ctl = &mut Control::default();
        s.on_attach(5, 1, 0, ctl);
        s.on_attach(5, 1, 1, ctl);
        assert_eq!(ctl.wakes(), vec![(5 + SECOND, 1)]);
        let at = |s: &mut MessageGroups, now: Time| {
            let slots = [ConsumerSlot { id: 0, free: 5 }];
            let ctx = DispatchCtx {
                now,
                broker: 1,
                consumers: &slots,
            };
            s.select(&ctx, &msg(Some(0)), &mut Control::default())
        };
        assert_eq!(at(&mut s, 5 + SECOND - 1), Select::Stop);
        assert!(!ctl.redispatch_requested());
        s.on_wake(5 + SECOND, 1, ctl);
        assert!(ctl.redispatch_requested());
        assert_eq!(at(&mut s, 5 + SECOND), Select::Consumer(0));
        // Broker 0 has no gate armed.
        assert_eq!(pick_at(&mut s, 0, &[(2, 5)], None, ctl), Ok(2));
    }

    #[test]
    fn a_time_alone_gate_waits_its_time_whatever_attaches() {
        // time_before_dispatch = 3s without a count: more consumers do not open it.
        let mut s = gated(0, 0, Dur::from_secs(3));
        let ctl = &mut Control::default();
        for c in 0..4 {
            s.on_attach(0, 0, c, ctl);
        }
        assert_eq!(ctl.wakes(), vec![(3 * SECOND, 0)]);
        assert_eq!(
            pick_at(&mut s, 3 * SECOND - 1, &[(0, 5)], None, ctl),
            Err(Select::Stop)
        );
        assert_eq!(pick_at(&mut s, 3 * SECOND, &[(0, 5)], None, ctl), Ok(0));
    }

    #[test]
    fn a_count_of_one_or_none_never_waits() {
        for before in [0, 1] {
            let mut s = gated(0, before, Dur::ZERO);
            let ctl = &mut Control::default();
            s.on_attach(0, 0, 0, ctl);
            assert_eq!(ctl.wakes(), vec![], "count {before}");
            assert_eq!(pick_at(&mut s, 0, &[(0, 5)], None, ctl), Ok(0));
        }
        // With a time as well, a count of 1 is reached by the first consumer.
        let mut s = gated(0, 1, Dur::from_secs(3));
        s.on_attach(0, 0, 0, &mut Control::default());
        assert_eq!(
            pick_at(&mut s, 0, &[(0, 5)], None, &mut Control::default()),
            Ok(0)
        );
    }

    #[test]
    fn the_hazard_is_a_bounded_map_smaller_than_the_keys() {
        // 50 keys: 1 ..= 49 groups warn; 0 (unbounded) and 50 or more do not.
        let sc = crate::test_util::simple("\"message_groups\"", 2, 100, "");
        let hazard = <MessageGroups as crate::Named>::PARAMS[0].hazard.unwrap();
        let warns = |v: &str| (hazard.applies)(v, &sc);
        assert_eq!(
            ["0", "1", "49", "50", "1024"].map(warns),
            [false, true, true, false, false]
        );
    }

    #[test]
    fn unknown_parameters_are_rejected() {
        let text = "strategies = [\"message_groups\"]\n[workload]\nmessages = 1\nrate = \"1/s\"\nkeys = 1\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"\n[strategy.message_groups]\nmax_group = 3\n";
        let err = sim::scenario::load_str("t.toml", text, &crate::validate).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `max_group`"),
            "{err}"
        );
    }
    /// Forwards everything to a strategy, counting its `select` calls; with `plain`, its promises
    /// ([`Select::HoldFor`], [`Select::HoldWhileMembers`]) become plain holds, so the broker asks
    /// about every message it passes.
    struct Counted {
        inner: Box<dyn Strategy>,
        plain: bool,
        asked: u64,
    }

    impl Handler for Counted {
        fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Begin {
            self.inner.begin(ctx, msg, ctl)
        }
        fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Outcome {
            self.inner.handle(ctx, msg, ctl)
        }
        fn abandon(&mut self, now: Time, consumer: u32, msg: &MsgView, ctl: &mut Control) {
            self.inner.abandon(now, consumer, msg, ctl)
        }
    }

    impl Strategy for Counted {
        fn hooks(&self) -> Hooks {
            self.inner.hooks()
        }
        fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
            self.asked += 1;
            match self.inner.select(ctx, msg, ctl) {
                Select::HoldFor(_) | Select::HoldWhileMembers if self.plain => Select::Hold,
                s => s,
            }
        }
        fn route(&mut self, ctx: &RouteCtx, msg: &MsgView) -> Route {
            self.inner.route(ctx, msg)
        }
        fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
            self.inner.on_attach(now, broker, consumer, ctl)
        }
        fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
            self.inner.on_detach(now, broker, consumer, ctl)
        }
        fn on_returned(&mut self, now: Time, broker: u16, msg: &MsgView, ctl: &mut Control) {
            self.inner.on_returned(now, broker, msg, ctl)
        }
        fn on_handled(
            &mut self,
            now: Time,
            consumer: u32,
            msg: &MsgView,
            outcome: &Outcome,
            ctl: &mut Control,
        ) {
            self.inner.on_handled(now, consumer, msg, outcome, ctl)
        }
        fn on_settled(&mut self, now: Time, msg: &MsgView, ctl: &mut Control) {
            self.inner.on_settled(now, msg, ctl)
        }
        fn on_wake(&mut self, now: Time, token: u64, ctl: &mut Control) {
            self.inner.on_wake(now, token, ctl)
        }
        fn on_world(&mut self, now: Time, change: WorldChange, ctl: &mut Control) {
            self.inner.on_world(now, change, ctl)
        }
    }

    struct Events(Vec<String>);

    impl Observer for Events {
        fn event(&mut self, e: &Event) {
            self.0.push(format!("{e:?}"));
        }
    }

    /// The history of message groups on `sc` with `seed`, and how many times it was asked.
    fn asked_history(sc: &Scenario, seed: u64, plain: bool) -> (Vec<String>, u64) {
        let (built, _) = crate::build_named("message_groups", sc).expect("known");
        let mut s = Counted {
            inner: built.expect("builds"),
            plain,
            asked: 0,
        };
        let mut events = Events(Vec::new());
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        sim::run(
            sc,
            &FaultPlan::resolve(sc, seed),
            &mut s,
            &opts,
            Some(&mut events),
        )
        .expect("runs");
        (events.0, s.asked)
    }

    /// The broker skips a message whose owner is full without asking again, and that changes
    /// nothing: the same history as asking about every message, on one broker and on a network
    /// of brokers (messages that crossed a bridge wait for an owner they are not offered to),
    /// under pauses, slow consumers, crashes, failovers and rollbacks (database outages), at a
    /// fraction of the questions.
    #[test]
    fn held_messages_are_skipped_without_changing_the_history() {
        for brokers in [1, 2] {
            let network = if brokers == 2 {
                "[[broker]]\nname = \"b\"\n[network]\nkind = \"bridge\"\n[producers]\ncount = 2\nbrokers = [\"a\", \"b\"]\nconnect = \"first\"\nreconnect_delay = \"200ms\""
            } else {
                ""
            };
            let sc = groups(
                4,
                300,
                "",
                &format!(
                    r#"prefetch = 10
connect = "spread"
reconnect_delay = "500ms"
{network}
[[fault]]
kind = "consumer_pause"
rate = "6/min"
for = {{ dist = "exponential", mean = "2s" }}
[[fault]]
kind = "slow_consumer"
rate = "6/min"
factor = 8.0
for = {{ dist = "exponential", mean = "2s" }}
[[fault]]
kind = "consumer_crash"
rate = "3/min"
for = "1s"
[[fault]]
kind = "broker_crash"
broker = "a"
rate = "2/min"
for = "2s"
[[fault]]
kind = "db_outage"
rate = "4/min"
for = {{ dist = "exponential", mean = "1s" }}
[redelivery]
mode = "non_blocking"
initial_delay = "50ms"
"#
                ),
            );
            for seed in 1..=3 {
                let (skipping, asked) = asked_history(&sc, seed, false);
                let (asking, asked_all) = asked_history(&sc, seed, true);
                assert!(skipping.len() > 3000, "{brokers} broker(s), seed {seed}");
                assert!(
                    skipping == asking,
                    "{brokers} broker(s), seed {seed}: the histories differ"
                );
                assert!(
                    asked * 2 < asked_all,
                    "{brokers} broker(s), seed {seed}: asked {asked} times, {asked_all} without skipping"
                );
            }
        }
    }
}
