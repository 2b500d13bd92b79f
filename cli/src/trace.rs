//! `sim trace` and the trace file format: the header line naming the nodes, the history's events,
//! and anomaly annotations beside them; reading a recorded history back; finding one key's story.
//!
//! A trace is JSON lines: first `{"type":"header",...}`, then history events (`"type"` one of the
//! event kinds), with `{"type":"anomaly",...}` lines after the event that revealed each anomaly
//! (final mismatches at the end). `docs/trace.md` describes it.

use crate::timeline::Story;
use crate::{prepare, repro_line, scenario_name, CliError, RunRequest};
use serde::{Deserialize, Serialize};
use sim::checkers::{Anomaly, AnomalyKind, Checkers, Notes};
use sim::faults::FaultKind;
use sim::history::{Event, Node, Observer};
use sim::scenario::{read_bounded, ReadError, WorkloadKind};
use sim::time::Time;
use sim::{FaultPlan, RunOptions, Scenario, Status};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest history file `--history` reads.
pub const MAX_HISTORY_BYTES: u64 = 512 << 20;

/// Longest event line of a recorded history (an event is a few hundred bytes): a single line of
/// 100 MB is refused before it is parsed into a JSON tree many times its size.
pub const MAX_HISTORY_LINE_BYTES: usize = 64 << 10;

/// Longest header line (it carries the scenario's description and names, each at most a
/// scenario file's size, escaped).
pub const MAX_HISTORY_HEADER_BYTES: usize = 8 * sim::scenario::MAX_FILE_BYTES as usize;

/// Most keys a recorded history may use: the checkers keep a few hundred bytes per key, so a
/// single line naming key 49,999,999 must not make them allocate gigabytes.
pub const MAX_HISTORY_KEYS: u32 = 1_000_000;

/// Events of the chosen key (plus node events) a story keeps: the page and the text stay readable.
pub const MAX_STORY_EVENTS: usize = 5000;

/// Anomalies of the chosen key a story lists.
pub const MAX_STORY_ANOMALIES: usize = 200;

/// The first line of a trace: what the indices in the events mean.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "header")]
pub struct TraceHeader {
    /// The scenario's name.
    pub scenario: String,
    /// The scenario's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The strategy that ran (absent for a history recorded elsewhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// The seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Number of keys (`[workload] keys`).
    pub keys: u32,
    /// `state` or `command`.
    pub kind: WorkloadKind,
    /// `[workload] group_size`: fixed-size correlation groups (absent: none), so that a replay of
    /// the history counts `incomplete_groups` as the run did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_size: Option<u32>,
    /// Broker names, by index.
    pub brokers: Vec<String>,
    /// Producer names, by index.
    pub producers: Vec<String>,
    /// Consumer names, by index; the network bridges follow (`count + peer`).
    pub consumers: Vec<String>,
    /// The run's resolved fault plan (absent in a history recorded elsewhere): `sim trace
    /// --history` shows the faults that touched the key's messages from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<TraceFault>,
}

/// One occurrence of the fault plan, as a trace header carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceFault {
    /// Its kind.
    pub kind: FaultKind,
    /// When it starts (microseconds).
    pub at: Time,
    /// When it ends (absent: an instant, or it never heals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
    /// The node it acts on (absent: no single node, e.g. every producer, or the target database).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Node>,
    /// One line for a reader (`consumer_pause consumer 1 for 45s`).
    pub what: String,
}

impl TraceFault {
    /// The plan's occurrences, in order.
    pub fn of_plan(sc: &Scenario, plan: &FaultPlan) -> Vec<TraceFault> {
        plan.faults
            .iter()
            .map(|p| {
                let line = p.describe(sc);
                // `describe` starts with "t=..."; the story prints its own time. Nodes by name.
                let mut what = line
                    .split_once(' ')
                    .map_or(line.clone(), |x| x.1.to_string());
                let node = p.action.node();
                match node {
                    Some(Node::Consumer(c)) => {
                        what = what.replacen(
                            &format!(" consumer {c}"),
                            &format!(" consumer {}", sc.consumer_name(c)),
                            1,
                        )
                    }
                    Some(Node::Producer(n)) => {
                        what = what.replacen(
                            &format!(" producer {n}"),
                            &format!(" producer {}", sc.producer_name(n)),
                            1,
                        )
                    }
                    _ => {}
                }
                TraceFault {
                    kind: p.action.kind(),
                    at: p.at,
                    until: p.duration.map(|d| p.at.saturating_add(d)),
                    node,
                    what: crate::escape_controls(&what, false),
                }
            })
            .collect()
    }

