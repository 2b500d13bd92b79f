//! `sim judge FILE`: a history recorded elsewhere (an application log, an audit table, a topic of
//! processed events), judged by the simulator's checkers and shown in the same table.
//!
//! Three forms are read (docs/judge.md): the project's own JSON lines (`sim run --trace`, `sim
//! live --out`: read by [`crate::trace::parse_history`]), and a minimal form of one row per event
//! with the columns `time`, `event`, `key`, `seq` (or `version`) and `node`, as CSV (a header row)
//! or as JSON lines (one object per line). A minimal history is turned into [`Event`]s: keys and
//! nodes are numbered in the order the file first names them, each key's seqs by their order.
//!
//! Lenient about what is missing (a figure whose rows the file lacks is unknown: `?` in the table,
//! `null` in summary.json, an empty CSV cell; never 0), strict about what cannot happen (an event
//! of a message no `produce` row produced; time going backwards for one node): each refusal names
//! the line.

use crate::trace::{self, TraceHeader, MAX_HISTORY_KEYS, MAX_HISTORY_LINE_BYTES};
use crate::{report, CliError, OutputSet};
use serde_json::Value;
use sim::checkers::{Checkers, SelfCheckError};
use sim::history::{DiscardReason, Event, MsgRef};
use sim::scenario::WorkloadKind;
use sim::time::Time;
use sim::{Metrics, Params, RunSummary, Status, StrategySummary};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Judges a history with the simulator's checkers: the figures of a run (`sim live` judges its
/// recorded runs with it too).
pub fn judge_events(
    events: &[Event],
    keys: u32,
    kind: WorkloadKind,
) -> Result<Metrics, SelfCheckError> {
    judge_events_grouped(events, keys, kind, None)
}

/// [`judge_events`] of a workload in fixed-size correlation groups (`[workload] group_size`, as a
/// trace header carries it): the figures include `incomplete_groups`.
pub fn judge_events_grouped(
    events: &[Event],
    keys: u32,
    kind: WorkloadKind,
    group_size: Option<u32>,
) -> Result<Metrics, SelfCheckError> {
    let mut ch = Checkers::new(keys, kind).grouped(group_size);
    for e in events {
        ch.observe(e);
    }
    let end = events.last().map(|e| e.time()).unwrap_or(0);
    ch.finish(events.len() as u64, end)
}

/// What a row of a minimal history says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A producer sent the message (`node`: the producer).
    Produce,
    /// The broker delivered it to a consumer (`node`: the consumer).
    Deliver,
    /// The broker delivered it again (a redelivery).
    Redeliver,
    /// The consumer wrote it to the target.
    Apply,
    /// The consumer skipped it as stale (a version check) and did not write.
    Reject,
    /// The consumer acknowledged it (the broker settled it).
    Ack,
    /// It went to the dead-letter queue without being applied.
    DeadLetter,
    /// The broker deleted it at its redelivery limit (no dead-letter queue).
    Drop,
    /// It vanished (no copy left anywhere).
    Lost,
}

/// Every event name of the minimal form, with its [`Kind`].
pub const KINDS: [(&str, Kind); 9] = [
    ("produce", Kind::Produce),
    ("deliver", Kind::Deliver),
    ("redeliver", Kind::Redeliver),
    ("apply", Kind::Apply),
    ("reject", Kind::Reject),
    ("ack", Kind::Ack),
    ("dead_letter", Kind::DeadLetter),
    ("drop", Kind::Drop),
    ("lost", Kind::Lost),
];

impl Kind {
    /// Its name in a history file.
    pub fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Why a history cannot be judged. Each message starts with the line it is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JudgeError {
    /// A row's field is missing or cannot be read.
    #[error("{line}: {field}: {why}")]
    Field {
        /// Line number (from 1).
        line: u64,
        /// The column or JSON field.
        field: &'static str,
        /// What is wrong and what is allowed.
        why: String,
    },
    /// A line is not a row at all (not JSON, a CSV record with the wrong number of fields).
    #[error("{line}: {why}")]
    Row {
        /// Line number.
        line: u64,
        /// What is wrong.
        why: String,
    },
    /// A node's events go back in time (events of different nodes may interleave).
    #[error(
        "{line}: time went backwards for node {node:?}: {t} µs after {prev} µs on line {prev_line}"
    )]
    Backwards {
        /// Line number.
        line: u64,
        /// The node as the file names it.
        node: String,
        /// This row's time (µs).
        t: Time,
        /// The node's previous time (µs).
        prev: Time,
        /// Where that was.
        prev_line: u64,
    },
    /// An event about a message no `produce` row produced (the file has produce rows).
    #[error("{line}: {event} of key {key:?} seq {seq}, which no produce row produced")]
    NeverProduced {
        /// Line number.
        line: u64,
        /// The event.
        event: &'static str,
        /// The key.
        key: String,
        /// The seq.
        seq: u64,
    },
    /// An event about a message before its produce.
    #[error("{line}: {event} of key {key:?} seq {seq} at {t} µs, before its produce at {produced} µs on line {produce_line}")]
    BeforeProduce {
        /// Line number.
        line: u64,
        /// The event.
        event: &'static str,
        /// The key.
        key: String,
        /// The seq.
        seq: u64,
        /// Its time (µs).
        t: Time,
        /// The produce's time.
        produced: Time,
        /// The produce's line.
        produce_line: u64,
    },
    /// A message produced twice.
    #[error("{line}: key {key:?} seq {seq} produced again (first on line {first}): each message is produced once")]
    ProducedTwice {
        /// Line number.
        line: u64,
        /// The key.
        key: String,
        /// The seq.
        seq: u64,
        /// The first produce's line.
        first: u64,
    },
    /// A key's messages produced against their seq order.
    #[error("{line}: key {key:?} seq {seq} produced after seq {after} (line {after_line}): seq is the key's production order")]
    ProducedOutOfOrder {
        /// Line number.
        line: u64,
        /// The key.
        key: String,
        /// The seq.
        seq: u64,
        /// The higher seq produced before it.
        after: u64,
        /// Where.
        after_line: u64,
    },
    /// More keys than a history may have.
    #[error(
        "{line}: key {key:?} is key number {max}: a history is judged with at most {max} keys"
    )]
    TooManyKeys {
        /// Line number.
        line: u64,
        /// The key.
        key: String,
        /// The bound.
        max: u32,
    },
    /// Nothing to judge.
    #[error("no events: a history has one row per event (docs/judge.md)")]
    Empty,
}

