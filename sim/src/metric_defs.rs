//! Every figure of a run summary, defined once: its name (the JSON path; the CSV column and the
//! `[expect]` name are the same with `.` as `_`, or a coverage counter's own name), its column in
//! the terminal table, its unit and what it means. The table, `sim list --metrics`, the charts'
//! labels and the reference in docs/metrics.md are generated from [`METRICS`]; a test checks that
//! it names every field of [`crate::summary::Metrics`] exactly once.

/// One figure.
#[derive(Clone, Copy, Debug)]
pub struct MetricDef {
    /// Its path in the JSON summary (`latency_ms.p99`, `coverage.broker_crashes`).
    pub path: &'static str,
    /// Its name in words, for chart titles and legends.
    pub title: &'static str,
    /// Its header in the terminal table (absent: not in the table, only in the CSV and JSON).
    pub column: Option<&'static str>,
    /// Its unit.
    pub unit: &'static str,
    /// What it counts or measures, and how to read it.
    pub meaning: &'static str,
}

impl MetricDef {
    /// The flat name: the CSV column (`latency_ms_p99`).
    pub fn flat(&self) -> String {
        self.path.replace('.', "_")
    }

    /// The name a reader sees: the table column if it has one, else the path.
    pub fn label(&self) -> &'static str {
        self.column.unwrap_or(self.path)
    }

    /// Its title in lower case as the noun of a count of `n`: `ordering violations`, or, when
    /// `n` is 1, with its last plural word singular (`ordering violation`, `lease expiry`,
    /// `resend stored`). Every count phrase a chart or table writes goes through here.
    pub fn noun(&self, n: f64) -> String {
        let title = self.title.to_lowercase();
        if n != 1.0 {
            return title;
        }
        let plural =
            |w: &str| w.len() > 2 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us");
        let mut words: Vec<String> = title.split(' ').map(String::from).collect();
        if let Some(w) = words.iter_mut().rev().find(|w| plural(w)) {
            *w = if let Some(stem) = w.strip_suffix("ies") {
                format!("{stem}y")
            } else if ["ches", "shes", "sses", "xes"]
                .iter()
                .any(|e| w.ends_with(e))
            {
                w[..w.len() - 2].to_string()
            } else {
                w[..w.len() - 1].to_string()
            };
        }
        words.join(" ")
    }

    /// A coverage counter (proof that the run exercised something).
    pub fn is_coverage(&self) -> bool {
        self.path.starts_with("coverage.")
    }
}

/// The figure named `path` (a JSON path such as `lost` or `latency_ms.p99`).
pub fn metric(path: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|d| d.path == path)
}

