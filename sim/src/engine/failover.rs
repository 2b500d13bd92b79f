//! Broker failover, in one place: a broker crashes (its clients lose their connections; a
//! non-persistent store loses what it held) and restarts; producers and consumers reconnect
//! through their failover lists after their reconnect delay.
//!
//! HA pairs (`[[broker]] backup_of`): two brokers share one store, one serving and one passive.
//! When the serving one dies, the passive one takes the store over after the pair's `takeover`
//! time (its wait for the store's lock: ActiveMQ Classic's slave retries every 10 s, an Artemis
//! backup every 500 ms) and serves the pair's clients, whose failover lists lead them to it. A
//! member that restarts while the other serves waits as the passive one; with `failback`
//! (Artemis's `allow-failback`) a restarted primary takes its store back at once, the backup's
//! clients failing over to it. What was delivered and not acked goes back to the store when the
//! connections drop, and is redelivered by whichever member serves next.

use super::broker::Down;
use super::events::Ev;
use super::producer::Attempt;
use super::replication::{Leadership, Replica};
use super::state::Loc;
use super::walk::walk;
use super::Engine;
use crate::history::{DiscardReason, Event, Node, Observer};
use crate::scenario::ConsumerMode;
use crate::strategy::WorldChange;
use crate::time::Time;
use std::collections::BTreeMap;

