//! `sim explore`: search fault schedules for a run that breaks a property, then shrink it to a
//! small scenario a person can read and keep as a regression test (docs/explore.md).
//!
//! Swarm testing: run `i` of `--runs` draws its seed and its fault mix from `--seed` and `i` only
//! ([`draw`]), runs the strategy and checks the property (the `--property` bounds, else the
//! scenario's `[expect]` bounds for the strategy, else: the strategy's guarantee figure, `lost` and
//! `final_state_mismatches` are 0). Runs go in parallel in chunks; the first failing run *by index*
//! is taken, so the outcome depends on neither `--jobs` nor timing. Its random faults are then
//! scripted at the times they fired, and the case shrunk ([`shrink`]) while the same bound still
//! fails; [`write`] makes the commented scenario file.

pub mod draw;
pub mod shrink;
pub mod write;

use crate::{load, CliError};
use rayon::prelude::*;
use sim::expect::Bound;
use sim::{FaultPlan, Metrics, RunOptions, Scenario, Status};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Most runs one exploration may ask for.
pub const MAX_RUNS: u64 = 100_000_000;

/// Most candidate runs one shrink tries before it stops (and says it is not a local minimum).
pub const SHRINK_BUDGET: u64 = 5_000;

/// What to explore.
#[derive(Clone, Debug)]
pub struct ExploreRequest {
    /// The scenario file.
    pub file: PathBuf,
    /// The strategy to break.
    pub strategy: String,
    /// Runs to try at most.
    pub runs: u64,
    /// The exploration's seed (default: the scenario's).
    pub seed: Option<u64>,
    /// Parallel runs.
    pub jobs: usize,
    /// `NAME=BOUND` properties (default: `[expect]`, else the strategy's guarantee, lost, mismatch).
    pub properties: Vec<String>,
    /// Where to write the shrunk scenario (default: the current directory).
    pub out: Option<PathBuf>,
    /// Draw a progress bar (see [`crate::progress`]).
    pub progress: bool,
}

/// Where the property came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropertySource {
    /// `--property`.
    Flags,
    /// The scenario's `[expect]` bounds for the strategy.
    Expect,
    /// The default.
    Default,
}

/// The bounds every run must meet.
#[derive(Clone, Debug)]
pub struct Property {
    /// (figure, bound), in order.
    pub bounds: Vec<(String, Bound)>,
    /// Where they came from.
    pub source: PropertySource,
}

impl Property {
    /// The property of `req` on `sc`: flags, else `[expect]`, else the default.
    pub fn of(sc: &Scenario, strategy: &str, flags: &[String]) -> Result<Property, CliError> {
        if !flags.is_empty() {
            let bounds: Vec<(String, Bound)> = flags
                .iter()
                .map(|p| parse_property(p))
                .collect::<Result<_, _>>()?;
            // A figure takes one bound, or a lower and an upper one (a range), as in [expect]
            // ([`Bound::makes_a_range_with`]); any other second bound is a contradiction
            // (`lost=0` and `lost=1`: every run fails) or a repeat (a typo for another figure).
            let key = Metrics::figure_key;
            for (i, (f, b)) in bounds.iter().enumerate() {
                if let Some((g, c)) = bounds[..i]
                    .iter()
                    .find(|(g, c)| key(g) == key(f) && !b.makes_a_range_with(c))
                {
                    return Err(CliError::Usage(format!(
                        "--property {f} is given twice ({g} {c}, then {f} {b}): a figure takes \
                         one bound, or a lower and an upper one (a range), as in [expect]"
                    )));
                }
            }
            return Ok(Property {
                bounds,
                source: PropertySource::Flags,
            });
        }
        if let Some(x) = &sc.expect {
            let bounds: Vec<(String, Bound)> = x
                .expand(&[strategy.to_string()])
                .into_iter()
                .filter(|(_, f, _)| !is_coverage(f))
                .map(|(_, f, b)| {
                    (
                        f,
                        Bound {
                            fraction: None,
                            ..b
                        },
                    )
                })
                .collect();
            if !bounds.is_empty() {
                return Ok(Property {
                    bounds,
                    source: PropertySource::Expect,
                });
            }
        }
        // A composed pair's guarantee is its handler part's when that guards the write, as in
        // the verdicts and rankings (issue 41).
        let guarantee = strategies::guarantee(strategy);
        let zero = Bound::parse("0").expect("a bound");
        Ok(Property {
            bounds: [guarantee, "lost", "final_state_mismatches"]
                .into_iter()
                .map(|f| (f.to_string(), zero))
                .collect(),
            source: PropertySource::Default,
        })
    }