/// One row of a minimal history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Its line in the file.
    pub line: u64,
    /// Time in microseconds (as written: from the epoch or from any start).
    pub t: Time,
    /// What happened.
    pub kind: Kind,
    /// The key, as the file names it.
    pub key: String,
    /// The seq (or version), as written.
    pub seq: u64,
    /// The node (producer or consumer), as the file names it (empty: not given).
    pub node: String,
}

const TIME_FORMS: &str = "write integer milliseconds (1733281500123), a duration from any start \
     (\"1.5s\", \"250ms\") or an RFC 3339 time in UTC (\"2026-12-04T03:05:00.123Z\")";

/// A row's time in microseconds: integer milliseconds, a duration, or an RFC 3339 UTC time.
pub fn parse_time(s: &str) -> Result<Time, String> {
    let s = s.trim();
    let bad = || format!("{s:?} is not a time: {TIME_FORMS}");
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .ok()
            .and_then(|ms| ms.checked_mul(1000))
            .ok_or_else(bad);
    }
    if s.len() > 10 && s.as_bytes()[4] == b'-' {
        let at = humantime::parse_rfc3339_weak(s).map_err(|e| format!("{}: {e}", bad()))?;
        let since = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| bad())?;
        return u64::try_from(since.as_micros()).map_err(|_| bad());
    }
    sim::time::Dur::parse(s)
        .map(|d| d.micros())
        .map_err(|_| bad())
}

/// One row from its fields (`get` gives a field's text, `None` when absent or empty). `what` is
/// "column" or "field".
fn row_of(line: u64, get: &dyn Fn(&str) -> Option<String>) -> Result<Row, JudgeError> {
    let field = |field: &'static str, why: String| JudgeError::Field { line, field, why };
    let need = |name: &'static str| {
        get(name).ok_or_else(|| {
            field(
                name,
                "missing: every row has a time, an event, a key and a seq (docs/judge.md)".into(),
            )
        })
    };
    let t = parse_time(&need("time")?).map_err(|e| field("time", e))?;
    let ev = need("event")?;
    let kind = KINDS
        .iter()
        .find(|(n, _)| *n == ev)
        .map(|(_, k)| *k)
        .ok_or_else(|| {
            let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
            field(
                "event",
                format!("{ev:?} is not an event: {}", crate::one_of(&ev, &names)),
            )
        })?;
    let key = need("key")?;
    let seq_text = match get("seq") {
        Some(s) => s,
        None => get("version").ok_or_else(|| {
            field("seq", "missing: every row has a seq (or a version): the message's place in its key's production order".into())
        })?,
    };
    let seq = seq_text
        .parse::<u64>()
        .map_err(|_| field("seq", format!("{seq_text:?} is not a whole number from 0")))?;
    Ok(Row {
        line,
        t,
        kind,
        key,
        seq,
        node: get("node").unwrap_or_default(),
    })
}

/// A JSON value as a field's text: a string or a number (`null` is absent).
fn json_text(line: u64, name: &str, v: &Value) -> Result<Option<String>, JudgeError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.trim().to_string())),
        Value::Number(n) => Ok(Some(n.to_string())),
        _ => Err(JudgeError::Row {
            line,
            why: format!("{name}: {v} is neither a string nor a number"),
        }),
    }
}

const FIELDS: [&str; 6] = ["time", "event", "key", "seq", "version", "node"];

