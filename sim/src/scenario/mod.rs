//! The scenario file: topology, workload, faults, strategies to compare, run bounds.
//!
//! A [`Scenario`] is plain data deserialized from TOML (unknown fields are rejected), checked by
//! [`validate`], and serializable back to TOML that loads to the same run.

pub mod builder;
pub mod flavour;
mod load;
mod resolved;
mod validate;

pub use builder::{exponential, ScenarioBuilder};
pub use flavour::{
    release, DeadLetter, Defaults, Flavour, FlavourChoice, LeasePolicy, Limit, ReadAhead,
    RedeliveryDefaults, RedeliveryPolicy, Requeue, MAX_IDEMPOTENT_IN_FLIGHT,
};

pub use load::{
    display_path, load_file, load_str, read_bounded, read_scenario_text, FieldError, Location,
    PathSeg, ReadError, ScenarioError, MAX_FILE_BYTES, MAX_PROBLEMS_SHOWN,
};
pub use resolved::{
    Batching, HaPair, Resolved, ResolvedBroker, DEFAULT_TRANSACTION_INTERVAL, TRANSACTION_TIMEOUT,
};
pub use validate::{
    estimated_events, estimated_occurrences, estimated_run_bytes, validate, BYTES_PER_MESSAGE,
    BYTES_PER_OCCURRENCE, EVENTS_PER_MESSAGE, EVENTS_PER_OCCURRENCE, MAX_KEYS,
    MAX_PLAN_OCCURRENCES, MAX_PRODUCTION, MIN_BATCH_INTERVAL, MIN_RECONNECT_DELAY,
};

pub use crate::faults::FaultKind;

use crate::dist::DurSpec;
use crate::time::{Dur, Rate};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A whole scenario file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, shown in reports (defaults to the file stem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the scenario shows, for a reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The seed used when `--seed` is not given.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// The broker product whose documented defaults fill what the file leaves out
    /// (`activemq`, `artemis`, `ibm_mq`, `weblogic`, `sqs`, `kafka`), or `native`: each
    /// strategy on its own broker's.
    #[serde(default)]
    pub flavour: FlavourChoice,
    /// The strategies to compare, by name (`sim list`).
    pub strategies: Vec<String>,
    /// What the producers send.
    pub workload: Workload,
    /// How producers connect and stamp messages.
    #[serde(default)]
    pub producers: Producers,
    /// The brokers, in failover order (`[[broker]]`).
    #[serde(rename = "broker")]
    pub brokers: Vec<Broker>,
    /// The network of brokers (`[network]`).
    #[serde(default)]
    pub network: Network,
    /// The consumers.
    pub consumers: Consumers,
    /// Redelivery after a rollback, and the dead-letter queue.
    #[serde(default)]
    pub redelivery: Redelivery,
    /// Delivery leases (visibility timeout, lock duration, ack timeout): `[lease]`.
    #[serde(default, skip_serializing_if = "Lease::is_empty")]
    pub lease: Lease,
    /// Faults, scripted or random (`[[fault]]`).
    #[serde(default, rename = "fault", skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    /// Bounds of the run.
    #[serde(default)]
    pub run: RunLimits,
    /// What must hold, for `sim check` (see [`crate::expect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<crate::expect::Expect>,
    /// Per-strategy parameters: `[strategy.single]` etc. Each strategy checks its own table.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub strategy: BTreeMap<String, toml::Table>,
    /// The sweep `sim report` runs for the committed reports (`[sweep]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSpec>,
    /// Bounds of the fault mixes `sim explore` draws (`[explore]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explore: Option<ExploreSpec>,
}

/// `[explore]`: what `sim explore` may draw for each run. Every field is optional; the defaults
/// are in docs/explore.md.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExploreSpec {
    /// The fault kinds a run may turn on (default: the kinds of the scenario's random `[[fault]]`
    /// entries; without any, every kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<FaultKind>>,
    /// At most this many kinds on in one run (default: all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kinds: Option<u32>,
    /// Range of each kind's rate, `["1/min", "10/min"]`, drawn log-uniformly (default: half an
    /// occurrence to eight occurrences per fault window).
    #[serde(
        default,
        deserialize_with = "exact_array",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate: Option<[Rate; 2]>,
    /// Range of the mean of each kind's duration `for`, `["1s", "30s"]`, drawn log-uniformly
    /// (default: a fiftieth to a fifth of the fault window).
    #[serde(
        default,
        deserialize_with = "exact_array",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<[Dur; 2]>,
}

/// `[sweep]`: what `sim report` sweeps for this scenario, the same as
/// `sim sweep FILE --seeds SEEDS --set SET[0] --set SET[1] ...`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    /// Seeds, both ends included: `"1..10"`.
    pub seeds: crate::expect::SeedRange,
    /// Parameters and their values: `["fault.0.for=15s,45s,90s"]` (the first is the x axis).
    pub set: Vec<String>,
    /// Strategies (default: the scenario's list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strategies: Vec<String>,
}

/// An optional `[T; N]` from an array of exactly `N` elements: serde's arrays take the first `N`
/// of a longer TOML array and drop the rest silently (`rate = ["1/s", "2/s", "3/s"]`).
fn exact_array<'de, D, T, const N: usize>(d: D) -> Result<Option<[T; N]>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let Some(v) = Option::<Vec<T>>::deserialize(d)? else {
        return Ok(None);
    };
    let n = v.len();
    <[T; N]>::try_from(v).map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "takes exactly {N} elements (a range: [low, high]), not {n}"
        ))
    })
}

/// Most dotted parts in a `--set` path (the deepest real one, `strategy.rabbitmq_hash.unbind.0.at`,
/// has five): a path of thousands of parts would build a document as deep, whose every later walk
/// recurses that deep.
pub const MAX_SET_PATH_PARTS: usize = 16;
/// Longest `--set` value, in bytes.
pub const MAX_SET_VALUE_BYTES: usize = 4096;

