//! `artemis_groups`: ActiveMQ Artemis message grouping (`JMSXGroupID` / `_AMQ_GROUP_ID`).
//!
//! What it models, from Artemis's own code (`QueueImpl.deliver`, `getGroupConsumer`,
//! `handleMessageGroup`, `addConsumer`, `removeConsumer`, `canDispatch`; `BucketMessageGroups`;
//! `SimpleString.hashCode`) and its documentation (A7 in docs/sources.md):
//!
//! - **Sticky owner, per queue.** A message of a group without an owner goes to the consumer the
//!   queue's round-robin is at (skipping consumers without credit), which becomes the group's
//!   owner; the round-robin moves on. A message of an owned group goes to its owner and the
//!   round-robin stays where it was (`consumers.repeat()`).
//! - **A busy owner stops the queue.** When the owner has no credit (its prefetch window is full),
//!   `deliver()` breaks out of its loop: no later message of any group, nor an ungrouped one, is
//!   dispatched until the owner takes more ([`Select::Stop`]). ActiveMQ Classic holds the message
//!   and lets other groups pass; Artemis does not ("groups block non-grouped messages behind
//!   them").
//! - **Consumer removal** (close, crash, network blip, its broker's crash): `groups.removeIf` the
//!   consumer; its delivered, unacknowledged messages are already back at the head of the queue.
//! - **`group-rebalance`** (default false): when a consumer is added every group loses its owner
//!   (`groups.removeAll()`), so the next message of a group may go to another consumer while its
//!   previous owner still holds earlier ones: "a message to the originally associated consumer
//!   could be in flight at the same time a new message for the same group is dispatched to the
//!   new … consumer". With **`group-rebalance-pause-dispatch`** (default false) the queue stops
//!   dispatching and starts again only when no consumer has a delivered, unacknowledged message
//!   (`canDispatch` / `inFlightMessages`): order kept, at the price of a stall.
//! - **Operator reset** (the `reset_groups` fault: `QueueControl.resetAllGroups` ->
//!   `QueueImpl.resetAllGroups`, `groups.removeAll()`): every group loses its owner, as with a
//!   rebalance, but dispatch does not pause even with `group-rebalance-pause-dispatch` (only
//!   `addConsumer` stops it). Nothing is recalled: the old owner keeps what it was delivered.
//! - **`group-buckets`** (default -1: every group tracked): with N > 0 a group id is hashed into
//!   one of N buckets (`(SimpleString.hashCode() & Integer.MAX_VALUE) % N`, the hash of the id's
//!   UTF-16LE bytes, Java's `31 * h + b`), and a bucket has one owner: several groups share an
//!   owner (less parallelism, no loss of order). 0 disables grouping: plain competing consumers.
//!   The group id is the message's key in decimal, as a JMS producer's `setStringProperty` would
//!   carry it.
//!
//! - **Clustered grouping** (`grouping_handler`: the broker whose grouping handler is LOCAL; the
//!   others' are REMOTE; A18 in docs/sources.md: `LocalGroupingHandler`, `RemoteGroupingHandler`,
//!   `BindingsImpl.routeUsingStrictOrdering`). A group's first send is proposed to the LOCAL
//!   handler: the first proposal wins and binds the group to the receiving node's queue (the
//!   producer's connected broker: "use a local queue first"); the answer is broadcast to every
//!   node up and cached there, so every later send of the group goes to that node
//!   ([`Route::Stored`]: to a node that is down too, as the receiving node's store-and-forward
//!   queue keeps it; a crash only disconnects bindings, so no group moves). The LOCAL map is
//!   journaled (kept through its node's crash); a REMOTE cache is memory (lost in its crash).
//!   While the LOCAL node is down, a send of a group the receiving node does not know is held
//!   ([`Route::Wait`]) one `grouping_handler_timeout` per proposal, 11 proposals (the first and
//!   `MAX_GROUP_RETRY` 10), then routed to the connected broker without grouping information,
//!   the group still unbound (AMQ222209); no exception reaches the sender, whatever the
//!   documentation says. Groups the node knows go on. Simplifications: a proposal made while
//!   the LOCAL node is down is answered at the next proposal after it is back (the broker's
//!   `resendPending` may answer sooner); `group-timeout` (-1: never) and the reaper are not
//!   modelled. How long a send has been held is the engine's (`RouteCtx::held_since`): the
//!   client's `callTimeout` (`[producers] call_timeout`, 30 s) may end the producer's wait
//!   first, while the broker goes on holding the send (A20).
//!
//! What it does not model: consumer priorities, exclusive queues (`single` is that), `group-first-key`
//! (a header only), `JMSXGroupSeq = -1` closing a group (producers here never close groups),
//! and `consumers-before-dispatch` / `delay-before-dispatch`.
//!
//! The handler is the plain one. Redelivery is the engine's, on the `artemis` flavour non-blocking
//! with no delay: a rolled-back message goes back to the head of the queue and to its owner again;
//! with a `redelivery-delay` it is scheduled and the owner takes the next messages of its group
//! first.
//!
//! Parameters (`[strategy.artemis_groups]`): `group_rebalance` (false),
//! `group_rebalance_pause_dispatch` (false), `group_buckets` (-1), `grouping_handler` (none),
//! `grouping_handler_timeout` (5s).

use serde::{Deserialize, Serialize};
use sim::strategy::{
    Control, DispatchCtx, Handler, MsgView, Route, RouteCtx, Select, Strategy, WorldChange,
};
use sim::time::{Dur, Time};

/// `[strategy.artemis_groups]` parameters (Artemis address-settings).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ArtemisGroupsParams {
    /// `group-rebalance`: every group loses its owner when a consumer is added.
    #[serde(default)]
    pub group_rebalance: bool,
    /// `group-rebalance-pause-dispatch`: after such a rebalance, dispatch waits until no
    /// consumer holds an unacknowledged delivery.
    #[serde(default)]
    pub group_rebalance_pause_dispatch: bool,
    /// `group-buckets`: -1 tracks every group, 0 disables grouping, N hashes groups into N
    /// buckets that each have one owner.
    #[serde(default = "default_buckets")]
    pub group_buckets: i32,
    /// Clustered grouping: the broker whose grouping handler is `LOCAL` (the arbiter); every
    /// other broker's is `REMOTE`. Absent: no grouping handler (each broker's queue groups on
    /// its own, sends go to the connected broker).
    #[serde(default, serialize_with = "no_handler")]
    pub grouping_handler: Option<String>,
    /// The grouping handler's `timeout`: how long a REMOTE handler waits for the LOCAL one's
    /// answer to a proposal (Artemis default 5000 ms).
    #[serde(default = "default_handler_timeout")]
    pub grouping_handler_timeout: Dur,
}

