//! The `sim` command line as a library: every command is a function, so integration tests drive
//! them without spawning a process.

pub mod bench;
pub mod charts;
pub mod check;
pub mod library;
pub mod report;
pub mod sweep;

use sim::history::{Fingerprint, JsonLines};
use sim::scenario::{load_file, load_str, ScenarioError};
use sim::time::Time;
use sim::{FaultPlan, RunError, RunOptions, RunSummary, Scenario};
use std::path::{Path, PathBuf};

/// Why a command failed; [`CliError::exit_code`] maps it to the process exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The scenario file is unreadable, malformed or meaningless (exit 2).
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// Bad command-line usage (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A run broke a self-check: a bug, with the command that reproduces it (exit 1).
    #[error("{error}\nrepro: {repro}")]
    Run {
        /// What broke.
        error: RunError,
        /// The one-line repro command.
        repro: String,
    },
    /// Some expectations failed; the report says which (exit 1).
    #[error("some expectations failed")]
    Failed,
    /// Two runs of the same scenario and seed produced different histories (exit 1).
    #[error("nondeterminism: {strategy}: the history differs at event #{index}: {event}\nrepro: {repro}")]
    Nondeterministic {
        /// Strategy.
        strategy: String,
        /// Index of the first differing event.
        index: u64,
        /// That event, as the second run saw it.
        event: String,
        /// The repro line.
        repro: String,
    },
    /// Ctrl-C stopped a sweep; the finished runs are kept for `--resume` (exit 130).
    #[error("interrupted: {done} of {total} runs are saved; continue with:\n  {resume}")]
    Interrupted {
        /// Runs finished and journaled.
        done: u64,
        /// Runs in the sweep (or shard).
        total: u64,
        /// The command that resumes it.
        resume: String,
    },
    /// Results could not be written (exit 1).
    #[error("cannot write {path}: {reason}")]
    Output {
        /// Where.
        path: String,
        /// Why.
        reason: String,
    },
}

impl CliError {
    /// 2 for bad input, 1 for failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Scenario(_) | CliError::Usage(_) => 2,
            CliError::Run { .. }
            | CliError::Output { .. }
            | CliError::Failed
            | CliError::Nondeterministic { .. } => 1,
            CliError::Interrupted { .. } => 130,
        }
    }
}

/// Loads and fully validates a scenario file (engine checks + strategy names and parameters).
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    load_file(path, &strategies::validate)
}

/// Loads a scenario from text (for tests and generated scenarios).
pub fn load_text(name: &str, text: &str) -> Result<Scenario, ScenarioError> {
    load_str(name, text, &strategies::validate)
}

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// Seed (default: the scenario's).
    pub seed: Option<u64>,
    /// Strategies to run (default: the scenario's list), in this order.
    pub strategies: Vec<String>,
    /// Overrides `[run] max_events`.
    pub max_events: Option<u64>,
    /// Stops every run at this simulated time.
    pub max_sim_time: Option<Time>,
}

