//! `sim check`: run every scenario's `[expect]` block and judge it; the CI regression suite.

use crate::{load, repro_line, scenario_name, CliError};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use rayon::prelude::*;
use sim::expect::{Evaluation, Verdict};
use sim::{FaultPlan, Metrics, RunOptions, Scenario, Status, StrategySummary};
use std::path::{Path, PathBuf};

/// One scenario file's verdicts.
pub struct ScenarioVerdicts {
    /// The file.
    pub file: PathBuf,
    /// Its name.
    pub name: String,
    /// One per expectation, in file order (strategies in the scenario's order).
    pub evaluations: Vec<Evaluation>,
    /// Self-check failures of runs (engine bugs), with their repro lines.
    pub errors: Vec<String>,
}

/// Everything `sim check` found.
pub struct CheckReport {
    /// Per scenario with expectations.
    pub scenarios: Vec<ScenarioVerdicts>,
    /// Files without an `[expect]` section (not run).
    pub skipped: Vec<PathBuf>,
    /// Files whose `[expect]` section states no bound (only `seeds` or `fraction`, or empty
    /// strategy tables): nothing in them to judge (not run).
    pub unbound: Vec<PathBuf>,
}

impl CheckReport {
    /// Counts of (pass, fail, unknown); a run error counts as a failure.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for s in &self.scenarios {
            for e in &s.evaluations {
                match e.verdict {
                    Verdict::Pass => c.0 += 1,
                    Verdict::Fail => c.1 += 1,
                    Verdict::Unknown => c.2 += 1,
                }
            }
            c.1 += s.errors.len();
        }
        c
    }

    /// Whether anything failed.
    pub fn failed(&self) -> bool {
        self.counts().1 > 0
    }

    /// Why nothing was judged, when no expectation passed or failed (every one UNKNOWN): a
    /// check that decided nothing must not pass a CI build.
    pub fn nothing_judged(&self) -> Option<String> {
        let (p, f, u) = self.counts();
        (p + f == 0).then(|| {
            format!(
                "nothing judged: {u} expectation(s), every one UNKNOWN (a strategy not \
                 applicable cannot be judged)"
            )
        })
    }

    /// The printed report: one line per expectation, a repro line under each failure, a total.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.skipped {
            out.push_str(&format!("SKIP     {} (no [expect] section)\n", f.display()));
        }
        for f in &self.unbound {
            out.push_str(&format!(
                "SKIP     {} ([expect] states no bound: add [expect.all] or [expect.STRATEGY] \
                 with a figure, e.g. lost = 0)\n",
                f.display()
            ));
        }
        for s in &self.scenarios {
            let file = s.file.display().to_string();
            for e in &s.evaluations {
                let tag = match e.verdict {
                    Verdict::Pass => "PASS   ",
                    Verdict::Fail => "FAIL   ",
                    Verdict::Unknown => "UNKNOWN",
                };
                out.push_str(&format!(
                    "{tag}  {file}  {}  {} {}  (measured: {})\n",
                    e.strategy,
                    e.field,
                    e.bound,
                    e.measured_text()
                ));
                if e.verdict == Verdict::Unknown {
                    if let Some(r) = &e.reason {
                        out.push_str(&format!("         unknown: {r}\n"));
                    }
                }
                if let (Verdict::Fail, Some(seed)) = (e.verdict, e.first_failing_seed()) {
                    out.push_str(&format!(
                        "         repro: {}\n",
                        repro_line(&file, seed, Some(&e.strategy))
                    ));
                }
            }
            for err in &s.errors {
                out.push_str(&format!("ERROR    {file}  {err}\n"));
            }
        }
        let (p, f, u) = self.counts();
        out.push_str(&format!("{p} passed, {f} failed, {u} unknown\n"));
        out
    }

    /// JUnit XML: a suite per scenario file, a case per expectation.
    pub fn junit(&self) -> String {
        let mut report = Report::new("sim check");
        for s in &self.scenarios {
            let file = s.file.display().to_string();
            let mut suite = TestSuite::new(file.clone());
            for e in &s.evaluations {
                let name = format!("{}: {} {}", e.strategy, e.field, e.bound);
                let status = match e.verdict {
                    Verdict::Pass => TestCaseStatus::success(),
                    Verdict::Fail => {
                        let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                        st.set_message(format!("measured: {}", e.measured_text()));
                        if let Some(seed) = e.first_failing_seed() {
                            st.set_description(format!(
                                "repro: {}",
                                repro_line(&file, seed, Some(&e.strategy))
                            ));
                        }
                        st
                    }
                    Verdict::Unknown => {
                        let mut st = TestCaseStatus::skipped();
                        st.set_message(e.reason.clone().unwrap_or_else(|| "unknown".into()));
                        st
                    }
                };
                let mut case = TestCase::new(name, status);
                case.set_classname(s.name.clone());
                suite.add_test_case(case);
            }
            for err in &s.errors {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
                st.set_message(err.clone());
                suite.add_test_case(TestCase::new("self-check", st));
            }
            report.add_test_suite(suite);
        }
        report.to_string().expect("junit serializes")
    }
}

