//! Rendering a run summary: the terminal table, CSV and JSON.

use sim::scenario::FaultKind;
use sim::summary::{EndReason, Metrics, RunSummary, Status, StrategySummary};
use sim::Scenario;

/// The terminal table's columns: the figures of [`sim::metric_defs::METRICS`] that have one, in
/// its order, as (header, flat field name); a figure only some workloads have
/// (`incomplete_groups`) only when `grouped`.
pub fn columns(grouped: bool) -> Vec<(&'static str, String)> {
    let present = metric_columns_for(grouped);
    sim::metric_defs::METRICS
        .iter()
        .filter_map(|d| d.column.map(|c| (c, d.flat())))
        .filter(|(_, flat)| present.contains(flat))
        .collect()
}

/// Whether the summary has the figures of fixed-size correlation groups (`[workload]
/// group_size`): then its table and CSV have their columns, else not (the bytes of every other
/// summary stay as they were).
pub fn grouped(s: &RunSummary) -> bool {
    s.strategies.iter().any(|st| {
        st.metrics
            .as_ref()
            .is_some_and(|m| m.incomplete_groups.is_some())
    })
}

/// A figure as the table shows it: counts as integers, other numbers with one decimal (none from
/// 100 up), words as they are.
fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
        serde_json::Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if x >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            }
        }
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `ended_by` as the JSON summary spells it (`settled`, `drain_timeout`, ...).
pub fn end_reason_name(r: EndReason) -> String {
    match serde_json::to_value(r) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{r:?}"),
    }
}

/// What a run that did not settle says about itself: how it ended, in words, and what to do about
/// a bound it ran into (`None` for a settled run). One arm per [`EndReason`]: a new end reason
/// (e.g. `suspended`) is one more arm here.
fn end_phrase(m: &Metrics) -> Option<(String, Option<&'static str>)> {
    let mut pending = format!(
        "{} pending",
        sim::verdict::count(m.pending_at_end, "message", "messages")
    );
    if m.unacked_at_end > 0 {
        pending += &format!(
            " and {} applied whose ack or offset commit never reached the broker",
            m.unacked_at_end
        );
    }
    match m.ended_by {
        EndReason::Settled => None,
        EndReason::Stuck => Some((
            format!("is stuck: nothing was left to happen with {pending}"),
            None,
        )),
        EndReason::DrainTimeout => Some((
            format!("did not settle: the drain phase timed out with {pending}"),
            Some("raise [run] drain_timeout if the backlog only needs longer"),
        )),
        EndReason::MaxEvents => Some((
            format!("was cut off by the event bound with {pending}"),
            Some("raise [run] max_events or --max-events"),
        )),
        EndReason::MaxSimTime => Some((
            format!("was cut off by --max-sim-time with {pending}"),
            Some("raise or drop --max-sim-time"),
        )),
        EndReason::Suspended => Some((
            format!("did not settle: an endpoint stopped for good holds {pending}"),
            Some("give [consumers] resume_after a duration if the endpoint should come back"),
        )),
    }
}

/// The consumers' capacity in messages per second (count / mean service time), if it is finite.
pub fn consumer_capacity_per_s(sc: &Scenario) -> Option<f64> {
    let mean_s = sc.consumers.service.0.mean_micros() / 1e6;
    (mean_s > 0.0).then(|| sc.consumers.count as f64 / mean_s)
}

/// A readable rate: whole numbers from 10/s up, else 2 significant digits.
fn per_s(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}/s")
    } else {
        format!("{x:.2}/s")
    }
}