/// Fails on a strategy name that is not in the registry, listing the known ones.
pub fn check_strategy_names(names: &[String]) -> Result<(), CliError> {
    for n in names {
        if !strategies::is_known(n) {
            let known: Vec<&str> = strategies::ALL.iter().map(|i| i.name).collect();
            return Err(CliError::Usage(format!(
                "unknown strategy {n:?} (known: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// The one-line command that reproduces a run.
pub fn repro_line(file: &str, seed: u64, strategy: Option<&str>) -> String {
    let mut s = format!("sim run {file} --seed {seed}");
    if let Some(st) = strategy {
        s.push_str(&format!(" --strategy {st}"));
    }
    s
}

/// A finished multi-strategy run.
pub struct RunResult {
    /// The scenario as loaded.
    pub scenario: Scenario,
    /// The fault plan every strategy faced.
    pub plan: FaultPlan,
    /// The figures.
    pub summary: RunSummary,
}

/// The scenario's display name: its `name`, else the file stem.
pub fn scenario_name(sc: &Scenario, file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    sc.display_name(&stem).to_string()
}

/// What every command that runs a scenario resolves first from a [`RunRequest`].
struct Prepared {
    seed: u64,
    /// The strategies to run, checked against the registry.
    names: Vec<String>,
    plan: FaultPlan,
    opts: RunOptions,
}

fn prepare(sc: &Scenario, req: &RunRequest) -> Result<Prepared, CliError> {
    let seed = req.seed.unwrap_or(sc.seed);
    let names = if req.strategies.is_empty() {
        sc.strategies.clone()
    } else {
        req.strategies.clone()
    };
    check_strategy_names(&names)?;
    Ok(Prepared {
        seed,
        names,
        plan: FaultPlan::resolve(sc, seed),
        opts: RunOptions {
            seed,
            max_events: req.max_events,
            max_sim_time: req.max_sim_time,
        },
    })
}

/// Runs every requested strategy of a loaded scenario against the same seeded fault plan.
/// `trace`: write the history of the (single) strategy as JSON lines.
pub fn run_scenario(
    sc: Scenario,
    file: &Path,
    req: &RunRequest,
    trace: Option<&Path>,
) -> Result<RunResult, CliError> {
    let Prepared {
        seed,
        names,
        plan,
        opts,
    } = prepare(&sc, req)?;
    if trace.is_some() && names.len() != 1 {
        return Err(CliError::Usage(
            "--trace writes one history: choose one strategy with --strategy".into(),
        ));
    }
    let file_str = file.display().to_string();
    let mut entries = Vec::new();
    for name in &names {
        let fail = |error| CliError::Run {
            error,
            repro: repro_line(&file_str, seed, Some(name)),
        };
        let entry = match trace {
            Some(path) => {
                let f = std::fs::File::create(path).map_err(|e| CliError::Output {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                let mut w = JsonLines::new(std::io::BufWriter::new(f));
                let r =
                    strategies::run_named(name, &sc, &plan, &opts, Some(&mut w)).map_err(fail)?;
                w.finish().map_err(|e| CliError::Output {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?;
                r
            }
            None => strategies::run_named(name, &sc, &plan, &opts, None).map_err(fail)?,
        };
        entries.push(entry);
    }
    let summary = RunSummary {
        scenario: scenario_name(&sc, file),
        seed,
        strategies: entries,
    };
    Ok(RunResult {
        scenario: sc,
        plan,
        summary,
    })
}

/// The header printed above the table: repro line, topology, and the resolved fault plan.
pub fn header(r: &RunResult, file: &Path) -> String {
    let sc = &r.scenario;
    let w = &sc.workload;
    let mut s = format!(
        "repro: {}\n",
        repro_line(&file.display().to_string(), r.summary.seed, None)
    );
    s.push_str(&format!(
        "scenario {}: {} broker(s), {} producer(s), {} consumer(s) (prefetch {}), {} {} messages at {} over {} keys, {} redelivery\n",
        r.summary.scenario,
        sc.brokers.len(),
        sc.producers.count,
        sc.consumers.count,
        sc.consumers.prefetch,
        w.messages,
        match w.kind {
            sim::scenario::WorkloadKind::State => "state",
            sim::scenario::WorkloadKind::Command => "command",
        },
        w.rate,
        w.keys,
        match sc.redelivery.mode {
            sim::scenario::RedeliveryMode::Blocking => "blocking",
            sim::scenario::RedeliveryMode::NonBlocking => "non-blocking",
        },
    ));
    let lines = r.plan.describe(sc);
    if lines.is_empty() {
        s.push_str("fault plan: none\n");
    } else {
        s.push_str(&format!("fault plan ({} fault(s)):\n", lines.len()));
        const SHOW: usize = 20;
        for l in lines.iter().take(SHOW) {
            s.push_str(&format!("  {l}\n"));
        }
        if lines.len() > SHOW {
            s.push_str(&format!("  ... and {} more\n", lines.len() - SHOW));
        }
    }
    s
}

/// Writes `contents` to `path` atomically (a temporary file, then a rename), so an interrupted run
/// never leaves a torn file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), CliError> {
    let err = |e: std::io::Error| CliError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let tmp: PathBuf = {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".tmp");
        path.with_file_name(name)
    };
    std::fs::write(&tmp, contents).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Creates `dir` (and its parents).
pub fn create_dir(dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| CliError::Output {
        path: dir.display().to_string(),
        reason: e.to_string(),
    })
}

/// Writes a chart as `NAME.svg` and `NAME.png` under `dir`.
pub fn write_figure(dir: &Path, name: &str, fig: &charts::Figure) -> Result<(), CliError> {
    write_atomic(&dir.join(format!("{name}.svg")), fig.svg.as_bytes())?;
    write_atomic(&dir.join(format!("{name}.png")), &fig.png)
}

/// The files [`write_outputs`] writes, in order.
pub const RUN_FILES: [&str; 5] = [
    "summary.csv",
    "summary.json",
    "chart.svg",
    "chart.png",
    "report.md",
];

/// Writes `summary.csv`, `summary.json`, the chart (`chart.svg`, `chart.png`) and `report.md`
/// (table, fault plan and chart on one page) under `dir`. `file` is the scenario's path as the
/// report's repro line should show it.
pub fn write_outputs(r: &RunResult, file: &Path, dir: &Path) -> Result<(), CliError> {
    create_dir(dir)?;
    let csv = report::csv(&r.summary).map_err(|e| CliError::Output {
        path: dir.join("summary.csv").display().to_string(),
        reason: e.to_string(),
    })?;
    write_atomic(&dir.join("summary.csv"), csv.as_bytes())?;
    write_atomic(
        &dir.join("summary.json"),
        report::json(&r.summary).as_bytes(),
    )?;
    let fig = charts::run_chart(&r.summary).map_err(|e| CliError::Output {
        path: dir.join("chart.svg").display().to_string(),
        reason: e.to_string(),
    })?;
    write_figure(dir, "chart", &fig)?;
    write_atomic(&dir.join("report.md"), run_report(r, file).as_bytes())
}

/// The Markdown page of one run: what ran, against which faults, the table and the chart.
pub fn run_report(r: &RunResult, file: &Path) -> String {
    let mut s = format!("# {}: seed {}\n\n", r.summary.scenario, r.summary.seed);
    if let Some(d) = &r.scenario.description {
        s.push_str(&format!("{d}\n\n"));
    }
    s.push_str("```\n");
    s.push_str(&header(r, file));
    s.push_str("```\n\n");
    s.push_str(&report::table_markdown(&r.summary));
    s.push_str(&format!(
        "\n![{} compared, seed {}](chart.svg)\n\n",
        r.summary.scenario, r.summary.seed
    ));
    s.push_str(
        "Columns: `violations` = messages applied after a newer message of the same key; `stale_rej` = \
         messages a strategy refused as older than the state it holds; `lost` = neither applied, nor \
         rejected, nor dead-lettered, nor pending; `dups` = extra applications of a message; `pending` = \
         still in flight when the run ended; `mismatch` = keys whose final state is not their newest \
         message; `thru/s` = applied per second; latencies from production to application; `block_ms` = \
         the longest time a key's next message waited behind an earlier one.\n\n\
         Data: [summary.csv](summary.csv), [summary.json](summary.json); chart also as \
         [PNG](chart.png).\n",
    );
    s
}

/// Runs each strategy of the scenario twice with the same seed and compares a hash of the whole
/// history, naming the first event that differs. Returns (strategy, history hash, events).
pub fn check_determinism(
    sc: &Scenario,
    file: &Path,
    req: &RunRequest,
) -> Result<Vec<(String, u64, u64)>, CliError> {
    let Prepared {
        seed,
        names,
        plan,
        opts,
    } = prepare(sc, req)?;
    let file_str = file.display().to_string();
    let mut out = Vec::new();
    for name in &names {
        let repro = repro_line(&file_str, seed, Some(name));
        let fail = |error| CliError::Run {
            error,
            repro: repro.clone(),
        };
        let mut first = Fingerprint::new(true, None);
        strategies::run_named(name, sc, &plan, &opts, Some(&mut first)).map_err(fail)?;
        let mut second = Fingerprint::new(false, first.trail.take());
        strategies::run_named(name, sc, &plan, &opts, Some(&mut second)).map_err(fail)?;
        let differs = second.first_difference.or_else(|| {
            // The second run may be a strict prefix or extension of the first.
            (second.events != first.events).then(|| {
                (
                    second.events.min(first.events),
                    sim::history::Event::DrainStart { t: 0 },
                )
            })
        });
        if let Some((index, event)) = differs {
            return Err(CliError::Nondeterministic {
                strategy: name.clone(),
                index,
                event: serde_json::to_string(&event).unwrap_or_default(),
                repro,
            });
        }
        out.push((name.clone(), first.hash, first.events));
    }
    Ok(out)
}

/// `sim list`: strategies and fault kinds, one line each.
pub fn list_text() -> String {
    let mut s = String::from("strategies:\n");
    for i in strategies::ALL {
        s.push_str(&format!("  {:<18} {}\n", i.name, i.summary));
    }
    s.push_str("\nfault kinds ([[fault]] kind = ...):\n");
    for (k, d) in sim::scenario::FaultKind::ALL {
        s.push_str(&format!("  {:<18} {}\n", k.name(), d));
    }
    s
}
