//! One key's story, told two ways: a text timeline for the terminal and `timeline.html`, a
//! self-contained page (inline SVG, CSS and a little script; no network, no build step) with a lane
//! per producer, broker and consumer and one for the target store, time across, the anomaly in red.
//! Everything taken from the scenario or the history is HTML-escaped.

use crate::trace::{
    event_key, Aim, KeyCount, ReassignNote, TraceFault, TraceHeader, MAX_STORY_EVENTS,
};
use sim::checkers::{Anomaly, AnomalyKind};
use sim::history::{Event, Node};
use sim::time::Time;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What `sim trace` found: the chosen key's events (and every node's crashes, failovers and
/// suspensions) around its first anomaly.
pub struct Story {
    /// Names of the nodes.
    pub header: TraceHeader,
    /// The repro line of the run, or the history file.
    pub source: String,
    /// The key told.
    pub key: u32,
    /// Whether the user chose the key (`--key`).
    pub key_chosen: bool,
    /// What was aimed at (`--anomaly`, `--from`, `--to`).
    pub aim: Aim,
    /// A listing of the affected keys (`--keys`), not a story.
    pub list_keys: bool,
    /// The first anomaly of the key (none: the run, or the key, has none).
    pub anomaly: Option<Anomaly>,
    /// The key's anomalies (bounded).
    pub on_key: Vec<Anomaly>,
    /// The whole run's anomalies, by kind.
    pub counts: BTreeMap<AnomalyKind, u64>,
    /// The aimed anomalies, by key.
    pub per_key: BTreeMap<u32, KeyCount>,
    /// The events told, in order.
    pub events: Vec<Event>,
    /// The keys a told `reassign` event concerns, by its index in `events`.
    pub notes: BTreeMap<usize, ReassignNote>,
    /// The faults of the plan that touched the key's messages (in the window), with the seqs.
    pub faults: Vec<(TraceFault, Vec<u32>)>,
    /// Events of the key left out before the window (the story keeps at most
    /// [`MAX_STORY_EVENTS`]).
    pub omitted_before: u64,
    /// Events left out after it.
    pub omitted_after: u64,
    /// `reassign` events of other keys left out.
    pub reassigns_omitted: u64,
    /// A recorded history broke the checkers' rules: the figures may be off.
    pub malformed: Option<String>,
    /// The last event's time.
    pub end: Time,
}

