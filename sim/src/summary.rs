//! The run summary: the JSON contract documented in docs/metrics.md (field names exactly as written
//! there).

use serde::{Deserialize, Serialize};

/// Whether a strategy could run in the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It ran; metrics follow.
    Ok,
    /// It cannot run here; `reason` says why.
    NotApplicable,
}

/// Produce-to-apply latency percentiles, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Coverage counters: proof that a run exercised what its scenario claims to test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Broker crashes.
    pub broker_crashes: u64,
    /// Consumer crashes.
    pub consumer_crashes: u64,
    /// Consumer connection losses (network blips and broker crashes seen by consumers).
    pub disconnects: u64,
    /// Reconnections to another or the same broker after losing one (producers and consumers).
    pub failovers: u64,
    /// Target-database outages.
    pub db_outages: u64,
    /// Rollbacks (failed processing attempts).
    pub rollbacks: u64,
    /// Store-and-forward hops between brokers.
    pub forwards: u64,
    /// Endpoint suspensions.
    pub suspensions: u64,
    /// Owner changes (exclusive consumer takeovers, group reassignments).
    pub reassignments: u64,
    /// Reads of the source database (notifier).
    pub source_reads: u64,
    /// Source-database outages.
    pub source_outages: u64,
    /// Cache-cluster collapses.
    pub cache_collapses: u64,
    /// Producer sends that failed (e.g. a Unit-of-Order member down, a `send_error` fault) and were
    /// retried; a retry that fails counts again.
    pub send_failures: u64,
    /// Batch job runs started.
    pub batch_runs: u64,
    /// Batch job runs that gave up on a resource outage.
    pub batch_runs_given_up: u64,
    /// Delivery leases that ended with the message not acked (`[lease]`): taken back by the
    /// broker while a consumer may still work on it.
    #[serde(default)]
    pub lease_expiries: u64,
    /// Acks (deletes, offset commits) the broker refused because the delivery was no longer the
    /// consumer's (its lease had ended, its partition moved).
    #[serde(default)]
    pub failed_acks: u64,
    /// Offset commits made (`[consumers] commit = "batch"` or `"interval"`).
    #[serde(default)]
    pub commits: u64,
    /// Messages moved back from a dead-letter queue to their queue (`dlq_replay`).
    #[serde(default)]
    pub dlq_replays: u64,
    /// Resends of a message the broker had stored though the producer saw the send fail (a
    /// `send_timeout`) that the broker stored again: duplicates in its queue or log.
    #[serde(default)]
    pub resends_stored: u64,
    /// Such resends the broker refused (an idempotent producer, or its `dedup_window`).
    #[serde(default)]
    pub resends_deduplicated: u64,
    /// Sends the producer gave up on at its `delivery_timeout` (`Event::DeliveryTimeout`),
    /// whether the application then dropped them or sent them again.
    #[serde(default)]
    pub delivery_timeouts: u64,
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Every message was settled after the fault phase.
    #[default]
    Settled,
    /// Messages were unsettled and nothing could change that: nothing was left to happen, or
    /// nothing that happened for [`crate::engine::STUCK_AFTER_EVENTS`] engine events made progress
    /// while no planned fault was left to start or end (e.g. clients retrying a broker that is
    /// down for good).
    Stuck,
    /// The drain phase reached `[run] drain_timeout` with messages unsettled.
    DrainTimeout,
    /// The event bound (`[run] max_events` / `--max-events`) was reached.
    MaxEvents,
    /// `--max-sim-time` was reached.
    MaxSimTime,
    /// An endpoint stopped for good (`resume_after = "never"`) held messages nobody else could
    /// take: they are pending.
    Suspended,
}

