//! The `sim` command line as a library: every command is a function, so integration tests drive
//! them without spawning a process.

// The one exception: the live twin's system calls (kill, poll, chown), each with its SAFETY.
#![deny(unsafe_code)]

pub mod bench;
pub mod calibrate;
pub mod charts;
pub mod check;
pub mod explore;
pub mod interrupt;
pub mod judge;
pub mod library;
#[cfg(feature = "live")]
#[allow(unsafe_code)]
pub mod live;
pub mod pacing;
pub mod progress;
pub mod report;
pub mod staging;
pub mod sweep;
pub mod timeline;
pub mod trace;

use sim::history::Fingerprint;
use sim::scenario::{load_file, load_str, ScenarioError};
use sim::time::Time;
use sim::{FaultPlan, RunError, RunOptions, RunSummary, Scenario};
use std::io::Write as _;
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
    /// `sim run --strict`: some runs did not settle (exit 1).
    #[error("--strict: {0}")]
    Unsettled(String),
    /// `sim judge --strict`: the judged history fails its verdict (exit 1).
    #[error("--strict: {0}")]
    Verdict(String),
    /// `sim check` found no `[expect]` section under its paths: nothing was judged (exit 1).
    #[error("{0}")]
    NothingChecked(String),
    /// `sim trace` found no anomaly (in the run, or on the chosen key) (exit 1).
    #[error("{0}")]
    NoAnomaly(String),
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
    /// Standard output was closed by its reader (`sim run F | head -1`): the process ends quietly
    /// with 141 (128 + SIGPIPE, what a shell reports for a tool stopped by a closed pipe).
    #[error("standard output was closed")]
    BrokenPipe,
    /// Results could not be written (exit 1).
    #[error("cannot write {path}: {reason}")]
    Output {
        /// Where.
        path: String,
        /// Why.
        reason: String,
    },
    /// An output path that cannot be written (a folder under a file, one that does not exist, a
    /// directory where a file goes): bad input, found before any work (exit 2).
    #[error("cannot write {path}: {reason}")]
    Unwritable {
        /// Where.
        path: String,
        /// Why, in the user's words.
        reason: String,
    },
    /// `sim live`: a broker did not start, or the live history broke a checker self-check (exit 1).
    #[error("sim live: {0}")]
    Live(String),
}

impl CliError {
    /// [`CliError::Unwritable`] for `path`.
    pub fn unwritable(path: &Path, reason: impl Into<String>) -> CliError {
        CliError::Unwritable {
            path: path.display().to_string(),
            reason: reason.into(),
        }
    }

    /// 2 for bad input, 1 for failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Scenario(_) | CliError::Usage(_) | CliError::Unwritable { .. } => 2,
            CliError::Run { .. }
            | CliError::Output { .. }
            | CliError::Live(_)
            | CliError::Failed
            | CliError::Unsettled(_)
            | CliError::Verdict(_)
            | CliError::NothingChecked(_)
            | CliError::NoAnomaly(_)
            | CliError::Nondeterministic { .. } => 1,
            CliError::Interrupted { .. } => 130,
            CliError::BrokenPipe => 141,
        }
    }
}

fn stdout_error(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::BrokenPipe
    } else {
        CliError::Output {
            path: "standard output".into(),
            reason: e.to_string(),
        }
    }
}

/// Writes to standard output; a closed pipe is [`CliError::BrokenPipe`], any other failure (a
/// full disk: `> /dev/full`) an [`CliError::Output`] error (exit 1), never a panic.
pub fn stdout_write(s: &str) -> Result<(), CliError> {
    use std::io::Write;
    std::io::stdout()
        .lock()
        .write_all(safe_text(s).as_bytes())
        .map_err(stdout_error)
}

/// Writes a line to standard error, control characters escaped as on standard output; a closed
/// standard error is ignored (it must not turn an error into a panic).
pub fn stderr_line(s: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{}", safe_text(s));
}

/// The text format's escaping, applied where text leaves the program (standard output and
/// error, every text file [`write_atomic`] writes): every control character but a line feed or
/// a tab written as an escape ([`escape_controls`]), whatever path the text took from the input.
/// Borrowed as is when there is none (always, for text made only of checked input).
pub fn safe_text(s: &str) -> std::borrow::Cow<'_, str> {
    sim::escape_unsafe(s, |c| c == '\n' || c == '\t')
}

