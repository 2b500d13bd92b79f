//! `servicebus_sessions`: Azure Service Bus message sessions, session = key (`SessionId`, the
//! AMQP `group-id`).
//!
//! What it models, from the service's documentation (message-sessions.md, Z1 in
//! docs/sources.md) and the .NET SDK's session processor (`ServiceBusSessionProcessorOptions`,
//! `SessionReceiverManager`, Z2/Z5):
//!
//! - **One receiver per session, holding an exclusive lock.** A receiver accepts an available
//!   session and then holds "an exclusive lock on all messages with that session's session ID ...
//!   [and] on all messages with the session ID that will arrive later": every message of the
//!   session goes to it and to nobody else; a session without an owner delivers nothing. Here a
//!   consumer is one of a processor's `MaxConcurrentSessions` session receivers (8 by default, so
//!   `[consumers] count` is processes × 8), each holding one session at a time
//!   (`MaxConcurrentCallsPerSession` 1), receiving one message at a time (`PrefetchCount` 0 is
//!   `prefetch = 1`). A receiver without a session accepts the next session that has messages
//!   (round-robin among free receivers).
//! - **Closing on idle.** `SessionReceiverManager.ReceiveAndProcessMessagesAsync` loops on its
//!   session until a receive returns nothing within `SessionIdleTimeout` (default: the retry
//!   options' `TryTimeout`, 60s), then closes the session and accepts another
//!   (`session_idle_timeout`). A session whose messages keep coming within that time is never
//!   given up: with more busy sessions than receivers, the others wait.
//! - **The lock is a lease on the session.** It lasts the queue's `LockDuration` (60s) and the
//!   processor renews it; the engine's `[lease]` under `flavour = "servicebus"` carries it for
//!   each delivery (renewed while the receiver works, 50s apart). A receiver that freezes with
//!   its connection open (`consumer_pause`) stops renewing: its session stays locked, its
//!   messages undelivered, until the lock expires; then another receiver accepts the session and
//!   gets the expired message again (its delivery count raised). The frozen receiver, resumed,
//!   finishes its message and writes it (a zombie write), and its complete fails.
//! - **A crashed receiver releases its session at once.** Its process dies, its OS closes its
//!   socket, and the service closes the session with the connection: "the lock is released when
//!   you call the close related methods on the receiver or when the lock expires", and a session
//!   closed with messages not completed raises no delivery count (Z1's delivery-count table);
//!   the session lock is released when the connection is severed (Z6). The flavour notices the
//!   crash by the connection (`crash_detection = "connection"`) and gives the messages back
//!   uncounted (`count_lost = false`); another receiver accepts the session at once. (Under
//!   `crash_detection = "lease"` a dead receiver's session stays locked one `LockDuration`.)
//! - **Renewal is capped per session.** The processor renews the session lock from the
//!   session's acceptance, every `renew_every`, and stops `MaxAutoLockRenewalDuration`
//!   (`[lease] renew_max`, 5 min) after it (`SessionReceiverManager.RenewSessionLock`:
//!   `CancelAfter(MaxAutoLockRenewalDuration)`; message locks are not renewed for a session
//!   receiver, `ReceiverManager.ProcessOneMessage`) (Z5). A session held longer (its messages
//!   keep coming within `SessionIdleTimeout`) loses its lock when the last renewal's lock runs
//!   out (5 min 10 s after acceptance by default, [`session_lock_end`]): the message in hand goes
//!   back counted, its complete fails (`SessionLockLost`), and the session goes to whichever
//!   receiver accepts it next (the same processor may, with its renewal starting again). A
//!   hot session thus produces a duplicate every 5 min 10 s when a message is in hand then, and a
//!   message that is in hand at ten such losses is dead-lettered though nothing is wrong with it.
//! - **Abandon re-serves the same message next.** A failed processing abandons the message: it
//!   goes back to the head of its session, still locked to the same receiver, which gets it on its
//!   next receive (non-blocking, no delay, `requeue = "head"` under the flavour); nothing behind
//!   it moves (head-of-line). At `MaxDeliveryCount` (10) deliveries, counting lock expiries, the
//!   message goes to the dead-letter subqueue and the session goes on with the next one.
//!
//! Simplifications: between acceptance and the cap the engine renews each delivery's lease from
//! that delivery (50s apart), not the session's from its acceptance; a frozen receiver's lock
//! thus runs out up to 50s earlier or later than its session lock would. A message without a
//! session id goes to any receiver (the real queue refuses it). Session state (`SetState`) is
//! not modelled.
//!
//! Parameters (`[strategy.servicebus_sessions]`): `session_idle_timeout` (60s).

use serde::{Deserialize, Serialize};
use sim::strategy::{
    ConsumerSlot, Control, DispatchCtx, Handler, MsgView, Outcome, Select, Strategy,
};
use sim::time::{Dur, Time};

/// `[strategy.servicebus_sessions]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServicebusSessionsParams {
    /// `SessionIdleTimeout`: a receiver closes its session after this long without a message
    /// of it, and accepts another.
    #[serde(default = "default_idle")]
    pub session_idle_timeout: Dur,
}

fn default_idle() -> Dur {
    Dur::from_secs(60)
}

impl Default for ServicebusSessionsParams {
    fn default() -> Self {
        ServicebusSessionsParams {
            session_idle_timeout: default_idle(),
        }
    }
}

/// No owner / no session.
const NIL: u32 = u32::MAX;
/// Token bit of a wake-up for a lock held by a receiver that is gone.
const LOCK_WAKE: u64 = 1 << 32;
/// Token bit of a wake-up for a session lock whose renewal stopped (`MaxAutoLockRenewalDuration`
/// after its acceptance).
const CAP_WAKE: u64 = 1 << 33;

/// One session (key).
#[derive(Clone, Copy, Debug)]
struct Session {
    /// The receiver holding its lock (NIL: none alive).
    owner: u32,
    /// Its messages delivered and neither settled nor back in the queue.
    in_flight: u32,
    /// Without an owner: still locked (by a receiver that is gone) until then.
    locked_until: Time,
    /// With an owner and nothing in flight: since when it has been idle.
    idle_since: Time,
    /// An idle wake-up is pending.
    idle_wake: bool,
    /// Its lock was lost (expired, or its receiver went away): the next owner takes it over.
    lost: bool,
    /// With an owner: when it accepted the session (its renewal cap counts from then).
    accepted_at: Time,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            owner: NIL,
            in_flight: 0,
            locked_until: 0,
            idle_since: 0,
            idle_wake: false,
            lost: false,
            accepted_at: 0,
        }
    }
}

