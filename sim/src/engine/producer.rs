//! Producers: a message is born (key, seq, producer clock), goes through the strategy's routing,
//! and is stored at a broker; sends that fail (a Unit-of-Order member down) are retried in order.
//! A producer without a connection buffers its sends (its failover transport: `failover.rs`).

use super::events::Ev;
use super::state::{Loc, Msg};
use super::Engine;
use crate::history::{Event, MsgRef, Observer};
use crate::strategy::{Route, RouteCtx, Strategy};
use std::collections::VecDeque;

impl<S: Strategy, O: Observer> Engine<'_, S, O> {
    /// A message is produced; it goes to the producer's broker or waits in its buffer.
    pub(super) fn arrival(&mut self) {
        let boost = self.w.poison_boost.iter().copied().fold(0.0, f64::max);
        let (key, seq, producer, poison, group) = self.keys.next(boost);
        let id = self.w.produced;
        self.w.produced += 1;
        if self.w.produced < self.sc.workload.messages {
            let gap = self.arrivals.next_gap();
            self.q.push(self.now + gap, Ev::Arrival);
        }
        let p = &self.w.producers[producer as usize];
        let res = self.sc.producers.timestamp_resolution.0.max(1);
        let clock = (self.now as i64).saturating_add(p.clock_offset).max(0) as u64;
        let timestamp = clock / res * res;
        let r = MsgRef { id, key, seq };
        let slot = self.alloc(Msg {
            r,
            timestamp,
            producer,
            poison,
            group,
            deliveries: 0,
            loc: Loc::Producer(producer),
            applied: false,
            crossed: false,
            lease_due: 0,
            leased_at: 0,
        });
        // The source database commits the new state before the message is sent.
        let src = &mut self.w.source[key as usize];
        src.state = seq + 1;
        src.timestamp = timestamp;
        src.version += 1;
        self.emit(Event::Produce {
            t: self.now,
            msg: r,
            producer,
            timestamp,
            poison,
        });
        self.send(producer, slot);
        self.phase_step();
    }

    /// A send: buffered while disconnected, queued behind earlier failed sends when those block,
    /// else routed by the strategy.
    pub(super) fn send(&mut self, p: u32, slot: u32) {
        let ps = &mut self.w.producers[p as usize];
        if ps.broker.is_none() {
            ps.buffer.push_back(slot);
        } else if ps.failed_block && !ps.failed.is_empty() {
            ps.failed.push_back(slot);
        } else if let Err(block) = self.route_and_enqueue(p, slot) {
            self.send_failed(p, slot, block);
        }
    }

    /// Asks the strategy where the send goes and stores it there; `Err(block)` if it failed.
    // Inlined into the send path (it stopped being when the message grew its lease fields).
    #[inline(always)]
    pub(super) fn route_and_enqueue(&mut self, p: u32, slot: u32) -> Result<(), bool> {
        let connected = self.w.producers[p as usize].broker.expect("connected");
        let view = self.view(slot);
        let ctx = RouteCtx {
            now: self.now,
            producer: p,
            connected,
            up: &self.w.broker_up,
        };
        let route = self.strategy.route(&ctx, &view);
        let b = match route {
            Route::Connected => connected,
            Route::Broker(b) if self.w.brokers[b as usize].up => b,
            Route::Broker(_) => return Err(true),
            Route::Fail { block } => return Err(block),
        };
        self.enqueue_back(b, slot);
        self.dispatch(b);
        Ok(())
    }

    pub(super) fn send_failed(&mut self, p: u32, slot: u32, block: bool) {
        let msg = self.msg_ref(slot);
        self.emit(Event::SendFail {
            t: self.now,
            msg,
            producer: p,
        });
        let ps = &mut self.w.producers[p as usize];
        ps.failed.push_back(slot);
        ps.failed_block = block;
        if !ps.retrying {
            ps.retrying = true;
            let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
            self.q.push(at, Ev::ProducerRetry(p));
        }
    }

    /// Retries the failed sends in order; a blocking failure keeps everything behind it waiting.
    pub(super) fn producer_retry(&mut self, p: u32) {
        let ps = &mut self.w.producers[p as usize];
        ps.retrying = false;
        if ps.broker.is_none() {
            // Reconnecting: the failed sends join the buffer, in order, ahead of later sends.
            let failed = std::mem::take(&mut ps.failed);
            for slot in failed.into_iter().rev() {
                ps.buffer.push_front(slot);
            }
            return;
        }
        let mut pending = std::mem::take(&mut ps.failed);
        let mut still = VecDeque::new();
        let mut block = false;
        while let Some(slot) = pending.pop_front() {
            if block {
                still.push_back(slot);
                continue;
            }
            if let Err(b) = self.route_and_enqueue(p, slot) {
                let msg = self.msg_ref(slot);
                self.emit(Event::SendFail {
                    t: self.now,
                    msg,
                    producer: p,
                });
                still.push_back(slot);
                block = b;
                self.w.producers[p as usize].failed_block = b;
            }
        }
        let ps = &mut self.w.producers[p as usize];
        ps.failed = still;
        if !ps.failed.is_empty() && !ps.retrying {
            ps.retrying = true;
            let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
            self.q.push(at, Ev::ProducerRetry(p));
        }
    }
}