/// Parses a `--set` argument (or a `[sweep] set` entry), `PATH=V1,V2,...`: its path and its
/// values, trimmed, or what is wrong with it. The one parser of both, so `sim validate` accepts
/// exactly what `sim sweep` and `sim report` then run.
pub fn parse_set(arg: &str) -> Result<(String, Vec<String>), String> {
    let (path, values) = arg.split_once('=').ok_or("no '='")?;
    let path = path.trim();
    if path.is_empty() || path.split('.').any(|s| s.trim().is_empty()) {
        return Err("empty path or path segment".into());
    }
    let parts = path.split('.').count();
    if parts > MAX_SET_PATH_PARTS {
        return Err(format!(
            "the path has {parts} dotted parts; at most {MAX_SET_PATH_PARTS} are allowed"
        ));
    }
    if arg.chars().any(crate::is_unsafe_char) {
        // Echoed into terminals, CSV, Markdown and SVG: refused at the door, as in broker names.
        return Err("a control character (write the value without it)".into());
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().any(|v| v.is_empty()) {
        return Err("empty value".into());
    }
    if let Some(v) = values.iter().find(|v| v.len() > MAX_SET_VALUE_BYTES) {
        return Err(format!(
            "a value of {} bytes; at most {MAX_SET_VALUE_BYTES} are allowed",
            v.len()
        ));
    }
    // A repeated value is a repeated grid point: the same runs twice, one point of the charts
    // drawn twice, and a typo for the value meant.
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            let mut shown: String = v.chars().take(80).collect();
            if shown.len() < v.len() {
                shown.push_str("...");
            }
            return Err(format!(
                "value {shown:?} is given twice: each value is one point of the sweep"
            ));
        }
    }
    Ok((path.to_string(), values))
}

/// The place a `--set` path names, for telling two paths of one place apart from two places:
/// its parts trimmed and array indices as numbers (`fault.0.for`, `fault. 00 .for` and
/// `fault.+0.for` all set the first fault's `for`, as `sim sweep` applies them).
pub fn set_path_key(path: &str) -> String {
    path.split('.')
        .map(|s| {
            let s = s.trim();
            match s.parse::<usize>() {
                Ok(i) => i.to_string(),
                Err(_) => s.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Defaults, named so that serde and the docs agree.
pub mod defaults {
    use super::*;
    pub(crate) fn seed() -> u64 {
        1
    }
    pub(crate) fn one() -> u32 {
        1
    }
    pub(crate) fn yes() -> bool {
        true
    }
    pub(crate) fn reconnect() -> Dur {
        Dur::from_millis(100)
    }
    pub(crate) fn resolution() -> Dur {
        Dur::from_millis(1)
    }
    pub(crate) fn replication_lag() -> DurSpec {
        DurSpec(crate::dist::DurDist::Constant {
            value: Dur::from_millis(1),
        })
    }
    pub(crate) fn leader_election_time() -> DurSpec {
        DurSpec(crate::dist::DurDist::Uniform {
            min: Dur::from_secs(7),
            max: Dur::from_secs(9),
        })
    }
    pub(crate) fn forward_delay() -> Dur {
        Dur::from_millis(5)
    }
    pub(crate) fn bridge_prefetch() -> u32 {
        1000
    }
    pub(crate) fn drain_timeout() -> Dur {
        Dur::from_secs(3600)
    }
    pub(crate) fn max_events() -> u64 {
        2_000_000_000
    }
    pub(crate) fn memory_budget_mb() -> u64 {
        4096
    }
    pub(crate) fn resume_after() -> Option<Dur> {
        Some(Dur::from_secs(60))
    }
    pub(crate) fn batch_retries() -> u32 {
        3
    }
    pub(crate) fn batch_retry_delay() -> Dur {
        Dur::from_secs(60)
    }
    pub(crate) fn batch_retry_multiplier() -> f64 {
        2.0
    }
}

/// The messages produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// How many messages are produced in all.
    pub messages: u64,
    /// Mean arrival rate over all producers, e.g. `"200/s"`.
    pub rate: Rate,
    /// Arrival process.
    #[serde(default)]
    pub arrival: Arrival,
    /// Number of distinct keys (entities).
    pub keys: u32,
    /// How keys are chosen.
    #[serde(default)]
    pub key_distribution: KeyDistribution,
    /// Zipf exponent when `key_distribution = "zipf"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf_exponent: Option<f64>,
    /// `state` (each message is the full new state) or `command` (each must apply once, in order).
    #[serde(default)]
    pub kind: WorkloadKind,
    /// Fraction of messages that are poison (processing always fails), in [0, 1].
    #[serde(default)]
    pub poison_fraction: f64,
    /// Fraction of messages sent without the group header (JMSXGroupID / Unit-of-Order name),
    /// in [0, 1]: producers the team does not control.
    #[serde(default)]
    pub group_header_missing: f64,
    /// Fixed-size correlation groups (an order and its lines): when set, messages come in groups
    /// of this many, produced back to back for one key by one producer, so each key's seqs
    /// `g*n .. g*n+n-1` form its group `g`. The checkers report the groups some member of which
    /// never took effect (`incomplete_groups`); an aggregator correlates on the group and
    /// completes it at this size. Absent: no groups (nothing changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_size: Option<u32>,
}

/// Arrival process of the workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential inter-arrival times.
    #[default]
    Poisson,
    /// Evenly spaced.
    Constant,
}

/// Key choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyDistribution {
    /// Every key equally likely.
    #[default]
    Uniform,
    /// Zipf: a few hot keys.
    Zipf,
}

/// What a message means to the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// Full state: last writer wins is enough if the last writer is the newest.
    #[default]
    State,
    /// Commands / deltas: every one must take effect exactly once, in order.
    Command,
}

