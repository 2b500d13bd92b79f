//! Checkers: pure, online functions of the history. They never look inside the engine or a
//! strategy; they see the same [`Event`]s a trace file holds.
//!
//! Memory grows with keys and messages in flight, not with messages produced: each key keeps a
//! window of records from its oldest unresolved message to its newest, and a record leaves the window
//! once its message is final (applied; rejected and acked; dead-lettered, dropped or discarded
//! while no consumer has it in hand).
//!
//! Applied wins: a message a consumer applies is applied, even if the broker's copy was discarded,
//! dropped or dead-lettered while the consumer was processing it (a second apply is a duplicate).
//! So such a message stays open while some consumer has it in hand: from its
//! `Start` to that consumer's `Apply`, `Reject`, `Rollback` or `Ack` of it, its next `Start`, or
//! its crash. A consumer has at most one message in hand, so this costs one slot per consumer.
//!
//! Annotations ([`anomaly`]): given a sink ([`Checkers::with_sink`]), the checkers also report each
//! anomaly they count, with the earlier event it conflicts with, as they find it (final
//! mismatches at [`Checkers::finish_into`]).

pub mod anomaly;
mod latency;

pub use anomaly::{Annotations, Anomaly, AnomalyKind, AnomalySink, Notes, Off};

use crate::history::{Event, MsgRef, Node};
use crate::ring::Ring;
use crate::scenario::WorkloadKind;
use crate::summary::{Coverage, Latency, Metrics};
use crate::time::Time;
use latency::LatencyHistogram;
use std::collections::BTreeMap;

const NONE: Time = Time::MAX;

/// Where the broker's copy of a message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    DeadLettered,
    Dropped,
    Discarded,
}

#[derive(Clone, Copy, Debug)]
struct Rec {
    produced_at: Time,
    enqueued_at: Time,
    resolved_at: Time,
    applies: u32,
    poison: bool,
    rejected: bool,
    acked: bool,
    dead_lettered: bool,
    dropped: bool,
    discarded: bool,
    /// Its producer gave it up before any broker stored it (`Event::DeliveryTimeout`); it is
    /// also `discarded` (gone), and counted as given up, not lost.
    given_up: bool,
    pending: bool,
    /// Consumers that had it in hand when it was gone and are not done with it yet.
    in_hand: u16,
    /// Copies of it stored by resends (`Event::Resend`) and not gone yet: while one is left, a
    /// copy dead-lettered, dropped or discarded does not make the message gone.
    copies: u16,
}

impl Rec {
    /// A message nothing has happened to yet, produced at `produced_at` ([`NONE`]: unknown).
    fn open(produced_at: Time, poison: bool) -> Self {
        Rec {
            produced_at,
            enqueued_at: NONE,
            resolved_at: NONE,
            applies: 0,
            poison,
            rejected: false,
            acked: false,
            dead_lettered: false,
            dropped: false,
            discarded: false,
            given_up: false,
            pending: false,
            in_hand: 0,
            copies: 0,
        }
    }

    /// The broker's copy is gone: dead-lettered, dropped or discarded (a message its producer
    /// gave up is marked discarded too: no broker has a copy).
    fn gone(&self) -> bool {
        self.dead_lettered || self.dropped || self.discarded
    }

    /// A broker stored it after its producer had given it up unstored (a write still on its
    /// way: at a leader until its followers had it, or held by a broker): not given up, the
    /// broker's as any stored message; its record is open again.
    fn stored_after_give_up(&mut self) {
        self.given_up = false;
        self.discarded = false;
        self.resolved_at = NONE;
    }

    fn is_final(&self) -> bool {
        self.applies > 0 || (self.in_hand == 0 && self.gone()) || (self.acked && self.rejected)
    }
}

/// Hand tracking covers consumers below this index (a recorded history could name any u32; the
/// engine's consumers are far fewer): beyond it a `Start` is not tracked.
const MAX_TRACKED_CONSUMERS: usize = 1 << 20;

/// No message in hand.
const NO_HAND: u64 = u64::MAX;

/// Up to this many hands, the holders of a departing message are found by a walk of the hands
/// (cheaper than an index kept up on every take); beyond it, by the index.
const WALK_HANDS: usize = 64;

/// The message a consumer has in hand.
#[derive(Clone, Copy)]
struct Hand {
    /// Its id ([`NO_HAND`]: none).
    id: u64,
    /// The hand clock when it was taken.
    since: u64,
}

const EMPTY_HAND: Hand = Hand {
    id: NO_HAND,
    since: 0,
};

impl Hand {
    /// A hand taking message `id` now: the hand clock `clock` moves on one.
    #[inline(always)]
    fn taking(clock: &mut u64, id: u64) -> Hand {
        *clock += 1;
        Hand { id, since: *clock }
    }
}

/// One hand fewer holds message `id` in the holders index.
fn unhold(index: &mut BTreeMap<u64, u32>, id: u64) {
    if id == NO_HAND {
        return;
    }
    if let Some(n) = index.get_mut(&id) {
        *n -= 1;
        if *n == 0 {
            index.remove(&id);
        }
    }
}

#[derive(Default)]
struct KeyState {
    /// Seqs below `base` are final and forgotten.
    base: u32,
    window: Ring<Rec>,
    /// Highest seq applied so far (+1; 0 = none).
    max_applied: u32,
    /// Seq of the state last written (+1; 0 = none). For `state` workloads.
    last_state: u32,
    /// Newest state written so far (+1; 0 = none). For `state` workloads.
    newest_state: u32,
    /// Highest non-poison seq produced (+1; 0 = none).
    expected_last: u32,
    /// Order-sensitive digest of the seqs applied, in apply order. For `command` workloads.
    digest: u64,
    /// The same digest over all non-poison seqs in production order: what `digest` should be.
    expected_digest: u64,
    /// When seq `base - 1` was resolved.
    prev_resolved_at: Time,
}

/// What is wrong with an apply of a malformed history ([`Checkers::malformed_apply`]).
#[derive(Clone, Copy)]
enum ApplyFault {
    /// Its key is beyond the scenario's keys.
    KeyOutOfRange,
    /// Its message, or the state it wrote (`state_seq`), was never produced.
    NeverProduced { state_seq: u32 },
    /// Its message has no record in its key's window.
    NoRecord,
}