    /// Whether it acts on a message while the message is at `at`: on its own node; without one,
    /// on every producer (sends, clocks, poison are decided at production), every broker (a
    /// dead-letter replay), or anywhere (the target, the source, the cache, partitions).
    pub fn acts_at(&self, at: Node) -> bool {
        match self.node {
            Some(n) => n == at,
            None => match self.kind {
                FaultKind::Poison
                | FaultKind::SendError
                | FaultKind::SendTimeout
                | FaultKind::ClockSkew => matches!(at, Node::Producer(_)),
                FaultKind::DlqReplay | FaultKind::ResetGroups => matches!(at, Node::Broker(_)),
                _ => true,
            },
        }
    }

    /// The end of its window: its `until`, its start for an instant, else never.
    pub fn end(&self) -> Time {
        match self.until {
            Some(u) => u,
            None if self.kind.is_instant() => self.at,
            None => Time::MAX,
        }
    }
}

impl TraceHeader {
    /// The header of a run of `strategy` on `sc`.
    pub fn of(sc: &Scenario, file: &Path, strategy: Option<&str>, seed: Option<u64>) -> Self {
        // With more than one broker, consumer indices from `count` on are the network bridges.
        let bridges = if sc.brokers.len() > 1 {
            sc.brokers.len() as u32
        } else {
            0
        };
        TraceHeader {
            scenario: scenario_name(sc, file),
            description: sc.description.clone(),
            strategy: strategy.map(str::to_string),
            seed,
            keys: sc.workload.keys,
            kind: sc.workload.kind,
            group_size: sc.workload.group_size,
            brokers: sc.brokers.iter().map(|b| b.name.clone()).collect(),
            producers: (0..sc.producers.count)
                .map(|i| sc.producer_name(i))
                .collect(),
            consumers: (0..sc.consumers.count + bridges)
                .map(|i| sc.consumer_name(i))
                .collect(),
            faults: Vec::new(),
        }
    }

    /// The same header carrying the run's fault plan.
    pub fn with_faults(mut self, sc: &Scenario, plan: &FaultPlan) -> Self {
        self.faults = TraceFault::of_plan(sc, plan);
        self
    }

    /// A broker's name (its index if the header does not know it).
    pub fn broker(&self, i: u16) -> String {
        self.brokers
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| format!("broker{i}"))
    }

    /// A producer's name.
    pub fn producer(&self, i: u32) -> String {
        self.producers
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| format!("p{i}"))
    }

    /// A consumer's name.
    pub fn consumer(&self, i: u32) -> String {
        self.consumers
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| format!("c{i}"))
    }
}

/// The `--trace` observer: the header, every event, and the anomalies annotating checkers find.
/// The history lines are exactly what the engine emitted; annotations are separate lines.
pub struct TraceWriter<W: Write> {
    out: W,
    checkers: Checkers<Notes<Vec<Anomaly>>>,
    events: u64,
    last_t: Time,
    /// First write error (reported after the run).
    pub error: Option<std::io::Error>,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header at once.
    pub fn new(mut out: W, header: &TraceHeader) -> Self {
        let error = line(&mut out, header).err();
        TraceWriter {
            out,
            checkers: Checkers::with_sink(header.keys, header.kind, Vec::new())
                .grouped(header.group_size),
            events: 0,
            last_t: 0,
            error,
        }
    }

    fn annotations(&mut self) {
        for a in self.checkers.sink_mut().drain(..) {
            if self.error.is_none() {
                self.error = line(&mut self.out, &a).err();
            }
        }
    }

    /// Writes the anomalies found at the end and flushes.
    pub fn finish(self) -> std::io::Result<W> {
        let TraceWriter {
            mut out,
            checkers,
            events,
            last_t,
            error,
        } = self;
        if let Some(e) = error {
            return Err(e);
        }
        let (_, rest) = checkers.finish_into(events, last_t);
        for a in &rest {
            line(&mut out, a)?;
        }
        out.flush()?;
        Ok(out)
    }
}

impl<W: Write> Observer for TraceWriter<W> {
    fn event(&mut self, e: &Event) {
        if self.error.is_none() {
            self.error = line(&mut self.out, e).err();
        }
        self.events += 1;
        self.last_t = e.time();
        self.checkers.observe(e);
        if !self.checkers.sink_mut().is_empty() {
            self.annotations();
        }
    }
}

fn line(out: &mut impl Write, v: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    out.write_all(b"\n")
}

/// A recorded history: its header (if it had one) and its events.
pub struct History {
    /// The header line, if the file starts with one.
    pub header: Option<TraceHeader>,
    /// The events, in file order.
    pub events: Vec<Event>,
}

/// Reads a trace or a recorded history (JSON lines, see the module docs). Anomaly lines are
/// skipped (they are judged afresh); a bad line is an error naming its line number.
pub fn read_history(path: &Path) -> Result<History, CliError> {
    let (name, text) = read_history_text(path)?;
    parse_history(&name, &text)
}