/// Producer side.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Producers {
    /// Number of producers.
    #[serde(default = "defaults::one")]
    pub count: u32,
    /// Names of the producers, one per producer, for traces and timelines (default `p0`, `p1`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// `owned`: key k is always sent by producer k mod count. `shared`: any producer sends any key
    /// (several producers acting as one; their clocks may disagree).
    #[serde(default)]
    pub key_ownership: KeyOwnership,
    /// Failover list by broker name (default: every broker, in file order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<Vec<String>>,
    /// `first`: every producer prefers the first broker of the list; `spread`: producer i starts at
    /// broker i mod n.
    #[serde(default)]
    pub connect: Connect,
    /// Delay before a producer reconnects to the next broker after losing its broker.
    #[serde(default = "defaults::reconnect")]
    pub reconnect_delay: Dur,
    /// Each producer's clock is off by a fixed amount drawn uniformly from [-clock_skew, +clock_skew].
    #[serde(default)]
    pub clock_skew: Dur,
    /// Producer timestamps are truncated to this resolution (JMS timestamps are milliseconds).
    #[serde(default = "defaults::resolution")]
    pub timestamp_resolution: Dur,
    /// How many sends of a producer may be outstanding at once (Kafka's
    /// `max.in.flight.requests.per.connection`). 1 (the default of every JMS flavour) is a
    /// synchronous send. Matters only when a send fails (a `send_error` fault): without
    /// `idempotence`, up to `max_in_flight - 1` later sends may be stored before the failed one's
    /// retry, which then lands after them. Default: the flavour's ([`Flavour::max_in_flight`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// The broker refuses a producer's sends out of sequence, so a failed send's retry keeps its
    /// place: later sends wait behind it (Kafka's `enable.idempotence`). Default: the flavour's
    /// ([`Flavour::idempotence`]; false for every JMS flavour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotence: Option<bool>,
    /// Delay before a failed send is retried (Kafka's `retry.backoff.ms`). Default: the flavour's
    /// ([`Flavour::retry_backoff`]), else `reconnect_delay` (every JMS flavour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff: Option<Dur>,
    /// How long a blocking send waits for the broker's answer before the client gives up and
    /// fails its connection (Artemis's `callTimeout`, 30s): it matters where the broker holds a
    /// send (Artemis's clustered grouping with the LOCAL handler's node down). The broker goes on
    /// with the send and stores it when it can; the producer reconnects and sends it again (a
    /// duplicate, as after a `send_timeout`). Default: the flavour's ([`Flavour::defaults`]);
    /// `"0s"`: no timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout: Option<Dur>,
    /// How long after a send the producer gives the message up if it has not been stored
    /// (Kafka's `delivery.timeout.ms`, 120s: `Sender` expires the batch and its callback gets a
    /// `TimeoutException`): a send still failing, waiting behind a failed one, or buffered while
    /// disconnected is given up then (`given_up` in the summary, unless
    /// `on_delivery_timeout = "resend"`). Default: the flavour's ([`Flavour::defaults`]: 120s
    /// under `kafka`, none for the JMS flavours); `"0s"`: none (retried for ever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_timeout: Option<Dur>,
    /// What the application does with a send the producer gave up on (`delivery_timeout`):
    /// `drop` it (the default client's behaviour: the callback logs the exception) or `resend`
    /// it as a new send, behind the ones made since. Default `drop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_delivery_timeout: Option<OnDeliveryTimeout>,
    /// How often a producer refreshes its cached cluster metadata (Kafka's
    /// `metadata.max.age.ms`, 5 min): partitions added to the topic (the `add_partitions` fault)
    /// are used by its partitioner from its next refresh on. Each producer refreshes on its own
    /// cycle (`Metadata.timeToNextUpdate`: the last refresh plus this), whose phase is drawn per
    /// producer from the run's seed. Only with `flavour = "kafka"` (or `"native"`). Default: the
    /// flavour's (5m under `kafka`); `"0s"`: every producer sees new partitions at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_max_age: Option<Dur>,
    /// Kafka's `acks`: `"all"` (the default since 3.0) or `"1"`. Only with a
    /// `[broker.replication]`: it decides what a leader's crash loses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks: Option<Acks>,
    /// How long a producer waits for more records before it sends a batch that is not full
    /// (Kafka's `linger.ms`): records accumulate in one batch per partition, and the producer
    /// sends a request when its oldest batch has waited this long or any batch is full
    /// (`batch_size`), carrying the first batch of every partition. Such a request is the
    /// unit that is in flight (`max_in_flight`), fails (a `send_error`) and is retried: a failed
    /// batch moves all its records behind the requests that overtake it. Only with
    /// `flavour = "kafka"` (or `"native"`). Default: the release's (`[[broker]] version`):
    /// `"0s"` up to 3.9 and by default (the client's in the code read, `ProducerConfig` before
    /// KIP-1030), every record a request of its own, as the simulated sends take no time;
    /// `"5ms"` from 4.0 on (KIP-1030).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linger: Option<Dur>,
    /// The most bytes of one partition's batch (Kafka's `batch.size`, default 16384): a batch
    /// holds `batch_size / record_size` records (at least one). Only with a `linger`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// The size of a record in bytes, as it counts against `batch_size` (the sim's
    /// assumption, default 1024: 15 records a batch, after its header). Only with a `linger`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_size: Option<u32>,
    /// Each producer is a transactional producer (Kafka's `transactional.id`, one per
    /// producer, which needs `enable.idempotence`): its records go in transactions, each
    /// committed `commit_interval` after it began (`commitTransaction`); a consumer with
    /// `isolation = "read_committed"` sees a record only once its transaction is committed,
    /// and no later record of its partition before that (the last stable offset). A
    /// `producer_crash` aborts the open transaction when the producer comes back
    /// (`initTransactions`); a `producer_pause`'s zombie is fenced by the epoch. Only with `flavour = "kafka"` (or `"native"`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional: Option<bool>,
    /// How often the producing application commits its progress: the checkpoint of its own
    /// input, from which it produces again after a `producer_crash` (or a `producer_pause`'s
    /// replacement). With `transactional =
    /// true` each commit is its transaction's (`commitTransaction`, after
    /// `sendOffsetsToTransaction`): a transaction begins with its first record and commits
    /// this long after (Kafka Streams' `commit.interval.ms`, 100 ms under `exactly_once_v2`; a
    /// plain consume-transform-produce loop commits once per poll). Without transactions the
    /// application checkpoints at the same cadence, and records written after its last
    /// checkpoint are written again after a crash. At most 60s (`transaction.timeout.ms`: the
    /// coordinator aborts a longer transaction). Only with `transactional = true` or a
    /// `producer_crash` or `producer_pause` fault. Default `"100ms"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_interval: Option<Dur>,
}

/// Where a Kafka consumer starts in a partition with no committed offset (`[consumers]
/// auto_offset_reset`, Kafka's `auto.offset.reset`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffsetReset {
    /// At the log's end when it first fetches (`ListOffsetsRequest.LATEST_TIMESTAMP`): what
    /// was written before is skipped. Kafka's default.
    #[default]
    Latest,
    /// At the log's start (`EARLIEST_TIMESTAMP`): nothing is skipped.
    Earliest,
}

impl OffsetReset {
    /// Its name in a scenario file.
    pub fn name(self) -> &'static str {
        match self {
            OffsetReset::Latest => "latest",
            OffsetReset::Earliest => "earliest",
        }
    }
}

/// How a Kafka consumer reads transactional records (`[consumers] isolation`, Kafka's
/// `isolation.level`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Every record once written, aborted ones too. Kafka's default.
    #[default]
    ReadUncommitted,
    /// Committed records only, up to the last stable offset.
    ReadCommitted,
}

impl Isolation {
    /// Its name in a scenario file.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "read_uncommitted",
            Isolation::ReadCommitted => "read_committed",
        }
    }
}

/// What the application does with a send its producer gave up on (`[producers]
/// on_delivery_timeout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDeliveryTimeout {
    /// Nothing: the message is never stored (Kafka's default: the `send()` callback, if any,
    /// sees the `TimeoutException`).
    #[default]
    Drop,
    /// Sends it again as a new send, behind every send made since (it can land after later
    /// messages of its key; if the broker had stored the first attempt, it is stored twice).
    Resend,
}

