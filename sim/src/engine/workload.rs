//! The workload: arrival times, and each message's key, seq, producer, poison flag and group
//! header, drawn from their own random streams.

use crate::dist::ExpDraw;
use crate::rng::{stream, Component};
use crate::scenario::{Arrival, KeyDistribution, KeyOwnership, Scenario};
use crate::time::Time;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};

/// Inter-arrival times of the whole workload.
pub(super) struct Arrivals {
    rng: ChaCha8Rng,
    exp: Option<ExpDraw>,
    constant: Time,
}

impl Arrivals {
    pub fn new(sc: &Scenario, seed: u64) -> Self {
        let per_us = sc.workload.rate.as_per_sec() / 1e6;
        let (exp, constant) = match sc.workload.arrival {
            Arrival::Poisson if per_us > 0.0 => {
                (Some(ExpDraw::new(per_us).expect("positive rate")), 0)
            }
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
    // Always inlined (two call sites, one per message): out of line it paid a call frame per
    // draw, about a fifth of the draw.
    #[inline(always)]
    pub fn next_gap(&mut self) -> Time {
        match &self.exp {
            Some(e) => e.sample_rounded(&mut self.rng).max(1),
            None => self.constant.max(1),
        }
    }
}

/// Key choice, poison draws, producer choice and per-key seqs.
pub(super) struct KeyPicker {
    rng: ChaCha8Rng,
    zipf: Option<Zipf<f64>>,
    keys: u32,
    next_seq: Vec<u32>,
    /// `[workload] poison_fraction`.
    poison: f64,
    /// The poison probability in force: `poison`, or a `poison` fault's fraction while one is
    /// larger ([`KeyPicker::set_poison_boost`]); kept, not derived per message.
    poison_now: f64,
    group_missing: f64,
    ownership: KeyOwnership,
    producers: u32,
    /// `[workload] group_size` (0: no groups).
    group_size: u32,
    /// Members of the current group still to produce after this one, and its key and producer.
    group_left: u32,
    group_key: u32,
    group_producer: u32,
    /// Each message's key is its one draw: uniform keys, no poison in force, no groups, no
    /// group headers missing, one producer ([`KeyPicker::next`]'s first case).
    plain: bool,
}

impl KeyPicker {
    pub fn new(sc: &Scenario, seed: u64) -> Self {
        let w = &sc.workload;
        let zipf = (w.key_distribution == KeyDistribution::Zipf).then(|| {
            Zipf::new(w.keys as f64, w.zipf_exponent.unwrap_or(1.0)).expect("validated zipf")
        });
        let mut k = KeyPicker {
            rng: stream(seed, Component::Keys, 0, 0),
            zipf,
            keys: w.keys,
            next_seq: vec![0; w.keys as usize],
            poison: w.poison_fraction,
            poison_now: w.poison_fraction,
            group_missing: w.group_header_missing,
            ownership: sc.producers.key_ownership,
            producers: sc.producers.count,
            group_size: w.group_size.unwrap_or(0),
            group_left: 0,
            group_key: 0,
            group_producer: 0,
            plain: false,
        };
        k.plain = k.is_plain();
        k
    }

    /// Whether [`KeyPicker::plain`] holds as things stand.
    fn is_plain(&self) -> bool {
        self.zipf.is_none()
            && self.poison_now == 0.0
            && self.group_size <= 1
            && self.group_missing == 0.0
            && self.producers <= 1
    }

    /// The `poison` faults in force changed: `boost` is the largest of their fractions (0 with
    /// none), which applies while it is above the workload's own.
    pub fn set_poison_boost(&mut self, boost: f64) {
        self.poison_now = self.poison.max(boost);
        self.plain = self.is_plain();
    }

    /// (key, seq, producer, poison, group header set) of the next message. Draw order: key,
    /// poison, producer, group header. With correlation groups (`group_size`), the key and the
    /// producer are drawn for a group's first member only: the rest follow it back to back.
    // Always inlined (one call site, the arrival): out of line its five results went through
    // memory and the call frame cost about as much as the key draw.
    #[inline(always)]
    pub fn next(&mut self) -> (u32, u32, u32, bool, bool) {
        if self.plain {
            // What the rest does then, with its tests folded: the key is the only draw.
            let key = self.rng.random_range(0..self.keys);
            return (key, self.next_seq_of(key), 0, false, true);
        }
        let in_group = self.group_left > 0;
        let key = if in_group {
            self.group_key
        } else {
            match &self.zipf {
                Some(z) => (z.sample(&mut self.rng) as u32).clamp(1, self.keys) - 1,
                None => self.rng.random_range(0..self.keys),
            }
        };
        let p = self.poison_now;
        let poison = p > 0.0 && self.rng.random_bool(p);
        let producer = if in_group {
            self.group_producer
        } else {
            match self.ownership {
                KeyOwnership::Owned if self.producers > 1 => key % self.producers,
                KeyOwnership::Owned => 0,
                KeyOwnership::Shared if self.producers > 1 => {
                    self.rng.random_range(0..self.producers)
                }
                KeyOwnership::Shared => 0,
            }
        };
        if in_group {
            self.group_left -= 1;
        } else if self.group_size > 1 {
            (self.group_left, self.group_key, self.group_producer) =
                (self.group_size - 1, key, producer);
        }
        let group = !(self.group_missing > 0.0 && self.rng.random_bool(self.group_missing));
        (key, self.next_seq_of(key), producer, poison, group)
    }

    /// The seq of `key`'s next message, counted.
    #[inline(always)]
    fn next_seq_of(&mut self, key: u32) -> u32 {
        let s = &mut self.next_seq[key as usize];
        let seq = *s;
        *s += 1;
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker(extra: &str) -> KeyPicker {
        picker_of(extra, 3)
    }

    /// A picker for a workload with `extra` lines and `producers` sharing the keys.
    fn picker_of(extra: &str, producers: u32) -> KeyPicker {
        let text = format!(
            "name = \"t\"\nstrategies = [\"competing\"]\n[workload]\nmessages = 60\n\
             rate = \"100/s\"\nkeys = 5\n{extra}\n[producers]\ncount = {producers}\n\
             key_ownership = \"shared\"\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 1\n\
             service = \"1ms\"\n"
        );
        let sc = crate::scenario::load_str("t.toml", &text, &|_| Vec::new()).expect("scenario");
        KeyPicker::new(&sc, 7)
    }

    /// The plain case (the key the only draw) gives what the general case gives, draw for draw,
    /// and holds only where nothing else is drawn or chosen.
    #[test]
    fn the_plain_case_draws_what_the_general_one_draws() {
        let mut fast = picker_of("", 1);
        let mut general = picker_of("", 1);
        assert!(fast.plain);
        general.plain = false;
        for _ in 0..1000 {
            assert_eq!(fast.next(), general.next());
        }
        for (extra, producers) in [
            ("", 2),
            ("poison_fraction = 0.1", 1),
            ("group_size = 2", 1),
            ("group_header_missing = 0.5", 1),
            ("key_distribution = \"zipf\"", 1),
        ] {
            assert!(!picker_of(extra, producers).plain, "{extra} {producers}");
        }
        assert!(picker_of("group_size = 1", 1).plain);
    }

    /// With `group_size = 4` every run of four messages has one key and one producer, and each
    /// key's seqs come in whole groups; without it the key changes within such runs.
    #[test]
    fn groups_are_produced_back_to_back() {
        let mut g = picker("group_size = 4");
        let draws: Vec<_> = (0..60).map(|_| g.next()).collect();
        for chunk in draws.chunks(4) {
            assert!(chunk.iter().all(|d| (d.0, d.2) == (chunk[0].0, chunk[0].2)));
            assert_eq!(
                chunk[0].1 % 4,
                0,
                "a group starts at a multiple of its size"
            );
            for (i, d) in chunk.iter().enumerate() {
                assert_eq!(d.1, chunk[0].1 + i as u32);
            }
        }
        let mut plain = picker("");
        let draws: Vec<_> = (0..60).map(|_| plain.next()).collect();
        assert!(draws.chunks(4).any(|c| c.iter().any(|d| d.0 != c[0].0)));
    }

    /// A `poison` fault's fraction applies while it is larger than the workload's own, and the
    /// workload's applies again once the faults end.
    #[test]
    fn a_poison_boost_applies_while_it_is_larger() {
        let poisoned = |g: &mut KeyPicker| (0..200).filter(|_| g.next().3).count();
        let mut g = picker("poison_fraction = 0.0");
        assert_eq!(poisoned(&mut g), 0);
        g.set_poison_boost(1.0);
        assert_eq!(poisoned(&mut g), 200);
        g.set_poison_boost(0.0);
        assert_eq!(poisoned(&mut g), 0);
        let mut h = picker("poison_fraction = 1.0");
        h.set_poison_boost(0.5);
        assert_eq!(poisoned(&mut h), 200, "a smaller boost does not lower it");
        // One producer, no poison: the plain case, left while a boost is in force.
        let mut one = picker_of("", 1);
        assert!(one.plain);
        one.set_poison_boost(1.0);
        assert_eq!(poisoned(&mut one), 200);
        one.set_poison_boost(0.0);
        assert!(one.plain);
        assert_eq!(poisoned(&mut one), 0);
    }
}