/// The first `n` seqs, comma-separated, "and N more" after them.
fn seq_list(seqs: &[u32], n: usize) -> String {
    let shown: Vec<String> = seqs.iter().take(n).map(u32::to_string).collect();
    match seqs.len().saturating_sub(n) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// Seconds with microsecond precision.
fn secs(t: Time) -> String {
    format!("{}.{:06}", t / 1_000_000, t % 1_000_000)
}

fn node(h: &TraceHeader, n: Node) -> String {
    match n {
        Node::Broker(b) => format!("broker {}", h.broker(b)),
        Node::Consumer(c) => format!("consumer {}", h.consumer(c)),
        Node::Producer(p) => format!("producer {}", h.producer(p)),
        Node::TargetDb => "the target database".into(),
        Node::SourceDb => "the source database".into(),
        Node::Cache => "the cache".into(),
    }
}

/// The event's kind (its JSON `type`) and one line saying what happened, with names.
pub fn describe(h: &TraceHeader, e: &Event) -> (&'static str, String) {
    let b = |i: u16| h.broker(i);
    let c = |i: u32| h.consumer(i);
    match *e {
        Event::Produce {
            msg,
            producer,
            timestamp,
            poison,
            ..
        } => (
            "produce",
            format!(
                "seq {} produced by {} (clock {}s{})",
                msg.seq,
                h.producer(producer),
                secs(timestamp),
                if poison { ", poison" } else { "" }
            ),
        ),
        Event::Enqueue { msg, broker, .. } => (
            "enqueue",
            format!("seq {} stored at broker {}", msg.seq, b(broker)),
        ),
        Event::Forward { msg, from, to, .. } => (
            "forward",
            format!(
                "seq {} forwarded from broker {} to {}",
                msg.seq,
                b(from),
                b(to)
            ),
        ),
        Event::Dispatch {
            msg,
            broker,
            consumer,
            delivery,
            redelivered,
            ..
        } => (
            "dispatch",
            format!(
                "seq {} dispatched by broker {} to {} (delivery {delivery}{})",
                msg.seq,
                b(broker),
                c(consumer),
                if redelivered { ", redelivered" } else { "" }
            ),
        ),
        Event::Start { msg, consumer, .. } => (
            "start",
            format!("seq {} processing starts at {}", msg.seq, c(consumer)),
        ),
        Event::Apply {
            msg,
            consumer,
            state_seq,
            ..
        } => (
            "apply",
            if state_seq == msg.seq {
                format!("seq {} applied by {}", msg.seq, c(consumer))
            } else {
                format!(
                    "seq {} applied by {}: wrote the state of seq {state_seq}",
                    msg.seq,
                    c(consumer)
                )
            },
        ),
        Event::Reject { msg, consumer, .. } => (
            "reject",
            format!("seq {} rejected as stale by {}", msg.seq, c(consumer)),
        ),
        Event::Ack { msg, consumer, .. } => (
            "ack",
            format!("seq {} acknowledged by {}", msg.seq, c(consumer)),
        ),
        Event::Rollback {
            msg,
            consumer,
            reason,
            ..
        } => (
            "rollback",
            format!(
                "seq {} rolled back by {} ({})",
                msg.seq,
                c(consumer),
                match reason {
                    sim::history::FailReason::Outage => "resource outage",
                    sim::history::FailReason::Poison => "poison",
                    sim::history::FailReason::Strategy => "strategy gave up",
                }
            ),
        ),
        Event::Redelivery {
            msg,
            delay_us,
            blocking,
            ..
        } => (
            "redelivery",
            format!(
                "seq {} to be redelivered in {}s ({})",
                msg.seq,
                secs(delay_us),
                if blocking { "blocking" } else { "non-blocking" }
            ),
        ),
        Event::Expire {
            msg,
            broker,
            consumer,
            ..
        } => (
            "expire",
            format!(
                "seq {}: {}'s lease ended; broker {} takes it back",
                msg.seq,
                c(consumer),
                b(broker)
            ),
        ),
        Event::Replay { msg, broker, .. } => (
            "replay",
            format!(
                "seq {} replayed from broker {}'s dead-letter queue",
                msg.seq,
                b(broker)
            ),
        ),
        Event::AckFail { msg, consumer, .. } => (
            "ack_fail",
            format!(
                "seq {}: {}'s late ack refused (no longer its delivery)",
                msg.seq,
                c(consumer)
            ),
        ),
        Event::Commit {
            consumer, records, ..
        } => (
            "commit",
            format!(
                "{} commits {}",
                c(consumer),
                sim::verdict::count(u64::from(records), "processed record", "processed records")
            ),
        ),
        Event::DeadLetter { msg, broker, .. } => (
            "dead_letter",
            format!("seq {} dead-lettered by broker {}", msg.seq, b(broker)),
        ),
        Event::Drop { msg, broker, .. } => (
            "drop",
            format!(
                "seq {} deleted by broker {} (redelivery limit)",
                msg.seq,
                b(broker)
            ),
        ),
        Event::Discard { msg, reason, .. } => (
            "discard",
            format!(
                "seq {} vanished ({})",
                msg.seq,
                match reason {
                    sim::history::DiscardReason::BrokerCrash => "a non-persistent broker crashed",
                    sim::history::DiscardReason::BufferLost => "a buffer holding it was lost",
                    sim::history::DiscardReason::OffsetReset => {
                        "its group's position was reset past it (auto.offset.reset = latest)"
                    }
                    sim::history::DiscardReason::Truncated => {
                        "a new partition leader did not have it (the log was truncated)"
                    }
                    sim::history::DiscardReason::Aborted => {
                        "its transaction was aborted: read_committed consumers never read it"
                    }
                    sim::history::DiscardReason::Fenced => {
                        "a zombie producer's late write, refused: its epoch was fenced"
                    }
                }
            ),
        ),
        Event::Crash { node: n, .. } => ("crash", format!("{} goes down", node(h, n))),
        Event::Recover { node: n, .. } => ("recover", format!("{} is back", node(h, n))),
        Event::Takeover { broker, from, .. } => (
            "takeover",
            format!(
                "broker {} serves broker {}'s store",
                h.broker(broker),
                h.broker(from)
            ),
        ),
        Event::Disconnect { node: n, .. } => {
            ("disconnect", format!("{} loses its connection", node(h, n)))
        }
        Event::Connect {
            node: n,
            broker,
            failover,
            ..
        } => (
            "connect",
            format!(
                "{} {} broker {}",
                node(h, n),
                if failover {
                    "fails over to"
                } else {
                    "connects to"
                },
                b(broker)
            ),
        ),
        Event::Suspend { consumer, .. } => {
            ("suspend", format!("{} endpoint suspended", c(consumer)))
        }
        Event::Resume { consumer, .. } => ("resume", format!("{} endpoint resumed", c(consumer))),
        Event::JobStart { consumer, .. } => {
            ("job_start", format!("batch job starts on {}", c(consumer)))
        }
        Event::JobEnd {
            consumer, gave_up, ..
        } => (
            "job_end",
            format!(
                "batch job ends on {}{}",
                c(consumer),
                if gave_up { " (gave up: outage)" } else { "" }
            ),
        ),
        Event::Reassign {
            broker, consumer, ..
        } => (
            "reassign",
            format!("broker {}: owner is now {}", b(broker), c(consumer)),
        ),
        Event::SendFail { msg, producer, .. } => (
            "send_fail",
            format!("send of seq {} by {} failed", msg.seq, h.producer(producer)),
        ),
        Event::Resend {
            msg,
            of,
            producer,
            broker,
            deduplicated,
            ..
        } => (
            "resend",
            if deduplicated {
                format!(
                    "{} resent seq {} (its answer was lost): {} refused the duplicate",
                    h.producer(producer),
                    msg.seq,
                    b(broker)
                )
            } else {
                format!(
                    "{} resent seq {} (its answer was lost): {} stored it again as message {} (a duplicate of {of})",
                    h.producer(producer),
                    msg.seq,
                    b(broker),
                    msg.id
                )
            },
        ),
        Event::DeliveryTimeout {
            msg,
            producer,
            resent,
            ..
        } => (
            "delivery_timeout",
            format!(
                "{} gave up its send of seq {} (delivery timeout){}",
                h.producer(producer),
                msg.seq,
                if resent {
                    ": the application sends it again"
                } else {
                    ""
                }
            ),
        ),
        Event::SourceRead { consumer, seq, .. } => (
            "source_read",
            match seq {
                Some(s) => format!("{} read the source: state of seq {s}", c(consumer)),
                None => format!("{} read the source: no row yet", c(consumer)),
            },
        ),
        Event::DrainStart { .. } => ("drain_start", "fault phase over: the drain begins".into()),
        Event::Pending { msg, .. } => (
            "pending",
            format!("seq {} still unsettled at the end", msg.seq),
        ),
        Event::Unacked { msg, .. } => (
            "unacked",
            format!(
                "seq {} applied, but its ack or commit never reached the broker: a restart delivers it again",
                msg.seq
            ),
        ),
    }
}

fn who(h: &TraceHeader, e: &Option<Event>) -> String {
    match e {
        Some(Event::Apply {
            t,
            consumer,
            msg,
            state_seq,
        }) => {
            let state = if state_seq != &msg.seq {
                format!(" (message seq {})", msg.seq)
            } else {
                String::new()
            };
            format!("at {}s by {}{state}", secs(*t), h.consumer(*consumer))
        }
        Some(e) => format!("at {}s ({})", secs(e.time()), describe(h, e).1),
        None => "(no longer remembered)".into(),
    }
}

/// One sentence: what went wrong, and the earlier event it conflicts with.
pub fn explain(h: &TraceHeader, a: &Anomaly) -> String {
    let (k, s, at) = (a.key, a.seq, secs(a.t));
    let by = match a.event {
        Some(Event::Apply { consumer, .. }) => format!(" by {}", h.consumer(consumer)),
        _ => String::new(),
    };
    let other = a.other_seq.map_or("?".to_string(), |o| o.to_string());
    let conflict = who(h, &a.conflicts_with);
    match a.kind {
        AnomalyKind::Violation => format!(
            "ordering violation: key {k} seq {s} applied at {at}s{by}, after seq {other} was applied {conflict}"
        ),
        AnomalyKind::Duplicate => format!(
            "duplicate: key {k} seq {s} applied again at {at}s{by}; first applied {conflict}"
        ),
        AnomalyKind::StaleWrite => format!(
            "stale write: key {k} got the state of seq {s} at {at}s{by}, after the newer state of seq {other} was written {conflict}"
        ),
        AnomalyKind::Lost => format!(
            "lost: key {k} seq {s} vanished at {at}s and was never applied ({})",
            a.conflicts_with
                .as_ref()
                .map_or("no discard event".into(), |e| describe(h, e).1)
        ),
        AnomalyKind::Dropped => format!(
            "dropped: key {k} seq {s} was deleted at {at}s without being applied ({})",
            a.conflicts_with
                .as_ref()
                .map_or("no drop event".into(), |e| describe(h, e).1)
        ),
        AnomalyKind::FinalMismatch => format!(
            "final mismatch: key {k} ends with the state of seq {other}, expected seq {s}; its last write was {conflict}"
        ),
    }
}

impl Story {
    /// The anomaly counts of the run, one line.
    pub fn counts_line(&self) -> String {
        if self.counts.is_empty() {
            return "anomalies in the run: none".into();
        }
        let total: u64 = self.counts.values().sum();
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(k, n)| format!("{} {n}", k.figure()))
            .collect();
        format!("anomalies in the run: {} (total {total})", parts.join(", "))
    }

    /// The keys with aimed anomalies, most first (ties: the lower key).
    fn keys_by_count(&self) -> Vec<(u32, &KeyCount)> {
        let mut v: Vec<(u32, &KeyCount)> = self.per_key.iter().map(|(k, c)| (*k, c)).collect();
        v.sort_by_key(|(k, c)| (std::cmp::Reverse(c.total()), *k));
        v
    }

    /// One line: how many keys have aimed anomalies, the five with most.
    fn keys_line(&self) -> String {
        let v = self.keys_by_count();
        let top: Vec<String> = v
            .iter()
            .take(5)
            .map(|(k, c)| format!("{k} ({})", c.total()))
            .collect();
        format!(
            "keys with {}: {}{}{}",
            self.aim_words(),
            v.len(),
            if top.is_empty() {
                String::new()
            } else {
                format!(", most: {}", top.join(", "))
            },
            if v.len() > 1 {
                "; --keys lists them by kind"
            } else {
                ""
            }
        )
    }

    fn aim_words(&self) -> String {
        match self.aim.kind {
            None => format!("anomalies{}", self.aim.window_words()),
            Some(_) => self.aim.describe(),
        }
    }

    /// The `--keys` listing: one row per key with aimed anomalies, the count of each kind that
    /// occurs in the run, and the time of its first.
    pub fn keys_table(&self) -> String {
        const MAX_ROWS: usize = 1000;
        let kinds: Vec<(usize, AnomalyKind)> = AnomalyKind::ALL
            .iter()
            .enumerate()
            .filter(|(i, _)| self.per_key.values().any(|c| c.by_kind[*i] > 0))
            .map(|(i, k)| (i, *k))
            .collect();
        let mut s = String::new();
        let _ = write!(s, "{:>8}", "key");
        for (_, k) in &kinds {
            let _ = write!(s, "  {:>w$}", k.figure(), w = k.figure().len());
        }
        let _ = writeln!(s, "  {:>14}", "first at (s)");
        let rows = self.keys_by_count();
        for (key, c) in rows.iter().take(MAX_ROWS) {
            let _ = write!(s, "{key:>8}");
            for (i, k) in &kinds {
                let _ = write!(s, "  {:>w$}", c.by_kind[*i], w = k.figure().len());
            }
            let _ = writeln!(s, "  {:>14}", secs(c.first));
        }
        if rows.len() > MAX_ROWS {
            let _ = writeln!(s, "  ... and {} more key(s)", rows.len() - MAX_ROWS);
        }
        s
    }

    /// The event's kind and line, with what the story knows beyond the event (the keys of a
    /// reassign).
    fn describe_at(&self, i: usize, e: &Event) -> (&'static str, String) {
        let h = &self.header;
        match (self.notes.get(&i), *e) {
            (
                Some(n),
                Event::Reassign {
                    broker, consumer, ..
                },
            ) => {
                let c = h.consumer(consumer);
                let mut text = if n.keys.len() == 1 {
                    format!(
                        "broker {}: key {}'s owner is now {c} (its message went to {c} at this instant)",
                        h.broker(broker),
                        n.keys[0]
                    )
                } else {
                    let shown: Vec<String> = n.keys.iter().take(10).map(u32::to_string).collect();
                    format!(
                        "broker {}: owner is now {c} for keys {}{} (their messages went to {c} at this instant)",
                        h.broker(broker),
                        shown.join(", "),
                        if n.keys.len() > 10 { ", ..." } else { "" }
                    )
                };
                if n.events > 1 {
                    let _ = write!(text, " ({} events)", n.events);
                }
                ("reassign", text)
            }
            _ => describe(h, e),
        }
    }

    /// The faults' start and end lines for the text timeline: (time, line), by time.
    fn fault_lines(&self) -> Vec<(Time, String)> {
        let mut v = Vec::new();
        for (f, seqs) in &self.faults {
            v.push((
                f.at,
                format!(
                    "{:<12} {} (touches seq {})",
                    "fault",
                    f.what,
                    seq_list(seqs, 10)
                ),
            ));
            if let Some(u) = f.until {
                let kind = f.what.split(' ').next().unwrap_or_default();
                v.push((u, format!("{:<12} {kind} ends", "fault_end")));
            }
        }
        v.sort_by_key(|(t, _)| *t);
        v
    }

    fn title(&self) -> String {
        let h = &self.header;
        let mut s = format!("scenario {}", h.scenario);
        if let Some(st) = &h.strategy {
            let _ = write!(s, ", strategy {st}");
        }
        if let Some(seed) = h.seed {
            let _ = write!(s, ", seed {seed}");
        }
        s
    }

    /// Marks for an event: the anomaly itself, the event it conflicts with, another anomaly.
    fn mark(&self, e: &Event) -> (&'static str, Option<String>) {
        if let Some(a) = &self.anomaly {
            if a.event.as_ref() == Some(e) {
                return (
                    ">>",
                    Some(format!("{} (the anomaly)", a.kind.name().to_uppercase())),
                );
            }
            if a.conflicts_with.as_ref() == Some(e) {
                return (
                    " *",
                    Some(format!("the event the {} conflicts with", a.kind.name())),
                );
            }
        }
        if let Some(a) = self.on_key.iter().find(|a| a.event.as_ref() == Some(e)) {
            return (" !", Some(a.kind.name().into()));
        }
        ("  ", None)
    }

    /// The text timeline.
    pub fn text(&self) -> String {
        let h = &self.header;
        let mut s = format!(
            "trace: {}\n{}\n{}\n",
            self.source,
            self.title(),
            self.counts_line()
        );
        if let Some(m) = &self.malformed {
            let _ = writeln!(s, "warning: the history breaks the checkers' rules: {m}");
        }
        if self.aim.is_narrowed() {
            let _ = writeln!(s, "aimed at: {}", self.aim_words());
        }
        if self.list_keys {
            if self.per_key.is_empty() {
                let _ = writeln!(s, "no key has {}", self.aim_words());
            } else {
                let _ = writeln!(
                    s,
                    "{} key(s) with {}, most first:",
                    self.per_key.len(),
                    self.aim_words()
                );
                s.push_str(&self.keys_table());
            }
            return s;
        }
        match &self.anomaly {
            Some(a) => {
                let _ = writeln!(
                    s,
                    "first anomaly{}: {}",
                    if self.key_chosen { " of the key" } else { "" },
                    explain(h, a)
                );
                // One event can break more than one rule (a late apply that is also a duplicate).
                for other in self.on_key.iter().skip(1) {
                    if other.event.is_some() && other.event == a.event {
                        let _ = writeln!(s, "  the same event is also a {}", explain(h, other));
                    }
                }
            }
            None if self.key_chosen => {
                let _ = writeln!(s, "key {}: no {}", self.key, self.aim.describe());
            }
            None => return s,
        }
        if !self.key_chosen {
            let _ = writeln!(s, "{}", self.keys_line());
        }
        if !self.faults.is_empty() {
            let _ = writeln!(
                s,
                "faults that touched key {}'s messages: {} of {} in the plan",
                self.key,
                self.faults.len(),
                h.faults.len()
            );
            for (f, seqs) in &self.faults {
                let _ = writeln!(
                    s,
                    "  t={}s {} (seq {})",
                    secs(f.at),
                    f.what,
                    seq_list(seqs, 10)
                );
            }
        }
        let _ = writeln!(
            s,
            "\nkey {}: {} event(s) with every node's crashes and failovers; >> the anomaly, * the event it conflicts with, ! other anomalies, # a fault that touched its messages",
            self.key,
            self.events.len()
        );
        if self.omitted_before > 0 {
            let _ = writeln!(s, "  ... {} earlier event(s) left out", self.omitted_before);
        }
        let faults = self.fault_lines();
        let mut next_fault = faults.iter().peekable();
        let shown = |t: Time| self.aim.inside(t);
        for (i, e) in self.events.iter().enumerate() {
            while let Some((t, line)) = next_fault.next_if(|(t, _)| *t <= e.time()) {
                if shown(*t) {
                    let _ = writeln!(s, " # {:>14}  {line}", secs(*t));
                }
            }
            let (m, note) = self.mark(e);
            let (kind, what) = self.describe_at(i, e);
            let _ = write!(s, "{m} {:>14}  {kind:<12} {what}", secs(e.time()));
            if let Some(n) = note {
                let _ = write!(s, "   <-- {n}");
            }
            s.push('\n');
        }
        for (t, line) in next_fault {
            if shown(*t) && *t <= self.end {
                let _ = writeln!(s, " # {:>14}  {line}", secs(*t));
            }
        }
        if self.omitted_after > 0 {
            let _ = writeln!(s, "  ... {} later event(s) left out", self.omitted_after);
        }
        if self.reassigns_omitted > 0 {
            let _ = writeln!(
                s,
                "  ... {} reassign event(s) of other keys left out (the event names no key: it is told on a key whose message went to the new owner at that instant)",
                self.reassigns_omitted
            );
        }
        if let Some(a) = &self.anomaly {
            if a.event.is_none() {
                let _ = writeln!(s, ">> {:>14}  {}", secs(a.t), explain(h, a));
            }
        }
        s
    }

    /// The self-contained HTML page.
    pub fn html(&self) -> String {
        Page::new(self).render()
    }
}