impl Default for Producers {
    fn default() -> Self {
        Producers {
            count: 1,
            names: None,
            key_ownership: KeyOwnership::default(),
            brokers: None,
            connect: Connect::default(),
            reconnect_delay: defaults::reconnect(),
            clock_skew: Dur::ZERO,
            timestamp_resolution: defaults::resolution(),
            max_in_flight: None,
            idempotence: None,
            retry_backoff: None,
            call_timeout: None,
            delivery_timeout: None,
            on_delivery_timeout: None,
            metadata_max_age: None,
            acks: None,
            linger: None,
            batch_size: None,
            record_size: None,
            transactional: None,
            commit_interval: None,
        }
    }
}

/// Who sends a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyOwnership {
    /// One producer per key.
    #[default]
    Owned,
    /// Any producer, chosen at random per message.
    Shared,
}

/// Initial broker choice of a client with a failover list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Connect {
    /// Everyone starts at the first broker of the list.
    #[default]
    First,
    /// Client i starts at broker i mod n (the list is rotated).
    Spread,
}

/// One broker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Broker {
    /// Unique name, used by faults and failover lists.
    pub name: String,
    /// A persistent store keeps messages across a crash; a non-persistent one loses them.
    #[serde(default = "defaults::yes")]
    pub persistent: bool,
    /// How many queued messages dispatch looks at (ActiveMQ `maxPageSize`); absent: the
    /// flavour's ([`Flavour::page_size`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    /// Transit from the broker's dispatch to the consumer being able to start the message: the
    /// client socket, the broker's transport and dispatch threads (live ActiveMQ on loopback:
    /// 1.0-1.4 ms at the median, docs/calibration.md, disagreement 3). A dispatched message
    /// counts against the consumer's prefetch at once and reaches it this long after, never
    /// before one dispatched earlier to the same consumer. Absent: none (the model's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_latency: Option<DurSpec>,
    /// How long a crashed broker takes, once its `broker_crash` is over, before it accepts
    /// connections and dispatches again: the process's start and its store's recovery (live
    /// ActiveMQ Classic 5.17 with KahaDB on loopback: 0.8-2.5 s, by the machine's load;
    /// docs/calibration.md, disagreement 7). Drawn at each crash. Absent: none (it is back the
    /// moment the fault ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_time: Option<DurSpec>,
    /// How long the broker remembers a stored message to refuse a resend of it (SQS FIFO's
    /// deduplication interval, 5 minutes); a resend after that is stored again (a duplicate).
    /// Absent: the flavour's ([`Flavour::dedup_window`]); `"0s"`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window: Option<Dur>,
    /// This broker is the named broker's backup in a high-availability pair sharing one store
    /// (ActiveMQ Classic's shared-store master/slave, Artemis's shared-store or replication pair):
    /// passive until the active member dies, then it takes the store over and serves the pair's
    /// clients (`docs/modelling-your-broker.md`, "HA pairs"). The pair's store is the primary's:
    /// its `persistent` applies to both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_of: Option<String>,
    /// From the active member's death until the other member serves: its wait for the store's
    /// lock and its start. Absent: the flavour's (`takeover` in [`Flavour::defaults`]); required for a flavour
    /// that has none. Set on either member of a pair: it applies to both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover: Option<DurSpec>,
    /// A restarted primary takes its store back from the backup serving it (Artemis's
    /// `allow-failback`); false: it waits as the new backup (ActiveMQ Classic). Absent: the
    /// flavour's (`failback` in [`Flavour::defaults`]). Set on either member of a pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback: Option<bool>,
    /// The broker product's release line (`"3.3"`, `"4.3"`...), for a flavour whose behaviour
    /// depends on it: one of [`Flavour::versions`]; refused on a flavour without versions.
    /// Absent: the current release ([`Flavour::default_version`]). Read it through
    /// [`Scenario::broker_version`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The topic's partitions replicated over a cluster (`[broker.replication]`, Kafka only):
    /// the broker is then the leader of every partition, with followers. Absent: the broker is
    /// the whole cluster, one copy (a crash stops everything until it is back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<Replication>,
}

/// A Kafka topic's replication (`[broker.replication]`, docs/modelling-your-broker.md, "Leaders
/// and replicas"; Kafka 4.0's broker: `Partition.scala`, `PartitionChangeBuilder`,
/// `ReplicationConfigs`). The `[[broker]]` leads every partition of the topic; its followers
/// fetch what it writes. A `broker_crash` of it crashes the leader: a follower still in sync
/// is elected after `leader_election_time` and what the followers had not fetched is gone
/// from the log (`[producers] acks` decides whether anyone had been told it was written).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replication {
    /// Copies of each partition, the leader's included (`replication.factor`; the broker's
    /// `default.replication.factor` is 1).
    #[serde(default = "defaults::one")]
    pub replication_factor: u32,
    /// `min.insync.replicas` (1): with `acks = "all"` a write is refused
    /// (`NotEnoughReplicas`, retried by the producer) while fewer replicas are in sync, and
    /// the high watermark does not advance then (KAFKA-15583). Above the replication factor
    /// it counts as the factor (`effectiveMinIsr`).
    #[serde(default = "defaults::one")]
    pub min_insync_replicas: u32,
    /// `unclean.leader.election.enable` (false): when no replica in sync is alive, one out of
    /// sync may lead, and the records it lacks are lost.
    #[serde(default)]
    pub unclean_leader_election: bool,
    /// From the leader's write of a record until its followers have it (their fetch): the
    /// record is committed (below the high watermark, readable by consumers) then. Not a Kafka
    /// setting: a network round trip and a follower's append; default 1ms.
    #[serde(default = "defaults::replication_lag")]
    pub replication_lag: DurSpec,
    /// From the leader's crash until a new leader serves: the controller fences the broker when
    /// its session lapses (`broker.session.timeout.ms` 9s after its last heartbeat, sent every
    /// `broker.heartbeat.interval.ms` 2s), then elects. Default uniform 7s to 9s.
    #[serde(default = "defaults::leader_election_time")]
    pub leader_election_time: DurSpec,
    /// The cluster's brokers (at least `replication_factor`): each partition's replicas are
    /// placed on them as KRaft's `StripedReplicaPlacer` stripes them (partition `p` on brokers
    /// `p, p+1, ...` modulo `brokers`, the first its preferred leader), so the leaders are
    /// spread, and a `broker_crash` names one of them (`node`): it takes down only the leaders
    /// it holds, and its followers leave the ISRs when the controller fences it. Absent: one
    /// broker leads every partition, its followers on the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<u32>,
    /// `auto.leader.rebalance.enable` (true), with `brokers`: the controller moves each
    /// partition's leadership back to its preferred replica (the first of its replicas) once
    /// that replica is back in the ISR, at its leader imbalance check
    /// (`leader.imbalance.check.interval.seconds`, 300s after the leaders moved). Absent:
    /// true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_leader_rebalance: Option<bool>,
    /// `replica.lag.time.max.ms` (30s): a follower that has not caught up with its leader for
    /// longer leaves the ISR at the leader's next check (every half of it). Only a
    /// `replica_stall` stops a live follower here. Absent: 30s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_lag_time_max: Option<Dur>,
}

