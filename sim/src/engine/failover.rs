//! Broker failover, in one place: a broker crashes (its clients lose their connections; a
//! non-persistent store loses what it held) and restarts; producers and consumers reconnect
//! through their failover lists after their reconnect delay.

use super::events::Ev;
use super::producer::Attempt;
use super::state::Loc;
use super::Engine;
use crate::history::{DiscardReason, Event, Node, Observer};
use crate::scenario::ConsumerMode;
use crate::strategy::WorldChange;

impl<O: Observer> Engine<'_, O> {
    /// Broker `b` goes down: its clients lose their connection; a non-persistent store loses
    /// everything it held.
    pub(super) fn broker_crash(&mut self, b: u16) {
        if !self.w.brokers[b as usize].crash() {
            return;
        }
        self.w.broker_up[b as usize] = false;
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Broker(b),
        });
        if self.bridged() {
            self.bridges_broker_down(b);
        }
        let attached = self.w.brokers[b as usize].take_attached();
        for &c in &attached {
            self.consumer_lost_broker(c, b);
        }
        for p in 0..self.w.producers.len() as u32 {
            if self.w.producers[p as usize].connected_to() == Some(b) {
                self.producer_lost_broker(p);
            }
        }
        if !self.w.brokers[b as usize].persistent() {
            self.w.brokers[b as usize].clear_queue();
            for slot in 0..self.w.slab.msgs.len() as u32 {
                let at_b = match self.w.slab.get(slot).loc {
                    Loc::Queued(x) | Loc::Held(x) => x == b,
                    Loc::Forwarding { from, .. } => from == b,
                    _ => false,
                };
                if at_b {
                    let msg = self.msg_ref(slot);
                    // A copy the strategy took over (and still holds), or one already applied, is
                    // not lost with the broker's.
                    let kept = self.w.held.get(&msg.id).is_some_and(|h| !h.dropped);
                    if !kept && !self.w.slab.get(slot).applied {
                        self.w.held.remove(&msg.id);
                        self.emit(Event::Discard {
                            t: self.now,
                            msg,
                            reason: DiscardReason::BrokerCrash,
                        });
                    }
                    self.w.slab.release(slot);
                }
            }
        }
        self.apply_control();
        self.world_change(WorldChange::BrokerCrashed(b));
    }

    /// Broker `b` is back; its store is dispatched again (to its bridges toward peers with
    /// consumers, or, `idle_forward`, forwarded to where the consumers are).
    pub(super) fn broker_restart(&mut self, b: u16) {
        if !self.w.brokers[b as usize].recover() {
            return;
        }
        self.w.broker_up[b as usize] = true;
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Broker(b),
        });
        if self.bridged() {
            self.bridges_broker_up(b);
        }
        self.world_change(WorldChange::BrokerRestarted(b));
        self.dispatch(b);
    }

    /// The producer's broker went down: drop the connection and try the list again later.
    pub(super) fn producer_lost_broker(&mut self, p: u32) {
        if self.w.producers[p as usize].lose_broker() {
            let at = self.now + self.sc.producers.reconnect_delay.0;
            self.q.push(at, Ev::ProducerReconnect(p));
        }
    }

    /// A connection attempt: the first broker of the list that is up; else try again later.
    pub(super) fn producer_reconnect(&mut self, p: u32) {
        let brokers = &self.w.brokers;
        let attempt = self.w.producers[p as usize].try_connect(|b| brokers[b as usize].is_up());
        let (b, failover, buffered) = match attempt {
            Attempt::AlreadyConnected => return,
            Attempt::NoneUp => {
                let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
                self.q.push(at, Ev::ProducerReconnect(p));
                return;
            }
            Attempt::Connected {
                broker,
                failover,
                buffered,
            } => (broker, failover, buffered),
        };
        self.emit(Event::Connect {
            t: self.now,
            node: Node::Producer(p),
            broker: b,
            failover,
        });
        // Buffered sends go through the strategy's routing, in order, like any send.
        for slot in buffered {
            self.send(p, slot);
        }
    }

    /// The consumer's broker crashed: its connection is gone (the process goes on); it fails over.
    pub(super) fn consumer_lost_broker(&mut self, c: u32, b: u16) {
        debug_assert_eq!(self.w.consumers[c as usize].broker, Some(b));
        // The broker's attached list was already taken by the crash; detach does the rest.
        self.w.brokers[b as usize].attach(c);
        self.w.consumers[c as usize].lost_connection();
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, true);
        self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0);
    }

    pub(super) fn schedule_reconnect(&mut self, c: u32, after: u64) {
        let epoch = self.w.consumers[c as usize].epoch();
        self.q
            .push(self.now + after, Ev::ConsumerReconnect { c, epoch });
    }

    /// A connection attempt through the failover list; retried after the reconnect delay.
    pub(super) fn consumer_reconnect(&mut self, c: u32, epoch: u32) {
        let cs = &self.w.consumers[c as usize];
        if !cs.alive_in(epoch)
            || cs.broker.is_some()
            || cs.cut_off()
            || cs.is_suspended()
            || cs.is_away()
        {
            return;
        }
        if self.sc.consumers.mode == ConsumerMode::Batch && !cs.job_running {
            return;
        }
        match cs
            .list
            .iter()
            .copied()
            .find(|&b| self.w.brokers[b as usize].is_up())
        {
            Some(b) => self.attach(c, b),
            None => self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0.max(1)),
        }
    }
}
