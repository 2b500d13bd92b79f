//! `unit_of_order`: WebLogic JMS Message Unit-of-Order (UoO), on a single server or a distributed
//! queue (hash or Path Service routing).
//!
//! Models the mechanism documented in Oracle's "Using Message Unit-of-Order" (WebLogic JMS
//! programmer's guide, [WebLogic UoO], with [W2] and [W3]; all in docs/sources.md):
//!
//! - **Dispatch** (broker side): a unit's messages are "processed one at a time. The processing
//!   completion of one message allows the next message in the Unit-of-Order to be delivered";
//!   completion is an ack/commit, a recover/rollback, or the consumer closing. So at most one
//!   message per unit is unacknowledged: a unit's next message is held (`Select::Hold`; other
//!   units' messages behind it go on) until the one in flight is acked or dead-lettered
//!   (`on_settled`), or given back because its consumer left (`on_detach`: the engine already put
//!   it back at the head of the queue; "then messages M1 through Mn are delivered to any available
//!   consumer"). A rolled-back message is not complete for ordering purposes: "messages that ...
//!   have a Redelivery Delay ... will delay messages that arrive after them", so while it waits out
//!   its redelivery delay (non-blocking: at the broker; blocking: in its consumer's session) the
//!   rest of its unit waits too. That is the head-of-line blocking of [WebLogic UoO], on a poison
//!   message for the whole of its redeliveries. The redelivered message itself may go to any
//!   consumer. A message without the UoO name (`[workload] group_header_missing`) has no unit and
//!   is dispatched freely, round-robin over consumers with free prefetch (as are unit messages
//!   whose unit is free).
//!
//!   Scope. A unit belongs to a destination ("within a destination, messages that have the same
//!   value for the Unit-of-Order name attribute belong to the same Unit-of-Order"). Without
//!   routing (`routing = "none"`) every broker is its own destination: the state is kept per
//!   (broker, unit), and two servers holding messages of one name serve them independently, which
//!   is exactly why UoO "does not work" for a clustered HA setup whose producers fail over between
//!   servers ([Coherence+Hibernate]). On a distributed queue each member is a destination of its
//!   own, and a unit's messages "reside on only one physical member" only because routing sends
//!   them all there; nothing coordinates a unit across members. So the state is kept per (member
//!   the message was *routed to*, unit). Until a membership change (the `member_leave` fault) every
//!   unit has one member, and this is one state per unit for the whole queue: messages the engine
//!   moves between brokers itself (ActiveMQ's network of brokers, `idle_forward`; a WebLogic
//!   distributed queue does not forward by default, Forward Delay -1) stay in line with the rest
//!   of their unit, as the documented invariant implies, rather than being served independently by
//!   the broker they were moved to. After a leave moves a unit ([W2]: the unit goes to another
//!   member), its new member serves its new messages while the old one still holds the earlier
//!   ones, which is how hash routing loses order across a reconfiguration. The documents support
//!   the per-member reading: a unit is defined "within a destination", and an administrator who
//!   moves a unit's messages to another destination "violate[s] the delivery rules" ([WebLogic
//!   UoO], on JMS message management).
//!
//! - **Routing** (producer side) on a distributed queue, all `[[broker]]`s being its members, in
//!   file order. The producer's connected server is irrelevant to where a unit's message goes
//!   (`Route::Broker(member)`); a message without a unit goes to the connected server (WebLogic's
//!   default Server Affinity keeps such sends on the local member).
//!   - `routing = "hash"` (WebLogic's default): the member is a hash of the unit name and the
//!     *configured* member list, never of which members are up. The hash is rendezvous (highest
//!     random weight) hashing with 64-bit FNV-1a over (the unit name's 4 little-endian bytes,
//!     then the member's name): every member gets the score `fnv1a(unit ++ name)`, the highest
//!     wins (ties: the earlier member). Why this one: the docs say only "based on the hash codes
//!     of the Unit-of-Order name and the uniform distributed queue members"; rendezvous hashing is
//!     a deterministic reading of exactly that, independent of member order, and it does not
//!     correlate with the workload's `key % producers` ownership (a plain `key % members` would
//!     put all of one producer's units on one member when producers = members). If the member is
//!     down the send fails with `JMSOrderException` and is *not* rerouted (Oracle's own test
//!     [W2]: sends failed while the member was configured but shut down). The member list is the
//!     destination's configuration: a `member_leave` takes a member out of it (the hash then
//!     picks each of its units' next-best member: rendezvous hashing moves only those) and puts
//!     it back at the window's end (they move back) [W2][W5]; with no member listed every unit
//!     send fails.
//!   - `routing = "path_service"`: a persistent map unit -> member. A unit's first send picks the
//!     member load-balanced (round-robin over the members that are up) and records it; every
//!     later send goes to the recorded member, failing while it is down. Every unit send needs
//!     the Path Service, hosted on `path_service_broker` (default: the first broker): while that
//!     server is down every unit send fails, even to members that are up, unless
//!     `path_service_migratable = true` (the recommended migratable target, "so that a member
//!     server will not be a single point of failure" [W3]): then it is available while any server
//!     is up (migration is taken as instantaneous, a simplification in the Path Service's favour).
//!     Entries never expire (simplification). A member out of the list (`member_leave`) gets no
//!     new units, and its recorded units' sends fail until it is back (an assumption: the
//!     documents say the map is persistent, not what it does with a removed member), so the
//!     Path Service keeps order through a reconfiguration where hash routing does not.
//!   - `routing = "none"`: a single server (or independent servers): plain sends to the connected
//!     broker.
//!
//!   A failed send is retried by the application after `[producers] reconnect_delay`.
//!   `on_send_failure = "retry"` (default): the application retries it before sending anything
//!   else (`Route::Fail { block: true }`; all of the producer's traffic waits). `"buffer"`: it
//!   puts the message aside and goes on (`block: false`); the set-aside messages are resent in
//!   order at the next retry, but a new message of the same unit sent after the member came back
//!   and before that retry overtakes them. The model reproduces this (see the tests).
//!
//! Handler: process and apply (the default). Simplifications: the strategy is not told of broker
//! crashes, so a non-persistent member losing a message during its redelivery delay leaves that
//! unit blocked on it (WebLogic would lose the unit's in-memory state with the server).
//!
//! Sends a producer makes while it has no connection are buffered by its failover transport and,
//! when it reconnects, routed like any send (in order); the connected server does not otherwise
//! matter to routed sends.
//!
//! Parameters (`[strategy.unit_of_order]`): `routing` ("hash" | "path_service" | "none", default
//! "hash"), `on_send_failure` ("retry" | "buffer", default "retry"), `path_service_broker`
//! (broker name, default the first broker), `path_service_migratable` (default false).

use serde::{Deserialize, Serialize};
use sim::scenario::RedeliveryMode;
use sim::strategy::{
    Control, DispatchCtx, Handler, MsgView, Outcome, Route, RouteCtx, Select, Strategy, WorldChange,
};
use sim::time::Time;
use std::collections::HashMap;