#[inline]
fn fold(h: u64, seq: u32) -> u64 {
    (h ^ (seq as u64 + 1))
        .wrapping_mul(0x0000_0100_0000_01b3)
        .rotate_left(17)
}

/// Drops final records from the front of key `key`'s window `k`, classifying them
/// ([`Checkers::settle_front`]; the apply calls it with the key's state already at hand).
#[inline(always)]
fn settle_window<A: Annotations>(k: &mut KeyState, key: u32, tally: &mut Tally, notes: &mut A) {
    while let Some(r) = k.window.front() {
        if !r.is_final() {
            break;
        }
        tally.classify(r, key, k.base);
        k.prev_resolved_at = r.resolved_at;
        if A::ON {
            if let Some(n) = notes.notes() {
                anomaly::annotate_final(n, key, k.base, r);
            }
        }
        k.window.pop_front();
        k.base += 1;
    }
}

/// Counts of final classifications, kept as records leave their windows.
#[derive(Default)]
struct Tally {
    applied: u64,
    stale_rejected: u64,
    dead_lettered: u64,
    poison_dead_lettered: u64,
    innocent_dead_lettered: u64,
    dropped: u64,
    poison_dropped: u64,
    innocent_dropped: u64,
    pending: u64,
    lost: u64,
    given_up: u64,
    unaccounted: u64,
    /// The messages counted dead-lettered, for a replay to take back (and, the innocent ones,
    /// for the latency censored at the end).
    dead_lettered_at: Vec<Counted>,
    /// Whether a stale rejection is a loss (`command` workloads: the command never took effect).
    rejected_is_loss: bool,
    /// When each message counted undelivered (pending, lost, innocent dropped, a rejected
    /// command) was produced: its latency is censored at the run's end. The innocent
    /// dead-lettered are in `dead_lettered_at`, where a replay can take them back.
    undelivered_produced_at: Vec<Time>,
    /// The messages counted given up, for a later store to take back (a write the producer gave
    /// up on before its broker had it stored, that the broker stored after: it is the broker's).
    given_up_at: Vec<Counted>,
    /// `[workload] group_size` (0: no correlation groups).
    group_size: u32,
    /// Correlation groups (key, seq / group_size) with members classified as never applied,
    /// and how many: a replay from a dead-letter queue takes one back. Only while grouped.
    unapplied_groups: BTreeMap<(u32, u32), u32>,
}

/// A message counted in a figure a later event may take it back from: dead-lettered (a
/// replay), given up (a store after all).
#[derive(Clone, Copy, Debug)]
struct Counted {
    key: u32,
    seq: u32,
    produced_at: Time,
    poison: bool,
}

/// Takes `msg`'s entry out of `list`, if it is counted there.
fn take_counted(list: &mut Vec<Counted>, msg: MsgRef) -> Option<Counted> {
    let i = list
        .iter()
        .position(|d| d.key == msg.key && d.seq == msg.seq)?;
    Some(list.swap_remove(i))
}

impl Tally {
    #[inline]
    fn classify(&mut self, r: &Rec, key: u32, seq: u32) {
        if r.applies > 0 {
            self.applied += 1;
        } else {
            self.classify_unapplied(r, key, seq);
        }
    }

    // Apart from the applied (nearly every message), so that `classify` stays inlined.
    #[cold]
    #[inline(never)]
    fn classify_unapplied(&mut self, r: &Rec, key: u32, seq: u32) {
        if let Some(g) = seq.checked_div(self.group_size) {
            *self.unapplied_groups.entry((key, g)).or_insert(0) += 1;
        }
        if r.rejected {
            self.stale_rejected += 1;
            if self.rejected_is_loss {
                self.undelivered_produced_at.push(r.produced_at);
            }
        } else if r.dead_lettered {
            self.dead_lettered += 1;
            if r.poison {
                self.poison_dead_lettered += 1;
            } else {
                self.innocent_dead_lettered += 1;
            }
            self.dead_lettered_at.push(Counted {
                key,
                seq,
                produced_at: r.produced_at,
                poison: r.poison,
            });
        } else if r.dropped {
            self.dropped += 1;
            if r.poison {
                self.poison_dropped += 1;
            } else {
                self.innocent_dropped += 1;
                self.undelivered_produced_at.push(r.produced_at);
            }
        } else if r.given_up {
            self.given_up += 1;
            self.undelivered_produced_at.push(r.produced_at);
            self.given_up_at.push(Counted {
                key,
                seq,
                produced_at: r.produced_at,
                poison: r.poison,
            });
        } else if r.pending {
            self.pending += 1;
            self.undelivered_produced_at.push(r.produced_at);
        } else if r.discarded {
            self.lost += 1;
            self.undelivered_produced_at.push(r.produced_at);
        } else {
            self.unaccounted += 1;
        }
    }
}

impl Tally {
    /// `msg`, counted never applied, is open again (replayed from a dead-letter queue).
    fn take_back_unapplied(&mut self, msg: MsgRef) {
        if self.group_size == 0 {
            return;
        }
        let g = (msg.key, msg.seq / self.group_size);
        if let Some(n) = self.unapplied_groups.get_mut(&g) {
            *n -= 1;
            if *n == 0 {
                self.unapplied_groups.remove(&g);
            }
        }
    }
}

/// A violation of the history's own well-formedness or of message conservation: a bug in the
/// engine (or in a recorded history), never a property of a strategy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelfCheckError {
    /// Some messages are neither applied, rejected, dead-lettered, pending nor discarded.
    #[error("conservation violated: produced {produced} = applied {applied} + stale_rejected {stale} + dead_lettered {dlq} + dropped {dropped} + pending {pending} + lost {lost} + given_up {given_up} + UNACCOUNTED {unaccounted}")]
    Conservation {
        /// Produced.
        produced: u64,
        /// Applied.
        applied: u64,
        /// Stale-rejected.
        stale: u64,
        /// Dead-lettered.
        dlq: u64,
        /// Dropped.
        dropped: u64,
        /// Pending.
        pending: u64,
        /// Lost.
        lost: u64,
        /// Given up by their producer.
        given_up: u64,
        /// The remainder.
        unaccounted: u64,
    },
    /// An event broke the history's form (time going backwards, a seq out of production order,
    /// an event about a message never produced).
    #[error("malformed history: {0}")]
    Malformed(String),
}

