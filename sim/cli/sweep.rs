//! `sim sweep` and `sim merge`: a grid of parameter values x seeds x strategies, run in parallel,
//! journaled so an interrupted sweep resumes, sliceable into shards whose merge gives the same bytes
//! as one unsharded run.
//!
//! Every run is a *unit* with a global index: units are numbered point-major (the first `--set`
//! varies slowest), then seed, then strategy. All outputs are ordered by that index, never by
//! completion order, which is why `--jobs`, `--shard` and `--resume` cannot change a byte.

use crate::charts::{self, Line, Point, SweepPanel, XAxis};
use crate::report::{markdown_table, metric_columns, strategy_cells};
use crate::{create_dir, load_text, write_atomic, write_figure, CliError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sim::expect::SeedRange;
use sim::history::NoObserver;
use sim::summary::Metrics;
use sim::{FaultPlan, RunOptions, Scenario};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The journal of finished runs, appended as they complete (any order); `--resume` reads it.
pub const JOURNAL: &str = "runs.partial.csv";
/// One row per run, ordered by run index.
pub const RUNS: &str = "runs.csv";
/// Per point, strategy and metric: mean, min, max and a 95% interval across seeds.
pub const AGGREGATE: &str = "aggregate.csv";
/// What was swept (and which shard): lets `merge` and `--resume` check they combine like with like.
pub const MANIFEST: &str = "sweep.json";
/// Most runs one sweep may ask for.
pub const MAX_RUNS: u64 = 10_000_000;
/// Most grid points (each holds a loaded scenario while the sweep runs).
pub const MAX_POINTS: u64 = 100_000;

/// One swept parameter: a dotted path into the scenario file and its values as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// e.g. `consumers.count`, `fault.0.rate`, `strategy.resequencer.timeout`.
    pub path: String,
    /// Each value as TOML (`8`, `true`, `"5s"`) or bare text taken as a string (`5s`, `150/s`).
    pub values: Vec<String>,
}

impl Param {
    /// Parses `path=v1,v2,...`.
    pub fn parse(arg: &str) -> Result<Param, CliError> {
        let usage = |why: &str| {
            CliError::Usage(format!(
                "--set {arg:?}: {why} (write PATH=V1,V2,..., e.g. consumers.count=1,2,4,8)"
            ))
        };
        let (path, values) = arg.split_once('=').ok_or_else(|| usage("no '='"))?;
        let path = path.trim();
        if path.is_empty() || path.split('.').any(|s| s.trim().is_empty()) {
            return Err(usage("empty path or path segment"));
        }
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(|v| v.is_empty()) {
            return Err(usage("empty value"));
        }
        Ok(Param {
            path: path.to_string(),
            values,
        })
    }
}