/// What a Kafka producer waits for before a send counts as written (`[producers] acks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acks {
    /// `acks=all` (`-1`), the default since Kafka 3.0: the leader answers once every replica
    /// in sync has the record.
    #[default]
    #[serde(rename = "all", alias = "-1")]
    All,
    /// `acks=1`: the leader answers once it wrote the record, before its followers have it.
    #[serde(rename = "1")]
    Leader,
}

impl Acks {
    /// Its name in a scenario file.
    pub fn name(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::Leader => "1",
        }
    }
}

/// Network of brokers: how a broker's messages reach consumers attached to another broker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// `bridge` (ActiveMQ's demand-forwarding bridge) or `idle_forward` (a broker without
    /// consumers forwards its whole store: WebLogic distributed destinations as modelled here).
    #[serde(default)]
    pub kind: NetworkKind,
    /// Time for a forwarded message to reach the peer's store once sent (a bridge sends what it
    /// takes a draw of its broker's `dispatch_latency` after the dispatch), and for the peer's
    /// answer to come back.
    #[serde(default = "defaults::forward_delay")]
    pub forward_delay: Dur,
    /// The bridge's prefetch: messages it may hold taken and not yet acked, which happens when
    /// the peer's answer is back (ActiveMQ `networkConnector prefetchSize`, 1000).
    #[serde(default = "defaults::bridge_prefetch")]
    pub prefetch: u32,
    /// Hops a message and a consumer's demand travel (ActiveMQ `networkTTL`, 1): only 1 is
    /// modelled (2 with two brokers is the same network: a message never goes back where it was).
    #[serde(default = "defaults::one")]
    pub network_ttl: u32,
    /// One bridge subscription per peer, whatever its number of consumers (ActiveMQ
    /// `conduitSubscriptions`, true): only `true` is modelled.
    #[serde(default = "defaults::yes")]
    pub conduit_subscriptions: bool,
    /// Bridge subscriptions get a lower priority than local consumers (ActiveMQ
    /// `decreaseNetworkConsumerPriority`): only `false` (equal priority) is modelled.
    #[serde(default)]
    pub decrease_network_consumer_priority: bool,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            kind: NetworkKind::default(),
            forward_delay: defaults::forward_delay(),
            prefetch: defaults::bridge_prefetch(),
            network_ttl: 1,
            conduit_subscriptions: true,
            decrease_network_consumer_priority: false,
        }
    }
}

/// How brokers pass messages to each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkKind {
    /// ActiveMQ's network bridge: a broker whose peer has consumers attached treats the bridge as
    /// one more consumer of its queue (credit `prefetch`), competing with its local consumers;
    /// forwarded messages are not forwarded again.
    #[default]
    Bridge,
    /// A broker forwards its whole store to the first peer that has consumers, only while it has
    /// none itself (WebLogic distributed destinations, the Unit-of-Order scenarios).
    IdleForward,
}