/// The likely causes in the scenario of a run not settling, most likely first: offered load above
/// the consumers' capacity, a broker that never returns, a suspended endpoint that never resumes.
pub fn likely_causes(sc: &Scenario) -> Vec<String> {
    let mut causes = Vec::new();
    let offered = sc.workload.rate.as_per_sec();
    if let Some(cap) = consumer_capacity_per_s(sc) {
        if offered > cap {
            causes.push(format!(
                "offered load {} is above the consumers' capacity of about {} ({} consumer(s), mean service {})",
                per_s(offered),
                per_s(cap),
                sc.consumers.count,
                sim::time::Dur(sc.consumers.service.0.mean_micros().round() as u64)
            ));
        }
    }
    for f in &sc.faults {
        if f.kind == FaultKind::BrokerCrash && f.duration.is_none() {
            causes.push(match &f.broker {
                Some(b) => format!("broker {b} never returns (its broker_crash has no `for`)"),
                None => "a crashed broker never returns (a broker_crash has no `for`)".to_string(),
            });
        }
    }
    let poison =
        sc.workload.poison_fraction > 0.0 || sc.faults.iter().any(|f| f.kind == FaultKind::Poison);
    if poison && sc.redelivery_policy().limit == sim::scenario::Limit::Unlimited {
        causes.push(format!(
            "poison messages are retried forever (no redelivery limit: {})",
            crate::limit_source(sc)
        ));
    } else if poison && !sc.redelivery_policy().count_failed {
        causes.push(format!(
            "poison messages are retried forever (rabbitmq_quorum {} does not count a nack against \
             its delivery limit: [consumers] return_with = \"reject\" would)",
            sc.broker_version(0).unwrap_or_default()
        ));
    }
    if sc.consumers.suspend_after_failures > 0 && sc.consumers.resume_after.is_none() {
        causes.push("a suspended endpoint never resumes (resume_after = \"never\")".to_string());
    }
    causes
}

/// Why a network of brokers can end stuck (issue 41), as ActiveMQ's own bridge filter decides.
const STRANDED: &str = "messages that crossed a network bridge wait for a consumer on the broker \
     they reached and are never forwarded again (networkTTL 1, and no message goes back to a \
     broker it came from: ActiveMQ's stuck messages, docs/modelling-your-broker.md)";

/// Why an aggregating strategy without a completion timeout ends stuck (issue 39).
const BY_SIZE_ONLY: &str = "the aggregator completes by size only (completion_timeout = 0s): \
     each key's last, incomplete group stays in the aggregation repository for ever";

/// [`BY_SIZE_ONLY`] with correlation groups (`[workload] group_size`): the group's own size.
const BY_ORDER_SIZE_ONLY: &str =
    "the aggregator completes a group by its size only (completion_timeout = 0s): a group \
     missing a member (incomplete_groups) stays in the aggregation repository for ever";

/// Whether the strategy ran with an aggregator that has a completion size and no timeout.
fn completes_by_size_only(st: &sim::StrategySummary) -> bool {
    let value = |name: &str| {
        st.params
            .0
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.value.as_str())
    };
    value("completion_timeout") == Some("0s") && value("completion_size").is_some_and(|v| v != "0")
}

/// Whether the scenario has demand-forwarding bridges, which can strand what crossed them.
fn stranding_network(sc: &Scenario) -> bool {
    sc.brokers.len() > 1 && sc.network.kind == sim::scenario::NetworkKind::Bridge
}

/// One `warning:` line per strategy whose run did not settle, naming the likely cause (in the
/// scenario as that strategy ran it: under `flavour = "native"`, on its own broker's defaults).
pub fn unsettled_warnings(s: &RunSummary, sc: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    for st in &s.strategies {
        let Some(m) = &st.metrics else { continue };
        let Some((what, hint)) = end_phrase(m) else {
            continue;
        };
        let ran = match strategies::native_flavour(&st.strategy) {
            Some(f) => sc.on_flavour(f),
            None => std::borrow::Cow::Borrowed(sc),
        };
        let mut line = format!(
            "warning: {} {what} (ended_by = {})",
            st.strategy,
            end_reason_name(m.ended_by)
        );
        // A bound the run ran into is the cause; otherwise the scenario's, then the generic hint.
        let cut_off = matches!(m.ended_by, EndReason::MaxEvents | EndReason::MaxSimTime);
        let mut causes = likely_causes(&ran);
        if m.ended_by == EndReason::Stuck && stranding_network(sc) {
            causes.insert(0, STRANDED.to_string());
        }
        if m.ended_by == EndReason::Stuck && completes_by_size_only(st) {
            let why = match m.incomplete_groups {
                Some(_) => BY_ORDER_SIZE_ONLY,
                None => BY_SIZE_ONLY,
            };
            causes.insert(0, why.to_string());
        }
        if !cut_off && !causes.is_empty() {
            line.push_str(&format!("; likely cause: {}", causes.join("; ")));
        } else if let Some(h) = hint {
            line.push_str(&format!("; {h}"));
        }
        out.push(line);
    }
    out
}

