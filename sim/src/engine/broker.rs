//! Brokers: the store (a FIFO queue per broker; returned deliveries go back to its head),
//! dispatch with prefetch through the strategy's policy, and a message's settlement (ack or
//! dead-letter queue).

use super::state::{Delivery, Loc, Msg};
use super::Engine;
use crate::history::{DiscardReason, Event, Observer};
use crate::scenario::{DeadLetter, Requeue};
use crate::strategy::{ConsumerSlot, DispatchCtx, Select};

/// How many more messages a consumer holding `load` unsettled ones may receive: up to its
/// prefetch, or (taking batches) a whole batch when it holds none and nothing before.
#[inline(always)]
fn free_of<const BATCH: bool>(load: u32, prefetch: u32) -> u32 {
    if BATCH {
        if load == 0 {
            prefetch
        } else {
            0
        }
    } else {
        prefetch.saturating_sub(load)
    }
}

impl<O: Observer> Engine<'_, O> {
    /// Stores a message at the tail of broker `b`'s queue (a send or a forward arriving).
    pub(super) fn enqueue_back(&mut self, b: u16, slot: u32) {
        self.w.slab.get_mut(slot).loc = Loc::Queued(b);
        self.w.brokers[b as usize].queue.push_back(slot);
        let msg = self.msg_ref(slot);
        self.emit(Event::Enqueue {
            t: self.now,
            msg,
            broker: b,
        });
    }

    /// Puts the deliveries in `self.w.returned` back in their brokers' queues, in message-id
    /// order (as a broker redispatches unacked messages first, in their original order; with
    /// `requeue = "head"`, ahead of everything queued). Invalid (stale) deliveries are skipped.
    pub(super) fn requeue_returned(&mut self) {
        if self.w.returned.is_empty() {
            return;
        }
        let mut returned = std::mem::take(&mut self.w.returned);
        // Pushed to the front one by one: newest first, so that they end up oldest first.
        let requeue = self.policy.requeue_lost;
        if requeue == Requeue::Head {
            returned.sort_unstable_by_key(|d| std::cmp::Reverse(d.id));
        } else {
            returned.sort_unstable_by_key(|d| d.id);
        }
        for d in &returned {
            let m = self.w.slab.get(d.slot);
            if m.r.id == d.id
                && matches!(m.loc, Loc::Delivered { delivery, .. } if delivery == d.delivery)
            {
                self.requeue_at(d.broker, d.slot, requeue);
            }
        }
        returned.clear();
        self.w.returned = returned;
    }

    /// A message taken back from a consumer is deliverable again at broker `b`: back in its
    /// queue where `[redelivery] requeue` says, and the strategy told. The one requeue of a
    /// rollback, a redelivery delay ending and a lease expiring ([`Self::requeue_at`] for a
    /// consumer leaving and a batch job's rollback).
    #[inline]
    pub(super) fn requeue(&mut self, b: u16, slot: u32) {
        self.requeue_at(b, slot, self.policy.requeue);
    }

    /// [`Self::requeue`] at `at` (a gone consumer's deliveries: `requeue_lost`; a batch job's
    /// rollback: the head).
    pub(super) fn requeue_at(&mut self, b: u16, slot: u32, at: Requeue) {
        self.w.slab.get_mut(slot).loc = Loc::Queued(b);
        self.put_back_at(b, slot, at);
        self.returned_hook(b, slot);
    }

    /// Puts a message into broker `b`'s queue at `requeue`: ahead of every queued message,
    /// behind them, or among them in production order.
    fn put_back_at(&mut self, b: u16, slot: u32, requeue: Requeue) {
        let q = &mut self.w.brokers[b as usize].queue;
        match requeue {
            Requeue::Head => q.push_front(slot),
            Requeue::Tail => q.push_back(slot),
            Requeue::Original => {
                let slab = &self.w.slab;
                let id = slab.get(slot).r.id;
                let at = q
                    .iter()
                    .position(|&s| slab.get(s).r.id > id)
                    .unwrap_or(q.len());
                q.insert(at, slot);
            }
        }
    }

    /// Tells the strategy that the message in `slot` is deliverable again at broker `b`.
    #[inline]
    fn returned_hook(&mut self, b: u16, slot: u32) {
        if !self.hooks.on_returned && !cfg!(debug_assertions) {
            return;
        }
        let view = self.view(slot);
        let before = self.ctl.requests.len();
        self.strategy.on_returned(self.now, b, &view, &mut self.ctl);
        if !self.hooks.on_returned {
            self.skipped_hook_did_nothing(before, "on_returned");
        }
    }

    /// The broker side of a consumer leaving: its unacked deliveries go back to the queue.
    pub(super) fn return_deliveries(&mut self, deliveries: impl IntoIterator<Item = Delivery>) {
        self.w.returned.extend(deliveries);
        self.requeue_returned();
    }

    /// Hands queued messages to consumers with free prefetch, as the strategy's policy decides.
    /// Network bridges toward peers with consumers (`bridge`) are offered after the local
    /// consumers; with `idle_forward` a broker without consumers forwards its store instead.
    #[inline(always)]
    pub(super) fn dispatch(&mut self, b: u16) {
        // Compiled twice, so that the receive mode costs one test per call, not per consumer.
        if self.batch_receive {
            self.dispatch_as::<true>(b)
        } else {
            self.dispatch_as::<false>(b)
        }
    }

    /// [`Self::dispatch`], with consumers taking batches (`BATCH`) or a topped-up prefetch.
    fn dispatch_as<const BATCH: bool>(&mut self, b: u16) {
        let bi = b as usize;
        if !self.w.brokers[bi].up || self.w.brokers[bi].queue.is_empty() {
            return;
        }
        let has_bridges = !self.w.brokers[bi].bridges.is_empty();
        if self.w.brokers[bi].attached.is_empty() && !has_bridges {
            if !self.bridged() {
                self.forward_all(b);
            }
            return;
        }
        let prefetch = self.sc.consumers.prefetch;
        let bridge_prefetch = self.sc.network.prefetch;
        debug_assert!(
            self.w.brokers[bi]
                .attached
                .iter()
                .all(|&c| self.w.load[c as usize] == self.w.consumers[c as usize].load()),
            "stale consumer load"
        );
        // Most arrivals under load find every consumer full: a short-circuiting scan of the dense
        // load table answers that without building the candidate list.
        let any_free = {
            let load = &self.w.load;
            let bs = &self.w.brokers[bi];
            bs.attached
                .iter()
                .any(|&c| free_of::<BATCH>(load[c as usize], prefetch) > 0)
                || (has_bridges
                    && bs
                        .bridges
                        .iter()
                        .any(|br| br.demand && br.in_flight < bridge_prefetch))
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
            let (load, consumers) = (&self.w.load, &self.w.consumers);
            cands.extend(self.w.brokers[bi].attached.iter().map(|&c| {
                let l = load[c as usize];
                debug_assert_eq!(
                    l,
                    consumers[c as usize].load(),
                    "stale load of consumer {c}"
                );
                let free = free_of::<BATCH>(l, prefetch);
                total_free += free;
                ConsumerSlot { id: c, free }
            }));
        }
        // The local consumers are `cands[..locals]`; the bridges with demand follow.
        let locals = cands.len();
        let mut bridge_free = 0u32;
        if has_bridges {
            let base = self.sc.consumers.count;
            for br in self.w.brokers[bi].bridges.iter().filter(|br| br.demand) {
                let free = bridge_prefetch.saturating_sub(br.in_flight);
                bridge_free += free;
                cands.push(ConsumerSlot {
                    id: base + u32::from(br.peer),
                    free,
                });
            }
            total_free += bridge_free;
        }
        let mut started = std::mem::take(&mut self.started_scratch);
        started.clear();
        let page = self.w.brokers[bi].page_size;
        let mut i = 0;
        while total_free > 0 && i < page {
            let Some(&slot) = self.w.brokers[bi].queue.get(i) else {
                break;
            };
            let view = self.view(slot);
            // A message that came over a bridge is offered to local consumers only (networkTTL 1).
            let offered = if locals < cands.len() && self.w.slab.get(slot).crossed {
                locals
            } else {
                cands.len()
            };
            let ctx = DispatchCtx {
                now: self.now,
                broker: b,
                consumers: &cands[..offered],
            };
            match self.strategy.select(&ctx, &view, &mut self.ctl) {
                Select::Consumer(ci) => {
                    let Some(cand) = cands[..offered].get_mut(ci).filter(|c| c.free > 0) else {
                        // A policy bug must not corrupt the world: hold the message instead.
                        debug_assert!(false, "strategy selected a full or absent consumer");
                        i += 1;
                        continue;
                    };
                    cand.free -= 1;
                    total_free -= 1;
                    let c = cand.id;
                    if i == 0 {
                        self.w.brokers[bi].queue.pop_front();
                    } else {
                        self.w.brokers[bi].queue.remove(i);
                    }
                    if ci >= locals {
                        bridge_free -= 1;
                        let peer = (c - self.sc.consumers.count) as u16;
                        let br = self.w.brokers[bi]
                            .bridges
                            .iter()
                            .position(|br| br.peer == peer && br.demand)
                            .expect("offered bridges have demand");
                        self.bridge_take(b, br, slot);
                        continue;
                    }
                    if !started.contains(&c) {
                        started.push(c);
                    }
                    self.deliver(b, c, slot);
                }
                Select::Hold => i += 1,
                // Only the local consumers were offered: later messages may still go to a bridge.
                Select::Stop if offered < cands.len() && bridge_free > 0 => i += 1,
                Select::Stop => break,
            }
        }
        self.scratch = cands;
        // Only the consumers that received something may have work to start. `start_next` may
        // re-enter dispatch (a strategy hook, a batch job ending): keep this call's list local.
        for &c in &started {
            if let (true, Some(limit)) = (BATCH, self.max_poll) {
                self.polled(c, limit);
            }
            self.start_next(c);
        }
        started.clear();
        self.started_scratch = started;
        self.apply_control();
    }

    /// The message leaves the broker for good: acked or dead-lettered.
    pub(super) fn settle(&mut self, slot: u32) {
        let view = self.view(slot);
        self.drop_held(view.id);
        self.w.slab.release(slot);
        if self.hooks.on_settled {
            self.strategy.on_settled(self.now, &view, &mut self.ctl);
        } else if cfg!(debug_assertions) {
            let before = self.ctl.requests.len();
            self.strategy.on_settled(self.now, &view, &mut self.ctl);
            self.skipped_hook_did_nothing(before, "on_settled");
        }
    }

    /// The broker's copy of message `id` is gone for good: if the strategy had taken it over and
    /// then dropped it, it is lost now.
    pub(super) fn drop_held(&mut self, id: u64) {
        if !self.w.held.is_empty() && self.w.held.get(&id).is_some_and(|h| h.dropped) {
            let h = self.w.held.remove(&id).expect("present");
            self.emit(Event::Discard {
                t: self.now,
                msg: h.msg,
                reason: DiscardReason::BufferLost,
            });
        }
    }

    /// Broker `b` gives up on a message (the redelivery limit): it moves it to its dead-letter
    /// queue or deletes it, as the policy says for this broker.
    pub(super) fn give_up(&mut self, b: u16, slot: u32) {
        let msg = self.msg_ref(slot);
        self.w.held.remove(&msg.id);
        let t = self.now;
        match self.policy.dead_letter(&self.sc.brokers[b as usize]) {
            DeadLetter::Queue => {
                self.emit(Event::DeadLetter { t, msg, broker: b });
                let m = *self.w.slab.get(slot);
                self.w.brokers[b as usize].dlq.push(m);
            }
            DeadLetter::Drop => self.emit(Event::Drop { t, msg, broker: b }),
        }
        self.settle(slot);
    }

    /// An operator moves broker `b`'s dead-letter queue back to the tail of its queue, oldest
    /// first: each message is new to the broker (its delivery count starts again) and keeps its
    /// hidden poison flag. A broker that is down cannot be asked.
    pub(super) fn dlq_replay(&mut self, b: u16) {
        if !self.w.brokers[b as usize].up || self.w.brokers[b as usize].dlq.is_empty() {
            return;
        }
        let dlq = std::mem::take(&mut self.w.brokers[b as usize].dlq);
        for m in dlq {
            self.emit(Event::Replay {
                t: self.now,
                msg: m.r,
                broker: b,
                poison: m.poison,
            });
            let slot = self.alloc(Msg {
                deliveries: 0,
                loc: Loc::Queued(b),
                crossed: false,
                ..m
            });
            self.enqueue_back(b, slot);
        }
        self.dispatch(b);
    }
}
