//! The simulated world: producers, brokers, consumers and the target database. Each file holds
//! the state of one kind of node and the engine's handling of its events.

pub(crate) mod broker;
pub(crate) mod consumer;
pub(crate) mod faults;
pub(crate) mod producer;

use crate::history::MsgRef;

/// Where a message is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Slot is free.
    Free,
    /// Buffered in a producer that has no broker connection.
    Producer(u32),
    /// In a broker's queue (its store).
    Queued(u16),
    /// Pushed to a consumer, unacknowledged; `delivery` identifies this delivery.
    Delivered {
        broker: u16,
        consumer: u32,
        delivery: u32,
    },
    /// Waiting at the broker for a non-blocking redelivery delay.
    Held(u16),
    /// Travelling between brokers.
    Forwarding { from: u16, to: u16 },
}

/// A message and where it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Msg {
    pub r: MsgRef,
    pub timestamp: u64,
    pub producer: u32,
    pub poison: bool,
    /// The producer set the group header.
    pub group: bool,
    pub deliveries: u32,
    pub loc: Loc,
    /// Some copy of it has been applied (so a strategy still holding another copy at the end of
    /// the run does not make it pending).
    pub applied: bool,
}

/// A reference to one delivery of a message, held by a consumer. It is valid only while the
/// message is still `Delivered` to that consumer with that delivery number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Delivery {
    pub slot: u32,
    pub id: u64,
    pub delivery: u32,
    pub broker: u16,
}

/// Messages in flight, in reusable slots: memory follows messages in flight, not produced.
#[derive(Default)]
pub(crate) struct Slab {
    pub msgs: Vec<Msg>,
    free: Vec<u32>,
    pub live: u64,
}

impl Slab {
    pub fn alloc(&mut self, m: Msg) -> u32 {
        self.live += 1;
        match self.free.pop() {
            Some(s) => {
                self.msgs[s as usize] = m;
                s
            }
            None => {
                self.msgs.push(m);
                (self.msgs.len() - 1) as u32
            }
        }
    }

    pub fn release(&mut self, slot: u32) {
        debug_assert!(self.msgs[slot as usize].loc != Loc::Free);
        self.msgs[slot as usize].loc = Loc::Free;
        self.free.push(slot);
        self.live -= 1;
    }

    #[inline]
    pub fn get(&self, slot: u32) -> &Msg {
        &self.msgs[slot as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> &mut Msg {
        &mut self.msgs[slot as usize]
    }

    /// Whether `d` still names the current delivery of its message to `consumer`.
    #[inline]
    pub fn valid(&self, d: &Delivery, consumer: u32) -> bool {
        let m = &self.msgs[d.slot as usize];
        m.r.id == d.id
            && m.loc
                == Loc::Delivered {
                    broker: d.broker,
                    consumer,
                    delivery: d.delivery,
                }
    }
}