/// Flushes standard output (the last buffered line reaches a full disk only here).
pub fn stdout_flush() -> Result<(), CliError> {
    use std::io::Write;
    std::io::stdout().lock().flush().map_err(stdout_error)
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
    /// Draw a progress bar over the strategies (see [`progress`]).
    pub progress: bool,
}

/// Most parallel runs `--jobs` may ask for: far more threads than any machine has cores only
/// costs memory (each holds a run).
pub const MAX_JOBS: usize = 1024;

/// `--jobs` when not given: every core (at most [`MAX_JOBS`]).
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_JOBS)
}

/// Checks `--jobs`: 1 to [`MAX_JOBS`].
pub fn check_jobs(jobs: usize) -> Result<usize, CliError> {
    if jobs == 0 || jobs > MAX_JOBS {
        return Err(CliError::Usage(format!(
            "--jobs {jobs}: must be between 1 and {MAX_JOBS}"
        )));
    }
    Ok(jobs)
}

/// Checks `--max-events` as `[run] max_events` is checked: at least 1.
pub fn check_max_events(max_events: Option<u64>) -> Result<(), CliError> {
    if max_events == Some(0) {
        return Err(CliError::Usage(
            "--max-events 0: must be at least 1 (as [run] max_events)".into(),
        ));
    }
    Ok(())
}

/// "one of A, B, C", with "; did you mean `A`?" when the value is close to one (a wrong case, a
/// letter off): the message of every enum-valued flag, as the scenario loader's for its fields.
pub fn one_of(value: &str, allowed: &[&str]) -> String {
    format!(
        "one of {}{}",
        allowed.join(", "),
        sim::suggest::did_you_mean(value, allowed.iter().copied())
    )
}

/// `FLAG "VALUE": one of ...` ([`one_of`]).
pub fn not_one_of(flag: &str, value: &str, allowed: &[&str]) -> String {
    format!("{flag} {value:?}: {}", one_of(value, allowed))
}

/// Checks that `count` seeds from `first` (`first`, `first + 1`, ...) stay within `u64`: what
/// is wrong, naming `flags` (the flags or fields that chose them), if they do not.
pub fn check_seed_range(first: u64, count: u64, flags: &str) -> Result<(), String> {
    if count > 0 && first.checked_add(count - 1).is_none() {
        return Err(format!(
            "{count} seeds from {first} ({flags}) pass the largest seed, {}: choose a smaller \
             first seed",
            u64::MAX
        ));
    }
    Ok(())
}

/// Checks `--max-sim-time`: above 0, as `--max-events` is at least 1 (a run cut off at time 0
/// produces nothing, and its empty table read `ok`).
pub fn check_max_sim_time(max_sim_time: Option<u64>) -> Result<(), CliError> {
    if max_sim_time == Some(0) {
        return Err(CliError::Usage(
            "--max-sim-time 0s: must be above 0 (a run cut off at time 0 produces nothing); \
             leave it out for no bound"
                .into(),
        ));
    }
    Ok(())
}

