//! Rendering a run summary: the terminal table, CSV and JSON.

use sim::summary::{Metrics, RunSummary, Status, StrategySummary};

/// A table column: its header and how to format its value.
type Column = (&'static str, fn(&Metrics) -> String);

/// Columns of the terminal table.
fn columns() -> Vec<Column> {
    fn n(x: u64) -> String {
        x.to_string()
    }
    fn f(x: f64) -> String {
        if x >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.1}")
        }
    }
    vec![
        ("produced", |m| n(m.produced)),
        ("applied", |m| n(m.applied)),
        ("violations", |m| n(m.ordering_violations)),
        ("stale_rej", |m| n(m.stale_rejected)),
        ("lost", |m| n(m.lost)),
        ("dups", |m| n(m.duplicates)),
        ("dlq", |m| n(m.dead_lettered)),
        ("poison_dlq", |m| n(m.poison_dead_lettered)),
        ("pending", |m| n(m.pending_at_end)),
        ("mismatch", |m| n(m.final_state_mismatches)),
        ("redeliv", |m| n(m.redeliveries)),
        ("thru/s", |m| f(m.throughput_per_s)),
        ("p50_ms", |m| f(m.latency_ms.p50)),
        ("p99_ms", |m| f(m.latency_ms.p99)),
        ("max_ms", |m| f(m.latency_ms.max)),
        ("block_ms", |m| f(m.max_block_ms)),
    ]
}

/// The table's cells (a header row, then one row per strategy) and the notes about strategies
/// that could not run.
fn table_cells(s: &RunSummary) -> (Vec<Vec<String>>, Vec<String>) {
    let cols = columns();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["strategy".to_string()];
    header.extend(cols.iter().map(|(h, _)| h.to_string()));
    rows.push(header);
    let mut notes = Vec::new();
    for st in &s.strategies {
        let mut row = vec![st.strategy.clone()];
        match (&st.status, &st.metrics) {
            (Status::Ok, Some(m)) => row.extend(cols.iter().map(|(_, get)| get(m))),
            _ => {
                row.extend(cols.iter().map(|_| "-".to_string()));
                notes.push(format!(
                    "{}: not applicable: {}",
                    st.strategy,
                    st.reason.as_deref().unwrap_or("no reason given")
                ));
            }
        }
        rows.push(row);
    }
    (rows, notes)
}

/// The comparison table, one row per strategy, right-aligned numbers.
pub fn table(s: &RunSummary) -> String {
    let (rows, notes) = table_cells(s);
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if ri == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    for n in notes {
        out.push_str(&n);
        out.push('\n');
    }
    out
}

/// A Markdown table: a header row, an alignment row (the first `left` columns left-aligned, the
/// numbers after them right-aligned), then `rows`.
pub fn markdown_table(header: &[String], rows: &[Vec<String>], left: usize) -> String {
    let esc = |v: &str| v.replace('|', "\\|");
    let mut out = format!(
        "| {} |\n",
        header
            .iter()
            .map(|h| esc(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let align: Vec<&str> = (0..header.len())
        .map(|i| if i < left { "---" } else { "---:" })
        .collect();
    out.push_str(&format!("| {} |\n", align.join(" | ")));
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(|v| esc(v)).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

/// The comparison table in Markdown, with the notes under it.
pub fn table_markdown(s: &RunSummary) -> String {
    let (rows, notes) = table_cells(s);
    let mut out = markdown_table(&rows[0], &rows[1..], 1);
    for n in notes {
        out.push_str(&format!("\n{n}\n"));
    }
    out
}

/// The metric columns, derived from [`Metrics`] itself so the CSV can never drift from the JSON.
pub fn metric_columns() -> Vec<String> {
    Metrics::default()
        .fields()
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// The CSV header: identification columns, then every metric.
pub fn csv_header() -> Vec<String> {
    let mut h: Vec<String> = ["scenario", "seed", "strategy", "status", "reason"]
        .map(String::from)
        .to_vec();
    h.extend(metric_columns());
    h
}

/// A strategy's status, reason and every metric, as CSV cells (empty metrics when it did not run).
pub fn strategy_cells(st: &StrategySummary) -> Vec<String> {
    let status = match st.status {
        Status::Ok => "ok",
        Status::NotApplicable => "not_applicable",
    };
    let mut r = vec![status.to_string(), st.reason.clone().unwrap_or_default()];
    match &st.metrics {
        Some(m) => r.extend(m.fields().into_iter().map(|(_, v)| match v {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        })),
        None => r.extend(metric_columns().iter().map(|_| String::new())),
    }
    r
}

/// One CSV record per strategy, in [`csv_header`] order.
pub fn csv_records(s: &RunSummary) -> Vec<Vec<String>> {
    s.strategies
        .iter()
        .map(|st| {
            let mut r = vec![s.scenario.clone(), s.seed.to_string(), st.strategy.clone()];
            r.extend(strategy_cells(st));
            r
        })
        .collect()
}

/// The summary as CSV text.
pub fn csv(s: &RunSummary) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(csv_header())?;
    for r in csv_records(s) {
        w.write_record(&r)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("csv of utf-8 strings is utf-8"))
}

/// The summary as pretty JSON (the contract of docs/metrics.md), newline-terminated.
pub fn json(s: &RunSummary) -> String {
    let mut j = serde_json::to_string_pretty(s).expect("summary serializes");
    j.push('\n');
    j
}

/// The "parameters" block of `sim run` (and of report.md): one line per strategy with its
/// effective `[strategy.NAME]` values, defaults marked, wrapped at about 100 columns, then a
/// `warning:` line for each value in use that reorders or loses messages even without faults.
pub fn params_block(s: &RunSummary) -> String {
    const WIDTH: usize = 100;
    let mut out = String::from("parameters (sim list --params explains them):\n");
    let mut warnings = Vec::new();
    for st in &s.strategies {
        let head = format!("  {}:", st.strategy);
        if st.params.is_empty() {
            out.push_str(&format!("{head} no parameters\n"));
            continue;
        }
        let mut line = head;
        for (i, p) in st.params.0.iter().enumerate() {
            let item = format!(
                "{}={}{}{}",
                p.name,
                p.value,
                if p.default { " (default)" } else { "" },
                if i + 1 < st.params.0.len() { "," } else { "" }
            );
            if line.len() + 1 + item.len() > WIDTH && !line.ends_with(':') {
                out.push_str(&line);
                out.push('\n');
                line = String::from("   ");
            }
            line.push(' ');
            line.push_str(&item);
        }
        out.push_str(&line);
        out.push('\n');
        for (name, w) in st.params.warnings() {
            warnings.push(format!("  warning: {} {name}: {w}\n", st.strategy));
        }
    }
    for w in warnings {
        out.push_str(&w);
    }
    out
}
