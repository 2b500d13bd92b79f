//! Brokers: a persistent FIFO store, up/down, dispatch with prefetch through the strategy's policy,
//! store-and-forward in a network of brokers, broker-side (non-blocking) redelivery, the dead-letter
//! queue, and broker failover (clients of a crashed broker reconnect elsewhere).

use super::{Delivery, Loc};
use crate::engine::{Engine, Ev};
use crate::history::{DiscardReason, Event, Node, Observer};
use crate::scenario::Broker;
use crate::strategy::{ConsumerSlot, DispatchCtx, Select, Strategy};
use std::collections::VecDeque;

/// One broker.
pub(crate) struct BrokerState {
    pub up: bool,
    pub persistent: bool,
    pub page_size: usize,
    /// The store, in dispatch order (redelivered messages go back to the front).
    pub queue: VecDeque<u32>,
    /// Consumers attached, in attach order.
    pub attached: Vec<u32>,
    /// Crash nesting (overlapping random crashes): up again when it returns to 0.
    pub down_depth: u32,
}

impl BrokerState {
    pub fn new(cfg: &Broker) -> Self {
        BrokerState {
            up: true,
            persistent: cfg.persistent,
            page_size: cfg.page_size as usize,
            queue: VecDeque::new(),
            attached: Vec::new(),
            down_depth: 0,
        }
    }
}