/// A history file's name and text (at most [`MAX_HISTORY_BYTES`], UTF-8, a byte-order mark
/// dropped), or an error naming it.
pub fn read_history_text(path: &Path) -> Result<(String, String), CliError> {
    let name = path.display().to_string();
    let bytes = read_bounded(path, MAX_HISTORY_BYTES).map_err(|e| {
        CliError::Usage(match e {
            ReadError::TooLarge(l) => {
                format!("{name}: larger than the {l}-byte limit for histories")
            }
            e => format!("{name}: {e}"),
        })
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|e| CliError::Usage(format!("{name}: not UTF-8 text ({})", e.utf8_error())))?;
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    };
    Ok((name, text))
}

/// A warning when the history written at `path` is larger than `limit` (the
/// [`MAX_HISTORY_BYTES`] `sim trace --history` and `sim judge` read back): a 96 MB CSV judged
/// with `--out` wrote a 637 MB `history.jsonl` the documented next step then refused.
pub fn unreadable_history_warning(path: &Path, limit: u64) -> Option<String> {
    let len = std::fs::metadata(path).ok()?.len();
    (len > limit).then(|| {
        format!(
            "warning: {} is {len} bytes, more than the {limit} `sim trace --history` and `sim \
             judge` read back: the story of its first anomaly is the timeline.html beside it \
             (sim judge --out), or `sim trace FILE --strategy S` from the scenario (sim run \
             --trace)",
            path.display()
        )
    })
}

/// A history in the trace format: the header line, then one line per event.
pub fn history_jsonl(header: &TraceHeader, events: &[Event]) -> Vec<u8> {
    let mut out = serde_json::to_vec(header).expect("header serializes");
    out.push(b'\n');
    for e in events {
        serde_json::to_writer(&mut out, e).expect("events serialize");
        out.push(b'\n');
    }
    out
}

/// [`read_history`] on text.
pub fn parse_history(name: &str, text: &str) -> Result<History, CliError> {
    let mut header = None;
    let mut events = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let bad = |why: String| CliError::Usage(format!("{name}:{n}: {why}"));
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        // Before the first event a line may be the header; after it, only events and anomalies.
        let limit = if events.is_empty() {
            MAX_HISTORY_HEADER_BYTES
        } else {
            MAX_HISTORY_LINE_BYTES
        };
        if l.len() > limit {
            return Err(bad(format!(
                "a line of {} bytes; a history line is at most {limit} bytes",
                l.len()
            )));
        }
        // The first line not in this form is likely a history in another (a CSV, a log's JSON
        // lines): say which command reads those.
        let hint = if header.is_none() && events.is_empty() {
            "; this is the form `sim run --trace` writes (docs/trace.md): a CSV or JSON-lines \
             history of one row per event is read by `sim judge FILE`, whose --out DIR writes \
             DIR/history.jsonl in this form"
        } else {
            ""
        };
        let v: serde_json::Value =
            serde_json::from_str(l).map_err(|e| bad(format!("not JSON: {e}{hint}")))?;
        let ty = v
            .get("type")
            .and_then(|t| t.as_str())
            .ok_or_else(|| {
                bad(format!(
                    "no \"type\" field: every line is a header, an event or an anomaly{hint}"
                ))
            })?
            .to_string();
        match ty.as_str() {
            "header" => {
                if n != 1 && !events.is_empty() {
                    return Err(bad("the header must come first".into()));
                }
                let mut h: TraceHeader =
                    serde_json::from_value(v).map_err(|e| bad(format!("bad header: {e}")))?;
                // Every name is shown on a terminal, in the story's text and page: control
                // characters are escaped once, here, as the scenario loader does.
                let esc = |s: &mut String| *s = crate::escape_controls(s, false);
                esc(&mut h.scenario);
                if let Some(st) = h.strategy.as_mut() {
                    esc(st);
                }
                if let Some(d) = h.description.as_mut() {
                    *d = crate::escape_controls(d, true);
                }
                h.brokers
                    .iter_mut()
                    .chain(h.producers.iter_mut())
                    .chain(h.consumers.iter_mut())
                    .chain(h.faults.iter_mut().map(|f| &mut f.what))
                    .for_each(esc);
                if h.keys > MAX_HISTORY_KEYS {
                    return Err(bad(format!(
                        "keys: a history is judged with at most {MAX_HISTORY_KEYS} keys, got {}",
                        h.keys
                    )));
                }
                header = Some(h);
            }
            "anomaly" => {}
            _ => {
                let e: Event =
                    serde_json::from_value(v).map_err(|e| bad(format!("bad {ty:?} event: {e}")))?;
                if let Some(k) = event_key(&e) {
                    if k >= MAX_HISTORY_KEYS {
                        return Err(bad(format!(
                            "key {k}: a history is judged with at most {MAX_HISTORY_KEYS} keys"
                        )));
                    }
                }
                events.push(e);
            }
        }
    }
    Ok(History { header, events })
}