/// Whether `a` and `b` are one existing file (by device and inode on Unix, so a hard link or a
/// second spelling of the path counts; by canonical path elsewhere).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Checks, before any work, that a command can write everything it will, so that it fails now
/// rather than after an hour's runs, and leaves what the user already has as it was. `dir` is its
/// `--out` folder (made if missing), `files` each file it writes with the flag that names it:
/// under `dir` (in folders made if missing) or elsewhere (`--trace`, `--junit`: in a folder that
/// must exist). `inputs` are the files it reads (`-`, standard input, is none). Refused, naming
/// the path, with exit 2:
///
/// - a folder on the way that is not a directory (`--out notes.txt/x`), a `--trace` or `--junit`
///   folder that does not exist, and a folder that does not take a new file (read-only, or on a
///   read-only file system): [`CliError::Unwritable`];
/// - a directory where a file goes (`D/runs.csv/`, `D/.sim-run.lock/`): the file could not
///   replace it ([`CliError::Unwritable`]);
/// - a file that is one of the inputs (`sim run s.toml --trace s.toml`, `sim judge
///   D/history.jsonl --out D`): writing it would destroy the input ([`CliError::Usage`]).
///
/// Nothing is written: a folder is tried with a new file of its own name (`.sim-probe-PID`),
/// removed at once.
pub fn check_outputs(
    dir: Option<&Path>,
    files: &[(&str, PathBuf)],
    inputs: &[&Path],
) -> Result<(), CliError> {
    // The folders found able to take a new file (each tried once).
    let mut writable = std::collections::BTreeSet::new();
    let words = |flag: &str| {
        if flag.ends_with("--out") {
            "folder"
        } else {
            "path"
        }
    };
    let mut try_folder = |folder: &Path, path: &Path, flag: &str| -> Result<(), CliError> {
        if writable.contains(folder) {
            return Ok(());
        }
        let probe = folder.join(format!(".sim-probe-{}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe)
        {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
            }
            // Not ours: left alone; the folder takes files.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(CliError::unwritable(
                    path,
                    if folder == path {
                        format!(
                            "it is not writable ({e}): make it writable, or choose another folder"
                        )
                    } else {
                        format!(
                            "the folder {} is not writable ({e}): choose another {}",
                            folder.display(),
                            words(flag)
                        )
                    },
                ))
            }
        }
        writable.insert(folder.to_path_buf());
        Ok(())
    };
    if let Some(dir) = dir {
        let (found, is_dir) = nearest_existing(dir);
        if !is_dir {
            return Err(CliError::unwritable(
                dir,
                if found == dir {
                    "it exists and is not a directory (--out names a folder to write into)".into()
                } else {
                    format!(
                        "{} exists and is not a directory (--out names a folder to write into)",
                        found.display()
                    )
                },
            ));
        }
        try_folder(&found, dir, "--out")?;
    }
    for (flag, file) in files {
        if file.is_dir() {
            return Err(CliError::unwritable(
                file,
                format!(
                    "it is a directory, where {flag} writes a file: move it away, or choose \
                     another {}",
                    words(flag)
                ),
            ));
        }
        let parent = folder_of(file);
        let (found, is_dir) = nearest_existing(parent);
        if !is_dir {
            return Err(CliError::unwritable(
                file,
                format!("{} exists and is not a directory", found.display()),
            ));
        }
        // Folders under --out are made; a --trace or --junit file's must be there.
        let made = *flag == "--out" && dir.is_some_and(|d| parent.starts_with(d));
        if found != parent && !made {
            return Err(CliError::unwritable(
                file,
                format!("the folder {} does not exist", parent.display()),
            ));
        }
        try_folder(&found, file, flag)?;
    }
    for (flag, out) in files {
        for input in inputs.iter().filter(|i| i.as_os_str() != "-") {
            if same_file(out, input) {
                return Err(CliError::Usage(format!(
                    "{flag} would write {} over the input {} (the same file), destroying it: \
                     choose another {}",
                    out.display(),
                    input.display(),
                    words(flag)
                )));
            }
        }
    }
    Ok(())
}

/// The folder `path` is in: its parent, `.` for a bare name.
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The nearest of `path` and its ancestors that exists (a symlink followed; `.` for a relative
/// path none of whose parts exists), and whether it is a directory.
fn nearest_existing(path: &Path) -> (PathBuf, bool) {
    for a in path.ancestors() {
        let a = if a.as_os_str().is_empty() {
            Path::new(".")
        } else {
            a
        };
        if let Ok(m) = std::fs::metadata(a) {
            return (a.to_path_buf(), m.is_dir());
        }
    }
    (PathBuf::from("."), true)
}

/// The files `sim KIND --out DIR` writes into DIR through an [`OutputSet`]: `names`,
/// `KIND-manifest.json` and the lock [`RUN_LOCK`].
pub fn out_files(kind: &str, dir: &Path, names: &[&str]) -> Vec<(&'static str, PathBuf)> {
    names
        .iter()
        .map(|n| dir.join(n))
        .chain([
            dir.join(format!("{kind}-manifest.json")),
            dir.join(RUN_LOCK),
        ])
        .map(|p| ("--out", p))
        .collect()
}

/// Fails on a strategy name that is not in the registry, listing the known ones, or one given
/// twice (as a scenario's `strategies` list is checked).
pub fn check_strategy_names(names: &[String]) -> Result<(), CliError> {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(CliError::Usage(format!(
                "--strategy {n:?} is given twice: each strategy runs once"
            )));
        }
    }
    for n in names {
        if !strategies::is_known(n) {
            let known: Vec<&str> = strategies::ALL.iter().map(|i| i.name).collect();
            return Err(CliError::Usage(format!(
                "unknown strategy {n:?} (known: {}){}",
                known.join(", "),
                sim::suggest::did_you_mean(n, known.iter().copied())
            )));
        }
    }
    Ok(())
}

