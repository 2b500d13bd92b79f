//! Producers: arrivals, keys and per-key seqs, the producer clock, and the failover transport
//! (a broker list, a reconnect delay, sends buffered while disconnected and flushed in order).

use super::{Loc, Msg};
use crate::engine::{Engine, Ev};
use crate::history::{Event, MsgRef, Node};
use crate::rng::{stream, Component};
use crate::scenario::{Arrival, KeyDistribution, KeyOwnership, Producers, Scenario};
use crate::strategy::{Route, RouteCtx, Strategy};
use crate::time::Time;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Zipf};
use std::collections::VecDeque;

/// One producer's connection and clock.
pub(crate) struct ProducerState {
    /// Failover list (broker indices, in the order tried).
    pub list: Vec<u16>,
    /// Connected broker.
    pub broker: Option<u16>,
    /// Whether it has connected before (a later connect is a failover).
    pub connected_once: bool,
    /// A reconnect attempt is scheduled.
    pub reconnecting: bool,
    /// Messages sent while disconnected, in send order.
    pub buffer: VecDeque<u32>,
    /// Sends the strategy's routing refused (e.g. a Unit-of-Order member down), to retry.
    pub failed: VecDeque<u32>,
    /// Later sends wait behind the failed ones (a blocking retry loop in the application).
    pub failed_block: bool,
    /// A retry of the failed sends is scheduled.
    pub retrying: bool,
    /// Clock offset in microseconds (fixed skew + clock_skew faults).
    pub clock_offset: i64,
}

impl ProducerState {
    pub fn new(list: Vec<u16>, cfg: &Producers, rng: &mut ChaCha8Rng) -> Self {
        let skew = cfg.clock_skew.0 as i64;
        let clock_offset = if skew > 0 {
            rng.random_range(-skew..=skew)
        } else {
            0
        };
        ProducerState {
            list,
            broker: None,
            connected_once: false,
            reconnecting: false,
            buffer: VecDeque::new(),
            failed: VecDeque::new(),
            failed_block: false,
            retrying: false,
            clock_offset,
        }
    }
}

/// Inter-arrival times of the whole workload.
pub(crate) struct Arrivals {
    rng: ChaCha8Rng,
    exp: Option<Exp<f64>>,
    constant: Time,
}

impl Arrivals {
    pub fn new(sc: &Scenario, seed: u64) -> Self {
        let per_us = sc.workload.rate.as_per_sec() / 1e6;
        let (exp, constant) = match sc.workload.arrival {
            Arrival::Poisson if per_us > 0.0 => (Some(Exp::new(per_us).expect("positive rate")), 0),
            _ if per_us > 0.0 => (None, (1.0 / per_us).round().max(1.0) as Time),
            _ => (None, 0),
        };
        Arrivals {
            rng: stream(seed, Component::Arrivals, 0, 0),
            exp,
            constant,
        }
    }

    /// Time to the next arrival (at least 1us, so arrivals are strictly ordered).
    #[inline]
    pub fn next_gap(&mut self) -> Time {
        match &self.exp {
            Some(e) => crate::dist::round_u64(e.sample(&mut self.rng)).max(1),
            None => self.constant.max(1),
        }
    }
}

/// Key choice, poison draws, producer choice and per-key seqs.
pub(crate) struct KeyPicker {
    rng: ChaCha8Rng,
    zipf: Option<Zipf<f64>>,
    keys: u32,
    next_seq: Vec<u32>,
    poison: f64,
    group_missing: f64,
    ownership: KeyOwnership,
    producers: u32,
}

impl KeyPicker {
    pub fn new(sc: &Scenario, seed: u64) -> Self {
        let w = &sc.workload;
        let zipf = (w.key_distribution == KeyDistribution::Zipf).then(|| {
            Zipf::new(w.keys as f64, w.zipf_exponent.unwrap_or(1.0)).expect("validated zipf")
        });
        KeyPicker {
            rng: stream(seed, Component::Keys, 0, 0),
            zipf,
            keys: w.keys,
            next_seq: vec![0; w.keys as usize],
            poison: w.poison_fraction,
            group_missing: w.group_header_missing,
            ownership: sc.producers.key_ownership,
            producers: sc.producers.count,
        }
    }