/// HTML-escapes text (element content and attribute values alike).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if c.is_control() && c != '\n' => {
                let _ = write!(o, "&#{};", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

/// A lane: producers, brokers, consumers, then the target store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Faults,
    Producer(u32),
    Broker(u16),
    Consumer(u32),
    Store,
}

fn colour(kind: &str) -> &'static str {
    match kind {
        "produce" | "send_fail" => "#4e79a7",
        "enqueue" | "forward" => "#76b7b2",
        "dispatch" => "#9c755f",
        "start" | "ack" => "#bab0ac",
        "apply" | "write" => "#59a14f",
        "reject" => "#8cd17d",
        "rollback" | "redelivery" => "#f28e2b",
        "dead_letter" | "drop" | "discard" | "pending" | "unacked" => "#7f3c8d",
        "crash" | "disconnect" | "suspend" => "#222222",
        "recover" | "resume" => "#888888",
        "connect" | "reassign" => "#b07aa1",
        _ => "#555555",
    }
}

const LEGEND: &[(&str, &str)] = &[
    ("produce", "produce / failed send"),
    ("enqueue", "enqueue / forward"),
    ("dispatch", "dispatch"),
    ("start", "start / ack"),
    ("apply", "apply (and the write in the store lane)"),
    ("reject", "reject (stale)"),
    ("rollback", "rollback / redelivery"),
    ("drop", "dead-letter / drop / discard / pending"),
    ("crash", "crash / disconnect / suspend"),
    ("recover", "recover / resume"),
    ("connect", "connect, failover / reassign"),
];