/// `sim run --strict`: an error naming every strategy whose run did not settle and how it ended.
pub fn strict_settled(s: &RunSummary) -> Result<(), CliError> {
    if report::all_settled(s) {
        return Ok(());
    }
    let unsettled: Vec<String> = s
        .strategies
        .iter()
        .filter_map(|st| {
            let m = st.metrics.as_ref()?;
            (m.ended_by != sim::summary::EndReason::Settled).then(|| {
                format!(
                    "{} (ended_by = {})",
                    st.strategy,
                    report::end_reason_name(m.ended_by)
                )
            })
        })
        .collect();
    Err(CliError::Unsettled(format!(
        "{} run(s) did not settle: {}",
        unsettled.len(),
        unsettled.join(", ")
    )))
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

/// The scenario's display name: its `name`, else the file stem, with control characters escaped
/// (`\u{1b}`), so a name cannot move a terminal's cursor, clear its screen or break a Markdown
/// heading.
pub fn scenario_name(sc: &Scenario, file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    escape_controls(sc.display_name(&stem), false)
}

/// `s` with every control or bidirectional character ([`sim::is_unsafe_char`]) written as a Rust
/// escape (`\u{1b}`, `\r`); with `keep_lines`, line feeds and tabs stay (multi-line text such as
/// a description).
pub fn escape_controls(s: &str, keep_lines: bool) -> String {
    sim::escape_unsafe(s, |c| keep_lines && (c == '\n' || c == '\t')).into_owned()
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
    check_max_events(req.max_events)?;
    check_max_sim_time(req.max_sim_time)?;
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
/// `trace`: write the history of the (single) strategy as JSON lines, after a header naming the
/// nodes and with the anomalies found as annotation lines ([`trace`]).
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
    let bar = progress::Progress::new(names.len() as u64, "strategies", req.progress);
    for name in &names {
        bar.set_message(name.clone());
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
                let header = trace::TraceHeader::of(&sc, file, Some(name), Some(seed))
                    .with_faults(&sc, &plan);
                let mut w = trace::TraceWriter::new(std::io::BufWriter::new(f), &header);
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
        bar.inc();
    }
    bar.finish();
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

/// The header printed above the table: repro line, topology, the resolved fault plan and every
/// strategy's effective parameters (with hazard warnings).
pub fn header(r: &RunResult, file: &Path) -> String {
    let sc = &r.scenario;
    let w = &sc.workload;
    let mut s = format!(
        "repro: {}\n",
        repro_line(&file.display().to_string(), r.summary.seed, None)
    );
    s.push_str(&format!(
        "scenario {}: {} broker(s), {} producer(s), {} consumer(s) (prefetch {}), {} {} messages at {} over {} keys, {}\n",
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
        redelivery_phrase(sc),
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
    s.push_str(&escape_controls(&report::params_block(&r.summary), true));
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
    // A text file (anything but a PNG that reads as UTF-8) is escaped as text is; SVG and HTML
    // are also escaped for their format where their text is made (plotters, `timeline::esc`).
    let is_png = path.extension().is_some_and(|e| e == "png");
    let text = std::str::from_utf8(contents).ok().filter(|_| !is_png);
    let contents = match text.map(safe_text) {
        Some(std::borrow::Cow::Owned(escaped)) => escaped.into_bytes().into(),
        _ => std::borrow::Cow::Borrowed(contents),
    };
    let written = std::fs::write(&tmp, &contents).and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        // A failed write (a full disk, a folder made read-only meanwhile) leaves no `*.tmp`.
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(err)
}

/// Creates `dir` (and its parents). When `dir`, or a folder it would go under, is an existing
/// file (`--out summary.csv`, `--out notes.txt/run`), or a folder that takes no new file, the
/// error says so: the system's own words were "File exists" or "Not a directory".
pub fn create_dir(dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        // In the words of the check before the work ([`check_outputs`]: a folder changed
        // since), or the system's when that finds nothing wrong.
        check_outputs(Some(dir), &[], &[])
            .err()
            .unwrap_or_else(|| CliError::unwritable(dir, e.to_string()))
    })
}

/// The files [`write_figure`] writes for the chart `name`: `NAME.svg`, `NAME.png` (what a
/// command lists among its outputs to check them before the work).
pub fn figure_files(name: &str) -> [String; 2] {
    [format!("{name}.svg"), format!("{name}.png")]
}

/// Writes a chart as [`figure_files`] under `dir`.
pub fn write_figure(dir: &Path, name: &str, fig: &charts::Figure) -> Result<(), CliError> {
    let [svg, png] = figure_files(name);
    write_atomic(&dir.join(svg), fig.svg.as_bytes())?;
    write_atomic(&dir.join(png), &fig.png)
}

/// The files [`write_outputs`] writes, in order.
pub const RUN_FILES: [&str; 7] = [
    "summary.csv",
    "summary.json",
    "chart.svg",
    "chart.png",
    "cost.svg",
    "cost.png",
    "report.md",
];

/// Writes `summary.csv`, `summary.json`, the charts (`chart.svg`/`.png`, and `cost.svg`/`.png`:
/// each strategy's guarantee figure against its p99 latency) and `report.md`
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
    let cost = charts::cost_chart(&r.summary).map_err(|e| CliError::Output {
        path: dir.join("cost.svg").display().to_string(),
        reason: e.to_string(),
    })?;
    write_figure(dir, "cost", &cost)?;
    write_atomic(&dir.join("report.md"), run_report(r, file).as_bytes())
}

/// The manifest `sim run --out` writes last: which run the files are of, and a hash of each.
/// A folder without it (or whose files do not match it) holds no complete output set.
pub const RUN_MANIFEST: &str = "run-manifest.json";
/// The lock file `sim run --out DIR` holds while it writes into DIR.
pub const RUN_LOCK: &str = ".sim-run.lock";

/// A test-only failure point: in debug builds (the tests'), when `ORDSIM_FAILPOINT` names `point`,
/// the process stops there at once, as an interrupt or a crash would stop it (no cleanup). Release
/// builds ignore the variable.
pub fn failpoint(point: &str) {
    if cfg!(debug_assertions) && std::env::var_os("ORDSIM_FAILPOINT").is_some_and(|v| v == point) {
        failpoint_stop(point);
    }
}

/// Whether the test-only failure point `point:count` is set (`ORDSIM_FAILPOINT=sweep-journal:5`
/// stops a sweep right after its fifth journal row), in debug builds only.
pub fn failpoint_at(point: &str, count: u64) -> bool {
    cfg!(debug_assertions)
        && std::env::var("ORDSIM_FAILPOINT").is_ok_and(|v| v == format!("{point}:{count}"))
}

/// Stops the process at a failure point, as [`failpoint`] does.
pub fn failpoint_stop(point: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "failpoint {point}: stopping");
    std::process::exit(99);
}