/// Every figure, in the order of the table and of the reference.
pub const METRICS: &[MetricDef] = &[
    MetricDef {
        path: "produced",
        title: "Produced",
        column: Some("produced"),
        unit: "messages",
        meaning: "messages produced",
    },
    MetricDef {
        path: "applied",
        title: "Applied",
        column: Some("applied"),
        unit: "messages",
        meaning: "messages applied at least once. Applied wins: a message a consumer wrote is applied even if the broker's copy was discarded (a non-persistent broker's crash), dropped or dead-lettered while the consumer processed it; a second apply is a duplicate",
    },
    MetricDef {
        path: "ordering_violations",
        title: "Ordering violations",
        column: Some("violations"),
        unit: "applies",
        meaning: "applies of (k, s) after an apply of (k, s') with s' > s: a message applied after a newer message of its key. A redelivered old message applied after a newer one counts",
    },
    MetricDef {
        path: "stale_writes",
        title: "Stale writes",
        column: Some("stale_wr"),
        unit: "writes",
        meaning: "`state` workloads: writes of a state older than the newest state already written for the key (the target went backwards; a reader saw it). Judged on the state written, not on the message handled: a notifier that handles notifications out of order but writes what it read from the source makes no stale write unless a slower handler's older read lands last (a plain, unconditional UPDATE). 0 for `command` workloads. The figure the guarantee of `notifier`, `db_optimistic` and `cache_pessimistic` is about (`sim list`)",
    },
    MetricDef {
        path: "stale_rejected",
        title: "Stale rejected",
        column: Some("stale_rej"),
        unit: "messages",
        meaning: "rejected by the handler as stale (and acked), never applied: the version or timestamp checks of `db_optimistic` and `cache_pessimistic`, the notifier's conditional write that changed nothing",
    },
    MetricDef {
        path: "lost",
        title: "Lost",
        column: Some("lost"),
        unit: "messages",
        meaning: "vanished: no copy anywhere and never applied (a non-persistent broker's crash, a buffer acked upstream and then lost with its process)",
    },
    MetricDef {
        path: "given_up",
        title: "Given up",
        column: None,
        unit: "messages",
        meaning: "given up by their producer and never stored: not stored within `[producers] delivery_timeout` of the send (Kafka's `delivery.timeout.ms`, 120s under the `kafka` flavour) and not sent again (`on_delivery_timeout = \"drop\"`). Not `lost`: no broker lost them, the application was told (the send's callback)",
    },
    MetricDef {
        path: "lost_commands",
        title: "Lost commands",
        column: None,
        unit: "messages",
        meaning: "`command` workloads only: non-poison commands that never took effect (stale-rejected, lost, given up, dead-lettered or dropped): what the user lost. 0 for `state` workloads",
    },
    MetricDef {
        path: "duplicates",
        title: "Duplicates",
        column: Some("dups"),
        unit: "applies",
        meaning: "applies beyond the first of the same message (the ack was lost after the apply)",
    },
    MetricDef {
        path: "dead_lettered",
        title: "Dead-lettered",
        column: Some("dlq"),
        unit: "messages",
        meaning: "moved to the dead-letter (backout) queue without being applied",
    },
    MetricDef {
        path: "poison_dead_lettered",
        title: "Poison dead-lettered",
        column: Some("poison_dlq"),
        unit: "messages",
        meaning: "of those, poison messages (the DLQ doing its job)",
    },
    MetricDef {
        path: "innocent_dead_lettered",
        title: "Innocent dead-lettered",
        column: None,
        unit: "messages",
        meaning: "of those, non-poison messages: casualties of retries running out during an outage",
    },
    MetricDef {
        path: "dropped",
        title: "Dropped",
        column: Some("dropped"),
        unit: "messages",
        meaning: "deleted by a broker that gave up on them (the redelivery limit) without a dead-letter queue (`[redelivery] dead_letter = \"drop\"`, or the flavour's default: ActiveMQ's non-persistent messages, Artemis without a dead-letter address, WebLogic without an error destination), never applied",
    },
    MetricDef {
        path: "poison_dropped",
        title: "Poison dropped",
        column: None,
        unit: "messages",
        meaning: "of those, poison messages",
    },
    MetricDef {
        path: "innocent_dropped",
        title: "Innocent dropped",
        column: None,
        unit: "messages",
        meaning: "of those, non-poison messages",
    },
    MetricDef {
        path: "pending_at_end",
        title: "Pending at the end",
        column: Some("pending"),
        unit: "messages",
        meaning: "never applied and still held somewhere (a broker, a session, a strategy's buffer) when the run ended: a liveness failure",
    },
    MetricDef {
        path: "unacked_at_end",
        title: "Unacked at the end",
        column: None,
        unit: "messages",
        meaning: "applied, but the broker still held the delivery when the run ended (its ack, or the offset commit covering the record, never reached the broker): a restart would deliver it again. Counted in `applied`; 0 when the run settled",
    },
    MetricDef {
        path: "undelivered",
        title: "Never delivered",
        column: None,
        unit: "messages",
        meaning: "should have taken effect and never did: `pending_at_end` + `lost` + `given_up` + `innocent_dead_lettered` + `innocent_dropped` (+ `stale_rejected` for `command` workloads; poison messages dead-lettered or dropped are the queue doing its job). Any makes the verdict `FAIL` and puts the strategy in the cost chart's band above every strategy that delivered all. The latencies count each of them at the run's end (a lower bound, marked `≥` in the table) and `throughput_per_s` divides by the whole run, so not delivering never looks fast",
    },
    MetricDef {
        path: "incomplete_groups",
        title: "Incomplete groups",
        column: Some("incomplete"),
        unit: "groups",
        meaning: "only with fixed-size correlation groups (`[workload] group_size = n`; absent otherwise): groups (an order and its lines: a key's seqs `g*n .. g*n+n-1`) at least one member of which never took effect: dead-lettered (a poison line), dropped, stale-rejected, lost or pending at the end. An aggregator completing by size holds such a group's other members for ever (they are pending); one with a completion timeout releases them without the missing member. Judged from the history, whatever the strategy did with the group",
    },
    MetricDef {
        path: "ended_by",
        title: "Ended by",
        column: Some("ended_by"),
        unit: "reason",
        meaning: "why the run stopped: `settled` (every message settled), `stuck` (nothing left to happen, yet messages unsettled), `drain_timeout` (`[run] drain_timeout`), `max_events` (`[run] max_events` or `--max-events`), `max_sim_time` (`--max-sim-time`), `suspended` (an endpoint stopped for good, `resume_after = \"never\"`, held messages: they are pending)",
    },
    MetricDef {
        path: "final_state_mismatches",
        title: "Final-state mismatches",
        column: Some("mismatch"),
        unit: "keys",
        meaning: "keys whose final target state differs from applying all their non-poison messages in order (`state` workload: the state of the last message; `command`: every message exactly once, in order)",
    },
    MetricDef {
        path: "redeliveries",
        title: "Redeliveries",
        column: Some("redeliv"),
        unit: "deliveries",
        meaning: "deliveries marked redelivered",
    },
    MetricDef {
        path: "events",
        title: "Engine events",
        column: None,
        unit: "events",
        meaning: "engine events processed",
    },
    MetricDef {
        path: "throughput_per_s",
        title: "Throughput",
        column: Some("thru/s"),
        unit: "messages/s",
        meaning: "messages per simulated second: first applies divided by the time of the last apply, or by the run's end when some message was never delivered (`undelivered`)",
    },
    MetricDef {
        path: "latency_ms.p50",
        title: "p50 latency",
        column: Some("p50_ms"),
        unit: "ms",
        meaning: "produce -> first apply, median (HDR histogram, 3 significant digits); a message never delivered (`undelivered`) counts as applied at the run's end, so with any the figure is a lower bound (`≥` in the table)",
    },
    MetricDef {
        path: "latency_ms.p99",
        title: "p99 latency",
        column: Some("p99_ms"),
        unit: "ms",
        meaning: "produce -> first apply, 99th percentile (HDR histogram, 3 significant digits); a message never delivered (`undelivered`) counts as applied at the run's end, so with any the figure is a lower bound (`≥` in the table)",
    },
    MetricDef {
        path: "latency_ms.max",
        title: "Max latency",
        column: Some("max_ms"),
        unit: "ms",
        meaning: "produce -> first apply, maximum (HDR histogram, 3 significant digits); a message never delivered (`undelivered`) counts as applied at the run's end, so with any the figure is a lower bound (`≥` in the table)",
    },
    MetricDef {
        path: "max_block_ms",
        title: "Max head-of-line block",
        column: Some("block_ms"),
        unit: "ms",
        meaning: "longest time a message, already at a broker, waited for the previous message of its key to be resolved before it was applied (or until the end, if never): head-of-line blocking",
    },
    MetricDef {
        path: "sim_time_s",
        title: "Simulated time",
        column: None,
        unit: "seconds",
        meaning: "simulated time when the run ended",
    },
    MetricDef {
        path: "drain_start_s",
        title: "Drain start",
        column: None,
        unit: "seconds",
        meaning: "when the drain phase began (production over, every planned fault over)",
    },
    MetricDef {
        path: "coverage.broker_crashes",
        title: "Broker crashes",
        column: None,
        unit: "count",
        meaning: "broker crashes",
    },
    MetricDef {
        path: "coverage.consumer_crashes",
        title: "Consumer crashes",
        column: None,
        unit: "count",
        meaning: "consumer crashes",
    },
    MetricDef {
        path: "coverage.disconnects",
        title: "Disconnects",
        column: None,
        unit: "count",
        meaning: "consumer connection losses (network blips and broker crashes seen by consumers)",
    },
    MetricDef {
        path: "coverage.failovers",
        title: "Failovers",
        column: None,
        unit: "count",
        meaning: "reconnections of producers and consumers after losing a broker",
    },
    MetricDef {
        path: "coverage.db_outages",
        title: "Db outages",
        column: None,
        unit: "count",
        meaning: "target-database outages",
    },
    MetricDef {
        path: "coverage.rollbacks",
        title: "Rollbacks",
        column: None,
        unit: "count",
        meaning: "failed processing attempts",
    },
    MetricDef {
        path: "coverage.forwards",
        title: "Forwards",
        column: None,
        unit: "count",
        meaning: "store-and-forward hops between brokers",
    },
    MetricDef {
        path: "coverage.suspensions",
        title: "Suspensions",
        column: None,
        unit: "count",
        meaning: "endpoint suspensions",
    },
    MetricDef {
        path: "coverage.reassignments",
        title: "Reassignments",
        column: None,
        unit: "count",
        meaning: "owner changes: exclusive-consumer takeovers, message-group reassignments",
    },
    MetricDef {
        path: "coverage.source_reads",
        title: "Source reads",
        column: None,
        unit: "count",
        meaning: "reads of the source database (the notifier's load on the source)",
    },
    MetricDef {
        path: "coverage.source_outages",
        title: "Source outages",
        column: None,
        unit: "count",
        meaning: "source-database outages",
    },
    MetricDef {
        path: "coverage.cache_collapses",
        title: "Cache collapses",
        column: None,
        unit: "count",
        meaning: "cache-cluster collapses",
    },
    MetricDef {
        path: "coverage.send_failures",
        title: "Send failures",
        column: None,
        unit: "count",
        meaning: "producer sends that failed (a Unit-of-Order member down, a `send_error` fault) and were retried; a retry that fails counts again",
    },
    MetricDef {
        path: "coverage.resends_stored",
        title: "Resends stored",
        column: None,
        unit: "count",
        meaning: "resends of a message the broker had stored though the producer saw the send fail (a `send_timeout`) that the broker stored again: duplicates in its queue or log",
    },
    MetricDef {
        path: "coverage.resends_deduplicated",
        title: "Resends deduplicated",
        column: None,
        unit: "count",
        meaning: "such resends the broker refused: an idempotent producer's sequence number, or its `dedup_window`",
    },
    MetricDef {
        path: "coverage.delivery_timeouts",
        title: "Delivery timeouts",
        column: None,
        unit: "count",
        meaning: "sends the producer gave up at its `delivery_timeout`, then dropped (`given_up`) or sent again (`on_delivery_timeout = \"resend\"`); one whose first attempt the broker had stored counts here only",
    },
    MetricDef {
        path: "coverage.batch_runs",
        title: "Batch runs",
        column: None,
        unit: "count",
        meaning: "batch job runs started",
    },
    MetricDef {
        path: "coverage.batch_runs_given_up",
        title: "Batch runs given up",
        column: None,
        unit: "count",
        meaning: "batch job runs that gave up on a resource outage",
    },
    MetricDef {
        path: "coverage.lease_expiries",
        title: "Lease expiries",
        column: None,
        unit: "count",
        meaning: "delivery leases (`[lease]`: visibility timeout, lock duration) that ended before the ack: the broker took the message back while a consumer may still have worked on it",
    },
    MetricDef {
        path: "coverage.failed_acks",
        title: "Failed acks",
        column: None,
        unit: "count",
        meaning: "acks (deletes, offset commits) the broker refused because the delivery was no longer the consumer's (its lease had ended, its partition moved to another member); the consumer's write, if any, had happened",
    },
    MetricDef {
        path: "coverage.commits",
        title: "Commits",
        column: None,
        unit: "count",
        meaning: "offset commits (`[consumers] commit = \"batch\"` or `\"interval\"`), each settling the records its consumer processed since its last one",
    },
    MetricDef {
        path: "coverage.dlq_replays",
        title: "DLQ replays",
        column: None,
        unit: "count",
        meaning: "messages an operator moved back from a dead-letter queue to their queue (`dlq_replay`); a replayed message counts once, by its last outcome",
    },
];