/// All checkers, fed one event at a time; `A` says whether they annotate (not by default).
pub struct Checkers<A: Annotations = Off> {
    kind: WorkloadKind,
    keys: Vec<KeyState>,
    tally: Tally,
    produced: u64,
    ordering_violations: u64,
    stale_writes: u64,
    duplicates: u64,
    redeliveries: u64,
    /// Applied messages whose delivery the broker still held at the end (`Event::Unacked`).
    unacked: u64,
    latency: LatencyHistogram,
    max_block: Time,
    last_apply_at: Time,
    last_time: Time,
    drain_start: Option<Time>,
    coverage: Coverage,
    malformed: Option<String>,
    /// What each consumer has in hand, by consumer index.
    hands: Vec<Hand>,
    /// How many hands hold each message, kept only once there are more than [`WALK_HANDS`]
    /// hands (fewer are walked): a message held by many consumers costs a lookup when it goes.
    holders: Option<BTreeMap<u64, u32>>,
    /// Orders takes and departures: a hand counts for a departure only if taken before it.
    hand_clock: u64,
    /// Messages gone while a consumer had them in hand, by id, with the clock of their last
    /// departure: not final until every hand that held them then is done with them (the
    /// record's `in_hand` counts those hands down).
    waiting: BTreeMap<u64, (MsgRef, u64)>,
    /// Hands looked at to find a departing message's holders (what a test bounds).
    #[cfg(test)]
    hand_visits: u64,
    /// Records reopened by a replay from a dead-letter queue after they had left their key's
    /// window (counted at the end).
    reopened: Vec<(MsgRef, Rec)>,
    /// Messages replayed from a DLQ while already final for another reason (applied), or while
    /// still in their key's window: a copy of them may be pending at the end after their record
    /// settled.
    replayed_final: Vec<MsgRef>,
    /// The messages (key, seq; sorted) a resend stored again: a copy may be pending at the end
    /// after its message is final (applied).
    copies: Vec<(u32, u32)>,
    /// Instances of a copied message (ids, sorted) that no broker has stored yet: the copies a
    /// resend announced, and the message they copy while unstored. One its producer then gives
    /// up never existed at a broker: one instance fewer ([`Checkers::copy_vanished`]).
    unstored: Vec<u64>,
    /// Where a message went while a copy of it was still outstanding (the last such instance
    /// per message): its fate once that copy turns out never to be stored.
    deferred_gone: Vec<(MsgRef, Fate)>,
    /// The annotations' sink and memory ([`Off`]: nothing, zero-sized).
    notes: A,
}

impl Checkers {
    /// Checkers for `keys` keys of a workload of `kind`.
    pub fn new(keys: u32, kind: WorkloadKind) -> Self {
        Checkers::build(keys, kind, Off)
    }
}

impl<A: Annotations> Checkers<A> {
    /// The workload comes in fixed-size correlation groups (`[workload] group_size`): each key's
    /// seqs `g*n .. g*n+n-1` are its group `g`, and the figures include `incomplete_groups`.
    /// `None` or 0: no groups (the figure is absent).
    pub fn grouped(mut self, group_size: Option<u32>) -> Self {
        self.tally.group_size = group_size.unwrap_or(0);
        self
    }
}

impl<S: AnomalySink> Checkers<Notes<S>> {
    /// Checkers that also report every anomaly to `sink`.
    pub fn with_sink(keys: u32, kind: WorkloadKind, sink: S) -> Self {
        Checkers::build(keys, kind, Notes::new(keys, sink))
    }

    /// The sink (to take what it holds during a run).
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.notes.sink
    }

    /// [`Checkers::finish`], reporting the anomalies found only at the end (final mismatches, and
    /// losses of messages still in their windows) to the sink, which it gives back.
    pub fn finish_into(mut self, events: u64, end: Time) -> (Result<Metrics, SelfCheckError>, S) {
        let r = self.finish_mut(events, end);
        (r, self.notes.sink)
    }
}

impl<A: Annotations> Checkers<A> {
    fn build(keys: u32, kind: WorkloadKind, notes: A) -> Self {
        Checkers {
            kind,
            keys: (0..keys).map(|_| KeyState::default()).collect(),
            tally: Tally {
                rejected_is_loss: kind == WorkloadKind::Command,
                ..Tally::default()
            },
            produced: 0,
            ordering_violations: 0,
            stale_writes: 0,
            duplicates: 0,
            redeliveries: 0,
            unacked: 0,
            latency: LatencyHistogram::new(),
            max_block: 0,
            last_apply_at: 0,
            last_time: 0,
            drain_start: None,
            coverage: Coverage::default(),
            malformed: None,
            hands: Vec::new(),
            holders: None,
            hand_clock: 0,
            waiting: BTreeMap::new(),
            #[cfg(test)]
            hand_visits: 0,
            reopened: Vec::new(),
            replayed_final: Vec::new(),
            copies: Vec::new(),
            unstored: Vec::new(),
            deferred_gone: Vec::new(),
            notes,
        }
    }

    /// Consumer `c` starts processing `msg` (whatever it had in hand before is out of its hands).
    // The hot path only records which message each consumer holds; records are looked at only
    // when a message is gone while someone holds it (rare), see [`Checkers::gone`].
    #[inline(always)]
    fn take_in_hand(&mut self, c: u32, msg: MsgRef) {
        let c = c as usize;
        // The hand looked up once (its length tested, then its index, cost a second test).
        let prev = match self.hands.get_mut(c) {
            Some(h) => std::mem::replace(h, Hand::taking(&mut self.hand_clock, msg.id)),
            None => match self.take_in_new_hand(c, msg.id) {
                Some(prev) => prev,
                None => return,
            },
        };
        if self.holders.is_some() {
            self.reindex(prev.id, msg.id);
        }
        if prev.id != NO_HAND && !self.waiting.is_empty() {
            self.hand_ended(prev);
        }
    }

    /// [`Self::take_in_hand`] for a consumer without a hand yet: one made (unless there are too
    /// many to track: `None`), holding message `id`; what it held before.
    #[cold]
    #[inline(never)]
    fn take_in_new_hand(&mut self, c: usize, id: u64) -> Option<Hand> {
        if c >= MAX_TRACKED_CONSUMERS {
            return None;
        }
        self.grow_hands(c + 1);
        let hand = Hand::taking(&mut self.hand_clock, id);
        Some(std::mem::replace(&mut self.hands[c], hand))
    }

