//! The fault plan acting on the world: each planned fault starts and, if it has a duration, ends.
//! (The catalogue of kinds, their fields and the plan itself: `crate::faults`.)

use super::events::Ev;
use super::walk::walk;
use super::Engine;
use crate::faults::FaultAction;
use crate::history::{DiscardReason, Event, Node, Observer};
use crate::strategy::WorldChange;
use std::collections::VecDeque;

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
            FaultAction::ProducerPause {
                producer,
                replaced_after,
            } => self.producer_pause(producer, replaced_after),
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
            FaultAction::Poison { fraction } => {
                self.w.poison_boost.push(fraction);
                self.poison_boost_changed();
            }
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
            FaultAction::ProducerPause { producer, .. } => self.producer_wake(producer),
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
                self.poison_boost_changed();
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

    /// The arrivals draw poison with the largest fraction in force (`poison` faults may overlap).
    fn poison_boost_changed(&mut self) {
        let boost = self.w.poison_boost.iter().copied().fold(0.0, f64::max);
        self.keys.set_poison_boost(boost);
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
        let again = self.new_instance(p, &[], 0);
        self.run_instance(p, again);
    }

    /// A new instance of producer `p` starts (it is not dead): a `Recover` of the producer, then
    /// `initTransactions` and the application's production again from its last commit: the
    /// copies of what was written since and of `held`, what a paused instance still holds,
    /// announced at broker `held_at` (`txn.rs`), returned for [`Engine::run_instance`].
    fn new_instance(&mut self, p: u32, held: &[u32], held_at: u16) -> VecDeque<u32> {
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Producer(p),
        });
        self.txn_restart(p, held, held_at)
    }

    /// Producer `p`'s new instance sends `again` (its copies) first, ahead of what waited, and
    /// connects.
    fn run_instance(&mut self, p: u32, again: VecDeque<u32>) {
        self.w.producers[p as usize].send_after_reconnect(again);
        self.flush();
        self.producer_reconnect(p);
    }

    /// The `producer_pause` fault: producer `p`'s process stops (a GC pause, a frozen VM). What
    /// it holds unsent stays with it ([`super::producer::Producer::pause`]); its open
    /// transaction stays open until the coordinator's timeout or a new instance. With
    /// `replaced_after`, the application's orchestration starts a new instance that long into
    /// the pause.
    fn producer_pause(&mut self, p: u32, replaced_after: Option<u64>) {
        let Some(serial) = self.w.producers[p as usize].pause() else {
            return;
        };
        if let Some(r) = replaced_after {
            let at = self.now.saturating_add(r.max(1));
            self.q.push(at, Ev::ProducerReplaced { p, serial });
        }
    }

    /// A new instance of paused producer `p` starts (its pause `serial` still lasting): it
    /// produces again from the application's last commit, the paused instance's unsent sends
    /// included (copies: the paused one keeps its own), and, transactional, its
    /// `initTransactions` aborts the open transaction and bumps the epoch: the paused one is
    /// a fenced zombie.
    pub(super) fn producer_replaced(&mut self, p: u32, serial: u32) {
        walk!();
        let Some((held, at)) = self.w.producers[p as usize].replace(serial) else {
            return;
        };
        let again = self.new_instance(p, &held, at);
        self.run_instance(p, again);
    }

    /// The `producer_pause` fault ends: the paused instance of producer `p` runs again with
    /// what it held. A fenced one (transactional, and a new instance took over or the
    /// coordinator aborted its timed-out transaction, each bumping the epoch) has its late
    /// writes refused (`INVALID_PRODUCER_EPOCH` from the partition leader, `PRODUCER_FENCED`
    /// from the coordinator: fatal, the client closes): each a `discard`, reason `fenced`; if
    /// no new instance had started, the application starts one now, producing again from its
    /// last commit. A zombie that is not fenced (no transactions: the new instance is a new
    /// producer id) writes what it held, after what the new instance wrote: duplicates, out of
    /// order. A producer not replaced and not fenced just goes on: what it held first, then
    /// what waited, and its transaction commits.
    fn producer_wake(&mut self, p: u32) {
        let Some(woken) = self.w.producers[p as usize].wake() else {
            return;
        };
        let transactional = self.cfg.transactional;
        let fenced = transactional && (woken.replaced || self.txn_fenced(p));
        if fenced && woken.replaced {
            self.fence(p, woken.held);
        } else if fenced {
            // The application's handler of the fatal error starts a new instance at once
            // (Kafka Streams: the task migrated, the thread rejoins and creates a producer). Its
            // copies are announced before the refusals: the checkers count a discarded record
            // whose copy was stored as not gone.
            let held: Vec<u32> = woken.held.iter().copied().collect();
            let again = self.new_instance(p, &held, woken.broker);
            self.fence(p, woken.held);
            self.run_instance(p, again);
        } else if woken.replaced {
            // The zombie's late writes reach the broker behind the new instance's.
            for slot in woken.held {
                self.send(p, slot);
            }
        } else {
            self.w.producers[p as usize].send_after_reconnect(woken.held);
            self.txn_wake(p);
            self.flush();
            self.producer_reconnect(p);
        }
    }

    /// A fenced zombie's late writes (`held`) are refused: each a `discard`, reason `fenced`
    /// (its copy, written by the new instance, was announced before). A send the broker had
    /// stored with its answer lost (a `send_timeout`) has its first write at the broker: its
    /// waiting resend just goes.
    fn fence(&mut self, p: u32, held: VecDeque<u32>) {
        for slot in held {
            self.flush();
            if !self.w.producers[p as usize].forget_resend(slot) {
                let msg = self.w.slab.get(slot).r();
                self.emit(Event::Discard {
                    t: self.now,
                    msg,
                    reason: DiscardReason::Fenced,
                });
            }
            self.w.slab.release(slot);
        }
    }

    /// A planned fault starts or ends: progress (the world changed), and one fewer to come.
    fn fault_transition(&mut self) {
        self.fault_transitions_left -= 1;
        self.last_progress = self.events;
    }
}