/// How a unit's messages are routed to the members of the distributed queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Hash of the unit name and the configured members (WebLogic's default).
    #[default]
    Hash,
    /// The Path Service's persistent unit -> member map.
    PathService,
    /// No distributed destination: plain sends to the connected broker.
    None,
}

/// What the application does when a send fails (`JMSOrderException`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnSendFailure {
    /// Retry that send before sending anything else.
    #[default]
    Retry,
    /// Set it aside, go on with later sends, resend it at the next retry.
    Buffer,
}

/// `[strategy.unit_of_order]` parameters.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UnitOfOrderParams {
    /// Routing on a distributed queue (default "hash").
    #[serde(default)]
    pub routing: Routing,
    /// Producer behaviour when a send fails (default "retry").
    #[serde(default)]
    pub on_send_failure: OnSendFailure,
    /// The broker hosting the Path Service (default: the first broker).
    #[serde(default, serialize_with = "first_broker")]
    pub path_service_broker: Option<String>,
    /// The Path Service is on a migratable target: available while any server is up.
    #[serde(default)]
    pub path_service_migratable: bool,
}

/// No message / no consumer.
const NONE_ID: u64 = u64::MAX;
const NO_CONSUMER: u32 = u32::MAX;
/// No member listed to route to.
const NO_MEMBER: u16 = u16::MAX;

/// Shows an unset `path_service_broker` as what it means.
fn first_broker<S: serde::Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_deref().unwrap_or("(first broker)"))
}

/// One unit at one member (the dispatching broker without routing; the member its messages were
/// routed to with hash routing; the whole queue with the Path Service).
#[derive(Clone, Copy, Debug)]
struct UnitState {
    /// The message whose processing is not complete (NONE_ID: the unit is free).
    inflight: u64,
    /// The consumer holding it (NO_CONSUMER: it waits out a redelivery delay at the broker).
    consumer: u32,
    /// The broker that dispatched it.
    broker: u16,
    /// Brokers where a message of the unit was held since (bit b: broker b; a broker other than
    /// the dispatching one holds it after the engine's store-and-forward).
    held_at: u64,
}

const FREE: UnitState = UnitState {
    inflight: NONE_ID,
    consumer: NO_CONSUMER,
    broker: 0,
    held_at: 0,
};

/// WebLogic Unit-of-Order.
#[derive(Debug)]
pub struct UnitOfOrder {
    params: UnitOfOrderParams,
    keys: usize,
    brokers: usize,
    /// One state per (member, unit), `units[member * keys + unit]`, where the member is the
    /// dispatching broker without routing, and with hash routing the member the message was
    /// routed to; the Path Service never moves a unit, so one state per unit, `units[unit]`.
    per_member: bool,
    units: Vec<UnitState>,
    /// Round-robin dispatch, as `competing`.
    dispatch: crate::Competing,
    /// Hash routing: the member of each unit over the members listed now (`NO_MEMBER`: none).
    hash_member: Vec<u16>,
    /// Hash routing: the member of each unit over every configured member (where every message
    /// routed before the first `member_leave` went).
    first_member: Vec<u16>,
    /// Hash routing: a member has left the list at some point, so a unit may have messages on two
    /// members; from then on each routed message's member is recorded in `homes`.
    reconfigured: bool,
    /// Hash routing after a membership change: the member each unsettled message was routed to
    /// (looked up by id, never iterated; removed when the message settles).
    homes: HashMap<u64, u16>,
    /// The members' names, in file order (hash routing hashes them).
    names: Vec<String>,
    /// Whether each broker is in the distributed destination's member list now (the
    /// `member_leave` fault takes one out for its window).
    listed: Vec<bool>,
    /// Path Service: the recorded member of each unit.
    path: Vec<Option<u16>>,
    /// Path Service: the next member in the load-balancing rotation.
    path_next: usize,
    /// Path Service host.
    path_host: u16,
    /// Redelivery delays wait at the broker (not in the consumer's session).
    non_blocking: bool,
}

/// 64-bit FNV-1a of the parts, concatenated.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    parts.iter().fold(sim::hash::FNV1A_OFFSET, |h, p| {
        sim::hash::fnv1a_update(h, p)
    })
}

/// Rendezvous hashing: the member with the highest `fnv1a(unit ++ name)`; ties go to the earlier.
pub fn hash_member(unit: u32, members: &[&str]) -> u16 {
    hash_member_among(unit, members, |_| true).unwrap_or(0)
}

/// [`hash_member`] over the members `listed` keeps (by index): a member taken out of the list
/// gives its units to their next-highest scores, the others' units stay (rendezvous hashing).
/// None when no member is listed.
fn hash_member_among(unit: u32, members: &[&str], listed: impl Fn(usize) -> bool) -> Option<u16> {
    fn fmix64(mut h: u64) -> u64 {
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    let key = unit.to_le_bytes();
    let mut best: Option<(u64, u16)> = None;
    for (i, name) in members.iter().enumerate().filter(|(i, _)| listed(*i)) {
        // FNV-1a alone mixes its last input byte poorly: names that differ only in their last
        // byte ("a", "b", "c") would split units 50/25/25. A 64-bit finaliser (MurmurHash3's
        // fmix64) spreads every input bit over the score.
        let score = fmix64(fnv1a(&[&key, name.as_bytes()]));
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, i as u16));
        }
    }
    best.map(|(_, i)| i)
}

impl UnitOfOrder {
    /// A new instance for `members` (broker names, in file order) and `keys` units.
    pub fn new(
        members: &[&str],
        keys: u32,
        non_blocking: bool,
        params: UnitOfOrderParams,
    ) -> Result<Self, String> {
        let path_host = match &params.path_service_broker {
            None => 0,
            Some(name) => members
                .iter()
                .position(|m| m == name)
                .ok_or_else(|| format!("path_service_broker {name:?} is not a [[broker]]"))?
                as u16,
        };
        let keys = keys as usize;
        let brokers = members.len();
        let per_member = params.routing != Routing::PathService;
        let scopes = if per_member { brokers } else { 1 };
        Ok(UnitOfOrder {
            hash_member: (0..keys as u32).map(|u| hash_member(u, members)).collect(),
            first_member: (0..keys as u32).map(|u| hash_member(u, members)).collect(),
            names: members.iter().map(|m| m.to_string()).collect(),
            listed: vec![true; members.len()],
            path: vec![None; keys],
            path_next: 0,
            path_host,
            units: vec![FREE; scopes * keys],
            dispatch: crate::Competing::new(brokers),
            keys,
            brokers,
            per_member,
            reconfigured: false,
            homes: HashMap::new(),
            non_blocking,
            params,
        })
    }