    /// Hands for `n` consumers; the holders index starts once they are too many to walk.
    #[cold]
    #[inline(never)]
    fn grow_hands(&mut self, n: usize) {
        self.hands.resize(n, EMPTY_HAND);
        if self.hands.len() > WALK_HANDS && self.holders.is_none() {
            let mut index = BTreeMap::new();
            for h in self.hands.iter().filter(|h| h.id != NO_HAND) {
                *index.entry(h.id).or_insert(0) += 1;
            }
            self.holders = Some(index);
        }
    }

    /// A hand that held `from` holds `to` now, in the holders index.
    #[inline(never)]
    fn reindex(&mut self, from: u64, to: u64) {
        if let Some(index) = &mut self.holders {
            unhold(index, from);
            if to != NO_HAND {
                *index.entry(to).or_insert(0) += 1;
            }
        }
    }

    /// Consumer `c` is done with `msg`, if it had it in hand.
    #[inline]
    fn out_of_hand(&mut self, c: u32, msg: MsgRef) {
        if self.hands.get(c as usize).is_some_and(|h| h.id == msg.id) {
            self.drop_hand(c);
        }
    }

    /// Consumer `c` crashed: whatever it had in hand is out of its hands.
    // Always inlined: a load and a store on the common path (each apply and ack comes here),
    // where a call frame cost as much; the rare parts are out of line.
    #[inline(always)]
    fn drop_hand(&mut self, c: u32) {
        if let Some(h) = self.hands.get_mut(c as usize) {
            let prev = std::mem::replace(h, EMPTY_HAND);
            if self.holders.is_some() {
                self.reindex(prev.id, NO_HAND);
            }
            if prev.id != NO_HAND && !self.waiting.is_empty() {
                self.hand_ended(prev);
            }
        }
    }

    /// A hand is done with its message: if the message went while this hand held it and this
    /// was its last such hand, it is final now. (Called only while some message waits.)
    #[cold]
    #[inline(never)]
    fn hand_ended(&mut self, hand: Hand) {
        let Some(&(msg, gone_at)) = self.waiting.get(&hand.id) else {
            return;
        };
        if hand.since > gone_at {
            // Taken after the message went: it never held it back.
            return;
        }
        let Some(r) = self.rec(msg) else {
            self.waiting.remove(&hand.id);
            return;
        };
        r.in_hand = r.in_hand.saturating_sub(1);
        if r.in_hand == 0 {
            self.waiting.remove(&hand.id);
            self.settle_front(msg.key);
        }
    }

    /// The broker's copy of `msg` is gone (dead-lettered, dropped or discarded): final, unless a
    /// consumer has it in hand and may still apply it.
    fn gone(&mut self, e: &Event, msg: MsgRef, t: Time, fate: Fate) {
        let Some(r) = self.rec(msg) else {
            self.unknown(e, msg);
            return;
        };
        if r.copies > 0 {
            // Another copy (a resend stored again) is still at a broker, or on its way: the
            // message is not gone, unless that copy never gets there.
            r.copies -= 1;
            self.defer_gone(msg, fate);
            return;
        }
        self.gone_for_good(msg, t, fate);
    }

    /// `msg` went (`fate`) while a copy was outstanding: kept until that copy is stored (then
    /// the copy decides) or given up (then this is the message's fate).
    #[cold]
    #[inline(never)]
    fn defer_gone(&mut self, msg: MsgRef, fate: Fate) {
        let same = |(m, _): &(MsgRef, Fate)| (m.key, m.seq) == (msg.key, msg.seq);
        match self.deferred_gone.iter_mut().find(|d| same(d)) {
            Some(d) => *d = (msg, fate),
            None => self.deferred_gone.push((msg, fate)),
        }
    }

    /// A copy a resend announced was given up by its producer before any broker stored it: one
    /// outstanding instance fewer. If it was the last, the message went as its last instance
    /// did ([`Checkers::defer_gone`]).
    #[cold]
    #[inline(never)]
    fn copy_vanished(&mut self, msg: MsgRef, t: Time) {
        let Some(r) = self.rec(msg) else {
            return;
        };
        if r.copies > 0 {
            r.copies -= 1;
            return;
        }
        let key_seq = (msg.key, msg.seq);
        if let Some(i) = self
            .deferred_gone
            .iter()
            .position(|(m, _)| (m.key, m.seq) == key_seq)
        {
            let (went, fate) = self.deferred_gone.swap_remove(i);
            let never_stored = self.rec(went).is_some_and(|r| r.enqueued_at == NONE);
            if fate == Fate::Discarded && never_stored {
                // Refused before any broker stored it (a fenced zombie's write), and its copy
                // given up too: nothing of it was ever stored.
                self.given_up(t, went);
            } else {
                self.gone_for_good(went, t, fate);
            }
        } else {
            // The last instance, and none went before it: given up, if none was ever stored.
            self.given_up(t, msg);
        }
    }

    /// The last instance of `msg` is gone (`fate`): final, unless a consumer has it in hand.
    fn gone_for_good(&mut self, msg: MsgRef, t: Time, fate: Fate) {
        if !self.deferred_gone.is_empty() {
            self.deferred_gone
                .retain(|(m, _)| (m.key, m.seq) != (msg.key, msg.seq));
        }
        let Some(r) = self.rec(msg) else {
            return;
        };
        match fate {
            Fate::DeadLettered => r.dead_lettered = true,
            Fate::Dropped => r.dropped = true,
            Fate::Discarded => r.discarded = true,
        }
        if r.resolved_at == NONE {
            r.resolved_at = t;
        }
        if r.applies == 0 {
            // Every hand holding it now took it before now: each must be done with it first.
            #[cfg(test)]
            {
                self.hand_visits += self.holders.as_ref().map_or(self.hands.len() as u64, |_| 1);
            }
            let held = match &self.holders {
                Some(index) => index.get(&msg.id).copied().unwrap_or(0),
                None => self.hands.iter().filter(|h| h.id == msg.id).count() as u32,
            };
            self.hand_clock += 1;
            if held > 0 {
                self.waiting.insert(msg.id, (msg, self.hand_clock));
            } else {
                self.waiting.remove(&msg.id);
            }
            if let Some(r) = self.rec(msg) {
                r.in_hand = held.min(u32::from(u16::MAX)) as u16;
            }
        }
        self.settle_front(msg.key);
    }