/// Azure Service Bus sessions over one queue.
#[derive(Debug)]
pub struct ServicebusSessions {
    sessions: Vec<Session>,
    /// Per receiver (consumer id): the session it holds, or NIL.
    holds: Vec<u32>,
    /// Messages whose processing just failed (abandoned): their return keeps the lock.
    abandoned: Vec<u64>,
    /// Receiver the next free-session acceptance starts from.
    next: u32,
    idle: Dur,
    /// The queue's lock duration (None: no lease, locks end with the connection).
    lock: Option<Dur>,
    /// How long after its acceptance a held session's lock ends, its renewal having stopped
    /// ([`session_lock_end`]; None: renewed for as long as it is held).
    cap: Option<Dur>,
}

/// How long after its acceptance a session lock ends when its receiver holds it throughout:
/// the processor renews it every `renew_every` while less than `renew_max` has passed since the
/// acceptance (`RenewSessionLock`: `CancelAfter(MaxAutoLockRenewalDuration)`, started when the
/// session receiver is created), then the last renewal's lock runs out. No renewal: one lock
/// duration; renewal without a bound: never (None).
pub fn session_lock_end(lease: sim::scenario::LeasePolicy) -> Option<Dur> {
    let last = match (lease.renew_every, lease.renew_max) {
        (None, _) => 0,
        (Some(_), None) => return None,
        // Renewals at k * every for every k >= 1 with k * every < max.
        (Some(every), Some(max)) => max.0.saturating_sub(1) / every.0.max(1) * every.0,
    };
    Some(Dur(last.saturating_add(lease.duration.0)))
}

impl ServicebusSessions {
    /// The session `consumer` holds, if any.
    fn held_by(&self, consumer: u32) -> Option<usize> {
        self.holds
            .get(consumer as usize)
            .filter(|&&g| g != NIL)
            .map(|&g| g as usize)
    }

    /// A queue of `keys` sessions and `consumers` receivers; `lock`: the lock duration; `cap`:
    /// how long after its acceptance a held session's lock ends ([`session_lock_end`]).
    pub fn new(
        keys: u32,
        consumers: usize,
        idle: Dur,
        lock: Option<Dur>,
        cap: Option<Dur>,
    ) -> Self {
        ServicebusSessions {
            sessions: vec![Session::default(); keys as usize],
            holds: vec![NIL; consumers],
            abandoned: Vec::new(),
            next: 0,
            idle,
            lock,
            cap,
        }
    }

    /// Whether session `g` may be accepted now.
    fn available(&self, g: usize, now: Time) -> bool {
        let s = &self.sessions[g];
        s.owner == NIL && s.in_flight == 0 && now >= s.locked_until
    }

    /// The owner of session `g` lets it go (closed, or its lock lost): a receiver is free to
    /// accept a session, so the messages held on a promise ([`Self::held`]) are asked about again.
    fn release(&mut self, g: usize, lost: bool, ctl: &mut Control) {
        let s = &mut self.sessions[g];
        if s.owner != NIL {
            if let Some(h) = self.holds.get_mut(s.owner as usize) {
                *h = NIL;
            }
            s.owner = NIL;
            ctl.holds_changed(0);
        }
        s.lost |= lost;
    }

    /// The answer for a message of a session nobody holds that cannot be accepted now: while
    /// every receiver holds a session, nothing changes it until one lets its session go
    /// ([`Self::release`] withdraws the promise) or the receivers change; otherwise a receiver
    /// without a session may accept it when it has room or the session's lock ends.
    fn held(&self, consumers: &[ConsumerSlot]) -> Select {
        let holds = &self.holds;
        if consumers
            .iter()
            .any(|c| holds.get(c.id as usize).is_some_and(|&h| h == NIL))
        {
            Select::Hold
        } else {
            Select::HoldWhileMembers
        }
    }

    /// Forgets the abandon mark of `id`; whether it had one.
    fn take_abandoned(&mut self, id: u64) -> bool {
        match self.abandoned.iter().position(|&a| a == id) {
            Some(i) => {
                self.abandoned.swap_remove(i);
                true
            }
            None => false,
        }
    }
}

impl Handler for ServicebusSessions {}

impl crate::Named for ServicebusSessions {
    const NAME: &'static str = "servicebus_sessions";
    const SUMMARY: &'static str = "Azure Service Bus sessions: one receiver holds a session's lock until idle or lock expiry; abandon re-serves the same message; run with flavour = \"servicebus\" (60s renewed locks, MaxDeliveryCount 10)";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Servicebus;
    type Params = ServicebusSessionsParams;
    const PARAMS: &'static [crate::ParamInfo] = &[crate::ParamInfo {
        name: "session_idle_timeout",
        meaning: "a receiver closes its session after this long without a message of it and accepts another; a session whose messages keep coming within it is never given up",
        unit: "duration",
        default: "1m",
        range: crate::Range::dur_from(Dur::from_millis(1)),
        sizes: None,
        models: "ServiceBusSessionProcessorOptions.SessionIdleTimeout (unset: ServiceBusRetryOptions.TryTimeout, 60s)",
        hazard: None,
    }];
    fn build(sc: &sim::Scenario, p: ServicebusSessionsParams) -> Result<Self, String> {
        if sc.brokers.len() != 1 {
            return Err(
                "a Service Bus queue is one entity: describe it as one [[broker]] (the service replicates it internally)"
                    .into(),
            );
        }
        let lease = sc.lease_policy();
        Ok(ServicebusSessions::new(
            sc.workload.keys,
            sc.dispatch_targets(),
            p.session_idle_timeout,
            lease.map(|l| l.duration),
            lease.and_then(session_lock_end),
        ))
    }
}