/// Counts a step of the bar when a run ends, however it ends.
struct Step<'a>(&'a crate::progress::Progress);

impl Drop for Step<'_> {
    fn drop(&mut self) {
        self.0.inc();
    }
}

/// The scenario files named by `paths` (directories are searched recursively for `*.toml`), sorted.
/// Each real file is named once: a directory reached twice (a symlink loop, a link to a parent, two
/// paths to one folder) is searched once, and a file reached by two paths is kept under the first
/// (in sorted order).
pub fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut files = Vec::new();
    let mut seen_dirs = std::collections::BTreeSet::new();
    for p in paths {
        if p.is_dir() {
            collect(p, &mut files, &mut seen_dirs)?;
        } else {
            files.push(p.clone());
        }
    }
    files.sort();
    files.dedup();
    // One entry per real file: the first path (in sorted order) that reaches it.
    let mut seen_files = std::collections::BTreeSet::new();
    files.retain(|f| match std::fs::canonicalize(f) {
        Ok(real) => seen_files.insert(real),
        // Unreadable: keep it, loading it will say why.
        Err(_) => true,
    });
    Ok(files)
}

fn collect(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    seen: &mut std::collections::BTreeSet<PathBuf>,
) -> Result<(), CliError> {
    let real = std::fs::canonicalize(dir)
        .map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))?;
    if !seen.insert(real) {
        return Ok(());
    }
    let entries =
        std::fs::read_dir(dir).map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))?;
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(
            entry
                .map_err(|e| CliError::Usage(format!("{}: {e}", dir.display())))?
                .path(),
        );
    }
    // Sorted, so which of two paths to one folder is searched does not depend on the file system.
    paths.sort();
    for p in paths {
        if p.is_dir() {
            collect(&p, out, seen)?;
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
    Ok(())
}

/// Runs every scenario with expectations, over its seeds, on `jobs` threads (the results do not
/// depend on `jobs`), and judges every expectation.
pub fn check(paths: &[PathBuf], jobs: usize) -> Result<CheckReport, CliError> {
    check_with(paths, jobs, false)
}

/// [`check`], with a progress bar over the runs when `progress` (see [`crate::progress`]).
pub fn check_with(paths: &[PathBuf], jobs: usize, progress: bool) -> Result<CheckReport, CliError> {
    crate::check_jobs(jobs)?;
    let files = scenario_files(paths)?;
    if files.is_empty() {
        return Err(CliError::Usage("no scenario files found".into()));
    }
    let mut loaded: Vec<(PathBuf, Scenario)> = Vec::new();
    let (mut skipped, mut unbound) = (Vec::new(), Vec::new());
    for f in files {
        let sc = load(&f)?;
        match &sc.expect {
            None => skipped.push(f),
            Some(x) if x.expand(&sc.strategies).is_empty() => unbound.push(f),
            Some(_) => loaded.push((f, sc)),
        }
    }
    if loaded.is_empty() {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        let n = skipped.len() + unbound.len();
        let shown = shown.join(", ");
        return Err(CliError::NothingChecked(if unbound.is_empty() {
            format!(
                "nothing to check: none of the {n} scenario file(s) under {shown} has an [expect] \
                 section (add one: docs/scenarios.md)"
            )
        } else {
            let list: Vec<String> = unbound.iter().map(|p| p.display().to_string()).collect();
            format!(
                "nothing to check: none of the {n} scenario file(s) under {shown} states a bound \
                 (an [expect] section without one: {}); add [expect.all] or [expect.STRATEGY] \
                 with a figure, e.g. lost = 0 (docs/scenarios.md#expect)",
                list.join(", ")
            )
        }));
    }
    let tasks: Vec<(usize, u64)> = loaded
        .iter()
        .enumerate()
        .flat_map(|(i, (_, sc))| {
            let x = sc.expect.as_ref().expect("filtered");
            let seeds: Vec<u64> = match x.seeds {
                Some(r) => r.iter().collect(),
                None => vec![sc.seed],
            };
            seeds.into_iter().map(move |s| (i, s))
        })
        .collect();
    let bar = crate::progress::Progress::new(tasks.len() as u64, "runs", progress);
    let run = |&(i, seed): &(usize, u64)| -> Result<Vec<StrategySummary>, String> {
        let (file, sc) = &loaded[i];
        let _step = Step(&bar);
        let plan = FaultPlan::resolve(sc, seed);
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        sc.strategies
            .iter()
            .map(|name| {
                strategies::run_named(name, sc, &plan, &opts, None).map_err(|e| {
                    format!(
                        "{name} seed {seed}: {e}; repro: {}",
                        repro_line(&file.display().to_string(), seed, Some(name))
                    )
                })
            })
            .collect()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .map_err(|e| CliError::Usage(format!("--jobs: {e}")))?;
    let results: Vec<Result<Vec<StrategySummary>, String>> =
        pool.install(|| tasks.par_iter().map(run).collect());
    bar.finish();

    let mut scenarios = Vec::new();
    for (i, (file, sc)) in loaded.iter().enumerate() {
        let x = sc.expect.as_ref().expect("filtered");
        let mine: Vec<(u64, &Result<Vec<StrategySummary>, String>)> = tasks
            .iter()
            .zip(&results)
            .filter(|((j, _), _)| *j == i)
            .map(|((_, seed), r)| (*seed, r))
            .collect();
        let errors: Vec<String> = mine
            .iter()
            .filter_map(|(_, r)| r.as_ref().err().cloned())
            .collect();
        let mut evaluations = Vec::new();
        for (strategy, field, bound) in x.expand(&sc.strategies) {
            let per_seed: Vec<(u64, Result<&Metrics, String>)> = mine
                .iter()
                .map(|(seed, r)| {
                    let m = match r {
                        Err(e) => Err(format!("run failed: {e}")),
                        Ok(list) => match list.iter().find(|s| s.strategy == strategy) {
                            Some(StrategySummary {
                                status: Status::Ok,
                                metrics: Some(m),
                                ..
                            }) => Ok(m),
                            Some(s) => Err(format!(
                                "{strategy} is not applicable: {}",
                                s.reason.as_deref().unwrap_or("no reason given")
                            )),
                            None => Err(format!("{strategy} did not run")),
                        },
                    };
                    (*seed, m)
                })
                .collect();
            evaluations.push(x.judge(&strategy, &field, bound, &per_seed));
        }
        scenarios.push(ScenarioVerdicts {
            file: file.clone(),
            name: scenario_name(sc, file),
            evaluations,
            errors,
        });
    }
    Ok(CheckReport {
        scenarios,
        skipped,
        unbound,
    })
}