/// A JSON object's members in their order, a name given twice kept twice (`serde_json::Map`
/// keeps the last silently).
struct Pairs(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Pairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Pairs, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Pairs, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Pairs(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The rows of a minimal history in JSON lines: one object per line, other fields ignored.
pub fn parse_json_rows(text: &str) -> Result<Vec<Row>, JudgeError> {
    let mut rows = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let line = i as u64 + 1;
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        if l.len() > MAX_HISTORY_LINE_BYTES {
            return Err(JudgeError::Row {
                line,
                why: format!(
                    "a line of {} bytes; a history line is at most {MAX_HISTORY_LINE_BYTES} bytes",
                    l.len()
                ),
            });
        }
        let Pairs(obj) = serde_json::from_str(l).map_err(|e| JudgeError::Row {
            line,
            why: format!("not a JSON object: {e}"),
        })?;
        let mut fields = BTreeMap::new();
        for name in FIELDS {
            let mut given = obj.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
            if let Some(v) = given.next() {
                if given.next().is_some() {
                    return Err(JudgeError::Row {
                        line,
                        why: format!(
                            "{name}: given twice in one object: which one is meant? (a JSON \
                             reader keeps either)"
                        ),
                    });
                }
                if let Some(s) = json_text(line, name, v)? {
                    fields.insert(name, s);
                }
            }
        }
        rows.push(row_of(line, &|n| fields.get(n).cloned())?);
    }
    Ok(rows)
}

/// The rows of a minimal history in CSV: a header row naming the columns (any order; other
/// columns ignored).
pub fn parse_csv_rows(text: &str) -> Result<Vec<Row>, JudgeError> {
    let mut r = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    // Lines from byte offsets: the reader's own line count skips blank lines.
    let mut counted = (0usize, 1u64);
    let mut line_at = |byte: u64| {
        let mut byte = (byte as usize).min(text.len());
        // A record's position may be that of the blank lines skipped before it.
        while matches!(text.as_bytes().get(byte), Some(b'\n' | b'\r')) {
            byte += 1;
        }
        let (from, n) = counted;
        if byte >= from {
            counted = (byte, n + text[from..byte].matches('\n').count() as u64);
            counted.1
        } else {
            text[..byte].matches('\n').count() as u64 + 1
        }
    };
    let csv_error = |e: csv::Error, line: u64| JudgeError::Row {
        line,
        why: format!("not CSV: {e}"),
    };
    let headers = r.headers().map_err(|e| csv_error(e, 1))?.clone();
    // Each field's column, by name in any case. A column named twice (`seq,...,SEQ`): which one
    // is meant cannot be told (the first was read silently).
    let mut cols: Vec<(&str, usize)> = Vec::new();
    for field in FIELDS {
        let at: Vec<usize> = headers
            .iter()
            .enumerate()
            .filter(|(_, h)| h.eq_ignore_ascii_case(field))
            .map(|(i, _)| i)
            .collect();
        if at.len() > 1 {
            return Err(JudgeError::Field {
                line: 1,
                field,
                why: format!(
                    "named by {} columns ({}): which one is meant? (names are read in any case)",
                    at.len(),
                    at.iter()
                        .map(|c| format!("column {}", c + 1))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        cols.extend(at.first().map(|&c| (field, c)));
    }
    for need in ["time", "event", "key", "seq"] {
        let has = |f: &str| cols.iter().any(|&(c, _)| c == f);
        let given = has(need) || (need == "seq" && has("version"));
        if !given {
            // A column of another name that is close (`Sequence`, `evnt`): the one meant.
            let meant = headers
                .iter()
                .filter(|h| !FIELDS.iter().any(|f| h.eq_ignore_ascii_case(f)))
                .find(|h| sim::suggest::closest(&h.to_ascii_lowercase(), [need]).is_some())
                .map(|h| format!("; column {h:?}: did you mean `{need}`?"))
                .unwrap_or_default();
            return Err(JudgeError::Field {
                line: 1,
                field: need,
                why: format!(
                    "no such column: the header row names time, event, key, seq (or version) and node (got {}){meant}",
                    headers.iter().collect::<Vec<_>>().join(",")
                ),
            });
        }
    }
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = match rec {
            Ok(rec) => rec,
            Err(e) => {
                let line = line_at(e.position().map_or(0, |p| p.byte()));
                return Err(csv_error(e, line));
            }
        };
        let line = line_at(rec.position().map_or(0, |p| p.byte()));
        let get = |n: &str| {
            cols.iter()
                .find(|(c, _)| *c == n)
                .and_then(|(_, i)| rec.get(*i))
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        rows.push(row_of(line, &get)?);
    }
    Ok(rows)
}

/// Which event kinds a history has rows of: what its figures can be computed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Present {
    /// Rows of each [`Kind`], in [`KINDS`] order.
    pub counts: [u64; KINDS.len()],
}

impl Present {
    /// Whether the file has rows of `k`.
    pub fn has(&self, k: Kind) -> bool {
        self.count(k) > 0
    }

    /// How many rows of `k`.
    pub fn count(&self, k: Kind) -> u64 {
        KINDS
            .iter()
            .position(|(_, x)| *x == k)
            .map_or(0, |i| self.counts[i])
    }
}

/// What each figure needs (flat names, as the CSV spells them): rows of every kind listed.
/// Figures not listed need nothing beyond the rows themselves; `ended_by` is known only when
/// `pending` is and is 0.
const NEEDS: &[(&str, &[Kind])] = &[
    ("produced", &[Kind::Produce]),
    ("applied", &[Kind::Apply]),
    ("ordering_violations", &[Kind::Apply]),
    ("stale_writes", &[Kind::Apply]),
    ("stale_rejected", &[Kind::Reject]),
    ("lost", &[Kind::Produce, Kind::Lost]),
    ("duplicates", &[Kind::Apply]),
    ("dead_lettered", &[Kind::DeadLetter]),
    ("innocent_dead_lettered", &[Kind::DeadLetter]),
    ("dropped", &[Kind::Drop]),
    ("innocent_dropped", &[Kind::Drop]),
    ("pending_at_end", &[Kind::Produce]),
    ("unacked_at_end", &[Kind::Apply, Kind::Ack]),
    ("undelivered", &[Kind::Produce]),
    ("final_state_mismatches", &[Kind::Produce, Kind::Apply]),
    ("redeliveries", &[Kind::Redeliver]),
    ("throughput_per_s", &[Kind::Apply]),
    ("latency_ms_p50", &[Kind::Produce, Kind::Apply]),
    ("latency_ms_p99", &[Kind::Produce, Kind::Apply]),
    ("latency_ms_max", &[Kind::Produce, Kind::Apply]),
    ("max_block_ms", &[Kind::Produce, Kind::Apply]),
];

/// The figures that count messages never applied, by how they ended.
const UNAPPLIED_FATES: &[&str] = &[
    "stale_rejected",
    "lost",
    "dead_lettered",
    "innocent_dead_lettered",
    "dropped",
    "innocent_dropped",
    "lost_commands",
];

/// Figures a minimal history never gives: which messages were poison, the drain phase, and the
/// coverage counters (faults are not rows).
fn never_known(name: &str) -> bool {
    name.starts_with("poison_") || name == "drain_start_s" || name.starts_with("coverage_")
}

/// The figures (flat names) a minimal history with these rows cannot give, for metrics `m`.
pub fn unknown_figures(present: &Present, kind: WorkloadKind, m: &Metrics) -> Vec<String> {
    // Every message the file lists was applied or settled by a row it has: a fate without rows
    // (rejected, dead-lettered, dropped, lost: each counts only messages never applied) would
    // have left its messages pending, so its count is known to be 0.
    let all_accounted = present.has(Kind::Produce) && m.pending_at_end == 0;
    let mut out: Vec<String> = report::metric_columns()
        .into_iter()
        .filter(|name| {
            if never_known(name) {
                return true;
            }
            if all_accounted && UNAPPLIED_FATES.contains(&name.as_str()) {
                return false;
            }
            if name == "lost_commands" && kind == WorkloadKind::Command {
                // Every way a command goes missing.
                let all = [
                    Kind::Produce,
                    Kind::Reject,
                    Kind::Lost,
                    Kind::DeadLetter,
                    Kind::Drop,
                ];
                return !all.iter().all(|k| present.has(*k));
            }
            NEEDS
                .iter()
                .find(|(n, _)| n == name)
                .is_some_and(|(_, needs)| !needs.iter().all(|k| present.has(*k)))
        })
        .collect();
    let pending_known = present.has(Kind::Produce);
    if !pending_known || m.pending_at_end > 0 {
        // A history that ends with messages pending did not say why it ended.
        out.push("ended_by".into());
    }
    out.sort_by_key(|n| report::metric_columns().iter().position(|c| c == n));
    out
}

/// A minimal history as the checkers' events.
pub struct Built {
    /// The header: producers and consumers by name.
    pub header: TraceHeader,
    /// The events, in time order.
    pub events: Vec<Event>,
    /// The keys by index, as the file names them.
    pub keys: Vec<String>,
    /// Which kinds of rows the file has.
    pub present: Present,
}

/// Names numbered in first-seen order.
#[derive(Default)]
struct Names {
    index: BTreeMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    fn get(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.index.insert(name.to_string(), i);
        self.names.push(name.to_string());
        i
    }
}

/// Node names as the trace shows them: a file without a `node` column has one node, `-`.
fn shown(names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .map(|n| if n.is_empty() { "-".to_string() } else { n })
        .collect()
}

/// What the end of the history needs to know of a message.
#[derive(Clone, Copy, Default)]
struct Fate {
    produced_line: u64,
    produced_at: Time,
    produced: bool,
    deliveries: u32,
    applied: bool,
    rejected: bool,
    acked: bool,
    gone: bool,
}

/// Turns rows (in file order) into events. `name` heads the header.
pub fn build(name: &str, mut rows: Vec<Row>, kind: WorkloadKind) -> Result<Built, JudgeError> {
    if rows.is_empty() {
        return Err(JudgeError::Empty);
    }
    // A node's own rows are in time order; different nodes' may interleave.
    let mut last: BTreeMap<&str, (Time, u64)> = BTreeMap::new();
    for r in &rows {
        if let Some(&(prev, prev_line)) = last.get(r.node.as_str()) {
            if r.t < prev {
                return Err(JudgeError::Backwards {
                    line: r.line,
                    node: r.node.clone(),
                    t: r.t,
                    prev,
                    prev_line,
                });
            }
        }
        last.insert(&r.node, (r.t, r.line));
    }
    let mut present = Present::default();
    let mut keys = Names::default();
    let mut producers = Names::default();
    let mut consumers = Names::default();
    let mut key_of = Vec::with_capacity(rows.len());
    for r in &rows {
        let i = KINDS.iter().position(|(_, k)| *k == r.kind).unwrap_or(0);
        present.counts[i] += 1;
        let k = keys.get(&r.key);
        if k >= MAX_HISTORY_KEYS {
            return Err(JudgeError::TooManyKeys {
                line: r.line,
                key: r.key.clone(),
                max: MAX_HISTORY_KEYS,
            });
        }
        key_of.push(k);
        if r.kind == Kind::Produce {
            producers.get(&r.node);
        } else {
            consumers.get(&r.node);
        }
    }
    let has_produce = present.has(Kind::Produce);
    // The messages: with produce rows, those produced (each once); without, every (key, seq)
    // named. A key's seqs, in their order, are its production order 0, 1, 2, ...
    let mut fates: BTreeMap<(u32, u64), Fate> = BTreeMap::new();
    for (r, &k) in rows.iter().zip(&key_of) {
        if has_produce && r.kind != Kind::Produce {
            continue;
        }
        let f = fates.entry((k, r.seq)).or_default();
        if r.kind == Kind::Produce {
            if f.produced_line != 0 {
                return Err(JudgeError::ProducedTwice {
                    line: r.line,
                    key: r.key.clone(),
                    seq: r.seq,
                    first: f.produced_line,
                });
            }
            f.produced_line = r.line;
            f.produced_at = r.t;
        }
    }
    if has_produce {
        if let Some((r, _)) = rows
            .iter()
            .zip(&key_of)
            .find(|(r, k)| !fates.contains_key(&(**k, r.seq)))
        {
            return Err(JudgeError::NeverProduced {
                line: r.line,
                event: r.kind.name(),
                key: r.key.clone(),
                seq: r.seq,
            });
        }
    }
    let mut rank: BTreeMap<(u32, u64), u32> = BTreeMap::new();
    let mut next = vec![0u32; keys.names.len()];
    for &(k, seq) in fates.keys() {
        rank.insert((k, seq), next[k as usize]);
        next[k as usize] += 1;
    }
    // Time order: stable, a produce first among rows of the same time; times from the first.
    let t0 = rows.iter().map(|r| r.t).min().unwrap_or(0);
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| (rows[i].t, rows[i].kind != Kind::Produce));
    for r in &mut rows {
        r.t -= t0;
    }
    let mut events = Vec::with_capacity(rows.len() + fates.len());
    let mut ids: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    let msg_of = |k: u32, seq: u64, ids: &mut BTreeMap<(u32, u64), u64>| {
        let n = ids.len() as u64;
        let id = *ids.entry((k, seq)).or_insert(n);
        MsgRef {
            id,
            key: k,
            seq: rank[&(k, seq)],
        }
    };
    if !has_produce {
        // Produced at the start, each key in its seqs' order: the production times are unknown.
        for &(k, seq) in fates.keys() {
            let msg = msg_of(k, seq, &mut ids);
            events.push(Event::Produce {
                t: 0,
                msg,
                producer: 0,
                timestamp: 0,
                poison: false,
            });
        }
        fates.values_mut().for_each(|f| f.produced = true);
    }
    // The highest seq produced so far, by key, and where.
    let mut newest: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for &i in &order {
        let r = &rows[i];
        let k = key_of[i];
        let t = r.t;
        let f = fates
            .get_mut(&(k, r.seq))
            .expect("every row's message is known");
        if r.kind != Kind::Produce && !f.produced {
            return Err(JudgeError::BeforeProduce {
                line: r.line,
                event: r.kind.name(),
                key: r.key.clone(),
                seq: r.seq,
                t: r.t + t0,
                produced: f.produced_at,
                produce_line: f.produced_line,
            });
        }
        let msg = msg_of(k, r.seq, &mut ids);
        let consumer = || consumers.index.get(&r.node).copied().unwrap_or(0);
        let e = match r.kind {
            Kind::Produce => {
                if let Some(&(after, after_line)) = newest.get(&k) {
                    if after > r.seq {
                        return Err(JudgeError::ProducedOutOfOrder {
                            line: r.line,
                            key: r.key.clone(),
                            seq: r.seq,
                            after,
                            after_line,
                        });
                    }
                }
                newest.insert(k, (r.seq, r.line));
                f.produced = true;
                let producer = producers.index.get(&r.node).copied().unwrap_or(0);
                events.push(Event::Produce {
                    t,
                    msg,
                    producer,
                    timestamp: t,
                    poison: false,
                });
                // Its arrival at the broker, for the head-of-line block.
                Event::Enqueue { t, msg, broker: 0 }
            }
            Kind::Deliver | Kind::Redeliver => {
                f.deliveries += 1;
                Event::Dispatch {
                    t,
                    msg,
                    broker: 0,
                    consumer: consumer(),
                    delivery: f.deliveries,
                    redelivered: r.kind == Kind::Redeliver,
                }
            }
            Kind::Apply => {
                f.applied = true;
                Event::Apply {
                    t,
                    msg,
                    consumer: consumer(),
                    state_seq: msg.seq,
                }
            }
            Kind::Reject => {
                f.rejected = true;
                Event::Reject {
                    t,
                    msg,
                    consumer: consumer(),
                }
            }
            Kind::Ack => {
                f.acked = true;
                Event::Ack {
                    t,
                    msg,
                    consumer: consumer(),
                }
            }
            Kind::DeadLetter => {
                f.gone = true;
                Event::DeadLetter { t, msg, broker: 0 }
            }
            Kind::Drop => {
                f.gone = true;
                Event::Drop { t, msg, broker: 0 }
            }
            Kind::Lost => {
                f.gone = true;
                Event::Discard {
                    t,
                    msg,
                    reason: DiscardReason::BrokerCrash,
                }
            }
        };
        events.push(e);
    }
    // The end: what is not settled is pending; with ack rows, what was applied and never acked
    // is unacked.
    let end = events.last().map_or(0, Event::time);
    let has_ack = present.has(Kind::Ack);
    for (&(k, seq), f) in &fates {
        let msg = msg_of(k, seq, &mut ids);
        if !(f.applied || f.gone || (f.rejected && f.acked)) {
            events.push(Event::Pending { t: end, msg });
        } else if has_ack && f.applied && !f.acked {
            events.push(Event::Unacked { t: end, msg });
        }
    }
    let header = TraceHeader {
        scenario: name.to_string(),
        description: Some(format!(
            "a history judged by sim judge ({} keys; key names in keys.csv)",
            keys.names.len()
        )),
        strategy: None,
        seed: None,
        keys: keys.names.len() as u32,
        kind,
        group_size: None,
        brokers: vec!["broker".into()],
        producers: shown(producers.names),
        consumers: shown(consumers.names),
        faults: vec![],
    };
    Ok(Built {
        header,
        events,
        keys: keys.names,
        present,
    })
}

/// `sim judge`'s request.
pub struct JudgeRequest {
    /// The history file.
    pub file: PathBuf,
    /// `state` or `command` (default: the header's for the project's form, else `state`).
    pub kind: Option<WorkloadKind>,
    /// The figure the consumer promises (`ordering_violations` or `stale_writes`; default: the
    /// header's strategy's, else `ordering_violations`).
    pub guarantee: Option<String>,
}

/// The form a history was read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The project's JSON lines (`sim run --trace`).
    Project,
    /// The minimal form as JSON lines.
    JsonLines,
    /// The minimal form as CSV.
    Csv,
}

/// What `sim judge` found.
pub struct Judged {
    /// The summary (one row, named after the strategy or the file); unknown figures are 0 in it.
    pub summary: RunSummary,
    /// The figures the history cannot give (flat names).
    pub unknown: Vec<String>,
    /// The history as the project writes it.
    pub header: TraceHeader,
    /// Its events.
    pub events: Vec<Event>,
    /// The keys by index (the minimal form's names; empty for the project's form).
    pub keys: Vec<String>,
    /// The form read.
    pub form: Form,
    /// Rows by kind (minimal form).
    pub present: Option<Present>,
}

/// The guarantees a judged consumer can be held to.
pub const GUARANTEES: [&str; 2] = ["ordering_violations", "stale_writes"];

/// Reads and judges a history.
pub fn judge(req: &JudgeRequest) -> Result<Judged, CliError> {
    if let Some(g) = req.guarantee.as_deref().filter(|g| !GUARANTEES.contains(g)) {
        return Err(CliError::Usage(crate::not_one_of(
            "--guarantee",
            g,
            &GUARANTEES,
        )));
    }
    let (name, text) = trace::read_history_text(&req.file)?;
    judge_text(&name, &text, req)
}

/// [`judge`] on text.
pub fn judge_text(name: &str, text: &str, req: &JudgeRequest) -> Result<Judged, CliError> {
    let bad = |e: JudgeError| match e {
        // The one error without a line: "FILE: no events", not "FILE:no events".
        JudgeError::Empty => CliError::Usage(format!("{name}: {e}")),
        _ => CliError::Usage(format!("{name}:{e}")),
    };
    let first = text.lines().map(str::trim).find(|l| !l.is_empty());
    let first = first.ok_or_else(|| CliError::Usage(format!("{name}: {}", JudgeError::Empty)))?;
    // The project's lines have a "type" (a log's may too, beside its "event").
    let project = first.starts_with('{')
        && serde_json::from_str::<serde_json::Map<String, Value>>(first)
            .is_ok_and(|o| o.contains_key("type") && !o.contains_key("event"));
    let (header, events, keys, form, present) = if project {
        let h = trace::parse_history(name, text)?;
        let mut header = h.header.unwrap_or_else(|| TraceHeader {
            scenario: name.to_string(),
            description: None,
            strategy: None,
            seed: None,
            keys: h
                .events
                .iter()
                .filter_map(trace::event_key)
                .max()
                .map_or(0, |k| k + 1),
            kind: WorkloadKind::State,
            group_size: None,
            brokers: vec![],
            producers: vec![],
            consumers: vec![],
            faults: vec![],
        });
        if let Some(k) = req.kind {
            header.kind = k;
        }
        if h.events.is_empty() {
            return Err(CliError::Usage(format!("{name}: {}", JudgeError::Empty)));
        }
        (header, h.events, vec![], Form::Project, None)
    } else {
        let (rows, form) = if first.starts_with('{') {
            (parse_json_rows(text).map_err(bad)?, Form::JsonLines)
        } else {
            (parse_csv_rows(text).map_err(bad)?, Form::Csv)
        };
        let b = build(name, rows, req.kind.unwrap_or_default()).map_err(bad)?;
        (b.header, b.events, b.keys, form, Some(b.present))
    };
    let m = judge_events_grouped(&events, header.keys, header.kind, header.group_size)
        .map_err(|e| CliError::Usage(format!("{name}: the history breaks a self-check: {e}")))?;
    let (m, unknown) = match &present {
        Some(p) => {
            let unknown = unknown_figures(p, header.kind, &m);
            (known_only(m, &unknown, header.kind), unknown)
        }
        // A complete history, but it does not say why it ended when messages were left pending.
        None if m.pending_at_end > 0 => (m, vec!["ended_by".to_string()]),
        None => (m, vec![]),
    };
    // The row is the strategy's when the header names one, else the file's.
    let label = header.strategy.clone().unwrap_or_else(|| {
        req.file
            .file_name()
            .map_or(name.to_string(), |n| n.to_string_lossy().into_owned())
    });
    let guarantee = match (&req.guarantee, &header.strategy) {
        (Some(g), _) => g.as_str(),
        (None, Some(st)) => strategies::guarantee(st),
        (None, None) => GUARANTEES[0],
    };
    let entry = StrategySummary::new(
        crate::escape_controls(&label, false),
        Status::Ok,
        None,
        Some(m),
        Params::default(),
    )
    .judged(guarantee);
    let summary = RunSummary {
        scenario: header.scenario.clone(),
        seed: header.seed.unwrap_or(0),
        strategies: vec![entry],
    };
    Ok(Judged {
        summary,
        unknown,
        header,
        events,
        keys,
        form,
        present,
    })
}

/// The metrics with every unknown figure 0 (but `produced`: the messages the file names) and
/// `undelivered` counting only known figures, so the
/// verdict judges what the history shows. (Every dead-lettered or dropped message counts as
/// innocent: a history does not say which were poison.)
fn known_only(m: Metrics, unknown: &[String], kind: WorkloadKind) -> Metrics {
    let produced = m.produced;
    let mut v = serde_json::to_value(&m).expect("metrics serialize");
    replace_unknown(&mut v, unknown, &|old| match old {
        Value::Number(_) => Value::from(0),
        other => other.clone(),
    });
    let mut m: Metrics = serde_json::from_value(v).expect("metrics deserialize");
    // Without produce rows, the messages the file names: what the verdict's "of N" counts.
    m.produced = produced;
    m.undelivered = m.pending_at_end
        + m.lost
        + m.given_up
        + m.innocent_dead_lettered
        + m.innocent_dropped
        + if kind == WorkloadKind::Command {
            m.stale_rejected
        } else {
            0
        };
    m
}

/// Replaces the figures named `unknown` (flat names: `latency_ms_p99`) in a metrics object.
fn replace_unknown(v: &mut Value, unknown: &[String], with: &dyn Fn(&Value) -> Value) {
    let Some(obj) = v.as_object_mut() else { return };
    for (k, x) in obj.iter_mut() {
        match x {
            Value::Object(inner) => {
                for (j, y) in inner.iter_mut() {
                    if unknown.iter().any(|u| *u == format!("{k}_{j}")) {
                        *y = with(y);
                    }
                }
            }
            _ if unknown.iter().any(|u| u == k) => *x = with(x),
            _ => {}
        }
    }
}

/// "1 key", "2 keys".
fn counted(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

impl Judged {
    /// `--strict`: an error naming the verdict when it fails.
    pub fn strict(&self) -> Result<(), CliError> {
        match self.summary.strategies.first() {
            Some(st) if st.valid == Some(false) => Err(CliError::Verdict(format!(
                "{}: {}",
                st.strategy,
                st.verdict.as_deref().unwrap_or("FAIL")
            ))),
            _ => Ok(()),
        }
    }

    /// What `sim judge` prints: what was read, then the table.
    pub fn text(&self, file: &Path) -> String {
        let form = match self.form {
            Form::Project => "the project's JSON lines",
            Form::JsonLines => "JSON lines",
            Form::Csv => "CSV",
        };
        let mut s = format!("judge: sim judge {} ({form}", file.display());
        if let Some(p) = &self.present {
            let rows: Vec<String> = KINDS
                .iter()
                .filter(|(_, k)| p.has(*k))
                .map(|(n, k)| format!("{n} {}", p.count(*k)))
                .collect();
            let missing: Vec<&str> = KINDS
                .iter()
                .filter(|(_, k)| !p.has(*k))
                .map(|(n, _)| *n)
                .collect();
            s.push_str(&format!(
                ": {}; {}, {}, {})\n",
                rows.join(", "),
                counted(self.header.keys as usize, "key"),
                counted(self.header.producers.len(), "producer"),
                counted(self.header.consumers.len(), "consumer")
            ));
            if !missing.is_empty() {
                s.push_str(&format!("no rows of: {}\n", missing.join(", ")));
            }
        } else {
            s.push_str(&format!(
                ": {}, {})\n",
                counted(self.events.len(), "event"),
                counted(self.header.keys as usize, "key")
            ));
        }
        let unknown: Vec<&str> = self.unknown.iter().map(String::as_str).collect();
        s.push_str(&crate::escape_controls(
            &report::table_unknown(&self.summary, &unknown),
            true,
        ));
        s
    }

    /// summary.json: unknown figures are `null`.
    pub fn json(&self) -> String {
        let mut v = serde_json::to_value(&self.summary).expect("summary serializes");
        if let Some(rows) = v.get_mut("strategies").and_then(Value::as_array_mut) {
            for st in rows {
                replace_unknown(st, &self.unknown, &|_| Value::Null);
            }
        }
        let mut j = serde_json::to_string_pretty(&v).expect("summary serializes");
        j.push('\n');
        j
    }

    /// summary.csv: unknown figures are empty cells.
    pub fn csv(&self) -> Result<String, csv::Error> {
        let header = report::csv_header_for(report::grouped(&self.summary));
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&header)?;
        for r in report::csv_records(&self.summary) {
            let r: Vec<&str> = r
                .iter()
                .zip(&header)
                .map(|(v, h)| {
                    if self.unknown.contains(h) {
                        ""
                    } else {
                        v.as_str()
                    }
                })
                .collect();
            w.write_record(r)?;
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8(bytes).expect("csv of utf-8 strings is utf-8"))
    }

    /// The history in the project's JSON lines (`sim trace --history` reads it).
    pub fn history(&self) -> Vec<u8> {
        trace::history_jsonl(&self.header, &self.events)
    }

    /// keys.csv: each key's index in the history and its name in the file.
    pub fn keys_csv(&self) -> Result<String, csv::Error> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(["index", "key"])?;
        for (i, k) in self.keys.iter().enumerate() {
            w.write_record([i.to_string().as_str(), k.as_str()])?;
        }
        let bytes = w.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8(bytes).expect("csv of utf-8 strings is utf-8"))
    }
}