/// The key an event is about, if any.
pub fn event_key(e: &Event) -> Option<u32> {
    match *e {
        Event::SourceRead { key, .. } => Some(key),
        _ => e.msg().map(|m| m.key),
    }
}

/// Node events (crash, failover, suspension, reassignment, the drain): shown on every key's story.
pub fn is_node_event(e: &Event) -> bool {
    matches!(
        e,
        Event::Crash { .. }
            | Event::Recover { .. }
            | Event::Takeover { .. }
            | Event::Disconnect { .. }
            | Event::Connect { .. }
            | Event::Suspend { .. }
            | Event::Resume { .. }
            | Event::Reassign { .. }
            | Event::JobStart { .. }
            | Event::JobEnd { .. }
            | Event::DrainStart { .. }
    )
}

/// `sim trace`'s request.
pub struct TraceRequest {
    /// The scenario (unless `history`).
    pub file: Option<PathBuf>,
    /// A recorded history to judge instead of running a scenario.
    pub history: Option<PathBuf>,
    /// The strategy to run (required with a scenario).
    pub strategy: Option<String>,
    /// The key (default: the first aimed anomaly's).
    pub key: Option<u32>,
    /// The seed (default: the scenario's).
    pub seed: Option<u64>,
    /// Stop the run after this many engine events.
    pub max_events: Option<u64>,
    /// Which anomalies to aim at (`--anomaly`, `--from`, `--to`).
    pub aim: Aim,
    /// List the keys with aimed anomalies instead of telling one key's story (`--keys`).
    pub list_keys: bool,
}

/// What `sim trace` aims at: anomalies of one kind (or any), in a time window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aim {
    /// Only this kind (`--anomaly`).
    pub kind: Option<AnomalyKind>,
    /// From this time (`--from`), inclusive.
    pub from: Time,
    /// Up to this time (`--to`), inclusive.
    pub to: Time,
}

impl Default for Aim {
    fn default() -> Self {
        Aim {
            kind: None,
            from: 0,
            to: Time::MAX,
        }
    }
}

impl Aim {
    /// From the command line's `--anomaly`, `--from` and `--to` (durations as in scenario
    /// files: "30s", "1m 30s"); errors name the flag and what is allowed.
    pub fn parse(
        anomaly: Option<&str>,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Aim, CliError> {
        let kind = anomaly.map(parse_anomaly).transpose()?;
        let time = |flag: &str, v: Option<&str>, none: Time| match v {
            None => Ok(none),
            Some(v) => sim::time::Dur::parse(v)
                .map(|d| d.micros())
                .map_err(|e| CliError::Usage(format!("--{flag}: {e}"))),
        };
        let aim = Aim {
            kind,
            from: time("from", from, 0)?,
            to: time("to", to, Time::MAX)?,
        };
        if aim.from > aim.to {
            return Err(CliError::Usage(format!(
                "--from {} is after --to {}: the window would be empty",
                from.unwrap_or_default(),
                to.unwrap_or_default()
            )));
        }
        Ok(aim)
    }

    /// Whether `a` is aimed at.
    pub fn wants(&self, a: &Anomaly) -> bool {
        self.kind.is_none_or(|k| k == a.kind) && self.inside(a.t)
    }

    /// Whether `t` is in the window.
    pub fn inside(&self, t: Time) -> bool {
        self.from <= t && t <= self.to
    }

    /// "stale_writes from 30s to 1m" (what was aimed at, for messages).
    pub fn describe(&self) -> String {
        let kind = self.kind.map_or("anomaly", |k| k.figure());
        format!("{kind}{}", self.window_words())
    }

    /// " from 30s up to 1m", or nothing for the whole run.
    pub fn window_words(&self) -> String {
        let mut s = String::new();
        if self.from > 0 {
            let _ = std::fmt::Write::write_fmt(
                &mut s,
                format_args!(" from {}", sim::time::Dur(self.from).readable()),
            );
        }
        if self.to < Time::MAX {
            let _ = std::fmt::Write::write_fmt(
                &mut s,
                format_args!(" up to {}", sim::time::Dur(self.to).readable()),
            );
        }
        s
    }

    /// Whether anything narrows it.
    pub fn is_narrowed(&self) -> bool {
        *self != Aim::default()
    }
}

/// `--anomaly NAME`: a summary figure (`stale_writes`) or an annotation name (`stale_write`).
pub fn parse_anomaly(name: &str) -> Result<AnomalyKind, CliError> {
    AnomalyKind::from_name(name).ok_or_else(|| {
        let figures: Vec<&str> = AnomalyKind::ALL.iter().map(|k| k.figure()).collect();
        // Suggested by figure, the name the summary and the listing use.
        let names = figures.iter().copied();
        CliError::Usage(format!(
            "--anomaly {}: not an anomaly kind; kinds (the summary's figures): {}{}",
            crate::escape_controls(name, false),
            figures.join(", "),
            sim::suggest::did_you_mean(name, names)
        ))
    })
}

/// The anomalies of one key, by kind, and when its first came.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyCount {
    /// Counts in the order of [`AnomalyKind::ALL`].
    pub by_kind: [u64; 6],
    /// The first one's time.
    pub first: Time,
}