/// Whether every strategy that ran settled (what `sim run --strict` requires).
pub fn all_settled(s: &RunSummary) -> bool {
    s.strategies
        .iter()
        .filter_map(|st| st.metrics.as_ref())
        .all(|m| m.ended_by == EndReason::Settled)
}

/// Marks a latency that counts messages never delivered at the run's end: a lower bound.
pub const LOWER_BOUND: &str = "≥";

/// The note under a table with [`LOWER_BOUND`] cells.
pub const LOWER_BOUND_NOTE: &str =
    "≥: a lower bound: messages never delivered count as delivered at the run's end \
     (p50_ms, p99_ms, max_ms; docs/metrics.md)";

/// Marks a figure the judged history cannot give (`sim judge`): unknown, never 0.
pub const UNKNOWN: &str = "?";

/// The note under a table with [`UNKNOWN`] cells.
pub const UNKNOWN_NOTE: &str =
    "?: unknown: the history has no rows of the events this figure needs (docs/judge.md)";

/// The table's cells (a header row, then one row per strategy, its verdict last) and the notes
/// under it: about strategies that could not run, what a `≥` means, and what a `?` means (the
/// figures named in `unknown`, flat names).
fn table_cells(s: &RunSummary, unknown: &[&str]) -> (Vec<Vec<String>>, Vec<String>) {
    let cols = columns(grouped(s));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["strategy".to_string()];
    header.extend(cols.iter().map(|(h, _)| h.to_string()));
    header.push("verdict".to_string());
    rows.push(header);
    let mut notes = Vec::new();
    let mut censored = false;
    for st in &s.strategies {
        let mut row = vec![st.strategy.clone()];
        match (&st.status, &st.metrics) {
            (Status::Ok, Some(m)) => {
                let fields = m.fields();
                row.extend(cols.iter().map(|(_, name)| {
                    if unknown.contains(&name.as_str()) {
                        return UNKNOWN.to_string();
                    }
                    let v = fields
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| cell(v))
                        .unwrap_or_default();
                    if m.undelivered > 0 && name.starts_with("latency_ms_") {
                        censored = true;
                        format!("{LOWER_BOUND}{v}")
                    } else {
                        v
                    }
                }));
                row.push(st.verdict.clone().unwrap_or_else(|| "-".to_string()));
            }
            _ => {
                row.extend(cols.iter().map(|_| "-".to_string()));
                row.push("n/a".to_string());
                notes.push(format!(
                    "{}: not applicable: {}",
                    st.strategy,
                    st.reason.as_deref().unwrap_or("no reason given")
                ));
            }
        }
        rows.push(row);
    }
    if censored {
        notes.push(LOWER_BOUND_NOTE.to_string());
    }
    if cols
        .iter()
        .any(|(_, name)| unknown.contains(&name.as_str()))
    {
        notes.push(UNKNOWN_NOTE.to_string());
    }
    (rows, notes)
}

/// The comparison table, one row per strategy, right-aligned numbers.
pub fn table(s: &RunSummary) -> String {
    table_unknown(s, &[])
}