/// The files `sim judge --out` writes.
pub const JUDGE_FILES: [&str; 5] = [
    "summary.csv",
    "summary.json",
    "history.jsonl",
    "keys.csv",
    "timeline.html",
];

/// Writes [`JUDGE_FILES`] through `set` (staged, then published with `judge-manifest.json`).
pub fn write_out(j: &Judged, file: &Path, set: OutputSet) -> Result<(), CliError> {
    let dir = set.staging().to_path_buf();
    let out_err = |name: &str, e: csv::Error| CliError::Output {
        path: dir.join(name).display().to_string(),
        reason: e.to_string(),
    };
    crate::write_atomic(
        &dir.join("summary.csv"),
        j.csv().map_err(|e| out_err("summary.csv", e))?.as_bytes(),
    )?;
    crate::write_atomic(&dir.join("summary.json"), j.json().as_bytes())?;
    crate::write_atomic(&dir.join("history.jsonl"), &j.history())?;
    crate::write_atomic(
        &dir.join("keys.csv"),
        j.keys_csv().map_err(|e| out_err("keys.csv", e))?.as_bytes(),
    )?;
    let story = trace::story_of(
        j.header.clone(),
        j.events.clone(),
        format!("history {}", file.display()),
    )?;
    crate::write_atomic(&dir.join("timeline.html"), story.html().as_bytes())?;
    let mut about = serde_json::Map::new();
    about.insert("history".into(), file.display().to_string().into());
    set.publish(&JUDGE_FILES, about)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(csv: &str) -> Vec<Row> {
        parse_csv_rows(csv).unwrap()
    }

    #[test]
    fn times_are_milliseconds_durations_or_rfc3339() {
        assert_eq!(parse_time("1500"), Ok(1_500_000));
        assert_eq!(parse_time("1.5s"), Ok(1_500_000));
        assert_eq!(parse_time("250ms"), Ok(250_000));
        assert_eq!(parse_time("1970-01-01T00:00:01.5Z"), Ok(1_500_000));
        assert_eq!(parse_time("1970-01-01 00:00:02"), Ok(2_000_000));
        for bad in [
            "",
            "-3",
            "soon",
            "2026-13-01T00:00:00Z",
            "99999999999999999999",
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains("integer milliseconds"), "{bad}: {e}");
        }
    }

    #[test]
    fn csv_and_json_lines_give_the_same_rows() {
        let c =
            rows("time,node,event,key,version,extra\n10,p,produce,k1,7,x\n\n12,c,apply,k1,7,\n");
        let j = parse_json_rows(
            "{\"time\":10,\"node\":\"p\",\"event\":\"produce\",\"key\":\"k1\",\"seq\":7,\"other\":[1]}\n\n\
             {\"time\":\"12ms\",\"node\":\"c\",\"event\":\"apply\",\"key\":\"k1\",\"seq\":\"7\"}\n",
        )
        .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].line, c[1].line), (2, 4));
        assert_eq!((j[0].line, j[1].line), (1, 3));
        for (a, b) in c.iter().zip(&j) {
            assert_eq!(
                (a.t, a.kind, &a.key, a.seq, &a.node),
                (b.t, b.kind, &b.key, b.seq, &b.node)
            );
        }
    }

    #[test]
    fn a_bad_field_names_its_line_and_what_is_allowed() {
        let e = parse_csv_rows("time,event,key,seq\n1,produce,k,0\n2,applied,k,0\n").unwrap_err();
        assert_eq!(e.to_string().split(':').next(), Some("3"), "{e}");
        assert!(e.to_string().contains("one of produce, deliver"), "{e}");
        let e = parse_csv_rows("time,event,key,seq\n1,produce,k,-1\n").unwrap_err();
        assert!(e.to_string().starts_with("2: seq: \"-1\""), "{e}");
        let e = parse_csv_rows("time,event,seq\n1,produce,0\n").unwrap_err();
        assert!(e.to_string().starts_with("1: key: no such column"), "{e}");
        let e = parse_json_rows("{\"time\":1,\"event\":\"apply\",\"key\":\"k\"}\n").unwrap_err();
        assert!(e.to_string().starts_with("1: seq: missing"), "{e}");
        let e =
            parse_json_rows("{\"time\":1,\"event\":\"apply\",\"key\":[1],\"seq\":1}").unwrap_err();
        assert!(e.to_string().starts_with("1: key: [1] is neither"), "{e}");
        let e = parse_json_rows("[1]").unwrap_err();
        assert!(e.to_string().starts_with("1: not a JSON object"), "{e}");
    }

    /// A field named twice is refused, not read one way silently: a CSV header naming a column
    /// twice (in any case) read the first, a JSON object giving a member twice the last.
    #[test]
    fn a_field_named_twice_is_refused() {
        for header in [
            "time,event,key,seq,seq",
            "time,event,key,Seq,seq",
            "TIME,event,time,key,seq",
        ] {
            let cols = header.split(',').count();
            let row = vec!["1"; cols].join(",");
            let e = parse_csv_rows(&format!("{header}\n{row}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("1: "), "{header}: {e}");
            assert!(e.contains("named by 2 columns"), "{header}: {e}");
        }
        let e = parse_json_rows(
            "{\"time\":1,\"event\":\"produce\",\"key\":\"k\",\"seq\":0}\n\
             {\"time\":2,\"time\":9,\"event\":\"apply\",\"key\":\"k\",\"seq\":0}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("2: time: given twice"), "{e}");
        // Other fields (ignored) may repeat; the named ones once each read as before.
        let rows = parse_json_rows(
            "{\"x\":1,\"x\":2,\"time\":1,\"event\":\"produce\",\"key\":\"k\",\"seq\":0}\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        // A file of a header and no rows: "FILE: no events" (was "FILE:no events").
        let req = JudgeRequest {
            file: PathBuf::from("h.csv"),
            kind: None,
            guarantee: None,
        };
        let e = judge_text("h.csv", "time,event,key,seq\n", &req)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("h.csv: no events"), "{e}");
    }

    #[test]
    fn keys_nodes_and_seqs_are_numbered_in_order() {
        let b = build(
            "h",
            rows("time,event,key,seq,node\n5,apply,b,30,c2\n6,apply,a,7,c1\n7,apply,b,10,c1\n"),
            WorkloadKind::State,
        )
        .unwrap();
        assert_eq!(b.keys, ["b", "a"]);
        assert_eq!(b.header.consumers, ["c2", "c1"]);
        let solo = build(
            "h",
            rows("time,event,key,seq\n5,apply,b,30\n"),
            WorkloadKind::State,
        );
        assert_eq!(solo.unwrap().header.consumers, ["-"]);
        // No produce rows: every message produced at the start, each key by its seqs.
        let produced: Vec<(u32, u32)> = b
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Produce { msg, .. } => Some((msg.key, msg.seq)),
                _ => None,
            })
            .collect();
        assert_eq!(produced, [(0, 0), (0, 1), (1, 0)]);
        let applies: Vec<(Time, u32, u32, u32)> = b
            .events
            .iter()
            .filter_map(|e| match *e {
                Event::Apply {
                    t, msg, consumer, ..
                } => Some((t, msg.key, msg.seq, consumer)),
                _ => None,
            })
            .collect();
        // Times from the first row; b seq 30 is b's second message.
        assert_eq!(applies, [(0, 0, 1, 0), (1000, 1, 0, 1), (2000, 0, 0, 1)]);
    }

    #[test]
    fn what_cannot_happen_is_refused_with_its_line() {
        let b = |text: &str| {
            build("h", rows(text), WorkloadKind::State)
                .err()
                .map(|e| e.to_string())
        };
        let e = b("time,event,key,seq,node\n5,apply,k,0,c\n4,apply,k,1,c\n").unwrap();
        assert!(
            e.starts_with("3: time went backwards for node \"c\": 4000 µs after 5000 µs on line 2"),
            "{e}"
        );
        // Another node may be behind.
        assert_eq!(
            b("time,event,key,seq,node\n5,apply,k,0,c\n4,apply,k,1,d\n"),
            None
        );
        let e = b("time,event,key,seq\n1,produce,k,0\n2,apply,k,1\n").unwrap();
        assert!(
            e.starts_with("3: apply of key \"k\" seq 1, which no produce row produced"),
            "{e}"
        );
        let e = b("time,event,key,seq\n1,produce,k,0\n2,produce,k,0\n").unwrap();
        assert!(
            e.starts_with("3: key \"k\" seq 0 produced again (first on line 2)"),
            "{e}"
        );
        let e = b("time,event,key,seq,node\n1,produce,k,5,p\n2,produce,k,3,q\n").unwrap();
        assert!(
            e.starts_with("3: key \"k\" seq 3 produced after seq 5 (line 2)"),
            "{e}"
        );
        let e = b("time,event,key,seq,node\n1,apply,k,0,c\n2,produce,k,0,p\n").unwrap();
        assert!(
            e.starts_with(
                "2: apply of key \"k\" seq 0 at 1000 µs, before its produce at 2000 µs on line 3"
            ),
            "{e}"
        );
        // The same instant: the produce comes first.
        assert_eq!(
            b("time,event,key,seq,node\n1,apply,k,0,c\n1,produce,k,0,p\n"),
            None
        );
    }
}