impl KeyCount {
    /// All kinds together.
    pub fn total(&self) -> u64 {
        self.by_kind.iter().sum()
    }
}

/// A reassign event told on a key's story: the keys whose messages went to the new owner at
/// the same instant (the event itself names no key), and how many such events it stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct ReassignNote {
    /// The keys, ascending (the traced key among them).
    pub keys: Vec<u32>,
    /// Reassign events of this broker and owner at this instant.
    pub events: u32,
}

/// Where the events come from.
enum Source {
    Run {
        sc: Box<Scenario>,
        plan: FaultPlan,
        opts: RunOptions,
        strategy: String,
        file: String,
    },
    History(Vec<Event>),
}

impl Source {
    /// Feeds every event to `f`, in order (a run is deterministic: every replay is the same).
    fn replay(&self, f: &mut dyn FnMut(&Event)) -> Result<(), CliError> {
        match self {
            Source::History(events) => {
                events.iter().for_each(f);
                Ok(())
            }
            Source::Run {
                sc,
                plan,
                opts,
                strategy,
                file,
            } => {
                let mut obs = |e: &Event| f(e);
                let s = strategies::run_named(strategy, sc, plan, opts, Some(&mut obs)).map_err(
                    |error| CliError::Run {
                        error,
                        repro: repro_line(file, opts.seed, Some(strategy)),
                    },
                )?;
                if s.status == Status::NotApplicable {
                    return Err(CliError::Usage(format!(
                        "{strategy} does not apply to this scenario: {}",
                        s.reason.unwrap_or_default()
                    )));
                }
                Ok(())
            }
        }
    }
}

/// Most seqs a fault of the story lists as touched.
const MAX_TOUCHED_SEQS: usize = 1000;

/// What one pass over the events found.
struct Scan {
    /// The first aimed anomaly (of the chosen key, if one was chosen).
    first: Option<Anomaly>,
    /// Anomalies of the whole run, by kind.
    counts: BTreeMap<AnomalyKind, u64>,
    /// Aimed anomalies by key.
    per_key: BTreeMap<u32, KeyCount>,
    /// Aimed anomalies of the chosen key (at most [`MAX_STORY_ANOMALIES`]).
    on_key: Vec<Anomaly>,
    /// The chosen key's events and node events, around the first anomaly.
    events: VecDeque<(Event, Option<ReassignNote>)>,
    after: usize,
    omitted_before: u64,
    omitted_after: u64,
    /// Reassign events not told (other keys').
    reassigns_omitted: u64,
    /// Where the chosen key's messages are: since when, and the message's seq.
    at: BTreeMap<Place, (Time, u32)>,
    /// For each fault of the header, the seqs of the key it touched.
    touched: Vec<BTreeSet<u32>>,
    /// Dispatches (broker, consumer, key) and reassigns of the current instant.
    instant: Time,
    dispatched: Vec<(u16, u32, u32)>,
    reassigns: Vec<Event>,
    /// A recorded history broke the checkers' rules (reported, not fatal).
    malformed: Option<String>,
    end: Time,
}

impl Scan {
    fn push(&mut self, aim: &Aim, e: Event, note: Option<ReassignNote>) {
        let t = e.time();
        if t < aim.from {
            self.omitted_before += 1;
        } else if t > aim.to {
            self.omitted_after += 1;
        } else if self.first.is_none() {
            // Before the anomaly, a sliding window; after it, at most half the story.
            self.events.push_back((e, note));
            if self.events.len() > MAX_STORY_EVENTS {
                self.events.pop_front();
                self.omitted_before += 1;
            }
        } else if self.after < MAX_STORY_EVENTS / 2 {
            self.events.push_back((e, note));
            self.after += 1;
        } else {
            self.omitted_after += 1;
        }
    }

    /// The instant is over: each owner change is told if a message of `key` went to the new
    /// owner at that instant (the event names no key: the dispatches beside it say which).
    fn flush_instant(&mut self, aim: &Aim, key: u32) {
        let reassigns = std::mem::take(&mut self.reassigns);
        let mut done: Vec<(u16, u32)> = Vec::new();
        for r in &reassigns {
            let Event::Reassign {
                broker, consumer, ..
            } = *r
            else {
                continue;
            };
            if done.contains(&(broker, consumer)) {
                continue;
            }
            done.push((broker, consumer));
            let events = reassigns
                .iter()
                .filter(|x| matches!(**x, Event::Reassign { broker: b, consumer: c, .. } if (b, c) == (broker, consumer)))
                .count() as u32;
            let keys: BTreeSet<u32> = self
                .dispatched
                .iter()
                .filter(|d| (d.0, d.1) == (broker, consumer))
                .map(|d| d.2)
                .collect();
            if keys.contains(&key) {
                let note = ReassignNote {
                    keys: keys.into_iter().collect(),
                    events,
                };
                self.push(aim, *r, Some(note));
                self.reassigns_omitted += u64::from(events - 1);
            } else {
                self.reassigns_omitted += u64::from(events);
            }
        }
        self.dispatched.clear();
    }