    fn malformed(&mut self, what: String) {
        if self.malformed.is_none() {
            self.malformed = Some(what);
        }
    }

    /// The record of a message: in its key's window, or reopened by a replay.
    // Inlined: it is on the path of most events; a reopened record (a replay from a dead-letter
    // queue, rare) costs the fast path one length test.
    #[inline(always)]
    fn rec(&mut self, m: MsgRef) -> Option<&mut Rec> {
        if !self.reopened.is_empty()
            && self
                .keys
                .get(m.key as usize)
                .is_some_and(|k| m.seq < k.base)
        {
            return self.reopened_rec(m.id);
        }
        let k = self.keys.get_mut(m.key as usize)?;
        let i = m.seq.checked_sub(k.base)? as usize;
        k.window.get_mut(i)
    }

    /// The reopened record of `m`, if a replay reopened it.
    #[cold]
    // By id: a `MsgRef` passed by value goes through memory, which the inlined callers then
    // stored at every event for a call they rarely make.
    fn reopened_rec(&mut self, id: u64) -> Option<&mut Rec> {
        self.reopened
            .iter_mut()
            .find(|(r, _)| r.id == id)
            .map(|(_, rec)| rec)
    }

    /// `msg` is back in a queue from a dead-letter queue: no longer dead-lettered. A record still
    /// in its window is simply open again; one already counted is taken back from the count and
    /// reopened. One that was applied (a consumer wrote it while the broker dead-lettered it)
    /// stays applied: applying it again is a duplicate.
    fn replay(&mut self, msg: MsgRef, poison: bool) {
        self.coverage.dlq_replays += 1;
        let Some(k) = self.keys.get(msg.key as usize) else {
            self.malformed(format!("replay of key {} out of range", msg.key));
            return;
        };
        if msg.seq >= k.base {
            if let Some(r) = self.rec(msg) {
                r.dead_lettered = false;
                // Its record stays open, but another instance may apply it (a consumer whose
                // lease had ended, before the replay; a strategy's held copy, after): once the
                // window has settled past it, its replayed copy may still be queued at the end.
                self.replayed_final.push(msg);
            }
            return;
        }
        if let Some(r) = self.reopened_rec(msg.id) {
            r.dead_lettered = false;
            return;
        }
        let t = &mut self.tally;
        let Some(produced_at) = take_counted(&mut t.dead_lettered_at, msg).map(|d| d.produced_at)
        else {
            // Final otherwise (a consumer whose lease had ended applied it after the broker
            // dead-lettered it): the replayed copy adds nothing to its count, even if it is
            // still queued at the end.
            self.replayed_final.push(msg);
            return;
        };
        t.dead_lettered -= 1;
        t.take_back_unapplied(msg);
        if poison {
            t.poison_dead_lettered -= 1;
        } else {
            t.innocent_dead_lettered -= 1;
        }
        self.reopened.push((msg, Rec::open(produced_at, poison)));
    }

    /// Drops final records from the front of a key's window, classifying them.
    #[inline]
    fn settle_front(&mut self, key: u32) {
        settle_window(
            &mut self.keys[key as usize],
            key,
            &mut self.tally,
            &mut self.notes,
        );
    }

    /// Feeds one event.
    #[inline]
    pub fn observe(&mut self, e: &Event) {
        let t = e.time();
        if t < self.last_time {
            self.malformed(format!(
                "time went backwards: {e:?} after t={}",
                self.last_time
            ));
        }
        self.last_time = t;
        self.observe_in_order(e);
    }

    /// The engine's clock went from `now` back to `t` (its event queue misordered two events):
    /// the history it emits would go backwards. The engine tests its clock once per engine
    /// event rather than having [`Checkers::observe`] test each history event's time.
    #[cold]
    #[inline(never)]
    pub fn clock_went_back(&mut self, t: Time, now: Time) {
        self.malformed(format!(
            "time went backwards: the clock went from {now} to {t}"
        ));
    }