impl Strategy for ServicebusSessions {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        if !self.abandoned.is_empty() {
            self.take_abandoned(msg.id);
        }
        // A message without a session id: any receiver.
        let Some(g) = msg.group else {
            return match ctx.consumers.iter().position(|c| c.free > 0) {
                Some(i) => Select::Consumer(i),
                None => Select::Stop,
            };
        };
        let g = g as usize;
        let owner = self.sessions[g].owner;
        if owner != NIL {
            return match ctx.consumers.iter().position(|c| c.id == owner) {
                Some(i) if ctx.consumers[i].free > 0 => {
                    self.sessions[g].in_flight += 1;
                    Select::Consumer(i)
                }
                // Until its owner has room, or lets the session go ([`Self::release`]).
                Some(i) => Select::HoldFor(i),
                None => Select::Hold,
            };
        }
        if !self.available(g, ctx.now) {
            return self.held(ctx.consumers);
        }
        // A free receiver (no session held) accepts it, round-robin from `next`.
        let n = ctx.consumers.len();
        let start = ctx
            .consumers
            .iter()
            .position(|c| c.id >= self.next)
            .unwrap_or(0);
        let holds = &self.holds;
        let Some(i) = (0..n).map(|k| (start + k) % n).find(|&i| {
            let c = ctx.consumers[i];
            c.free > 0 && holds.get(c.id as usize).is_some_and(|&h| h == NIL)
        }) else {
            return self.held(ctx.consumers);
        };
        let c = ctx.consumers[i].id;
        self.next = c + 1;
        self.holds[c as usize] = g as u32;
        let s = &mut self.sessions[g];
        if s.lost {
            ctl.reassigned(ctx.broker, c);
        }
        *s = Session {
            owner: c,
            in_flight: 1,
            accepted_at: ctx.now,
            ..Session::default()
        };
        if let Some(cap) = self.cap {
            ctl.wake_at(ctx.now.saturating_add(cap.0), CAP_WAKE | g as u64);
        }
        Select::Consumer(i)
    }

    fn on_attach(&mut self, _now: Time, _broker: u16, consumer: u32, _ctl: &mut Control) {
        if let Some(h) = self.holds.get_mut(consumer as usize) {
            *h = NIL;
        }
    }

    /// The receiver's connection closed (its process crashed, or the service dropped it): the
    /// service closes its session link and the session is free at once; what it had not
    /// completed is already back, uncounted (`count_lost = false` under the flavour) [Z1][Z6].
    fn on_detach(&mut self, now: Time, _broker: u16, consumer: u32, ctl: &mut Control) {
        let Some(g) = self.held_by(consumer) else {
            return;
        };
        self.release(g, true, ctl);
        self.sessions[g].locked_until = now;
    }

    /// The receiver died unnoticed (`crash_detection = "lease"`, not the flavour's): nobody
    /// renews its session lock any more, and the service frees it when it expires.
    fn on_silent_detach(&mut self, now: Time, _broker: u16, consumer: u32, ctl: &mut Control) {
        let Some(g) = self.held_by(consumer) else {
            return;
        };
        self.release(g, true, ctl);
        if let Some(lock) = self.lock {
            let until = now + lock.0;
            self.sessions[g].locked_until = until;
            ctl.wake_at(until, LOCK_WAKE | g as u64);
        }
    }

    fn on_handled(
        &mut self,
        _now: Time,
        _consumer: u32,
        msg: &MsgView,
        outcome: &Outcome,
        _ctl: &mut Control,
    ) {
        if matches!(outcome, Outcome::Failed(_)) && msg.group.is_some() {
            self.abandoned.push(msg.id);
        }
    }

    fn on_returned(&mut self, now: Time, _broker: u16, msg: &MsgView, ctl: &mut Control) {
        let Some(g) = msg.group else { return };
        let g = g as usize;
        let abandoned = !self.abandoned.is_empty() && self.take_abandoned(msg.id);
        let s = &mut self.sessions[g];
        s.in_flight = s.in_flight.saturating_sub(1);
        if !abandoned {
            // Back without an abandon: the lock expired (or its receiver went away).
            self.release(g, true, ctl);
            self.sessions[g].locked_until = now;
        }
    }

    fn on_settled(&mut self, now: Time, msg: &MsgView, ctl: &mut Control) {
        if !self.abandoned.is_empty() {
            self.take_abandoned(msg.id);
        }
        let Some(g) = msg.group else { return };
        let s = &mut self.sessions[g as usize];
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.owner != NIL && s.in_flight == 0 {
            s.idle_since = now;
            if !s.idle_wake {
                s.idle_wake = true;
                ctl.wake_at(now + self.idle.0, g as u64);
            }
        }
    }

    fn on_wake(&mut self, now: Time, token: u64, ctl: &mut Control) {
        if token & LOCK_WAKE != 0 {
            // A gone receiver's lock ended: the engine redispatches after this hook.
            return;
        }
        if token & CAP_WAKE != 0 {
            // The renewal of the acceptance that set this timer stopped and its last lock ran
            // out: the session is lost, with whatever its receiver holds (the message in hand
            // goes back counted and its complete fails); the engine redispatches after this.
            let g = (token & !CAP_WAKE) as usize;
            let s = &self.sessions[g];
            let held = self
                .cap
                .is_some_and(|cap| s.accepted_at.saturating_add(cap.0) == now);
            if s.owner != NIL && held {
                let c = s.owner;
                self.release(g, true, ctl);
                self.sessions[g].locked_until = now;
                ctl.end_leases(c);
            }
            return;
        }
        let g = token as usize;
        let s = &mut self.sessions[g];
        s.idle_wake = false;
        if s.owner == NIL || s.in_flight > 0 {
            return;
        }
        let due = s.idle_since + self.idle.0;
        if now >= due {
            // The receive timed out: the receiver closes the session and accepts another.
            self.release(g, false, ctl);
            ctl.redispatch();
        } else {
            s.idle_wake = true;
            ctl.wake_at(due, token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{load, run, select_at, view};
    use sim::history::FailReason;
    use sim::scenario::{exponential, ScenarioBuilder};
    use sim::time::SECOND;

    const NAME: &str = <ServicebusSessions as crate::Named>::NAME;

    /// The idle timers requested so far (not the renewal cap's).
    fn idle_wakes(ctl: &Control) -> Vec<(Time, u64)> {
        let mut w = ctl.wakes();
        w.retain(|&(_, token)| token & CAP_WAKE == 0);
        w
    }

    fn sessions(consumers: usize) -> ServicebusSessions {
        ServicebusSessions::new(
            8,
            consumers,
            Dur::from_secs(60),
            Some(Dur::from_secs(60)),
            Some(Dur::from_secs(310)),
        )
    }

    /// Two receivers; receiver 0 accepts session 3 with its message 0 at 0s.
    fn session_3_held_by_0(ctl: &mut Control) -> ServicebusSessions {
        let mut s = sessions(2);
        assert_eq!(
            select_at(&mut s, 0, &[(0, 1), (1, 1)], &view(0, 3), ctl),
            Ok(0)
        );
        s
    }

    #[test]
    fn defaults_are_the_sdks() {
        let p: ServicebusSessionsParams = toml::from_str("").unwrap();
        assert_eq!(p.session_idle_timeout, Dur::from_secs(60));
    }

    /// A session goes to one free receiver and stays there; a receiver holds one session; a
    /// session whose receiver is busy waits (others go on).
    #[test]
    fn a_session_has_one_receiver() {
        let mut s = sessions(3);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1), (2, 1)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 5), ctl), Ok(0));
        // Receiver 0 is busy: session 5 waits for it; session 6 goes to a receiver without a
        // session.
        let busy0 = [(0, 0), (1, 1), (2, 1)];
        assert_eq!(
            select_at(&mut s, 0, &busy0, &view(1, 5), ctl),
            Err(Select::HoldFor(0))
        );
        assert_eq!(select_at(&mut s, 0, &busy0, &view(2, 6), ctl), Ok(1));
        // Receiver 0 is done with message 0: it takes the next of its session, and nothing else.
        s.on_settled(SECOND, &view(0, 5), ctl);
        assert_eq!(select_at(&mut s, SECOND, &all, &view(1, 5), ctl), Ok(0));
        s.on_settled(SECOND, &view(1, 5), ctl);
        let only0 = [(0, 1), (1, 0), (2, 0)];
        assert_eq!(
            select_at(&mut s, SECOND, &only0, &view(3, 7), ctl),
            Err(Select::Hold),
            "receiver 0 still holds session 5"
        );
        assert!(ctl.reassignments().is_empty());
    }

    /// While every receiver holds a session, a message of another session is held on a promise
    /// (the broker skips it without asking), which a receiver letting its session go withdraws;
    /// while a receiver without a session is only full, nothing is promised.
    #[test]
    fn a_held_session_is_a_promise_until_a_receiver_lets_its_session_go() {
        let mut s = sessions(2);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 5), ctl), Ok(0));
        let full = [(0, 0), (1, 0)];
        assert_eq!(
            select_at(&mut s, 0, &full, &view(1, 6), ctl),
            Err(Select::Hold),
            "receiver 1 has no session: it may take session 6 once it has room"
        );
        assert_eq!(select_at(&mut s, 0, &all, &view(2, 7), ctl), Ok(1));
        assert_eq!(
            select_at(&mut s, 0, &all, &view(3, 6), ctl),
            Err(Select::HoldWhileMembers)
        );
        assert!(ctl.holds_changes().is_empty());
        // Receiver 1 goes: its session is released.
        s.on_detach(SECOND, 0, 1, ctl);
        assert_eq!(ctl.holds_changes(), vec![0]);
        assert_eq!(
            select_at(&mut s, SECOND, &[(0, 1)], &view(3, 6), ctl).ok(),
            None
        );
    }

    /// `SessionIdleTimeout`: a receiver whose session had nothing for that long closes it and
    /// can accept another; a message in between keeps it.
    #[test]
    fn an_idle_session_is_closed_after_the_idle_timeout() {
        let mut s = sessions(1);
        let ctl = &mut Control::default();
        assert_eq!(select_at(&mut s, 0, &[(0, 1)], &view(0, 1), ctl), Ok(0));
        s.on_settled(SECOND, &view(0, 1), ctl);
        assert_eq!(idle_wakes(ctl), vec![(61 * SECOND, 1)]);
        // A message at 30s: still session 1's.
        assert_eq!(
            select_at(&mut s, 30 * SECOND, &[(0, 1)], &view(1, 2), ctl),
            Err(Select::HoldWhileMembers)
        );
        assert_eq!(
            select_at(&mut s, 30 * SECOND, &[(0, 1)], &view(2, 1), ctl),
            Ok(0)
        );
        s.on_settled(31 * SECOND, &view(2, 1), ctl);
        // The first wake finds it idle for 30s only: it waits until 91s.
        let ctl = &mut Control::default();
        s.on_wake(61 * SECOND, 1, ctl);
        assert_eq!(ctl.wakes(), vec![(91 * SECOND, 1)]);
        s.on_wake(91 * SECOND, 1, ctl);
        assert!(ctl.redispatch_requested());
        assert_eq!(
            select_at(&mut s, 91 * SECOND, &[(0, 1)], &view(1, 2), ctl),
            Ok(0)
        );
        assert!(
            ctl.reassignments().is_empty(),
            "a closed session is no takeover"
        );
    }

    /// A gone receiver's lock ending is not an idle wake-up of its session: a receiver that
    /// accepted the session at that instant, and is done with its message, keeps its one idle
    /// timer.
    #[test]
    fn a_lock_wake_up_is_not_an_idle_wake_up() {
        let ctl = &mut Control::default();
        let mut s = session_3_held_by_0(ctl);
        s.on_settled(SECOND, &view(0, 3), ctl);
        s.on_wake(61 * SECOND, 3, ctl);
        s.on_silent_detach(61 * SECOND, 0, 0, ctl);
        let ctl = &mut Control::default();
        let end = 121 * SECOND;
        assert_eq!(select_at(&mut s, end, &[(1, 1)], &view(1, 3), ctl), Ok(1));
        s.on_settled(end, &view(1, 3), ctl);
        s.on_wake(end, LOCK_WAKE | 3, ctl);
        assert_eq!(idle_wakes(ctl), vec![(end + 60 * SECOND, 3)]);
    }

    /// A message that failed and is then settled (dead-lettered at `MaxDeliveryCount`) leaves
    /// no abandon mark behind; its receiver keeps the session for the next message.
    #[test]
    fn a_dead_lettered_message_leaves_no_abandon_mark() {
        let ctl = &mut Control::default();
        let mut s = session_3_held_by_0(ctl);
        s.on_handled(1, 0, &view(0, 3), &Outcome::Failed(FailReason::Poison), ctl);
        assert_eq!(s.abandoned, [0]);
        s.on_settled(1, &view(0, 3), ctl);
        assert!(s.abandoned.is_empty());
        assert_eq!(
            select_at(&mut s, 1, &[(0, 1), (1, 1)], &view(1, 3), ctl),
            Ok(0)
        );
    }

    /// A receiver frozen past its lock whose processing then fails leaves a mark for a message
    /// that is already back in the queue: its next delivery (here to receiver 1, after a
    /// takeover) drops it, so when that delivery's lock expires too the session is lost, not
    /// kept as after an abandon.
    #[test]
    fn a_stale_failure_leaves_no_abandon_mark_on_the_next_delivery() {
        let mut s = sessions(3);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1), (2, 1)];
        let only1 = [(0, 0), (1, 1), (2, 0)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 3), ctl), Ok(0));
        s.on_returned(60 * SECOND, 0, &view(0, 3), ctl);
        s.on_handled(
            70 * SECOND,
            0,
            &view(0, 3),
            &Outcome::Failed(FailReason::Poison),
            ctl,
        );
        assert_eq!(s.abandoned, [0]);
        assert_eq!(
            select_at(&mut s, 70 * SECOND, &only1, &view(0, 3), ctl),
            Ok(1)
        );
        assert!(s.abandoned.is_empty(), "{:?}", s.abandoned);
        // Receiver 1's lock expires: the session is free for receiver 2.
        s.on_returned(130 * SECOND, 0, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 130 * SECOND, &[(1, 0), (2, 1)], &view(0, 3), ctl),
            Ok(2)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 1), (0, 2)]);
    }

    /// Only a failure of a message with a session marks an abandon: a late success (a frozen
    /// receiver's message whose lock expired meanwhile, its complete refused) leaves none, so
    /// the message's next lock expiry loses the session; a failed message without a session
    /// has no session to keep.
    #[test]
    fn only_a_failed_session_message_is_marked_abandoned() {
        let mut s = sessions(3);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1), (2, 1)];
        let only1 = [(0, 0), (1, 1), (2, 0)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 3), ctl), Ok(0));
        s.on_returned(60 * SECOND, 0, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 60 * SECOND, &only1, &view(0, 3), ctl),
            Ok(1)
        );
        s.on_handled(
            90 * SECOND,
            0,
            &view(0, 3),
            &Outcome::Applied { state_seq: 0 },
            ctl,
        );
        assert!(s.abandoned.is_empty(), "{:?}", s.abandoned);
        s.on_returned(120 * SECOND, 0, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 120 * SECOND, &[(1, 0), (2, 1)], &view(0, 3), ctl),
            Ok(2)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 1), (0, 2)]);
        let sessionless = MsgView {
            group: None,
            ..view(1, 0)
        };
        s.on_handled(
            121 * SECOND,
            0,
            &sessionless,
            &Outcome::Failed(FailReason::Poison),
            ctl,
        );
        assert!(s.abandoned.is_empty(), "{:?}", s.abandoned);
    }

    /// A session whose message is still out with a receiver that died is not accepted by
    /// another receiver when the lock ends: the message comes back first (else the next one
    /// would overtake it).
    #[test]
    fn a_session_with_a_message_still_out_waits_for_it_past_the_lock() {
        let ctl = &mut Control::default();
        let mut s = session_3_held_by_0(ctl);
        s.on_silent_detach(2 * SECOND, 0, 0, ctl);
        s.on_wake(62 * SECOND, LOCK_WAKE | 3, ctl);
        assert_eq!(
            select_at(&mut s, 62 * SECOND, &[(1, 1)], &view(1, 3), ctl),
            Err(Select::Hold)
        );
        s.on_returned(62 * SECOND, 0, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 62 * SECOND, &[(1, 1)], &view(0, 3), ctl),
            Ok(1)
        );
    }

    /// Only the settle of a session's last message in flight starts its idle timer; a settle
    /// with another still in hand, or of a session nobody holds, arms nothing.
    #[test]
    fn only_the_last_settle_in_flight_arms_the_idle_timer() {
        let mut s = sessions(2);
        let ctl = &mut Control::default();
        assert_eq!(
            select_at(&mut s, 0, &[(0, 2), (1, 1)], &view(0, 3), ctl),
            Ok(0)
        );
        assert_eq!(
            select_at(&mut s, 0, &[(0, 1), (1, 1)], &view(1, 3), ctl),
            Ok(0)
        );
        s.on_settled(SECOND, &view(0, 3), ctl);
        assert!(idle_wakes(ctl).is_empty(), "message 1 is still in hand");
        s.on_settled(2 * SECOND, &view(1, 3), ctl);
        assert_eq!(idle_wakes(ctl), vec![(62 * SECOND, 3)]);
        // Session 4's lock is lost (back without an abandon) while a copy is still out: its
        // late settle arms nothing.
        let ctl = &mut Control::default();
        assert_eq!(
            select_at(&mut s, 3 * SECOND, &[(0, 1), (1, 2)], &view(2, 4), ctl),
            Ok(1)
        );
        assert_eq!(
            select_at(&mut s, 3 * SECOND, &[(0, 0), (1, 1)], &view(3, 4), ctl),
            Ok(1)
        );
        s.on_returned(60 * SECOND, 0, &view(2, 4), ctl);
        s.on_settled(61 * SECOND, &view(3, 4), ctl);
        assert!(idle_wakes(ctl).is_empty(), "{:?}", ctl.wakes());
    }

    /// Free receivers accept new sessions round-robin, from the one after the last acceptance
    /// (wrapping to the first), not always from the first free one.
    #[test]
    fn free_receivers_accept_new_sessions_round_robin() {
        // Receiver 0 accepts session 1 and closes it: the next new session is 1's.
        let mut s = sessions(2);
        let ctl = &mut Control::default();
        assert_eq!(
            select_at(&mut s, 0, &[(0, 1), (1, 1)], &view(0, 1), ctl),
            Ok(0)
        );
        s.on_settled(SECOND, &view(0, 1), ctl);
        s.on_wake(61 * SECOND, 1, ctl);
        assert_eq!(
            select_at(&mut s, 61 * SECOND, &[(0, 1), (1, 1)], &view(1, 2), ctl),
            Ok(1)
        );

        let mut s = sessions(4);
        let all = [(0, 1), (1, 1), (2, 1), (3, 1)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 1), ctl), Ok(0));
        assert_eq!(select_at(&mut s, 0, &all, &view(1, 2), ctl), Ok(1));
        // Receiver 0 closes session 1 (idle): free again, but the next acceptance is 2's.
        s.on_settled(SECOND, &view(0, 1), ctl);
        s.on_wake(61 * SECOND, 1, ctl);
        assert_eq!(
            select_at(&mut s, 61 * SECOND, &all, &view(2, 3), ctl),
            Ok(2)
        );
        assert_eq!(
            select_at(&mut s, 61 * SECOND, &all, &view(3, 4), ctl),
            Ok(3)
        );
        assert_eq!(
            select_at(&mut s, 61 * SECOND, &all, &view(4, 5), ctl),
            Ok(0)
        );
    }

    /// A message without a session id goes to the first receiver with room, session or not
    /// (the real queue refuses it); with no room anywhere the queue stops.
    #[test]
    fn a_message_without_a_session_goes_to_any_receiver_with_room() {
        let mut s = sessions(3);
        let ctl = &mut Control::default();
        let sessionless = |id| MsgView {
            group: None,
            ..view(id, 0)
        };
        assert_eq!(
            select_at(&mut s, 0, &[(0, 1), (1, 1)], &view(0, 5), ctl),
            Ok(0)
        );
        assert_eq!(
            select_at(&mut s, 0, &[(0, 0), (1, 0), (2, 1)], &sessionless(1), ctl),
            Ok(2)
        );
        assert_eq!(
            select_at(&mut s, 0, &[(0, 1), (1, 1)], &sessionless(2), ctl),
            Ok(0),
            "receiver 0 holds session 5 and takes it all the same"
        );
        assert_eq!(
            select_at(&mut s, 0, &[(0, 0), (1, 0)], &sessionless(3), ctl),
            Err(Select::Stop)
        );
    }

    /// An idle wake-up that finds a message of the session in its receiver's hands closes
    /// nothing: the receive did not time out (the next settle arms the timer again).
    #[test]
    fn an_idle_wake_up_leaves_a_session_with_a_message_in_hand() {
        let mut s = sessions(1);
        let ctl = &mut Control::default();
        assert_eq!(select_at(&mut s, 0, &[(0, 1)], &view(0, 1), ctl), Ok(0));
        s.on_settled(SECOND, &view(0, 1), ctl);
        assert_eq!(
            select_at(&mut s, 30 * SECOND, &[(0, 1)], &view(1, 1), ctl),
            Ok(0)
        );
        let ctl = &mut Control::default();
        s.on_wake(61 * SECOND, 1, ctl);
        assert!(!ctl.redispatch_requested());
        assert!(ctl.wakes().is_empty());
        assert_eq!(
            select_at(&mut s, 61 * SECOND, &[(0, 1)], &view(2, 2), ctl),
            Err(Select::HoldWhileMembers),
            "receiver 0 still holds session 1"
        );
    }

    /// A message that comes back while another session's message is abandoned (its return
    /// not seen yet) is a lost lock all the same: only the abandoned message keeps its session.
    #[test]
    fn only_the_abandoned_message_keeps_its_lock_on_return() {
        let mut s = sessions(3);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1), (2, 1)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 3), ctl), Ok(0));
        assert_eq!(select_at(&mut s, 0, &all, &view(1, 4), ctl), Ok(1));
        s.on_handled(1, 0, &view(0, 3), &Outcome::Failed(FailReason::Poison), ctl);
        // Session 4's lock expires while receiver 1 still works on it: receiver 2 accepts it.
        s.on_returned(60 * SECOND, 0, &view(1, 4), ctl);
        assert_eq!(s.abandoned, [0]);
        let busy = [(0, 0), (1, 0), (2, 1)];
        assert_eq!(
            select_at(&mut s, 60 * SECOND, &busy, &view(1, 4), ctl),
            Ok(2)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 2)]);
        // The abandoned one comes back to receiver 0, which keeps session 3.
        s.on_returned(60 * SECOND, 0, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 60 * SECOND, &[(0, 0), (1, 1)], &view(0, 3), ctl),
            Err(Select::HoldFor(0))
        );
        assert_eq!(
            select_at(&mut s, 60 * SECOND, &all, &view(0, 3), ctl),
            Ok(0)
        );
    }

    /// Abandon: the message comes back to the same receiver, which keeps the session.
    #[test]
    fn an_abandoned_message_is_served_again_to_the_same_receiver() {
        let mut s = sessions(2);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 3), ctl), Ok(0));
        s.on_handled(1, 0, &view(0, 3), &Outcome::Failed(FailReason::Poison), ctl);
        s.on_returned(1, 0, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 1, &[(0, 0), (1, 1)], &view(0, 3), ctl),
            Err(Select::HoldFor(0)),
            "not to another receiver"
        );
        assert_eq!(select_at(&mut s, 1, &all, &view(0, 3), ctl), Ok(0));
        assert!(s.abandoned.is_empty());
    }

    /// A lock that expires (the message comes back without an abandon) frees the session for
    /// another receiver: a takeover, recorded.
    #[test]
    fn an_expired_lock_hands_the_session_to_another_receiver() {
        let ctl = &mut Control::default();
        let mut s = session_3_held_by_0(ctl);
        s.on_returned(60 * SECOND, 0, &view(0, 3), ctl);
        // Receiver 0 is still working on it (full); receiver 1 accepts the session.
        assert_eq!(
            select_at(&mut s, 60 * SECOND, &[(0, 0), (1, 1)], &view(0, 3), ctl),
            Ok(1)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
        // Receiver 0, done, holds no session: it may accept another.
        assert_eq!(
            select_at(&mut s, 61 * SECOND, &[(0, 1), (1, 0)], &view(5, 4), ctl),
            Ok(0)
        );
    }

    /// A receiver that dies unnoticed (`crash_detection = "lease"`) holding an idle session keeps
    /// it locked one lock duration more.
    #[test]
    fn a_silently_dead_receivers_session_stays_locked_until_the_lock_expires() {
        let ctl = &mut Control::default();
        let mut s = session_3_held_by_0(ctl);
        s.on_settled(SECOND, &view(0, 3), ctl);
        s.on_silent_detach(2 * SECOND, 0, 0, ctl);
        assert!(ctl.wakes().contains(&(62 * SECOND, LOCK_WAKE | 3)));
        assert_eq!(
            select_at(&mut s, 10 * SECOND, &[(1, 1)], &view(1, 3), ctl),
            Err(Select::Hold)
        );
        s.on_wake(62 * SECOND, LOCK_WAKE | 3, ctl);
        assert_eq!(
            select_at(&mut s, 62 * SECOND, &[(1, 1)], &view(1, 3), ctl),
            Ok(1)
        );
        // Restarted, receiver 0 holds nothing.
        s.on_attach(70 * SECOND, 0, 0, ctl);
        assert_eq!(
            select_at(&mut s, 70 * SECOND, &[(0, 1), (1, 1)], &view(2, 4), ctl),
            Ok(0)
        );
    }

    /// A receiver whose connection closed (its process crashed: the OS closed its socket) no
    /// longer holds its session: another receiver accepts it at once, a takeover; no lock timer.
    #[test]
    fn a_closed_connection_frees_the_session_at_once() {
        let ctl = &mut Control::default();
        let mut s = session_3_held_by_0(ctl);
        s.on_settled(SECOND, &view(0, 3), ctl);
        let ctl = &mut Control::default();
        s.on_detach(2 * SECOND, 0, 0, ctl);
        assert!(ctl.wakes().is_empty(), "{:?}", ctl.wakes());
        assert_eq!(
            select_at(&mut s, 2 * SECOND, &[(1, 1)], &view(1, 3), ctl),
            Ok(1)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
    }

    /// The processor renews a session lock every 50s while less than `MaxAutoLockRenewalDuration`
    /// (5 min) has passed since the acceptance: the last renewal at 250s, the lock out at 310s.
    /// No renewal: one lock; renewal without a bound: never out.
    #[test]
    fn a_session_lock_ends_after_the_last_renewal_within_the_cap() {
        use sim::scenario::LeasePolicy;
        let l = |every: Option<u64>, max: Option<u64>| LeasePolicy {
            duration: Dur::from_secs(60),
            renew_every: every.map(Dur::from_secs),
            renew_max: max.map(Dur::from_secs),
        };
        let end = |every, max| session_lock_end(l(every, max));
        assert_eq!(end(Some(50), Some(300)), Some(Dur::from_secs(310)));
        assert_eq!(end(Some(50), Some(301)), Some(Dur::from_secs(360)));
        assert_eq!(end(Some(50), Some(30)), Some(Dur::from_secs(60)));
        assert_eq!(end(Some(50), Some(0)), Some(Dur::from_secs(60)));
        assert_eq!(end(None, None), Some(Dur::from_secs(60)));
        assert_eq!(end(Some(50), None), None);
    }

    /// A session held past its renewal cap loses its lock at the instant the cap's timer set
    /// by its acceptance fires: what its receiver holds has its lease ended (back counted, the
    /// complete refused) and the session goes to the next receiver, a takeover. A timer of an
    /// earlier acceptance does nothing.
    #[test]
    fn a_session_held_past_the_renewal_cap_loses_its_lock() {
        let mut s = sessions(2);
        let ctl = &mut Control::default();
        let all = [(0, 1), (1, 1)];
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 3), ctl), Ok(0));
        assert_eq!(ctl.wakes(), vec![(310 * SECOND, CAP_WAKE | 3)]);
        // Messages keep coming: receiver 0 keeps the session.
        s.on_settled(SECOND, &view(0, 3), ctl);
        assert_eq!(
            select_at(&mut s, 300 * SECOND, &all, &view(1, 3), ctl),
            Ok(0)
        );
        let ctl = &mut Control::default();
        s.on_wake(310 * SECOND, CAP_WAKE | 3, ctl);
        assert_eq!(ctl.ended_leases(), vec![0]);
        // Message 1 comes back (its lease ended): receiver 1 takes the session over.
        s.on_returned(310 * SECOND, 0, &view(1, 3), ctl);
        assert_eq!(
            select_at(&mut s, 310 * SECOND, &[(0, 0), (1, 1)], &view(1, 3), ctl),
            Ok(1)
        );
        assert_eq!(ctl.reassignments(), vec![(0, 1)]);
        // Its own cap counts from 310s; the first timer, were it to come again, does nothing.
        assert!(ctl.wakes().contains(&(620 * SECOND, CAP_WAKE | 3)));
        let ctl = &mut Control::default();
        s.on_wake(310 * SECOND, CAP_WAKE | 3, ctl);
        assert!(ctl.ended_leases().is_empty());
        // An idle session closed before its cap is not lost at the cap either.
        let mut s = sessions(2);
        assert_eq!(select_at(&mut s, 0, &all, &view(0, 5), ctl), Ok(0));
        s.on_settled(SECOND, &view(0, 5), ctl);
        s.on_wake(61 * SECOND, 5, ctl);
        let ctl = &mut Control::default();
        s.on_wake(310 * SECOND, CAP_WAKE | 5, ctl);
        assert!(ctl.ended_leases().is_empty());
    }

    #[test]
    fn build_takes_a_positive_idle_timeout_and_one_broker() {
        use crate::Named;
        let one = load(&sb(&[NAME]));
        assert!(ServicebusSessions::build(&one, Default::default()).is_ok());
        // Out of range: refused by the registry, which builds it (not by `build`).
        let zero = crate::test_util::builds_with(
            "servicebus_sessions",
            &one,
            "session_idle_timeout",
            "0s".into(),
        );
        assert!(zero.unwrap_err().contains("out of range"));
        let two = load(&sb(&[NAME]).broker("r"));
        assert!(ServicebusSessions::build(&two, Default::default()).is_err());
    }

    /// 3000 messages over 16 sessions at 100/s to 16 receivers (two processors of 8 sessions),
    /// one message at a time, 20ms each, on `flavour = "servicebus"`, comparing `strategies`.
    fn sb(strategies: &[&str]) -> ScenarioBuilder {
        ScenarioBuilder::new(strategies)
            .flavour("servicebus")
            .workload(3000, "100/s", 16)
            .broker("q")
            .consumers(16, exponential("20ms"))
    }

    /// Strength: receivers crash (the service notices only when their locks expire); each
    /// session waits for its lock, then another receiver takes it over from the expired
    /// message on: no key is reordered, where competing consumers reorder.
    #[test]
    fn order_survives_receiver_crashes() {
        let crashes = sb(&[NAME, "competing"])
            .fault("consumer_crash")
            .with("rate", "4/min")
            .with("for", "5s");
        let sc = load(&crashes);
        for seed in 1..=3 {
            let m = run(&sc, "servicebus_sessions", seed);
            assert!(m.coverage.consumer_crashes > 0, "seed {seed}");
            assert!(
                m.coverage.reassignments > 0,
                "seed {seed}: sessions taken over"
            );
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.applied, 3000, "seed {seed}");
            assert_eq!(m.lost, 0, "seed {seed}");
            let c = run(&sc, "competing", seed);
            assert!(c.ordering_violations > 0, "seed {seed}: competing reorders");
        }
    }

    /// A crashed receiver's connection closes with its process: its session goes at once to a
    /// receiver without one (24 receivers for 16 sessions), not after its 60s lock, nor when the
    /// crashed one is back 5s later.
    #[test]
    fn a_crashed_receivers_session_moves_at_once() {
        let crashes = sb(&[NAME])
            .section("consumers")
            .with("count", 24)
            .fault("consumer_crash")
            .with("rate", "20/min")
            .with("for", "5s");
        let sc = load(&crashes);
        for seed in 1..=3 {
            let m = run(&sc, "servicebus_sessions", seed);
            assert!(m.coverage.consumer_crashes > 0, "seed {seed}");
            assert!(m.coverage.reassignments > 0, "seed {seed}");
            assert_eq!(m.coverage.lease_expiries, 0, "seed {seed}");
            assert!(m.max_block_ms < 1_000.0, "seed {seed}: {}", m.max_block_ms);
        }
    }

    /// Weakness: a session whose messages keep coming is held past `MaxAutoLockRenewalDuration`
    /// (5 min from its acceptance); its lock runs out 10s after its last renewal, the message in
    /// hand goes back counted and is processed again by the next owner (a duplicate) while its
    /// complete fails. Renewal for an hour holds every session through the run.
    #[test]
    fn a_hot_session_loses_its_lock_at_the_renewal_cap() {
        let text = |renew_max: &str| {
            sb(&[NAME])
                .workload(40000, "100/s", 8)
                .consumers(8, exponential("50ms"))
                .section("lease")
                .with("renew_max", renew_max)
        };
        let m = run(&load(&text("5m")), "servicebus_sessions", 1);
        assert!(
            m.coverage.reassignments >= 8,
            "{}",
            m.coverage.reassignments
        );
        assert!(m.coverage.lease_expiries > 0);
        assert!(m.coverage.failed_acks > 0);
        assert!(m.duplicates > 0);
        assert_eq!(m.lost, 0);
        let held = run(&load(&text("1h")), "servicebus_sessions", 1);
        assert_eq!(
            (
                held.coverage.reassignments,
                held.coverage.lease_expiries,
                held.duplicates
            ),
            (0, 0, 0)
        );
    }

    /// Weakness: a receiver frozen longer than the lock (a GC pause, a stuck call) cannot renew
    /// it; the session goes to another receiver, which processes the same message and the next
    /// ones, while the frozen one, resumed, writes its old message late: a duplicate, an older
    /// state over a newer one, and a complete that fails.
    #[test]
    fn a_receiver_frozen_past_the_lock_writes_late() {
        let pause = |span: &str| {
            let b = sb(&[NAME]).fault_for("consumer_pause", "10s", span);
            load(&b.with("consumer", 0))
        };
        let sc = pause("90s");
        let m = run(&sc, "servicebus_sessions", 1);
        assert!(m.coverage.lease_expiries > 0);
        assert!(m.coverage.failed_acks > 0);
        assert!(m.duplicates > 0);
        assert!(m.stale_writes > 0);
        assert!(m.ordering_violations > 0);
        // A pause shorter than the lock only delays.
        let short = pause("30s");
        let m = run(&short, "servicebus_sessions", 1);
        assert_eq!((m.ordering_violations, m.duplicates), (0, 0));
    }

    /// Weakness: a poison message is abandoned and served again to its receiver ten times
    /// (MaxDeliveryCount) before it is dead-lettered; its session waits behind it every time,
    /// then goes on without it.
    #[test]
    fn a_poison_message_blocks_its_session_until_dead_lettered() {
        let poison = sb(&[NAME]).fault_for("poison", "5s", "1s");
        let sc = load(&poison.with("fraction", 0.05));
        let m = run(&sc, "servicebus_sessions", 1);
        assert!(m.poison_dead_lettered > 0);
        assert_eq!(m.dead_lettered, m.poison_dead_lettered);
        // Ten deliveries each: nine redeliveries per poison message.
        assert_eq!(m.redeliveries, 9 * m.poison_dead_lettered);
        assert_eq!(m.ordering_violations, 0);
        // Its session's later messages waited for all ten deliveries.
        assert!(m.max_block_ms > 10.0 * 20.0, "{}", m.max_block_ms);
    }

    /// Weakness: more busy sessions than receivers: a receiver keeps its session while its
    /// messages come within the idle timeout, so the sessions accepted first hog the receivers
    /// and the others wait until the traffic stops.
    #[test]
    fn busy_sessions_starve_the_others() {
        let sc = |idle: &str| {
            let four = sb(&[NAME]).section("consumers").with("count", 4);
            load(
                &four
                    .section("strategy.servicebus_sessions")
                    .with("session_idle_timeout", idle),
            )
        };
        let hog = run(&sc("60s"), "servicebus_sessions", 1);
        assert_eq!(hog.ordering_violations, 0);
        assert_eq!(hog.applied, 3000);
        // Traffic lasts 30s: a starved session's first message waits about that long.
        assert!(hog.latency_ms.max > 20_000.0, "{}", hog.latency_ms.max);
        let rotating = run(&sc("50ms"), "servicebus_sessions", 1);
        assert!(
            rotating.latency_ms.max < hog.latency_ms.max / 4.0,
            "{} vs {}",
            rotating.latency_ms.max,
            hog.latency_ms.max
        );
    }
}
