//! Rendering a run summary: the terminal table, CSV and JSON.

use sim::summary::{Metrics, RunSummary, Status};

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

/// The comparison table, one row per strategy, right-aligned numbers.
pub fn table(s: &RunSummary) -> String {
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

/// One CSV record per strategy, in [`csv_header`] order.
pub fn csv_records(s: &RunSummary) -> Vec<Vec<String>> {
    let cols = metric_columns();
    s.strategies
        .iter()
        .map(|st| {
            let status = match st.status {
                Status::Ok => "ok",
                Status::NotApplicable => "not_applicable",
            };
            let mut r = vec![
                s.scenario.clone(),
                s.seed.to_string(),
                st.strategy.clone(),
                status.to_string(),
                st.reason.clone().unwrap_or_default(),
            ];
            match &st.metrics {
                Some(m) => {
                    let vals = m.fields();
                    debug_assert_eq!(vals.len(), cols.len());
                    r.extend(vals.into_iter().map(|(_, v)| match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    }));
                }
                None => r.extend(cols.iter().map(|_| String::new())),
            }
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

/// The summary as pretty JSON (the DESIGN.md contract), newline-terminated.
pub fn json(s: &RunSummary) -> String {
    let mut j = serde_json::to_string_pretty(s).expect("summary serializes");
    j.push('\n');
    j
}
