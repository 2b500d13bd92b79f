//! `sim`: run ordering strategies side by side against seeded fault scenarios.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use ordsim::{CliError, RunRequest};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "sim",
    version,
    about = "Deterministic simulation of message-ordering strategies under faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every strategy of a scenario against the same seeded faults and print a comparison table.
    Run {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Seed (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Run only this strategy (repeatable; default: the scenario's list).
        #[arg(long = "strategy")]
        strategies: Vec<String>,
        /// Print the JSON summary instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write summary.csv, summary.json, the chart (SVG, PNG) and report.md into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the history of the run (one strategy) as JSON lines.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Stop each run after this many engine events.
        #[arg(long)]
        max_events: Option<u64>,
        /// Stop each run at this simulated time (e.g. "2h").
        #[arg(long)]
        max_sim_time: Option<String>,
        /// Run each strategy twice and compare a hash of the whole history (exit 1 on a difference,
        /// naming the first event that differs).
        #[arg(long)]
        check_determinism: bool,
        /// Exit 1 when any strategy's run did not settle (ended_by other than `settled`); the table
        /// and the --out files are still written first.
        #[arg(long)]
        strict: bool,
    },
    /// Run a scenario against a real broker (ActiveMQ Classic, or RabbitMQ under a `rabbitmq`
    /// flavour) started as a child process, with ordsim's consumers or your own (--consumer), and
    /// judge the recorded history with the same checkers (needs the `live` cargo feature;
    /// docs/live.md).
    Live {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Run only this strategy (repeatable; staged: competing, single, message_groups; on RabbitMQ
        /// competing, single, rabbitmq_sac, rabbitmq_hash).
        #[arg(long = "strategy")]
        strategies: Vec<String>,
        /// Runs per strategy, with seeds SEED, SEED+1, ...
        #[arg(long, default_value_t = 1)]
        runs: u32,
        /// First seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Write each run's history (trace format) into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Longest wait for the queue to drain after production and the faults, e.g. "30s".
        #[arg(long, default_value = "30s")]
        drain_timeout: String,
        /// Exit 1 (after the table) when a run fell behind the schedule's rate or a crash
        /// missed its time by more than 1 ms.
        #[arg(long)]
        strict: bool,
        /// Test your own consumer: the scenario's consumers are copies of this command (run
        /// with `sh -c`), reporting what they apply on stdout (or see --writes); the file's
        /// consumer_crash, consumer_pause and network_blip faults are staged on them (docs/live.md,
        /// "Your own consumer").
        #[arg(long, value_name = "CMD")]
        consumer: Option<String>,
        /// With --consumer: read what the consumers applied from this table of their PostgreSQL
        /// database (a trigger logs each write), e.g. 'rows(k,state)': the key and seq columns.
        #[arg(long, value_name = "TABLE(KEY,SEQ)")]
        writes: Option<String>,
        /// With --consumer: SQL run on the consumers' database before they start (default: a
        /// table rows(k integer primary key, state integer, version bigint)).
        #[arg(long, value_name = "FILE")]
        schema: Option<PathBuf>,
    },
    /// Run each scenario in the simulator over many seeds and live against ActiveMQ over a few
    /// runs; print per strategy and metric the simulator's range beside each live value with a
    /// verdict (exit 0 all within, 1 some outside, 2 bad input; needs the `live` cargo feature;
    /// docs/calibration.md).
    Calibrate {
        /// Scenario files or directories (every *.toml directly in a directory, sorted).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Simulator seeds per strategy (the scenario's seed and the next ones).
        #[arg(long, default_value_t = 20)]
        sim_seeds: u64,
        /// Live runs per strategy (the scenario's seed and the next ones).
        #[arg(long, default_value_t = 3)]
        runs: u32,
        /// Widen the simulator's range: `0.25` or `rel=0.25` (share of its span, each side), or
        /// `METRIC=ABS` (absolute slack of one metric, e.g. `latency_ms.p99=10`), or `METRIC=N%`
        /// (a further slack of N% of the simulator's largest value); repeatable.
        #[arg(long = "tolerance")]
        tolerance: Vec<String>,
        /// Write calibration.csv, one chart per scenario (SVG, PNG) and the live histories here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Longest wait for the queue to drain after production and the faults, e.g. "30s".
        #[arg(long, default_value = "30s")]
        drain_timeout: String,
    },
    /// Judge a history recorded elsewhere (CSV or JSON lines: time, event, key, seq, node; or the
    /// --trace format) with the same checkers and print the same table; figures the history
    /// cannot give are `?` (docs/judge.md).
    Judge {
        /// The history file.
        file: PathBuf,
        /// What a message means to the target: `state` (the default) or `command`.
        #[arg(long)]
        kind: Option<String>,
        /// The figure the consumer promises to keep at 0: ordering_violations or stale_writes
        /// (default: the strategy's when the history names one, else ordering_violations).
        #[arg(long)]
        guarantee: Option<String>,
        /// Also write summary.csv, summary.json, history.jsonl (the --trace format), keys.csv and
        /// timeline.html into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Exit 1 when the verdict fails (for a CI step); the table and the --out files are
        /// still written first.
        #[arg(long)]
        strict: bool,
    },
    /// Tell one key's story around its first anomaly: a text timeline, and timeline.html with
    /// --out (exit 1 when there is no anomaly to show).
    Trace {
        /// The scenario file (or give --history).
        file: Option<PathBuf>,
        /// The strategy whose run to follow (required with a scenario).
        #[arg(long)]
        strategy: Option<String>,
        /// Follow this key (default: the key of the run's first aimed anomaly).
        #[arg(long)]
        key: Option<u32>,
        /// Aim at this kind of anomaly, by its summary figure: ordering_violations,
        /// stale_writes, duplicates, lost, innocent_dropped, final_state_mismatches.
        #[arg(long, value_name = "KIND")]
        anomaly: Option<String>,
        /// List every key with aimed anomalies, with counts by kind, instead of one story.
        #[arg(long)]
        keys: bool,
        /// Only anomalies and events from this simulated time on, e.g. "30s".
        #[arg(long, value_name = "TIME")]
        from: Option<String>,
        /// Only anomalies and events up to this simulated time, e.g. "2m".
        #[arg(long, value_name = "TIME")]
        to: Option<String>,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Judge a recorded history (JSON lines, the --trace format) instead of running a scenario.
        #[arg(long)]
        history: Option<PathBuf>,
        /// Write timeline.html into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Stop the run after this many engine events.
        #[arg(long)]
        max_events: Option<u64>,
    },
    /// Search fault mixes for a run that breaks a property, shrink it, and write it as a small
    /// scenario file (exit 1 when a run fails, 0 when none does; docs/explore.md).
    Explore {
        /// The scenario file (its random faults and [explore] section say what to draw).
        file: PathBuf,
        /// The strategy to break.
        #[arg(long)]
        strategy: String,
        /// Runs to try at most (each draws a seed and a fault mix).
        #[arg(long, default_value_t = 100)]
        runs: u64,
        /// Seed of the exploration (default: the scenario's); the same seed gives the same output.
        #[arg(long)]
        seed: Option<u64>,
        /// Runs in parallel (default: every core; the output does not depend on it).
        #[arg(long)]
        jobs: Option<usize>,
        /// A bound every run must meet, NAME=BOUND (`lost=0`, `"latency_ms.p99 < 5000"`;
        /// repeatable). Default: the scenario's [expect] bounds for the strategy, else its
        /// guarantee figure, `lost` and `final_state_mismatches` are 0.
        #[arg(long = "property")]
        properties: Vec<String>,
        /// Directory for the shrunk scenario file (default: the current directory).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a scenario file and print its resolved fault plan.
    Validate {
        /// The scenario file.
        file: PathBuf,
        /// Seed for the fault plan (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Run every scenario's [expect] section and judge it (exit 1 on any failure, 2 on bad input).
    Check {
        /// Scenario files or directories (searched recursively for *.toml).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Also write the verdicts as JUnit XML.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Runs in parallel (default: every core; the results do not depend on it).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// List the strategies and fault kinds.
    List {
        /// Describe every strategy parameter instead: meaning, unit, default, the real setting it
        /// models, and values that reorder or lose messages even without faults.
        #[arg(long, conflicts_with = "metrics")]
        params: bool,
        /// Describe every figure of a run's summary instead: its name (JSON, CSV, `[expect]`),
        /// table column, unit and meaning (the reference in docs/metrics.md).
        #[arg(long)]
        metrics: bool,
        /// Print one generated section of the docs (docs/scenarios.md's strategy and `[[fault]]`
        /// tables), from its one source in the code.
        #[arg(long, value_name = "SECTION", conflicts_with_all = ["params", "metrics"],
              value_parser = doc_section)]
        doc: Option<String>,
    },
    /// Run a grid of parameter values x seeds x strategies in parallel: runs.csv (one row per run),
    /// aggregate.csv (mean, min, max, 95% interval across seeds), charts and report.md.
    Sweep {
        /// The scenario file.
        file: PathBuf,
        /// Seeds, both ends included: "1..20".
        #[arg(long)]
        seeds: String,
        /// A parameter and its values, as a dotted path into the scenario file:
        /// `--set consumers.count=1,2,4,8`, `--set fault.0.rate=1/h,10/h` (repeatable; the first is
        /// the charts' x axis).
        #[arg(long = "set")]
        sets: Vec<String>,
        /// Run only this strategy (repeatable; default: the scenario's list).
        #[arg(long = "strategy")]
        strategies: Vec<String>,
        /// Runs in parallel (default: every core; the output does not depend on it).
        #[arg(long)]
        jobs: Option<usize>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Run only slice I of N (1-based, e.g. 2/8); combine the slices with `sim merge`.
        #[arg(long)]
        shard: Option<String>,
        /// Continue an interrupted sweep in --out, skipping the runs already saved.
        #[arg(long)]
        resume: bool,
        /// Stop each run after this many engine events.
        #[arg(long)]
        max_events: Option<u64>,
    },
    /// Regenerate the reports of a scenario library: each scenario at its seed (table, chart,
    /// report.md), its [sweep] section, and an index (`sim report scenarios/ --out reports/`).
    Report {
        /// Scenario files or directories (searched recursively for *.toml).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Scenarios in parallel (the output does not depend on it; default: every core).
        #[arg(long)]
        jobs: Option<usize>,
    },
    /// Combine the --out directories of `sim sweep --shard` runs into the outputs of one sweep.
    Merge {
        /// The shards' output directories (every shard exactly once).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Re-run this many of the shards' rows (evenly spaced) and compare them byte for byte
        /// with what the shards saved (runs are deterministic).
        #[arg(long, default_value_t = 0)]
        verify: u64,
    },
    /// Time the engine on the M/M/c reference model: messages/s, wall time, the mean queue wait
    /// against Erlang C (batch-means z-test) and the ordering inversions.
    Bench {
        /// The scenario file (the default's built-in copy runs where that file is not).
        #[arg(default_value = ordsim::bench::DEFAULT_FILE)]
        file: PathBuf,
        /// Override `[workload] messages`.
        #[arg(long)]
        messages: Option<u64>,
        /// Timed runs (the median is reported).
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Strategy (default: the scenario's first).
        #[arg(long)]
        strategy: Option<String>,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
    },
}

/// `--doc`'s value: one of [`ordsim::DOC_SECTIONS`] (clap's own message suggested nothing for a
/// wrong case).
fn doc_section(s: &str) -> Result<String, String> {
    if ordsim::DOC_SECTIONS.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(ordsim::one_of(s, &ordsim::DOC_SECTIONS))
    }
}

/// `print!` that returns the write error instead of panicking (a closed pipe, a full disk).
macro_rules! out {
    ($($arg:tt)*) => {
        ordsim::stdout_write(&format!($($arg)*))?
    };
}

/// `println!` likewise.
macro_rules! outln {
    ($($arg:tt)*) => {{
        let mut s = format!($($arg)*);
        s.push('\n');
        ordsim::stdout_write(&s)?
    }};
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // No bar where no one watches a terminal: a line every 30 s instead, so a CI log shows a long
    // `sim check` is alive.
    if !ordsim::progress::wanted() {
        ordsim::progress::enable_heartbeat();
    }
    let result = run(cli).and_then(|()| ordsim::stdout_flush());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Failed) => ExitCode::from(1),
        // The reader went away (`sim run F | head -1`): nothing more to say, and no one to say it to.
        Err(CliError::BrokenPipe) => ExitCode::from(CliError::BrokenPipe.exit_code() as u8),
        Err(e) => {
            // A closed standard error must not turn an error into a panic either.
            ordsim::stderr_line(&format!("error: {e}"));
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Run {
            file,
            seed,
            strategies,
            json,
            out,
            trace,
            max_events,
            max_sim_time,
            check_determinism,
            strict,
        } => {
            let max_sim_time = max_sim_time
                .map(|s| sim::time::Dur::parse(&s).map(|d| d.micros()))
                .transpose()
                .map_err(|e| CliError::Usage(format!("--max-sim-time: {e}")))?;
            ordsim::check_max_sim_time(max_sim_time)?;
            ordsim::check_max_events(max_events)?;
            let sc = ordsim::load(&file)?;
            let req = RunRequest {
                seed,
                strategies,
                max_events,
                max_sim_time,
                progress: ordsim::progress::wanted(),
            };
            if check_determinism {
                for (name, hash, events) in ordsim::check_determinism(&sc, &file, &req)? {
                    outln!("{name}: deterministic ({events} events, history hash {hash:016x})");
                }
                return Ok(());
            }
            // Before the run: an output over the scenario file, or an --out that cannot be
            // written, fails now, not after an hour.
            let mut outputs: Vec<(&str, std::path::PathBuf)> = out
                .as_deref()
                .map(|d| ordsim::out_files("run", d, &ordsim::RUN_FILES))
                .unwrap_or_default();
            outputs.extend(trace.clone().map(|t| ("--trace", t)));
            ordsim::check_outputs(out.as_deref(), &outputs, &[&file])?;
            let out_set = out.as_deref().map(ordsim::OutputSet::prepare).transpose()?;
            let r = ordsim::run_scenario(sc, &file, &req, trace.as_deref())?;
            let mut warnings = ordsim::report::unsettled_warnings(&r.summary, &r.scenario);
            warnings.extend(trace.as_deref().and_then(|t| {
                ordsim::trace::unreadable_history_warning(t, ordsim::trace::MAX_HISTORY_BYTES)
            }));
            if json {
                out!("{}", ordsim::report::json(&r.summary));
                // The JSON stays clean for its reader; the warnings go to the terminal.
                for w in &warnings {
                    ordsim::stderr_line(w);
                }
            } else {
                out!(
                    "{}\n{}",
                    ordsim::header(&r, &file),
                    ordsim::report::table(&r.summary)
                );
                for w in &warnings {
                    outln!("{w}");
                }
            }
            // After the summary: a write that fails (a full disk) does not lose the run's
            // figures.
            if let Some(set) = out_set {
                set.write(&r, &file)?;
            }
            if let (Some(dir), false) = (&out, json) {
                outln!(
                    "\nwrote {}/{{{}}}",
                    dir.display(),
                    ordsim::RUN_FILES
                        .iter()
                        .chain([&ordsim::RUN_MANIFEST])
                        .copied()
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
            if strict {
                ordsim::strict_settled(&r.summary)?;
            }
            Ok(())
        }
        #[cfg(feature = "live")]
        Command::Live {
            file,
            strategies,
            runs,
            seed,
            out,
            drain_timeout,
            strict,
            consumer,
            writes,
            schema,
        } => {
            let drain_timeout = sim::time::Dur::parse(&drain_timeout)
                .map(|d| std::time::Duration::from_micros(d.micros()))
                .map_err(|e| CliError::Usage(format!("--drain-timeout: {e}")))?;
            let outcome = ordsim::live::live(&ordsim::live::LiveRequest {
                file,
                strategies,
                runs,
                seed,
                out,
                drain_timeout,
                strict,
                consumer,
                writes,
                schema,
            })?;
            out!("{}", outcome.text);
            if strict && !outcome.off.is_empty() {
                return Err(CliError::Live(format!(
                    "--strict: {}",
                    outcome.off.join("; ")
                )));
            }
            Ok(())
        }
        #[cfg(not(feature = "live"))]
        Command::Live { .. } => Err(CliError::Usage(
            "sim live needs the `live` cargo feature: cargo run --release --features live --bin sim -- live FILE (docs/live.md)".into(),
        )),
        #[cfg(feature = "live")]
        Command::Calibrate {
            paths,
            sim_seeds,
            runs,
            tolerance,
            out,
            drain_timeout,
        } => {
            let drain_timeout = sim::time::Dur::parse(&drain_timeout)
                .map(|d| std::time::Duration::from_micros(d.micros()))
                .map_err(|e| CliError::Usage(format!("--drain-timeout: {e}")))?;
            let mut tol = ordsim::calibrate::Tolerance::default();
            for t in &tolerance {
                tol.apply(t).map_err(CliError::Usage)?;
            }
            // It prints as it goes (live runs take minutes).
            let outcome = ordsim::live::calibrate::calibrate(&ordsim::live::calibrate::CalibrateRequest {
                paths,
                sim_seeds,
                runs,
                tolerance: tol,
                out,
                drain_timeout,
            })?;
            if !outcome.within() {
                return Err(CliError::Failed);
            }
            Ok(())
        }
        #[cfg(not(feature = "live"))]
        Command::Calibrate { .. } => Err(CliError::Usage(
            "sim calibrate needs the `live` cargo feature: cargo run --release --features live --bin sim -- calibrate scenarios/calibration (docs/calibration.md)".into(),
        )),
        Command::Trace {
            file,
            strategy,
            key,
            anomaly,
            keys,
            from,
            to,
            seed,
            history,
            out,
            max_events,
        } => {
            let aim = ordsim::trace::Aim::parse(anomaly.as_deref(), from.as_deref(), to.as_deref())?;
            if out.is_some() && keys {
                return Err(CliError::Usage(
                    "--keys prints a listing; --out writes one key's timeline: give one".into(),
                ));
            }
            if let Some(dir) = &out {
                let inputs: Vec<&std::path::Path> =
                    file.iter().chain(&history).map(|p| p.as_path()).collect();
                ordsim::check_outputs(
                    Some(dir),
                    &ordsim::out_files("trace", dir, &["timeline.html"]),
                    &inputs,
                )?;
            }
            // Staged as `sim run --out` is, and checked writable before the run.
            let out_set = out
                .as_deref()
                .map(|dir| ordsim::OutputSet::prepare_for("trace", dir))
                .transpose()?;
            let story = ordsim::trace::trace(&ordsim::trace::TraceRequest {
                file,
                history,
                strategy,
                key,
                seed,
                max_events,
                aim,
                list_keys: keys,
            })?;
            out!("{}", story.text());
            let what = match aim.kind {
                Some(_) => aim.describe(),
                None => format!("anomaly{}", aim.window_words()),
            };
            if keys {
                if story.per_key.is_empty() {
                    return Err(CliError::NoAnomaly(format!("no {what} in this run")));
                }
                return Ok(());
            }
            if let (Some(set), Some(dir)) = (out_set, &out) {
                let name = "timeline.html";
                ordsim::write_atomic(&set.staging().join(name), story.html().as_bytes())?;
                let mut about = serde_json::Map::new();
                about.insert("source".into(), story.source.clone().into());
                about.insert("key".into(), story.key.into());
                set.publish(&[name], about)?;
                outln!("wrote {}", dir.join(name).display());
            }
            if story.anomaly.is_none() {
                return Err(CliError::NoAnomaly(if story.key_chosen {
                    format!("no {what} on key {}", story.key)
                } else {
                    format!("no {what} in this run")
                }));
            }
            Ok(())
        }
        Command::Judge {
            file,
            kind,
            guarantee,
            out,
            strict,
        } => {
            let kind = kind
                .map(|k| {
                    serde_json::from_value(serde_json::Value::String(k.clone())).map_err(|_| {
                        CliError::Usage(ordsim::not_one_of("--kind", &k, &["state", "command"]))
                    })
                })
                .transpose()?;
            if let Some(dir) = &out {
                ordsim::check_outputs(
                    Some(dir),
                    &ordsim::out_files("judge", dir, &ordsim::judge::JUDGE_FILES),
                    &[&file],
                )?;
            }
            let out_set = out
                .as_deref()
                .map(|dir| ordsim::OutputSet::prepare_for("judge", dir))
                .transpose()?;
            let j = ordsim::judge::judge(&ordsim::judge::JudgeRequest {
                file: file.clone(),
                kind,
                guarantee,
            })?;
            out!("{}", j.text(&file));
            if let (Some(set), Some(dir)) = (out_set, &out) {
                ordsim::judge::write_out(&j, &file, set)?;
                outln!(
                    "\nwrote {}/{{{},judge-manifest.json}}",
                    dir.display(),
                    ordsim::judge::JUDGE_FILES.join(",")
                );
                if let Some(w) = ordsim::trace::unreadable_history_warning(
                    &dir.join("history.jsonl"),
                    ordsim::trace::MAX_HISTORY_BYTES,
                ) {
                    ordsim::stderr_line(&w);
                }
            }
            if strict {
                j.strict()?;
            }
            Ok(())
        }
        Command::Explore {
            file,
            strategy,
            runs,
            seed,
            jobs,
            properties,
            out,
        } => {
            let r = ordsim::explore::explore(&ordsim::explore::ExploreRequest {
                file,
                strategy,
                runs,
                seed,
                jobs: jobs.unwrap_or_else(ordsim::default_jobs),
                properties,
                out,
                progress: ordsim::progress::wanted(),
            })?;
            out!("{}", r.text);
            // Wall-clock figures go to standard error: standard output depends on the seed only.
            ordsim::stderr_line(&r.timing());
            if r.found.is_some() {
                return Err(CliError::Failed);
            }
            Ok(())
        }
        Command::Validate { file, seed } => {
            let sc = ordsim::load(&file)?;
            let plan = sim::FaultPlan::resolve(&sc, seed.unwrap_or(sc.seed));
            outln!(
                "{}: ok ({} strategies, {} fault occurrence(s))",
                file.display(),
                sc.strategies.len(),
                plan.faults.len()
            );
            for l in plan.describe(&sc) {
                outln!("  {l}");
            }
            Ok(())
        }
        Command::Check { paths, junit, jobs } => {
            if let Some(path) = &junit {
                let files = ordsim::check::scenario_files(&paths)?;
                let inputs: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
                ordsim::check_outputs(None, &[("--junit", path.clone())], &inputs)?;
            }
            let report = ordsim::check::check_with(
                &paths,
                jobs.unwrap_or_else(ordsim::default_jobs),
                ordsim::progress::wanted(),
            )?;
            out!("{}", report.text());
            if let Some(path) = junit {
                ordsim::write_atomic(&path, report.junit().as_bytes())?;
            }
            if report.failed() {
                return Err(CliError::Failed);
            }
            if let Some(why) = report.nothing_judged() {
                return Err(CliError::NothingChecked(why));
            }
            Ok(())
        }
        Command::Sweep {
            file,
            seeds,
            sets,
            strategies,
            jobs,
            out,
            shard,
            resume,
            max_events,
        } => {
            let req = ordsim::sweep::SweepRequest {
                file,
                seeds,
                sets,
                strategies,
                jobs: jobs.unwrap_or_else(ordsim::default_jobs),
                out,
                shard,
                resume,
                max_events,
                progress: ordsim::progress::wanted(),
            };
            let o = ordsim::sweep::sweep(&req)?;
            outln!(
                "{} runs ({} run now, {} resumed); wrote {}/{{{}}}",
                o.runs,
                o.executed,
                o.runs - o.executed,
                req.out.display(),
                o.files.join(",")
            );
            Ok(())
        }
        Command::Report { paths, out, jobs } => {
            let jobs = ordsim::check_jobs(jobs.unwrap_or_else(ordsim::default_jobs))?;
            let names = ordsim::library::report(&paths, &out, jobs)?;
            outln!(
                "wrote the reports of {} scenario(s) under {}",
                names.len(),
                out.display()
            );
            Ok(())
        }
        Command::Merge { dirs, out, verify } => {
            let files = ordsim::sweep::merge_verified(&dirs, &out, verify)?;
            outln!(
                "merged {} shard(s); wrote {}/{{{}}}",
                dirs.len(),
                out.display(),
                files.join(",")
            );
            Ok(())
        }
        Command::List {
            params,
            metrics,
            doc,
        } => {
            if let Some(section) = doc.as_deref().and_then(ordsim::doc_section) {
                out!("{section}");
            } else if params {
                out!("{}", ordsim::list_params_text());
            } else if metrics {
                out!("{}", sim::metric_defs::reference_markdown());
            } else {
                out!("{}", ordsim::list_text());
            }
            Ok(())
        }
        Command::Bench {
            file,
            messages,
            repeat,
            strategy,
            seed,
        } => {
            let r = ordsim::bench::bench(&ordsim::bench::BenchOptions {
                file,
                messages,
                repeat,
                strategy,
                seed,
            })?;
            out!("{}", r.text());
            if r.failed() {
                return Err(CliError::Failed);
            }
            Ok(())
        }
    }
}
