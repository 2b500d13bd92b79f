//! `sim calibrate FILE|DIR`: each scenario in the simulator over many seeds and live over a few
//! runs, per strategy and metric the simulator's range beside the live values, with a verdict
//! (the pure parts: [`crate::calibrate`]; docs/calibration.md).

use super::{broker, judge, plan, refusals, run, write_history};
use crate::calibrate::{self, Row, Tolerance};
use crate::{scenario_name, CliError};
use run::LiveStrategy;
use sim::Scenario;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What `sim calibrate` was asked.
pub struct CalibrateRequest {
    /// Scenario files, or directories (every `*.toml` directly in them, sorted).
    pub paths: Vec<PathBuf>,
    /// Simulator seeds per strategy (the scenario's seed and the next ones).
    pub sim_seeds: u64,
    /// Live runs per strategy (the scenario's seed and the next ones).
    pub runs: u32,
    /// The tolerance.
    pub tolerance: Tolerance,
    /// Where to write `calibration.csv`, the charts and the live histories.
    pub out: Option<PathBuf>,
    /// Longest wait for the queue to drain after production and faults (per live run).
    pub drain_timeout: Duration,
}

/// What `sim calibrate` found.
pub struct CalibrateOutcome {
    /// What to print.
    pub text: String,
    /// Every row.
    pub rows: Vec<Row>,
}

impl CalibrateOutcome {
    /// Whether every row agrees (exit 0; otherwise 1).
    pub fn within(&self) -> bool {
        calibrate::all_within(&self.rows)
    }
}

/// The scenario files of `paths`: files as given, directories' `*.toml` (not recursive), sorted.
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| CliError::Usage(format!("{}: {e}", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "toml"))
                .collect();
            v.sort();
            if v.is_empty() {
                return Err(CliError::Usage(format!(
                    "{}: no scenario file (*.toml) in it",
                    p.display()
                )));
            }
            out.extend(v);
        } else if p.exists() {
            // Read as every scenario is (`load_all`): a FIFO or a device is refused there, by
            // what it is.
            out.push(p.clone());
        } else {
            return Err(CliError::Usage(format!("{}: no such file", p.display())));
        }
    }
    Ok(out)
}

struct Loaded {
    file: PathBuf,
    name: String,
    sc: Scenario,
    strategies: Vec<LiveStrategy>,
}

/// Loads every scenario and refuses (exit 2) anything the live runner cannot stage, before any
/// run starts.
fn load_all(files: &[PathBuf]) -> Result<Vec<Loaded>, CliError> {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    for f in files {
        let text = sim::scenario::read_scenario_text(f)?;
        let sc = crate::load_text(&f.display().to_string(), &text)?;
        let names = sc.strategies.clone();
        let r = refusals(&text, &sc, &names);
        if !r.is_empty() {
            refused.push(format!("{}: {}", f.display(), r.join("; ")));
            continue;
        }
        out.push(Loaded {
            file: f.clone(),
            name: scenario_name(&sc, f),
            strategies: names
                .iter()
                .map(|n| LiveStrategy::parse(n).expect("refused above"))
                .collect(),
            sc,
        });
    }
    if !refused.is_empty() {
        return Err(CliError::Usage(format!(
            "sim calibrate cannot stage faithfully:\n  {}",
            refused.join("\n  ")
        )));
    }
    // Each scenario's chart and histories go by its name (as a file name): two of one name
    // (one file given twice, or `a/s.toml` and `b/s.toml`) would write over each other.
    for (i, l) in out.iter().enumerate() {
        let stem = calibrate::file_stem(&l.name);
        if let Some(first) = out[..i]
            .iter()
            .find(|o| calibrate::file_stem(&o.name) == stem)
        {
            return Err(CliError::Usage(format!(
                "{} and {} are both named {:?} (charts and histories go by the name, as \
                 calibration-{stem}.svg): give one of them another `name`, or calibrate them apart",
                first.file.display(),
                l.file.display(),
                l.name
            )));
        }
    }
    Ok(out)
}

/// The scenario name of a staged strategy.
pub fn strategy_name(s: LiveStrategy) -> &'static str {
    match s {
        LiveStrategy::Competing => "competing",
        LiveStrategy::Single => "single",
        LiveStrategy::MessageGroups => "message_groups",
        LiveStrategy::RabbitmqSac => "rabbitmq_sac",
        LiveStrategy::RabbitmqHash => "rabbitmq_hash",
        LiveStrategy::DbOptimistic => "db_optimistic",
        LiveStrategy::Notifier => "notifier",
    }
}

/// The live brokers of the loaded files, each once, with where they are installed.
fn brokers_at(loaded: &[Loaded]) -> String {
    let mut v: Vec<String> = loaded.iter().map(|l| super::broker_at(&l.sc)).collect();
    v.dedup();
    v.join("; ")
}