/// [`table`] with the figures named in `unknown` (flat names) shown as [`UNKNOWN`].
pub fn table_unknown(s: &RunSummary, unknown: &[&str]) -> String {
    let (rows, notes) = table_cells(s, unknown);
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, v)| {
                // The names and the verdicts are words: left-aligned.
                if c == 0 || c + 1 == r.len() {
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
    markdown_table_aligned(header, rows, |i| i < left)
}

/// A Markdown table whose columns `is_left` says are left-aligned (the rest right-aligned).
fn markdown_table_aligned(
    header: &[String],
    rows: &[Vec<String>],
    is_left: impl Fn(usize) -> bool,
) -> String {
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
        .map(|i| if is_left(i) { "---" } else { "---:" })
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
    let (rows, notes) = table_cells(s, &[]);
    let last = rows[0].len() - 1;
    let mut out = markdown_table_aligned(&rows[0], &rows[1..], |i| i == 0 || i == last);
    for n in notes {
        out.push_str(&format!("\n{n}\n"));
    }
    out
}

/// The metric columns, derived from [`Metrics`] itself so the CSV can never drift from the JSON
/// (without the figures of correlation groups: [`metric_columns_for`]).
pub fn metric_columns() -> Vec<String> {
    metric_columns_for(false)
}

/// The metric columns, with those of fixed-size correlation groups (`incomplete_groups`) when
/// `grouped`.
pub fn metric_columns_for(grouped: bool) -> Vec<String> {
    Metrics {
        incomplete_groups: grouped.then_some(0),
        ..Metrics::default()
    }
    .fields()
    .into_iter()
    .map(|(k, _)| k)
    .collect()
}

/// The columns of a strategy's entry: `status`, `reason`, every metric, then the verdict
/// (`valid`, `verdict`), last so that the metrics' columns keep their places.
pub fn strategy_columns() -> Vec<String> {
    strategy_columns_for(false)
}

/// [`strategy_columns`], with the figures of correlation groups when `grouped`.
pub fn strategy_columns_for(grouped: bool) -> Vec<String> {
    let mut h: Vec<String> = ["status", "reason"].map(String::from).to_vec();
    h.extend(metric_columns_for(grouped));
    h.extend(["valid", "verdict"].map(String::from));
    h
}

/// The CSV header: identification columns, then [`strategy_columns`].
pub fn csv_header() -> Vec<String> {
    csv_header_for(false)
}

/// [`csv_header`], with the figures of correlation groups when `grouped`.
pub fn csv_header_for(grouped: bool) -> Vec<String> {
    let mut h: Vec<String> = ["scenario", "seed", "strategy"].map(String::from).to_vec();
    h.extend(strategy_columns_for(grouped));
    h
}

/// A strategy's [`strategy_columns`] as CSV cells (empty metrics and verdict when it did not
/// run).
pub fn strategy_cells(st: &StrategySummary) -> Vec<String> {
    strategy_cells_for(st, false)
}

/// A strategy's [`strategy_columns_for`] as CSV cells: each column's figure, empty when the
/// entry has none.
pub fn strategy_cells_for(st: &StrategySummary, grouped: bool) -> Vec<String> {
    let status = match st.status {
        Status::Ok => "ok",
        Status::NotApplicable => "not_applicable",
    };
    let mut r = vec![status.to_string(), st.reason.clone().unwrap_or_default()];
    let fields = st.metrics.as_ref().map(Metrics::fields).unwrap_or_default();
    r.extend(metric_columns_for(grouped).iter().map(|c| {
        match fields.iter().find(|(k, _)| k == c).map(|(_, v)| v) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }));
    r.push(st.valid.map(|v| v.to_string()).unwrap_or_default());
    r.push(st.verdict.clone().unwrap_or_default());
    r
}

/// One CSV record per strategy, in [`csv_header_for`] order ([`grouped`]).
pub fn csv_records(s: &RunSummary) -> Vec<Vec<String>> {
    let grouped = grouped(s);
    s.strategies
        .iter()
        .map(|st| {
            let mut r = vec![s.scenario.clone(), s.seed.to_string(), st.strategy.clone()];
            r.extend(strategy_cells_for(st, grouped));
            r
        })
        .collect()
}

/// The summary as CSV text.
pub fn csv(s: &RunSummary) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(csv_header_for(grouped(s)))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str, rate: &str, consumers: u32) -> Scenario {
        let text = format!(
            "strategies = [\"competing\"]\n[workload]\nmessages = 100\nrate = \"{rate}\"\nkeys = 5\n\
             [[broker]]\nname = \"a\"\n[consumers]\ncount = {consumers}\nservice = \"10ms\"\n{extra}"
        );
        crate::load_text("t.toml", &text).expect("loads")
    }

    fn summary(ended_by: EndReason) -> RunSummary {
        RunSummary {
            scenario: "t".into(),
            seed: 1,
            strategies: vec![StrategySummary {
                strategy: "competing".into(),
                status: Status::Ok,
                reason: None,
                valid: None,
                verdict: None,
                metrics: Some(Metrics {
                    ended_by,
                    pending_at_end: 3,
                    ..Metrics::default()
                }),
                params: Default::default(),
            }],
        }
    }

    #[test]
    fn causes_name_overload_a_broker_that_never_returns_and_a_never_resumed_endpoint() {
        let sc = scenario(
            "suspend_after_failures = 3\nresume_after = \"never\"\n\
             [[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"1s\"\n",
            "150/s",
            1,
        );
        let c = likely_causes(&sc);
        assert_eq!(c.len(), 3, "{c:?}");
        assert!(
            c[0].starts_with("offered load 150/s is above the consumers' capacity of about 100/s"),
            "{c:?}"
        );
        assert_eq!(
            c[1],
            "broker a never returns (its broker_crash has no `for`)"
        );
        assert!(c[2].contains("resume_after = \"never\""), "{c:?}");
        assert!(likely_causes(&scenario("", "50/s", 1)).is_empty());
    }

    #[test]
    fn poison_without_a_backout_threshold_is_a_cause() {
        let sc = scenario(
            "[redelivery]\nmax_redeliveries = -1\n[[fault]]\nkind = \"poison\"\nat = \"1s\"\nfor = \"1s\"\nfraction = 0.1\n",
            "50/s",
            1,
        );
        let c = likely_causes(&sc);
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].contains("retried forever"), "{c:?}");
    }

    /// Under `flavour = "native"` a strategy's warning reads its own broker's defaults: Pulsar
    /// retries a poison message forever, ActiveMQ gives up after 7 deliveries.
    #[test]
    fn a_native_run_is_explained_on_its_own_brokers_defaults() {
        let sc = scenario(
            "[[fault]]\nkind = \"poison\"\nat = \"1s\"\nfor = \"1s\"\nfraction = 0.1\n",
            "50/s",
            1,
        );
        let mut sc = sc;
        sc.flavour = sim::scenario::FlavourChoice::Native;
        let mut s = summary(EndReason::DrainTimeout);
        let mut pulsar = s.strategies[0].clone();
        pulsar.strategy = "pulsar_key_shared".into();
        s.strategies.push(pulsar);
        let w = unsettled_warnings(&s, &sc);
        assert!(w[0].contains("raise [run] drain_timeout"), "{w:?}");
        assert!(
            w[1].contains(
                "poison messages are retried forever (no redelivery limit: the pulsar default)"
            ),
            "{w:?}"
        );
    }

    #[test]
    fn one_warning_per_unsettled_run_and_none_when_settled() {
        let sc = scenario("", "150/s", 1);
        assert!(unsettled_warnings(&summary(EndReason::Settled), &sc).is_empty());
        assert!(all_settled(&summary(EndReason::Settled)));
        let w = unsettled_warnings(&summary(EndReason::Stuck), &sc);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("warning: competing is stuck"), "{w:?}");
        assert!(w[0].contains("likely cause: offered load 150/s"), "{w:?}");
        // A bound the run hit is its own cause.
        let w = unsettled_warnings(&summary(EndReason::MaxEvents), &sc);
        assert!(
            w[0].ends_with("raise [run] max_events or --max-events"),
            "{w:?}"
        );
        assert!(!all_settled(&summary(EndReason::DrainTimeout)));
        // Without a cause in the scenario, the drain timeout names its remedy.
        let calm = scenario("", "50/s", 1);
        let w = unsettled_warnings(&summary(EndReason::DrainTimeout), &calm);
        assert!(w[0].contains("raise [run] drain_timeout"), "{w:?}");
    }

    /// Issue 39: a resequencer completing by size only leaves each key's last group behind;
    /// the warning names that before the network's stranding (it named only the latter).
    #[test]
    fn a_stuck_aggregator_without_completion_timeout_is_named() {
        let sc = scenario("", "50/s", 1);
        let mut s = summary(EndReason::Stuck);
        let param = |name: &str, value: &str| sim::ParamValue {
            name: name.into(),
            value: value.into(),
            default: false,
            warning: None,
        };
        s.strategies[0].strategy = "resequencer".into();
        s.strategies[0].params.0 = vec![
            param("completion_size", "10"),
            param("completion_timeout", "0s"),
        ];
        let w = unsettled_warnings(&s, &sc);
        assert!(
            w[0].contains("likely cause: the aggregator completes by size only"),
            "{w:?}"
        );
        // With a completion timeout the groups complete: not named.
        s.strategies[0].params.0[1].value = "1s".into();
        let w = unsettled_warnings(&s, &sc);
        assert!(!w[0].contains("completes by size only"), "{w:?}");
    }

    #[test]
    fn an_unsettled_run_names_its_pending_and_its_unacked_messages() {
        let sc = scenario("", "50/s", 1);
        let w = unsettled_warnings(&summary(EndReason::Stuck), &sc);
        assert!(w[0].contains("with 3 messages pending"), "{w:?}");
        assert!(!w[0].contains("applied"), "{w:?}");
        let mut s = summary(EndReason::Stuck);
        s.strategies[0].metrics.as_mut().unwrap().unacked_at_end = 4;
        let w = unsettled_warnings(&s, &sc);
        assert!(
            w[0].contains(
                "with 3 messages pending and 4 applied whose ack or offset commit never reached the broker"
            ),
            "{w:?}"
        );
    }

    /// The verdict is the table's last column (in the Markdown table too, left-aligned), the
    /// CSV's last two, and the latencies of a run that left messages undelivered are marked as
    /// lower bounds, with the note saying so.
    #[test]
    fn the_table_shows_each_verdict_and_marks_censored_latencies() {
        let mut s = summary(EndReason::DrainTimeout);
        let m = s.strategies[0].metrics.as_mut().unwrap();
        (m.produced, m.undelivered, m.latency_ms.p99) = (10, 3, 1234.0);
        let st = s.strategies.remove(0).judged("ordering_violations");
        s.strategies.push(st);
        let t = table(&s);
        let header = t.lines().next().unwrap();
        assert!(header.ends_with("verdict"), "{t}");
        let row = t.lines().nth(2).unwrap();
        assert!(
            row.ends_with("FAIL: 3 of 10 never delivered (pending at the end)"),
            "{t}"
        );
        assert!(row.contains(" ≥1234 "), "{t}");
        assert!(t.contains(LOWER_BOUND_NOTE), "{t}");
        let md = table_markdown(&s);
        assert!(md.lines().nth(1).unwrap().ends_with("---: | --- |"), "{md}");
        let header = csv_header();
        assert_eq!(&header[header.len() - 2..], ["valid", "verdict"]);
        let cells = &csv_records(&s)[0];
        assert_eq!(cells.len(), header.len());
        assert_eq!(cells[cells.len() - 2], "false");
        // Everything delivered: no mark, no note.
        let ok = summary(EndReason::Settled);
        let mut ok_st = ok.strategies[0].clone();
        ok_st.metrics.as_mut().unwrap().pending_at_end = 0;
        let ok = RunSummary {
            strategies: vec![ok_st.judged("ordering_violations")],
            ..ok
        };
        let t = table(&ok);
        assert!(t.lines().nth(2).unwrap().ends_with("  ok"), "{t}");
        assert!(!t.contains('≥'), "{t}");
    }

    #[test]
    fn the_table_shows_ended_by() {
        let t = table(&summary(EndReason::DrainTimeout));
        assert!(t.lines().next().unwrap().contains("ended_by"), "{t}");
        assert!(t.contains("drain_timeout"), "{t}");
    }
}
