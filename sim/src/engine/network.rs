//! The network of brokers, in one of two ways (`[network] kind`):
//!
//! - `bridge`, ActiveMQ's demand-forwarding bridge (`DemandForwardingBridgeSupport`,
//!   `ConduitBridge`): while a peer has consumers attached (its demand, one hop: `networkTTL` 1),
//!   every other broker that is up has a bridge toward it, one more consumer of its queue with
//!   `[network] prefetch` credit. Dispatch offers it to the strategy's `select` after the local
//!   consumers, as consumer `consumers.count + peer` (the bridge's subscription copies the remote
//!   consumer's, at equal priority: it can own a message group or be the exclusive consumer). A
//!   message it takes first reaches the bridge's local consumer, a draw of the source's
//!   `dispatch_latency` (none without one; in the queue's order), and goes on the wire to the
//!   peer then (`remoteBroker.asyncRequest`); it travels `forward_delay`, the peer stores it and
//!   answers, and the answer travels `forward_delay` back: only then does the source ack the
//!   message and the bridge's credit come back (the window is a round trip). A message that came over a bridge is never offered to a bridge again
//!   (`networkTTL` 1 and the bridge's loop suppression), so it waits for a local consumer.
//!
//!   The bridge's window at a crash of the source: the source acks a forward only when the peer's
//!   response comes back (`localBroker.oneway(new MessageAck(..))` in the callback: one
//!   individual ack per message, none batched), so everything taken and not acked stays in its
//!   store. What the bridge had not sent yet is stranded until the source restarts (lost if its
//!   store is not persistent); what was already on the wire reaches the peer, which stores and
//!   delivers it, and the source's copy, forwarded again after the restart, is dropped by the
//!   peer's cursor audit as a duplicate send (`AbstractStoreCursor.recoverMessage`): nothing is
//!   modelled for it. So what a crash strands depends on where each forward is at that instant.
//!   A peer that dies sends the messages travelling to it back to their source.
//! - `idle_forward`: a broker with no consumers at all forwards its whole store to the first
//!   peer that is up and has some (store-and-forward, WebLogic distributed destinations).

use super::broker::Bridge;
use super::events::Ev;
use super::state::Loc;
use super::walk::walk;
use super::{Engine, Fx};
use crate::history::Observer;