impl<S: Strategy, O: Observer> Engine<'_, S, O> {
    /// Stores a message at the tail of broker `b`'s queue (a send or a forward arriving).
    pub(crate) fn enqueue_back(&mut self, b: u16, slot: u32) {
        self.slab.get_mut(slot).loc = Loc::Queued(b);
        self.brokers[b as usize].queue.push_back(slot);
        let msg = self.msg_ref(slot);
        self.emit(Event::Enqueue {
            t: self.now,
            msg,
            broker: b,
        });
    }

    /// Puts the deliveries in `self.returned` back at the front of their brokers' queues, in
    /// message-id order (as a broker redispatches unacked messages first, in their original order).
    /// Invalid (stale) deliveries are skipped.
    pub(crate) fn requeue_returned(&mut self) {
        if self.returned.is_empty() {
            return;
        }
        let mut returned = std::mem::take(&mut self.returned);
        returned.sort_unstable_by_key(|d| std::cmp::Reverse(d.id));
        for d in &returned {
            let m = self.slab.get_mut(d.slot);
            if m.r.id == d.id
                && matches!(m.loc, Loc::Delivered { delivery, .. } if delivery == d.delivery)
            {
                m.loc = Loc::Queued(d.broker);
                self.brokers[d.broker as usize].queue.push_front(d.slot);
            }
        }
        returned.clear();
        self.returned = returned;
    }

    /// Hands queued messages to consumers with free prefetch, as the strategy's policy decides, or
    /// forwards them to a peer broker that has consumers when this one has none.
    pub(crate) fn dispatch(&mut self, b: u16) {
        let bi = b as usize;
        if !self.brokers[bi].up || self.brokers[bi].queue.is_empty() {
            return;
        }
        if self.brokers[bi].attached.is_empty() {
            self.forward_all(b);
            return;
        }
        let prefetch = self.sc.consumers.prefetch;
        debug_assert!(
            self.brokers[bi]
                .attached
                .iter()
                .all(|&c| self.load[c as usize] == self.consumers[c as usize].load()),
            "stale consumer load"
        );
        // Most arrivals under load find every consumer full: a short-circuiting scan of the dense
        // load table answers that without building the candidate list.
        let any_free = {
            let load = &self.load;
            self.brokers[bi]
                .attached
                .iter()
                .any(|&c| load[c as usize] < prefetch)
        };
        if !any_free {
            self.apply_control();
            return;
        }
        let mut cands = std::mem::take(&mut self.scratch);
        cands.clear();
        let mut total_free = 0u32;
        {
            // One pass, no per-item capacity check (the iterator's length is known).
            let (load, consumers) = (&self.load, &self.consumers);
            cands.extend(self.brokers[bi].attached.iter().map(|&c| {
                let l = load[c as usize];
                debug_assert_eq!(
                    l,
                    consumers[c as usize].load(),
                    "stale load of consumer {c}"
                );
                let free = prefetch.saturating_sub(l);
                total_free += free;
                ConsumerSlot { id: c, free }
            }));
        }
        let mut started = std::mem::take(&mut self.started_scratch);
        started.clear();
        let page = self.brokers[bi].page_size;
        let mut i = 0;
        while total_free > 0 && i < page {
            let Some(&slot) = self.brokers[bi].queue.get(i) else {
                break;
            };
            let view = self.view(slot);
            let ctx = DispatchCtx {
                now: self.now,
                broker: b,
                consumers: &cands,
            };
            match self.strategy.select(&ctx, &view, &mut self.ctl) {
                Select::Consumer(ci) => {
                    let Some(cand) = cands.get_mut(ci).filter(|c| c.free > 0) else {
                        // A policy bug must not corrupt the world: hold the message instead.
                        debug_assert!(false, "strategy selected a full or absent consumer");
                        i += 1;
                        continue;
                    };
                    cand.free -= 1;
                    total_free -= 1;
                    let c = cand.id;
                    if !started.contains(&c) {
                        started.push(c);
                    }
                    if i == 0 {
                        self.brokers[bi].queue.pop_front();
                    } else {
                        self.brokers[bi].queue.remove(i);
                    }
                    self.deliver(b, c, slot);
                }
                Select::Hold => i += 1,
                Select::Stop => break,
            }
        }
        self.scratch = cands;
        // Only the consumers that received something may have work to start. `start_next` may
        // re-enter dispatch (a strategy hook, a batch job ending): keep this call's list local.
        for &c in &started {
            self.start_next(c);
        }
        started.clear();
        self.started_scratch = started;
        self.apply_control();
    }

    /// Store-and-forward: moves the whole queue toward the first peer that is up and has consumers.
    fn forward_all(&mut self, from: u16) {
        let Some(to) = (0..self.brokers.len() as u16).find(|&p| {
            p != from
                && self.brokers[p as usize].up
                && !self.brokers[p as usize].attached.is_empty()
        }) else {
            return;
        };
        let at = self.now + self.sc.network.forward_delay.0;
        while let Some(slot) = self.brokers[from as usize].queue.pop_front() {
            let m = self.slab.get_mut(slot);
            m.loc = Loc::Forwarding { from, to };
            let (msg, id) = (m.r, m.r.id);
            self.emit(Event::Forward {
                t: self.now,
                msg,
                from,
                to,
            });
            self.q.push(at, Ev::ForwardArrive { slot, id });
        }
    }

    /// A forwarded message reaches its peer; if the peer went down it stays with the sender.
    pub(crate) fn forward_arrive(&mut self, slot: u32, id: u64) {
        let m = self.slab.get(slot);
        let Loc::Forwarding { from, to } = m.loc else {
            return;
        };
        if m.r.id != id {
            return;
        }
        if self.brokers[to as usize].up {
            self.enqueue_back(to, slot);
            self.dispatch(to);
        } else {
            self.slab.get_mut(slot).loc = Loc::Queued(from);
            self.brokers[from as usize].queue.push_back(slot);
            self.dispatch(from);
        }
    }

    /// A non-blocking redelivery delay is over: the message goes back to the head of its queue.
    pub(crate) fn redelivery_due(&mut self, slot: u32, id: u64) {
        let m = self.slab.get(slot);
        let Loc::Held(b) = m.loc else { return };
        if m.r.id != id {
            return;
        }
        self.slab.get_mut(slot).loc = Loc::Queued(b);
        self.brokers[b as usize].queue.push_front(slot);
        self.dispatch(b);
    }

    /// The message leaves the broker for good: acked or dead-lettered.
    pub(crate) fn settle(&mut self, slot: u32) {
        let view = self.view(slot);
        self.drop_held(view.id);
        self.slab.release(slot);
        self.strategy.on_settled(self.now, &view, &mut self.ctl);
    }

    /// The broker's copy of message `id` is gone for good: if the strategy had taken it over and
    /// then dropped it, it is lost now.
    fn drop_held(&mut self, id: u64) {
        if !self.held.is_empty() && self.held.get(&id).is_some_and(|h| h.dropped) {
            let h = self.held.remove(&id).expect("present");
            self.emit(Event::Discard {
                t: self.now,
                msg: h.msg,
                reason: DiscardReason::BufferLost,
            });
        }
    }

    /// Moves a message to the dead-letter queue of broker `b`.
    pub(crate) fn dead_letter(&mut self, b: u16, slot: u32) {
        let msg = self.msg_ref(slot);
        self.held.remove(&msg.id);
        self.emit(Event::DeadLetter {
            t: self.now,
            msg,
            broker: b,
        });
        self.settle(slot);
    }

    /// Broker `b` goes down: its clients lose their connection; a non-persistent store loses
    /// everything it held.
    pub(crate) fn broker_crash(&mut self, b: u16) {
        let bs = &mut self.brokers[b as usize];
        bs.down_depth += 1;
        if bs.down_depth > 1 {
            return;
        }
        bs.up = false;
        self.broker_up[b as usize] = false;
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Broker(b),
        });
        let attached = std::mem::take(&mut self.brokers[b as usize].attached);
        for &c in &attached {
            self.consumer_lost_broker(c, b);
        }
        for p in 0..self.producers.len() as u32 {
            if self.producers[p as usize].broker == Some(b) {
                self.producer_lost_broker(p);
            }
        }
        if !self.brokers[b as usize].persistent {
            self.brokers[b as usize].queue.clear();
            for slot in 0..self.slab.msgs.len() as u32 {
                let at_b = match self.slab.get(slot).loc {
                    Loc::Queued(x) | Loc::Held(x) => x == b,
                    Loc::Forwarding { from, .. } => from == b,
                    _ => false,
                };
                if at_b {
                    let msg = self.msg_ref(slot);
                    // A copy the strategy took over (and still holds), or one already applied, is
                    // not lost with the broker's.
                    let kept = self.held.get(&msg.id).is_some_and(|h| !h.dropped);
                    if !kept && !self.slab.get(slot).applied {
                        self.held.remove(&msg.id);
                        self.emit(Event::Discard {
                            t: self.now,
                            msg,
                            reason: DiscardReason::BrokerCrash,
                        });
                    }
                    self.slab.release(slot);
                }
            }
        }
        self.apply_control();
    }

    /// Broker `b` is back; its store is dispatched again (or forwarded to where the consumers are).
    pub(crate) fn broker_restart(&mut self, b: u16) {
        let bs = &mut self.brokers[b as usize];
        bs.down_depth = bs.down_depth.saturating_sub(1);
        if bs.down_depth > 0 || bs.up {
            return;
        }
        bs.up = true;
        self.broker_up[b as usize] = true;
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Broker(b),
        });
        self.dispatch(b);
    }

    /// The broker side of a consumer leaving: its unacked deliveries go back to the queue.
    pub(crate) fn return_deliveries(&mut self, deliveries: impl IntoIterator<Item = Delivery>) {
        self.returned.extend(deliveries);
        self.requeue_returned();
    }
}