fn default_buckets() -> i32 {
    -1
}

fn default_handler_timeout() -> Dur {
    Dur::from_millis(5000)
}

/// Shows an unset `grouping_handler` as what it means.
fn no_handler<S: serde::Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_deref().unwrap_or("(none)"))
}

/// Proposals a send of a group without a binding makes before the broker routes it without
/// grouping information: the first and `BindingsImpl.MAX_GROUP_RETRY` (10) more.
pub const PROPOSALS: u64 = 11;

/// No node.
const NO_NODE: u16 = u16::MAX;

/// An Artemis cluster's grouping handlers (`LocalGroupingHandler`, `RemoteGroupingHandler`,
/// `BindingsImpl.routeUsingStrictOrdering`).
#[derive(Debug)]
struct Cluster {
    /// The node whose handler is LOCAL.
    handler: u16,
    /// Its `timeout`.
    timeout: Time,
    /// The LOCAL handler's map, group id -> node whose queue has the group. Persistent (the
    /// journal's grouping records): kept through its node's crash. Bindings never expire
    /// (`group-timeout` -1, the default).
    bound: Vec<u16>,
    /// Per node, per group: whether its handler has the group's binding without asking (a
    /// REMOTE's cache of the proposal responses broadcast to it, in memory: lost in its crash).
    known: Vec<Vec<bool>>,
}

impl Cluster {
    /// Where a send of group `g` received by the producer's connected node goes.
    fn route(&mut self, ctx: &RouteCtx, g: usize) -> Route {
        let r = ctx.connected;
        let b = self.bound[g];
        // A binding the receiving node has (LocalGroupingHandler.getProposal's map, or
        // RemoteGroupingHandler's response cache): no arbiter needed. A node that is down keeps
        // its binding (the cluster bridge only disconnects it): the message waits in the
        // receiving node's store-and-forward queue until the node is back.
        if b != NO_NODE && (r == self.handler || self.known[r as usize][g]) {
            return Route::Stored(b);
        }
        if ctx.up[self.handler as usize] {
            // The LOCAL handler answers: the first proposal wins, and the receiving node proposes
            // its own queue (the docs: "use a local queue first"); the answer is broadcast to
            // every node up (PROPOSAL_RESPONSE -> RemoteGroupingHandler.proposed).
            let b = if b == NO_NODE {
                self.bound[g] = r;
                r
            } else {
                b
            };
            for (n, k) in self.known.iter_mut().enumerate() {
                if ctx.up[n] {
                    k[g] = true;
                }
            }
            return Route::Stored(b);
        }
        // No answer: each proposal waits `timeout` (RemoteGroupingHandler.propose returns null),
        // BindingsImpl retries MAX_GROUP_RETRY times, then routes the message without grouping
        // information (AMQ222209), the group still unbound. No exception reaches the sender from
        // the broker; its client's own `call_timeout` may give up first (the engine's part).
        let waited = ctx.now - ctx.held_since.unwrap_or(ctx.now);
        if waited >= PROPOSALS * self.timeout {
            return Route::Connected;
        }
        // The next proposal goes out when this one times out.
        Route::Wait((waited / self.timeout + 1) * self.timeout - waited)
    }
}

impl Default for ArtemisGroupsParams {
    fn default() -> Self {
        ArtemisGroupsParams {
            group_rebalance: false,
            group_rebalance_pause_dispatch: false,
            group_buckets: default_buckets(),
            grouping_handler: None,
            grouping_handler_timeout: default_handler_timeout(),
        }
    }
}

/// No owner / no consumer.
const NIL: u32 = u32::MAX;
/// `last_owner`: the group's owner was removed with its consumer.
const GONE: u32 = u32::MAX - 1;

/// One queue's (broker's) group map and round-robin position.
#[derive(Debug)]
struct Queue {
    /// Per group (or bucket): its owner, or NIL.
    owner: Vec<u32>,
    /// Per group without an owner: who owned it last (NIL: nobody yet; GONE: removed).
    last_owner: Vec<u32>,
    /// The consumer the round-robin considers next (NIL: the first attached).
    next: u32,
    /// Dispatch stopped by a paused rebalance, until nothing is in flight.
    paused: bool,
}

/// ActiveMQ Artemis message groups.
#[derive(Debug)]
pub struct ArtemisGroups {
    params: ArtemisGroupsParams,
    queues: Vec<Queue>,
    /// Per consumer: deliveries handed to it and not yet settled or returned (tracked only with
    /// `group_rebalance_pause_dispatch`).
    in_flight: Vec<u32>,
    /// Per consumer: incremented when it is removed, so a late settle of an earlier delivery
    /// does not count against its next session.
    epoch: Vec<u32>,
    /// Per message id: (consumer, epoch) it was delivered to, while in flight.
    holder: Vec<(u32, u32)>,
    /// Per broker: consumers attached there (for the in-flight sum).
    attached: Vec<Vec<u32>>,
    /// The cluster's grouping handlers (None: no `grouping_handler`).
    cluster: Option<Cluster>,
}

/// Java's `String.hashCode`-style hash over an Artemis `SimpleString`'s bytes: each UTF-16
/// code unit as its low then high byte, each byte signed.
pub fn simple_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        for b in [(unit & 0xff) as u8, (unit >> 8) as u8] {
            h = h.wrapping_mul(31).wrapping_add(b as i8 as i32);
        }
    }
    h
}

