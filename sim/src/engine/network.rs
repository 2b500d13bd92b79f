//! The network of brokers: store-and-forward from a broker without consumers to a peer that has
//! some.

use super::events::Ev;
use super::state::Loc;
use super::Engine;
use crate::history::{Event, Observer};
use crate::strategy::Strategy;

impl<S: Strategy, O: Observer> Engine<'_, S, O> {
    /// Store-and-forward: moves the whole queue toward the first peer that is up and has consumers.
    pub(super) fn forward_all(&mut self, from: u16) {
        let Some(to) = (0..self.w.brokers.len() as u16).find(|&p| {
            p != from
                && self.w.brokers[p as usize].up
                && !self.w.brokers[p as usize].attached.is_empty()
        }) else {
            return;
        };
        let at = self.now + self.sc.network.forward_delay.0;
        while let Some(slot) = self.w.brokers[from as usize].queue.pop_front() {
            let m = self.w.slab.get_mut(slot);
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
    pub(super) fn forward_arrive(&mut self, slot: u32, id: u64) {
        let m = self.w.slab.get(slot);
        let Loc::Forwarding { from, to } = m.loc else {
            return;
        };
        if m.r.id != id {
            return;
        }
        if self.w.brokers[to as usize].up {
            self.enqueue_back(to, slot);
            self.dispatch(to);
        } else {
            self.w.slab.get_mut(slot).loc = Loc::Queued(from);
            self.w.brokers[from as usize].queue.push_back(slot);
            self.dispatch(from);
        }
    }
}
