//! Anomalies as annotations: what the checkers found, where, and the earlier history event it
//! conflicts with. They travel beside the history, never in it, so a history (and its hash) stays
//! what the engine and the strategies emitted.
//!
//! The checkers carry [`Annotations`]: the engine's own carry [`Off`], a zero-sized type whose
//! `ON = false` removes every annotation branch at compile time (the counting checkers' layout and
//! code are what they were without annotations); annotating checkers carry [`Notes`], a sink
//! ([`AnomalySink`]) and the memory that naming conflicting events needs.

use super::{Checkers, Rec};
use crate::history::{Event, MsgRef};
use crate::scenario::WorkloadKind;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// What kind of anomaly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyKind {
    /// An apply of `seq` after an apply of a newer `other_seq` of the same key.
    Violation,
    /// A second apply of `seq`; `conflicts_with` is its first apply.
    Duplicate,
    /// A write put back the state of `seq` after the newer state of `other_seq` had been written
    /// (`state` workloads).
    StaleWrite,
    /// A non-poison message vanished (`discard`) without being applied, rejected or dead-lettered.
    Lost,
    /// A non-poison message the broker deleted at its redelivery limit (`drop`) without applying it.
    Dropped,
    /// At the end, the key's target state is not what applying its messages in order gives:
    /// `seq` is the state expected, `other_seq` the state written (if any).
    FinalMismatch,
}

impl AnomalyKind {
    /// Every kind, in the order the summary lists their figures.
    pub const ALL: [AnomalyKind; 6] = [
        AnomalyKind::Violation,
        AnomalyKind::StaleWrite,
        AnomalyKind::Duplicate,
        AnomalyKind::Lost,
        AnomalyKind::Dropped,
        AnomalyKind::FinalMismatch,
    ];

    /// The summary figure that counts this kind (its name in the JSON summary, `[expect]` and
    /// `sim trace --anomaly`): as many anomalies of the kind as the figure says.
    pub fn figure(self) -> &'static str {
        match self {
            AnomalyKind::Violation => "ordering_violations",
            AnomalyKind::Duplicate => "duplicates",
            AnomalyKind::StaleWrite => "stale_writes",
            AnomalyKind::Lost => "lost",
            AnomalyKind::Dropped => "innocent_dropped",
            AnomalyKind::FinalMismatch => "final_state_mismatches",
        }
    }

    /// The kind named `name`: its summary figure (`stale_writes`) or its annotation name
    /// (`stale_write`).
    pub fn from_name(name: &str) -> Option<AnomalyKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.figure() == name || k.name() == name)
    }

    /// The name as written in traces (annotation lines).
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::Violation => "violation",
            AnomalyKind::Duplicate => "duplicate",
            AnomalyKind::StaleWrite => "stale_write",
            AnomalyKind::Lost => "lost",
            AnomalyKind::Dropped => "dropped",
            AnomalyKind::FinalMismatch => "final_mismatch",
        }
    }
}

/// One anomaly. Serialized as a JSON line `{"type":"anomaly","kind":...}`: no history event has
/// the type `anomaly`, so a trace reader cannot mistake one for the other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "anomaly")]
pub struct Anomaly {
    /// What was found.
    pub kind: AnomalyKind,
    /// When it happened (the offending event's time; the end of the run for a final mismatch).
    pub t: Time,
    /// The key.
    pub key: u32,
    /// The message at fault (see [`AnomalyKind`] for each kind).
    pub seq: u32,
    /// The other seq involved, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_seq: Option<u32>,
    /// The event that revealed it (the late apply, the discard, ...), if it is an event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
    /// The earlier history event it conflicts with: the apply of the newer seq (violation), the
    /// first apply (duplicate), the write of the newer state (stale write), the discard or drop
    /// (lost, dropped), the key's last write (final mismatch). `None` when no such event exists
    /// or it is no longer remembered (see [`FIRST_APPLIES_REMEMBERED`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts_with: Option<Event>,
}

