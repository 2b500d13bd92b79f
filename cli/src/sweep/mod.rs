//! `sim sweep` and `sim merge`: a grid of parameter values x seeds x strategies, run in parallel,
//! journaled so an interrupted sweep resumes, sliceable into shards whose merge gives the same bytes
//! as one unsharded run.
//!
//! Every run is a *unit* with a global index: units are numbered point-major (the first `--set`
//! varies slowest), then seed, then strategy. All outputs are ordered by that index, never by
//! completion order, which is why `--jobs`, `--shard` and `--resume` cannot change a byte.

mod merge;
mod outputs;
mod toml_path;

pub use merge::{merge, merge_verified};
pub use outputs::{finalize, num, output_names, Stats};
pub use toml_path::set_path;

use crate::report::{strategy_cells, strategy_columns};
use crate::{create_dir, load_text, write_atomic, CliError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sim::expect::SeedRange;
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
            let mut shown: String = arg.chars().take(80).collect();
            if shown.len() < arg.len() {
                shown.push_str("...");
            }
            CliError::Usage(format!(
                "--set {shown:?}: {why} (write PATH=V1,V2,..., e.g. consumers.count=1,2,4,8)"
            ))
        };
        let (path, values) = sim::scenario::parse_set(arg).map_err(|why| usage(&why))?;
        Ok(Param { path, values })
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
    /// Every strategy's effective parameters in the scenario file, before any `--set` (a swept
    /// `strategy.NAME.FIELD` varies as the grid says).
    #[serde(default)]
    pub base_params: Vec<StrategyParams>,
}

/// One strategy's effective parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrategyParams {
    /// The strategy.
    pub strategy: String,
    /// Its effective `[strategy.NAME]` values.
    pub params: sim::Params,
}

impl Manifest {
    /// Checks a manifest read back (a shard's `sweep.json`, a journal's first line) before any
    /// of it is used, as a scenario file is validated: at least one strategy, seed and value per
    /// parameter, seeds in order, `runs` the product of the grid and within [`MAX_RUNS`], a shard
    /// `I/N` with 1 <= I <= N, every `--set` as the command line takes it. What it returns is
    /// what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.strategies.is_empty() {
            return Err("no strategies".into());
        }
        crate::check_strategy_names(&self.strategies).map_err(|e| e.to_string())?;
        if self.seed_first > self.seed_last || self.seed_last - self.seed_first == u64::MAX {
            return Err(format!(
                "seeds {}..{} are not a range of at most 2^64 - 1 seeds",
                self.seed_first, self.seed_last
            ));
        }
        for p in &self.params {
            let arg = format!("{}={}", p.path, p.values.join(","));
            match sim::scenario::parse_set(&arg) {
                Ok((path, values)) if path == p.path && values == p.values => {}
                Ok(_) => return Err(format!("--set {:?}: values are not as written", p.path)),
                Err(why) => return Err(format!("--set {:?}: {why}", p.path)),
            }
        }
        let points = self
            .params
            .iter()
            .try_fold(1u64, |acc, p| acc.checked_mul(p.values.len() as u64))
            .filter(|&n| n <= MAX_POINTS)
            .ok_or(format!("more than {MAX_POINTS} grid points"))?;
        let runs = points
            .checked_mul(self.seeds())
            .and_then(|n| n.checked_mul(self.strategies.len() as u64))
            .filter(|&n| n <= MAX_RUNS)
            .ok_or(format!("more than {MAX_RUNS} runs"))?;
        if runs != self.runs {
            return Err(format!(
                "it claims {} runs where points x seeds x strategies make {runs}",
                self.runs
            ));
        }
        if let Some(s) = self.shard {
            if s.count == 0 || s.index == 0 || s.index > s.count {
                return Err(format!(
                    "shard {}/{}: not I/N with 1 <= I <= N",
                    s.index, s.count
                ));
            }
        }
        Ok(())
    }

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

    /// The columns of `runs.csv` (without the checksum).
    pub fn header(&self) -> Vec<String> {
        let mut h = vec!["run".to_string()];
        h.extend(self.params.iter().map(|p| p.path.clone()));
        h.extend(["seed", "strategy"].map(String::from));
        h.extend(strategy_columns());
        h
    }
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