/// The bucket of group id `group` (the key in decimal) among `buckets`
/// (`BucketMessageGroups.getHashBucket`).
pub fn bucket_of(group: u32, buckets: u32) -> u32 {
    ((simple_string_hash(&group.to_string()) & i32::MAX) as u32) % buckets
}

impl ArtemisGroups {
    /// A new instance for `brokers` brokers, `consumers` consumer ids and `keys` group ids.
    pub fn new(brokers: usize, consumers: usize, keys: usize, params: ArtemisGroupsParams) -> Self {
        let slots = match params.group_buckets {
            n if n > 0 => n as usize,
            0 => 0,
            _ => keys,
        };
        ArtemisGroups {
            queues: (0..brokers)
                .map(|_| Queue {
                    owner: vec![NIL; slots],
                    last_owner: vec![NIL; slots],
                    next: NIL,
                    paused: false,
                })
                .collect(),
            in_flight: vec![0; consumers],
            epoch: vec![0; consumers],
            holder: Vec::new(),
            attached: vec![Vec::new(); brokers],
            cluster: None,
            params,
        }
    }

    /// With clustered grouping: `handler` is the node whose grouping handler is LOCAL, the
    /// others' are REMOTE; producers send `keys` group ids.
    pub fn with_grouping_handler(mut self, handler: u16, keys: usize) -> Self {
        let brokers = self.queues.len();
        self.cluster = Some(Cluster {
            handler,
            timeout: self.params.grouping_handler_timeout.micros().max(1),
            bound: vec![NO_NODE; keys],
            known: vec![vec![false; keys]; brokers],
        });
        self
    }

    /// The group-map slot of `msg` (None: ungrouped, or grouping disabled).
    fn slot(&self, msg: &MsgView) -> Option<usize> {
        let g = msg.group?;
        match self.params.group_buckets {
            0 => None,
            n if n > 0 => Some(bucket_of(g, n as u32) as usize),
            _ => Some(g as usize),
        }
    }

    fn tracks_in_flight(&self) -> bool {
        self.params.group_rebalance && self.params.group_rebalance_pause_dispatch
    }

    /// The round-robin's pick: the first consumer with credit from the queue's position on.
    fn round_robin(&self, ctx: &DispatchCtx) -> Option<usize> {
        let n = ctx.consumers.len();
        let next = self.queues[ctx.broker as usize].next;
        let start = ctx.consumers.iter().position(|s| s.id == next).unwrap_or(0);
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| ctx.consumers[i].free > 0)
    }

    /// Delivers to `consumers[i]`; `advance`: the round-robin moves past it.
    fn deliver(&mut self, ctx: &DispatchCtx, i: usize, msg: &MsgView, advance: bool) -> Select {
        let c = ctx.consumers[i].id;
        if advance {
            let n = ctx.consumers.len();
            self.queues[ctx.broker as usize].next = ctx.consumers[(i + 1) % n].id;
        }
        if self.tracks_in_flight() {
            let id = msg.id as usize;
            if self.holder.len() <= id {
                self.holder.resize(id + 1, (NIL, 0));
            }
            self.holder[id] = (c, self.epoch[c as usize]);
            self.in_flight[c as usize] += 1;
        }
        Select::Consumer(i)
    }

    /// `msg` is no longer in its consumer's hands (settled or back in the queue).
    fn out_of_flight(&mut self, msg: &MsgView, ctl: &mut Control) {
        let Some(h) = self.holder.get_mut(msg.id as usize) else {
            return;
        };
        let (c, epoch) = std::mem::replace(h, (NIL, 0));
        if c != NIL && self.epoch[c as usize] == epoch {
            self.in_flight[c as usize] -= 1;
            self.maybe_resume(ctl);
        }
    }

    /// A paused queue resumes when none of its consumers holds a delivery.
    fn maybe_resume(&mut self, ctl: &mut Control) {
        for (b, q) in self.queues.iter_mut().enumerate() {
            if q.paused
                && self.attached[b]
                    .iter()
                    .all(|&c| self.in_flight[c as usize] == 0)
            {
                q.paused = false;
                ctl.redispatch();
            }
        }
    }
}

impl Handler for ArtemisGroups {}

impl crate::Named for ArtemisGroups {
    const NAME: &'static str = "artemis_groups";
    const SUMMARY: &'static str =
        "ActiveMQ Artemis message groups: sticky owner per queue, a busy owner stops the queue; group-rebalance on a new consumer reorders unless dispatch pauses";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Artemis;
    type Params = ArtemisGroupsParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "group_rebalance",
            meaning: "every group loses its owner when a consumer is added; its next message may go to another consumer while the old owner still holds earlier ones",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models: "Artemis address-setting group-rebalance",
            hazard: None,
        },
        crate::ParamInfo {
            name: "group_rebalance_pause_dispatch",
            meaning: "with group_rebalance: dispatch stops at a rebalance until no consumer holds an unacknowledged delivery",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models: "Artemis address-setting group-rebalance-pause-dispatch",
            hazard: None,
        },
        crate::ParamInfo {
            name: "group_buckets",
            meaning: "-1: every group has its own owner; N > 0: groups hashed into N buckets, one owner per bucket; 0: no grouping",
            unit: "buckets",
            default: "-1",
            range: crate::Range::Int(-1, i32::MAX as i64),
            sizes: Some(crate::Sizing {
                what: "an owner and a last owner per bucket on each broker, filled at the start",
                cost: |n, sc| {
                    let slots = n.saturating_mul(sc.brokers.len() as u64);
                    crate::Footprint {
                        bytes: slots.saturating_mul(8),
                        steps: slots,
                    }
                },
            }),
            models: "Artemis address-setting group-buckets (BucketMessageGroups)",
            hazard: Some(crate::Hazard {
                when: "0 (grouping disabled)",
                applies: |v, _| v == "0",
                effect: "group_buckets = 0 disables grouping: plain competing consumers, which reorder without any fault",
            }),
        },
        crate::ParamInfo {
            name: "grouping_handler",
            meaning: "clustered grouping: the broker whose grouping handler is LOCAL (the arbiter of each group's node), the others REMOTE; a group's first send is proposed to it, and while it is down sends of groups the receiving node does not know wait 11 x the timeout, then go ungrouped",
            unit: "broker name",
            default: "(none)",
            range: crate::Range::Any,
            sizes: None,
            models: "Artemis broker.xml grouping-handler type LOCAL / REMOTE",
            hazard: None,
        },
        crate::ParamInfo {
            name: "grouping_handler_timeout",
            meaning: "with grouping_handler: how long a REMOTE handler waits for the LOCAL one's answer to each proposal",
            unit: "duration",
            default: "5s",
            range: crate::Range::dur_from(Dur::from_millis(1)),
            sizes: None,
            models: "Artemis grouping-handler timeout",
            hazard: None,
        },
    ];
    fn check(sc: &sim::Scenario, p: &ArtemisGroupsParams) -> Vec<(&'static str, String)> {
        let Some(name) = &p.grouping_handler else {
            return Vec::new();
        };
        let mut errs = Vec::new();
        if !sc.brokers.iter().any(|b| &b.name == name) {
            errs.push(("grouping_handler", crate::not_a_broker(sc, name)));
        }
        if let sim::scenario::FlavourChoice::Product(f) = sc.flavour {
            if f != sim::scenario::Flavour::Artemis {
                errs.push((
                    "grouping_handler",
                    format!(
                        "a grouping handler is an ActiveMQ Artemis cluster's: allowed with flavour = \"artemis\" (or \"native\"), not {:?}",
                        f.name()
                    ),
                ));
            }
        }
        errs
    }
    fn build(sc: &sim::Scenario, p: ArtemisGroupsParams) -> Result<Self, String> {
        let handler = p
            .grouping_handler
            .as_ref()
            .and_then(|name| sc.brokers.iter().position(|b| &b.name == name));
        let keys = sc.workload.keys as usize;
        let g = ArtemisGroups::new(sc.brokers.len(), sc.dispatch_targets(), keys, p);
        Ok(match handler {
            Some(h) => g.with_grouping_handler(h as u16, keys),
            None => g,
        })
    }
}