/// A command's `--out DIR` (`sim run`, `sim trace`, `sim explore`), made ready before the work:
/// DIR exists, its lock is held (a second writer is refused, not mixed in), and the staging
/// folder (a sibling of DIR, on the same file system) is created, so an unwritable DIR fails
/// before a long run, not after. The command writes its files into [`OutputSet::staging`], then
/// [`OutputSet::publish`] replaces them in DIR as a whole, with `KIND-manifest.json` last.
pub struct OutputSet {
    dir: PathBuf,
    staging: PathBuf,
    kind: &'static str,
    /// DIR did not exist before: made here, it goes again if nothing is put in it.
    made: bool,
    _lock: std::fs::File,
}

impl OutputSet {
    /// Prepares `dir` for `sim run --out`.
    pub fn prepare(dir: &Path) -> Result<OutputSet, CliError> {
        Self::prepare_for("run", dir)
    }

    /// Prepares `dir` for the command `sim KIND` (its manifest is `KIND-manifest.json`, its
    /// failure points `KIND-out-before-...`).
    pub fn prepare_for(kind: &'static str, dir: &Path) -> Result<OutputSet, CliError> {
        let out_err = |p: &Path, reason: String| CliError::Output {
            path: p.display().to_string(),
            reason,
        };
        let made = std::fs::symlink_metadata(dir).is_err();
        create_dir(dir)?;
        let lock_path = dir.join(RUN_LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| CliError::unwritable(&lock_path, e.to_string()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(out_err(
                    dir,
                    format!(
                        "another `sim run` (or `sim trace`, `sim explore`) is writing into it \
                         (it holds {}); wait for it, or choose another --out",
                        lock_path.display()
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(out_err(&lock_path, e.to_string())),
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let parent = folder_of(dir);
        let staging = parent.join(format!(".{name}.sim-partial"));
        // Ours by name, and we hold DIR's lock: what is there is a crashed run's leftovers.
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| out_err(&staging, e.to_string()))?;
        }
        std::fs::create_dir(&staging).map_err(|e| {
            CliError::unwritable(
                dir,
                format!(
                    "the staging folder {} cannot be made beside it ({e}): make {} writable, or \
                     choose another --out",
                    staging.display(),
                    parent.display()
                ),
            )
        })?;
        Ok(OutputSet {
            dir: dir.to_path_buf(),
            staging,
            kind,
            made,
            _lock: lock,
        })
    }

    /// The folder the command writes its files into before [`OutputSet::publish`].
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// Writes the run's files into the staging folder, then publishes them with a manifest of
    /// the scenario, seed and strategies.
    pub fn write(self, r: &RunResult, file: &Path) -> Result<(), CliError> {
        write_outputs(r, file, &self.staging)?;
        let mut about = serde_json::Map::new();
        about.insert("scenario".into(), r.summary.scenario.clone().into());
        about.insert("seed".into(), r.summary.seed.into());
        about.insert(
            "strategies".into(),
            r.summary
                .strategies
                .iter()
                .map(|s| serde_json::Value::from(s.strategy.clone()))
                .collect(),
        );
        self.publish(&RUN_FILES, about)
    }

    /// Moves the staged files `names` into DIR: first the old manifest goes (so no manifest ever
    /// describes a mixed set), then each file, then the new manifest: `about` (what the set is
    /// of) and an FNV-1a hash of each file. Files of DIR that are not the set's are left alone.
    pub fn publish(
        self,
        names: &[&str],
        mut about: serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), CliError> {
        let mut files = serde_json::Map::new();
        for &name in names {
            let bytes = std::fs::read(self.staging.join(name)).map_err(|e| CliError::Output {
                path: self.staging.join(name).display().to_string(),
                reason: e.to_string(),
            })?;
            files.insert(
                name.to_string(),
                format!("{:016x}", sim::hash::fnv1a(&bytes)).into(),
            );
        }
        about.insert("files".into(), files.into());
        let mut text = serde_json::to_string_pretty(&about).expect("manifest serializes");
        text.push('\n');
        let old = self.dir.join(format!("{}-manifest.json", self.kind));
        match std::fs::remove_file(&old) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(CliError::Output {
                    path: old.display().to_string(),
                    reason: e.to_string(),
                })
            }
        }
        for &name in names {
            failpoint(&format!("{}-out-before-{name}", self.kind));
            let to = self.dir.join(name);
            std::fs::rename(self.staging.join(name), &to).map_err(|e| CliError::Output {
                path: to.display().to_string(),
                reason: e.to_string(),
            })?;
        }
        failpoint(&format!("{}-out-before-manifest", self.kind));
        write_atomic(&old, text.as_bytes())?;
        let _ = std::fs::remove_dir(&self.staging);
        Ok(())
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        // A run that failed leaves no staging folder behind (the lock is released with the file).
        let _ = std::fs::remove_dir_all(&self.staging);
        // Nor, when it made DIR and nothing was put in it (a strategy misspelt, a --trace path
        // that cannot be written, an explore that found nothing), DIR holding only its lock.
        if self.made {
            let only_lock = std::fs::read_dir(&self.dir).is_ok_and(|entries| {
                entries
                    .filter_map(Result::ok)
                    .all(|e| e.file_name() == RUN_LOCK)
            });
            if only_lock {
                let _ = std::fs::remove_file(self.dir.join(RUN_LOCK));
                let _ = std::fs::remove_dir(&self.dir);
            }
        }
    }
}

/// The Markdown page of one run: what ran, against which faults, the table and the chart.
pub fn run_report(r: &RunResult, file: &Path) -> String {
    let mut s = format!("# {}: seed {}\n\n", r.summary.scenario, r.summary.seed);
    if let Some(d) = &r.scenario.description {
        s.push_str(&format!("{}\n\n", escape_controls(d, true)));
    }
    s.push_str("```\n");
    s.push_str(&header(r, file));
    s.push_str("```\n\n");
    s.push_str(&report::table_markdown(&r.summary));
    for w in report::unsettled_warnings(&r.summary, &r.scenario) {
        s.push_str(&format!("\n{w}\n"));
    }
    s.push_str(&format!(
        "\n![{} compared, seed {}](chart.svg)\n\n",
        r.summary.scenario, r.summary.seed
    ));
    s.push_str(&columns_legend_for(report::grouped(&r.summary)));
    s.push_str(
        "\nData: [summary.csv](summary.csv), [summary.json](summary.json); charts also as \
         [PNG](chart.png), and what order costs: [cost.svg](cost.svg) ([PNG](cost.png)).\n",
    );
    s
}

/// What each table column is, generated from the metric definitions (the full reference:
/// docs/metrics.md, `sim list --metrics`).
pub fn columns_legend() -> String {
    columns_legend_for(false)
}

/// [`columns_legend`], with the columns of correlation groups when `grouped`.
pub fn columns_legend_for(grouped: bool) -> String {
    let shown = report::columns(grouped);
    let cols: Vec<String> = sim::metric_defs::METRICS
        .iter()
        .filter(|d| shown.iter().any(|(_, flat)| *flat == d.flat()))
        .filter_map(|d| {
            d.column
                .map(|c| format!("`{c}` = {} ({})", d.title.to_lowercase(), d.unit))
        })
        .collect();
    format!(
        "Columns: {}; `verdict` = `ok` when the strategy's guarantee held (the figure `sim list` \
         names for it is 0, and no stale write) and every message that should have taken effect \
         did, else `FAIL:` and why, worst first. Every figure is defined in docs/metrics.md \
         (`sim list --metrics`).\n",
        cols.join("; ")
    )
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

/// The resolved redelivery policy in a few words: `activemq redelivery: blocking after 1s, gives
/// up after 7 deliveries to the dead-letter queue`.
pub fn redelivery_phrase(sc: &sim::Scenario) -> String {
    use sim::scenario::{DeadLetter, FlavourChoice, Limit, RedeliveryMode};
    if sc.flavour == FlavourChoice::Native {
        return "each strategy on its own broker's defaults (flavour = \"native\": sim list shows which)"
            .into();
    }
    let p = sc.redelivery_policy();
    let mode = match p.mode {
        RedeliveryMode::Blocking => "blocking",
        RedeliveryMode::NonBlocking => "non-blocking",
    };
    let delay = if p.until_lease_end {
        // SQS: the visibility timeout runs from the receive, not from the failure.
        format!(
            "when the {} lease from the receive ends",
            p.initial_delay.readable()
        )
    } else if p.initial_delay.0 == 0 {
        "at once".to_string()
    } else {
        format!("after {}", p.initial_delay.readable())
    };
    let to = |d| match d {
        DeadLetter::Queue => "the dead-letter queue",
        DeadLetter::Drop => "the bin (dropped)",
    };
    let mut targets: Vec<&str> = sc.brokers.iter().map(|b| to(p.dead_letter(b))).collect();
    targets.dedup();
    let limit = match p.limit {
        Limit::Unlimited => "never gives up".to_string(),
        Limit::Deliveries(n) => {
            let deliveries = if n == 1 { "delivery" } else { "deliveries" };
            let on = if p.redrive_on_receive {
                " (on the next receive)"
            } else if !p.count_failed {
                // A RabbitMQ 4.3 quorum queue under nacks: only consumer deaths count.
                " ended by a consumer's death (a nack is not counted)"
            } else {
                ""
            };
            format!(
                "gives up after {n} {deliveries}{on} to {}",
                targets.join(" or ")
            )
        }
    };
    // Kafka's release decides its producer's linger, not its redelivery.
    let name = match sc.broker_version(0) {
        Some(v) if sc.flavour != sim::scenario::Flavour::Kafka => {
            format!("{} {v}", sc.flavour.name())
        }
        _ => sc.flavour.name().to_string(),
    };
    format!("{name} redelivery: {mode} {delay}, {limit}")
}

/// Which setting makes the redelivery limit what it is, for messages about it.
pub fn limit_source(sc: &sim::Scenario) -> String {
    let r = &sc.redelivery;
    match (r.max_redeliveries, r.backout_threshold) {
        (Some(n), _) => format!("max_redeliveries = {n}"),
        (None, Some(n)) => format!("backout_threshold = {n}"),
        (None, None) => format!("the {} default", sc.flavour.name()),
    }
}

/// `sim list`: strategies and fault kinds, one line each.
pub fn list_text() -> String {
    let mut s = String::from(
        "strategies (name, the figure its ordering guarantee is about, what it models):\n",
    );
    for i in strategies::ALL {
        s.push_str(&format!(
            "  {:<18} {:<20} {}\n",
            i.name, i.guarantee, i.summary
        ));
    }
    let native: Vec<String> = strategies::ALL
        .iter()
        .filter(|i| i.flavour != sim::scenario::Flavour::Activemq)
        .map(|i| format!("{} on {}", i.name, i.flavour.name()))
        .collect();
    s.push_str(&format!(
        "\nunder flavour = \"native\" each strategy runs on its own broker's defaults: {}; the others on activemq\n",
        native.join(", ")
    ));
    s.push_str(&format!(
        "\ncomposed strategies (one's dispatch with another's handler, each part configured by its own [strategy.NAME]):\n  DISPATCH+HANDLER with DISPATCH one of {} and HANDLER one of {}\n  (e.g. kafka+db_optimistic; {} pairs)\n",
        strategies::compose::dispatch_parts().join(", "),
        strategies::compose::handler_parts().join(", "),
        strategies::compose::pairs().len()
    ));
    s.push_str(
        "\nstrategy parameters: sim list --params\nthe figures of a run: sim list --metrics\n",
    );
    s.push_str("\nfault kinds ([[fault]] kind = ...):\n");
    for k in sim::scenario::FaultKind::ALL {
        s.push_str(&format!("  {:<18} {}\n", k.name(), k.spec().summary));
    }
    s
}

/// The docs' generated sections, by the name `sim list --doc NAME` takes. A doc marks its copy
/// `<!-- generated by `sim list --doc NAME` ... -->` ... `<!-- end generated -->`, and a test
/// (tests/cli.rs) keeps every marked copy equal to the command's output.
pub const DOC_SECTIONS: [&str; 4] = [
    "strategies",
    "strategy-params",
    "fault-kinds",
    "fault-fields",
];

/// The generated section `name` of the docs ([`DOC_SECTIONS`]), from its one source in the code.
pub fn doc_section(name: &str) -> Option<String> {
    match name {
        "strategies" => Some(strategies::reference_markdown()),
        "strategy-params" => Some(strategies::params_markdown()),
        "fault-kinds" => Some(sim::faults::kinds_markdown()),
        "fault-fields" => Some(sim::faults::fields_markdown()),
        _ => None,
    }
}

/// `sim list --params`: every strategy's `[strategy.NAME]` parameters with their meaning, unit,
/// default, the real setting they model, and the values that reorder or lose messages even
/// without faults.
pub fn list_params_text() -> String {
    let mut s = String::new();
    for i in strategies::ALL {
        s.push_str(&format!("[strategy.{}]  {}\n", i.name, i.summary));
        if i.params.is_empty() {
            s.push_str("  (no parameters)\n");
        }
        for p in i.params {
            s.push_str(&format!("  {} = {}  (default)\n", p.name, p.default));
            s.push_str(&format!("      {}\n", p.meaning));
            s.push_str(&format!("      unit: {}\n", p.unit));
            if p.range != strategies::Range::Any {
                s.push_str(&format!("      allowed: {}\n", p.range));
            }
            if let Some(sizes) = &p.sizes {
                s.push_str(&format!(
                    "      sizes: {} (within [run] memory_budget_mb and max_events)\n",
                    sizes.what
                ));
            }
            s.push_str(&format!("      models: {}\n", p.models));
            if let Some(h) = &p.hazard {
                s.push_str(&format!(
                    "      hazard (no fault needed), when {}: {}\n",
                    h.when, h.effect
                ));
            }
        }
        s.push('\n');
    }
    s
}
