//! The fault plan acting on the world: each planned fault starts and, if it has a duration, ends.

use super::events::Ev;
use super::Engine;
use crate::faults::Target;
use crate::history::{Event, Node, Observer};
use crate::scenario::FaultKind;
use crate::strategy::{Strategy, WorldChange};

impl<S: Strategy, O: Observer> Engine<'_, S, O> {
    pub(super) fn fault_start(&mut self, i: u32) {
        let f = &self.plan.faults[i as usize];
        let (kind, target, duration) = (f.kind, f.target, f.duration);
        match (kind, target) {
            (FaultKind::BrokerCrash, Target::Broker(b)) => self.broker_crash(b),
            (FaultKind::ConsumerCrash, Target::Consumer(c)) => self.consumer_crash(c),
            (FaultKind::NetworkBlip, Target::Consumer(c)) => self.blip_start(c),
            (FaultKind::DbOutage, _) => {
                self.w.db_down += 1;
                if self.w.db_down == 1 {
                    self.emit(Event::Crash {
                        t: self.now,
                        node: Node::TargetDb,
                    });
                    self.world_change(WorldChange::Target { up: false });
                }
            }
            (FaultKind::SlowConsumer, Target::Consumer(c)) => {
                self.w.consumers[c as usize].slow *= f.factor
            }
            (FaultKind::ClockSkew, Target::Producer(p)) => {
                let ps = &mut self.w.producers[p as usize];
                ps.clock_offset = ps.clock_offset.saturating_add(f.skew);
            }
            (FaultKind::Poison, _) => self.w.poison_boost.push(f.fraction),
            (FaultKind::SourceOutage, _) => {
                self.w.source_down += 1;
                if self.w.source_down == 1 {
                    self.emit(Event::Crash {
                        t: self.now,
                        node: Node::SourceDb,
                    });
                }
            }
            (FaultKind::CacheCollapse, _) => {
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
            _ => unreachable!("fault plan targets are built to match their kinds"),
        }
        if let Some(d) = duration {
            self.q.push(self.now.saturating_add(d), Ev::FaultEnd(i));
        }
        self.phase_step();
    }

    pub(super) fn fault_end(&mut self, i: u32) {
        let f = &self.plan.faults[i as usize];
        let (kind, target) = (f.kind, f.target);
        match (kind, target) {
            (FaultKind::BrokerCrash, Target::Broker(b)) => self.broker_restart(b),
            (FaultKind::ConsumerCrash, Target::Consumer(c)) => self.consumer_restart(c),
            (FaultKind::NetworkBlip, Target::Consumer(c)) => self.blip_end(c),
            (FaultKind::DbOutage, _) => {
                self.w.db_down -= 1;
                if self.w.db_down == 0 {
                    self.emit(Event::Recover {
                        t: self.now,
                        node: Node::TargetDb,
                    });
                    self.world_change(WorldChange::Target { up: true });
                }
            }
            (FaultKind::SlowConsumer, Target::Consumer(c)) => {
                self.w.consumers[c as usize].slow /= f.factor
            }
            (FaultKind::ClockSkew, Target::Producer(p)) => {
                let ps = &mut self.w.producers[p as usize];
                ps.clock_offset = ps.clock_offset.saturating_sub(f.skew);
            }
            (FaultKind::SourceOutage, _) => {
                self.w.source_down -= 1;
                if self.w.source_down == 0 {
                    self.emit(Event::Recover {
                        t: self.now,
                        node: Node::SourceDb,
                    });
                }
            }
            (FaultKind::Poison, _) => {
                if let Some(j) = self.w.poison_boost.iter().position(|&x| x == f.fraction) {
                    self.w.poison_boost.swap_remove(j);
                }
            }
            _ => unreachable!("fault plan targets are built to match their kinds"),
        }
        self.phase_step();
    }
}