/// The consumers (all alike).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consumers {
    /// How many.
    pub count: u32,
    /// Names of the consumers, one per consumer, for traces and timelines (default `c0`, `c1`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// Messages a broker may push to a consumer before it acks (including the one in service).
    #[serde(default = "defaults::one")]
    pub prefetch: u32,
    /// Processing time of one message.
    pub service: DurSpec,
    /// Failover list by broker name (default: every broker, in file order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<Vec<String>>,
    /// `first` or `spread` (consumer i starts at broker i mod n).
    #[serde(default)]
    pub connect: Connect,
    /// Delay before a consumer reconnects after losing its broker.
    #[serde(default = "defaults::reconnect")]
    pub reconnect_delay: Dur,
    /// How long a broker waits without a sign of life from a consumer whose process stopped
    /// (`consumer_pause`) before it drops the connection and redelivers (ActiveMQ's
    /// `maxInactivityDuration`, 30s; Kafka's `session.timeout.ms`, 45s). Default: the flavour's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_detection: Option<Dur>,
    /// How a consumer settles what it processed: `each` (an ack, or an offset commit, per
    /// message: Spring Kafka's `AckMode.RECORD`), `batch` (one commit once its received batch is
    /// processed: Kafka's `commitSync()` after the poll loop, Spring Kafka's `AckMode.BATCH`) or
    /// `interval` (Kafka's auto-commit: at a poll, at most every `commit_interval`). Until its
    /// commit a processed message stays unsettled: a consumer that dies, or loses its
    /// partitions, before it commits has it redelivered. Default: the flavour's (under `kafka`,
    /// the `client`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<Commit>,
    /// The least time between two auto-commits (`commit = "interval"`: Kafka's
    /// `auto.commit.interval.ms`, 5s), each made at a poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_interval: Option<Dur>,
    /// How the broker learns that a consumer process died: `connection` (its socket closes: at
    /// once; JMS brokers), `timeout` (after `failure_detection` without a heartbeat: a host that
    /// died without closing its sockets, Kafka's session timeout) or `lease` (never: each of its
    /// deliveries comes back when its `[lease]` expires; SQS, Service Bus). Default: the flavour's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_detection: Option<CrashDetection>,
    /// With `crash_detection = "timeout"`: whether a restarted process takes over its dead
    /// session, which the broker has not dropped yet, at once (`true`: Kafka's static membership,
    /// `group.instance.id`) or joins only once the broker drops it after `failure_detection`
    /// (`false`: Kafka's default dynamic membership, where the restarted consumer's JoinGroup
    /// waits for the dead member's session timeout). Default: the flavour's (`false` for `kafka`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_takes_over: Option<bool>,
    /// With `receive = "batch"` (a poll loop): the longest a consumer may spend on one poll's
    /// records before the group drops it (Kafka's `max.poll.interval.ms`, 300s: the heartbeat
    /// thread leaves the group, its partitions move, and the process goes on with the records it
    /// polled, writing them late; it rejoins at its next poll and its commit is refused).
    /// Default: the flavour's (300s for `kafka`, none for the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_poll_interval: Option<Dur>,
    /// What a consumer does with the rest of its prefetched (received) messages when one fails:
    /// `continue` (process them: a partial-batch failure, later messages overtake the failed
    /// one), `fail_rest` (give them all back unprocessed, as AWS Powertools'
    /// `SqsFifoPartialProcessor` does to keep a FIFO group's order), `rollback` (the session
    /// rolls its whole window back with the failed message, in order: Artemis's JMS client) or
    /// `whole_batch` (the rest and the processed but uncommitted messages come back too: AWS
    /// Lambda without `ReportBatchItemFailures`).
    /// Default: the flavour's (`rollback` for `artemis`, `continue` for the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_failure: Option<PartialFailure>,
    /// How a RabbitMQ client returns a message it failed to process: `nack` (`basic.nack` with
    /// requeue) or `reject` (`basic.reject` with requeue). A quorum queue from 4.3 on counts
    /// only a reject (and a consumer's death) against its delivery limit; before 4.3 both alike.
    /// Only with `flavour = "rabbitmq_quorum"`. Default: `nack`, what Spring AMQP's default
    /// listener container sends for a failed listener (`BlockingQueueConsumer`
    /// `.rollbackOnExceptionIfNecessary`, a cumulative `basicNack`), as the STOMP adapter's NACK
    /// and amqplib's `nack` do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_with: Option<ReturnWith>,
    /// The Kafka consumer: `spring` (a Spring for Apache Kafka listener container: a commit
    /// after each poll's records, a failed record retried 10 times, then skipped) or `plain`
    /// (the `KafkaConsumer` with its own defaults: auto-commit at a poll every 5s, a failed
    /// record skipped). Only with `flavour = "kafka"` (or `"native"`). Default: `spring`
    /// (docs/modelling-your-broker.md says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<KafkaClient>,
    /// How often the group's consumers refresh their cached metadata (Kafka's
    /// `metadata.max.age.ms`, 5 min). Only the group leader watches it for new partitions
    /// (`ConsumerCoordinator.rejoinNeededOrPending`): the group rebalances onto partitions added
    /// (`add_partitions`) at the leader's next refresh, on a cycle whose phase is drawn from the
    /// run's seed. Only with `flavour = "kafka"` (or `"native"`). Default: the flavour's (5m
    /// under `kafka`); `"0s"`: the group rebalances at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_max_age: Option<Dur>,
    /// Where a consumer starts in a partition its group has no committed offset for (Kafka's
    /// `auto.offset.reset`): `latest` (Kafka's default: records written to a partition added by
    /// `add_partitions` before the group first fetched it are skipped, counted lost) or
    /// `earliest` (from its first record). Only with `flavour = "kafka"` (or `"native"`).
    /// Default: the flavour's (`latest` under `kafka`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_offset_reset: Option<OffsetReset>,
    /// How a consumer reads transactional records (Kafka's `isolation.level`):
    /// `read_uncommitted` (Kafka's default: every record as soon as it is written, an aborted
    /// transaction's too) or `read_committed` (a record only once its transaction is
    /// committed, never an aborted one, and nothing of a partition past its first open
    /// transaction: the last stable offset). Matters with `[producers] transactional = true`.
    /// Only with `flavour = "kafka"` (or `"native"`). Default `read_uncommitted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// How a consumer takes messages: `prefetch` (the broker keeps up to `prefetch` unacked
    /// messages pushed to it, topping up as it acks: JMS) or `batch` (it asks for up to
    /// `prefetch` messages, and again only once it has settled all of them: an SQS
    /// `ReceiveMessage` loop, a Kafka poll). Default: the flavour's (`batch` for `sqs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<Receive>,
    /// Time from the apply to the broker receiving the ack; a crash in between makes a duplicate.
    #[serde(default)]
    pub ack_latency: Dur,
    /// Stop the endpoint after this many failures in a row (0 = never; WAS activation spec).
    #[serde(default)]
    pub suspend_after_failures: u32,
    /// Resume a suspended endpoint after this long (`"never"`: stays stopped for good, through the drain; the run ends `suspended`).
    #[serde(default = "defaults::resume_after", with = "opt_dur_never")]
    pub resume_after: Option<Dur>,
    /// How the consumers are hosted: `listener` (an MDB, consuming continuously) or `batch` (a job
    /// started every `[consumers.batch] interval` that drains the queue and stops).
    #[serde(default)]
    pub mode: ConsumerMode,
    /// The batch job's schedule and retry policy (only with `mode = "batch"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchJob>,
}

/// How the broker learns that a consumer process died (`[consumers] crash_detection`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashDetection {
    /// The process's socket closes: the broker takes its deliveries back at once.
    Connection,
    /// After `[consumers] failure_detection` without a heartbeat; until then its deliveries stay
    /// assigned to it (and a push broker may assign it more, up to its prefetch).
    Timeout,
    /// Never: each delivery it held comes back when its `[lease]` expires.
    Lease,
}

/// `[consumers] commit`: how a consumer settles what it processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Commit {
    /// An ack (or offset commit) per message.
    Each,
    /// One commit once every message it received is processed.
    Batch,
    /// Kafka's auto-commit: at each poll (once the records of the last one are processed, or
    /// while it waits in `poll()` for more) it commits what it processed, if `commit_interval`
    /// has passed since its last such commit (or since it joined its group). A consumer busy on
    /// one poll's records commits none of them until it polls again.
    Interval,
}

/// `[consumers] receive`: how a consumer takes messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Receive {
    /// The broker keeps the consumer's prefetch buffer topped up.
    Prefetch,
    /// Up to `prefetch` at once, then nothing until all of them are settled.
    Batch,
}

/// `[consumers] partial_failure`: the rest of a consumer's received messages after one fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartialFailure {
    /// Go on with them (later messages of a key may overtake the failed one).
    #[default]
    Continue,
    /// Give every other received message back to the broker unprocessed.
    FailRest,
    /// With non-blocking redelivery, the session stops and cancels every message it received
    /// back to the broker with the failed one, in order; each waits its own redelivery delay,
    /// and those not started do not count as delivered (Artemis: `ClientSessionImpl.rollback`,
    /// `ServerConsumerImpl.cancelRefs`, `QueueImpl.checkRedelivery`). With blocking redelivery
    /// the client keeps them behind the failed one, as `continue` does (ActiveMQ Classic's
    /// `ActiveMQMessageConsumer.rollback`).
    Rollback,
    /// The whole received batch fails with it: the rest is not processed, and the messages
    /// processed since the last commit are not settled either; each comes back as the failed
    /// one does (SQS: visible again when its visibility timeout ends, received again, counted).
    /// AWS Lambda's SQS event source without `ReportBatchItemFailures`, with `commit = "batch"`
    /// (Lambda deletes a batch only when the invocation succeeds).
    WholeBatch,
}

