//! What a finished sweep writes: runs.csv, the aggregate across seeds, the charts and report.md.

use super::{csv_text, Manifest, AGGREGATE, MANIFEST, RUNS};
use crate::charts::{self, Line, Point, SweepPanel, XAxis};
use crate::report::markdown_table;
use crate::{create_dir, write_atomic, write_figure, CliError};
use sim::metric_defs::{metric, MetricDef};
use sim::summary::Metrics;
use std::collections::BTreeMap;
use std::path::Path;

/// The names of the charts of a sweep: `sweep`, or `sweep-1` to `sweep-N` when the swept
/// parameters after the first make N combinations (one chart each).
fn figure_names(m: &Manifest) -> Vec<String> {
    let per_x = match m.params.first() {
        None => 1,
        Some(xp) => m.points() / xp.values.len().max(1) as u64,
    };
    if per_x == 1 {
        vec!["sweep".to_string()]
    } else {
        (1..=per_x).map(|k| format!("sweep-{k}")).collect()
    }
}

/// The files [`finalize`] writes for `m`, in the order it lists them: what a sweep, a shard or a
/// merge checks before its work ([`crate::check_outputs`]).
pub fn output_names(m: &Manifest) -> Vec<String> {
    if m.shard.is_some() {
        return vec![RUNS.to_string(), MANIFEST.to_string()];
    }
    let mut names = vec![
        RUNS.to_string(),
        AGGREGATE.to_string(),
        "report.md".to_string(),
        MANIFEST.to_string(),
    ];
    for f in figure_names(m) {
        names.extend(crate::figure_files(&f));
    }
    names
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
    if m.shard.is_some() {
        // A shard's rows travel to `sim merge`: each carries its checksum.
        let mut header = m.header();
        header.push(super::CHECKSUM.into());
        let rows: Vec<Vec<String>> = rows.iter().map(|r| super::with_checksum(r)).collect();
        put(RUNS, &csv_text(&header, &rows))?;
    } else {
        put(RUNS, &csv_text(&m.header(), rows))?;
    }
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
            figure_files.extend(crate::figure_files(name));
        }
    }
    let mut json = serde_json::to_string_pretty(m).expect("manifest serializes");
    json.push('\n');
    put(MANIFEST, json.as_bytes())?;
    files.extend(figure_files);
    debug_assert_eq!(files, output_names(m), "the files checked before the work");
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
            // A figure that cannot be negative (every count and duration) gets an interval that
            // cannot be either: the lower end is cut at 0.
            let low = if min >= 0.0 {
                (mean - half).max(0.0)
            } else {
                mean - half
            };
            (low, mean + half)
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

/// The figures a sweep charts and tabulates, by path in [`sim::metric_defs::METRICS`] (which
/// gives each its title, unit and table column). A figure that is zero in every run is tabulated
/// but not drawn.
const CHARTED: [&str; 14] = [
    "ordering_violations",
    "stale_writes",
    "lost",
    "duplicates",
    "stale_rejected",
    "final_state_mismatches",
    "dead_lettered",
    "dropped",
    "pending_at_end",
    "undelivered",
    "throughput_per_s",
    "latency_ms.p50",
    "latency_ms.p99",
    "max_block_ms",
];

fn charted() -> impl Iterator<Item = &'static MetricDef> {
    CHARTED
        .iter()
        .map(|p| metric(p).expect("a charted figure is defined"))
}

/// Panels whose every point is zero (interval included) are left out of a chart; their titles
/// go into the chart's title instead, so a reader knows they were measured.
fn drop_all_zero(panels: Vec<SweepPanel>) -> (Vec<SweepPanel>, Vec<String>) {
    let zero = |p: &SweepPanel| {
        p.lines
            .iter()
            .flat_map(|l| &l.points)
            .all(|pt| pt.mean == 0.0 && pt.ci95.is_none_or(|(lo, hi)| lo == 0.0 && hi == 0.0))
    };
    let (z, kept): (Vec<_>, Vec<_>) = panels.into_iter().partition(zero);
    (kept, z.into_iter().map(|p| p.title).collect())
}

fn with_zero_note(title: String, zero: &[String]) -> String {
    if zero.is_empty() {
        title
    } else {
        format!("{title}\nzero in every run, not drawn: {}", zero.join(", "))
    }
}

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
        let panels: Vec<SweepPanel> = charted()
            .map(|d| {
                let field = d.flat();
                let col = m.header().iter().position(|h| *h == field).unwrap_or(0);
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
                    title: d.title.to_string(),
                    unit: d.unit.to_string(),
                    lines,
                }
            })
            .collect();
        let (panels, zero) = drop_all_zero(panels);
        let title = with_zero_note(format!("{}: each strategy per seed", m.scenario), &zero);
        figures.push((
            figure_names(m).swap_remove(0),
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
    // One chart per combination of the other parameters, each with its name.
    let names = figure_names(m);
    let per_x = names.len() as u64;
    for (combo, name) in (0..per_x).zip(names) {
        let panels: Vec<SweepPanel> = charted()
            .map(|d| SweepPanel {
                title: d.title.to_string(),
                unit: d.unit.to_string(),
                lines: m
                    .strategies
                    .iter()
                    .enumerate()
                    .map(|(si, name)| Line {
                        strategy: name.clone(),
                        points: (0..xp.values.len())
                            .filter_map(|xi| {
                                let point = xi as u64 * per_x + combo;
                                let s = stat(agg, (point, si), &d.flat())?;
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
            "{}: mean of seeds {}..{} (bars: 95% interval, cut at 0) against {}",
            m.scenario, m.seed_first, m.seed_last, xp.path
        );
        if !others.is_empty() {
            title.push_str(&format!(", {}", others.join(", ")));
        }
        let (panels, zero) = drop_all_zero(panels);
        let title = with_zero_note(title, &zero);
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
         seeds or more, its lower end cut at 0 (no figure can be negative).\n\n",
    );
    let mut header: Vec<String> = m.params.iter().map(|p| p.path.clone()).collect();
    header.push("strategy".into());
    header.extend(charted().map(|d| d.label().to_string()));
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
        for d in charted() {
            r.push(match stat(agg, (*point, *si), &d.flat()) {
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
    s.push_str(&base_params_section(m));
    s.push_str(&format!(
        "\nData: [{RUNS}]({RUNS}) (one row per run), [{AGGREGATE}]({AGGREGATE}) (mean, min, max and \
         95% interval per point, strategy and metric), [{MANIFEST}]({MANIFEST}).\n"
    ));
    s
}

/// The strategies' effective parameters in the scenario file (before `--set`), with hazard
/// warnings; empty when no strategy has parameters.
fn base_params_section(m: &Manifest) -> String {
    if m.base_params.iter().all(|sp| sp.params.is_empty()) {
        return String::new();
    }
    let mut s = String::from(
        "\nStrategy parameters in the scenario file (before `--set`; `sim list --params` explains \
         them; (default) = not set):\n\n",
    );
    for sp in &m.base_params {
        if sp.params.is_empty() {
            continue;
        }
        let vals: Vec<String> = sp
            .params
            .0
            .iter()
            .map(|p| {
                format!(
                    "`{}={}`{}",
                    p.name,
                    p.value,
                    if p.default { " (default)" } else { "" }
                )
            })
            .collect();
        s.push_str(&format!("- {}: {}\n", sp.strategy, vals.join(", ")));
        for (name, w) in sp.params.warnings() {
            s.push_str(&format!("  - warning: `{name}`: {w}\n"));
        }
    }
    crate::escape_controls(&s, true)
}