/// Loads the scenario, parses the request and builds the scenario of every grid point, so a bad
/// value fails before anything runs.
pub fn plan(req: &SweepRequest) -> Result<(Manifest, Vec<Scenario>), CliError> {
    // Read once (standard input cannot be read twice), under the scenario-file bound.
    let text = sim::scenario::read_scenario_text(&req.file)?;
    let base = load_text(&sim::scenario::display_path(&req.file), &text)?;
    let seeds =
        SeedRange::parse(&req.seeds).map_err(|e| CliError::Usage(format!("--seeds: {e}")))?;
    let params = req
        .sets
        .iter()
        .map(|s| Param::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, p) in params.iter().enumerate() {
        let key = sim::scenario::set_path_key(&p.path);
        if let Some(q) = params[..i]
            .iter()
            .find(|q| sim::scenario::set_path_key(&q.path) == key)
        {
            let also = if q.path == p.path {
                String::new()
            } else {
                format!(" (as {:?}: both name {key:?})", q.path)
            };
            return Err(CliError::Usage(format!(
                "--set {}: set twice{also}; give a parameter once, with all its values",
                p.path
            )));
        }
    }
    let strategies = if req.strategies.is_empty() {
        base.strategies.clone()
    } else {
        req.strategies.clone()
    };
    crate::check_strategy_names(&strategies)?;
    // A parameter of a strategy the sweep does not run changes nothing: every point would be
    // the same runs, silently.
    for p in &params {
        let mut segs = p.path.split('.').map(str::trim);
        if let (Some("strategy"), Some(name)) = (segs.next(), segs.next()) {
            let runs = strategies
                .iter()
                .any(|s| s == name || s.split('+').any(|part| part == name));
            if !runs && !name.contains('+') && ::strategies::is_known(name) {
                return Err(CliError::Usage(format!(
                    "--set {}: {name} is not among the strategies swept ({}): it would change \
                     nothing (add it to the scenario's strategies, or --strategy {name})",
                    p.path,
                    strategies.join(", ")
                )));
            }
        }
    }
    crate::check_max_events(req.max_events)?;
    crate::check_jobs(req.jobs)?;
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
    let base_params = strategies
        .iter()
        .map(|name| StrategyParams {
            strategy: name.clone(),
            params: ::strategies::effective_params(name, &base),
        })
        .collect();
    let manifest = Manifest {
        scenario: crate::scenario_name(&base, &req.file),
        file: req.file.display().to_string(),
        file_hash: format!("{:016x}", sim::hash::fnv1a(text.as_bytes())),
        seed_first: seeds.first,
        seed_last: seeds.last,
        params,
        strategies,
        strategies_chosen: !req.strategies.is_empty(),
        runs,
        max_events: req.max_events,
        shard: None,
        base_params,
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
    let st = strategies::run_named(name, sc, &plan, &opts, None).map_err(|error| {
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

/// The last column of the journal and of a shard's runs.csv: FNV-1a of the row's other cells as a
/// CSV line, so an edited cell, or a row moved under another run index, is refused.
pub const CHECKSUM: &str = "checksum";
/// Largest sweep manifest read (`sweep.json`, the journal's first line).
pub const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// The checksum of a row (without its checksum cell).
pub fn row_checksum(row: &[String]) -> String {
    format!("{:016x}", sim::hash::fnv1a(&csv_line(row)))
}

fn with_checksum(row: &[String]) -> Vec<String> {
    let mut r = row.to_vec();
    r.push(row_checksum(row));
    r
}

/// Most bytes a runs CSV of `m`'s slice can hold: the header, then per run its index, its
/// parameter values, seed, strategy, status, reason, every metric and a checksum (generously).
fn runs_bytes_limit(m: &Manifest) -> u64 {
    let per_row = 4096
        + m.params
            .iter()
            .map(|p| {
                p.values
                    .iter()
                    .map(|v| v.len() as u64 * 2 + 3)
                    .max()
                    .unwrap_or(0)
            })
            .sum::<u64>();
    65536u64.saturating_add(slice_len(m).saturating_mul(per_row))
}

/// Checks that a row read back belongs where its index puts it: its parameter values, seed and
/// strategy are the run index's, its status is known, and an `ok` row's metrics are finite
/// numbers (a `not_applicable` row's are empty).
fn check_row(m: &Manifest, row: &[String], header: &[String]) -> Result<u64, String> {
    let run: u64 = row[0]
        .parse()
        .map_err(|_| format!("run index {:?} is not a number", row[0]))?;
    if run >= m.runs || m.shard.is_some_and(|s| !s.owns(run)) {
        return Err(format!("run {run} is not a run of this sweep or shard"));
    }
    let (point, seed, si) = m.unit(run);
    let vals = m.point_values(point);
    for (i, (p, &vi)) in m.params.iter().zip(&vals).enumerate() {
        if row[1 + i] != p.values[vi] {
            return Err(format!(
                "run {run} is at {}={}, but the row says {:?}",
                p.path,
                p.values[vi],
                row[1 + i]
            ));
        }
    }
    let k = 1 + m.params.len();
    if row[k] != seed.to_string() {
        return Err(format!(
            "run {run} has seed {seed}, but the row says {:?}",
            row[k]
        ));
    }
    if row[k + 1] != m.strategies[si] {
        return Err(format!(
            "run {run} is strategy {}, but the row says {:?}",
            m.strategies[si],
            row[k + 1]
        ));
    }
    let status = row[m.status_col()].as_str();
    let numeric = Metric::numeric_names();
    for (col, name) in header
        .iter()
        .enumerate()
        .take(row.len())
        .skip(m.status_col() + 2)
    {
        let cell = row[col].as_str();
        let bad = match status {
            "ok" if numeric.contains(name) => !cell.parse::<f64>().is_ok_and(f64::is_finite),
            "ok" => false,
            "not_applicable" => !cell.is_empty(),
            other => return Err(format!("status {other:?} is neither ok nor not_applicable")),
        };
        if bad {
            return Err(format!(
                "{name} = {cell:?} is not {}",
                if status == "ok" {
                    "a finite number"
                } else {
                    "empty, as a strategy that did not run has no figures"
                }
            ));
        }
    }
    Ok(run)
}

/// Numeric metric names, once.
struct Metric;

impl Metric {
    fn numeric_names() -> &'static [String] {
        static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        NAMES.get_or_init(sim::summary::Metrics::numeric_field_names)
    }
}

/// A journal's manifest and rows.
pub type Journal = (Manifest, Vec<Vec<String>>);

/// A manifest from its bytes (a shard's `sweep.json`): it parses and passes
/// [`Manifest::check`], or what is wrong.
pub fn parse_manifest(bytes: &[u8]) -> Result<Manifest, String> {
    let m: Manifest = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    m.check()?;
    Ok(m)
}

/// Reads a journal: its manifest and its complete rows (a torn last line, what an interrupt
/// leaves, is dropped). `None` when there is none, or when it does not start with a manifest.
/// `limit`: the most bytes a journal of this sweep can hold. A row that fails its checksum or its
/// run index is an error naming the line.
fn read_journal(path: &Path, limit: u64) -> Result<Option<Journal>, CliError> {
    let bytes = match sim::scenario::read_bounded(path, limit) {
        Ok(b) => b,
        Err(sim::scenario::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => {
            return Err(CliError::Usage(format!(
                "{}: {e} (delete it to start the sweep over)",
                path.display()
            )))
        }
    };
    parse_journal(&bytes, &path.display().to_string())
}

/// A journal (`runs.partial.csv`, named `file` in errors) from its bytes, as [`read_journal`]
/// reads it: `None` if it does not start with a manifest line.
pub fn parse_journal(bytes: &[u8], file: &str) -> Result<Option<Journal>, CliError> {
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
    manifest.check().map_err(|why| {
        CliError::Usage(format!(
            "{file}:1: not a sweep manifest: {why} (delete it to start the sweep over)"
        ))
    })?;
    let rows = parse_rows(&manifest, &complete[first_nl + 1..], file, 1)?;
    Ok(Some((manifest, rows)))
}

/// Parses a checksummed runs CSV (header first) of `m`'s slice; every row must pass its checksum
/// and [`check_row`]. Errors name `file` and the line (`skip`: lines before the CSV). The rows are
/// returned without their checksum, in file order.
pub fn parse_rows(
    m: &Manifest,
    csv_bytes: &[u8],
    file: &str,
    skip: u64,
) -> Result<Vec<Vec<String>>, CliError> {
    let mut header = m.header();
    header.push(CHECKSUM.into());
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv_bytes);
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = |rec: Option<&csv::StringRecord>| {
            skip + rec
                .and_then(|r| r.position())
                .map_or(i as u64 + 1, |p| p.line())
        };
        let bad = |line: u64, why: String| {
            CliError::Usage(format!(
                "{file}:{line}: {why}; the saved runs are damaged or were edited (runs are \
                 deterministic: delete the line, or the file, to run them again)"
            ))
        };
        let rec = rec.map_err(|e| bad(line(None), format!("not CSV: {e}")))?;
        let row: Vec<String> = rec.iter().map(String::from).collect();
        if i == 0 {
            if row != header {
                return Err(bad(
                    line(Some(&rec)),
                    "the header is not this sweep's (written by another version?)".into(),
                ));
            }
            continue;
        }
        if row.len() != header.len() {
            return Err(bad(
                line(Some(&rec)),
                format!("{} cells where the header has {}", row.len(), header.len()),
            ));
        }
        let (cells, sum) = row.split_at(row.len() - 1);
        if row_checksum(cells) != sum[0] {
            return Err(bad(
                line(Some(&rec)),
                "the checksum does not match the row".into(),
            ));
        }
        check_row(m, cells, &header).map_err(|why| bad(line(Some(&rec)), why))?;
        rows.push(cells.to_vec());
    }
    Ok(rows)
}

/// The files a sweep or shard of `m` writes into `out` (its journal [`JOURNAL`] too when
/// `journal`; `sim merge` writes none), each named by `--out`: what it checks before the work.
pub fn out_paths(m: &Manifest, out: &Path, journal: bool) -> Vec<(&'static str, PathBuf)> {
    journal
        .then(|| JOURNAL.to_string())
        .into_iter()
        .chain(output_names(m))
        .map(|name| ("--out", out.join(name)))
        .collect()
}

/// Runs (or resumes) a sweep; writes the outputs under `req.out`.
pub fn sweep(req: &SweepRequest) -> Result<SweepOutcome, CliError> {
    let shard = req.shard.as_deref().map(Shard::parse).transpose()?;
    let (mut manifest, scenarios) = plan(req)?;
    manifest.shard = shard;
    // Every file it writes, the journal and those of the end, before the first run.
    crate::check_outputs(
        Some(&req.out),
        &out_paths(&manifest, &req.out, true),
        &[&req.file],
    )?;
    create_dir(&req.out)?;
    let journal_path = req.out.join(JOURNAL);
    let mut done: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let limit = MAX_MANIFEST_BYTES.saturating_add(runs_bytes_limit(&manifest));
    match read_journal(&journal_path, limit)? {
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
                let run: u64 = r[0].parse().expect("checked by check_row");
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
    let rows_kept: Vec<Vec<String>> = done.values().map(|r| with_checksum(r)).collect();
    let mut journal_header = manifest.header();
    journal_header.push(CHECKSUM.into());
    head.extend(csv_text(&journal_header, &rows_kept));
    write_atomic(&journal_path, &head)?;
    let journal = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal_path)
        .map_err(|e| CliError::Output {
            path: journal_path.display().to_string(),
            reason: e.to_string(),
        })?;
    let journal = Mutex::new((journal, 0u64));

    let todo: Vec<u64> = (0..manifest.runs)
        .filter(|r| shard.is_none_or(|s| s.owns(*r)) && !done.contains_key(r))
        .collect();
    crate::interrupt::install(None);
    let bar = crate::progress::Progress::new(todo.len() as u64, "runs", req.progress);
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
            if stop.load(Ordering::Relaxed) || crate::interrupt::interrupted() {
                return;
            }
            let outcome = run_unit(&manifest, &scenarios, run).and_then(|row| {
                let line = csv_line(&with_checksum(&row));
                let mut guard = journal.lock().expect("journal lock");
                let (f, appended) = &mut *guard;
                *appended += 1;
                if crate::failpoint_at("sweep-journal-torn", *appended) {
                    // Half a line, as a kill in the middle of the write leaves it.
                    let _ = f.write_all(&line[..line.len() / 2]).and_then(|_| f.flush());
                    crate::failpoint_stop("sweep-journal-torn");
                }
                f.write_all(&line)
                    .and_then(|_| f.flush())
                    .map_err(|e| CliError::Output {
                        path: journal_path.display().to_string(),
                        reason: e.to_string(),
                    })?;
                if crate::failpoint_at("sweep-journal", *appended) {
                    crate::failpoint_stop("sweep-journal");
                }
                Ok(row)
            });
            match outcome {
                Ok(row) => {
                    fresh.lock().expect("rows lock").push((run, row));
                    executed.fetch_add(1, Ordering::Relaxed);
                    bar.inc();
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
    bar.finish();
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
        // Runs index - 1, index - 1 + count, ... below m.runs (a checked shard: count >= 1).
        Some(s) if m.runs >= s.index => (m.runs - s.index) / s.count.max(1) + 1,
        Some(_) => 0,
    }
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
            (
                "fault.0.for",
                "the file has no fault entries: index 0 does not exist",
            ),
            (
                "redelivery.1.mode",
                "the file has no redelivery entries: index 1",
            ),
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

    /// A count's interval never goes below zero: one loss in ten runs has the interval
    /// [0, 0.326], not [-0.126, 0.326].
    #[test]
    fn intervals_of_figures_that_cannot_be_negative_are_cut_at_zero() {
        let mut v = vec![0.0; 9];
        v.push(1.0);
        let (lo, hi) = Stats::of(&v).ci95.unwrap();
        assert_eq!(lo, 0.0);
        assert!((hi - 0.326).abs() < 1e-3, "{hi}");
        // Values that can be negative keep their interval.
        let (lo, _) = Stats::of(&[-1.0, 0.0, 1.0]).ci95.unwrap();
        assert!(lo < -1.0);
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
            base_params: Vec::new(),
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