    /// Feeds one event whose time is known not to be earlier than any event fed before: the
    /// engine's (it emits every event at its clock and checks the clock once per engine event,
    /// [`Checkers::clock_went_back`]), so the time test of [`Checkers::observe`] is left out.
    // Inlined into each emit site, where the event's variant is known: the match folds away.
    #[inline(always)]
    pub fn observe_in_order(&mut self, e: &Event) {
        let t = e.time();
        match *e {
            Event::Produce { msg, poison, .. } => self.produce(t, msg, poison),
            Event::Enqueue { msg, .. } => {
                if !self.unstored.is_empty() {
                    self.copy_stored(msg.id);
                }
                if let Some(r) = self.rec(msg) {
                    if r.enqueued_at == NONE {
                        r.enqueued_at = t;
                        if r.given_up {
                            r.stored_after_give_up();
                        }
                    }
                } else {
                    self.unknown(e, msg);
                    if !self.tally.given_up_at.is_empty() {
                        self.reopen_given_up(*e, t);
                    }
                }
            }
            Event::Dispatch {
                msg, redelivered, ..
            } => {
                if redelivered {
                    self.redeliveries += 1;
                }
                // Any message produced may be dispatched, settled or not: only the bounds test.
                self.unknown(e, msg);
            }
            Event::Apply {
                msg,
                state_seq,
                consumer,
                ..
            } => {
                if A::ON {
                    self.annotate_apply(e, msg, state_seq);
                }
                self.apply(t, msg, state_seq);
                self.out_of_hand(consumer, msg);
            }
            Event::Reject { msg, consumer, .. } => {
                self.resolve(e, msg, t, |r| r.rejected = true);
                self.out_of_hand(consumer, msg);
            }
            Event::DeadLetter { msg, .. } => self.gone(e, msg, t, Fate::DeadLettered),
            Event::Drop { msg, .. } => {
                if A::ON {
                    self.remember_gone(e, msg);
                }
                self.gone(e, msg, t, Fate::Dropped)
            }
            Event::Discard { msg, .. } => {
                if A::ON {
                    self.remember_gone(e, msg);
                }
                self.gone(e, msg, t, Fate::Discarded)
            }
            Event::Ack { msg, consumer, .. } => {
                self.out_of_hand(consumer, msg);
                // Most acks follow their apply, which made the message final: an ack of an
                // already-final message is harmless; one of a message never produced is not.
                let settled = self
                    .keys
                    .get(msg.key as usize)
                    .is_some_and(|k| msg.seq < k.base);
                if settled {
                } else if let Some(r) = self.rec(msg) {
                    r.acked = true;
                    self.settle_front(msg.key);
                } else {
                    self.unknown(e, msg);
                }
            }
            Event::Pending { msg, .. } => {
                if let Some(r) = self.rec(msg) {
                    r.pending = true;
                } else if self.replayed_final.contains(&msg)
                    || self.copies.binary_search(&(msg.key, msg.seq)).is_ok()
                {
                } else {
                    self.malformed(format!("pending message {msg:?} was already settled"));
                }
            }
            Event::Rollback { msg, consumer, .. } => {
                self.coverage.rollbacks += 1;
                self.unknown(e, msg);
                self.out_of_hand(consumer, msg);
            }
            Event::Forward { msg, .. } => {
                self.coverage.forwards += 1;
                self.unknown(e, msg);
            }
            Event::Start { msg, consumer, .. } => {
                self.unknown(e, msg);
                self.take_in_hand(consumer, msg);
            }
            Event::Redelivery { msg, .. } => self.unknown(e, msg),
            Event::Replay { msg, poison, .. } => self.replay(msg, poison),
            Event::Expire { msg, .. } => {
                self.coverage.lease_expiries += 1;
                self.unknown(e, msg);
            }
            Event::AckFail { msg, .. } => {
                self.coverage.failed_acks += 1;
                self.unknown(e, msg);
            }
            Event::Commit { .. } => self.coverage.commits += 1,
            Event::Crash { node, .. } => match node {
                Node::Broker(_) => self.coverage.broker_crashes += 1,
                Node::Consumer(c) => {
                    self.coverage.consumer_crashes += 1;
                    self.drop_hand(c);
                }
                Node::TargetDb => self.coverage.db_outages += 1,
                Node::SourceDb => self.coverage.source_outages += 1,
                Node::Cache => self.coverage.cache_collapses += 1,
                Node::Producer(_) => {}
            },
            Event::Disconnect { .. } => self.coverage.disconnects += 1,
            Event::Connect { failover, .. } => {
                if failover {
                    self.coverage.failovers += 1;
                }
            }
            Event::Suspend { .. } => self.coverage.suspensions += 1,
            Event::Reassign { .. } => self.coverage.reassignments += 1,
            Event::SourceRead { .. } => self.coverage.source_reads += 1,
            Event::JobStart { .. } => self.coverage.batch_runs += 1,
            Event::JobEnd { gave_up, .. } => {
                self.coverage.batch_runs_given_up += u64::from(gave_up)
            }
            Event::SendFail { msg, .. } => {
                self.coverage.send_failures += 1;
                self.unknown(e, msg);
            }
            Event::Resend {
                msg,
                of,
                deduplicated,
                ..
            } => {
                self.unknown(e, msg);
                if deduplicated {
                    self.coverage.resends_deduplicated += 1;
                } else {
                    self.coverage.resends_stored += 1;
                    // The copy, and the message it copies if no broker has stored it yet, are
                    // each an instance that may still vanish unstored (its producer gives it up).
                    let original_unstored = match self.rec(msg) {
                        Some(r) => {
                            r.copies = r.copies.saturating_add(1);
                            r.enqueued_at == NONE
                        }
                        None => false,
                    };
                    if let Err(i) = self.copies.binary_search(&(msg.key, msg.seq)) {
                        self.copies.insert(i, (msg.key, msg.seq));
                    }
                    self.note_unstored(msg.id);
                    if original_unstored {
                        self.note_unstored(of);
                    }
                }
            }
            Event::DeliveryTimeout { msg, resent, .. } => {
                self.coverage.delivery_timeouts += 1;
                self.unknown(e, msg);
                if !resent {
                    match self.unstored.binary_search(&msg.id) {
                        Ok(i) => {
                            self.unstored.remove(i);
                            self.copy_vanished(msg, t);
                        }
                        Err(_) => self.given_up(t, msg),
                    }
                }
            }
            Event::DrainStart { .. } => self.drain_start = Some(t),
            Event::Unacked { msg, .. } => {
                self.unacked += 1;
                self.unknown(e, msg);
                if self.rec(msg).is_some_and(|r| r.applies == 0) {
                    self.malformed(format!("unacked message {msg:?} was never applied"));
                }
            }
            Event::Recover { .. } | Event::Resume { .. } | Event::Takeover { .. } => {}
        }
    }

    /// `id`, a copy a resend announced or the unstored message it copies, may vanish unstored.
    #[cold]
    #[inline(never)]
    fn note_unstored(&mut self, id: u64) {
        if let Err(i) = self.unstored.binary_search(&id) {
            self.unstored.insert(i, id);
        }
    }

    /// A broker stored `msg`: if it is a copy a resend announced, it exists now.
    #[cold]
    #[inline(never)]
    fn copy_stored(&mut self, id: u64) {
        if let Ok(i) = self.unstored.binary_search(&id) {
            self.unstored.remove(i);
        }
    }

    /// Producer gave `msg` up at `t` and did not send it again: given up if no broker ever
    /// stored it; a copy of a stored message (its answer lost) is the broker's as any stored
    /// one. Out of line: the hot paths' inlining stays as it was.
    #[cold]
    #[inline(never)]
    fn given_up(&mut self, t: Time, msg: MsgRef) {
        if let Some(r) = self.rec(msg) {
            if r.enqueued_at == NONE {
                r.given_up = true;
                r.discarded = true;
                if r.resolved_at == NONE {
                    r.resolved_at = t;
                }
                self.settle_front(msg.key);
            }
        }
    }