impl<O: Observer> Engine<'_, O> {
    /// Broker `b` goes down: its clients lose their connection; a non-persistent store loses
    /// everything it held.
    pub(super) fn broker_crash(&mut self, b: u16) {
        walk!();
        if self.replicated && self.w.logs[b as usize].is_some() {
            self.leader_crash(b);
            return;
        }
        match self.w.brokers[b as usize].crash() {
            Down::Already => return,
            Down::Standby => {
                // A passive member's death changes nothing its pair's clients can see.
                self.emit(Event::Crash {
                    t: self.now,
                    node: Node::Broker(b),
                });
                return;
            }
            Down::Serving => {}
        }
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Broker(b),
        });
        self.stop_serving(b);
        if !self.w.brokers[b as usize].persistent() {
            self.lose_store(b);
        }
        self.apply_control();
        self.world_change(WorldChange::BrokerCrashed(b));
        if let Some(s) = self.w.brokers[b as usize].partner() {
            if self.w.brokers[s as usize].is_standby() {
                let at = self.now + self.w.brokers[s as usize].takeover_delay();
                self.q.push(at, Ev::Takeover(s));
            }
        }
    }

    /// Whether a send routed to broker `b` (and to its HA partner) reaches a serving broker,
    /// after `b` started or stopped serving.
    fn refresh_routable(&mut self, b: u16) {
        let up = self.w.brokers[b as usize].is_up();
        match self.w.brokers[b as usize].partner() {
            Some(s) => {
                let either = up || self.w.brokers[s as usize].is_up();
                self.w.broker_up[b as usize] = either;
                self.w.broker_up[s as usize] = either;
            }
            None => self.w.broker_up[b as usize] = up,
        }
    }

    /// Broker `b` stops serving (a crash, or a failback stops the backup): its bridges close,
    /// and its clients lose their connections and fail over.
    fn stop_serving(&mut self, b: u16) {
        self.refresh_routable(b);
        if self.bridged() {
            self.bridges_broker_down(b);
        }
        let attached = self.w.brokers[b as usize].take_attached();
        for &c in &attached {
            self.flush();
            self.consumer_lost_broker(c, b);
        }
        for p in 0..self.w.producers.len() as u32 {
            self.flush();
            if self.w.producers[p as usize].connected_to() == Some(b) {
                self.producer_lost_broker(p);
            }
        }
    }

    /// A non-persistent store is lost with its broker: what it held is discarded (but for what
    /// a strategy took over or what was applied already).
    fn lose_store(&mut self, b: u16) {
        self.w.brokers[b as usize].clear_queue();
        for slot in 0..self.w.slab.msgs.len() as u32 {
            let at_b = match self.w.slab.get(slot).loc {
                Loc::Queued(x) | Loc::Held(x) => x == b,
                // Sent before the crash: on the wire, the peer stores it.
                Loc::Forwarding { from, orphan, .. } => from == b && !orphan,
                _ => false,
            };
            if at_b {
                let msg = self.msg_ref(slot);
                // A copy the strategy took over (and still holds), or one already applied, is
                // not lost with the broker's.
                let kept = self.w.held.get(&msg.id).is_some_and(|h| !h.dropped);
                if !kept && !self.w.slab.get(slot).applied {
                    self.w.held.remove(&msg.id);
                    self.emit(Event::Discard {
                        t: self.now,
                        msg,
                        reason: DiscardReason::BrokerCrash,
                    });
                }
                self.w.slab.release(slot);
            }
        }
    }

    /// Broker `b`'s store moves to it from broker `from` (its HA partner, which no longer serves
    /// it): every message stored or waiting for a redelivery delay at `from` is `b`'s now.
    fn move_store(&mut self, from: u16, b: u16) {
        let store = self.w.brokers[from as usize].take_store();
        self.w.brokers[b as usize].adopt_store(store);
        for m in self.w.slab.msgs.iter_mut() {
            match m.loc {
                Loc::Queued(x) if x == from => m.loc = Loc::Queued(b),
                Loc::Held(x) if x == from => m.loc = Loc::Held(b),
                _ => {}
            }
        }
    }

    /// Passive HA member `b`'s wait for the store's lock is over: if its partner still does
    /// not serve, it takes the store over and serves.
    pub(super) fn takeover(&mut self, b: u16) {
        walk!();
        let Some(from) = self.w.brokers[b as usize].partner() else {
            return;
        };
        if !self.w.brokers[b as usize].is_standby() || self.w.brokers[from as usize].is_up() {
            return;
        }
        self.w.brokers[b as usize].serve();
        self.move_store(from, b);
        self.start_serving(b, from);
    }

    /// Broker `b` serves (again): clients may connect, bridges open, its store is dispatched.
    /// `from`: the HA partner whose store it took over.
    fn start_serving(&mut self, b: u16, from: u16) {
        self.refresh_routable(b);
        self.emit(Event::Takeover {
            t: self.now,
            broker: b,
            from,
        });
        if self.bridged() {
            self.bridges_broker_up(b);
        }
        self.world_change(WorldChange::BrokerRestarted(b));
        self.dispatch(b);
    }

    /// Broker `b` is back; its store is dispatched again (to its bridges toward peers with
    /// consumers, or, `idle_forward`, forwarded to where the consumers are).
    pub(super) fn broker_restart(&mut self, b: u16) {
        walk!();
        if self.replicated && self.w.logs[b as usize].is_some() {
            self.replica_back(b);
            return;
        }
        // The other member of its HA pair serves its store: it waits as the passive one, or
        // (failback) takes the store back.
        let partner = self.w.brokers[b as usize]
            .partner()
            .filter(|&s| self.w.brokers[s as usize].is_up());
        if !self.w.brokers[b as usize].recover(partner.is_some()) {
            return;
        }
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Broker(b),
        });
        if let Some(s) = partner {
            if self.w.brokers[b as usize].fails_back() {
                self.w.brokers[s as usize].stand_down();
                self.stop_serving(s);
                // What only the backup's memory held does not survive its stop.
                if !self.w.brokers[s as usize].persistent() {
                    self.lose_store(s);
                }
                self.apply_control();
                self.world_change(WorldChange::BrokerCrashed(s));
                self.w.brokers[b as usize].serve();
                self.move_store(s, b);
                self.start_serving(b, s);
            }
            return;
        }
        // Its partner (dead, or passive since this one last served) holds no store it serves:
        // whatever the pair's store holds is this one's to serve.
        if let Some(s) = self.w.brokers[b as usize].partner() {
            self.move_store(s, b);
        }
        self.refresh_routable(b);
        if self.bridged() {
            self.bridges_broker_up(b);
        }
        self.world_change(WorldChange::BrokerRestarted(b));
        self.dispatch(b);
    }

    /// The leader of broker `b`'s replicated partitions crashes (`[broker.replication]`): its
    /// clients lose their connections; a follower in sync is elected after
    /// `leader_election_time` (or, with `unclean_leader_election`, one out of sync that is
    /// alive), and what the new leader lacks is cut from the log ([`Engine::truncate_log`]).
    /// With no replica to elect the partitions are offline until one returns.
    #[inline(never)]
    fn leader_crash(&mut self, b: u16) {
        let log = self.w.logs[b as usize].as_deref_mut().expect("log");
        let Leadership::Leader(l) = log.leadership else {
            // No leader to crash (an election under way, or offline): nothing goes down, and
            // this crash's end brings nobody back.
            log.idle_crashes += 1;
            return;
        };
        log.replicas[l as usize].up = false;
        log.replicas[l as usize].end = log.end;
        log.down.push_back(l);
        let next = log
            .replicas
            .iter()
            .position(|r| r.up && r.in_sync)
            .map(|r| (r as u8, false))
            .or_else(|| {
                log.unclean
                    .then(|| log.replicas.iter().position(|r| r.up))
                    .flatten()
                    .map(|r| (r as u8, true))
            });
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Broker(b),
        });
        let down = self.w.brokers[b as usize].crash();
        debug_assert_eq!(down, Down::Serving);
        self.stop_serving(b);
        self.apply_control();
        self.world_change(WorldChange::BrokerCrashed(b));
        let log = self.w.logs[b as usize].as_deref_mut().expect("log");
        let Some((to, unclean)) = next else {
            // The last replica in sync died: it stays the ISR, its log whole (its end set
            // above); the partitions wait for a replica to return.
            log.leadership = Leadership::Offline;
            return;
        };
        log.leadership = Leadership::Electing { to, unclean };
        let at = self.now + log.election_time();
        self.q.push(at, Ev::LeaderElected(b));
    }

    /// The controller's election of log `l`'s leader is over: its replica leads (after an
    /// unclean election, alone in the ISR), the log cut back to its end, and the broker serves
    /// again.
    #[inline(never)]
    pub(super) fn leader_elected(&mut self, l: u16) {
        walk!();
        let log = self.w.logs[l as usize].as_deref_mut().expect("log");
        let Leadership::Electing { to, unclean } = log.leadership else {
            return;
        };
        let end = if unclean {
            log.replicas[to as usize].end
        } else {
            log.hw
        };
        self.take_lead(l, to, unclean, end);
    }

    /// Replica `to` of log `l` leads from its log's `end`: the log is cut back to it, the
    /// replicas it left out of the ISR catch up, and the broker serves (without `brokers`: it
    /// was down).
    #[inline(never)]
    fn take_lead(&mut self, l: u16, to: u8, unclean: bool, end: u64) {
        let mut resend = self.truncate_log(l, end);
        resend.extend(self.take_waiting(l));
        let log = self.w.logs[l as usize].as_deref_mut().expect("log");
        let (b, spread) = (log.broker, log.spread);
        log.leadership = Leadership::Leader(to);
        // A leader fetches nothing: a stall of its broker no longer matters to it.
        log.replicas[to as usize].stalled = false;
        let mut catching_up = Vec::new();
        for (i, r) in log.replicas.iter_mut().enumerate() {
            if i as u8 == to {
                r.in_sync = true;
                continue;
            }
            if unclean || !r.up {
                r.in_sync = false;
            }
            // What a replica out of the ISR has is cut back to the new leader's log.
            if !r.in_sync {
                r.end = r.end.min(end);
                if r.up {
                    catching_up.push(i as u8);
                }
            }
        }
        for r in catching_up {
            let at = self.now + log.lag();
            self.q.push(at, Ev::CaughtUp { l, r });
        }
        self.send_back(resend);
        // What the resends set off (a producer failed over to another broker, which dispatched)
        // is over before the broker's recovery.
        self.flush();
        if !spread && self.w.brokers[b as usize].recover(false) {
            self.emit(Event::Recover {
                t: self.now,
                node: Node::Broker(b),
            });
            self.refresh_routable(b);
            self.world_change(WorldChange::BrokerRestarted(b));
            self.dispatch(b);
        }
        self.arm_replication(l);
    }

    /// Each producer sends its own of `resend` (producer, slot, when sent) again, in log
    /// order, before anything it holds.
    fn send_back(&mut self, resend: Vec<(u32, u32, Time)>) {
        // (A Vec: a new call site of `VecDeque<u32>::push_back` makes the compiler stop
        // inlining the broker queue's on the hot path.)
        let mut by_producer: BTreeMap<u32, Vec<(u32, Time)>> = BTreeMap::new();
        for (p, slot, written) in resend {
            by_producer.entry(p).or_default().push((slot, written));
        }
        for (p, slots) in by_producer {
            self.flush();
            self.send_again_first(p, slots);
        }
    }

    /// A crashed replica of broker `b` is back (the first that went down): it follows the
    /// leader and catches up, or, with the partitions offline, leads if it was the last in
    /// sync (or out of sync, with `unclean_leader_election`).
    #[inline(never)]
    fn replica_back(&mut self, b: u16) {
        let log = self.w.logs[b as usize].as_deref_mut().expect("log");
        if log.idle_crashes > 0 {
            log.idle_crashes -= 1;
            return;
        }
        let Some(r) = log.down.pop_front() else {
            return;
        };
        log.replicas[r as usize].up = true;
        match log.leadership {
            Leadership::Leader(_) => {
                let at = self.now + log.lag();
                self.q.push(at, Ev::CaughtUp { l: b, r });
            }
            // It follows whoever is elected (`take_lead` starts its catching up).
            Leadership::Electing { .. } | Leadership::Leaderless => {}
            Leadership::Offline => {
                let rep = log.replicas[r as usize];
                if rep.in_sync || log.unclean {
                    self.take_lead(b, r, !rep.in_sync, rep.end);
                }
            }
        }
    }

    /// The replicas on broker `node` of broker `b`'s cluster, as (log, replica), in the order
    /// its partitions were made (a log made meanwhile, by what a handler sets off, is not among
    /// them).
    fn node_replicas(&self, b: u16, node: u16) -> Vec<(u16, u8)> {
        let c = self.w.clusters[b as usize].as_deref().expect("cluster");
        c.parts
            .iter()
            .filter_map(|&l| {
                let log = self.w.logs[l as usize].as_deref().expect("log");
                log.on_node(node).map(|r| (l, r))
            })
            .collect()
    }

    /// Broker `node` of broker `b`'s Kafka cluster crashes (`[broker.replication] brokers`):
    /// the partitions it leads have no leader (writes to them are refused and retried), the
    /// ISRs it is in wait for it (their high watermarks stop) until the controller fences it,
    /// `leader_election_time` later ([`Engine::node_fenced`]). The `[[broker]]` serves on: its
    /// other partitions keep flowing, and its clients keep their connections [K45][K46].
    #[inline(never)]
    pub(super) fn node_crash(&mut self, b: u16, node: u16) {
        walk!();
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        let state = &mut c.nodes[node as usize];
        if !state.up {
            // Down already: this crash's end brings nothing back.
            state.idle += 1;
            return;
        }
        state.up = false;
        let fence = c.fence_time();
        let replicas = self.node_replicas(b, node);
        self.emit(Event::Crash {
            t: self.now,
            node: Node::Broker(b),
        });
        for (l, r) in replicas {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            let (end, hw) = (log.end, log.hw);
            let leads = log.leadership == Leadership::Leader(r);
            let rep = &mut log.replicas[r as usize];
            rep.up = false;
            if leads {
                rep.end = end;
                log.leadership = Leadership::Leaderless;
                log.leader_lost = self.now;
            } else if rep.in_sync {
                // An in-sync follower has the high watermark.
                rep.end = hw;
            }
        }
        self.q.push(self.now + fence, Ev::NodeFenced { b, node });
    }

    /// The controller fences broker `node` of broker `b`'s cluster, its session over
    /// (`ReplicationControlManager.handleBrokerFenced`): it leaves every ISR, and each
    /// partition it led elects a leader from the rest of its ISR (with
    /// `unclean_leader_election`, from the replicas alive), or is offline until one returns.
    /// A broker restarted meanwhile follows from now on, and catches up [K46].
    #[inline(never)]
    pub(super) fn node_fenced(&mut self, b: u16, node: u16) {
        walk!();
        for (l, r) in self.node_replicas(b, node) {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            match log.leadership {
                Leadership::Leaderless => {
                    let others = |ok: &dyn Fn(&Replica) -> bool| {
                        log.replicas
                            .iter()
                            .enumerate()
                            .position(|(i, x)| i != r as usize && ok(x))
                            .map(|i| i as u8)
                    };
                    let clean = others(&|x| x.up && x.in_sync);
                    let unclean = if log.unclean { others(&|x| x.up) } else { None };
                    let rep = log.replicas[r as usize];
                    match (clean, unclean) {
                        (Some(to), _) => {
                            log.replicas[r as usize].in_sync = false;
                            let end = log.in_sync_end(to, log.leader_lost);
                            self.take_lead(l, to, false, end);
                        }
                        (None, Some(to)) => {
                            log.replicas[r as usize].in_sync = false;
                            let end = log.replicas[to as usize].end;
                            self.take_lead(l, to, true, end);
                        }
                        // Back already and nobody else to lead: it leads again (its log whole).
                        (None, None) if rep.up => self.take_lead(l, r, false, rep.end),
                        // The last of the ISR: it stays in it; the partition waits for it, and
                        // its producers retry what waited for a leader.
                        (None, None) => {
                            log.leadership = Leadership::Offline;
                            let waiting = self.take_waiting(l);
                            self.send_back(waiting);
                        }
                    }
                }
                Leadership::Leader(_) => {
                    let rep = &mut log.replicas[r as usize];
                    if rep.in_sync {
                        rep.in_sync = false;
                        if rep.up {
                            let at = self.now + log.lag();
                            self.q.push(at, Ev::CaughtUp { l, r });
                        }
                    }
                    self.arm_replication(l);
                }
                Leadership::Electing { .. } | Leadership::Offline => {}
            }
        }
        self.arm_balance(b);
    }

    /// Broker `node` of broker `b`'s cluster is back: each of its replicas follows its leader
    /// and catches up (one still in the ISR, not yet fenced, counts again at once), or leads a
    /// partition offline for want of it (`handleBrokerUnfenced`: if it was the last of the
    /// ISR, or out of sync under `unclean_leader_election`).
    #[inline(never)]
    pub(super) fn node_restart(&mut self, b: u16, node: u16) {
        walk!();
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        let state = &mut c.nodes[node as usize];
        if state.idle > 0 {
            state.idle -= 1;
            return;
        }
        if state.up {
            return;
        }
        state.up = true;
        let replicas = self.node_replicas(b, node);
        self.emit(Event::Recover {
            t: self.now,
            node: Node::Broker(b),
        });
        for (l, r) in replicas {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            log.replicas[r as usize].up = true;
            let rep = log.replicas[r as usize];
            match log.leadership {
                Leadership::Leader(_) if !rep.in_sync => {
                    let at = self.now + log.lag();
                    self.q.push(at, Ev::CaughtUp { l, r });
                }
                Leadership::Leader(_) => self.arm_replication(l),
                Leadership::Offline if rep.in_sync || log.unclean => {
                    self.take_lead(l, r, !rep.in_sync, rep.end);
                }
                _ => {}
            }
        }
        self.arm_balance(b);
    }

    /// Broker `node` of broker `b`'s cluster stops fetching (a `replica_stall`), alive: each
    /// follower of it in an ISR holds its high watermark from now on, until its leader's ISR
    /// check drops it (`Partition.maybeShrinkIsr`, [`Engine::isr_check`]) [K48].
    #[inline(never)]
    pub(super) fn replica_stall(&mut self, b: u16, node: u16) {
        walk!();
        let now = self.now;
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        let state = &mut c.nodes[node as usize];
        if state.stalled {
            return;
        }
        state.stalled = true;
        state.stalls += 1;
        let epoch = state.stalls;
        let at = c.isr_check_after(now);
        for (l, r) in self.node_replicas(b, node) {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            if log.leadership == Leadership::Leader(r) {
                continue;
            }
            let hw = log.hw;
            let rep = &mut log.replicas[r as usize];
            rep.stalled = true;
            if rep.in_sync && rep.up {
                rep.end = hw;
            }
        }
        self.q.push(at, Ev::IsrCheck { b, node, epoch });
    }

    /// The leaders' ISR check finds broker `node` of broker `b`'s cluster still stalled: each
    /// ISR it is in as a follower drops it (`getOutOfSyncReplicas`: not caught up for longer
    /// than `replica.lag.time.max.ms`; one whose log end is its leader's is caught up and
    /// stays), and the high watermark goes on with the rest, or, below `min_insync_replicas`,
    /// stays (KAFKA-15583) while `acks=all` writes are refused [K24][K48]. Checked again
    /// every half of `replica.lag.time.max.ms` while the stall lasts.
    #[inline(never)]
    pub(super) fn isr_check(&mut self, b: u16, node: u16, epoch: u32) {
        walk!();
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        let state = c.nodes[node as usize];
        if !state.stalled || state.stalls != epoch {
            return;
        }
        let next = self.now + (c.lag_time_max / 2).max(1);
        for (l, r) in self.node_replicas(b, node) {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            let end = log.end;
            let follows = matches!(log.leadership, Leadership::Leader(x) if x != r);
            let rep = &mut log.replicas[r as usize];
            if !follows || !rep.stalled || !rep.in_sync || rep.end >= end {
                continue;
            }
            rep.in_sync = false;
            self.arm_replication(l);
        }
        self.q.push(next, Ev::IsrCheck { b, node, epoch });
    }

    /// Broker `node` of broker `b`'s cluster fetches again: a follower still in its ISR
    /// counts again at once, one dropped catches up (one `replication_lag`) and rejoins
    /// (`maybeExpandIsr`) [K48].
    #[inline(never)]
    pub(super) fn replica_resume(&mut self, b: u16, node: u16) {
        walk!();
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        let state = &mut c.nodes[node as usize];
        if !state.stalled {
            return;
        }
        state.stalled = false;
        for (l, r) in self.node_replicas(b, node) {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            let rep = &mut log.replicas[r as usize];
            if !rep.stalled {
                continue;
            }
            rep.stalled = false;
            let rep = *rep;
            if rep.in_sync {
                self.arm_replication(l);
            } else if rep.up && matches!(log.leadership, Leadership::Leader(_)) {
                let at = self.now + log.lag();
                self.q.push(at, Ev::CaughtUp { l, r });
            }
        }
    }

    /// Schedules the controller's leader imbalance check on broker `b`'s cluster, if some
    /// partition is not led by its preferred replica and none is scheduled:
    /// `leader.imbalance.check.interval.seconds` later (`QuorumController.
    /// maybeScheduleNextBalancePartitionLeaders`, after each controller write) [K47].
    pub(super) fn arm_balance(&mut self, b: u16) {
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        let Some(every) = c.balance_every.filter(|_| !c.balance_armed) else {
            return;
        };
        let logs = &self.w.logs;
        let imbalanced = c.parts.iter().any(|&l| {
            logs[l as usize]
                .as_deref()
                .is_some_and(|log| log.leadership != Leadership::Leader(0))
        });
        if imbalanced {
            c.balance_armed = true;
            self.q.push(self.now + every, Ev::LeaderBalance(b));
        }
    }

    /// The leader imbalance check (`ReplicationControlManager.maybeBalancePartitionLeaders`):
    /// each partition whose preferred replica (its first) is alive and in the ISR and does not
    /// lead is led by it again (`Election.PREFERRED`); what its log lacks of the old leader's
    /// (the records its fetches had not brought yet) is cut. Then the next check, if still imbalanced.
    #[inline(never)]
    pub(super) fn leader_balance(&mut self, b: u16) {
        walk!();
        let c = self.w.clusters[b as usize].as_deref_mut().expect("cluster");
        c.balance_armed = false;
        let parts = c.parts.clone();
        for l in parts {
            let log = self.w.logs[l as usize].as_deref_mut().expect("log");
            let first = log.replicas[0];
            if matches!(log.leadership, Leadership::Leader(x) if x != 0)
                && first.up
                && first.in_sync
            {
                let end = log.in_sync_end(0, self.now);
                self.take_lead(l, 0, false, end);
            }
        }
        self.arm_balance(b);
    }

    /// The producer's broker went down: drop the connection and try the list again later.
    pub(super) fn producer_lost_broker(&mut self, p: u32) {
        walk!();
        if self.w.producers[p as usize].lose_broker() {
            let at = self.now + self.sc.producers.reconnect_delay.0;
            self.q.push(at, Ev::ProducerReconnect(p));
        }
    }

    /// A connection attempt: the first broker of the list that is up; else try again later.
    pub(super) fn producer_reconnect(&mut self, p: u32) {
        walk!();
        // A dead producer process (`producer_crash`) connects again only once restarted.
        if self.w.producers[p as usize].is_dead() {
            return;
        }
        let brokers = &self.w.brokers;
        let attempt = self.w.producers[p as usize].try_connect(|b| brokers[b as usize].is_up());
        let (b, failover, buffered) = match attempt {
            Attempt::AlreadyConnected => return,
            Attempt::NoneUp => {
                let at = self.now + self.sc.producers.reconnect_delay.0.max(1);
                self.q.push(at, Ev::ProducerReconnect(p));
                return;
            }
            Attempt::Connected {
                broker,
                failover,
                buffered,
            } => (broker, failover, buffered),
        };
        self.emit(Event::Connect {
            t: self.now,
            node: Node::Producer(p),
            broker: b,
            failover,
        });
        // Buffered sends go through the strategy's routing, in order, like any send.
        for slot in buffered {
            self.send(p, slot);
        }
    }

    /// The consumer's broker crashed: its connection is gone (the process goes on); it fails over.
    pub(super) fn consumer_lost_broker(&mut self, c: u32, b: u16) {
        walk!();
        debug_assert_eq!(self.w.consumers[c as usize].connected_to(), Some(b));
        // The broker's attached list was already taken by the crash; detach does the rest.
        let free = self.free_prefetch(c);
        self.w.brokers[b as usize].attach(c, free);
        self.w.consumers[c as usize].lost_connection();
        self.emit(Event::Disconnect {
            t: self.now,
            node: Node::Consumer(c),
        });
        self.detach(c, true);
        self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0);
    }

    pub(super) fn schedule_reconnect(&mut self, c: u32, after: u64) {
        walk!();
        let epoch = self.w.consumers[c as usize].epoch();
        self.q
            .push(self.now + after, Ev::ConsumerReconnect { c, epoch });
    }

    /// A connection attempt through the failover list; retried after the reconnect delay.
    pub(super) fn consumer_reconnect(&mut self, c: u32, epoch: u32) {
        walk!();
        let cs = &self.w.consumers[c as usize];
        if !cs.alive_in(epoch)
            || cs.is_connected()
            || cs.cut_off()
            || cs.is_suspended()
            || cs.is_away()
        {
            return;
        }
        if self.sc.consumers.mode == ConsumerMode::Batch && !cs.in_job() {
            return;
        }
        match cs.first_reachable(|b| self.w.brokers[b as usize].is_up()) {
            Some(b) => self.attach(c, b),
            None => self.schedule_reconnect(c, self.sc.consumers.reconnect_delay.0.max(1)),
        }
    }
}