/// The figures for one strategy in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Messages produced.
    pub produced: u64,
    /// Messages applied at least once.
    pub applied: u64,
    /// Applies of (k, s) after an apply of (k, s') with s' > s.
    pub ordering_violations: u64,
    /// `state` workloads: writes of a state older than the newest already written for the key
    /// (the target went backwards). 0 for `command` workloads.
    pub stale_writes: u64,
    /// Messages the handler rejected as stale (and acked) and never applied.
    pub stale_rejected: u64,
    /// Messages that vanished (no copy left anywhere, never applied).
    pub lost: u64,
    /// Messages their producer gave up on, never stored: not stored within its
    /// `delivery_timeout` of the send (Kafka's `delivery.timeout.ms`) and not sent again. Not
    /// `lost` (no broker lost them: the application was told, by the send's callback).
    #[serde(default)]
    pub given_up: u64,
    /// `command` workloads only: commands that never took effect although they were not poison
    /// (stale-rejected, lost, given up, dead-lettered or dropped): what the user lost. 0 for `state` workloads.
    pub lost_commands: u64,
    /// Applies beyond the first of the same message.
    pub duplicates: u64,
    /// Messages moved to the dead-letter queue without being applied.
    pub dead_lettered: u64,
    /// Of those, poison messages.
    pub poison_dead_lettered: u64,
    /// Non-poison messages dead-lettered: innocent casualties of retries running out.
    pub innocent_dead_lettered: u64,
    /// Messages the broker gave up on and deleted (no dead-letter queue), never applied.
    pub dropped: u64,
    /// Of those, poison messages.
    pub poison_dropped: u64,
    /// Non-poison messages dropped: innocent casualties of retries running out.
    pub innocent_dropped: u64,
    /// Messages still unsettled when the run ended (a liveness failure).
    pub pending_at_end: u64,
    /// Messages applied whose delivery the broker still held when the run ended: the ack, or the
    /// offset commit covering the record, never reached it, so a restart would deliver them again.
    /// Counted in `applied`, not in `pending_at_end`. 0 whenever the run settled.
    pub unacked_at_end: u64,
    /// Messages that should have taken effect and never did: pending at the end, lost, given up
    /// by their producer, innocent (non-poison) dead-lettered or dropped, and for `command`
    /// workloads stale-rejected. The
    /// latency percentiles count each of them at the run's end, so not delivering never looks
    /// fast.
    #[serde(default)]
    pub undelivered: u64,
    /// With fixed-size correlation groups (`[workload] group_size`) only: groups (a key's seqs
    /// `g*n .. g*n+n-1`) at least one member of which was never applied (dead-lettered, dropped,
    /// stale-rejected, lost or pending at the end): an order that never completed. Absent
    /// without groups, so that the summaries of other scenarios keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_groups: Option<u64>,
    /// Keys whose final target state differs from applying all their non-poison messages in order.
    pub final_state_mismatches: u64,
    /// Deliveries marked redelivered.
    pub redeliveries: u64,
    /// Engine events processed.
    pub events: u64,
    /// Messages applied per simulated second: first applies over the time of the last apply, or
    /// over the whole run when some message was never delivered ([`Metrics::undelivered`]).
    pub throughput_per_s: f64,
    /// Produce -> first apply; a message never delivered counts with its latency censored at the
    /// run's end (end - produced: a lower bound), so with any undelivered the figures are lower
    /// bounds.
    pub latency_ms: Latency,
    /// Longest time a message, already at a broker, waited for an earlier message of its key to be
    /// resolved before it was applied (head-of-line blocking).
    pub max_block_ms: f64,
    /// Simulated time at the end of the run, in seconds.
    pub sim_time_s: f64,
    /// Simulated time when the drain phase began, in seconds.
    pub drain_start_s: f64,
    /// Why the run stopped (anything but `settled` means unsettled messages or a cut-off run).
    pub ended_by: EndReason,
    /// Coverage counters.
    pub coverage: Coverage,
}

/// One strategy's entry in the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StrategySummary {
    /// Its name as the scenario file spells it.
    pub strategy: String,
    /// Ran or not applicable.
    pub status: Status,
    /// Why it is not applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Jepsen's `:valid?`: its guarantee held and every message that should have taken effect did
    /// ([`crate::verdict::judge`]; absent when not applicable or not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
    /// The verdict in one line: `ok`, or `FAIL:` and why (`FAIL: 14,435 of 30,000 never
    /// delivered (pending at the end)`, `FAIL: 3 ordering violations, 2 stale writes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The figures (absent when not applicable).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// The strategy's effective `[strategy.NAME]` parameters, in the order `sim list --params`
    /// shows them (an object in JSON: name -> value, whether it is the default, and the hazard
    /// warning if the value reorders or loses messages even without faults).
    #[serde(default)]
    pub params: Params,
}

impl StrategySummary {
    /// An entry without a verdict yet ([`StrategySummary::judged`] gives it one).
    pub fn new(
        strategy: String,
        status: Status,
        reason: Option<String>,
        metrics: Option<Metrics>,
        params: Params,
    ) -> Self {
        StrategySummary {
            strategy,
            status,
            reason,
            valid: None,
            verdict: None,
            metrics,
            params,
        }
    }

    /// The entry with its verdict, for a strategy whose promise is about the figure `guarantee`
    /// (`sim list`); one that did not run gets none.
    pub fn judged(mut self, guarantee: &str) -> Self {
        let v = match (&self.status, &self.metrics) {
            (Status::Ok, Some(m)) => Some(crate::verdict::judge(m, guarantee)),
            _ => None,
        };
        self.valid = v.as_ref().map(|v| v.valid());
        self.verdict = v.map(|v| v.to_string());
        self
    }
}

/// A strategy's effective parameters, in declaration order; serialized as a JSON object keyed by
/// parameter name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(pub Vec<ParamValue>);