    /// [`Rec::stored_after_give_up`] for a message already counted given up (`e`, its
    /// `Enqueue`): taken back from the count and reopened (as a replay from a dead-letter queue
    /// reopens one).
    // Given the event by value: a `MsgRef` passed to a call goes through memory, which the
    // enqueue arm then stored at every enqueue for this rare call.
    #[cold]
    #[inline(never)]
    fn reopen_given_up(&mut self, e: Event, t: Time) {
        let Some(msg) = e.msg() else {
            return;
        };
        let tally = &mut self.tally;
        let Some(d) = take_counted(&mut tally.given_up_at, msg) else {
            return;
        };
        tally.given_up -= 1;
        if let Some(j) = tally
            .undelivered_produced_at
            .iter()
            .rposition(|&p| p == d.produced_at)
        {
            tally.undelivered_produced_at.swap_remove(j);
        }
        tally.take_back_unapplied(msg);
        let rec = Rec {
            enqueued_at: t,
            ..Rec::open(d.produced_at, d.poison)
        };
        self.reopened.push((msg, rec));
    }

    /// Reports an event about a message that was never produced (a settled one is fine).
    #[inline(always)]
    fn unknown(&mut self, e: &Event, msg: MsgRef) {
        let k = self.keys.get(msg.key as usize);
        let known = k.is_some_and(|k| msg.seq < k.base + k.window.len() as u32);
        if !known {
            // A copy, made only here: passed by reference, the event had to be in memory
            // before the test, and every emit site stored it whole for nothing.
            self.never_produced(*e);
        }
    }

    #[cold]
    #[inline(never)]
    fn never_produced(&mut self, e: Event) {
        self.malformed(format!("event about a message never produced: {e:?}"));
    }

    // Always inlined (one call site, the produce arm): out of line it paid a call frame per
    // message; the malformed cases are calls of their own.
    #[inline(always)]
    fn produce(&mut self, t: Time, msg: MsgRef, poison: bool) {
        let Some(k) = self.keys.get_mut(msg.key as usize) else {
            self.produced_out_of_turn(msg.key, msg.seq, None);
            return;
        };
        let next = k.base + k.window.len() as u32;
        if msg.seq != next {
            self.produced_out_of_turn(msg.key, msg.seq, Some(next));
            return;
        }
        self.produced += 1;
        if !poison {
            k.expected_last = msg.seq + 1;
            k.expected_digest = fold(k.expected_digest, msg.seq);
        }
        k.window.push_back(Rec::open(t, poison));
    }

    /// A produce of key `key` out of range (`next`: `None`), or of seq `seq` where `next` was
    /// due.
    // Out of line, with plain numbers: a `format!` in the produce arm took the message's
    // address, so that every produce stored it for the rare error.
    #[cold]
    #[inline(never)]
    fn produced_out_of_turn(&mut self, key: u32, seq: u32, next: Option<u32>) {
        match next {
            None => self.malformed(format!("key {key} out of range")),
            Some(next) => self.malformed(format!(
                "key {key} produced seq {seq} where {next} was next"
            )),
        }
    }

    fn resolve(&mut self, e: &Event, msg: MsgRef, t: Time, set: impl FnOnce(&mut Rec)) {
        match self.rec(msg) {
            Some(r) => {
                set(r);
                if r.resolved_at == NONE {
                    r.resolved_at = t;
                }
                self.settle_front(msg.key);
            }
            None => self.unknown(e, msg),
        }
    }

    /// A consumer applied `msg` and wrote state `state_seq`.
    // The message in registers: a `MsgRef` passed by value goes through memory.
    #[inline(always)]
    fn apply(&mut self, t: Time, msg: MsgRef, state_seq: u32) {
        self.apply_parts(t, msg.id, msg.key, msg.seq, state_seq);
    }

    /// Reports a malformed apply of message (`id`, `key`, `seq`).
    // Out of line, with plain numbers: a `format!` of the message in `apply_parts` took its
    // address, and every apply stored it for the rare error.
    #[cold]
    #[inline(never)]
    fn malformed_apply(&mut self, fault: ApplyFault, id: u64, key: u32, seq: u32) {
        let msg = MsgRef { id, key, seq };
        self.malformed(match fault {
            ApplyFault::KeyOutOfRange => format!("apply of key {key} out of range"),
            ApplyFault::NeverProduced { state_seq } => {
                format!("apply of a message or state never produced: {msg:?} state_seq {state_seq}")
            }
            ApplyFault::NoRecord => format!("apply of a message never produced: {msg:?}"),
        });
    }

    /// [`Self::apply`], out of line: inlined into the loop (two emit sites) it saved 1.6-2.4 M
    /// instructions on mmc but cost 2-5% of its wall time (paired series, 2026-12-05,
    /// docs/measurements.md).
    #[inline(never)]
    fn apply_parts(&mut self, t: Time, id: u64, key: u32, seq: u32, state_seq: u32) {
        let msg = MsgRef { id, key, seq };
        let Some(k) = self.keys.get_mut(msg.key as usize) else {
            self.malformed_apply(ApplyFault::KeyOutOfRange, id, key, seq);
            return;
        };
        let produced = k.base + k.window.len() as u32;
        if msg.seq >= produced || state_seq >= produced {
            self.malformed_apply(ApplyFault::NeverProduced { state_seq }, id, key, seq);
            return;
        }
        if k.max_applied > msg.seq + 1 {
            self.ordering_violations += 1;
        }
        k.max_applied = k.max_applied.max(msg.seq + 1);
        // A stale write puts back a state older than one already written: what a reader of the
        // target sees go backwards, whatever order the messages were handled in.
        if self.kind == WorkloadKind::State && state_seq < k.newest_state.saturating_sub(1) {
            self.stale_writes += 1;
        }
        k.newest_state = k.newest_state.max(state_seq + 1);
        k.last_state = state_seq + 1;
        k.digest = fold(k.digest, msg.seq);
        self.last_apply_at = t;
        let base = k.base;
        let prev_resolved_before = k.prev_resolved_at;
        let Some(i) = msg.seq.checked_sub(base) else {
            match self.reopened_rec(msg.id) {
                // Replayed from a dead-letter queue: its first apply.
                Some(r) if r.applies == 0 => {
                    r.applies = 1;
                    r.resolved_at = t;
                }
                // Applied again after it was final: a duplicate.
                _ => self.duplicates += 1,
            }
            return;
        };
        let i = i as usize;
        // The predecessor's resolution, read first: then the record is looked up once.
        let prev_resolved = if i == 0 {
            prev_resolved_before
        } else {
            k.window.get(i - 1).map_or(NONE, |p| p.resolved_at)
        };
        let Some(r) = k.window.get_mut(i) else {
            self.malformed_apply(ApplyFault::NoRecord, id, key, seq);
            return;
        };
        if r.applies > 0 {
            self.duplicates += 1;
        } else {
            self.latency.record(t.saturating_sub(r.produced_at));
            // Head-of-line block: time at a broker spent waiting for the predecessor to resolve,
            // counted only when the message was applied after its predecessor (in order).
            if msg.seq > 0 && prev_resolved != NONE && prev_resolved <= t && r.enqueued_at != NONE {
                self.max_block = self
                    .max_block
                    .max(prev_resolved.saturating_sub(r.enqueued_at));
            }
        }
        r.applies += 1;
        if r.resolved_at == NONE {
            r.resolved_at = t;
        }
        // `settle_front` with the key's state at hand: no call, no second lookup.
        settle_window(k, msg.key, &mut self.tally, &mut self.notes);
    }