struct Mark {
    lane: Lane,
    t: Time,
    kind: &'static str,
    text: String,
    seq: Option<u32>,
    /// 2: the anomaly, 1: the event it conflicts with, 0: plain.
    role: u8,
}

struct Page<'a> {
    story: &'a Story,
    lanes: Vec<(Lane, String)>,
    marks: Vec<Mark>,
    /// Node outages: lane, from, to.
    down: Vec<(Lane, Time, Time)>,
    t0: Time,
    t1: Time,
}

impl<'a> Page<'a> {
    fn new(story: &'a Story) -> Self {
        let h = &story.header;
        let mut lanes: BTreeMap<Lane, String> = BTreeMap::new();
        for i in 0..h.brokers.len() {
            lanes.insert(
                Lane::Broker(i as u16),
                format!("broker {}", h.broker(i as u16)),
            );
        }
        lanes.insert(Lane::Store, "target store".into());
        let mut marks = Vec::new();
        let mut last_lane: BTreeMap<u32, Lane> = BTreeMap::new();
        let mut down_since: BTreeMap<Lane, Time> = BTreeMap::new();
        let mut down = Vec::new();
        let node_lane = |n: Node| match n {
            Node::Broker(b) => Lane::Broker(b),
            Node::Consumer(c) => Lane::Consumer(c),
            Node::Producer(p) => Lane::Producer(p),
            _ => Lane::Store,
        };
        let anomaly = story.anomaly.as_ref();
        if !story.faults.is_empty() {
            lanes.insert(Lane::Faults, "faults".into());
        }
        for (i, e) in story.events.iter().enumerate() {
            let (kind, text) = story.describe_at(i, e);
            let t = e.time();
            let seq = match e {
                Event::SourceRead { .. } => None,
                _ => event_key(e).and(e.msg().map(|m| m.seq)),
            };
            let lane = match *e {
                Event::Produce { producer, .. }
                | Event::SendFail { producer, .. }
                | Event::Resend { producer, .. }
                | Event::DeliveryTimeout { producer, .. } => Lane::Producer(producer),
                Event::Enqueue { broker, .. }
                | Event::Dispatch { broker, .. }
                | Event::DeadLetter { broker, .. }
                | Event::Drop { broker, .. }
                | Event::Expire { broker, .. }
                | Event::Replay { broker, .. }
                | Event::Reassign { broker, .. }
                | Event::Takeover { broker, .. } => Lane::Broker(broker),
                Event::Forward { from, .. } => Lane::Broker(from),
                Event::Start { consumer, .. }
                | Event::Apply { consumer, .. }
                | Event::Reject { consumer, .. }
                | Event::Ack { consumer, .. }
                | Event::AckFail { consumer, .. }
                | Event::Commit { consumer, .. }
                | Event::Rollback { consumer, .. }
                | Event::Suspend { consumer, .. }
                | Event::Resume { consumer, .. }
                | Event::JobStart { consumer, .. }
                | Event::JobEnd { consumer, .. }
                | Event::SourceRead { consumer, .. } => Lane::Consumer(consumer),
                Event::Crash { node, .. }
                | Event::Recover { node, .. }
                | Event::Disconnect { node, .. }
                | Event::Connect { node, .. } => node_lane(node),
                Event::Redelivery { .. }
                | Event::Discard { .. }
                | Event::Pending { .. }
                | Event::Unacked { .. } => seq
                    .and_then(|s| last_lane.get(&s).copied())
                    .unwrap_or(Lane::Store),
                Event::DrainStart { .. } => Lane::Store,
            };
            if let Some(s) = seq {
                last_lane.insert(s, lane);
            }
            match *e {
                Event::Crash { node, .. } => {
                    down_since.entry(node_lane(node)).or_insert(t);
                }
                Event::Recover { node, .. } => {
                    if let Some(from) = down_since.remove(&node_lane(node)) {
                        down.push((node_lane(node), from, t));
                    }
                }
                _ => {}
            }
            lanes.entry(lane).or_insert_with(|| match lane {
                Lane::Faults => "faults".into(),
                Lane::Producer(p) => format!("producer {}", h.producer(p)),
                Lane::Broker(b) => format!("broker {}", h.broker(b)),
                Lane::Consumer(c) => format!("consumer {}", h.consumer(c)),
                Lane::Store => "target store".into(),
            });
            let role = |ev: &Event| match anomaly {
                Some(a) if a.event.as_ref() == Some(ev) => 2,
                Some(a) if a.conflicts_with.as_ref() == Some(ev) => 1,
                _ => 0,
            };
            let r = role(e);
            if let Event::Apply { msg, state_seq, .. } = *e {
                marks.push(Mark {
                    lane: Lane::Store,
                    t,
                    kind: "write",
                    text: format!(
                        "{}: key {} now holds the state of seq {state_seq}",
                        text, msg.key
                    ),
                    seq: Some(msg.seq),
                    role: r,
                });
            }
            marks.push(Mark {
                lane,
                t,
                kind,
                text,
                seq,
                role: r,
            });
        }
        // Min and max, not first and last: a recorded history's clock may go backwards.
        let t0 = story.events.iter().map(Event::time).min().unwrap_or(0);
        let mut t1 = story.events.iter().map(Event::time).max().unwrap_or(0);
        if let Some(a) = anomaly {
            t1 = t1.max(a.t);
        }
        for (lane, from) in down_since {
            down.push((lane, from, t1));
        }
        Page {
            story,
            lanes: lanes.into_iter().collect(),
            marks,
            down,
            t0,
            t1: t1.max(t0.saturating_add(1)),
        }
    }