    /// Message `id` of the key was at `node` from `since` to `until`: every fault acting there
    /// meanwhile (inside the window) touched it.
    fn touch(&mut self, faults: &[TraceFault], aim: &Aim, at: (Node, Time, u32), until: Time) {
        let (node, since, seq) = at;
        let (lo, hi) = (since.max(aim.from), until.min(aim.to));
        if lo > hi {
            return;
        }
        for (f, seqs) in faults.iter().zip(self.touched.iter_mut()) {
            if f.at <= hi && f.end() >= lo && f.acts_at(node) && seqs.len() < MAX_TOUCHED_SEQS {
                seqs.insert(seq);
            }
        }
    }

    /// Follows the traced key's messages from node to node (a message may be at several at
    /// once: a broker keeps it until it is acknowledged, and a paused consumer keeps the copy it
    /// holds while the broker delivers it again elsewhere).
    fn follow(&mut self, faults: &[TraceFault], aim: &Aim, e: &Event) {
        let t = e.time();
        if let Event::Crash {
            node: Node::Consumer(c),
            ..
        } = *e
        {
            // What a crashed consumer held is gone from it.
            let held: Vec<Place> = self
                .at
                .keys()
                .filter(|p| (p.1, p.2) == (CONSUMER, c))
                .copied()
                .collect();
            for p in held {
                self.close(faults, aim, p, t);
            }
            return;
        }
        let Some(msg) = e.msg() else { return };
        let id = msg.id;
        let all = |s: &Scan, kind: Option<u8>| -> Vec<Place> {
            s.at.range((id, 0, 0)..=(id, u8::MAX, u32::MAX))
                .map(|(p, _)| *p)
                .filter(|p| kind.is_none_or(|k| p.1 == k))
                .collect()
        };
        let (open, close): (Option<Node>, Vec<Place>) = match *e {
            Event::Produce { producer, .. } | Event::SendFail { producer, .. } => {
                (Some(Node::Producer(producer)), vec![])
            }
            Event::Enqueue { broker, .. } | Event::Resend { broker, .. } => {
                (Some(Node::Broker(broker)), all(self, Some(PRODUCER)))
            }
            Event::Replay { broker, .. } => (Some(Node::Broker(broker)), vec![]),
            Event::Forward { from, .. } => (None, vec![(id, BROKER, u32::from(from))]),
            Event::Dispatch { consumer, .. }
            | Event::Start { consumer, .. }
            | Event::Apply { consumer, .. }
            | Event::Reject { consumer, .. } => (Some(Node::Consumer(consumer)), vec![]),
            Event::Ack { consumer, .. } => {
                let mut v = all(self, Some(BROKER));
                v.push((id, CONSUMER, consumer));
                (None, v)
            }
            Event::Rollback { consumer, .. } | Event::AckFail { consumer, .. } => {
                (None, vec![(id, CONSUMER, consumer)])
            }
            Event::DeadLetter { .. } | Event::Drop { .. } | Event::Discard { .. } => {
                (None, all(self, None))
            }
            // Given up by its producer: it leaves the producer (a resend stays there).
            Event::DeliveryTimeout { resent: false, .. } => (None, all(self, Some(PRODUCER))),
            _ => (None, vec![]),
        };
        for p in close {
            self.close(faults, aim, p, t);
        }
        if let Some(n) = open {
            let (k, i) = place(n);
            self.at.entry((id, k, i)).or_insert((t, msg.seq));
        }
    }

    /// The message left a place at `until`: every fault acting there meanwhile touched it.
    fn close(&mut self, faults: &[TraceFault], aim: &Aim, p: Place, until: Time) {
        if let Some((since, seq)) = self.at.remove(&p) {
            self.touch(faults, aim, (unplace(p.1, p.2), since, seq), until);
        }
    }
}

/// A message's place: (message id, node kind, node index).
type Place = (u64, u8, u32);
const PRODUCER: u8 = 0;
const BROKER: u8 = 1;
const CONSUMER: u8 = 2;

fn place(n: Node) -> (u8, u32) {
    match n {
        Node::Producer(p) => (PRODUCER, p),
        Node::Broker(b) => (BROKER, u32::from(b)),
        Node::Consumer(c) => (CONSUMER, c),
        // Messages are never at a database or the cache.
        _ => (u8::MAX, 0),
    }
}

fn unplace(kind: u8, i: u32) -> Node {
    match kind {
        PRODUCER => Node::Producer(i),
        BROKER => Node::Broker(i as u16),
        _ => Node::Consumer(i),
    }
}