    /// The state of `msg`'s unit `unit` dispatched by `broker`: the dispatching broker's without
    /// routing; with hash routing, the state at the member `msg` was routed to (a broker that got
    /// it by the engine's store-and-forward serves it under its member's state); with the Path
    /// Service, the unit's only state.
    #[inline]
    fn idx(&self, broker: u16, msg: &MsgView, unit: u32) -> usize {
        let member = match self.params.routing {
            Routing::None => broker,
            Routing::PathService => return unit as usize,
            Routing::Hash => self.home(msg.id, unit),
        };
        member as usize * self.keys + unit as usize
    }

    /// Hash routing: the member message `id` of `unit` was routed to.
    #[inline]
    fn home(&self, id: u64, unit: u32) -> u16 {
        let first = self.first_member[unit as usize];
        if self.reconfigured {
            self.homes.get(&id).copied().unwrap_or(first)
        } else {
            first
        }
    }

    /// The states that may hold `unit`.
    #[inline]
    fn scopes(&self, unit: u32) -> impl Iterator<Item = usize> {
        let (n, keys) = (if self.per_member { self.brokers } else { 1 }, self.keys);
        (0..n).map(move |b| b * keys + unit as usize)
    }

    /// The unit's message in flight is complete. The engine dispatches the broker that delivered
    /// it right after this hook; if a message of the unit was held at another broker (queue-wide
    /// scope, after a store-and-forward), every broker is dispatched again, but only after that
    /// (a wake at `now`), so the delivering broker, which holds the unit's older messages, serves
    /// the unit first.
    fn complete(&mut self, now: Time, i: usize, ctl: &mut Control) {
        let st = self.units[i];
        let elsewhere = if self.brokers > 64 {
            st.held_at != 0
        } else {
            st.held_at & !(1u64 << st.broker) != 0
        };
        if elsewhere {
            ctl.wake_at(now, 0);
        }
        // The brokers that skip the unit's held messages on a promise ask about them again.
        if self.brokers <= 64 {
            let mut held = st.held_at;
            while held != 0 {
                ctl.holds_changed(held.trailing_zeros() as u16);
                held &= held - 1;
            }
        }
        self.units[i] = FREE;
    }

    /// The next consumer with free prefetch, round-robin.
    #[inline]
    fn round_robin(&mut self, ctx: &DispatchCtx) -> Option<usize> {
        self.dispatch.pick(ctx)
    }

    fn fail(&self) -> Route {
        Route::Fail {
            block: self.params.on_send_failure == OnSendFailure::Retry,
        }
    }
}

impl Handler for UnitOfOrder {}

impl crate::Named for UnitOfOrder {
    const NAME: &'static str = "unit_of_order";
    const SUMMARY: &'static str = "WebLogic Unit-of-Order: one unacked message per unit; hash or path-service routing to members";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Weblogic;
    type Params = UnitOfOrderParams;
    const PARAMS: &'static [crate::ParamInfo] = &[
        crate::ParamInfo {
            name: "routing",
            meaning: "how a unit's messages find their member of the distributed queue; none: every broker is its own destination",
            unit: "\"hash\" | \"path_service\" | \"none\"",
            default: "hash",
            range: crate::Range::Any,
            sizes: None,
            models: "WebLogic distributed destination Unit-of-Order Routing (Hash or Path Service); none: no distributed destination",
            hazard: None,
        },
        crate::ParamInfo {
            name: "on_send_failure",
            meaning: "what the producer does when a send fails: retry it before anything else, or set it aside and go on",
            unit: "\"retry\" | \"buffer\"",
            default: "retry",
            range: crate::Range::Any,
            sizes: None,
            models: "the producer application's handling of JMSOrderException / a failed send",
            hazard: None,
        },
        crate::ParamInfo {
            name: "path_service_broker",
            meaning: "the broker hosting the Path Service",
            unit: "broker name",
            default: "(first broker)",
            range: crate::Range::Any,
            sizes: None,
            models: "the Path Service's target server in the WebLogic cluster",
            hazard: None,
        },
        crate::ParamInfo {
            name: "path_service_migratable",
            meaning: "the Path Service is on a migratable target: available while any server is up",
            unit: "bool",
            default: "false",
            range: crate::Range::Any,
            sizes: None,
            models: "WebLogic migratable target for the Path Service",
            hazard: None,
        },
    ];
    fn check(sc: &sim::Scenario, p: &UnitOfOrderParams) -> Vec<(&'static str, String)> {
        match &p.path_service_broker {
            Some(name) if !sc.brokers.iter().any(|b| &b.name == name) => {
                vec![("path_service_broker", crate::not_a_broker(sc, name))]
            }
            _ => Vec::new(),
        }
    }
    fn build(sc: &sim::Scenario, p: UnitOfOrderParams) -> Result<Self, String> {
        let members: Vec<&str> = sc.brokers.iter().map(|b| b.name.as_str()).collect();
        UnitOfOrder::new(
            &members,
            sc.workload.keys,
            sc.redelivery_policy().mode == RedeliveryMode::NonBlocking,
            p,
        )
    }
}

