//! How a broker learns that a consumer process died (`[consumers] crash_detection`): at once
//! when its socket closes (`connection`, the JMS brokers and Service Bus: `consumer.rs`
//! detaches it), after
//! `failure_detection` without a heartbeat (`timeout`: a host that died without closing its
//! sockets, Kafka's session timeout), or never (`lease`: SQS has no connection; each delivery
//! the dead process held comes back when its lease ends, `lease.rs`).

use super::events::Ev;
use super::walk::walk;
use super::Engine;
use crate::history::{Event, Node, Observer};
use crate::scenario::CrashDetection;

impl<O: Observer> Engine<'_, O> {
    /// Consumer `c`'s process just died, unnoticed by its broker (`timeout` or `lease`). The
    /// message in hand is dropped (the strategy releases what `begin` took for it).
    pub(super) fn die_unnoticed(&mut self, c: u32) {
        walk!();
        let cs = &mut self.w.consumers[c as usize];
        // Its copies of expired messages die with it.
        let abandoned = cs.drop_work();
        self.drop_orphans(c);
        if let Some(view) = abandoned {
            self.strategy.abandon(self.now, c, &view, &mut self.ctl);
        }
        match self.cfg.crash_detection {
            CrashDetection::Timeout => {
                // The broker still counts every delivery as the consumer's (and a push broker
                // may give it more, up to its prefetch) until the timeout.
                let epoch = self.w.consumers[c as usize].epoch();
                let at = self.now + self.cfg.failure_detection.0;
                self.q.push(at, Ev::CrashDetected { c, epoch });
                self.sync_load(c);
            }
            CrashDetection::Lease | CrashDetection::Connection => {
                // No more receives; what it received stays leased to it until each lease ends.
                self.w.consumers[c as usize].forget_deliveries();
                self.sync_load(c);
                if let Some(b) = self.w.consumers[c as usize].disconnect() {
                    self.w.brokers[b as usize].detach(c);
                    self.strategy
                        .on_silent_detach(self.now, b, c, &mut self.ctl);
                    self.w.brokers[b as usize].members_changed();
                    self.demand_lost_if_none(b);
                }
            }
        }
        self.apply_control();
    }

    /// The failure-detection timeout of a consumer that died in incarnation `epoch`: the broker
    /// drops its session and redelivers what it held.
    pub(super) fn crash_detected(&mut self, c: u32, epoch: u32) {
        walk!();
        let cs = &self.w.consumers[c as usize];
        if !cs.current(epoch) {
            return;
        }
        if cs.rejoining() {
            if cs.is_connected() {
                self.session_gone(c);
                self.flush();
            }
            self.rejoin(c);
            return;
        }
        if cs.is_up() || !cs.is_connected() {
            return;
        }
        self.session_gone(c);
    }

    /// A process restarted while its dead session was still held (`[consumers]
    /// restart_takes_over = false`: Kafka's dynamic membership, where the restarted consumer's
    /// JoinGroup waits for the dead member's session timeout) joins now that it is gone.
    fn rejoin(&mut self, c: u32) {
        let epoch = self.w.consumers[c as usize].come_up();
        self.sync_load(c);
        self.consumer_reconnect(c, epoch);
    }

    /// The broker drops dead consumer `c`'s session (its timeout, or the process restarted).
    pub(super) fn session_gone(&mut self, c: u32) {
        walk!();
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, false);
    }
}