    fn render(&self) -> String {
        let s = self.story;
        let h = &s.header;
        let width = (self.marks.len() as u64 * 6).clamp(1000, 16000) as f64;
        // The lane names stay put in their own column while the plot scrolls.
        let (left, lane_h, top) = (10.0, 34.0, 30.0);
        let height = top + lane_h * self.lanes.len() as f64 + 30.0;
        let x =
            |t: Time| left + t.saturating_sub(self.t0) as f64 / (self.t1 - self.t0) as f64 * width;
        let lane_y = |l: Lane| {
            let i = self.lanes.iter().position(|(x, _)| *x == l).unwrap_or(0);
            top + lane_h * i as f64 + lane_h / 2.0
        };
        let mut labels = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="190" height="{height:.0}" font-family="sans-serif" font-size="12">"#
        );
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#,
            left + width + 40.0
        );
        for (i, (_, name)) in self.lanes.iter().enumerate() {
            let y = top + lane_h * i as f64;
            let fill = if i % 2 == 0 { "#fafafa" } else { "#f0f0f0" };
            let _ = write!(
                svg,
                r##"<rect x="0" y="{y:.1}" width="{:.0}" height="{lane_h}" fill="{fill}"/>"##,
                left + width + 40.0,
            );
            let _ = write!(
                labels,
                r##"<rect x="0" y="{y:.1}" width="190" height="{lane_h}" fill="{fill}"/><text x="6" y="{:.1}">{}</text>"##,
                y + lane_h / 2.0 + 4.0,
                esc(name)
            );
        }
        labels.push_str("</svg>");
        for &(lane, from, to) in &self.down {
            let y = lane_y(lane) - lane_h / 2.0;
            let _ = write!(
                svg,
                r##"<rect class="down" x="{:.1}" y="{y:.1}" width="{:.1}" height="{lane_h}" fill="#e15759" fill-opacity="0.15"><title>down from {}s to {}s</title></rect>"##,
                x(from),
                (x(to) - x(from)).max(1.0),
                secs(from),
                secs(to)
            );
        }
        // The faults that touched the key's messages: a bar each in the faults lane, and their
        // window shaded on the node they act on.
        // Up to three rows in the lane, so that overlapping faults stay apart.
        let rows = s.faults.len().clamp(1, 3);
        let row_h = (lane_h - 6.0) / rows as f64;
        for (i, (f, seqs)) in s.faults.iter().enumerate() {
            let (from, to) = (f.at.max(self.t0), f.end().min(self.t1));
            if from > self.t1 || to < self.t0 {
                continue;
            }
            let w = (x(to) - x(from)).max(3.0);
            let d = esc(&format!(
                "{}s fault: {} (touches seq {})",
                secs(f.at),
                f.what,
                seq_list(seqs, 20)
            ));
            let fy = lane_y(Lane::Faults) - lane_h / 2.0 + 3.0 + row_h * (i % rows) as f64;
            let _ = write!(
                svg,
                r##"<g class="ev fault" data-d="{d}"><rect x="{:.1}" y="{fy:.1}" width="{w:.1}" height="{:.1}" fill="#ff9d00" fill-opacity="0.55" stroke="#c66f00"/><text x="{:.1}" y="{:.1}" font-size="{}" fill="#7a4300">{}</text><title>{d}</title></g>"##,
                x(from),
                row_h - 1.0,
                x(from) + 3.0,
                fy + row_h / 2.0 + 3.0,
                if rows > 1 { 9 } else { 11 },
                esc(&f.what),
            );
            let target = f.node.map(|n| match n {
                Node::Broker(b) => Lane::Broker(b),
                Node::Consumer(c) => Lane::Consumer(c),
                Node::Producer(p) => Lane::Producer(p),
                _ => Lane::Store,
            });
            if let Some(l) = target.filter(|l| self.lanes.iter().any(|(x, _)| x == l)) {
                let _ = write!(
                    svg,
                    r##"<rect class="fault" x="{:.1}" y="{:.1}" width="{w:.1}" height="{lane_h}" fill="#ff9d00" fill-opacity="0.18"><title>{d}</title></rect>"##,
                    x(from),
                    lane_y(l) - lane_h / 2.0,
                );
            }
        }
        // The time axis: ten ticks.
        for i in 0..=10u64 {
            let t = self.t0 + (self.t1 - self.t0) * i / 10;
            let _ = write!(
                svg,
                r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2:.1}" stroke="#ccc"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}s</text>"##,
                x(t),
                top,
                height - 25.0,
                top - 10.0,
                esc(&format!("{:.3}", t as f64 / 1e6))
            );
        }
        // The anomaly and the event it conflicts with, joined in the store lane.
        if let Some(a) = &s.anomaly {
            let conflict = self
                .marks
                .iter()
                .find(|m| m.role == 1 && m.lane == Lane::Store)
                .or_else(|| self.marks.iter().find(|m| m.role == 1));
            let here = self
                .marks
                .iter()
                .find(|m| m.role == 2 && m.lane == Lane::Store)
                .or_else(|| self.marks.iter().find(|m| m.role == 2));
            if let (Some(c), Some(m)) = (conflict, here) {
                let _ = write!(
                    svg,
                    r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>"##,
                    x(c.t),
                    lane_y(c.lane),
                    x(m.t),
                    lane_y(m.lane)
                );
            }
            if here.is_none() {
                // No event of its own (a final mismatch, a loss): a red band at its time.
                let _ = write!(
                    svg,
                    r##"<g id="anomaly" class="ev" data-d="{}"><rect x="{:.1}" y="{top}" width="4" height="{:.1}" fill="#d62728"/><title>{}</title></g>"##,
                    esc(&explain(h, a)),
                    x(a.t) - 2.0,
                    lane_h * self.lanes.len() as f64,
                    esc(&explain(h, a))
                );
            }
        }
        let mut anomaly_id = true;
        for m in &self.marks {
            let (cx, cy) = (x(m.t), lane_y(m.lane));
            let detail = format!("{}s {}: {}", secs(m.t), m.kind, m.text);
            let seq_attr = m
                .seq
                .map_or(String::new(), |q| format!(r#" data-seq="{q}""#));
            let (r, fill, stroke, id) = match m.role {
                2 => {
                    let id = if anomaly_id { r#" id="anomaly""# } else { "" };
                    anomaly_id = false;
                    (8.0, "#d62728", "#000", id)
                }
                1 => (7.0, colour(m.kind), "#d62728", ""),
                _ => (4.0, colour(m.kind), "none", ""),
            };
            let _ = write!(
                svg,
                r#"<g class="ev"{id}{seq_attr} data-d="{d}"><circle cx="{cx:.1}" cy="{cy:.1}" r="{r}" fill="{fill}" stroke="{stroke}" stroke-width="2"/><title>{d}</title></g>"#,
                d = esc(&detail)
            );
            if let (true, Some(q)) = (m.role > 0, m.seq) {
                // The two seqs in conflict are labelled where they meet.
                // The conflicting (earlier) one to the left, the anomaly to the right.
                let (dx, anchor) = if m.role == 1 {
                    (-6.0, "end")
                } else {
                    (6.0, "start")
                };
                let _ = write!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-weight="bold" fill="#d62728">seq {q}</text>"##,
                    cx + dx,
                    cy - 11.0
                );
            }
        }
        svg.push_str("</svg>");

        let mut legend = String::new();
        for (k, label) in LEGEND {
            let _ = write!(
                legend,
                r#"<span><svg width="12" height="12"><circle cx="6" cy="6" r="5" fill="{}"/></svg> {}</span>"#,
                colour(k),
                esc(label)
            );
        }
        legend.push_str(r##"<span><svg width="14" height="14"><circle cx="7" cy="7" r="6" fill="#d62728" stroke="#000" stroke-width="2"/></svg> the anomaly</span><span><svg width="14" height="14"><circle cx="7" cy="7" r="5" fill="#59a14f" stroke="#d62728" stroke-width="2"/></svg> the event it conflicts with</span><span><svg width="14" height="12"><rect width="14" height="12" fill="#e15759" fill-opacity="0.3"/></svg> node down</span><span><svg width="14" height="12"><rect width="14" height="12" fill="#ff9d00" fill-opacity="0.55"/></svg> a fault that touched the key's messages (its node shaded)</span>"##);

        let summary = match &s.anomaly {
            Some(a) => format!(r#"<p class="anomaly">{}</p>"#, esc(&explain(h, a))),
            None => format!("<p>key {}: no anomaly</p>", s.key),
        };
        let mut notes = String::new();
        if s.omitted_before > 0 || s.omitted_after > 0 {
            let _ = write!(
                notes,
                "<p class=\"note\">Left out: {} earlier and {} later event(s) (outside the --from/--to window, or beyond the page's {MAX_STORY_EVENTS} events around the anomaly).</p>",
                s.omitted_before, s.omitted_after
            );
        }
        if s.reassigns_omitted > 0 {
            let _ = write!(
                notes,
                "<p class=\"note\">{} reassign event(s) of other keys are left out (the event names no key: one is shown when a message of this key went to the new owner at that instant).</p>",
                s.reassigns_omitted
            );
        }
        if !s.faults.is_empty() {
            notes.push_str("<p>Faults that touched the key's messages:</p><ul>");
            for (f, seqs) in &s.faults {
                let _ = write!(
                    notes,
                    "<li>{}s {} (seq {})</li>",
                    secs(f.at),
                    esc(&f.what),
                    seq_list(seqs, 20)
                );
            }
            notes.push_str("</ul>");
        }
        if let Some(m) = &s.malformed {
            let _ = write!(
                notes,
                "<p class=\"note\">Warning: the history breaks the checkers' rules: {}</p>",
                esc(m)
            );
        }
        format!(
            r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; color: #222; }}
h1 {{ font-size: 1.2em; }}
.anomaly {{ color: #b00; font-weight: bold; }}
.note {{ color: #a60; }}
#wrap {{ display: flex; border: 1px solid #ccc; }}
#scroll {{ overflow-x: auto; flex: 1; }}
#details {{ position: sticky; top: 0; background: #ffd; border: 1px solid #cc9; padding: 4px 8px; min-height: 1.3em; font-family: monospace; }}
.legend span {{ margin-right: 1.2em; white-space: nowrap; }}
g.ev {{ cursor: pointer; }}
g.ev.hl circle {{ stroke: #1f77b4; stroke-width: 3; }}
g#anomaly.hl circle {{ stroke: #000; }}
pre {{ font-size: 11px; }}
</style></head>
<body data-ready="no">
<h1>{title}</h1>
<p>{description}{source}<br>{counts}</p>
{summary}{notes}
<p class="legend">{legend}</p>
<div id="details">hover over an event for details; click one to highlight every event of its seq (the anomaly's seq is highlighted in blue)</div>
<div id="wrap">{labels}<div id="scroll">{svg}</div></div>
<details><summary>the same story as text</summary><pre>{text}</pre></details>
<p id="status">the page's script has not run</p>
<script>
(function () {{
  var details = document.getElementById('details');
  var evs = document.querySelectorAll('g.ev');
  for (var i = 0; i < evs.length; i++) {{
    evs[i].addEventListener('mouseover', function () {{ details.textContent = this.getAttribute('data-d'); }});
    evs[i].addEventListener('click', function () {{
      var seq = this.getAttribute('data-seq');
      for (var j = 0; j < evs.length; j++) {{
        evs[j].classList.toggle('hl', seq !== null && evs[j].getAttribute('data-seq') === seq);
      }}
    }});
  }}
  var a = document.getElementById('anomaly');
  if (a) {{
    details.textContent = a.getAttribute('data-d');
    // The anomalous message's whole path, highlighted from the start.
    var seq = a.getAttribute('data-seq');
    for (var k = 0; k < evs.length; k++) {{
      evs[k].classList.toggle('hl', seq !== null && evs[k].getAttribute('data-seq') === seq);
    }}
    var box = document.getElementById('scroll');
    var r = a.getBoundingClientRect(), b = box.getBoundingClientRect();
    box.scrollLeft += (r.left - b.left) - box.clientWidth / 2;
  }}
  document.getElementById('status').textContent = 'ready: ' + evs.length + ' events drawn';
  document.body.setAttribute('data-ready', 'yes');
}})();
</script>
</body></html>
"#,
            title = esc(&format!("key {}: {}", s.key, s.title())),
            source = esc(&s.source),
            description = h
                .description
                .as_ref()
                .map_or(String::new(), |d| format!("<i>{}</i><br>", esc(d))),
            counts = esc(&s.counts_line()),
            text = esc(&s.text()),
        )
    }
}