/// Receives anomalies as the checkers find them.
pub trait AnomalySink {
    /// One anomaly.
    fn anomaly(&mut self, a: Anomaly);
}

/// What checkers carry for annotations: nothing ([`Off`]) or [`Notes`].
pub trait Annotations {
    /// Whether annotations are on (checked at compile time: `false` costs nothing).
    const ON: bool;
    /// The sink the notes report to.
    type Sink: AnomalySink;
    /// The notes, when annotations are on.
    fn notes(&mut self) -> Option<&mut Notes<Self::Sink>>;
}

/// No annotations (the engine's own checkers): zero-sized.
#[derive(Clone, Copy, Debug, Default)]
pub struct Off;

impl Annotations for Off {
    const ON: bool = false;
    type Sink = Vec<Anomaly>;
    #[inline(always)]
    fn notes(&mut self) -> Option<&mut Notes<Vec<Anomaly>>> {
        None
    }
}

/// Annotations on: the sink and what naming conflicting events needs.
pub struct Notes<S> {
    pub(super) sink: S,
    pub(super) memo: Memo,
}

impl<S: AnomalySink> Notes<S> {
    pub(super) fn new(keys: u32, sink: S) -> Self {
        Notes {
            sink,
            memo: Memo::new(keys),
        }
    }
}

impl<S: AnomalySink> Annotations for Notes<S> {
    const ON: bool = true;
    type Sink = S;
    #[inline]
    fn notes(&mut self) -> Option<&mut Notes<S>> {
        Some(self)
    }
}

impl AnomalySink for Vec<Anomaly> {
    fn anomaly(&mut self, a: Anomaly) {
        self.push(a);
    }
}

/// First applies remembered for naming a duplicate's original: the newest this many, whatever
/// the key (a duplicate of an older one is reported without `conflicts_with`). Keeps the memory of
/// an annotating checker bounded.
pub const FIRST_APPLIES_REMEMBERED: usize = 1 << 16;

/// What an annotating checker remembers beyond the counting checker: per key a few events, plus
/// bounded maps.
#[derive(Default)]
pub(super) struct Memo {
    pub(super) keys: Vec<KeyMemo>,
    first_applies: BTreeMap<(u32, u32), Event>,
    first_order: VecDeque<(u32, u32)>,
    /// Discard or drop events of messages still in their key's window (bounded like the window).
    pub(super) gone: BTreeMap<(u32, u32), Event>,
}

/// Per key.
#[derive(Clone, Copy, Default)]
pub(super) struct KeyMemo {
    /// The apply that raised the key's highest applied seq.
    pub(super) max_apply: Option<Event>,
    /// The apply that wrote the newest state so far.
    pub(super) newest_write: Option<Event>,
    /// The last apply.
    pub(super) last_apply: Option<Event>,
}

impl Memo {
    pub(super) fn new(keys: u32) -> Self {
        Memo {
            keys: vec![KeyMemo::default(); keys as usize],
            ..Default::default()
        }
    }

    pub(super) fn first_apply(&self, m: MsgRef) -> Option<Event> {
        self.first_applies.get(&(m.key, m.seq)).copied()
    }

    pub(super) fn remember_first_apply(&mut self, m: MsgRef, e: Event) {
        if self.first_applies.insert((m.key, m.seq), e).is_none() {
            self.first_order.push_back((m.key, m.seq));
            if self.first_order.len() > FIRST_APPLIES_REMEMBERED {
                if let Some(old) = self.first_order.pop_front() {
                    self.first_applies.remove(&old);
                }
            }
        }
    }
}

