//! Seeded random streams, one per (component, index, purpose).
//!
//! Every stream is ChaCha8 keyed by the scenario seed, on its own 64-bit ChaCha stream number, so
//! adding a consumer does not shift the producers' draws, and a fault plan drawn for one strategy is
//! the same for all of them.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The component a stream belongs to; part of the stream number, so never renumber these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Component {
    /// Arrival times.
    Arrivals = 1,
    /// Key choice and poison flags.
    Keys = 2,
    /// A producer (index = producer): purpose 0 its clock skew draw, purpose
    /// [`SEND_ERRORS`] whether a send fails during a `send_error` fault.
    Producer = 3,
    /// A consumer's service times.
    Consumer = 4,
    /// Random fault schedule expansion (index = fault entry).
    Faults = 5,
    /// Strategy-owned randomness (index = strategy-defined).
    Strategy = 6,
    /// Redelivery jitter and other broker-side draws (index = broker).
    Broker = 7,
}

/// The purpose of a producer's stream of `send_error` draws ([`Component::Producer`]).
pub const SEND_ERRORS: u8 = 1;

/// The purpose of a broker's stream of `dispatch_latency` draws ([`Component::Broker`]).
pub const TRANSIT: u8 = 1;

/// The purpose of a broker's stream of `restart_time` draws ([`Component::Broker`]).
pub const RESTART: u8 = 2;

/// The purpose of a broker's stream of HA `takeover` draws ([`Component::Broker`]).
pub const TAKEOVER: u8 = 3;

/// The purpose of a broker's stream of `replication_lag` draws ([`Component::Broker`]).
pub const REPLICATION_LAG: u8 = 4;

/// The purpose of a broker's stream of `leader_election_time` draws ([`Component::Broker`]).
pub const ELECTION: u8 = 5;

/// A deterministic random stream for `(component, index, purpose)` under `seed`.
pub fn stream(seed: u64, component: Component, index: u32, purpose: u8) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(((component as u64) << 56) | ((purpose as u64) << 48) | index as u64);
    rng
}

/// One draw, uniform below `bound` (0 when `bound` is 0), from the stream of `(component,
/// index, purpose)` under `seed`: for a crate that has a seed and no `rand` of its own (a
/// strategy's [`Component::Strategy`] draws).
pub fn draw_below(seed: u64, component: Component, index: u32, purpose: u8, bound: u64) -> u64 {
    use rand::Rng;
    if bound == 0 {
        return 0;
    }
    stream(seed, component, index, purpose).random_range(0..bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a: u64 = stream(7, Component::Consumer, 0, 0).random();
        let b: u64 = stream(7, Component::Consumer, 1, 0).random();
        let a2: u64 = stream(7, Component::Consumer, 0, 0).random();
        let c: u64 = stream(8, Component::Consumer, 0, 0).random();
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }
}