impl Strategy for ArtemisGroups {
    fn route(&mut self, ctx: &RouteCtx, msg: &MsgView) -> Route {
        match (&mut self.cluster, msg.group) {
            (Some(c), Some(g)) => c.route(ctx, g as usize),
            _ => Route::Connected,
        }
    }

    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        let b = ctx.broker as usize;
        if self.queues[b].paused {
            return Select::Stop;
        }
        let Some(g) = self.slot(msg) else {
            return match self.round_robin(ctx) {
                Some(i) => self.deliver(ctx, i, msg, true),
                None => Select::Stop,
            };
        };
        let owner = self.queues[b].owner[g];
        if owner != NIL {
            // QueueImpl.deliver: a busy group consumer breaks the delivery loop.
            return match ctx.consumers.iter().position(|s| s.id == owner) {
                Some(i) if ctx.consumers[i].free > 0 => self.deliver(ctx, i, msg, false),
                _ => Select::Stop,
            };
        }
        match self.round_robin(ctx) {
            Some(i) => {
                let c = ctx.consumers[i].id;
                let q = &mut self.queues[b];
                let last = q.last_owner[g];
                if last == GONE || (last != NIL && last != c) {
                    ctl.reassigned(ctx.broker, c);
                }
                q.owner[g] = c;
                q.last_owner[g] = NIL;
                self.deliver(ctx, i, msg, true)
            }
            None => Select::Stop,
        }
    }

    fn on_attach(&mut self, _now: Time, broker: u16, consumer: u32, _ctl: &mut Control) {
        let b = broker as usize;
        if self.params.group_rebalance {
            // QueueImpl.addConsumer: stopDispatch() (with pause), then groups.removeAll().
            let q = &mut self.queues[b];
            for (o, last) in q.owner.iter_mut().zip(q.last_owner.iter_mut()) {
                if *o != NIL {
                    *last = *o;
                    *o = NIL;
                }
            }
            if self.params.group_rebalance_pause_dispatch
                && self.attached[b]
                    .iter()
                    .any(|&c| self.in_flight[c as usize] > 0)
            {
                q.paused = true;
            }
        }
        self.attached[b].push(consumer);
    }

    fn on_detach(&mut self, _now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        // QueueImpl.removeConsumer: groups.removeIf(consumer::equals). Its deliveries are back
        // in the queue already.
        let b = broker as usize;
        let q = &mut self.queues[b];
        for (o, last) in q.owner.iter_mut().zip(q.last_owner.iter_mut()) {
            if *o == consumer {
                *o = NIL;
                *last = GONE;
            } else if *last == consumer {
                *last = GONE;
            }
        }
        // The round-robin goes on with the consumer after the removed one.
        let list = &mut self.attached[b];
        if let Some(pos) = list.iter().position(|&c| c == consumer) {
            list.remove(pos);
            if q.next == consumer {
                q.next = list.get(pos).or(list.first()).copied().unwrap_or(NIL);
            }
        }
        self.in_flight[consumer as usize] = 0;
        self.epoch[consumer as usize] += 1;
        if self.tracks_in_flight() {
            self.maybe_resume(ctl);
        }
    }

    fn on_world(&mut self, _now: Time, change: WorldChange, ctl: &mut Control) {
        if let (WorldChange::BrokerCrashed(n), Some(c)) = (change, &mut self.cluster) {
            // A REMOTE handler's response cache is memory only; the LOCAL one's map is journaled.
            if n != c.handler {
                c.known[n as usize].fill(false);
            }
        }
        let WorldChange::GroupsReset(b) = change else {
            return;
        };
        // QueueImpl.resetAllGroups: groups.removeAll(), and nothing else (no stopDispatch).
        let q = &mut self.queues[b as usize];
        let mut any = false;
        for (o, last) in q.owner.iter_mut().zip(q.last_owner.iter_mut()) {
            if *o != NIL {
                *last = *o;
                *o = NIL;
                any = true;
            }
        }
        if any {
            // A busy owner had stopped the queue: its groups may go elsewhere now.
            ctl.redispatch();
        }
    }

    fn on_returned(&mut self, _now: Time, _broker: u16, msg: &MsgView, ctl: &mut Control) {
        if self.tracks_in_flight() {
            self.out_of_flight(msg, ctl);
        }
    }

    fn on_settled(&mut self, _now: Time, msg: &MsgView, ctl: &mut Control) {
        if self.tracks_in_flight() {
            self.out_of_flight(msg, ctl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, scenario, select_at, view};

    fn groups(params: ArtemisGroupsParams) -> ArtemisGroups {
        ArtemisGroups::new(1, 4, 8, params)
    }

    fn rebalancing(pause: bool) -> ArtemisGroups {
        groups(ArtemisGroupsParams {
            group_rebalance: true,
            group_rebalance_pause_dispatch: pause,
            ..Default::default()
        })
    }

    fn attach(s: &mut ArtemisGroups, ids: &[u32]) {
        for &c in ids {
            s.on_attach(0, 0, c, &mut Control::default());
        }
    }

    /// Message `id` of group `g` dispatched with consumers `ids` all free.
    fn send(s: &mut ArtemisGroups, id: u64, g: u32, ids: &[u32], ctl: &mut Control) -> u32 {
        let slots: Vec<(u32, u32)> = ids.iter().map(|&c| (c, 5)).collect();
        select_at(s, 0, &slots, &view(id, g), ctl).expect("dispatched")
    }

    #[test]
    fn defaults_are_artemis_address_settings() {
        let p: ArtemisGroupsParams = toml::from_str("").unwrap();
        assert!(!p.group_rebalance);
        assert!(!p.group_rebalance_pause_dispatch);
        assert_eq!(p.group_buckets, -1);
    }

    /// SimpleString's hash: UTF-16LE bytes, signed, `31 * h + b` (Java `int` arithmetic).
    #[test]
    fn the_bucket_hash_is_simple_strings() {
        assert_eq!(simple_string_hash(""), 0);
        // "1": bytes 0x31, 0x00 -> 49 * 31 + 0.
        assert_eq!(simple_string_hash("1"), 1519);
        // "ab": 97, 0, 98, 0.
        assert_eq!(simple_string_hash("ab"), ((97 * 31) * 31 + 98) * 31);
        // A byte >= 0x80 counts negative (Java's signed byte): U+00E9 is 0xE9, 0x00.
        assert_eq!(simple_string_hash("\u{e9}"), (0xE9u8 as i8 as i32) * 31);
        // It overflows as a Java int does, and the bucket masks the sign.
        let long = "1234567890123";
        assert!(simple_string_hash(long) < 0 || simple_string_hash(long) > 0);
        assert_eq!(bucket_of(1, 4), 1519 % 4);
        for g in 0..1000 {
            assert!(bucket_of(g, 7) < 7);
        }
    }

    /// Each UTF-16 code unit contributes its low byte, then its high byte (SimpleString's
    /// storage): a code unit above U+00FF is not its low byte alone.
    #[test]
    fn the_bucket_hash_takes_each_code_units_high_byte_after_its_low_byte() {
        // U+0101: bytes 0x01, 0x01 -> 1 * 31 + 1.
        assert_eq!(simple_string_hash("\u{101}"), 32);
        // U+0180: bytes 0x80 (signed: -128), 0x01 -> -128 * 31 + 1.
        assert_eq!(simple_string_hash("\u{180}"), -3967);
        // U+0100: bytes 0x00, 0x01.
        assert_eq!(simple_string_hash("\u{100}"), 1);
    }

    /// The bucket masks the hash's sign bit (`& Integer.MAX_VALUE`) and keeps the other 31
    /// bits: a negative hash lands in the bucket of its low 31 bits.
    #[test]
    fn a_negative_hash_is_bucketed_by_its_low_31_bits() {
        // "2000" overflows a Java int to a negative hash.
        assert_eq!(simple_string_hash("2000"), -1_678_165_762);
        // -1678165762 & 0x7fffffff = 469317886.
        assert_eq!(bucket_of(2000, 1000), 886);
        assert_eq!(bucket_of(2000, 7), 2);
        // A positive hash is kept whole: 1519 = 7 * 217.
        assert_eq!(bucket_of(1, 7), 0);
        assert_eq!(bucket_of(1, 1000), 519);
    }

    /// Deliveries are tracked per message (a holder entry per message id, a count per
    /// consumer) only when the pause needs them: with group-rebalance alone, or
    /// pause-dispatch alone, or neither, nothing is kept.
    #[test]
    fn only_a_pausing_rebalance_tracks_deliveries_per_message() {
        for (rebalance, pause) in [(false, false), (true, false), (false, true)] {
            let mut s = groups(ArtemisGroupsParams {
                group_rebalance: rebalance,
                group_rebalance_pause_dispatch: pause,
                ..Default::default()
            });
            attach(&mut s, &[0, 1]);
            let ctl = &mut Control::default();
            assert_eq!(send(&mut s, 0, 0, &[0, 1], ctl), 0);
            assert_eq!(send(&mut s, 3, 1, &[0, 1], ctl), 1);
            assert!(s.holder.is_empty(), "{rebalance} {pause}");
            assert_eq!(s.in_flight, vec![0; 4], "{rebalance} {pause}");
        }
        let mut s = rebalancing(true);
        attach(&mut s, &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0, 1], ctl), 0);
        assert_eq!(send(&mut s, 3, 1, &[0, 1], ctl), 1);
        assert_eq!(s.holder.len(), 4);
        assert_eq!((s.holder[0], s.holder[3]), ((0, 0), (1, 0)));
        assert_eq!(s.in_flight, vec![1, 1, 0, 0]);
    }

    #[test]
    fn a_new_group_goes_round_robin_and_an_owned_one_to_its_owner() {
        let mut s = groups(ArtemisGroupsParams::default());
        attach(&mut s, &[0, 1, 2]);
        let ctl = &mut Control::default();
        let all = [0, 1, 2];
        assert_eq!(send(&mut s, 0, 0, &all, ctl), 0);
        assert_eq!(send(&mut s, 1, 1, &all, ctl), 1);
        // An owned group goes to its owner and the round-robin stays at 2.
        assert_eq!(send(&mut s, 2, 0, &all, ctl), 0);
        assert_eq!(send(&mut s, 3, 2, &all, ctl), 2);
        assert_eq!(send(&mut s, 4, 3, &all, ctl), 0);
        // A consumer without credit is skipped for a new group.
        assert_eq!(
            select_at(&mut s, 0, &[(0, 5), (1, 0), (2, 5)], &view(5, 4), ctl),
            Ok(2)
        );
        assert!(ctl.reassignments().is_empty(), "first owners are no change");
    }

    /// Unlike ActiveMQ Classic (which holds the message and lets other groups pass), a busy
    /// group owner breaks Artemis's delivery loop: the whole queue waits.
    #[test]
    fn a_busy_owner_stops_the_queue() {
        let mut s = groups(ArtemisGroupsParams::default());
        attach(&mut s, &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0, 1], ctl), 0);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 0), (1, 5)], &view(1, 0), ctl),
            Err(Select::Stop)
        );
        // Nobody with credit: a new group stops too.
        assert_eq!(
            select_at(&mut s, 0, &[(0, 0), (1, 0)], &view(2, 5), ctl),
            Err(Select::Stop)
        );
    }

    #[test]
    fn a_removed_consumers_groups_get_new_owners_and_the_change_is_recorded() {
        let mut s = groups(ArtemisGroupsParams::default());
        attach(&mut s, &[0, 1, 2]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0, 1, 2], ctl), 0);
        assert_eq!(send(&mut s, 1, 1, &[0, 1, 2], ctl), 1);
        // Round-robin is at 2; 2 leaves: it goes on with the consumer after it (0).
        s.on_detach(0, 0, 2, ctl);
        assert_eq!(send(&mut s, 2, 5, &[0, 1], ctl), 0);
        s.on_detach(0, 0, 0, ctl);
        assert_eq!(send(&mut s, 3, 0, &[1], ctl), 1, "group 0 moves to 1");
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
        assert_eq!(send(&mut s, 4, 1, &[1], ctl), 1, "group 1 stayed");
        assert_eq!(ctl.reassignments().len(), 1);
    }

    /// `reset_groups` (`QueueImpl.resetAllGroups`: `groups.removeAll()`): every group of the
    /// broker loses its owner and goes where the round-robin is, the change recorded; dispatch
    /// never pauses, even with `group-rebalance-pause-dispatch` (only `addConsumer` stops it).
    #[test]
    fn a_reset_gives_every_group_to_the_round_robin_without_pausing() {
        let mut s = rebalancing(true);
        attach(&mut s, &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0, 1], ctl), 0);
        assert_eq!(send(&mut s, 1, 1, &[0, 1], ctl), 1);
        assert_eq!(send(&mut s, 2, 2, &[0, 1], ctl), 0);
        // Message 0 (group 0) is still in flight at consumer 0.
        s.on_world(5, WorldChange::GroupsReset(0), ctl);
        assert!(ctl.redispatch_requested());
        assert!(!s.queues[0].paused, "a reset does not stop dispatch");
        // The round-robin is at 1: group 0's next message goes there, past its old owner.
        assert_eq!(send(&mut s, 3, 0, &[0, 1], ctl), 1);
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
    }

    /// Weakness: `scenarios/group-reset.toml` resets the groups three times while owners hold
    /// prefetched messages; without the faults the same runs keep every key in order.
    #[test]
    fn reset_groups_reorders_groups_held_in_prefetch() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/group-reset.toml");
        let sc = scenario(&std::fs::read_to_string(path).unwrap());
        let mut calm = sc.clone();
        calm.faults.clear();
        for seed in 1..=2 {
            let m = run(&sc, "artemis_groups", seed);
            assert!(m.ordering_violations >= 1, "seed {seed}");
            assert!(m.coverage.reassignments > 0);
            assert_eq!(run(&calm, "artemis_groups", seed).ordering_violations, 0);
        }
    }

    /// The round-robin at a consumer that leaves goes on with the one after it; a consumer
    /// leaving elsewhere leaves the round-robin where it was.
    #[test]
    fn the_round_robin_moves_past_a_removed_consumer_and_stays_when_another_leaves() {
        let mut s = groups(ArtemisGroupsParams::default());
        attach(&mut s, &[0, 1, 2, 3]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0, 1, 2, 3], ctl), 0);
        // The round-robin is at 1, which leaves: it goes on with 2, not back to the first.
        s.on_detach(0, 0, 1, ctl);
        assert_eq!(send(&mut s, 1, 1, &[0, 2, 3], ctl), 2);
        // It is at 3; 0 leaves: it stays at 3.
        s.on_detach(0, 0, 0, ctl);
        assert_eq!(send(&mut s, 2, 2, &[2, 3], ctl), 3);
    }

    #[test]
    fn without_rebalance_a_joining_consumer_gets_only_new_groups() {
        let mut s = groups(ArtemisGroupsParams::default());
        attach(&mut s, &[0]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0], ctl), 0);
        attach(&mut s, &[1]);
        assert_eq!(send(&mut s, 1, 0, &[0, 1], ctl), 0);
        assert_eq!(
            send(&mut s, 2, 1, &[0, 1], ctl),
            0,
            "the round-robin is at 0"
        );
        assert_eq!(send(&mut s, 3, 2, &[0, 1], ctl), 1);
    }

    /// group-rebalance: a consumer joining resets every group; the next message of a group may
    /// go to another consumer while the old owner still holds an earlier one.
    #[test]
    fn rebalance_moves_groups_while_earlier_messages_are_in_flight() {
        let mut s = rebalancing(false);
        attach(&mut s, &[0, 1]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0, 1], ctl), 0);
        attach(&mut s, &[2]);
        // Group 0 is owner-less now: the round-robin (at 1) takes it, while 0 holds message 0.
        assert_eq!(send(&mut s, 1, 0, &[0, 1, 2], ctl), 1);
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
    }

    /// group-rebalance-pause-dispatch: after the reset nothing is dispatched until no consumer
    /// holds an unacknowledged delivery; then dispatch resumes by itself.
    #[test]
    fn paused_rebalance_waits_for_deliveries_to_settle() {
        let mut s = rebalancing(true);
        attach(&mut s, &[0]);
        let ctl = &mut Control::default();
        assert_eq!(send(&mut s, 0, 0, &[0], ctl), 0);
        assert_eq!(send(&mut s, 1, 0, &[0], ctl), 0);
        attach(&mut s, &[1]);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 5), (1, 5)], &view(2, 0), ctl),
            Err(Select::Stop)
        );
        s.on_settled(0, &view(0, 0), ctl);
        assert!(!ctl.redispatch_requested(), "one still in flight");
        // A settle of the same message again (a duplicate ack) changes nothing.
        s.on_settled(0, &view(0, 0), ctl);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 5), (1, 5)], &view(2, 0), ctl),
            Err(Select::Stop)
        );
        // The other comes back to the queue (rolled back): nothing in flight, dispatch resumes.
        s.on_returned(0, 0, &view(1, 0), ctl);
        assert!(ctl.redispatch_requested());
        assert!(select_at(&mut s, 0, &[(0, 5), (1, 5)], &view(1, 0), ctl).is_ok());
    }

    /// A consumer leaving takes its deliveries back to the queue: a pause waiting for them ends.
    #[test]
    fn a_pause_ends_when_the_holder_leaves() {
        let mut s = rebalancing(true);
        attach(&mut s, &[0]);
        let ctl = &mut Control::default();
        send(&mut s, 0, 0, &[0], ctl);
        attach(&mut s, &[1]);
        s.on_detach(0, 0, 0, ctl);
        assert!(ctl.redispatch_requested());
        assert_eq!(select_at(&mut s, 0, &[(1, 5)], &view(5, 3), ctl), Ok(1));
        s.on_settled(0, &view(5, 3), ctl);
        // Consumer 0's next session: its old delivery settling late does not count against it.
        attach(&mut s, &[0]);
        assert_eq!(send(&mut s, 6, 4, &[0], ctl), 0);
        s.on_settled(0, &view(0, 0), ctl);
        assert_eq!(s.in_flight[0], 1);
        s.on_settled(0, &view(6, 4), ctl);
        assert_eq!(s.in_flight[0], 0);
    }

    #[test]
    fn buckets_share_an_owner_and_zero_disables_grouping() {
        let mut s = groups(ArtemisGroupsParams {
            group_buckets: 2,
            ..Default::default()
        });
        attach(&mut s, &[0, 1]);
        let ctl = &mut Control::default();
        let (a, b) = (0..8)
            .flat_map(|x| (0..8).map(move |y| (x, y)))
            .find(|&(x, y)| x != y && bucket_of(x, 2) == bucket_of(y, 2))
            .unwrap();
        let first = send(&mut s, 0, a, &[0, 1], ctl);
        assert_eq!(
            send(&mut s, 1, b, &[0, 1], ctl),
            first,
            "same bucket, same owner"
        );

        let mut s = groups(ArtemisGroupsParams {
            group_buckets: 0,
            ..Default::default()
        });
        attach(&mut s, &[0, 1]);
        assert_eq!(send(&mut s, 0, 3, &[0, 1], ctl), 0);
        assert_eq!(send(&mut s, 1, 3, &[0, 1], ctl), 1, "no stickiness");
    }

    /// Hazard: `group_buckets = 0` turns grouping off: with no fault at all, keys are reordered
    /// (and the parameter warns).
    #[test]
    fn hazard_no_grouping_reorders_without_faults() {
        let sc = artemis_with(
            r#""artemis_groups""#,
            8,
            350,
            "[strategy.artemis_groups]\ngroup_buckets = 0",
        );
        assert!(run(&sc, "artemis_groups", 1).ordering_violations > 10);
        let s = crate::test_util::summary(&sc, "artemis_groups", 1);
        assert!(crate::test_util::warning(&s, "group_buckets").is_some());
        let sc = artemis_with(r#""artemis_groups""#, 8, 350, "");
        assert_eq!(run(&sc, "artemis_groups", 1).ordering_violations, 0);
        let s = crate::test_util::summary(&sc, "artemis_groups", 1);
        assert!(crate::test_util::warning(&s, "group_buckets").is_none());
    }

    fn artemis(strategies: &str, extra: &str) -> sim::Scenario {
        artemis_with(strategies, 40, 200, extra)
    }

    /// 3000 messages over `keys` keys at `rate` per second to four consumers (prefetch 4,
    /// 10ms per message), on the `artemis` flavour.
    fn artemis_with(strategies: &str, keys: u32, rate: u32, extra: &str) -> sim::Scenario {
        scenario(&format!(
            r#"
flavour = "artemis"
strategies = [{strategies}]
[workload]
messages = 3000
rate = "{rate}/s"
keys = {keys}
[[broker]]
name = "a"
[consumers]
count = 4
prefetch = 4
service = {{ dist = "exponential", mean = "10ms" }}
{extra}
"#
        ))
    }

    /// Strength: consumers crash and come back; their groups move with their unacked messages
    /// (back at the head of the queue), so every key stays in order, where competing consumers
    /// reorder.
    #[test]
    fn order_survives_consumer_crashes() {
        let sc = artemis(
            r#""artemis_groups", "competing""#,
            r#"
[[fault]]
kind = "consumer_crash"
rate = "6/min"
for = "2s"
"#,
        );
        for seed in 1..=3 {
            let m = run(&sc, "artemis_groups", seed);
            let c = run(&sc, "competing", seed);
            assert!(m.coverage.consumer_crashes > 0);
            assert!(m.coverage.reassignments > 0, "groups moved");
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.applied, 3000);
            assert!(c.ordering_violations > 10, "competing reorders");
        }
    }

    /// Weakness: with group-rebalance, every crashed consumer's return (a consumer added)
    /// resets the groups while the others hold prefetched messages: order breaks. Pausing
    /// dispatch keeps it.
    #[test]
    fn group_rebalance_without_a_pause_reorders() {
        let faults = r#"
[[fault]]
kind = "consumer_crash"
rate = "20/min"
for = "2s"
"#;
        let sc = |pause: bool| {
            artemis_with(
                r#""artemis_groups""#,
                8,
                350,
                &format!(
                    "[strategy.artemis_groups]\ngroup_rebalance = true\ngroup_rebalance_pause_dispatch = {pause}\n{faults}"
                ),
            )
        };
        let (plain, paused) = (sc(false), sc(true));
        for seed in 1..=3 {
            let v = run(&plain, "artemis_groups", seed);
            assert!(
                v.ordering_violations > 0,
                "seed {seed}: a rebalance reorders"
            );
            let p = run(&paused, "artemis_groups", seed);
            assert_eq!(p.ordering_violations, 0, "seed {seed}");
            assert_eq!(p.applied, 3000);
        }
    }

    /// Weakness: a slow group owner stops the whole queue, where ActiveMQ Classic's groups let
    /// the other groups pass: the median message waits for the slow consumer (seconds), not
    /// for its own consumer (tens of milliseconds).
    #[test]
    fn a_slow_owner_stalls_every_group() {
        let sc = artemis(
            r#""artemis_groups", "message_groups""#,
            r#"
[[fault]]
kind = "slow_consumer"
consumer = 0
at = "2s"
for = "6s"
factor = 50.0
"#,
        );
        let a = run(&sc, "artemis_groups", 1);
        let m = run(&sc, "message_groups", 1);
        assert_eq!(a.ordering_violations, 0);
        assert!(
            a.latency_ms.p50 > 20.0 * m.latency_ms.p50,
            "artemis median {} vs classic {}",
            a.latency_ms.p50,
            m.latency_ms.p50
        );
    }

    fn clustered(timeout_ms: u64) -> ArtemisGroups {
        ArtemisGroups::new(
            3,
            4,
            8,
            ArtemisGroupsParams {
                grouping_handler_timeout: Dur::from_millis(timeout_ms),
                ..Default::default()
            },
        )
        .with_grouping_handler(0, 8)
    }

    /// A send held since `since`, asked about again at `now`.
    fn held(now: Time, since: Time, connected: u16, up: &[bool]) -> RouteCtx<'_> {
        RouteCtx {
            held_since: Some(since),
            ..at(now, 0, connected, up)
        }
    }

    fn at(now: Time, producer: u32, connected: u16, up: &[bool]) -> RouteCtx<'_> {
        RouteCtx {
            now,
            producer,
            connected,
            up,
            held_since: None,
        }
    }

    /// The first proposal binds a group to the receiving node's queue; every node then routes
    /// the group there, wherever the send arrives, without the arbiter.
    #[test]
    fn the_local_handler_binds_a_group_to_the_first_proposers_node() {
        let mut g = clustered(5000);
        let up = [true; 3];
        assert_eq!(g.route(&at(0, 0, 1, &up), &view(1, 3)), Route::Stored(1));
        assert_eq!(g.route(&at(1, 1, 2, &up), &view(2, 3)), Route::Stored(1));
        assert_eq!(g.route(&at(2, 1, 2, &up), &view(3, 4)), Route::Stored(2));
        // Without a handler: the connected broker.
        let mut plain = ArtemisGroups::new(3, 4, 8, ArtemisGroupsParams::default());
        assert_eq!(
            plain.route(&at(0, 0, 1, &up), &view(1, 3)),
            Route::Connected
        );
    }

    /// With the LOCAL handler's node down, a group the receiving node knows goes on (to its
    /// node, even a node that is down: stored for it); a new group's send is held one timeout
    /// per proposal, 11 proposals, then routed without grouping to the connected node, still
    /// unbound (BindingsImpl.routeAndCheckNull, MAX_GROUP_RETRY).
    #[test]
    fn with_the_local_handler_down_new_groups_wait_and_known_ones_go_on() {
        let t = 5000 * sim::time::MILLI;
        let mut g = clustered(5000);
        let up = [true; 3];
        assert_eq!(g.route(&at(0, 0, 1, &up), &view(1, 3)), Route::Stored(1));
        let down = [false, true, true];
        assert_eq!(g.route(&at(10, 1, 2, &down), &view(2, 3)), Route::Stored(1));
        let b_down = [false, false, true];
        assert_eq!(
            g.route(&at(11, 1, 2, &b_down), &view(3, 3)),
            Route::Stored(1)
        );
        // New group 5 from producer 0: held to the end of each proposal.
        assert_eq!(g.route(&at(100, 0, 1, &down), &view(4, 5)), Route::Wait(t));
        assert_eq!(
            g.route(&held(100 + 3 * t / 2, 100, 1, &down), &view(4, 5)),
            Route::Wait(t / 2)
        );
        assert_eq!(
            g.route(&held(100 + 10 * t, 100, 1, &down), &view(4, 5)),
            Route::Wait(t)
        );
        assert_eq!(
            g.route(&held(100 + 11 * t, 100, 1, &down), &view(4, 5)),
            Route::Connected
        );
        // Still unbound: its next message waits again; once the handler is back it is bound.
        assert_eq!(
            g.route(&at(100 + 11 * t, 0, 1, &down), &view(5, 5)),
            Route::Wait(t)
        );
        assert_eq!(
            g.route(&at(100 + 12 * t, 0, 1, &up), &view(5, 5)),
            Route::Stored(1)
        );
    }

    /// A REMOTE node's cache dies with it: after its restart, with the handler still down, a
    /// group bound before must be asked about again and waits; the LOCAL node's map survives.
    #[test]
    fn a_remote_node_forgets_its_cache_in_a_crash() {
        let mut g = clustered(1000);
        let mut ctl = Control::default();
        let up = [true; 3];
        assert_eq!(g.route(&at(0, 0, 1, &up), &view(1, 3)), Route::Stored(1));
        g.on_world(1, WorldChange::BrokerCrashed(0), &mut ctl);
        g.on_world(1, WorldChange::BrokerCrashed(2), &mut ctl);
        let down = [false, true, true];
        assert_eq!(g.route(&at(2, 0, 1, &down), &view(2, 3)), Route::Stored(1));
        assert!(matches!(
            g.route(&at(2, 1, 2, &down), &view(3, 3)),
            Route::Wait(_)
        ));
        assert_eq!(g.route(&at(3, 1, 0, &up), &view(4, 3)), Route::Stored(1));
    }
}
