//! Producers: arrivals, keys and per-key seqs, the producer clock, and the failover transport
//! (a broker list, a reconnect delay, sends buffered while disconnected and flushed in order).

use super::{Loc, Msg};
use crate::engine::{Engine, Ev};
use crate::history::{Event, MsgRef, Node};
use crate::rng::{stream, Component};
use crate::scenario::{Arrival, KeyDistribution, KeyOwnership, Producers, Scenario};
use crate::strategy::Strategy;
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
            Some(e) => (e.sample(&mut self.rng).round() as Time).max(1),
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
            ownership: sc.producers.key_ownership,
            producers: sc.producers.count,
        }
    }

    /// (key, seq, producer, poison) of the next message. Draw order: key, poison, producer.
    #[inline]
    fn next(&mut self, poison_boost: f64) -> (u32, u32, u32, bool) {
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
        let s = &mut self.next_seq[key as usize];
        let seq = *s;
        *s += 1;
        (key, seq, producer, poison)
    }
}

impl<S: Strategy, O: crate::history::Observer> Engine<'_, S, O> {
    /// A message is produced; it goes to the producer's broker or waits in its buffer.
    pub(crate) fn arrival(&mut self) {
        let boost = self.poison_boost.iter().copied().fold(0.0, f64::max);
        let (key, seq, producer, poison) = self.keys.next(boost);
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
            deliveries: 0,
            loc: Loc::Producer(producer),
        });
        self.emit(Event::Produce {
            t: self.now,
            msg: r,
            producer,
            timestamp,
            poison,
        });
        match self.producers[producer as usize].broker {
            Some(b) => {
                self.enqueue_back(b, slot);
                self.dispatch(b);
            }
            None => self.producers[producer as usize].buffer.push_back(slot),
        }
        self.phase_step();
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
        for &slot in &buffered {
            self.enqueue_back(b, slot);
        }
        if !buffered.is_empty() {
            self.dispatch(b);
        }
    }
}
