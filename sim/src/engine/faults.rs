//! The fault plan acting on the world: each planned fault starts and, if it has a duration, ends.
//! (The catalogue of kinds, their fields and the plan itself: `crate::faults`.)

use super::events::Ev;
use super::walk::walk;
use super::Engine;
use crate::faults::FaultAction;
use crate::history::{Event, Node, Observer};
use crate::strategy::WorldChange;

impl<O: Observer> Engine<'_, O> {
    pub(super) fn fault_start(&mut self, i: u32) {
        walk!();
        self.fault_transition();
        let f = &self.plan.faults[i as usize];
        let (action, duration) = (f.action, f.duration);
        match action {
            FaultAction::BrokerCrash {
                broker,
                node: Some(n),
            } => self.node_crash(broker, n),
            FaultAction::BrokerCrash { broker, node: None } => self.broker_crash(broker),
            FaultAction::ConsumerCrash { consumer } => self.consumer_crash(consumer),
            FaultAction::NetworkBlip { consumer } => self.blip_start(consumer),
            FaultAction::ConsumerPause { consumer } => self.pause_start(consumer),
            FaultAction::ConsumerLeave { consumer } => self.leave_start(consumer),
            FaultAction::MemberLeave { broker } => {
                self.world_change(WorldChange::MemberLeft(broker))
            }
            FaultAction::AddPartitions { count } => {
                self.world_change(WorldChange::PartitionsAdded(count))
            }
            FaultAction::ProducerCrash { producer } => self.producer_crash(producer),
            FaultAction::ReplicaStall { broker, node } => self.replica_stall(broker, node),
            FaultAction::DbOutage => {
                self.w.db_down += 1;
                if self.w.db_down == 1 {
                    self.emit(Event::Crash {
                        t: self.now,
                        node: Node::TargetDb,
                    });
                    self.world_change(WorldChange::Target { up: false });
                }
            }
            FaultAction::SlowConsumer { consumer, factor } => {
                self.w.consumers[consumer as usize].slow_down(factor)
            }
            FaultAction::ClockSkew { producer, skew } => {
                self.w.producers[producer as usize].step_clock(skew);
            }
            FaultAction::Poison { fraction } => self.w.poison_boost.push(fraction),
            FaultAction::SendError { producer, fraction } => {
                self.w.send_errors.push((producer, fraction, false));
                self.send_path_changed();
            }
            FaultAction::SendTimeout { producer, fraction } => {
                self.w.send_errors.push((producer, fraction, true));
                self.send_path_changed();
            }
            FaultAction::SourceOutage => {
                self.w.source_down += 1;
                if self.w.source_down == 1 {
                    self.emit(Event::Crash {
                        t: self.now,
                        node: Node::SourceDb,
                    });
                }
            }
            FaultAction::CacheCollapse => {
                self.emit(Event::Crash {
                    t: self.now,
                    node: Node::Cache,
                });
                self.emit(Event::Recover {
                    t: self.now,
                    node: Node::Cache,
                });
                self.world_change(WorldChange::CacheCollapse);
            }
            FaultAction::DlqReplay { broker } => match broker {
                Some(b) => self.dlq_replay(b),
                None => {
                    for b in 0..self.w.brokers.len() as u16 {
                        self.flush();
                        self.dlq_replay(b);
                    }
                }
            },
            FaultAction::ResetGroups { broker } => match broker {
                Some(b) => self.reset_groups(b),
                None => {
                    for b in 0..self.w.brokers.len() as u16 {
                        self.flush();
                        self.reset_groups(b);
                    }
                }
            },
        }
        if let Some(mut d) = duration {
            if let FaultAction::BrokerCrash { broker, .. } = action {
                // The fault's `for` is how long the broker stays down; its restart comes on top.
                if let Some(restart) = self.w.brokers[broker as usize].restart_delay() {
                    d = d.saturating_add(restart);
                }
            }
            self.q.push(self.now.saturating_add(d), Ev::FaultEnd(i));
        }
        self.phase_step();
    }

    pub(super) fn fault_end(&mut self, i: u32) {
        walk!();
        self.fault_transition();
        let action = self.plan.faults[i as usize].action;
        match action {
            FaultAction::BrokerCrash {
                broker,
                node: Some(n),
            } => self.node_restart(broker, n),
            FaultAction::BrokerCrash { broker, node: None } => self.broker_restart(broker),
            FaultAction::ConsumerCrash { consumer } => self.consumer_restart(consumer),
            FaultAction::NetworkBlip { consumer } => self.blip_end(consumer),
            FaultAction::ConsumerPause { consumer } => self.pause_end(consumer),
            FaultAction::ConsumerLeave { consumer } => self.leave_end(consumer),
            FaultAction::MemberLeave { broker } => {
                self.world_change(WorldChange::MemberJoined(broker))
            }
            FaultAction::ProducerCrash { producer } => self.producer_restart(producer),
            FaultAction::ReplicaStall { broker, node } => self.replica_resume(broker, node),
            FaultAction::DbOutage => {
                self.w.db_down -= 1;
                if self.w.db_down == 0 {
                    self.emit(Event::Recover {
                        t: self.now,
                        node: Node::TargetDb,
                    });
                    self.world_change(WorldChange::Target { up: true });
                }
            }
            FaultAction::SlowConsumer { consumer, factor } => {
                self.w.consumers[consumer as usize].speed_up(factor)
            }
            FaultAction::ClockSkew { producer, skew } => {
                self.w.producers[producer as usize].step_clock(skew.saturating_neg());
            }
            FaultAction::SourceOutage => {
                self.w.source_down -= 1;
                if self.w.source_down == 0 {
                    self.emit(Event::Recover {
                        t: self.now,
                        node: Node::SourceDb,
                    });
                }
            }
            FaultAction::Poison { fraction } => {
                if let Some(j) = self.w.poison_boost.iter().position(|&x| x == fraction) {
                    self.w.poison_boost.swap_remove(j);
                }
            }
            FaultAction::SendError { producer, fraction }
            | FaultAction::SendTimeout { producer, fraction } => {
                let stored = matches!(action, FaultAction::SendTimeout { .. });
                if let Some(j) = self
                    .w
                    .send_errors
                    .iter()
                    .position(|&x| x == (producer, fraction, stored))
                {
                    self.w.send_errors.swap_remove(j);
                }
                self.send_path_changed();
            }
            // An instant: the plan never gives it a duration (validation refuses `for`).
            FaultAction::CacheCollapse
            | FaultAction::DlqReplay { .. }
            | FaultAction::ResetGroups { .. }
            | FaultAction::AddPartitions { .. } => {}
        }
        self.phase_step();
    }

    /// The `reset_groups` fault on broker `b`: the strategy forgets its group owners there
    /// ([`WorldChange::GroupsReset`]; one that had owners asks for a redispatch). The answers
    /// dispatch cached for held messages (a group waiting for its full owner) no longer stand,
    /// so they are voided. Nothing already dispatched moves. A broker that is down has no queue
    /// to reset.
    fn reset_groups(&mut self, b: u16) {
        if !self.w.brokers[b as usize].is_up() {
            return;
        }
        self.w.brokers[b as usize].members_changed();
        self.world_change(WorldChange::GroupsReset(b));
    }

    /// The `producer_crash` fault: producer `p`'s process dies. Its connection goes (what it
    /// has not sent, and what the application produces meanwhile, waits in its buffer); its
    /// transaction stays open at the broker until its successor's `initTransactions` or the
    /// transaction timeout (`txn.rs`).
    fn producer_crash(&mut self, p: u32) {
        if !self.w.producers[p as usize].crash() {
            return;
        }
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Producer(p),
        });
    }

    /// The `producer_crash` fault ends: a new instance of producer `p` starts. It aborts its
    /// transactional id's open transaction and writes again what was written since its
    /// application's last commit (`txn.rs`), ahead of what waited, then connects.
    fn producer_restart(&mut self, p: u32) {
        if !self.w.producers[p as usize].restart() {
            return;
        }
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Producer(p),
        });
        let again = self.txn_restart(p);
        self.w.producers[p as usize].send_after_reconnect(again);
        self.flush();
        self.producer_reconnect(p);
    }

    /// A planned fault starts or ends: progress (the world changed), and one fewer to come.
    fn fault_transition(&mut self) {
        self.fault_transitions_left -= 1;
        self.last_progress = self.events;
    }
}