    /// Final figures. `events` is the engine's event count, `end` the time the run ended.
    pub fn finish(mut self, events: u64, end: Time) -> Result<Metrics, SelfCheckError> {
        self.finish_mut(events, end)
    }

    fn finish_mut(&mut self, events: u64, end: Time) -> Result<Metrics, SelfCheckError> {
        let mut mismatches = 0;
        for key in 0..self.keys.len() {
            let k = &mut self.keys[key];
            // A message still unresolved at the end has been blocked, so far, for as long as its
            // predecessor stayed unresolved after it reached a broker.
            let mut prev_resolved = k.prev_resolved_at;
            for (i, r) in k.window.iter().enumerate() {
                let first = k.base as usize + i == 0;
                if !first && r.resolved_at == NONE && r.enqueued_at != NONE {
                    let waited_until = if prev_resolved == NONE {
                        end
                    } else {
                        prev_resolved.min(end)
                    };
                    self.max_block = self
                        .max_block
                        .max(waited_until.saturating_sub(r.enqueued_at));
                }
                prev_resolved = r.resolved_at;
            }
            let base = k.base;
            let window = std::mem::take(&mut k.window);
            let ok = match self.kind {
                WorkloadKind::State => k.last_state == k.expected_last,
                WorkloadKind::Command => k.digest == k.expected_digest,
            };
            let (expected_last, last_state) = (k.expected_last, k.last_state);
            for (i, r) in window.iter().enumerate() {
                let seq = base + i as u32;
                self.tally.classify(r, key as u32, seq);
                if let Some(n) = self.notes.notes() {
                    anomaly::annotate_final(n, key as u32, seq, r);
                }
            }
            if !ok {
                mismatches += 1;
                if A::ON {
                    self.annotate_mismatch(key as u32, end, expected_last, last_state);
                }
            }
        }
        for (msg, r) in std::mem::take(&mut self.reopened) {
            self.tally.classify(&r, msg.key, msg.seq);
            if let Some(n) = self.notes.notes() {
                anomaly::annotate_final(n, msg.key, msg.seq, &r);
            }
        }
        if let Some(m) = self.malformed.take() {
            return Err(SelfCheckError::Malformed(m));
        }
        let t = &self.tally;
        if t.unaccounted > 0 {
            return Err(SelfCheckError::Conservation {
                produced: self.produced,
                applied: t.applied,
                stale: t.stale_rejected,
                dlq: t.dead_lettered,
                dropped: t.dropped,
                pending: t.pending,
                lost: t.lost,
                given_up: t.given_up,
                unaccounted: t.unaccounted,
            });
        }
        let undelivered = t.pending
            + t.lost
            + t.given_up
            + t.innocent_dead_lettered
            + t.innocent_dropped
            + if t.rejected_is_loss {
                t.stale_rejected
            } else {
                0
            };
        // A message never delivered has no latency: it counts as delivered at the run's end (a
        // lower bound), so that not delivering never makes a strategy look fast. A produce time
        // a recorded history did not give counts as the end.
        let innocent_dlq = t.dead_lettered_at.iter().filter(|d| !d.poison);
        for p in t
            .undelivered_produced_at
            .iter()
            .chain(innocent_dlq.map(|d| &d.produced_at))
        {
            self.latency.record(end.saturating_sub((*p).min(end)));
        }
        let ms = |us: Time| us as f64 / 1000.0;
        let (p50, p99, max) = self.latency.figures();
        // With messages never delivered the work is not done when the last apply happens: the
        // rate is over the whole run.
        let done_at = if undelivered > 0 {
            end
        } else {
            self.last_apply_at
        };
        let throughput = if done_at == 0 {
            0.0
        } else {
            t.applied as f64 / (done_at as f64 / 1e6)
        };
        Ok(Metrics {
            produced: self.produced,
            applied: t.applied,
            ordering_violations: self.ordering_violations,
            stale_writes: self.stale_writes,
            stale_rejected: t.stale_rejected,
            lost_commands: match self.kind {
                WorkloadKind::State => 0,
                WorkloadKind::Command => {
                    t.stale_rejected
                        + t.lost
                        + t.given_up
                        + t.innocent_dead_lettered
                        + t.innocent_dropped
                }
            },
            lost: t.lost,
            given_up: t.given_up,
            duplicates: self.duplicates,
            dead_lettered: t.dead_lettered,
            poison_dead_lettered: t.poison_dead_lettered,
            innocent_dead_lettered: t.innocent_dead_lettered,
            dropped: t.dropped,
            poison_dropped: t.poison_dropped,
            innocent_dropped: t.innocent_dropped,
            pending_at_end: t.pending,
            unacked_at_end: self.unacked,
            undelivered,
            final_state_mismatches: mismatches,
            redeliveries: self.redeliveries,
            events,
            throughput_per_s: round3(throughput),
            latency_ms: Latency {
                p50: ms(p50),
                p99: ms(p99),
                max: ms(max),
            },
            max_block_ms: ms(self.max_block),
            sim_time_s: end as f64 / 1e6,
            drain_start_s: self.drain_start.unwrap_or(end) as f64 / 1e6,
            ended_by: Default::default(),
            coverage: self.coverage,
            incomplete_groups: (t.group_size > 0).then_some(t.unapplied_groups.len() as u64),
        })
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests;