/// A slice of the grid: runs whose index is `index - 1` modulo `count` (1-based, `I/N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1..=count.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl Shard {
    /// Parses `I/N` with 1 <= I <= N.
    pub fn parse(arg: &str) -> Result<Shard, CliError> {
        let bad = || {
            CliError::Usage(format!(
                "--shard {arg:?}: write I/N with 1 <= I <= N, e.g. 1/4 for the first of four shards"
            ))
        };
        let (i, n) = arg.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    fn owns(&self, run: u64) -> bool {
        run % self.count == self.index - 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a sweep (or one shard of it) covers; written as `sweep.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The scenario's name.
    pub scenario: String,
    /// The scenario file as given on the command line.
    pub file: String,
    /// FNV-1a of the scenario file's bytes: a changed file must not be resumed or merged.
    pub file_hash: String,
    /// First seed.
    pub seed_first: u64,
    /// Last seed (included).
    pub seed_last: u64,
    /// Swept parameters, in command-line order.
    pub params: Vec<Param>,
    /// Strategies, in run order.
    pub strategies: Vec<String>,
    /// Whether they were chosen with `--strategy` (otherwise they are the scenario's list).
    pub strategies_chosen: bool,
    /// Runs in the whole grid.
    pub runs: u64,
    /// `--max-events`, if given (it changes results).
    pub max_events: Option<u64>,
    /// This directory's slice, if sharded.
    pub shard: Option<Shard>,
}

impl Manifest {
    fn seeds(&self) -> u64 {
        self.seed_last - self.seed_first + 1
    }

    fn points(&self) -> u64 {
        self.params.iter().map(|p| p.values.len() as u64).product()
    }

    /// The (point, seed, strategy) of a run index.
    fn unit(&self, run: u64) -> (u64, u64, usize) {
        let ns = self.strategies.len() as u64;
        let strategy = (run % ns) as usize;
        let seed = self.seed_first + (run / ns) % self.seeds();
        let point = run / ns / self.seeds();
        (point, seed, strategy)
    }

    /// The value index of each parameter at a point (the first parameter varies slowest).
    fn point_values(&self, point: u64) -> Vec<usize> {
        let mut idx = vec![0; self.params.len()];
        let mut rest = point;
        for (i, p) in self.params.iter().enumerate().rev() {
            let k = p.values.len() as u64;
            idx[i] = (rest % k) as usize;
            rest /= k;
        }
        idx
    }

    /// The command that runs this sweep (or shard).
    pub fn command(&self) -> String {
        let mut s = format!(
            "sim sweep {} --seeds {}..{}",
            self.file, self.seed_first, self.seed_last
        );
        for p in &self.params {
            s.push_str(&format!(" --set {}={}", p.path, p.values.join(",")));
        }
        if self.strategies_chosen {
            for st in &self.strategies {
                s.push_str(&format!(" --strategy {st}"));
            }
        }
        if let Some(m) = self.max_events {
            s.push_str(&format!(" --max-events {m}"));
        }
        if let Some(sh) = self.shard {
            s.push_str(&format!(" --shard {sh}"));
        }
        s
    }

    /// The column of `status` in runs.csv.
    fn status_col(&self) -> usize {
        3 + self.params.len()
    }

    fn header(&self) -> Vec<String> {
        let mut h = vec!["run".to_string()];
        h.extend(self.params.iter().map(|p| p.path.clone()));
        h.extend(["seed", "strategy"].map(String::from));
        h.extend(["status", "reason"].map(String::from));
        h.extend(metric_columns());
        h
    }
}

fn fnv1a(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// A sweep request from the command line.
#[derive(Clone, Debug)]
pub struct SweepRequest {
    /// The scenario file.
    pub file: PathBuf,
    /// `A..B`.
    pub seeds: String,
    /// `--set` arguments.
    pub sets: Vec<String>,
    /// `--strategy` (default: the scenario's list).
    pub strategies: Vec<String>,
    /// Parallel runs.
    pub jobs: usize,
    /// Output directory.
    pub out: PathBuf,
    /// `--shard I/N`.
    pub shard: Option<String>,
    /// Continue an interrupted sweep in `out`.
    pub resume: bool,
    /// Overrides `[run] max_events` of every run.
    pub max_events: Option<u64>,
    /// Draw a progress bar (on a terminal, outside CI).
    pub progress: bool,
}

/// What a sweep did.
#[derive(Debug)]
pub struct SweepOutcome {
    /// Runs in this sweep's slice.
    pub runs: u64,
    /// Runs executed now (the rest came from the journal).
    pub executed: u64,
    /// Files written (under `out`).
    pub files: Vec<String>,
}

/// Set by Ctrl-C: workers start no new run, finished runs stay in the journal.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Installs the Ctrl-C handler once per process (a second install is refused by ctrlc; ignore it).
fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    });
}

/// Sets `path` in a TOML document to `raw` (parsed as a TOML value, else taken as a string).
/// Integer segments index arrays (`fault.0.at`, `broker.1.persistent`); missing tables are created.
pub fn set_path(doc: &mut toml_edit::DocumentMut, path: &str, raw: &str) -> Result<(), String> {
    let value: toml_edit::Value = raw
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(raw));
    let segs: Vec<&str> = path.split('.').map(str::trim).collect();
    set_in_table(doc.as_table_mut(), &segs, value)
}

fn set_in_table(
    table: &mut dyn toml_edit::TableLike,
    segs: &[&str],
    value: toml_edit::Value,
) -> Result<(), String> {
    let (seg, rest) = segs.split_first().ok_or("empty path")?;
    if rest.is_empty() {
        table.insert(seg, toml_edit::Item::Value(value));
        return Ok(());
    }
    if table.get(seg).is_none() {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        table.insert(seg, toml_edit::Item::Table(t));
    }
    let item = table.get_mut(seg).ok_or("table vanished")?;
    set_in_item(item, seg, rest, value)
}

fn set_in_item(
    item: &mut toml_edit::Item,
    name: &str,
    segs: &[&str],
    value: toml_edit::Value,
) -> Result<(), String> {
    let index = |seg: &str, len: usize| -> Result<usize, String> {
        let i: usize = seg
            .parse()
            .map_err(|_| format!("{name} is an array: expected an index after it, not {seg:?}"))?;
        if i < len {
            Ok(i)
        } else {
            Err(format!(
                "{name} has {len} entries: index {i} does not exist"
            ))
        }
    };
    match item {
        toml_edit::Item::Table(t) => set_in_table(t, segs, value),
        toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => set_in_table(t, segs, value),
        toml_edit::Item::ArrayOfTables(a) => {
            let i = index(segs[0], a.len())?;
            if segs.len() == 1 {
                return Err(format!(
                    "{name}.{i} is a whole table: name one of its fields"
                ));
            }
            let t = a.get_mut(i).ok_or("index checked")?;
            set_in_table(t, &segs[1..], value)
        }
        toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
            let i = index(segs[0], a.len())?;
            if segs.len() > 1 {
                return Err(format!("{name}.{i} is an array element: it has no fields"));
            }
            a.replace(i, value);
            Ok(())
        }
        _ => Err(format!(
            "{name} is a value, not a table: it has no field {:?}",
            segs[0]
        )),
    }
}

/// Loads the scenario, parses the request and builds the scenario of every grid point, so a bad
/// value fails before anything runs.
pub fn plan(req: &SweepRequest) -> Result<(Manifest, Vec<Scenario>), CliError> {
    let base = crate::load(&req.file)?;
    let text = std::fs::read_to_string(&req.file)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", req.file.display())))?;
    let seeds =
        SeedRange::parse(&req.seeds).map_err(|e| CliError::Usage(format!("--seeds: {e}")))?;
    let params = req
        .sets
        .iter()
        .map(|s| Param::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.path == p.path) {
            return Err(CliError::Usage(format!("--set {}: set twice", p.path)));
        }
    }
    let strategies = if req.strategies.is_empty() {
        base.strategies.clone()
    } else {
        req.strategies.clone()
    };
    crate::check_strategy_names(&strategies)?;
    let points: u64 = params
        .iter()
        .try_fold(1u64, |acc, p| acc.checked_mul(p.values.len() as u64))
        .unwrap_or(u64::MAX);
    let runs = points
        .saturating_mul(seeds.last - seeds.first + 1)
        .saturating_mul(strategies.len() as u64);
    if points > MAX_POINTS {
        return Err(CliError::Usage(format!(
            "the --set values make {points} grid points; at most {MAX_POINTS} are allowed: split the sweep"
        )));
    }
    if runs > MAX_RUNS {
        return Err(CliError::Usage(format!(
            "the sweep has {runs} runs (points x seeds x strategies); at most {MAX_RUNS} are allowed: split it"
        )));
    }
    let manifest = Manifest {
        scenario: crate::scenario_name(&base, &req.file),
        file: req.file.display().to_string(),
        file_hash: fnv1a(text.as_bytes()),
        seed_first: seeds.first,
        seed_last: seeds.last,
        params,
        strategies,
        strategies_chosen: !req.strategies.is_empty(),
        runs,
        max_events: req.max_events,
        shard: None,
    };
    let doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| CliError::Usage(format!("{}: {e}", req.file.display())))?;
    let mut scenarios = Vec::with_capacity(points as usize);
    for point in 0..points {
        let mut d = doc.clone();
        let vals = manifest.point_values(point);
        let mut assigned = Vec::new();
        for (p, &vi) in manifest.params.iter().zip(&vals) {
            let v = &p.values[vi];
            assigned.push(format!("{}={v}", p.path));
            set_path(&mut d, &p.path, v)
                .map_err(|e| CliError::Usage(format!("--set {}={v}: {e}", p.path)))?;
        }
        let sc = load_text(&manifest.file, &d.to_string()).map_err(|e| {
            CliError::Usage(format!("with --set {}:\n{e}", assigned.join(" --set ")))
        })?;
        scenarios.push(sc);
    }
    Ok((manifest, scenarios))
}

/// Runs one unit; returns its CSV row.
fn run_unit(m: &Manifest, scenarios: &[Scenario], run: u64) -> Result<Vec<String>, CliError> {
    let (point, seed, si) = m.unit(run);
    let sc = &scenarios[point as usize];
    let name = &m.strategies[si];
    let plan = FaultPlan::resolve(sc, seed);
    let opts = RunOptions {
        seed,
        max_events: m.max_events,
        max_sim_time: None,
    };
    let vals = m.point_values(point);
    let st = strategies::run_named(name, sc, &plan, &opts, &mut NoObserver).map_err(|error| {
        let mut one = m.clone();
        one.seed_first = seed;
        one.seed_last = seed;
        one.strategies = vec![name.clone()];
        one.strategies_chosen = true;
        one.shard = None;
        for (p, &vi) in one.params.iter_mut().zip(&vals) {
            p.values = vec![p.values[vi].clone()];
        }
        CliError::Run {
            error,
            repro: one.command(),
        }
    })?;
    let mut row = vec![run.to_string()];
    row.extend(
        m.params
            .iter()
            .zip(&vals)
            .map(|(p, &vi)| p.values[vi].clone()),
    );
    row.push(seed.to_string());
    row.push(name.clone());
    row.extend(strategy_cells(&st));
    Ok(row)
}

fn csv_line(row: &[String]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing strings into memory cannot fail.
    w.write_record(row).expect("csv into memory");
    w.into_inner().expect("csv into memory")
}

fn csv_text(header: &[String], rows: &[Vec<String>]) -> Vec<u8> {
    let mut out = csv_line(header);
    for r in rows {
        out.extend(csv_line(r));
    }
    out
}

const MANIFEST_LINE: &str = "#manifest ";

/// Reads a journal: its manifest and the complete rows (a torn last line is dropped).
/// A journal's manifest and rows.
type Journal = (Manifest, Vec<Vec<String>>);

fn read_journal(path: &Path) -> Result<Option<Journal>, CliError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CliError::Output {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
        }
    };
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let complete = &bytes[..end];
    let first_nl = complete.iter().position(|&b| b == b'\n');
    let Some(first_nl) = first_nl else {
        return Ok(None);
    };
    let first = String::from_utf8_lossy(&complete[..first_nl]);
    let Some(json) = first.strip_prefix(MANIFEST_LINE) else {
        return Ok(None);
    };
    let Ok(manifest) = serde_json::from_str::<Manifest>(json) else {
        return Ok(None);
    };
    let rows = parse_rows(&manifest, &complete[first_nl + 1..]);
    Ok(Some((manifest, rows)))
}

/// Parses a runs CSV (header first), keeping well-formed rows of this manifest's runs.
fn parse_rows(m: &Manifest, csv_bytes: &[u8]) -> Vec<Vec<String>> {
    let header = m.header();
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv_bytes);
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let Ok(rec) = rec else { continue };
        let row: Vec<String> = rec.iter().map(String::from).collect();
        if i == 0 || row.len() != header.len() {
            continue;
        }
        match row[0].parse::<u64>() {
            Ok(run) if run < m.runs && m.shard.is_none_or(|s| s.owns(run)) => rows.push(row),
            _ => {}
        }
    }
    rows
}

/// Runs (or resumes) a sweep; writes the outputs under `req.out`.
pub fn sweep(req: &SweepRequest) -> Result<SweepOutcome, CliError> {
    let shard = req.shard.as_deref().map(Shard::parse).transpose()?;
    let (mut manifest, scenarios) = plan(req)?;
    manifest.shard = shard;
    create_dir(&req.out)?;
    let journal_path = req.out.join(JOURNAL);
    let mut done: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    match read_journal(&journal_path)? {
        Some((old, rows)) if !rows.is_empty() && !req.resume => {
            let same = if old == manifest { "this" } else { "another" };
            return Err(CliError::Usage(format!(
                "{} holds an interrupted run of {same} sweep ({} of {} runs done): add --resume to \
                 continue it, or delete {} to start over",
                req.out.display(),
                rows.len(),
                slice_len(&old),
                journal_path.display()
            )));
        }
        Some((old, rows)) if req.resume => {
            if old != manifest {
                return Err(CliError::Usage(format!(
                    "--resume: {} was started as `{}`, not as this sweep (or the scenario file changed)",
                    journal_path.display(),
                    old.command()
                )));
            }
            for r in rows {
                let run: u64 = r[0].parse().expect("checked by parse_rows");
                done.entry(run).or_insert(r);
            }
        }
        _ => {}
    }
    // Rewrite the journal: manifest, header, the rows kept; then append as runs finish.
    let mut head = format!(
        "{MANIFEST_LINE}{}\n",
        serde_json::to_string(&manifest).expect("manifest serializes")
    )
    .into_bytes();
    let rows_kept: Vec<Vec<String>> = done.values().cloned().collect();
    head.extend(csv_text(&manifest.header(), &rows_kept));
    write_atomic(&journal_path, &head)?;
    let journal = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .map_err(|e| CliError::Output {
            path: journal_path.display().to_string(),
            reason: e.to_string(),
        })?;
    let journal = Mutex::new(journal);

    let todo: Vec<u64> = (0..manifest.runs)
        .filter(|r| shard.is_none_or(|s| s.owns(*r)) && !done.contains_key(r))
        .collect();
    install_interrupt_handler();
    let bar = if req.progress {
        let b = indicatif::ProgressBar::new(todo.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} runs, eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(req.jobs.max(1))
        .build()
        .map_err(|e| CliError::Usage(format!("--jobs: {e}")))?;
    let failure: Mutex<Option<(u64, CliError)>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let executed = AtomicUsize::new(0);
    let fresh: Mutex<Vec<(u64, Vec<String>)>> = Mutex::new(Vec::new());
    pool.install(|| {
        todo.par_iter().for_each(|&run| {
            if stop.load(Ordering::Relaxed) || INTERRUPTED.load(Ordering::Relaxed) {
                return;
            }
            let outcome = run_unit(&manifest, &scenarios, run).and_then(|row| {
                let line = csv_line(&row);
                let mut f = journal.lock().expect("journal lock");
                f.write_all(&line)
                    .and_then(|_| f.flush())
                    .map_err(|e| CliError::Output {
                        path: journal_path.display().to_string(),
                        reason: e.to_string(),
                    })?;
                Ok(row)
            });
            match outcome {
                Ok(row) => {
                    fresh.lock().expect("rows lock").push((run, row));
                    executed.fetch_add(1, Ordering::Relaxed);
                    bar.inc(1);
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    let mut slot = failure.lock().expect("failure lock");
                    // Report the failing run of lowest index among those that ran.
                    if slot.as_ref().is_none_or(|(r, _)| run < *r) {
                        *slot = Some((run, e));
                    }
                }
            }
        })
    });
    bar.finish_and_clear();
    if let Some((_, e)) = failure.into_inner().expect("failure lock") {
        return Err(e);
    }
    for (run, row) in fresh.into_inner().expect("rows lock") {
        done.insert(run, row);
    }
    let executed = executed.load(Ordering::Relaxed) as u64;
    let total = slice_len(&manifest);
    if (done.len() as u64) < total {
        return Err(CliError::Interrupted {
            done: done.len() as u64,
            total,
            resume: format!(
                "{} --out {} --resume",
                manifest.command(),
                req.out.display()
            ),
        });
    }
    let rows: Vec<Vec<String>> = done.into_values().collect();
    let files = finalize(&req.out, &manifest, &rows)?;
    // Every run is in the outputs now; the journal has served.
    let _ = std::fs::remove_file(&journal_path);
    Ok(SweepOutcome {
        runs: total,
        executed,
        files,
    })
}

/// Runs in the manifest's slice.
fn slice_len(m: &Manifest) -> u64 {
    match m.shard {
        None => m.runs,
        Some(s) => (0..m.runs).filter(|r| s.owns(*r)).count() as u64,
    }
}

/// Writes the outputs of a complete sweep or shard from its rows (ordered by run index).
/// A shard writes `runs.csv` and `sweep.json` only; `merge` makes the rest.
pub fn finalize(out: &Path, m: &Manifest, rows: &[Vec<String>]) -> Result<Vec<String>, CliError> {
    create_dir(out)?;
    let mut files = Vec::new();
    let mut put = |name: &str, bytes: &[u8]| -> Result<(), CliError> {
        write_atomic(&out.join(name), bytes)?;
        files.push(name.to_string());
        Ok(())
    };
    let mut figure_files = Vec::new();
    put(RUNS, &csv_text(&m.header(), rows))?;
    if m.shard.is_none() {
        let agg = aggregate(m, rows);
        put(
            AGGREGATE,
            &csv_text(&aggregate_header(m), &agg_rows(m, &agg)),
        )?;
        let figures = sweep_figures(m, rows, &agg)?;
        for (name, fig) in &figures {
            write_figure(out, name, fig)?;
        }
        let names: Vec<&str> = figures.iter().map(|(n, _)| n.as_str()).collect();
        put("report.md", sweep_report(m, &agg, &names).as_bytes())?;
        for name in names {
            figure_files.push(format!("{name}.svg"));
            figure_files.push(format!("{name}.png"));
        }
    }
    let mut json = serde_json::to_string_pretty(m).expect("manifest serializes");
    json.push('\n');
    put(MANIFEST, json.as_bytes())?;
    files.extend(figure_files);
    Ok(files)
}

/// Statistics of one metric across the seeds of a (point, strategy).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Runs with a value (strategies that could not run have none).
    pub runs: usize,
    /// Mean.
    pub mean: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Student-t 95% interval of the mean (needs two runs or more).
    pub ci95: Option<(f64, f64)>,
}

impl Stats {
    /// From values in run order (the order fixes the floating-point sums).
    pub fn of(values: &[f64]) -> Stats {
        let n = values.len();
        if n == 0 {
            return Stats::default();
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let ci95 = (n >= 2).then(|| {
            use statrs::distribution::{ContinuousCDF, StudentsT};
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map(|d| d.inverse_cdf(0.975))
                .unwrap_or(f64::NAN);
            let half = t * (var / n as f64).sqrt();
            (mean - half, mean + half)
        });
        Stats {
            runs: n,
            mean,
            min,
            max,
            ci95,
        }
    }
}

/// Aggregates: key (point, strategy index) -> one [`Stats`] per numeric metric (in column order).
type Aggregate = BTreeMap<(u64, usize), Vec<(String, Stats)>>;

fn numeric_metrics(m: &Manifest) -> Vec<(String, usize)> {
    let header = m.header();
    Metrics::numeric_field_names()
        .into_iter()
        .filter_map(|name| {
            let col = header.iter().position(|h| *h == name)?;
            Some((name, col))
        })
        .collect()
}

fn aggregate(m: &Manifest, rows: &[Vec<String>]) -> Aggregate {
    let metrics = numeric_metrics(m);
    let status_col = m.status_col();
    let mut groups: BTreeMap<(u64, usize), Vec<&Vec<String>>> = BTreeMap::new();
    for r in rows {
        let run: u64 = r[0].parse().unwrap_or(0);
        let (point, _, si) = m.unit(run);
        groups.entry((point, si)).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(key, rs)| {
            let stats = metrics
                .iter()
                .map(|(name, col)| {
                    let vals: Vec<f64> = rs
                        .iter()
                        .filter(|r| r[status_col] == "ok")
                        .filter_map(|r| r[*col].parse::<f64>().ok())
                        .collect();
                    (name.clone(), Stats::of(&vals))
                })
                .collect();
            (key, stats)
        })
        .collect()
}

fn aggregate_header(m: &Manifest) -> Vec<String> {
    let mut h: Vec<String> = m.params.iter().map(|p| p.path.clone()).collect();
    h.extend(
        [
            "strategy",
            "metric",
            "runs",
            "mean",
            "min",
            "max",
            "ci95_low",
            "ci95_high",
        ]
        .map(String::from),
    );
    h
}

/// A figure for the CSV: integers as such, other values to 6 decimals without trailing zeros.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return String::new();
    }
    charts::trimmed(x, 6)
}

fn agg_rows(m: &Manifest, agg: &Aggregate) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for ((point, si), stats) in agg {
        let vals = m.point_values(*point);
        for (metric, s) in stats {
            let mut r: Vec<String> = m
                .params
                .iter()
                .zip(&vals)
                .map(|(p, &vi)| p.values[vi].clone())
                .collect();
            r.push(m.strategies[*si].clone());
            r.push(metric.clone());
            r.push(s.runs.to_string());
            if s.runs == 0 {
                r.extend((0..5).map(|_| String::new()));
            } else {
                r.push(num(s.mean));
                r.push(num(s.min));
                r.push(num(s.max));
                match s.ci95 {
                    Some((lo, hi)) => {
                        r.push(num(lo));
                        r.push(num(hi));
                    }
                    None => r.extend([String::new(), String::new()]),
                }
            }
            rows.push(r);
        }
    }
    rows
}

/// The metrics a sweep charts and tabulates: (field, title, unit, table column).
const CHARTED: [(&str, &str, &str, &str); 9] = [
    (
        "ordering_violations",
        "Ordering violations",
        "messages",
        "violations",
    ),
    ("lost", "Lost", "messages", "lost"),
    ("duplicates", "Duplicates", "messages", "dups"),
    ("stale_rejected", "Stale rejected", "messages", "stale_rej"),
    (
        "final_state_mismatches",
        "Final-state mismatches",
        "keys",
        "mismatch",
    ),
    ("dead_lettered", "Dead-lettered", "messages", "dlq"),
    ("throughput_per_s", "Throughput", "messages/s", "thru/s"),
    ("latency_ms_p99", "p99 latency", "ms", "p99_ms"),
    ("max_block_ms", "Max head-of-line block", "ms", "block_ms"),
];

fn stat<'a>(agg: &'a Aggregate, key: (u64, usize), metric: &str) -> Option<&'a Stats> {
    agg.get(&key)?
        .iter()
        .find(|(n, _)| n == metric)
        .map(|(_, s)| s)
        .filter(|s| s.runs > 0)
}

/// The sweep's figures: x = the first swept parameter, one figure per combination of the others.
/// Without a swept parameter, x = the seed and the points are single runs.
fn sweep_figures(
    m: &Manifest,
    rows: &[Vec<String>],
    agg: &Aggregate,
) -> Result<Vec<(String, charts::Figure)>, CliError> {
    let chart_err = |e: charts::ChartError| CliError::Output {
        path: "sweep chart".into(),
        reason: e.to_string(),
    };
    let mut figures = Vec::new();
    if m.params.is_empty() {
        let seeds: Vec<u64> = (m.seed_first..=m.seed_last).collect();
        let x = XAxis {
            name: "seed".into(),
            labels: seeds.iter().map(|s| s.to_string()).collect(),
            numeric: Some(seeds.iter().map(|s| *s as f64).collect()),
        };
        let status_col = m.status_col();
        let panels: Vec<SweepPanel> = CHARTED
            .iter()
            .map(|(field, title, unit, _)| {
                let col = m.header().iter().position(|h| h == field).unwrap_or(0);
                let lines = m
                    .strategies
                    .iter()
                    .enumerate()
                    .map(|(si, name)| Line {
                        strategy: name.clone(),
                        points: rows
                            .iter()
                            .filter_map(|r| {
                                let (_, seed, s) = m.unit(r[0].parse().ok()?);
                                (s == si && r[status_col] == "ok").then_some(())?;
                                let v: f64 = r[col].parse().ok()?;
                                Some(Point {
                                    x: (seed - m.seed_first) as usize,
                                    mean: v,
                                    ci95: None,
                                })
                            })
                            .collect(),
                    })
                    .collect();
                SweepPanel {
                    title: title.to_string(),
                    unit: unit.to_string(),
                    lines,
                }
            })
            .collect();
        let title = format!("{}: each strategy per seed", m.scenario);
        figures.push((
            "sweep".to_string(),
            charts::sweep_chart(&title, &x, &panels).map_err(chart_err)?,
        ));
        return Ok(figures);
    }
    let xp = &m.params[0];
    let x = XAxis {
        name: xp.path.clone(),
        labels: xp.values.clone(),
        numeric: xp
            .values
            .iter()
            .map(|v| v.parse::<f64>().ok().filter(|f| f.is_finite()))
            .collect(),
    };
    let per_x = m.points() / xp.values.len() as u64;
    for combo in 0..per_x {
        let panels: Vec<SweepPanel> = CHARTED
            .iter()
            .map(|(field, title, unit, _)| SweepPanel {
                title: title.to_string(),
                unit: unit.to_string(),
                lines: m
                    .strategies
                    .iter()
                    .enumerate()
                    .map(|(si, name)| Line {
                        strategy: name.clone(),
                        points: (0..xp.values.len())
                            .filter_map(|xi| {
                                let point = xi as u64 * per_x + combo;
                                let s = stat(agg, (point, si), field)?;
                                Some(Point {
                                    x: xi,
                                    mean: s.mean,
                                    ci95: s.ci95,
                                })
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        let others: Vec<String> = {
            let vals = m.point_values(combo);
            m.params
                .iter()
                .zip(&vals)
                .skip(1)
                .map(|(p, &vi)| format!("{} = {}", p.path, p.values[vi]))
                .collect()
        };
        let mut title = format!(
            "{}: mean of seeds {}..{} (bars: 95% interval) against {}",
            m.scenario, m.seed_first, m.seed_last, xp.path
        );
        if !others.is_empty() {
            title.push_str(&format!(", {}", others.join(", ")));
        }
        let name = if per_x == 1 {
            "sweep".to_string()
        } else {
            format!("sweep-{}", combo + 1)
        };
        figures.push((
            name,
            charts::sweep_chart(&title, &x, &panels).map_err(chart_err)?,
        ));
    }
    Ok(figures)
}

/// The Markdown page of a sweep: what ran, the charts, and a table of means with 95% intervals.
fn sweep_report(m: &Manifest, agg: &Aggregate, figures: &[&str]) -> String {
    let mut s = format!("# Sweep: {}\n\n", m.scenario);
    s.push_str(&format!("```\n{}\n```\n\n", m.command()));
    s.push_str(&format!(
        "{} point(s) x {} seed(s) x {} strateg{} = {} runs; every strategy faces the same seeded \
         faults at each point and seed.\n\n",
        m.points(),
        m.seeds(),
        m.strategies.len(),
        if m.strategies.len() == 1 { "y" } else { "ies" },
        m.runs
    ));
    for f in figures {
        s.push_str(&format!("![{f}]({f}.svg)\n\n"));
    }
    s.push_str(
        "Means across seeds; in brackets the 95% interval of the mean (Student t), when there are two \
         seeds or more.\n\n",
    );
    let mut header: Vec<String> = m.params.iter().map(|p| p.path.clone()).collect();
    header.push("strategy".into());
    header.extend(CHARTED.iter().map(|c| c.3.to_string()));
    let mut rows = Vec::new();
    for (point, si) in agg.keys() {
        let vals = m.point_values(*point);
        let mut r: Vec<String> = m
            .params
            .iter()
            .zip(&vals)
            .map(|(p, &vi)| p.values[vi].clone())
            .collect();
        r.push(m.strategies[*si].clone());
        for (field, ..) in CHARTED {
            r.push(match stat(agg, (*point, *si), field) {
                None => "n/a".into(),
                Some(st) => match st.ci95 {
                    Some((lo, hi)) => format!(
                        "{} [{}, {}]",
                        charts::short_number(st.mean),
                        charts::short_number(lo),
                        charts::short_number(hi)
                    ),
                    None => charts::short_number(st.mean),
                },
            });
        }
        rows.push(r);
    }
    s.push_str(&markdown_table(&header, &rows, m.params.len() + 1));
    s.push_str(&format!(
        "\nData: [{RUNS}]({RUNS}) (one row per run), [{AGGREGATE}]({AGGREGATE}) (mean, min, max and \
         95% interval per point, strategy and metric), [{MANIFEST}]({MANIFEST}).\n"
    ));
    s
}

/// `sim merge`: combines the shards' directories into the outputs one unsharded sweep writes.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<String>, CliError> {
    let mut manifests = Vec::new();
    let mut rows = Vec::new();
    for d in dirs {
        let path = d.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            CliError::Usage(format!(
                "{}: {e} (is {} the --out of a finished `sim sweep --shard`?)",
                path.display(),
                d.display()
            ))
        })?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| {
            CliError::Usage(format!("{}: not a sweep manifest: {e}", path.display()))
        })?;
        let runs_path = d.join(RUNS);
        let bytes = std::fs::read(&runs_path)
            .map_err(|e| CliError::Usage(format!("{}: {e}", runs_path.display())))?;
        let mine = parse_rows(&m, &bytes);
        if mine.len() as u64 != slice_len(&m) {
            return Err(CliError::Usage(format!(
                "{}: {} of the shard's {} runs are there",
                runs_path.display(),
                mine.len(),
                slice_len(&m)
            )));
        }
        rows.extend(mine);
        manifests.push((d.clone(), m));
    }
    let Some((_, first)) = manifests.first() else {
        return Err(CliError::Usage("merge: no directories given".into()));
    };
    let whole = Manifest {
        shard: None,
        ..first.clone()
    };
    for (d, m) in &manifests {
        if (Manifest {
            shard: None,
            ..m.clone()
        }) != whole
        {
            return Err(CliError::Usage(format!(
                "{} holds another sweep (`{}`), not `{}`",
                d.display(),
                m.command(),
                whole.command()
            )));
        }
    }
    rows.sort_by_key(|r| r[0].parse::<u64>().unwrap_or(u64::MAX));
    for (i, r) in rows.iter().enumerate() {
        let run: u64 = r[0].parse().unwrap_or(u64::MAX);
        if run != i as u64 {
            let what = if run < i as u64 { "twice" } else { "missing" };
            let which = if run < i as u64 { run } else { i as u64 };
            return Err(CliError::Usage(format!(
                "merge: run {which} is {what}: give every shard exactly once"
            )));
        }
    }
    if rows.len() as u64 != whole.runs {
        return Err(CliError::Usage(format!(
            "merge: {} of {} runs present: some shards are missing",
            rows.len(),
            whole.runs
        )));
    }
    finalize(out, &whole, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> toml_edit::DocumentMut {
        text.parse().unwrap()
    }

    #[test]
    fn set_path_reaches_tables_inline_tables_and_arrays() {
        let mut d = doc(
            "[consumers]\ncount = 2\nservice = { dist = \"exponential\", mean = \"5ms\" }\n\
             [[broker]]\nname = \"a\"\n[[broker]]\nname = \"b\"\n\
             [producers]\nbrokers = [\"a\", \"b\"]\n",
        );
        set_path(&mut d, "consumers.count", "8").unwrap();
        set_path(&mut d, "consumers.service.mean", "20ms").unwrap();
        set_path(&mut d, "broker.1.persistent", "false").unwrap();
        set_path(&mut d, "producers.brokers.0", "b").unwrap();
        set_path(&mut d, "run.drain_timeout", "1h").unwrap();
        let t: toml::Table = d.to_string().parse().unwrap();
        assert_eq!(t["consumers"]["count"].as_integer(), Some(8));
        assert_eq!(t["consumers"]["service"]["mean"].as_str(), Some("20ms"));
        assert_eq!(t["broker"][1]["persistent"].as_bool(), Some(false));
        assert_eq!(t["producers"]["brokers"][0].as_str(), Some("b"));
        assert_eq!(t["run"]["drain_timeout"].as_str(), Some("1h"));
        // Quoted values stay strings; bare words that are not TOML become strings.
        set_path(&mut d, "consumers.count", "\"8\"").unwrap();
        let t: toml::Table = d.to_string().parse().unwrap();
        assert_eq!(t["consumers"]["count"].as_str(), Some("8"));

        for (path, needle) in [
            ("broker.2.name", "index 2 does not exist"),
            ("broker.x.name", "expected an index"),
            ("broker.0", "whole table"),
            ("consumers.count.x", "is a value"),
            ("producers.brokers.0.x", "no fields"),
        ] {
            let e = set_path(&mut d, path, "1").unwrap_err();
            assert!(e.contains(needle), "{path}: {e}");
        }
    }

    #[test]
    fn stats_give_the_student_t_interval() {
        let s = Stats::of(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((s.runs, s.mean, s.min, s.max), (5, 3.0, 1.0, 5.0));
        // t(0.975, 4) = 2.776445; sd = sqrt(2.5); half = 2.776445 * sqrt(2.5 / 5).
        let (lo, hi) = s.ci95.unwrap();
        assert!((hi - 3.0 - 2.776445 * 0.5f64.sqrt()).abs() < 1e-5, "{hi}");
        assert!((3.0 - lo - (hi - 3.0)).abs() < 1e-12);
        assert!(Stats::of(&[7.0]).ci95.is_none());
        assert_eq!(Stats::of(&[]).runs, 0);
    }

    #[test]
    fn units_are_numbered_point_major_then_seed_then_strategy() {
        let m = Manifest {
            scenario: "s".into(),
            file: "s.toml".into(),
            file_hash: String::new(),
            seed_first: 10,
            seed_last: 12,
            params: vec![
                Param::parse("a=1,2").unwrap(),
                Param::parse("b=x,y,z").unwrap(),
            ],
            strategies: vec!["competing".into(), "single".into()],
            strategies_chosen: false,
            runs: 2 * 3 * 3 * 2,
            max_events: None,
            shard: None,
        };
        assert_eq!(m.unit(0), (0, 10, 0));
        assert_eq!(m.unit(1), (0, 10, 1));
        assert_eq!(m.unit(2), (0, 11, 0));
        assert_eq!(m.unit(6), (1, 10, 0));
        assert_eq!(m.point_values(1), vec![0, 1]);
        assert_eq!(m.point_values(3), vec![1, 0]);
        let shards: Vec<Shard> = (1..=4).map(|i| Shard { index: i, count: 4 }).collect();
        for run in 0..m.runs {
            assert_eq!(shards.iter().filter(|s| s.owns(run)).count(), 1);
        }
        assert_eq!(num(0.1 + 0.2), "0.3");
        assert_eq!(num(-0.0000001), "0");
        assert_eq!(num(2.0), "2");
    }
}