/// `[consumers] client`: the Kafka consumer a group runs, which decides how it commits and what
/// it does with a record that fails (only with `flavour = "kafka"`, or `"native"` for the
/// strategies modelled on Kafka).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KafkaClient {
    /// A Spring for Apache Kafka listener container: auto-commit off, the offsets of a poll's
    /// records committed once they are all processed (`AckMode.BATCH`), a failed record retried
    /// by the `DefaultErrorHandler` (10 attempts, no delay), then skipped.
    #[default]
    Spring,
    /// The plain `KafkaConsumer` in the application's own poll loop: `enable.auto.commit` (at a
    /// poll, at most every `auto.commit.interval.ms`), and no retry handler: a record that fails
    /// is logged and skipped.
    Plain,
}

/// `[consumers] return_with`: the AMQP 0-9-1 method a RabbitMQ client returns a failed message
/// with (rabbitmq-server#15387: since 4.3 `basic.reject` raises the quorum queue's
/// `delivery_count`, `basic.nack` does not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReturnWith {
    /// `basic.nack` with requeue: the message is released, not failed.
    #[default]
    Nack,
    /// `basic.reject` with requeue: a failed delivery attempt.
    Reject,
}

/// `[lease]`: a delivery is the consumer's only for a while (SQS visibility timeout, Service Bus
/// lock duration, Pulsar ack timeout); when the lease expires the message is deliverable again
/// (marked redelivered, counted as a delivery) while the first consumer may still be working on
/// it, and that consumer's late ack or delete fails. Absent (and no flavour default): deliveries
/// are held until acked or the consumer leaves, as JMS brokers do.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// How long a delivery is leased (`sqs` flavour: 30s, the default visibility timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// A consumer working on a message extends its lease this often (an SQS visibility
    /// heartbeat, Service Bus auto lock renewal); absent: never. A paused process cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_every: Option<Dur>,
    /// Renewal stops this long after the delivery (Service Bus `MaxAutoLockRenewalDuration`,
    /// 5 min; under `servicebus_sessions` also this long after a session's acceptance, when
    /// the session lock is lost); absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_max: Option<Dur>,
}

impl Lease {
    /// Whether the file left `[lease]` out.
    pub fn is_empty(&self) -> bool {
        *self == Lease::default()
    }
}

/// How consumers are hosted ([MDB-or-batch]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerMode {
    /// A message-driven bean: continuous, container-managed transactions; the `[redelivery]`
    /// policy and endpoint suspension apply.
    #[default]
    Listener,
    /// A scheduled job that drains the queue: a failing message is retried in the job with a
    /// growing delay; on a resource outage the job stops and leaves the rest for the next run;
    /// a poison message is rolled back and re-read until the backout threshold moves it away.
    Batch,
}

/// `[consumers.batch]`: the job's schedule and in-job retries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchJob {
    /// Time between job starts (the first run starts after one interval).
    pub interval: Dur,
    /// In-job retries of a message failing on a resource outage before the job gives up.
    #[serde(default = "defaults::batch_retries")]
    pub retries: u32,
    /// Delay before the first in-job retry.
    #[serde(default = "defaults::batch_retry_delay")]
    pub retry_delay: Dur,
    /// Each further retry delay is the previous one times this.
    #[serde(default = "defaults::batch_retry_multiplier")]
    pub retry_multiplier: f64,
}

/// Blocking vs non-blocking redelivery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedeliveryMode {
    /// ActiveMQ Classic default: the consumer holds the failed message and its session waits.
    #[default]
    Blocking,
    /// Artemis-style (or `nonBlockingRedelivery`): the message waits at the broker, later ones go on.
    NonBlocking,
}

/// `[redelivery]`: redelivery after a rollback, its limit, and what happens to a message the
/// broker gives up on. Every field left out takes the `flavour`'s documented default
/// ([`flavour`] module); the engine runs the resolved [`RedeliveryPolicy`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redelivery {
    /// Blocking (consumer-side) or non-blocking (broker-side) delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RedeliveryMode>,
    /// Delay before the first redelivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<Dur>,
    /// Each further delay is the previous one times this (1 = constant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
    /// Cap on the delay (absent: no cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<Dur>,
    /// ActiveMQ / WebLogic counting: N redeliveries, so N + 1 deliveries, before the broker
    /// gives up; -1 = unlimited. At most one of this and `backout_threshold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_redeliveries: Option<i64>,
    /// IBM MQ counting (`BOTHRESH`): the broker gives up once a message was delivered N times
    /// (`BackoutCount >= BOTHRESH`); 0 = no threshold, unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backout_threshold: Option<i64>,
    /// Where a message the broker gives up on goes: `"queue"` (dead-letter / backout queue) or
    /// `"drop"` (deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetter>,
    /// Where a message goes back in its queue after a rollback, a redelivery delay, a lease
    /// expiry or its consumer leaving: `"head"` (ahead of everything queued), `"tail"` (behind
    /// it) or `"original"` (among the queued messages in production order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue: Option<Requeue>,
}

/// Run bounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunLimits {
    /// Length of the fault phase for random faults (default: the expected production time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_window: Option<Dur>,
    /// How long the drain phase may last before what is unsettled is reported `pending_at_end`.
    #[serde(default = "defaults::drain_timeout")]
    pub drain_timeout: Dur,
    /// Hard bound on engine events.
    #[serde(default = "defaults::max_events")]
    pub max_events: u64,
    /// Memory the run may use, in MiB: a scenario whose per-key and per-node state would need more
    /// is refused up front (not killed by the operating system halfway).
    #[serde(default = "defaults::memory_budget_mb")]
    pub memory_budget_mb: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            fault_window: None,
            drain_timeout: defaults::drain_timeout(),
            max_events: defaults::max_events(),
            memory_budget_mb: defaults::memory_budget_mb(),
        }
    }
}

/// One `[[fault]]` entry: scripted (`at` + `for`) or random (`rate` + `for`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// Scripted start time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Dur>,
    /// Random faults: mean occurrences per unit of time during the fault window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// How long it lasts (a duration or a distribution); absent: it never heals by itself.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub duration: Option<DurSpec>,
    /// Target broker (broker_crash). Absent with `rate`: a random broker each time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<String>,
    /// Which of a Kafka cluster's brokers crashes (broker_crash on a broker with
    /// `[broker.replication] brokers`), 0 to `brokers` - 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Target consumer index (consumer_crash, network_blip, slow_consumer). Absent: random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<u32>,
    /// Target producer index (clock_skew). Absent: random.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<u32>,
    /// Slow-down factor (slow_consumer), > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// Clock step size (clock_skew).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<Dur>,
    /// Clock step direction (clock_skew): true = ahead (default), false = behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<bool>,
    /// Poison probability (poison), in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// How many partitions are added (add_partitions), at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// How long after a `producer_pause` began a new instance of the producer starts
    /// (producer_pause). Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_after: Option<Dur>,
}

