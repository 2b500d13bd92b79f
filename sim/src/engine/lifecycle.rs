//! A consumer process's life: it crashes and restarts, its network blips, its endpoint is
//! suspended after failures in a row and resumed. Each change tells its broker what it sees
//! (`consumer.rs` detaches or attaches it, `detection.rs` for a death the broker does not
//! notice) and the strategy what changed in the world.

use super::consumer::{Crash, Restart};
use super::events::Ev;
use super::walk::walk;
use super::Engine;
use crate::history::{Event, Node, Observer};
use crate::scenario::CrashDetection;
use crate::strategy::WorldChange;

impl<O: Observer> Engine<'_, O> {
    /// The process dies: everything unacked goes back; the message in hand is abandoned.
    pub(super) fn consumer_crash(&mut self, c: u32) {
        walk!();
        let died = match self.w.consumers[c as usize].crash() {
            Crash::Again => return,
            Crash::BeforeRejoin => false,
            Crash::Died => true,
        };
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Consumer(c),
        });
        if !died {
            // Dead again before it could join: the old session still waits for its timeout.
            self.world_change(WorldChange::ConsumerCrashed(c));
            return;
        }
        if self.cfg.crash_detection == CrashDetection::Connection {
            // Detaching abandons the message in hand (the strategy releases its locks).
            self.detach(c, false);
        } else {
            self.die_unnoticed(c);
        }
        self.flush();
        self.world_change(WorldChange::ConsumerCrashed(c));
        self.w.consumers[c as usize].after_crash();
        self.sync_load(c);
    }

    /// The process restarts and connects.
    pub(super) fn consumer_restart(&mut self, c: u32) {
        walk!();
        // A dead session the broker has not noticed yet goes when the process comes back, or the
        // process waits for the broker to drop it (`detection.rs`).
        let up = match self.w.consumers[c as usize].restart(self.cfg.restart_takes_over) {
            Restart::No => return,
            Restart::Waits => None,
            Restart::Up { epoch, stale } => {
                self.sync_load(c);
                Some((epoch, stale))
            }
        };
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Consumer(c),
        });
        if let Some((_, true)) = up {
            self.session_gone(c);
            self.flush();
        }
        self.world_change(WorldChange::ConsumerRestarted(c));
        if let Some((epoch, _)) = up {
            self.consumer_reconnect(c, epoch);
        }
    }

    /// The connection drops; the process goes on with the message in hand.
    pub(super) fn blip_start(&mut self, c: u32) {
        walk!();
        if self.w.consumers[c as usize].blip() {
            self.lose_connection_keep_work(c);
        }
    }

    /// Consumer `c`'s connection is gone (a blip, or the broker gave up on a paused process): the
    /// broker takes its deliveries back; the process keeps the message in hand and will still
    /// write it.
    pub(super) fn lose_connection_keep_work(&mut self, c: u32) {
        walk!();
        self.w.consumers[c as usize].lost_connection();
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, true);
    }

    /// The network is back: reconnect.
    pub(super) fn blip_end(&mut self, c: u32) {
        walk!();
        if let Some(epoch) = self.w.consumers[c as usize].unblip() {
            self.consumer_reconnect(c, epoch);
        }
    }

    /// Endpoint stopped after too many failures in a row (the [MDB-or-batch] post's activation
    /// spec).
    pub(super) fn suspend(&mut self, c: u32) {
        walk!();
        self.emit(Event::Suspend {
            t: self.now,
            consumer: c,
        });
        self.detach(c, false);
        self.flush();
        let serial = self.w.consumers[c as usize].suspend();
        if let Some(after) = self.sc.consumers.resume_after {
            self.q.push(self.now + after.0, Ev::Resume { c, serial });
        }
    }

    /// A suspended endpoint starts again.
    pub(super) fn resume(&mut self, c: u32) {
        walk!();
        let epoch = self.w.consumers[c as usize].unsuspend();
        self.emit(Event::Resume {
            t: self.now,
            consumer: c,
        });
        self.consumer_reconnect(c, epoch);
    }
}