fn scan(src: &Source, header: &TraceHeader, key: Option<u32>, aim: &Aim) -> Result<Scan, CliError> {
    let mut ch =
        Checkers::with_sink(header.keys, header.kind, Vec::new()).grouped(header.group_size);
    let faults = &header.faults;
    let mut s = Scan {
        first: None,
        counts: BTreeMap::new(),
        per_key: BTreeMap::new(),
        on_key: Vec::new(),
        events: VecDeque::new(),
        after: 0,
        omitted_before: 0,
        omitted_after: 0,
        reassigns_omitted: 0,
        at: BTreeMap::new(),
        touched: vec![BTreeSet::new(); if key.is_some() { faults.len() } else { 0 }],
        instant: 0,
        dispatched: Vec::new(),
        reassigns: Vec::new(),
        malformed: None,
        end: 0,
    };
    let mut n = 0u64;
    let take = |s: &mut Scan, found: Vec<Anomaly>| {
        for a in found {
            *s.counts.entry(a.kind).or_default() += 1;
            if !aim.wants(&a) {
                continue;
            }
            let c = s.per_key.entry(a.key).or_insert_with(|| KeyCount {
                first: a.t,
                ..KeyCount::default()
            });
            if let Some(i) = AnomalyKind::ALL.iter().position(|k| *k == a.kind) {
                c.by_kind[i] += 1;
            }
            if key.is_none_or(|k| k == a.key) {
                if key.is_some() && s.on_key.len() < MAX_STORY_ANOMALIES {
                    s.on_key.push(a.clone());
                }
                if s.first.is_none() {
                    s.first = Some(a);
                }
            }
        }
    };
    src.replay(&mut |e: &Event| {
        n += 1;
        s.end = e.time();
        if let Some(k) = key {
            if e.time() != s.instant {
                s.flush_instant(aim, k);
                s.instant = e.time();
            }
            match *e {
                Event::Dispatch {
                    broker,
                    consumer,
                    msg,
                    ..
                } => s.dispatched.push((broker, consumer, msg.key)),
                Event::Reassign { .. } => s.reassigns.push(*e),
                _ => {}
            }
            // The key's events and the node events; reassigns wait for the instant's end.
            if event_key(e) == Some(k) || (is_node_event(e) && !matches!(e, Event::Reassign { .. }))
            {
                s.follow(faults, aim, e);
                s.push(aim, *e, None);
            }
        }
        ch.observe(e);
        if !ch.sink_mut().is_empty() {
            let found = std::mem::take(ch.sink_mut());
            take(&mut s, found);
        }
    })?;
    if let Some(k) = key {
        s.flush_instant(aim, k);
        let end = s.end;
        for p in s.at.keys().copied().collect::<Vec<_>>() {
            s.close(faults, aim, p, end);
        }
    }
    let (r, rest) = ch.finish_into(n, s.end);
    take(&mut s, rest);
    if let Err(e) = r {
        s.malformed = Some(e.to_string());
    }
    while s.events.len() > MAX_STORY_EVENTS {
        s.events.pop_front();
        s.omitted_before += 1;
    }
    Ok(s)
}

/// Runs (or reads) once to find the anomaly, once more to tell its key's story.
pub fn trace(req: &TraceRequest) -> Result<Story, CliError> {
    let (src, header, source_line) = match (&req.file, &req.history) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(
                "give a scenario FILE or --history FILE, not both".into(),
            ))
        }
        (None, None) => {
            return Err(CliError::Usage(
                "give a scenario FILE (with --strategy) or --history FILE".into(),
            ))
        }
        (None, Some(h)) => {
            if req.strategy.is_some() || req.seed.is_some() {
                return Err(CliError::Usage(
                    "--strategy and --seed choose a run of a scenario; a --history is already one"
                        .into(),
                ));
            }
            let hist = read_history(h)?;
            // An empty file (or a header alone) is no run: `sim run --trace` writes every
            // connection at least. It read "no anomaly in this run" (exit 1), as a clean run.
            if hist.events.is_empty() {
                return Err(CliError::Usage(format!(
                    "{}: no events: a history has a line per event (docs/trace.md)",
                    h.display()
                )));
            }
            let header = hist.header.clone().unwrap_or_else(|| {
                let keys = hist
                    .events
                    .iter()
                    .filter_map(event_key)
                    .max()
                    .map_or(0, |k| k + 1);
                TraceHeader {
                    scenario: h.display().to_string(),
                    description: None,
                    strategy: None,
                    seed: None,
                    keys,
                    kind: WorkloadKind::State,
                    group_size: None,
                    brokers: vec![],
                    producers: vec![],
                    consumers: vec![],
                    faults: vec![],
                }
            });
            let line = format!("history {}", h.display());
            (Source::History(hist.events), header, line)
        }
        (Some(file), None) => {
            let Some(strategy) = req.strategy.clone() else {
                return Err(CliError::Usage(
                    "--strategy S: a trace follows one strategy's run".into(),
                ));
            };
            let sc = crate::load(file)?;
            let p = prepare(
                &sc,
                &RunRequest {
                    seed: req.seed,
                    strategies: vec![strategy.clone()],
                    max_events: req.max_events,
                    max_sim_time: None,
                    progress: false,
                },
            )?;
            let header =
                TraceHeader::of(&sc, file, Some(&strategy), Some(p.seed)).with_faults(&sc, &p.plan);
            let file_str = file.display().to_string();
            let line = repro_line(&file_str, p.seed, Some(&strategy));
            let src = Source::Run {
                sc: Box::new(sc),
                plan: p.plan,
                opts: p.opts,
                strategy,
                file: file_str,
            };
            (src, header, line)
        }
    };
    tell(&src, header, source_line, req)
}