    /// (key, seq, producer, poison, group header set) of the next message. Draw order: key,
    /// poison, producer, group header.
    #[inline]
    fn next(&mut self, poison_boost: f64) -> (u32, u32, u32, bool, bool) {
        let key = match &self.zipf {
            Some(z) => (z.sample(&mut self.rng) as u32).clamp(1, self.keys) - 1,
            None => self.rng.random_range(0..self.keys),
        };
        let p = self.poison.max(poison_boost);
        let poison = p > 0.0 && self.rng.random_bool(p);
        let producer = match self.ownership {
            KeyOwnership::Owned => key % self.producers,
            KeyOwnership::Shared if self.producers > 1 => self.rng.random_range(0..self.producers),
            KeyOwnership::Shared => 0,
        };
        let group = !(self.group_missing > 0.0 && self.rng.random_bool(self.group_missing));
        let s = &mut self.next_seq[key as usize];
        let seq = *s;
        *s += 1;
        (key, seq, producer, poison, group)
    }
}

impl<S: Strategy, O: crate::history::Observer> Engine<'_, S, O> {
    /// A message is produced; it goes to the producer's broker or waits in its buffer.
    pub(crate) fn arrival(&mut self) {
        let boost = self.poison_boost.iter().copied().fold(0.0, f64::max);
        let (key, seq, producer, poison, group) = self.keys.next(boost);
        let id = self.produced;
        self.produced += 1;
        if self.produced < self.sc.workload.messages {
            let gap = self.arrivals.next_gap();
            self.q.push(self.now + gap, Ev::Arrival);
        }
        let p = &self.producers[producer as usize];
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
        });
        // The source database commits the new state before the message is sent.
        let src = &mut self.source[key as usize];
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
    fn send(&mut self, p: u32, slot: u32) {
        let ps = &mut self.producers[p as usize];
        if ps.broker.is_none() {
            ps.buffer.push_back(slot);
        } else if ps.failed_block && !ps.failed.is_empty() {
            ps.failed.push_back(slot);
        } else if let Err(block) = self.route_and_enqueue(p, slot) {
            self.send_failed(p, slot, block);
        }
    }

    /// Asks the strategy where the send goes and stores it there; `Err(block)` if it failed.
    fn route_and_enqueue(&mut self, p: u32, slot: u32) -> Result<(), bool> {
        let connected = self.producers[p as usize].broker.expect("connected");
        let view = self.view(slot);
        let ctx = RouteCtx {
            now: self.now,
            producer: p,
            connected,
            up: &self.broker_up,
        };
        let route = self.strategy.route(&ctx, &view);
        let b = match route {
            Route::Connected => connected,
            Route::Broker(b) if self.brokers[b as usize].up => b,
            Route::Broker(_) => return Err(true),
            Route::Fail { block } => return Err(block),
        };
        self.enqueue_back(b, slot);
        self.dispatch(b);
        Ok(())
    }

    fn send_failed(&mut self, p: u32, slot: u32, block: bool) {
        let msg = self.msg_ref(slot);
        self.emit(Event::SendFail {
            t: self.now,
            msg,
            producer: p,
        });
        let ps = &mut self.producers[p as usize];
        ps.failed.push_back(slot);
        ps.failed_block = block;
        if !ps.retrying {
            ps.retrying = true;
            let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
            self.q.push(at, Ev::ProducerRetry(p));
        }
    }

    /// Retries the failed sends in order; a blocking failure keeps everything behind it waiting.
    pub(crate) fn producer_retry(&mut self, p: u32) {
        let ps = &mut self.producers[p as usize];
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
                self.producers[p as usize].failed_block = b;
            }
        }
        let ps = &mut self.producers[p as usize];
        ps.failed = still;
        if !ps.failed.is_empty() && !ps.retrying {
            ps.retrying = true;
            let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
            self.q.push(at, Ev::ProducerRetry(p));
        }
    }

    /// The producer's broker went down: drop the connection and try the list again later.
    pub(crate) fn producer_lost_broker(&mut self, p: u32) {
        let ps = &mut self.producers[p as usize];
        ps.broker = None;
        if !ps.reconnecting {
            ps.reconnecting = true;
            let at = self.now + self.sc.producers.reconnect_delay.0;
            self.q.push(at, Ev::ProducerReconnect(p));
        }
    }

    /// A connection attempt: the first broker of the list that is up; else try again later.
    pub(crate) fn producer_reconnect(&mut self, p: u32) {
        let ps = &mut self.producers[p as usize];
        ps.reconnecting = false;
        if ps.broker.is_some() {
            return;
        }
        let Some(b) = ps
            .list
            .iter()
            .copied()
            .find(|&b| self.brokers[b as usize].up)
        else {
            ps.reconnecting = true;
            let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
            self.q.push(at, Ev::ProducerReconnect(p));
            return;
        };
        ps.broker = Some(b);
        let failover = ps.connected_once;
        ps.connected_once = true;
        let buffered = std::mem::take(&mut ps.buffer);
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
}
