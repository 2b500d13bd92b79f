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
use sim::history::{Event, Observer};
use sim::scenario::{read_bounded, ReadError, WorkloadKind};
use sim::time::Time;
use sim::{FaultPlan, RunOptions, Scenario, Status};
use std::collections::{BTreeMap, VecDeque};
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
    /// Broker names, by index.
    pub brokers: Vec<String>,
    /// Producer names, by index.
    pub producers: Vec<String>,
    /// Consumer names, by index; the network bridges follow (`count + peer`).
    pub consumers: Vec<String>,
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
            brokers: sc.brokers.iter().map(|b| b.name.clone()).collect(),
            producers: (0..sc.producers.count)
                .map(|i| sc.producer_name(i))
                .collect(),
            consumers: (0..sc.consumers.count + bridges)
                .map(|i| sc.consumer_name(i))
                .collect(),
        }
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
            checkers: Checkers::with_sink(header.keys, header.kind, Vec::new()),
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
    let name = path.display().to_string();
    let bytes = read_bounded(path, MAX_HISTORY_BYTES).map_err(|e| {
        CliError::Usage(match e {
            ReadError::TooLarge(l) => {
                format!("{name}: larger than the {l}-byte limit for histories")
            }
            e => format!("{name}: {e}"),
        })
    })?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| CliError::Usage(format!("{name}: not UTF-8 text ({e})")))?;
    parse_history(&name, text)
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
        let v: serde_json::Value =
            serde_json::from_str(l).map_err(|e| bad(format!("not JSON: {e}")))?;
        let ty = v
            .get("type")
            .and_then(|t| t.as_str())
            .ok_or_else(|| {
                bad("no \"type\" field: every line is a header, an event or an anomaly".into())
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
    /// The key (default: the first anomaly's).
    pub key: Option<u32>,
    /// The seed (default: the scenario's).
    pub seed: Option<u64>,
    /// Stop the run after this many engine events.
    pub max_events: Option<u64>,
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

/// What one pass over the events found.
struct Scan {
    /// The first anomaly (of the chosen key, if one was chosen).
    first: Option<Anomaly>,
    /// Anomalies of the whole run, by kind.
    counts: BTreeMap<AnomalyKind, u64>,
    /// Anomalies of the chosen key (at most [`MAX_STORY_ANOMALIES`]).
    on_key: Vec<Anomaly>,
    /// The chosen key's events and node events, around the first anomaly.
    events: VecDeque<Event>,
    omitted_before: u64,
    omitted_after: u64,
    /// A recorded history broke the checkers' rules (reported, not fatal).
    malformed: Option<String>,
    end: Time,
}

fn scan(src: &Source, keys: u32, kind: WorkloadKind, key: Option<u32>) -> Result<Scan, CliError> {
    let mut ch = Checkers::with_sink(keys, kind, Vec::new());
    let mut s = Scan {
        first: None,
        counts: BTreeMap::new(),
        on_key: Vec::new(),
        events: VecDeque::new(),
        omitted_before: 0,
        omitted_after: 0,
        malformed: None,
        end: 0,
    };
    let mut n = 0u64;
    // Events kept after the first anomaly, at most half the story; before it, a sliding window.
    let mut after = 0usize;
    let take = |s: &mut Scan, found: Vec<Anomaly>| {
        for a in found {
            *s.counts.entry(a.kind).or_default() += 1;
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
            if event_key(e) == Some(k) || is_node_event(e) {
                if s.first.is_none() {
                    s.events.push_back(*e);
                    if s.events.len() > MAX_STORY_EVENTS {
                        s.events.pop_front();
                        s.omitted_before += 1;
                    }
                } else if after < MAX_STORY_EVENTS / 2 {
                    s.events.push_back(*e);
                    after += 1;
                } else {
                    s.omitted_after += 1;
                }
            }
        }
        ch.observe(e);
        if !ch.sink_mut().is_empty() {
            let found = std::mem::take(ch.sink_mut());
            take(&mut s, found);
        }
    })?;
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
                    brokers: vec![],
                    producers: vec![],
                    consumers: vec![],
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
            let header = TraceHeader::of(&sc, file, Some(&strategy), Some(p.seed));
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
    }
    let key = match req.key {
        Some(k) => k,
        None => {
            let first = scan(&src, header.keys, header.kind, None)?;
            match &first.first {
                Some(a) => a.key,
                // No anomaly anywhere and no key asked for: nothing to tell (the caller exits 1).
                None => {
                    return Ok(Story {
                        header,
                        source: source_line,
                        key: 0,
                        key_chosen: false,
                        anomaly: None,
                        on_key: vec![],
                        counts: first.counts,
                        events: vec![],
                        omitted_before: 0,
                        omitted_after: 0,
                        malformed: first.malformed,
                        end: first.end,
                    })
                }
            }
        }
    };
    let scan = scan(&src, header.keys, header.kind, Some(key))?;
    Ok(Story {
        header,
        source: source_line,
        key,
        key_chosen: req.key.is_some(),
        anomaly: scan.first,
        on_key: scan.on_key,
        counts: scan.counts,
        events: scan.events.into(),
        omitted_before: scan.omitted_before,
        omitted_after: scan.omitted_after,
        malformed: scan.malformed,
        end: scan.end,
    })
}