/// The story of a recorded history held in memory (`sim judge --out`): the first anomaly's key,
/// as `sim trace --history` tells it. `source` names where the history came from.
pub fn story_of(
    header: TraceHeader,
    events: Vec<Event>,
    source: String,
) -> Result<Story, CliError> {
    let req = TraceRequest {
        file: None,
        history: None,
        strategy: None,
        key: None,
        seed: None,
        max_events: None,
        aim: Aim::default(),
        list_keys: false,
    };
    tell(&Source::History(events), header, source, &req)
}

/// Finds the aimed anomaly in `src` and tells its key's story (or lists the keys).
fn tell(
    src: &Source,
    header: TraceHeader,
    source_line: String,
    req: &TraceRequest,
) -> Result<Story, CliError> {
    if let Some(k) = req.key {
        if k >= header.keys {
            return Err(CliError::Usage(format!(
                "--key {k}: the {} has keys 0..{}",
                if req.history.is_some() {
                    "history"
                } else {
                    "scenario"
                },
                header.keys
            )));
        }
        if req.list_keys {
            return Err(CliError::Usage(
                "--keys lists every key with anomalies; --key tells one key's story: give one"
                    .into(),
            ));
        }
    }
    let aim = req.aim;
    let mut story = Story {
        header,
        source: source_line,
        key: 0,
        key_chosen: req.key.is_some(),
        aim,
        list_keys: req.list_keys,
        anomaly: None,
        on_key: vec![],
        counts: BTreeMap::new(),
        per_key: BTreeMap::new(),
        events: vec![],
        notes: BTreeMap::new(),
        faults: vec![],
        omitted_before: 0,
        omitted_after: 0,
        reassigns_omitted: 0,
        malformed: None,
        end: 0,
    };
    let key = match req.key {
        Some(k) => k,
        None => {
            let first = scan(src, &story.header, None, &aim)?;
            story.counts = first.counts;
            story.per_key = first.per_key;
            story.malformed = first.malformed;
            story.end = first.end;
            match &first.first {
                Some(a) if !req.list_keys => a.key,
                // A listing, or nothing to tell (the caller exits 1).
                _ => return Ok(story),
            }
        }
    };
    let scan = scan(src, &story.header, Some(key), &aim)?;
    let (events, notes): (Vec<Event>, Vec<Option<ReassignNote>>) = scan.events.into_iter().unzip();
    story.notes = notes
        .into_iter()
        .enumerate()
        .filter_map(|(i, n)| n.map(|n| (i, n)))
        .collect();
    story.faults = story
        .header
        .faults
        .iter()
        .zip(scan.touched)
        .filter(|(_, seqs)| !seqs.is_empty())
        .map(|(f, seqs)| (f.clone(), seqs.into_iter().collect()))
        .collect();
    story.key = key;
    story.anomaly = scan.first;
    story.on_key = scan.on_key;
    story.counts = scan.counts;
    if req.key.is_some() {
        story.per_key = scan.per_key;
    }
    story.events = events;
    story.omitted_before = scan.omitted_before;
    story.omitted_after = scan.omitted_after;
    story.reassigns_omitted = scan.reassigns_omitted;
    story.malformed = scan.malformed;
    story.end = scan.end;
    Ok(story)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A history larger than what is read back is warned about, naming both sizes; one that fits
    /// (or is missing) is not.
    #[test]
    fn a_history_too_large_to_read_back_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("history.jsonl");
        std::fs::write(&p, vec![b'x'; 100]).unwrap();
        let w = unreadable_history_warning(&p, 99).expect("100 bytes > 99");
        assert!(
            w.starts_with("warning: ") && w.contains("is 100 bytes, more than the 99"),
            "{w}"
        );
        assert_eq!(unreadable_history_warning(&p, 100), None);
        assert_eq!(
            unreadable_history_warning(&dir.path().join("none"), 0),
            None
        );
    }
}