impl<O: Observer> Engine<'_, O> {
    /// The consumer id under which strategies see the bridge toward `peer`.
    #[inline]
    pub(super) fn bridge_id(&self, peer: u16) -> u32 {
        walk!();
        self.sc.consumers.count + u32::from(peer)
    }

    /// A forwarded message reaches its peer, which stores it (and a bridge's credit comes back);
    /// if the peer went down it stays with the sender.
    pub(super) fn forward_arrive(&mut self, slot: u32, id: u64) {
        walk!();
        let m = self.w.slab.get(slot);
        let Loc::Forwarding {
            from,
            to,
            due,
            orphan,
        } = m.loc
        else {
            return;
        };
        // An arrival of an earlier trip, recalled by a crash: not this one.
        if m.view.id != id || due != self.now as u32 {
            return;
        }
        // An orphan's bridge closed with its source: no credit to give back.
        let bridged = self.bridged() && !orphan;
        let mut was_full = false;
        if self.w.brokers[to as usize].is_up() {
            self.w.slab.get_mut(slot).crossed = true;
            self.enqueue_back(to, slot);
            if bridged {
                was_full = self.answer_forward(from, to);
            }
            self.dispatch(to);
        } else {
            was_full = bridged && self.bridge_landed(from, to, None);
            self.w.slab.get_mut(slot).loc = Loc::Queued(from);
            self.w.brokers[from as usize].store(slot);
            self.dispatch(from);
        }
        if was_full {
            self.dispatch(from);
        }
    }

    /// The peer `to` stored a forward of `from`'s bridge and answers: the answer travels
    /// `forward_delay` back, and `from` acks the message to its bridge only then
    /// (`DemandForwardingBridgeSupport`: the `MessageAck` is sent in the response's callback), so
    /// the credit is held for the whole round trip [A19]. Over a link without delay the answer is
    /// there at once: returns whether the bridge had used all its credit, as `bridge_landed`.
    fn answer_forward(&mut self, from: u16, to: u16) -> bool {
        let delay = self.sc.network.forward_delay.0;
        if delay == 0 {
            return self.bridge_landed(from, to, None);
        }
        let bridges = self.w.brokers[from as usize].bridges_mut();
        if let Some(b) = bridges.iter().find(|b| b.peer == to) {
            let link = b.link;
            self.q
                .push(self.now + delay, Ev::BridgeAck { from, to, link });
        }
        false
    }

    /// The answer to a forward of bridge `link` from `from` to `to` is back: the message is acked
    /// and its credit returns. A bridge closed by `from`'s crash since is gone: nothing returns.
    pub(super) fn bridge_ack(&mut self, from: u16, to: u16, link: u32) {
        walk!();
        if self.bridge_landed(from, to, Some(link)) {
            self.dispatch(from);
        }
    }

    /// One message of the bridge `from` -> `to` (`link`, or whichever bridge leads there) is no
    /// longer in flight. Returns whether the bridge had used all its credit and still has demand
    /// (the source may dispatch to it again).
    fn bridge_landed(&mut self, from: u16, to: u16, link: Option<u32>) -> bool {
        let prefetch = self.sc.network.prefetch;
        let bridges = self.w.brokers[from as usize].bridges_mut();
        let Some(i) = bridges
            .iter()
            .position(|b| b.peer == to && link.is_none_or(|l| b.link == l))
        else {
            return false;
        };
        let was_full = bridges[i].in_flight >= prefetch;
        bridges[i].in_flight = bridges[i].in_flight.saturating_sub(1);
        if bridges[i].in_flight == 0 && !bridges[i].demand {
            bridges.remove(i);
        }
        was_full && bridges.get(i).is_some_and(|b| b.demand)
    }

    /// Broker `b` may have lost its last consumer: if none is left (once what waits is done),
    /// its demand is lost.
    pub(super) fn demand_lost_if_none(&mut self, b: u16) {
        walk!();
        if self.waiting() {
            self.then(Fx::DemandLost(b));
        } else if self.w.brokers[b as usize].attached().is_empty() {
            self.demand_lost(b);
        }
    }

    /// Broker `b` may have gained its first consumer: if it has just one (once what waits is
    /// done), it has demand.
    pub(super) fn demand_gained_if_first(&mut self, b: u16) {
        walk!();
        if self.waiting() {
            self.then(Fx::DemandGained(b));
        } else if self.w.brokers[b as usize].attached().len() == 1 {
            self.demand_gained(b);
        }
    }

    /// Broker `p` has consumers again: every other broker that is up opens a bridge toward it.
    pub(super) fn demand_gained(&mut self, p: u16) {
        walk!();
        if !self.bridged() {
            return;
        }
        for s in 0..self.w.brokers.len() as u16 {
            self.flush();
            if s != p && self.w.brokers[s as usize].is_up() {
                self.open_bridge(s, p);
            }
        }
    }

    /// Broker `p` has no consumer left (or went down): no bridge leads to it any more. What the
    /// bridges have in flight goes on (the peer stores it and acks), unless `p` is down.
    pub(super) fn demand_lost(&mut self, p: u16) {
        walk!();
        if !self.bridged() {
            return;
        }
        for s in 0..self.w.brokers.len() as u16 {
            self.flush();
            if s != p {
                self.close_bridge(s, p);
            }
        }
    }

    /// Broker `s` (up) gets a bridge toward `p`, last in its dispatch order.
    fn open_bridge(&mut self, s: u16, p: u16) {
        let broker = &mut self.w.brokers[s as usize];
        let bridges = broker.bridges_mut();
        // Demand back while forwards are unacked: the same bridge, its credit still out.
        let (link, in_flight, sent) = match bridges.iter().position(|b| b.peer == p) {
            Some(i) if bridges[i].demand => return,
            Some(i) => {
                let old = bridges.remove(i);
                (old.link, old.in_flight, old.sent)
            }
            None => (broker.new_link(), 0, 0),
        };
        broker.bridges_mut().push(Bridge {
            peer: p,
            link,
            in_flight,
            demand: true,
            sent,
        });
        let id = self.bridge_id(p);
        self.strategy.on_attach(self.now, s, id, &mut self.ctl);
        self.w.brokers[s as usize].members_changed();
        self.apply_control();
        self.dispatch(s);
    }

    /// Broker `s`'s bridge toward `p` leaves its queue (the strategy forgets it, as for a consumer).
    fn close_bridge(&mut self, s: u16, p: u16) {
        let bridges = self.w.brokers[s as usize].bridges_mut();
        let Some(i) = bridges.iter().position(|b| b.peer == p && b.demand) else {
            return;
        };
        if bridges[i].in_flight == 0 {
            bridges.remove(i);
        } else {
            bridges[i].demand = false;
        }
        let id = self.bridge_id(p);
        self.strategy.on_detach(self.now, s, id, &mut self.ctl);
        self.w.brokers[s as usize].members_changed();
        self.apply_control();
        self.dispatch(s);
    }

    /// Broker `b` is going down (`bridge`): its bridges close; every message its bridges had
    /// taken and not yet sent (stranded: it stays with `b`) or travelling to it (it goes back to
    /// its source) returns to the head of its source's queue, in message order. What `b`'s
    /// bridges had sent goes on to its peer (an orphan: `b`'s copy, sent again after the
    /// restart, is a duplicate the peer drops).
    pub(super) fn bridges_broker_down(&mut self, b: u16) {
        walk!();
        let mut recalled: Vec<(u64, u32, u16)> = Vec::new();
        for slot in 0..self.w.slab.msgs.len() as u32 {
            let m = self.w.slab.get_mut(slot);
            if let Loc::Forwarding {
                from,
                to,
                ref mut orphan,
                ..
            } = m.loc
            {
                if to == b || (from == b && m.arrives > self.now) {
                    recalled.push((m.view.id, slot, from));
                } else if from == b {
                    *orphan = true;
                }
            }
        }
        recalled.sort_unstable();
        for &(_, slot, from) in recalled.iter().rev() {
            self.w.slab.get_mut(slot).loc = Loc::Queued(from);
            self.w.brokers[from as usize].store_first(slot);
            if from != b {
                self.bridge_landed(from, b, None);
            }
        }
        let closed = std::mem::take(self.w.brokers[b as usize].bridges_mut());
        for br in closed.iter().filter(|br| br.demand) {
            let id = self.bridge_id(br.peer);
            self.strategy.on_detach(self.now, b, id, &mut self.ctl);
            self.w.brokers[b as usize].members_changed();
        }
        self.apply_control();
        // No bridge leads to `b` any more; the sources dispatch what came back.
        self.demand_lost(b);
        recalled.sort_unstable_by_key(|&(_, _, from)| from);
        recalled.dedup_by_key(|&mut (_, _, from)| from);
        for &(_, _, from) in &recalled {
            if from != b {
                self.dispatch(from);
            }
        }
    }

    /// Broker `b` is back (`bridge`): it opens a bridge toward every peer that is up and has
    /// consumers.
    pub(super) fn bridges_broker_up(&mut self, b: u16) {
        walk!();
        for p in 0..self.w.brokers.len() as u16 {
            let peer = &self.w.brokers[p as usize];
            if p != b && peer.is_up() && !peer.attached().is_empty() {
                self.open_bridge(b, p);
            }
        }
    }
}