    /// The first bound `m` breaks, with the measured value.
    pub fn first_failure(&self, m: &Metrics) -> Option<(usize, f64)> {
        self.bounds.iter().enumerate().find_map(|(i, (f, b))| {
            let v = m.numeric(f)?;
            (!b.holds(v)).then_some((i, v))
        })
    }

    /// `ordering_violations == 0, lost == 0`.
    pub fn text(&self) -> String {
        self.bounds
            .iter()
            .map(|(f, b)| format!("{f} {b}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether `name` is a coverage counter (`broker_crashes`, `coverage.failovers`): a bound on it
/// describes the scenario's own faults, which the exploration replaces.
pub fn is_coverage(name: &str) -> bool {
    let flat = name.replace('.', "_");
    let fields = Metrics::every().fields();
    let has = |n: &str| fields.iter().any(|(k, _)| k == n);
    flat.starts_with("coverage_") || (!has(&flat) && has(&format!("coverage_{flat}")))
}

/// Parses `--property NAME=BOUND`: `lost=0`, `ordering_violations == 0`, `latency_ms.p99<5000`.
pub fn parse_property(p: &str) -> Result<(String, Bound), CliError> {
    let bad = |why: String| {
        CliError::Usage(format!(
            "--property {p:?}: {why}; write NAME=BOUND, e.g. `lost=0`, `\"latency_ms.p99 < 5000\"`"
        ))
    };
    let cut = p
        .find(['=', '<', '>', '!'])
        .ok_or_else(|| bad("no comparison".into()))?;
    let name = p[..cut].trim();
    let mut rest = p[cut..].trim();
    if rest.starts_with('=') && !rest.starts_with("==") {
        rest = &rest[1..];
    }
    if name.is_empty() {
        return Err(bad("no figure named".into()));
    }
    if Metrics::every().numeric(name).is_none() {
        let names = Metrics::numeric_field_names();
        return Err(bad(format!(
            "no summary figure named {name:?} (`sim list --metrics`){}",
            sim::suggest::did_you_mean(name, names.iter().map(String::as_str))
        )));
    }
    let bound = Bound::parse(rest).map_err(bad)?;
    Ok((name.to_string(), bound))
}

/// Why a run gave no figures.
#[derive(Debug)]
pub enum NoFigures {
    /// The strategy cannot run in this scenario (bad input: exit 2).
    NotApplicable(String),
    /// The run broke a self-check (a bug: exit 1 with a repro line).
    Broke(sim::RunError),
}

/// One run of `strategy` on `sc` with `seed`: its figures, or why there are none.
pub fn run_once(sc: &Scenario, seed: u64, strategy: &str) -> Result<Metrics, NoFigures> {
    let plan = FaultPlan::resolve(sc, seed);
    let opts = RunOptions {
        seed,
        max_events: None,
        max_sim_time: None,
    };
    let s = strategies::run_named(strategy, sc, &plan, &opts, None).map_err(NoFigures::Broke)?;
    match (s.status, s.metrics) {
        (Status::Ok, Some(m)) => Ok(m),
        _ => Err(NoFigures::NotApplicable(format!(
            "{strategy} is not applicable here: {}",
            s.reason.unwrap_or_else(|| "no reason given".into())
        ))),
    }
}

impl NoFigures {
    /// The error of the command, `repro` the command that gets there again.
    fn into_error(self, file: &str, repro: String) -> CliError {
        match self {
            NoFigures::NotApplicable(why) => CliError::Usage(format!("{file}: {why}")),
            NoFigures::Broke(error) => CliError::Run { error, repro },
        }
    }
}

/// The failing run found, before and after shrinking.
#[derive(Clone, Debug)]
pub struct Found {
    /// Its index among the runs.
    pub run: u64,
    /// Its draw.
    pub mix: draw::Mix,
    /// The bound it breaks (index into the property).
    pub bound: usize,
    /// The figure measured on the run.
    pub measured: f64,
    /// The scenario of the run (random faults as drawn).
    pub original: Scenario,
    /// The shrunk case, with its steps.
    pub shrunk: shrink::Shrunk<shrink::Case>,
    /// The figure measured on the shrunk case.
    pub shrunk_measured: f64,
    /// The file written.
    pub written: PathBuf,
}

/// What an exploration did.
#[derive(Clone, Debug)]
pub struct Explored {
    /// The report for standard output (deterministic: a function of the request).
    pub text: String,
    /// Runs done up to and including the failing one (all of them when none failed).
    pub runs: u64,
    /// The failing run, shrunk.
    pub found: Option<Found>,
    /// Wall time of the search (for runs per second; never part of `text`).
    pub search_time: Duration,
    /// Runs actually executed (a parallel chunk may run past the failing run).
    pub executed: u64,
    /// Wall time of the shrinking.
    pub shrink_time: Duration,
}

impl Explored {
    /// The timing line for standard error: runs per second, time to find and to shrink.
    pub fn timing(&self) -> String {
        let secs = self.search_time.as_secs_f64().max(1e-9);
        let mut s = format!(
            "{} runs in {:.2}s ({:.1} runs/s)",
            self.executed,
            secs,
            self.executed as f64 / secs
        );
        if let Some(f) = &self.found {
            s.push_str(&format!(
                "; shrinking took {:.2}s ({} candidate runs)",
                self.shrink_time.as_secs_f64(),
                f.shrunk.tries
            ));
        }
        s
    }
}

/// Checks `--runs`.
fn check_runs(runs: u64) -> Result<(), CliError> {
    if runs == 0 || runs > MAX_RUNS {
        return Err(CliError::Usage(format!(
            "--runs {runs}: must be between 1 and {MAX_RUNS}"
        )));
    }
    Ok(())
}

/// `sim explore`.
pub fn explore(req: &ExploreRequest) -> Result<Explored, CliError> {
    check_runs(req.runs)?;
    let jobs = crate::check_jobs(req.jobs)?;
    crate::check_strategy_names(std::slice::from_ref(&req.strategy))?;
    let sc = load(&req.file)?;
    let palette = draw::Palette::of(&sc)?;
    let property = Property::of(&sc, &req.strategy, &req.properties)?;
    let seed = req.seed.unwrap_or(sc.seed);
    let file = req.file.display().to_string();
    let out_dir = req.out.clone().unwrap_or_else(|| PathBuf::from("."));
    let name = write::file_name(&sc, &req.file, &req.strategy);
    let target = out_dir.join(&name);
    // Every file it may write checked before the runs (not its input, no folder in the way),
    // then staged as `sim run --out` is.
    crate::check_outputs(
        Some(&out_dir),
        &crate::out_files("explore", &out_dir, &[&name]),
        &[&req.file],
    )?;
    let out_set = crate::OutputSet::prepare_for("explore", &out_dir)?;
    let mut text = format!(
        "explore {file} --strategy {} --seed {seed}: up to {} runs\n",
        req.strategy, req.runs
    );
    text.push_str(&format!(
        "property{}: {}\n",
        match property.source {
            PropertySource::Flags => " (--property)",
            PropertySource::Expect => " (the scenario's [expect])",
            PropertySource::Default => " (the default)",
        },
        property.text()
    ));
    text.push_str("fault kinds a run may turn on:\n");
    for l in palette.describe() {
        text.push_str(&format!("  {l}\n"));
    }
    if palette.max_kinds < palette.slots.len() {
        text.push_str(&format!("  (at most {} at once)\n", palette.max_kinds));
    }

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| CliError::Usage(format!("--jobs: {e}")))?;
    let bar = crate::progress::Progress::new(req.runs, "runs", req.progress);
    let started = Instant::now();
    let chunk = (jobs as u64 * 8).max(8);
    let mut executed = 0u64;
    let mut failure: Option<(u64, draw::Mix, Scenario, usize, f64)> = None;
    let mut next = 0u64;
    while next < req.runs && failure.is_none() {
        let end = (next + chunk).min(req.runs);
        let results: Vec<Result<Option<(usize, f64)>, NoFigures>> = pool.install(|| {
            (next..end)
                .into_par_iter()
                .map(|i| {
                    let mix = palette.draw(seed, i);
                    let r = run_once(&mix.apply(&sc), mix.seed, &req.strategy)
                        .map(|m| property.first_failure(&m));
                    bar.inc();
                    r
                })
                .collect()
        });
        executed += end - next;
        for (k, r) in results.into_iter().enumerate() {
            let i = next + k as u64;
            match r {
                Err(e) => {
                    return Err(e.into_error(
                        &file,
                        format!(
                            "sim explore {file} --strategy {} --seed {seed} --runs {}",
                            req.strategy,
                            i + 1
                        ),
                    ))
                }
                Ok(Some((b, v))) => {
                    let mix = palette.draw(seed, i);
                    let run_sc = mix.apply(&sc);
                    failure = Some((i, mix, run_sc, b, v));
                    break;
                }
                Ok(None) => {}
            }
        }
        next = end;
    }
    bar.finish();
    let search_time = started.elapsed();
    let Some((run, mix, run_sc, bound, measured)) = failure else {
        text.push_str(&format!(
            "no failing run in {} runs: the property held on every fault mix drawn\n",
            req.runs
        ));
        return Ok(Explored {
            text,
            runs: req.runs,
            found: None,
            search_time,
            executed,
            shrink_time: Duration::ZERO,
        });
    };
    let (field, b) = &property.bounds[bound];
    text.push_str(&format!(
        "run {run} fails after {} run(s): {field} = {measured} (must be {b}); seed {}, faults: {}\n",
        run + 1,
        mix.seed,
        mix.describe()
    ));

    let shrink_started = Instant::now();
    let strategy = req.strategy.clone();
    let still_fails = |c: &shrink::Case| -> bool {
        let mut problems = sim::scenario::validate(&c.sc);
        problems.extend(strategies::validate(&c.sc));
        problems.is_empty()
            && run_once(&c.sc, c.seed, &strategy)
                .is_ok_and(|m| property.first_failure(&m).is_some_and(|(i, _)| i == bound))
    };
    let budget = SHRINK_BUDGET;
    let mut note = None;
    let shrunk = pool.install(|| match scripted_start(&run_sc, mix.seed, &still_fails) {
        Some(case) => shrink::shrink(case, &still_fails, jobs, budget),
        None => {
            // Occurrences that overlap on one target cannot all be scripted: shrink with the
            // random entries first (fewer occurrences), then script what is left and go on.
            let random = shrink::Case {
                sc: run_sc.clone(),
                seed: mix.seed,
            };
            let first = shrink::shrink(random, &still_fails, jobs, budget / 2);
            match scripted_start(&first.value.sc, mix.seed, &still_fails) {
                Some(case) => {
                    let mut second = shrink::shrink(case, &still_fails, jobs, budget - first.tries);
                    let mut steps = first.steps;
                    steps.push("random faults scripted at the times they fired".into());
                    steps.append(&mut second.steps);
                    second.steps = steps;
                    second.tries += first.tries;
                    second
                }
                None => {
                    note = Some(
                        "  (its random faults overlap on one target and could not be scripted \
                         without losing the failure: the file keeps them random)\n",
                    );
                    shrink::Shrunk {
                        local_minimum: false,
                        ..first
                    }
                }
            }
        }
    });
    if let Some(n) = note {
        text.push_str(n);
    }
    let shrink_time = shrink_started.elapsed();
    let repro = format!(
        "sim explore {file} --strategy {} --seed {seed} --runs {}",
        req.strategy, req.runs
    );
    let shrunk_measured = run_once(&shrunk.value.sc, shrunk.value.seed, &req.strategy)
        .map_err(|e| e.into_error(&file, repro.clone()))?
        .numeric(field)
        .unwrap_or(f64::NAN);

    let ctx = write::Context {
        file: &file,
        strategy: &req.strategy,
        seed,
        runs: req.runs,
        run,
        mix: &mix,
        original: &run_sc,
        property: &property,
        bound,
        measured,
        shrunk: &shrunk,
        shrunk_measured,
        target: &target,
    };
    let contents = write::scenario_text(&sc, &ctx);
    // The file must load as any scenario does and fail as the run did.
    let reloaded = crate::load_text(&target.display().to_string(), &contents).map_err(|e| {
        CliError::Output {
            path: target.display().to_string(),
            reason: format!("a bug: the shrunk scenario does not load back: {e}\nrepro: {repro}"),
        }
    })?;
    let again = run_once(&reloaded, reloaded.seed, &req.strategy)
        .map_err(|e| e.into_error(&file, repro.clone()))?;
    if property.first_failure(&again).is_none() {
        return Err(CliError::Output {
            path: target.display().to_string(),
            reason: format!(
                "a bug: the shrunk scenario, loaded back, no longer fails\nrepro: {repro}"
            ),
        });
    }
    crate::write_atomic(&out_set.staging().join(&name), contents.as_bytes())?;
    let mut about = serde_json::Map::new();
    about.insert("repro".into(), repro.clone().into());
    out_set.publish(&[&name], about)?;

    text.push_str(&write::summary_lines(&ctx));
    Ok(Explored {
        text,
        runs: run + 1,
        found: Some(Found {
            run,
            mix,
            bound,
            measured,
            original: run_sc,
            shrunk,
            shrunk_measured,
            written: target,
        }),
        search_time,
        executed,
        shrink_time,
    })
}

/// The failing run with its random faults scripted at the times they fired: exactly (the same
/// plan), or, when two occurrences on one target overlap (a scripted file refuses that), with the
/// later of each overlapping pair dropped. None if neither still fails.
fn scripted_start(
    run_sc: &Scenario,
    seed: u64,
    still_fails: &(dyn Fn(&shrink::Case) -> bool + Sync),
) -> Option<shrink::Case> {
    let plan = FaultPlan::resolve(run_sc, seed);
    let mut sc = run_sc.clone();
    sc.faults = plan.as_scripted(run_sc);
    sc.explore = None;
    sc.sweep = None;
    let exact = shrink::Case {
        sc: sc.clone(),
        seed,
    };
    if still_fails(&exact) {
        return Some(exact);
    }
    // Overlapping occurrences on one target: merged into one spanning both (exact for the
    // outages), else the later one dropped.
    for merge in [true, false] {
        let case = shrink::Case {
            sc: Scenario {
                faults: without_overlaps(&sc.faults, merge),
                ..sc.clone()
            },
            seed,
        };
        if still_fails(&case) {
            return Some(case);
        }
    }
    None
}

/// Scripted `faults` (sorted by start) with no two of one kind on one target overlapping (what a
/// scenario file refuses): each occurrence that starts while an earlier one lasts is merged into
/// it (`merge`: the earlier one lasts until the later one would end) or dropped.
fn without_overlaps(faults: &[sim::scenario::Fault], merge: bool) -> Vec<sim::scenario::Fault> {
    use sim::dist::{DurDist, DurSpec};
    use sim::time::Dur;
    let end = |f: &sim::scenario::Fault| {
        let at = f.at.map_or(0, |d| d.0);
        f.duration
            .as_ref()
            .map_or(u64::MAX, |d| at.saturating_add(d.0.mean_micros() as u64))
    };
    let mut kept: Vec<sim::scenario::Fault> = Vec::new();
    for f in faults {
        let exempt = f.kind.may_overlap();
        let start = f.at.map_or(0, |d| d.0);
        let over = kept.iter().position(|k| {
            !exempt
                && k.kind == f.kind
                && k.broker == f.broker
                && k.consumer == f.consumer
                && k.producer == f.producer
                && end(k) > start
        });
        match over {
            None => kept.push(f.clone()),
            Some(i) if merge => {
                let until = end(&kept[i]).max(end(f));
                let k = &mut kept[i];
                let at = k.at.map_or(0, |d| d.0);
                k.duration = (until != u64::MAX).then(|| {
                    DurSpec(DurDist::Constant {
                        value: Dur(until - at),
                    })
                });
            }
            Some(_) => {}
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_bounds_of_expect_are_left_out() {
        assert!(is_coverage("broker_crashes") && is_coverage("coverage.failovers"));
        assert!(!is_coverage("ordering_violations") && !is_coverage("latency_ms.p99"));
        let sc = crate::load(std::path::Path::new("../scenarios/failover.toml")).unwrap();
        let p = Property::of(&sc, "message_groups", &[]).unwrap();
        assert_eq!(p.source, PropertySource::Expect);
        assert_eq!(
            p.text(),
            "dead_lettered == 0, lost == 0, ordering_violations > 0, pending_at_end == 0"
        );
        let p = Property::of(&sc, "message_groups", &["lost=0".into()]).unwrap();
        assert_eq!(
            (p.source, p.text().as_str()),
            (PropertySource::Flags, "lost == 0")
        );
        let mut bare = sc.clone();
        bare.expect = None;
        let p = Property::of(&bare, "cache_pessimistic", &[]).unwrap();
        assert_eq!(
            p.text(),
            "stale_writes == 0, lost == 0, final_state_mismatches == 0"
        );
    }

    #[test]
    fn properties_parse() {
        let (n, b) = parse_property("lost=0").unwrap();
        assert_eq!((n.as_str(), b.to_string().as_str()), ("lost", "== 0"));
        let (n, b) = parse_property("latency_ms.p99 < 5000").unwrap();
        assert_eq!(
            (n.as_str(), b.to_string().as_str()),
            ("latency_ms.p99", "< 5000")
        );
        let (_, b) = parse_property("ordering_violations==0").unwrap();
        assert_eq!(b.to_string(), "== 0");
        let (_, b) = parse_property("stale_writes <= 2").unwrap();
        assert_eq!(b.to_string(), "<= 2");
        for bad in ["lost", "=0", "lots=0", "lost=many"] {
            let e = parse_property(bad).unwrap_err().to_string();
            assert!(e.contains("--property"), "{bad}: {e}");
        }
        assert!(parse_property("lots=0")
            .unwrap_err()
            .to_string()
            .contains("did you mean"));
    }

    /// Issue 41: a composed pair whose handler guards the write is explored by its guarantee
    /// (`stale_writes`), not by ordering violations, as the verdicts judge it.
    #[test]
    fn a_composed_pair_is_explored_by_its_own_guarantee() {
        let sc = crate::load_text(
            "p.toml",
            "strategies = [\"kafka+db_optimistic\", \"message_groups\"]\n[workload]\nmessages = 10\nrate = \"10/s\"\nkeys = 2\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"\n",
        )
        .unwrap();
        let first = |s: &str| Property::of(&sc, s, &[]).unwrap().bounds[0].0.clone();
        assert_eq!(first("kafka+db_optimistic"), "stale_writes");
        assert_eq!(first("message_groups"), "ordering_violations");
    }
}