impl Strategy for UnitOfOrder {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, _ctl: &mut Control) -> Select {
        let Some(u) = msg.group else {
            return match self.round_robin(ctx) {
                Some(i) => Select::Consumer(i),
                None => Select::Stop,
            };
        };
        let idx = self.idx(ctx.broker, msg, u);
        let st = &mut self.units[idx];
        // Another message of the unit is not complete: this one waits (the rest of the queue
        // goes on). The incomplete message itself (back from a redelivery delay) may go.
        if st.inflight != NONE_ID && st.inflight != msg.id {
            st.held_at |= 1u64 << ctx.broker.min(63);
            // Until the unit's message completes ([`Self::complete`] tells the broker), asking
            // again changes nothing: a poison message retried for ever otherwise has the whole
            // backlog of its unit asked about on every redelivery.
            return if self.brokers <= 64 {
                Select::HoldWhileMembers
            } else {
                Select::Hold
            };
        }
        match self.round_robin(ctx) {
            Some(i) => {
                let st = &mut self.units[idx];
                st.inflight = msg.id;
                st.consumer = ctx.consumers[i].id;
                st.broker = ctx.broker;
                Select::Consumer(i)
            }
            None => Select::Stop,
        }
    }

    fn route(&mut self, ctx: &RouteCtx, msg: &MsgView) -> Route {
        let Some(u) = msg.group else {
            return Route::Connected;
        };
        let u = u as usize;
        match self.params.routing {
            Routing::None => Route::Connected,
            Routing::Hash => {
                let m = self.hash_member[u];
                if m != NO_MEMBER && ctx.up[m as usize] {
                    if self.reconfigured {
                        self.homes.insert(msg.id, m);
                    }
                    Route::Broker(m)
                } else {
                    self.fail()
                }
            }
            Routing::PathService => {
                let service_up = if self.params.path_service_migratable {
                    ctx.up.iter().any(|&x| x)
                } else {
                    ctx.up[self.path_host as usize]
                };
                if !service_up {
                    return self.fail();
                }
                // A recorded member out of the list keeps its units (the map is persistent):
                // their sends fail like sends to a member that is down.
                match self.path[u] {
                    Some(m) if ctx.up[m as usize] && self.listed[m as usize] => Route::Broker(m),
                    Some(_) => self.fail(),
                    None => {
                        let n = self.brokers;
                        let Some(m) = (0..n)
                            .map(|k| (self.path_next + k) % n)
                            .find(|&m| ctx.up[m] && self.listed[m])
                        else {
                            return self.fail();
                        };
                        self.path_next = (m + 1) % n;
                        self.path[u] = Some(m as u16);
                        Route::Broker(m as u16)
                    }
                }
            }
        }
    }

    fn on_world(&mut self, _now: Time, change: WorldChange, _ctl: &mut Control) {
        let (b, listed) = match change {
            WorldChange::MemberLeft(b) => (b, false),
            WorldChange::MemberJoined(b) => (b, true),
            _ => return,
        };
        self.listed[b as usize] = listed;
        self.reconfigured = true;
        // Hash routing hashes over the members listed now: the leaver's units move to their
        // next member, and back at its return. Messages already sent stay where they are.
        let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let in_list = &self.listed;
        for (u, m) in self.hash_member.iter_mut().enumerate() {
            *m = hash_member_among(u as u32, &names, |i| in_list[i]).unwrap_or(NO_MEMBER);
        }
    }

    fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        // Its unacked messages are back in the queue: their units are complete for now and their
        // messages may go to any consumer (the engine dispatches this broker next).
        for i in 0..self.units.len() {
            let st = self.units[i];
            if st.consumer == consumer && st.broker == broker {
                self.complete(now, i, ctl);
            }
        }
    }

    fn on_handled(
        &mut self,
        _now: Time,
        consumer: u32,
        msg: &MsgView,
        outcome: &Outcome,
        _ctl: &mut Control,
    ) {
        // Rolled back: with a non-blocking redelivery delay the message now waits at the broker,
        // still blocking its unit; its consumer no longer holds it.
        if self.non_blocking && matches!(outcome, Outcome::Failed(_)) {
            if let Some(u) = msg.group {
                for i in self.scopes(u) {
                    let st = &mut self.units[i];
                    if st.inflight == msg.id && st.consumer == consumer {
                        st.consumer = NO_CONSUMER;
                    }
                }
            }
        }
    }

    fn on_settled(&mut self, now: Time, msg: &MsgView, ctl: &mut Control) {
        // Acked or dead-lettered: the unit's next message may go.
        if let Some(u) = msg.group {
            for i in self.scopes(u) {
                if self.units[i].inflight == msg.id {
                    self.complete(now, i, ctl);
                }
            }
            if self.reconfigured {
                self.homes.remove(&msg.id);
            }
        }
    }
}

#[cfg(test)]
mod balance_tests {
    use super::hash_member;

