//! Paused consumers (`consumer_pause`): the process stops (a GC pause, a frozen VM) with its
//! connection open. The broker cannot tell it from a dead one until `[consumers]
//! failure_detection` has passed without a sign of life; then it takes back the deliveries (they
//! go to other consumers, marked redelivered) while the paused process still holds the message it
//! was working on. When the process resumes it finishes that message and writes it: a zombie
//! write, after its work was given away. A pause shorter than the detection time only delays.

use super::events::Ev;
use super::walk::walk;
use super::Engine;
use crate::history::Observer;

impl<O: Observer> Engine<'_, O> {
    /// Consumer `c`'s process stops.
    pub(super) fn pause_start(&mut self, c: u32) {
        walk!();
        let Some(serial) = self.w.consumers[c as usize].pause(self.now) else {
            return;
        };
        self.sync_load(c);
        let at = self.now + self.cfg.failure_detection.0;
        self.q.push(at, Ev::PauseDetected { c, serial });
    }

    /// The broker has heard nothing from paused consumer `c` for `failure_detection`: it drops
    /// the connection and redelivers what it had given it. The process keeps the message in hand.
    pub(super) fn pause_detected(&mut self, c: u32, serial: u32) {
        walk!();
        let cs = &self.w.consumers[c as usize];
        if !cs.paused_by(serial) || !cs.is_connected() {
            return;
        }
        self.lose_connection_keep_work(c);
    }

    /// Consumer `c`'s process runs again: its timers go on where they stopped; if the broker
    /// dropped it meanwhile it reconnects through its failover list.
    pub(super) fn pause_end(&mut self, c: u32) {
        walk!();
        let Some(deferred) = self.w.consumers[c as usize].unpause() else {
            return;
        };
        for &(left, ev) in &deferred {
            self.q.push(self.now + left, ev);
        }
        self.sync_load(c);
        let cs = &self.w.consumers[c as usize];
        let (up, detached) = (cs.is_up(), !cs.is_connected());
        if up && detached && !cs.cut_off() && !cs.is_suspended() {
            self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0);
        }
        if up {
            self.start_next(c);
        }
    }
}