impl Fault {
    /// A fault of `kind` with every other field left out (to be filled in).
    pub fn of(kind: FaultKind) -> Self {
        Fault {
            kind,
            at: None,
            rate: None,
            duration: None,
            broker: None,
            consumer: None,
            producer: None,
            factor: None,
            skew: None,
            ahead: None,
            fraction: None,
            count: None,
            replaced_after: None,
            node: None,
        }
    }
}

/// Serde helper: an optional duration where `"never"` means `None`.
mod opt_dur_never {
    use super::Dur;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Dur>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(d) => d.serialize(s),
            None => s.serialize_str("never"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Dur>, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim() == "never" {
            Ok(None)
        } else {
            Dur::parse(&s).map(Some).map_err(serde::de::Error::custom)
        }
    }
}

impl Scenario {
    /// Producer `i`'s name: from `[producers] names`, else `p{i}`.
    pub fn producer_name(&self, i: u32) -> String {
        node_name(&self.producers.names, "p", i)
    }

    /// Consumer `i`'s name: from `[consumers] names`, else `c{i}`. Indices from `count` on are
    /// the network bridges (`count + peer`), named after the broker they lead to.
    pub fn consumer_name(&self, i: u32) -> String {
        match i.checked_sub(self.consumers.count) {
            Some(peer) => match self.brokers.get(peer as usize) {
                Some(b) => format!("bridge->{}", b.name),
                None => format!("c{i}"),
            },
            None => node_name(&self.consumers.names, "c", i),
        }
    }

    /// The scenario a strategy modelling `native`'s broker runs: under `flavour = "native"`
    /// this one on `native`'s defaults, else this one as it is.
    pub fn on_flavour(&self, native: Flavour) -> std::borrow::Cow<'_, Scenario> {
        if self.flavour == FlavourChoice::Native {
            let mut sc = self.clone();
            sc.flavour = FlavourChoice::Product(native);
            std::borrow::Cow::Owned(sc)
        } else {
            std::borrow::Cow::Borrowed(self)
        }
    }

    /// `[redelivery]` with the flavour's defaults filled in.
    pub fn redelivery_policy(&self) -> RedeliveryPolicy {
        let f = self.flavour.product();
        RedeliveryPolicy::resolve_on(f, &self.flavour_defaults(), &self.redelivery, &self.lease)
    }

    /// The flavour's defaults on the release its brokers run ([`Scenario::broker_version`] of
    /// the first: a validated file gives them all one) with its consumers' `return_with`, and
    /// under `kafka` its consumers' `client` ([`KafkaClient::defaults`]).
    pub fn flavour_defaults(&self) -> Defaults {
        let return_with = self.consumers.return_with.unwrap_or_default();
        let product = self.flavour.product();
        let d = product.defaults_on(self.broker_version(0), return_with);
        if product == Flavour::Kafka {
            self.consumers.client.unwrap_or_default().defaults(d)
        } else {
            d
        }
    }

    /// The release line broker `i` runs: its `version`, else the flavour's current release;
    /// None on a flavour without versions (or under `native`, before [`Scenario::on_flavour`]).
    pub fn broker_version(&self, i: usize) -> Option<&str> {
        let product = match self.flavour {
            FlavourChoice::Product(f) => f,
            FlavourChoice::Native => return None,
        };
        product.default_version()?;
        self.brokers
            .get(i)
            .and_then(|b| b.version.as_deref())
            .or(product.default_version())
    }

    /// `[lease]` with the flavour's defaults filled in: None when deliveries are not leased.
    pub fn lease_policy(&self) -> Option<LeasePolicy> {
        LeasePolicy::resolve(self.flavour.product(), &self.lease)
    }

    /// Index of a broker by name.
    pub fn broker_index(&self, name: &str) -> Option<usize> {
        self.brokers.iter().position(|b| b.name == name)
    }

    /// How many consumer ids dispatch may show a strategy ([`crate::strategy::ConsumerSlot`]):
    /// the consumers (`0..count`), then, with `[network] kind = "bridge"` and several brokers,
    /// one network bridge per broker (`count + peer`: the bridge toward broker `peer`). A
    /// strategy sizes its per-consumer dispatch tables by this.
    pub fn dispatch_targets(&self) -> usize {
        let bridges = if self.network.kind == NetworkKind::Bridge && self.brokers.len() > 1 {
            self.brokers.len()
        } else {
            0
        };
        self.consumers.count as usize + bridges
    }

    /// The display name: `name`, else the given fallback (usually the file stem).
    pub fn display_name<'a>(&'a self, fallback: &'a str) -> &'a str {
        self.name.as_deref().unwrap_or(fallback)
    }

    /// Serializes back to TOML (loads to the same run).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a scenario always serializes")
    }

    /// Bytes of state kept per key whatever the strategy (checker window head, target and source
    /// rows, seq counter, strategy tables): a generous estimate.
    pub const BYTES_PER_KEY: u64 = 320;

    /// An estimate of the memory a run needs before any message is in flight, in bytes.
    pub fn estimated_memory_bytes(&self) -> u64 {
        let nodes =
            self.consumers.count as u64 + self.producers.count as u64 + self.brokers.len() as u64;
        // A network bridge per ordered pair of brokers at most.
        let bridges = (self.dispatch_targets() - self.consumers.count as usize) as u64;
        (self.workload.keys as u64) * Self::BYTES_PER_KEY
            + nodes * 4096
            + bridges * bridges * 16
            + 16 * 1024 * 1024
    }

    /// The window random faults are drawn over, in microseconds: `[run] fault_window`, else the
    /// expected production time.
    pub fn fault_window_micros(&self) -> u64 {
        self.run
            .fault_window
            .map_or_else(|| self.expected_production_micros(), |d| d.0)
    }

    /// Expected length of the production phase, in microseconds.
    pub fn expected_production_micros(&self) -> u64 {
        let r = self.workload.rate.as_per_sec();
        if r <= 0.0 {
            return 0;
        }
        (self.workload.messages as f64 / r * 1e6).min(3.2e15) as u64
    }
}

fn node_name(names: &Option<Vec<String>>, prefix: &str, i: u32) -> String {
    match names.as_ref().and_then(|n| n.get(i as usize)) {
        Some(n) => n.clone(),
        None => format!("{prefix}{i}"),
    }
}