    /// Hash routing spreads units evenly whatever the member names.
    #[test]
    fn hash_routing_is_balanced() {
        for names in [
            vec!["a", "b", "c"],
            vec!["ms1", "ms2", "ms3"],
            vec!["a", "b", "c", "d"],
        ] {
            let n = names.len();
            let mut counts = vec![0u32; n];
            for unit in 0..30_000 {
                counts[hash_member(unit, &names) as usize] += 1;
            }
            let expected = 30_000.0 / n as f64;
            for c in &counts {
                assert!(
                    (*c as f64 - expected).abs() < 0.05 * expected,
                    "{names:?}: {counts:?}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, scenario, simple, simple_with};
    use sim::Scenario;

    /// `simple`'s world (one broker, 8 consumers, exponential 10ms service, 200/s, 50 keys, 3000
    /// messages) with extra `[workload]` lines.
    fn one_broker(strategies: &str, workload: &str, extra: &str) -> Scenario {
        simple_with(strategies, 8, 200, 50, workload, extra)
    }

    const NON_BLOCKING_OUTAGE: &str = r#"
[redelivery]
mode = "non_blocking"
initial_delay = "1s"
max_redeliveries = 10
[[fault]]
kind = "db_outage"
at = "5s"
for = "3s"
"#;

    /// Strength ([WebLogic UoO]): eight consumers, a 3s DB outage, non-blocking redelivery. A
    /// failed message waits out its delay at the broker and its unit waits with it, so no later
    /// message of the key overtakes it: no violation, while competing consumers and even a single
    /// consumer (the [Coherence+Hibernate] post's m2/m3 story) reorder in the very same run.
    #[test]
    fn serialising_units_keeps_order_through_non_blocking_redelivery() {
        let sc = simple(
            "\"unit_of_order\", \"competing\", \"single\"",
            8,
            200,
            NON_BLOCKING_OUTAGE,
        );
        for seed in 1..=3 {
            let m = run(&sc, "unit_of_order", seed);
            assert!(
                m.coverage.rollbacks > 0 && m.redeliveries > 0,
                "seed {seed}"
            );
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}");
            assert_eq!(m.applied, 3000, "seed {seed}");
            assert_eq!(m.dead_lettered, 0, "seed {seed}");
            assert!(m.throughput_per_s > 190.0, "{}", m.throughput_per_s);
            let c = run(&sc, "competing", seed);
            assert!(c.ordering_violations > 100, "competing seed {seed}: {c:?}");
            let s = run(&sc, "single", seed);
            assert!(s.ordering_violations > 0, "single seed {seed}: {s:?}");
        }
    }

    /// Weakness ([WebLogic UoO]): a poison message blocks the rest of its unit for its whole
    /// redelivery chain (5 redeliveries 1s apart, then the DLQ), head-of-line. Other units flow:
    /// the median latency stays at the service time, nothing innocent is dead-lettered, order is
    /// kept.
    #[test]
    fn poison_blocks_its_unit_for_the_whole_redelivery_chain() {
        let extra = r#"
[redelivery]
mode = "non_blocking"
initial_delay = "1s"
max_redeliveries = 5
"#;
        let sc = one_broker(
            "\"unit_of_order\", \"competing\"",
            "poison_fraction = 0.002",
            extra,
        );
        for seed in 1..=3 {
            let m = run(&sc, "unit_of_order", seed);
            assert!(m.poison_dead_lettered > 0, "seed {seed}");
            assert_eq!(m.dead_lettered, m.poison_dead_lettered);
            assert_eq!(m.innocent_dead_lettered, 0);
            assert_eq!(m.applied + m.dead_lettered, 3000);
            assert_eq!(m.ordering_violations, 0);
            // The next message of the poisoned unit waited ~5s (minus its own arrival gap).
            assert!(
                (4_500.0..6_000.0).contains(&m.max_block_ms),
                "seed {seed}: {}",
                m.max_block_ms
            );
            assert!(m.latency_ms.p50 < 30.0, "seed {seed}: {:?}", m.latency_ms);
            // Competing consumers let later messages overtake the poison instead: no block.
            let c = run(&sc, "competing", seed);
            assert!(c.max_block_ms < 500.0, "seed {seed}: {}", c.max_block_ms);
        }
    }

    /// A distributed queue of two members, `a` and `b`, 200/s over 50 units, 4 consumers spread
    /// over the members; member `a` crashes at 5s for `down` (if any). The producers' connections
    /// are on `producer_brokers` (the first in the list that is up). WebLogic: `idle_forward`, not
    /// ActiveMQ's bridge.
    fn cluster(
        params: &str,
        workload: &str,
        producer_brokers: &str,
        down: Option<&str>,
    ) -> Scenario {
        let fault = down.map_or(String::new(), |d| {
            format!(
                "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"5s\"\nfor = \"{d}\"\n"
            )
        });
        scenario(&format!(
            r#"
strategies = ["unit_of_order"]
[workload]
messages = 3000
rate = "200/s"
keys = 50
{workload}
[producers]
count = 2
brokers = [{producer_brokers}]
[[broker]]
name = "a"
[[broker]]
name = "b"
[network]
kind = "idle_forward"
[consumers]
count = 4
connect = "spread"
service = {{ dist = "exponential", mean = "10ms" }}
[strategy.unit_of_order]
{params}
{fault}
"#
        ))
    }

    /// Weakness ([Coherence+Hibernate]: UoO "for a clustered highly available environment ... does
    /// not work"): with hash routing, the units hashed to a member that is down cannot be sent at
    /// all (`JMSOrderException`, never rerouted). With the default `retry` the application retries
    /// that send before anything else: order holds, but every producer stalls for the whole outage,
    /// even for units whose member is up. (The producers are connected to `b`, which stays up:
    /// where they are connected does not matter to routed sends.)
    #[test]
    fn hash_routing_fails_sends_while_a_member_is_down() {
        let calm = run(&cluster("", "", "\"b\", \"a\"", None), "unit_of_order", 1);
        assert_eq!(calm.coverage.send_failures, 0);
        assert!(
            calm.latency_ms.p50 < 30.0 && calm.max_block_ms < 200.0,
            "{calm:?}"
        );
        let sc = cluster("", "", "\"b\", \"a\"", Some("5050ms"));
        for seed in 1..=3 {
            let m = run(&sc, "unit_of_order", seed);
            assert_eq!(m.coverage.broker_crashes, 1);
            assert!(m.coverage.send_failures > 0, "seed {seed}");
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.final_state_mismatches, 0, "seed {seed}");
            assert_eq!(m.applied, 3000, "seed {seed}");
            assert!(
                m.latency_ms.max > 5_000.0,
                "seed {seed}: {:?}",
                m.latency_ms
            );
            assert!(m.latency_ms.p50 > 500.0, "seed {seed}: {:?}", m.latency_ms);
            // The stalled sends all arrive when the member returns (~1000 messages for 4
            // consumers): each waits at the broker for its unit's predecessor (40ms without
            // the outage).
            assert!(m.max_block_ms > 1_000.0, "seed {seed}: {}", m.max_block_ms);
        }
    }

    /// Weakness: with `on_send_failure = "buffer"` the application sets failed sends aside and
    /// goes on, so units on the live member keep flowing (median latency stays low); but between
    /// the member's return and the next retry of the set-aside sends, a new message of a
    /// set-aside unit goes straight through and overtakes them. Order breaks, and a command
    /// workload ends in the wrong state. (The window is the time from the member's return to the
    /// next retry tick, every `reconnect_delay` after the first failure; an outage lasting a whole
    /// number of retry periods shrinks it to the gap before the first failed send, which is why
    /// the outage here is 5.05s.)
    #[test]
    fn buffering_failed_sends_lets_later_messages_overtake() {
        let sc = cluster(
            "on_send_failure = \"buffer\"",
            "",
            "\"b\", \"a\"",
            Some("5050ms"),
        );
        for seed in 1..=3 {
            let m = run(&sc, "unit_of_order", seed);
            assert!(m.coverage.send_failures > 1_000, "seed {seed}");
            assert!(m.ordering_violations > 0, "seed {seed}");
            assert_eq!(m.applied, 3000, "seed {seed}");
            assert!(m.latency_ms.p50 < 30.0, "seed {seed}: {:?}", m.latency_ms);
        }
        let cmd = cluster(
            "on_send_failure = \"buffer\"",
            "kind = \"command\"",
            "\"b\", \"a\"",
            Some("5050ms"),
        );
        let m = run(&cmd, "unit_of_order", 1);
        assert!(m.final_state_mismatches > 0, "{m:?}");
    }

    /// The Path Service is a single point of failure: while its host (`a`) is down, every unit
    /// send needs a lookup and fails, even for units recorded on the live member. On a migratable
    /// target only the units recorded on the down member fail.
    #[test]
    fn path_service_host_is_a_single_point_of_failure_unless_migratable() {
        let fixed = cluster(
            "routing = \"path_service\"\non_send_failure = \"buffer\"",
            "",
            "\"b\", \"a\"",
            Some("5050ms"),
        );
        let migratable = cluster(
            "routing = \"path_service\"\non_send_failure = \"buffer\"\npath_service_migratable = true",
            "",
            "\"b\", \"a\"",
            Some("5050ms"),
        );
        for seed in 1..=2 {
            let f = run(&fixed, "unit_of_order", seed);
            let m = run(&migratable, "unit_of_order", seed);
            assert!(
                f.coverage.send_failures > m.coverage.send_failures * 3 / 2,
                "seed {seed}: {} vs {}",
                f.coverage.send_failures,
                m.coverage.send_failures
            );
            // A third of the run's messages are produced during the outage: with the host down
            // all of them wait; with migration only the half recorded on `a` do.
            assert!(f.latency_ms.p50 > 500.0, "seed {seed}: {:?}", f.latency_ms);
            assert!(m.latency_ms.p50 < 30.0, "seed {seed}: {:?}", m.latency_ms);
            assert_eq!(f.applied, 3000);
            assert_eq!(m.applied, 3000);
        }
    }

    /// The [Coherence+Hibernate] post's HA failure without a distributed destination (`routing =
    /// "none"`): a unit is scoped to one server's destination. The producers fail over from `a` to
    /// `b`; the messages `a` held when it crashed come back later and are applied after newer ones
    /// of their units, which `b` (another destination, another unit of the same name) delivered.
    #[test]
    fn without_routing_failover_splits_units_across_servers() {
        let sc = cluster("routing = \"none\"", "", "\"a\", \"b\"", Some("5050ms"));
        let mut worst = 0;
        for seed in 1..=3 {
            let m = run(&sc, "unit_of_order", seed);
            assert_eq!(m.coverage.send_failures, 0);
            assert!(m.coverage.failovers > 0);
            assert_eq!(m.applied, 3000);
            worst = worst.max(m.ordering_violations);
        }
        assert!(worst > 10, "{worst}");
    }

    /// Three members (alpha, beta, gamma: 35, 29 and 36 of the 100 units by the hash), two
    /// consumers each, 300/s for 10s. Gamma's two consumers run 4 times slower from 1s to 6s, so
    /// a backlog of its units builds up there; `leave` is added to the faults (the operator's
    /// `member_leave` of gamma, if any).
    fn three_members(params: &str, leave: &str) -> Scenario {
        scenario(&format!(
            r#"
strategies = ["unit_of_order"]
[workload]
messages = 3000
rate = "300/s"
keys = 100
[producers]
count = 3
key_ownership = "owned"
connect = "spread"
reconnect_delay = "500ms"
[[broker]]
name = "alpha"
[[broker]]
name = "beta"
[[broker]]
name = "gamma"
[network]
kind = "idle_forward"
[consumers]
count = 6
service = {{ dist = "exponential", mean = "15ms" }}
connect = "spread"
[[fault]]
kind = "slow_consumer"
consumer = 2
factor = 4.0
at = "1s"
for = "5s"
[[fault]]
kind = "slow_consumer"
consumer = 5
factor = 4.0
at = "1s"
for = "5s"
{leave}
[strategy.unit_of_order]
{params}
"#
        ))
    }

    const GAMMA_LEAVES: &str =
        "[[fault]]\nkind = \"member_leave\"\nbroker = \"gamma\"\nat = \"4s\"\nfor = \"3s\"\n";

    /// Weakness ([W2]: removing a member moves its units to another member; [WebLogic UoO]: the
    /// hash is of the unit name and the members): gamma leaves the distributed queue at 4s with a
    /// backlog of its units and is added back at 7s. Hash routing sends those units' new
    /// messages to alpha and beta, which deliver them while the older ones still wait at gamma
    /// (each member keeps its own units' state): ordering violations, none without the leave.
    #[test]
    fn a_member_leaving_moves_its_units_and_reorders_them_under_hash_routing() {
        let calm = three_members("routing = \"hash\"", "");
        let left = three_members("routing = \"hash\"", GAMMA_LEAVES);
        for seed in 1..=2 {
            let c = run(&calm, "unit_of_order", seed);
            assert_eq!(c.ordering_violations, 0, "seed {seed}");
            let m = run(&left, "unit_of_order", seed);
            assert!(m.ordering_violations > 50, "seed {seed}: {m:?}");
            assert_eq!(m.coverage.send_failures, 0, "seed {seed}");
            assert_eq!(m.applied, 3000, "seed {seed}");
        }
    }

    /// Strength: the Path Service's persistent map keeps each unit on its recorded member, so
    /// the units recorded on gamma are not moved; their sends fail while gamma is out of the list
    /// and the producers retry them: order holds, availability pays (the median latency).
    #[test]
    fn the_path_service_keeps_order_through_a_member_leave() {
        let sc = three_members("routing = \"path_service\"", GAMMA_LEAVES);
        for seed in 1..=2 {
            let m = run(&sc, "unit_of_order", seed);
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert!(m.coverage.send_failures > 0, "seed {seed}");
            assert!(m.latency_ms.p50 > 500.0, "seed {seed}: {:?}", m.latency_ms);
            assert_eq!(m.applied, 3000, "seed {seed}");
        }
    }

    /// Messages without the UoO name belong to no unit: with several consumers they reorder.
    #[test]
    fn messages_without_a_unit_are_not_ordered() {
        let sc = one_broker("\"unit_of_order\"", "group_header_missing = 0.5", "");
        let m = run(&sc, "unit_of_order", 1);
        assert!(m.ordering_violations > 0, "{m:?}");
        let all = one_broker("\"unit_of_order\"", "", "");
        assert_eq!(run(&all, "unit_of_order", 1).ordering_violations, 0);
    }

    fn view(key: u32) -> MsgView {
        MsgView {
            id: u64::from(key),
            key,
            seq: 0,
            timestamp: 0,
            producer: 0,
            redeliveries: 0,
            group: Some(key),
        }
    }

    fn ctx(up: &[bool]) -> RouteCtx<'_> {
        RouteCtx {
            now: 0,
            producer: 0,
            connected: 0,
            up,
            held_since: None,
        }
    }

    /// Hash routing depends on the configured members only: stable, spread over both, never
    /// rerouted when the member is down; a message without a unit goes to the connected broker.
    #[test]
    fn hash_routing_is_fixed_by_the_configured_members() {
        let members = ["a", "b"];
        let mut s = UnitOfOrder::new(&members, 50, false, UnitOfOrderParams::default()).unwrap();
        let on_a = (0..50).filter(|&u| hash_member(u, &members) == 0).count();
        assert!((15..=35).contains(&on_a), "{on_a}");
        for u in 0..50 {
            let m = hash_member(u, &members);
            assert_eq!(s.route(&ctx(&[true, true]), &view(u)), Route::Broker(m));
            let mut up = [true, true];
            up[m as usize] = false;
            assert_eq!(s.route(&ctx(&up), &view(u)), Route::Fail { block: true });
        }
        let mut free = view(3);
        free.group = None;
        assert_eq!(s.route(&ctx(&[false, true]), &free), Route::Connected);
        // Reversing the member order does not move a unit (rendezvous hashing).
        assert!((0..50).all(|u| hash_member(u, &["b", "a"]) == 1 - hash_member(u, &members)));
    }

    /// A member leaving the list gives its units to their next member by the hash, the other
    /// units stay; its return moves them back; with no member listed every unit send fails. The
    /// Path Service keeps a recorded unit on its member (failing while it is out) and gives new
    /// units to members in the list only.
    #[test]
    fn a_member_leaving_moves_only_its_units_and_back() {
        let members = ["a", "b", "c"];
        let up = [true, true, true];
        let mut s = UnitOfOrder::new(&members, 60, false, UnitOfOrderParams::default()).unwrap();
        let ctl = &mut Control::default();
        s.on_world(1, WorldChange::MemberLeft(2), ctl);
        let mut moved = 0;
        for u in 0..60 {
            let before = hash_member(u, &members);
            let now = s.route(&ctx(&up), &view(u));
            if before == 2 {
                moved += 1;
                assert_eq!(now, Route::Broker(hash_member(u, &["a", "b"])), "unit {u}");
            } else {
                assert_eq!(now, Route::Broker(before), "unit {u}");
            }
        }
        assert!(moved > 10, "{moved}");
        s.on_world(2, WorldChange::MemberJoined(2), ctl);
        for u in 0..60 {
            assert_eq!(
                s.route(&ctx(&up), &view(u)),
                Route::Broker(hash_member(u, &members))
            );
        }
        for b in 0..3 {
            s.on_world(3, WorldChange::MemberLeft(b), ctl);
        }
        assert_eq!(s.route(&ctx(&up), &view(0)), Route::Fail { block: true });

        let params = UnitOfOrderParams {
            routing: Routing::PathService,
            on_send_failure: OnSendFailure::Buffer,
            path_service_broker: None,
            path_service_migratable: false,
        };
        let mut p = UnitOfOrder::new(&members, 10, false, params).unwrap();
        assert_eq!(p.route(&ctx(&up), &view(0)), Route::Broker(0));
        assert_eq!(p.route(&ctx(&up), &view(1)), Route::Broker(1));
        p.on_world(1, WorldChange::MemberLeft(1), ctl);
        assert_eq!(p.route(&ctx(&up), &view(1)), Route::Fail { block: false });
        // A new unit skips the member out of the list.
        assert_eq!(p.route(&ctx(&up), &view(2)), Route::Broker(2));
        assert_eq!(p.route(&ctx(&up), &view(3)), Route::Broker(0));
        p.on_world(2, WorldChange::MemberJoined(1), ctl);
        assert_eq!(p.route(&ctx(&up), &view(1)), Route::Broker(1));
    }

    /// The Path Service records a unit's member at its first send (round-robin over members up)
    /// and keeps it, failing while that member or the (non-migratable) host is down.
    #[test]
    fn path_service_records_the_first_choice() {
        let params = UnitOfOrderParams {
            routing: Routing::PathService,
            on_send_failure: OnSendFailure::Buffer,
            path_service_broker: Some("b".into()),
            path_service_migratable: false,
        };
        let mut s = UnitOfOrder::new(&["a", "b", "c"], 10, false, params).unwrap();
        let all = [true, true, true];
        assert_eq!(s.route(&ctx(&all), &view(0)), Route::Broker(0));
        assert_eq!(s.route(&ctx(&all), &view(1)), Route::Broker(1));
        // `c` is down: unit 2 is load-balanced to the next member up.
        assert_eq!(
            s.route(&ctx(&[true, true, false]), &view(2)),
            Route::Broker(0)
        );
        assert_eq!(s.route(&ctx(&all), &view(3)), Route::Broker(1));
        // Unit 0 stays on `a`, even while `a` is down.
        assert_eq!(s.route(&ctx(&all), &view(0)), Route::Broker(0));
        let fail = Route::Fail { block: false };
        assert_eq!(s.route(&ctx(&[false, true, true]), &view(0)), fail);
        // Host `b` down: no lookup, even for a unit on `a`.
        assert_eq!(s.route(&ctx(&[true, false, true]), &view(0)), fail);
        assert_eq!(s.route(&ctx(&[true, false, true]), &view(4)), fail);
        assert!(UnitOfOrder::new(
            &["a"],
            1,
            false,
            UnitOfOrderParams {
                path_service_broker: Some("x".into()),
                ..UnitOfOrderParams::default()
            }
        )
        .is_err());
    }

    // --- Direct tests of the unit states: `select` and the hooks with hand-built contexts.

    use crate::test_util::select_on;
    use sim::strategy::Control;

    /// Message `id` of unit `unit`.
    fn unit_msg(id: u64, unit: u32) -> MsgView {
        MsgView { id, ..view(unit) }
    }

    /// `select` of `msg` at `broker` with consumers 0 and 1 free: the consumer chosen.
    fn offer(s: &mut UnitOfOrder, broker: u16, msg: MsgView) -> Result<u32, Select> {
        select_on(
            s,
            broker,
            0,
            &[(0, 5), (1, 5)],
            &msg,
            &mut Control::default(),
        )
    }

    fn uoo(brokers: usize, routing: Routing) -> UnitOfOrder {
        let names: Vec<String> = (0..brokers).map(|b| format!("m{b}")).collect();
        let members: Vec<&str> = names.iter().map(String::as_str).collect();
        let params = UnitOfOrderParams {
            routing,
            ..UnitOfOrderParams::default()
        };
        UnitOfOrder::new(&members, 4, false, params).unwrap()
    }

    /// Hash routing's member of each unit, as an independent implementation computes it (FNV-1a
    /// 64 over the unit's 4 little-endian bytes and the member's name, MurmurHash3's fmix64,
    /// highest score wins): the routing a scenario's results depend on.
    #[test]
    fn hash_routing_matches_an_independent_computation() {
        let three: Vec<u16> = (0..16).map(|u| hash_member(u, &["a", "b", "c"])).collect();
        assert_eq!(three, [1, 0, 1, 2, 2, 0, 0, 1, 2, 2, 2, 2, 2, 2, 0, 1]);
        let two: Vec<u16> = (0..16).map(|u| hash_member(u, &["ms1", "ms2"])).collect();
        assert_eq!(two, [0, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 0, 1, 0]);
    }

    #[test]
    fn without_routing_each_server_keeps_its_own_units() {
        // Unit 0 in flight at server 0 does not hold unit 0 at server 1, only at server 0.
        let mut s = uoo(2, Routing::None);
        assert_eq!(offer(&mut s, 0, unit_msg(1, 0)), Ok(0));
        assert!(offer(&mut s, 1, unit_msg(2, 0)).is_ok());
        assert_eq!(
            offer(&mut s, 0, unit_msg(3, 0)),
            Err(Select::HoldWhileMembers)
        );
        assert_eq!(
            offer(&mut s, 1, unit_msg(4, 0)),
            Err(Select::HoldWhileMembers)
        );
        // The message in flight itself (back from a redelivery delay) may go again.
        assert!(offer(&mut s, 0, unit_msg(1, 0)).is_ok());
    }

    /// Hash routing keeps a unit's state at the member its messages were routed to ([WebLogic
    /// UoO]: a unit is one "within a destination", and each member is a destination): before any
    /// membership change a unit has one member, so a message the engine forwarded to another
    /// broker still waits for its predecessor; after a leave moves the unit, the new member's
    /// messages do not wait for the old member's.
    #[test]
    fn hash_routing_keeps_a_units_state_at_the_member_it_was_routed_to() {
        let members = ["m0", "m1"];
        let u = (0..50).find(|&u| hash_member(u, &members) == 0).unwrap();
        let up = [true, true];
        let mut s = UnitOfOrder::new(&members, 50, false, UnitOfOrderParams::default()).unwrap();
        let msg = |id| MsgView { id, ..view(u) };
        assert_eq!(s.route(&ctx(&up), &msg(1)), Route::Broker(0));
        assert_eq!(s.route(&ctx(&up), &msg(2)), Route::Broker(0));
        assert_eq!(offer(&mut s, 0, msg(1)), Ok(0));
        // Message 2 forwarded to m1 by the engine: still m0's unit, held behind message 1.
        assert_eq!(offer(&mut s, 1, msg(2)), Err(Select::HoldWhileMembers));
        let ctl = &mut Control::default();
        s.on_world(5, WorldChange::MemberLeft(0), ctl);
        assert_eq!(s.route(&ctx(&up), &msg(3)), Route::Broker(1));
        // Message 3 was routed to m1: m1's state of the unit, free while m0's still waits.
        assert_eq!(offer(&mut s, 1, msg(3)), Ok(0));
        assert_eq!(offer(&mut s, 0, msg(2)), Err(Select::HoldWhileMembers));
    }

    /// Unit 0's message 1 in flight from broker `from`; message 2 of unit 0 offered at `held`
    /// (held there); message 1 settles: the redispatch wake-ups asked for.
    fn completion_wakes(brokers: usize, from: u16, held: u16) -> Vec<(Time, u64)> {
        let mut s = uoo(brokers, Routing::Hash);
        assert_eq!(offer(&mut s, from, unit_msg(1, 0)), Ok(0));
        assert!(matches!(
            offer(&mut s, held, unit_msg(2, 0)),
            Err(Select::Hold | Select::HoldWhileMembers)
        ));
        let ctl = &mut Control::default();
        s.on_settled(7, &unit_msg(1, 0), ctl);
        assert!(
            offer(&mut s, held, unit_msg(2, 0)).is_ok(),
            "the unit is free"
        );
        ctl.wakes()
    }

    #[test]
    fn completing_a_unit_redispatches_every_broker_only_if_another_held_it() {
        // The delivering broker is dispatched next anyway; another one is woken (at once).
        assert_eq!(completion_wakes(2, 1, 0), vec![(7, 0)]);
        assert_eq!(completion_wakes(2, 0, 1), vec![(7, 0)]);
        assert_eq!(completion_wakes(2, 1, 1), vec![]);
        assert_eq!(completion_wakes(64, 63, 63), vec![]);
        assert_eq!(completion_wakes(64, 63, 0), vec![(7, 0)]);
        // Beyond 64 brokers the held set does not fit a bit each: any hold wakes every broker.
        assert_eq!(completion_wakes(65, 0, 0), vec![(7, 0)]);
    }

    /// A held message is a promise (asking again changes nothing until its unit completes, so
    /// the broker skips it), and the unit completing withdraws it at every broker that held one
    /// of the unit's messages, and only there. Beyond 64 brokers nothing is promised.
    #[test]
    fn completing_a_unit_withdraws_the_promises_of_the_brokers_that_held_it() {
        let mut s = uoo(3, Routing::Hash);
        assert_eq!(offer(&mut s, 1, unit_msg(1, 0)), Ok(0));
        assert_eq!(
            offer(&mut s, 2, unit_msg(2, 0)),
            Err(Select::HoldWhileMembers)
        );
        assert_eq!(
            offer(&mut s, 0, unit_msg(3, 0)),
            Err(Select::HoldWhileMembers)
        );
        assert!(offer(&mut s, 1, unit_msg(4, 1)).is_ok(), "another unit");
        let ctl = &mut Control::default();
        s.on_settled(7, &unit_msg(4, 1), ctl);
        assert!(ctl.holds_changes().is_empty(), "nothing held unit 1");
        s.on_settled(7, &unit_msg(1, 0), ctl);
        assert_eq!(ctl.holds_changes(), vec![0, 2]);
        let mut s = uoo(65, Routing::Hash);
        assert_eq!(offer(&mut s, 1, unit_msg(1, 0)), Ok(0));
        assert_eq!(offer(&mut s, 0, unit_msg(2, 0)), Err(Select::Hold));
    }

    #[test]
    fn a_consumer_leaving_completes_the_units_it_held_at_that_broker() {
        let mut s = uoo(2, Routing::None);
        let ctl = &mut Control::default();
        assert_eq!(offer(&mut s, 0, unit_msg(1, 0)), Ok(0));
        assert_eq!(offer(&mut s, 0, unit_msg(2, 1)), Ok(1));
        assert_eq!(offer(&mut s, 1, unit_msg(3, 2)), Ok(0));
        s.on_detach(0, 0, 0, ctl);
        // Unit 0's message is back in the queue: any message of the unit may go first.
        assert_eq!(offer(&mut s, 0, unit_msg(4, 0)), Ok(0));
        // Consumer 1's unit at broker 0 and consumer 0's at broker 1 are still in flight.
        assert_eq!(
            offer(&mut s, 0, unit_msg(5, 1)),
            Err(Select::HoldWhileMembers)
        );
        assert_eq!(
            offer(&mut s, 1, unit_msg(6, 2)),
            Err(Select::HoldWhileMembers)
        );
    }

    /// Built from a one-broker scenario with `[redelivery] mode = "<mode>"`.
    fn built_with_redelivery(mode: &str) -> UnitOfOrder {
        let sc = one_broker(
            "\"unit_of_order\"",
            "",
            &format!("[redelivery]\nmode = \"{mode}\"\n"),
        );
        <UnitOfOrder as crate::Named>::build(&sc, UnitOfOrderParams::default()).unwrap()
    }

    #[test]
    fn a_message_waiting_out_a_non_blocking_delay_keeps_its_unit_when_its_consumer_leaves() {
        // Non-blocking: the rolled-back message waits at the broker, no longer its consumer's,
        // so that consumer leaving does not free the unit. Blocking: it waits in the consumer's
        // session, and goes back to the queue (the unit free) when the consumer leaves.
        for (mode, held) in [("non_blocking", true), ("blocking", false)] {
            let mut s = built_with_redelivery(mode);
            let ctl = &mut Control::default();
            assert_eq!(offer(&mut s, 0, unit_msg(1, 0)), Ok(0));
            let failed = Outcome::Failed(sim::history::FailReason::Outage);
            s.on_handled(0, 0, &unit_msg(1, 0), &failed, ctl);
            s.on_detach(0, 0, 0, ctl);
            let next = offer(&mut s, 0, unit_msg(2, 0));
            assert_eq!(next.is_err(), held, "{mode}");
        }
    }

    #[test]
    fn a_late_failure_of_a_message_whose_unit_moved_on_leaves_the_unit_alone() {
        // Non-blocking. Consumer 0 blips while processing message 1 (its unit is complete: the
        // message is back in the queue) and gets message 2 of the unit; then 1's processing
        // fails. When 0 leaves again, 2 goes back and the unit is free for message 3.
        let mut s = built_with_redelivery("non_blocking");
        let ctl = &mut Control::default();
        let only_0 = |s: &mut UnitOfOrder, m: MsgView| {
            select_on(s, 0, 0, &[(0, 5)], &m, &mut Control::default())
        };
        assert_eq!(only_0(&mut s, unit_msg(1, 0)), Ok(0));
        s.on_detach(0, 0, 0, ctl);
        assert_eq!(only_0(&mut s, unit_msg(2, 0)), Ok(0));
        let failed = Outcome::Failed(sim::history::FailReason::Outage);
        s.on_handled(0, 0, &unit_msg(1, 0), &failed, ctl);
        assert_eq!(
            only_0(&mut s, unit_msg(3, 0)),
            Err(Select::HoldWhileMembers)
        );
        s.on_detach(0, 0, 0, ctl);
        assert_eq!(only_0(&mut s, unit_msg(3, 0)), Ok(0));
    }
}