/// One scenario of `sim calibrate`: its strategies' rows are pushed to `rows` as each one's
/// live runs end (counted in `done`), its table printed and added to `text`, its chart written.
fn calibrate_one(
    l: &Loaded,
    req: &CalibrateRequest,
    rows: &mut Vec<Row>,
    done: &mut u64,
    text: &mut String,
) -> Result<(), CliError> {
    let seed0 = l.sc.seed;
    let file = l.file.display().to_string();
    let head = format!(
        "\n{} ({file}): simulator seeds {}..{}, live seeds {}..{}\n",
        l.name,
        seed0,
        seed0 + req.sim_seeds - 1,
        seed0,
        seed0 + u64::from(req.runs) - 1
    ) + &super::rabbit_plan::version_notes(&l.sc, &l.sc.strategies);
    crate::stdout_write(&head)?;
    for &s in &l.strategies {
        let name = strategy_name(s);
        let sim = calibrate::sim_runs(&l.sc, &file, name, seed0..=seed0 + req.sim_seeds - 1)?;
        let mut live = Vec::new();
        for i in 0..req.runs {
            let seed = seed0 + u64::from(i);
            let t0 = Instant::now();
            let p = plan(&l.sc, s, seed, req.drain_timeout).map_err(CliError::Usage)?;
            let r = run::run(&p).map_err(|e| {
                if e == "interrupted" {
                    calibrate::interrupted()
                } else {
                    CliError::Live(format!("{} {name} seed {seed}: {e}", l.name))
                }
            })?;
            if let Some(dir) = &req.out {
                let hdir = histories_dir(dir, &l.name);
                crate::create_dir(&hdir)?;
                write_history(&hdir, &l.sc, &l.file, name, seed, &r.events)?;
            }
            let (notes, _) = super::run_notes(&format!("  live {name} seed {seed}"), &r);
            eprint!("{notes}");
            let m = judge(&r.events, l.sc.workload.keys, l.sc.workload.kind)
                .map_err(|e| CliError::Live(format!("{} {name} seed {seed}: {e}", l.name)))?;
            // Progress on standard error: the table on standard output stays clean.
            eprintln!(
                "  live {name} seed {seed}: {:.1} s, violations {} dups {} redeliv {} lost {} p50 {:.1} ms p99 {:.1} ms",
                t0.elapsed().as_secs_f64(),
                m.ordering_violations,
                m.duplicates,
                m.redeliveries,
                m.lost,
                m.latency_ms.p50,
                m.latency_ms.p99
            );
            live.push((seed, m));
            *done += 1;
        }
        rows.extend(calibrate::rows(
            &calibrate::metrics_for(super::rolls_back(&l.sc)),
            &l.name,
            &file,
            name,
            &sim,
            &live,
            &req.tolerance,
        ));
    }
    let t = calibrate::table(rows);
    crate::stdout_write(&t)?;
    text.push_str(&head);
    text.push_str(&t);
    if let Some(dir) = &req.out {
        let fig = crate::charts::calibration_chart(
            &format!(
                "{}: simulator ({} seed{}) vs live {} ({} run{})",
                l.name,
                req.sim_seeds,
                if req.sim_seeds == 1 { "" } else { "s" },
                match super::rabbit_plan::broker_of(&l.sc) {
                    crate::staging::LiveBroker::ActiveMq => "ActiveMQ".to_string(),
                    crate::staging::LiveBroker::RabbitMq => super::rabbit_plan::product(&l.sc),
                },
                req.runs,
                if req.runs == 1 { "" } else { "s" }
            ),
            rows,
        )
        .map_err(|e| CliError::Output {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        crate::write_figure(dir, &figure_name(&l.name), &fig)?;
    }
    Ok(())
}

/// `DIR/histories/NAME`: where `--out DIR` keeps the live histories of the scenario `name`.
fn histories_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join("histories").join(calibrate::file_stem(name))
}

/// `calibration-NAME`: the chart of the scenario `name` ([`crate::figure_files`]).
fn figure_name(name: &str) -> String {
    format!("calibration-{}", calibrate::file_stem(name))
}

/// After an interrupt or a failure: the rows gathered so far are kept. The finished strategies
/// of the scenario in hand (`rows`) are printed as a table, and with --out every row so far goes
/// to calibration.csv; an interrupt's counts say how many live runs ended.
fn keep_partial(
    e: CliError,
    req: &CalibrateRequest,
    all: &mut Vec<Row>,
    rows: Vec<Row>,
    done: u64,
    total: u64,
) -> CliError {
    if !rows.is_empty() && crate::stdout_write(&calibrate::table(&rows)).is_err() {
        return CliError::BrokenPipe;
    }
    all.extend(rows);
    if let (Some(dir), false) = (&req.out, all.is_empty()) {
        if let Err(w) = write_csv(dir, all) {
            return w;
        }
        crate::stderr_line(&format!(
            "wrote the {} row(s) gathered before the error to {}/calibration.csv",
            all.len(),
            dir.display()
        ));
    }
    match e {
        CliError::Interrupted { .. } => CliError::Interrupted {
            done,
            total,
            resume: "sim calibrate (a live run cannot be resumed: this runs every run again)"
                .into(),
        },
        e => e,
    }
}

/// `sim calibrate`.
pub fn calibrate(req: &CalibrateRequest) -> Result<CalibrateOutcome, CliError> {
    if req.runs == 0 {
        return Err(CliError::Usage("--runs must be at least 1".into()));
    }
    if req.sim_seeds == 0 || req.sim_seeds > crate::sweep::MAX_RUNS {
        return Err(CliError::Usage(format!(
            "--sim-seeds {}: must be between 1 and {} (the runs a sweep may have)",
            req.sim_seeds,
            crate::sweep::MAX_RUNS
        )));
    }
    let files = scenario_files(&req.paths)?;
    let loaded = load_all(&files)?;
    for l in &loaded {
        for (count, flag) in [
            (req.sim_seeds, "--sim-seeds"),
            (u64::from(req.runs), "--runs"),
        ] {
            crate::check_seed_range(l.sc.seed, count, &format!("the scenario's seed, {flag}"))
                .map_err(|e| CliError::Usage(format!("{}: {e}", l.file.display())))?;
        }
    }
    if let Some(dir) = &req.out {
        // Every output checked first, without a broker: none over an input or in a folder that
        // takes no file, no directory in the way (calibration.csv, each scenario's chart, its
        // histories).
        let mut outputs = vec![("--out", dir.join("calibration.csv"))];
        for l in &loaded {
            let figures = crate::figure_files(&figure_name(&l.name));
            outputs.extend(figures.map(|f| ("--out", dir.join(f))));
        }
        for l in &loaded {
            outputs.extend(super::history_outputs(
                &histories_dir(dir, &l.name),
                &l.sc.strategies,
                l.sc.seed,
                req.runs,
            ));
        }
        let inputs: Vec<&Path> = loaded.iter().map(|l| l.file.as_path()).collect();
        crate::check_outputs(Some(dir), &outputs, &inputs)?;
    }
    for l in &loaded {
        if let Some(why) = super::rabbit_plan::missing(&l.sc) {
            return Err(CliError::Usage(format!("sim calibrate needs {why}")));
        }
    }
    if let Some(why) = loaded
        .iter()
        .find_map(|l| super::needs_postgres(&l.sc, &l.sc.strategies))
    {
        return Err(CliError::Usage(why));
    }
    if let Some(dir) = &req.out {
        crate::create_dir(dir)?;
    }
    broker::install_interrupt_handler();
    let mut text = format!(
        "calibrate: {} scenario(s); the simulator over {} seeds, live over {} run(s) each \
         ({})\n{}\n",
        loaded.len(),
        req.sim_seeds,
        req.runs,
        brokers_at(&loaded),
        req.tolerance.describe()
    );
    crate::stdout_write(&text)?;
    let total: u64 = loaded
        .iter()
        .map(|l| l.strategies.len() as u64 * u64::from(req.runs))
        .sum();
    let mut all = Vec::new();
    let mut done = 0u64;
    for l in &loaded {
        let mut rows = Vec::new();
        if let Err(e) = calibrate_one(l, req, &mut rows, &mut done, &mut text) {
            return Err(keep_partial(e, req, &mut all, rows, done, total));
        }
        all.extend(rows);
    }
    let found = calibrate::findings(&all, &req.tolerance);
    if !found.is_empty() {
        crate::stdout_write(&format!("\n{found}"))?;
        text.push('\n');
        text.push_str(&found);
    }
    let outside = all
        .iter()
        .filter(|r| r.verdict == calibrate::Verdict::Outside)
        .count();
    let summary = format!(
        "\n{} row(s), {} within, {} outside\n",
        all.len(),
        all.len() - outside,
        outside
    );
    crate::stdout_write(&summary)?;
    text.push_str(&summary);
    if let Some(dir) = &req.out {
        write_csv(dir, &all)?;
        let note = format!("wrote {}/calibration.csv and the charts\n", dir.display());
        crate::stdout_write(&note)?;
        text.push_str(&note);
    }
    Ok(CalibrateOutcome { text, rows: all })
}

fn write_csv(dir: &Path, rows: &[Row]) -> Result<(), CliError> {
    let path = dir.join("calibration.csv");
    let csv = calibrate::csv(rows).map_err(|e| CliError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    crate::write_atomic(&path, csv.as_bytes())
}
