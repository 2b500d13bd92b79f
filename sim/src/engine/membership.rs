//! Membership changes that are not failures (`consumer_leave`): a consumer closes gracefully
//! (Kafka's `close()`: it finishes the record in hand, commits what it processed and leaves its
//! group, which rebalances at once) and, after the fault's `for`, joins again (another
//! rebalance). A crash is `consumer.rs`; this is the planned departure.
//!
//! A static member (`group.instance.id`: `[consumers] restart_takes_over = true` under a
//! session timeout, `crash_detection = "timeout"`) sends no LeaveGroup when it closes
//! (`AbstractCoordinator.maybeLeaveGroup` skips it for a static member, KIP-345): the group
//! keeps its partitions, which wait for it; it commits and stops as a paused process does
//! (`pause.rs`), so only the session timeout (`failure_detection`) reassigns them, and coming
//! back inside it causes no rebalance.

use super::walk::walk;
use super::Engine;
use crate::history::{Event, Node, Observer};
use crate::scenario::CrashDetection;

impl<O: Observer> Engine<'_, O> {
    /// `consumer_leave` starts: consumer `c` leaves once the message in hand is done.
    pub(super) fn leave_start(&mut self, c: u32) {
        walk!();
        if self.w.consumers[c as usize].leave() {
            // Leaves now if idle; else `start_next` does when the message in hand is done.
            self.start_next(c);
        }
    }

    /// Consumer `c`, idle, commits and leaves its broker; what it had fetched and not started
    /// goes back (the group resumes from its commit).
    pub(super) fn leave_now(&mut self, c: u32) {
        walk!();
        self.commit_now(c);
        self.flush();
        if self.cfg.restart_takes_over && self.cfg.crash_detection == CrashDetection::Timeout {
            // No LeaveGroup: the group holds the session until it times out.
            self.w.consumers[c as usize].close_static();
            self.pause_start(c);
            return;
        }
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, false);
    }

    /// `consumer_leave` ends: consumer `c` joins again.
    pub(super) fn leave_end(&mut self, c: u32) {
        walk!();
        if let Some(epoch) = self.w.consumers[c as usize].come_back() {
            if self.w.consumers[c as usize].take_static_away() {
                // Its session still held: it goes on, no rebalance; else it joins again.
                self.pause_end(c);
            } else {
                self.consumer_reconnect(c, epoch);
            }
        }
    }
}