/// One effective parameter value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamValue {
    /// Its name in `[strategy.NAME]` (the JSON key; not serialized inside the value).
    #[serde(skip)]
    pub name: String,
    /// The value, as it would be written in the scenario file (strings unquoted).
    pub value: String,
    /// Whether it is the strategy's default.
    pub default: bool,
    /// What goes wrong with this value even without faults, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Params {
    /// No parameters at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The warnings of the values in use.
    pub fn warnings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .filter_map(|p| p.warning.as_deref().map(|w| (p.name.as_str(), w)))
    }
}

impl Serialize for Params {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for p in &self.0 {
            m.serialize_entry(&p.name, p)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Params;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of parameters")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Params, A::Error> {
                let mut out = Vec::new();
                while let Some((name, mut v)) = a.next_entry::<String, ParamValue>()? {
                    v.name = name;
                    out.push(v);
                }
                Ok(Params(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// What `sim run --json` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Scenario name.
    pub scenario: String,
    /// Seed of the run.
    pub seed: u64,
    /// One entry per strategy, in the order requested.
    pub strategies: Vec<StrategySummary>,
}

/// Flattens a JSON object into (column, value) pairs: nested fields become `parent_child`
/// (`latency_ms_p50`, `coverage_broker_crashes`), in the structs' field order when serde_json
/// keeps order (the `sim` binary enables it), else sorted.
pub fn flatten_json(
    prefix: &str,
    v: &serde_json::Value,
    out: &mut Vec<(String, serde_json::Value)>,
) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten_json(&name, x, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

impl Metrics {
    /// Every figure as a flat (name, value) list: `produced`, ..., `latency_ms_p99`,
    /// `coverage_broker_crashes`.
    pub fn fields(&self) -> Vec<(String, serde_json::Value)> {
        let mut out = Vec::new();
        flatten_json(
            "",
            &serde_json::to_value(self).expect("metrics serialize"),
            &mut out,
        );
        out
    }

    /// Figures of zero, with every figure only some workloads have present (`incomplete_groups`):
    /// what the lists of names are taken from.
    pub fn every() -> Self {
        Metrics {
            incomplete_groups: Some(0),
            ..Metrics::default()
        }
    }

    /// The names of every numeric figure (what an expectation may bound).
    pub fn numeric_field_names() -> Vec<String> {
        Metrics::every()
            .fields()
            .into_iter()
            .filter(|(_, v)| v.is_number())
            .map(|(k, _)| k)
            .collect()
    }

    /// A numeric figure by name. Accepts the flat name (`coverage_broker_crashes`), the dotted path
    /// (`coverage.broker_crashes`, `latency_ms.p99`), or a coverage counter's own name
    /// (`broker_crashes`).
    pub fn numeric(&self, name: &str) -> Option<f64> {
        let fields = self.fields();
        let key = Self::key_in(&fields, name)?;
        fields
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.as_f64())
    }

    /// The flat name of the figure `name` names, by any of the spellings [`Metrics::numeric`]
    /// accepts (`latency_ms.p99` and `latency_ms_p99`, `broker_crashes` and
    /// `coverage.broker_crashes` are one figure each): for telling two bounds of one figure
    /// apart from bounds of two. None: no figure of that name.
    pub fn figure_key(name: &str) -> Option<String> {
        Self::key_in(&Metrics::every().fields(), name)
    }

    fn key_in(fields: &[(String, serde_json::Value)], name: &str) -> Option<String> {
        let flat = name.replace('.', "_");
        let has = |n: &str| fields.iter().any(|(k, _)| k == n);
        if has(&flat) {
            return Some(flat);
        }
        let coverage = format!("coverage_{flat}");
        has(&coverage).then_some(coverage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `params` is written last, as an object in declaration order, and reads back (next to the
    /// flattened metrics); an entry without it reads as no parameters.
    #[test]
    fn params_round_trip_after_the_metrics() {
        let s = StrategySummary {
            strategy: "x".into(),
            status: Status::Ok,
            reason: None,
            valid: Some(true),
            verdict: Some("ok".into()),
            metrics: Some(Metrics::default()),
            params: Params(vec![
                ParamValue {
                    name: "b".into(),
                    value: "1s".into(),
                    default: true,
                    warning: None,
                },
                ParamValue {
                    name: "a".into(),
                    value: "route".into(),
                    default: false,
                    warning: Some("reorders".into()),
                },
            ]),
        };
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            text.starts_with(r#"{"strategy":"x","status":"ok","#),
            "{text}"
        );
        assert!(
            text.ends_with(
                r#""params":{"b":{"value":"1s","default":true},"a":{"value":"route","default":false,"warning":"reorders"}}}"#
            ),
            "{text}"
        );
        let back: StrategySummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        let old = text.replace(&text[text.find(r#","params""#).unwrap()..], "}");
        let back: StrategySummary = serde_json::from_str(&old).unwrap();
        assert!(back.params.is_empty());
    }
}