// The annotating half of the checkers: called only when `A::ON`, before the counting code sees
// the same event, so it judges against the same state the counters do.
impl<A: Annotations> Checkers<A> {
    /// An apply: a violation, a stale write, a duplicate, each with its earlier event.
    pub(super) fn annotate_apply(&mut self, e: &Event, msg: MsgRef, state_seq: u32) {
        let Some(k) = self.keys.get(msg.key as usize) else {
            return;
        };
        let produced = k.base + k.window.len() as u32;
        if msg.seq >= produced || state_seq >= produced {
            return; // malformed: the counting checker reports it
        }
        let (max_applied, newest_state) = (k.max_applied, k.newest_state);
        let duplicate = match msg.seq.checked_sub(k.base) {
            None => true,
            Some(i) => k.window.get(i as usize).is_some_and(|r| r.applies > 0),
        };
        let Some(n) = self.notes.notes() else {
            return;
        };
        let memo = n.memo.keys[msg.key as usize];
        let t = e.time();
        let found = |kind, seq, other_seq, conflicts_with| Anomaly {
            kind,
            t,
            key: msg.key,
            seq,
            other_seq,
            event: Some(*e),
            conflicts_with,
        };
        if max_applied > msg.seq + 1 {
            n.sink.anomaly(found(
                AnomalyKind::Violation,
                msg.seq,
                Some(max_applied - 1),
                memo.max_apply,
            ));
        }
        if self.kind == WorkloadKind::State && state_seq + 1 < newest_state {
            n.sink.anomaly(found(
                AnomalyKind::StaleWrite,
                state_seq,
                Some(newest_state - 1),
                memo.newest_write,
            ));
        }
        if duplicate {
            let first = n.memo.first_apply(msg);
            n.sink
                .anomaly(found(AnomalyKind::Duplicate, msg.seq, None, first));
        } else {
            n.memo.remember_first_apply(msg, *e);
        }
        let m = &mut n.memo.keys[msg.key as usize];
        if msg.seq + 1 > max_applied {
            m.max_apply = Some(*e);
        }
        if state_seq + 1 > newest_state {
            m.newest_write = Some(*e);
        }
        m.last_apply = Some(*e);
    }

    /// A discard or a drop: remembered until the message is classified.
    pub(super) fn remember_gone(&mut self, e: &Event, msg: MsgRef) {
        if self.rec(msg).is_some() {
            if let Some(n) = self.notes.notes() {
                n.memo.gone.entry((msg.key, msg.seq)).or_insert(*e);
            }
        }
    }

    /// At the end: a key whose final state is wrong, with its last write.
    pub(super) fn annotate_mismatch(
        &mut self,
        key: u32,
        end: Time,
        expected_last: u32,
        last_state: u32,
    ) {
        let kind = self.kind;
        let Some(n) = self.notes.notes() else {
            return;
        };
        let last = n.memo.keys.get(key as usize).and_then(|m| m.last_apply);
        let written = match kind {
            WorkloadKind::State => last_state.checked_sub(1),
            WorkloadKind::Command => match last {
                Some(Event::Apply { msg, .. }) => Some(msg.seq),
                _ => None,
            },
        };
        n.sink.anomaly(Anomaly {
            kind: AnomalyKind::FinalMismatch,
            t: end,
            key,
            seq: expected_last.saturating_sub(1),
            other_seq: written,
            event: None,
            conflicts_with: last,
        });
    }
}

/// A record left its window: lost and (innocent) dropped messages are anomalies. Mirrors
/// [`super::Tally::classify`]'s order. A free function over the fields it needs, so the counting
/// loop that calls it keeps its shape (and its speed) when annotations are off.
pub(super) fn annotate_final<S: AnomalySink>(n: &mut Notes<S>, key: u32, seq: u32, r: &Rec) {
    let gone = n.memo.gone.remove(&(key, seq));
    let kind = if r.applies > 0 || r.rejected || r.dead_lettered {
        return;
    } else if r.dropped {
        if r.poison {
            return; // what the redelivery limit is for
        }
        AnomalyKind::Dropped
    } else if r.pending || !r.discarded || r.given_up {
        return;
    } else {
        AnomalyKind::Lost
    };
    n.sink.anomaly(Anomaly {
        kind,
        t: gone.map_or(r.resolved_at, |e| e.time()),
        key,
        seq,
        other_seq: None,
        event: None,
        conflicts_with: gone,
    });
}

#[cfg(test)]
mod tests;
