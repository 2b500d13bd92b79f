//! What strategies request outside a consumer's transaction (`Control`: applies and discards,
//! which the router in `mod.rs` carries out with the rest of their requests), world changes told
//! to the strategy, and the bookkeeping of messages a strategy took over and of the target rows.

use super::state::Loc;
use super::walk::walk;
use super::Engine;
use crate::history::{DiscardReason, Event, Observer};
use crate::strategy::{MsgView, WorldChange};

impl<O: Observer> Engine<'_, O> {
    /// [`Request::Apply`]: a write outside any consumer's transaction.
    pub(super) fn apply_for_strategy(&mut self, msg: MsgView, state_seq: u32, worker: u32) {
        let r = msg.msg_ref();
        if let Some(h) = self.w.held.remove(&msg.id) {
            self.w.mark_applied(h.slot, msg.id);
        }
        self.w.write_row(msg.key, state_seq, msg.timestamp);
        self.emit(Event::Apply {
            t: self.now,
            msg: r,
            consumer: worker,
            state_seq,
        });
    }

    /// [`Request::Discard`]: only a message the strategy still held (neither applied nor
    /// discarded before) is lost by this: a discarded copy of an applied message is no loss. One
    /// whose delivery the broker has not settled yet may still come back (if the ack is lost): it
    /// is lost when the ack settles it.
    pub(super) fn discard_for_strategy(&mut self, msg: MsgView) {
        let Some(h) = self.w.held.get_mut(&msg.id) else {
            return;
        };
        let m = self.w.slab.get(h.slot);
        if m.view.id == msg.id && m.loc != Loc::Free {
            h.dropped = true;
            return;
        }
        self.w.held.remove(&msg.id);
        let r = msg.msg_ref();
        self.emit(Event::Discard {
            t: self.now,
            msg: r,
            reason: DiscardReason::BufferLost,
        });
    }

    /// Tells the strategy about a change in the world, and carries out what it asks.
    pub(super) fn world_change(&mut self, change: WorldChange) {
        walk!();
        self.strategy.on_world(self.now, change, &mut self.ctl);
        self.apply_control();
    }
}