/// The reference tables of docs/metrics.md: the figures, then the coverage counters.
pub fn reference_markdown() -> String {
    let mut s = String::from("| field | table column | unit | meaning |\n|---|---|---|---|\n");
    for d in METRICS.iter().filter(|d| !d.is_coverage()) {
        let col = d.column.map(|c| format!("`{c}`")).unwrap_or_default();
        s.push_str(&format!(
            "| `{}` | {col} | {} | {} |\n",
            d.path, d.unit, d.meaning
        ));
    }
    s.push_str("\n| coverage counter | counts |\n|---|---|\n");
    for d in METRICS.iter().filter(|d| d.is_coverage()) {
        let name = d.path.trim_start_matches("coverage.");
        s.push_str(&format!("| `{name}` | {} |\n", d.meaning));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Metrics;

    /// Every field of the summary has exactly one definition, and every definition is a field.
    #[test]
    fn every_field_is_defined_once() {
        let fields: Vec<String> = Metrics::every()
            .fields()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let mut defined: Vec<String> = METRICS.iter().map(MetricDef::flat).collect();
        let n = defined.len();
        defined.sort();
        defined.dedup();
        assert_eq!(defined.len(), n, "a figure is defined twice");
        let mut f = fields.clone();
        f.sort();
        assert_eq!(defined, f);
    }

    /// Issue 41: "1 stale writes". A count of 1 reads singular, every other count plural.
    #[test]
    fn a_count_of_one_is_singular() {
        let noun = |p: &str, n: f64| metric(p).unwrap().noun(n);
        assert_eq!(noun("stale_writes", 1.0), "stale write");
        assert_eq!(noun("stale_writes", 2.0), "stale writes");
        assert_eq!(noun("stale_writes", 0.0), "stale writes");
        assert_eq!(noun("ordering_violations", 1.0), "ordering violation");
        assert_eq!(noun("final_state_mismatches", 1.0), "final-state mismatch");
        assert_eq!(noun("redeliveries", 1.0), "redelivery");
        assert_eq!(noun("coverage.lease_expiries", 1.0), "lease expiry");
        assert_eq!(noun("coverage.broker_crashes", 1.0), "broker crash");
        assert_eq!(noun("coverage.resends_stored", 1.0), "resend stored");
        assert_eq!(
            noun("coverage.batch_runs_given_up", 1.0),
            "batch run given up"
        );
        assert_eq!(noun("lost", 1.0), "lost");
        for d in METRICS {
            assert!(!d.noun(1.0).is_empty() && d.noun(2.0) == d.title.to_lowercase());
        }
    }

    #[test]
    fn columns_are_unique_and_short() {
        let mut cols: Vec<&str> = METRICS.iter().filter_map(|d| d.column).collect();
        let n = cols.len();
        cols.sort();
        cols.dedup();
        assert_eq!(cols.len(), n);
        assert!(cols.iter().all(|c| c.len() <= 10), "{cols:?}");
    }
}
