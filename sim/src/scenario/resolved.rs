//! A scenario with its flavour's defaults filled in, once: what the engine runs.
//!
//! Every default a flavour supplies ([`Flavour::defaults`], [`RedeliveryPolicy::resolve`],
//! [`LeasePolicy::resolve`]) is looked up here and nowhere else, and the checks that depend on a
//! default (a lease the flavour does not give, an HA pair's takeover time) are made here too, so
//! that validation and a run read the same values. A `flavour = "native"` scenario is resolved
//! once per broker its strategies model ([`Scenario::on_flavour`]), and each is checked.

use super::{
    Commit, CrashDetection, Defaults, FieldError, Flavour, Isolation, KafkaClient, LeasePolicy,
    OffsetReset, OnDeliveryTimeout, PartialFailure, PathSeg, ReadAhead, Receive, RedeliveryPolicy,
    Scenario, MAX_IDEMPOTENT_IN_FLIGHT,
};
use crate::dist::{DurDist, DurSpec};
use crate::time::{Dur, Time};
use std::collections::BTreeMap;

/// A scenario's settings with its flavour's defaults filled in ([`Scenario::resolve`]).
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The broker product whose defaults were used.
    pub flavour: Flavour,
    /// `[redelivery]`.
    pub redelivery: RedeliveryPolicy,
    /// `[lease]` (None: deliveries are not leased).
    pub lease: Option<LeasePolicy>,
    /// `[consumers] receive`.
    pub receive: Receive,
    /// `[consumers] partial_failure`.
    pub partial_failure: PartialFailure,
    /// `[consumers] failure_detection`.
    pub failure_detection: Dur,
    /// `[consumers] commit`.
    pub commit: Commit,
    /// `[consumers] commit_interval`.
    pub commit_interval: Dur,
    /// A consumer commits what it processed before its error handler retries a failed record:
    /// Spring Kafka's container (`client = "spring"`) with `commit = "batch"`, whose
    /// `invokeErrorHandler` runs `processCommits()` before the `DefaultErrorHandler` [K8].
    pub commit_before_retry: bool,
    /// `[consumers] crash_detection`.
    pub crash_detection: CrashDetection,
    /// `[consumers] max_poll_interval`: none unless consumers poll (`receive = "batch"`).
    pub max_poll_interval: Option<Dur>,
    /// `[consumers] restart_takes_over`.
    pub restart_takes_over: bool,
    /// `[producers] max_in_flight` (at least 1 in a valid file).
    pub max_in_flight: u32,
    /// `[producers] idempotence`. As Kafka's producer, a flavour's default idempotence gives way
    /// to a `max_in_flight` above [`MAX_IDEMPOTENT_IN_FLIGHT`] ("if conflicting configurations
    /// are set and idempotence is not explicitly enabled, idempotence is disabled"); set
    /// explicitly with such a `max_in_flight`, it is refused.
    pub idempotence: bool,
    /// `[producers] retry_backoff`, else the flavour's, else `reconnect_delay`.
    pub retry_backoff: Dur,
    /// `[producers] call_timeout`, else the flavour's; None: a blocking send waits as long as
    /// the broker holds it.
    pub call_timeout: Option<Dur>,
    /// `[producers] delivery_timeout`, else the flavour's; None (or `"0s"`): a send is retried
    /// until it is stored.
    pub delivery_timeout: Option<Dur>,
    /// `[producers] on_delivery_timeout` (default `drop`).
    pub on_delivery_timeout: OnDeliveryTimeout,
    /// `[producers] linger`, `batch_size` and `record_size`: None unless `linger` is above 0
    /// (then every record is a request of its own, as before batches were modelled).
    pub batching: Option<Batching>,
    /// How often producers refresh the topic's metadata (`[producers] metadata_max_age`, Kafka's
    /// `metadata.max.age.ms`), if at all: they see added partitions only then.
    pub producer_metadata_max_age: Option<Dur>,
    /// The same for the consumer group's leader (`[consumers] metadata_max_age`).
    pub consumer_metadata_max_age: Option<Dur>,
    /// Where a consumer newly given a partition without a committed offset starts
    /// (`[consumers] auto_offset_reset`, Kafka's `auto.offset.reset`), if the flavour has one.
    pub auto_offset_reset: Option<OffsetReset>,
    /// Per `[[broker]]`, in the file's order.
    pub brokers: Vec<ResolvedBroker>,
    /// `[producers] transactional`.
    pub transactional: bool,
    /// `[producers] commit_interval`: how often the producing application commits (its
    /// transaction, or its input's checkpoint), when it matters (a transactional producer, or
    /// a `producer_crash` or `producer_pause` fault); else None.
    pub producer_commits: Option<Dur>,
    /// `[consumers] isolation = "read_committed"`.
    pub read_committed: bool,
}

/// Kafka Streams' `commit.interval.ms` under `exactly_once_v2` (`StreamsConfig`
/// `EOS_DEFAULT_COMMIT_INTERVAL_MS`): the default `commit_interval`.
pub const DEFAULT_TRANSACTION_INTERVAL: Dur = Dur(100_000);
/// Kafka's `transaction.timeout.ms` default (`ProducerConfig`): the coordinator aborts a
/// transaction open longer.
pub const TRANSACTION_TIMEOUT: Dur = Dur(60_000_000);

/// Kafka's `batch.size` default in bytes (`ProducerConfig`).
pub const DEFAULT_BATCH_SIZE: u32 = 16384;
/// The record size assumed against `batch_size` when none is set (the sim's, not Kafka's).
pub const DEFAULT_RECORD_SIZE: u32 = 1024;

/// The bytes of a record batch's header, counted against `batch.size` (Kafka's
/// `DefaultRecordBatch.RECORD_BATCH_OVERHEAD`).
pub const RECORD_BATCH_OVERHEAD: u32 = 61;

/// A producer's batches (`[producers] linger`, `batch_size`, `record_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batching {
    /// How long a batch that is not full waits for more records (`linger.ms`).
    pub linger: Dur,
    /// The records a batch holds: as many as fit in `batch_size` after the batch's header,
    /// at least one (`MemoryRecordsBuilder.hasRoomFor` always takes a first record).
    pub records: u32,
    /// A batch of `records` records fills `batch_size` (`MemoryRecordsBuilder.isFull`): it is
    /// sent at once. Else it is sent when the next record of its partition does not fit and
    /// starts a new batch (`RecordAccumulator.ready`: `dequeSize > 1`).
    pub full_at_once: bool,
}

impl Batching {
    /// The batches of `batch_size` bytes holding records of `record_size` bytes (at least 1).
    pub fn new(linger: Dur, batch_size: u32, record_size: u32) -> Self {
        let record = u64::from(record_size.max(1));
        let room = u64::from(batch_size.saturating_sub(RECORD_BATCH_OVERHEAD));
        let records = (room / record).clamp(1, u64::from(u32::MAX)) as u32;
        Batching {
            linger,
            records,
            full_at_once: u64::from(RECORD_BATCH_OVERHEAD) + u64::from(records) * record
                >= u64::from(batch_size),
        }
    }
}

/// One `[[broker]]`'s settings with the flavour's defaults filled in.
#[derive(Clone, Debug)]
pub struct ResolvedBroker {
    /// How many queued messages dispatch looks at.
    pub page_size: u32,
    /// How long it remembers a stored message to refuse a resend, in µs (0: it stores every
    /// resend).
    pub dedup_window: Time,
    /// Its HA pair, if it is in one (`backup_of`).
    pub pair: Option<HaPair>,
}

/// A broker's HA pair, seen from one member.
#[derive(Clone, Debug)]
pub struct HaPair {
    /// The other member's index.
    pub partner: usize,
    /// The takeover time: `takeover` on either member, else the flavour's (drawn uniformly up
    /// to its maximum).
    pub takeover: DurSpec,
    /// Whether a restarted primary takes its store back: `failback` on either member, else the
    /// flavour's.
    pub failback: bool,
}

/// The flavours whose defaults satisfy `pred`, as a file names them: `"sqs" or "servicebus"`
/// (an error names them from the defaults, never restating one).
fn flavours_where(pred: impl Fn(&Defaults) -> bool) -> String {
    let names: Vec<String> = Flavour::ALL
        .into_iter()
        .filter(|f| pred(&f.defaults()))
        .map(|f| format!("{:?}", f.name()))
        .collect();
    names.join(" or ")
}

impl Scenario {
    /// This scenario's settings with its flavour's defaults filled in, or what stops them (a
    /// setting that needs a default the flavour does not give, or that cannot act together with
    /// the flavour's other defaults).
    pub fn resolve(&self) -> Result<Resolved, Vec<FieldError>> {
        let (resolved, problems) = self.resolve_checked();
        if problems.is_empty() {
            Ok(resolved)
        } else {
            Err(problems)
        }
    }

    /// [`Scenario::resolve`]'s values (with a placeholder where a problem is) and its problems.
    pub(super) fn resolve_checked(&self) -> (Resolved, Vec<FieldError>) {
        let mut problems = Vec::new();
        let mut err = |path: &[&str], message: String| {
            problems.push(FieldError::new(
                path.iter().map(|s| PathSeg::from(*s)).collect(),
                message,
            ))
        };
        let flavour = self.flavour.product();
        let d = self.flavour_defaults();
        let c = &self.consumers;
        let pr = &self.producers;
        let receive = c.receive.unwrap_or(d.receive);
        let crash_detection = c.crash_detection.unwrap_or(d.crash_detection);
        let commit = c.commit.unwrap_or(d.commit.0);
        let max_in_flight = pr.max_in_flight.unwrap_or(d.max_in_flight);
        let lease = self.lease_policy();

        if pr.idempotence == Some(true) && max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT {
            let at = if pr.max_in_flight.is_some() {
                "max_in_flight"
            } else {
                "idempotence"
            };
            err(
                &["producers", at],
                format!(
                    "an idempotent producer allows at most {MAX_IDEMPOTENT_IN_FLIGHT} sends in \
                     flight (Kafka refuses enable.idempotence with more), got max_in_flight = \
                     {max_in_flight}"
                ),
            );
        }
        if lease.is_none() && !self.lease.is_empty() {
            err(
                &["lease", "duration"],
                format!(
                    "is required: the `{}` flavour leases nothing by default",
                    flavour.name()
                ),
            );
        }
        if crash_detection == CrashDetection::Lease && lease.is_none() {
            err(
                &["consumers", "crash_detection"],
                format!(
                    "\"lease\" needs a [lease] duration (or flavour = {}): without one a dead \
                     consumer's messages would never come back",
                    flavours_where(|d| d.lease.is_some())
                ),
            );
        }
        // A setting that only acts together with another is refused without it, rather than
        // silently doing nothing.
        if c.max_poll_interval.is_some() && receive != Receive::Batch {
            err(
                &["consumers", "max_poll_interval"],
                format!(
                    "only applies to consumers that poll: it needs receive = \"batch\" (the \
                     default of flavour = {})",
                    flavours_where(|d| d.receive == Receive::Batch)
                ),
            );
        }
        if c.restart_takes_over.is_some() && crash_detection != CrashDetection::Timeout {
            err(
                &["consumers", "restart_takes_over"],
                format!(
                    "only applies when the broker detects a dead consumer by a timeout: it needs \
                     crash_detection = \"timeout\" (the default of flavour = {})",
                    flavours_where(|d| d.crash_detection == CrashDetection::Timeout)
                ),
            );
        }
        let delivery_timeout = pr
            .delivery_timeout
            .or(d.delivery_timeout)
            .filter(|t| *t > Dur::ZERO);
        if pr.on_delivery_timeout.is_some() && delivery_timeout.is_none() {
            err(
                &["producers", "on_delivery_timeout"],
                format!(
                    "only applies to a send the producer gives up after its delivery_timeout, \
                     and there is none here ({}): set [producers] delivery_timeout (Kafka's \
                     delivery.timeout.ms, the default of flavour = \"kafka\", is 120s)",
                    if pr.delivery_timeout.is_some() {
                        "delivery_timeout = \"0s\"".to_string()
                    } else {
                        format!("flavour {:?} gives none", flavour.name())
                    }
                ),
            );
        }
        // `linger` set in the file, else the release's (`kafka` 4.x: 5ms).
        let linger = pr.linger.or(d.linger);
        let batching = linger.filter(|l| *l > Dur::ZERO).map(|linger| {
            Batching::new(
                linger,
                pr.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
                pr.record_size.unwrap_or(DEFAULT_RECORD_SIZE),
            )
        });
        if linger.is_none() {
            for (field, set) in [
                ("batch_size", pr.batch_size.is_some()),
                ("record_size", pr.record_size.is_some()),
            ] {
                if set {
                    err(
                        &["producers", field],
                        "only applies to batches that wait for more records: set \
                         [producers] linger (Kafka's linger.ms, e.g. \"5ms\"), as a simulated \
                         send takes no time and with no linger every record is a request of its \
                         own"
                        .into(),
                    );
                }
            }
        }
        if pr.record_size == Some(0) {
            err(
                &["producers", "record_size"],
                "a record has at least 1 byte: set record_size to 1 or more".into(),
            );
        }
        let idempotence = pr
            .idempotence
            .unwrap_or(d.idempotence && max_in_flight <= MAX_IDEMPOTENT_IN_FLIGHT);
        let transactional = pr.transactional == Some(true);
        if transactional && !idempotence {
            err(
                &["producers", "transactional"],
                "needs an idempotent producer (Kafka's ProducerConfig: \"Cannot set a \
                 transactional.id without also enabling idempotence\"): set idempotence = true \
                 (with max_in_flight at most 5)"
                    .into(),
            );
        }
        // A producer's crash, or its pause (whose replacement, or whose fencing, restarts it
        // from the last commit): the producing application's checkpoint matters.
        let crashes = self.faults.iter().any(|f| {
            matches!(
                f.kind,
                crate::faults::FaultKind::ProducerCrash | crate::faults::FaultKind::ProducerPause
            )
        });
        if pr.commit_interval.is_some() && !transactional && !crashes {
            err(
                &["producers", "commit_interval"],
                "only applies to a transactional producer (transactional = true) or to the \
                 checkpoint a producer_crash or producer_pause goes back to: set one of them"
                    .into(),
            );
        }
        let interval = pr.commit_interval.unwrap_or(DEFAULT_TRANSACTION_INTERVAL);
        if interval == Dur::ZERO {
            err(
                &["producers", "commit_interval"],
                "is how often the producing application commits its progress: above 0s".into(),
            );
        } else if transactional && interval > TRANSACTION_TIMEOUT {
            err(
                &["producers", "commit_interval"],
                format!(
                    "is how long a transaction stays open: at most 60s (Kafka's \
                     transaction.timeout.ms: the coordinator aborts a transaction open longer), \
                     got {interval}"
                ),
            );
        }
        if (transactional || crashes) && self.brokers.iter().any(|b| b.replication.is_some()) {
            err(
                &[
                    "producers",
                    if transactional {
                        "transactional"
                    } else {
                        "commit_interval"
                    },
                ],
                "transactions and producer crashes or pauses are not modelled together with \
                 [broker.replication] here: leave out one of them"
                    .into(),
            );
        }
        if c.commit_interval.is_some() && commit != Commit::Interval {
            err(
                &["consumers", "commit_interval"],
                "only applies to auto-commits: it needs commit = \"interval\" (the default of \
                 flavour = \"kafka\" with client = \"plain\")"
                    .into(),
            );
        }

        if c.prefetch > 1
            && receive == Receive::Prefetch
            && d.read_ahead == ReadAhead::NonPersistentOnly
        {
            if let Some(b) = self.brokers.iter().find(|b| b.persistent) {
                err(
                    &["consumers", "prefetch"],
                    format!(
                        "is {}, but the `{}` client reads ahead only non-persistent messages \
                         (and only outside a transaction, where the queue's DEFREADA allows it): \
                         it gets each persistent message of broker {:?} one at a time. Set \
                         prefetch = 1, or persistent = false on the brokers",
                        c.prefetch,
                        flavour.name(),
                        b.name
                    ),
                );
            }
        }

        let partners = self.ha_partners();
        let mut brokers = Vec::with_capacity(self.brokers.len());
        for (b, cfg) in self.brokers.iter().enumerate() {
            let pair = partners[b].map(|p| {
                let other = &self.brokers[p];
                let takeover = cfg.takeover.clone().or_else(|| other.takeover.clone());
                let takeover = takeover.unwrap_or_else(|| {
                    let max = d.takeover.unwrap_or_else(|| {
                        // Reported once per pair, at its backup (where `takeover` belongs).
                        if cfg.backup_of.is_some() {
                            problems.push(FieldError::new(
                                vec!["broker".into(), PathSeg::Index(b), "takeover".into()],
                                format!(
                                    "flavour {:?} has no documented takeover time for an HA \
                                     pair: give one here (e.g. takeover = \"5s\")",
                                    flavour.name()
                                ),
                            ));
                        }
                        Dur::ZERO
                    });
                    DurSpec(DurDist::Uniform {
                        min: Dur::ZERO,
                        max,
                    })
                });
                HaPair {
                    partner: p,
                    takeover,
                    failback: cfg.failback.or(other.failback).unwrap_or(d.failback),
                }
            });
            brokers.push(ResolvedBroker {
                page_size: cfg.page_size.unwrap_or(d.page_size),
                dedup_window: cfg.dedup_window.or(d.dedup_window).map_or(0, |w| w.0),
                pair,
            });
        }

        let resolved = Resolved {
            flavour,
            redelivery: self.redelivery_policy(),
            lease,
            receive,
            partial_failure: c.partial_failure.unwrap_or(d.partial_failure),
            failure_detection: c.failure_detection.unwrap_or(d.failure_detection),
            commit,
            commit_interval: c.commit_interval.unwrap_or(d.commit.1),
            commit_before_retry: flavour == Flavour::Kafka
                && c.client.unwrap_or_default() == KafkaClient::Spring
                && commit == Commit::Batch,
            crash_detection,
            max_poll_interval: if receive == Receive::Batch {
                c.max_poll_interval.or(d.max_poll_interval)
            } else {
                None
            },
            restart_takes_over: c.restart_takes_over.unwrap_or(d.restart_takes_over),
            max_in_flight,
            idempotence,
            retry_backoff: pr
                .retry_backoff
                .or(d.retry_backoff)
                .unwrap_or(pr.reconnect_delay),
            call_timeout: pr
                .call_timeout
                .or(d.call_timeout)
                .filter(|t| *t > Dur::ZERO),
            delivery_timeout,
            on_delivery_timeout: pr.on_delivery_timeout.unwrap_or_default(),
            batching,
            producer_metadata_max_age: pr.metadata_max_age.or(d.metadata_max_age),
            consumer_metadata_max_age: c.metadata_max_age.or(d.metadata_max_age),
            auto_offset_reset: c.auto_offset_reset.or(d.auto_offset_reset),
            brokers,
            transactional,
            producer_commits: (transactional || crashes).then_some(interval),
            read_committed: c.isolation == Some(Isolation::ReadCommitted),
        };
        (resolved, problems)
    }

    /// Per broker, the other member of its HA pair (`backup_of`), if it has one (the first
    /// backup named, where a validated file has one per primary).
    pub fn ha_partners(&self) -> Vec<Option<usize>> {
        let index: BTreeMap<&str, usize> = self
            .brokers
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.as_str(), i))
            .collect();
        let mut partners = vec![None; self.brokers.len()];
        for (i, b) in self.brokers.iter().enumerate() {
            let Some(&p) = b.backup_of.as_deref().and_then(|n| index.get(n)) else {
                continue;
            };
            if p != i && partners[p].is_none() && partners[i].is_none() {
                partners[p] = Some(i);
                partners[i] = Some(p);
            }
        }
        partners
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(flavour: &str, extra: &str) -> Scenario {
        toml::from_str(&format!(
            "flavour = \"{flavour}\"\nstrategies = [\"single\"]\n[workload]\nmessages = 1\n\
             rate = \"1/s\"\nkeys = 1\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 1\n\
             service = \"1ms\"\n{extra}"
        ))
        .unwrap()
    }

    /// Every default is filled from the flavour, the file's values win.
    #[test]
    fn defaults_fill_what_the_file_leaves_out() {
        let r = scenario("kafka", "").resolve().unwrap();
        assert_eq!(r.flavour, Flavour::Kafka);
        assert_eq!((r.receive, r.commit), (Receive::Batch, Commit::Batch));
        assert_eq!(r.commit_interval, Dur::from_secs(5));
        assert_eq!(r.redelivery.limit, super::super::Limit::Deliveries(10));
        // The plain client: auto-commit, no retry handler.
        let r = scenario("kafka", "client = \"plain\"").resolve().unwrap();
        assert_eq!(
            (r.commit, r.commit_interval),
            (Commit::Interval, Dur::from_secs(5))
        );
        assert_eq!(r.redelivery.limit, super::super::Limit::Deliveries(1));
        assert_eq!(r.max_poll_interval, Some(Dur::from_secs(300)));
        assert_eq!(r.brokers[0].page_size, u32::MAX);
        let r = scenario("kafka", "commit = \"each\"\nreceive = \"prefetch\"")
            .resolve()
            .unwrap();
        assert_eq!((r.receive, r.commit), (Receive::Prefetch, Commit::Each));
        assert_eq!(
            r.max_poll_interval, None,
            "only consumers that poll have one"
        );
    }

    /// A setting that needs another default is refused naming the flavours whose defaults give
    /// it, read from their defaults (not restated).
    /// IBM MQ's client gets persistent messages one at a time: a prefetch above 1 on a
    /// persistent broker is refused, with the broker and the two ways out named.
    #[test]
    fn ibm_mq_reads_ahead_only_non_persistent_messages() {
        let e = scenario("ibm_mq", "prefetch = 2").resolve().unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].path_string(), "consumers.prefetch");
        assert!(
            e[0].message.starts_with("is 2, but the `ibm_mq` client"),
            "{e:?}"
        );
        assert!(e[0].message.contains("broker \"a\""), "{e:?}");
        assert!(e[0].message.ends_with("persistent = false on the brokers"));
        assert!(scenario("ibm_mq", "prefetch = 1").resolve().is_ok());
        let mut s = scenario("ibm_mq", "prefetch = 2");
        s.brokers[0].persistent = false;
        assert!(s.resolve().is_ok());
        for other in ["activemq", "weblogic", "artemis"] {
            assert!(scenario(other, "prefetch = 2").resolve().is_ok(), "{other}");
        }
    }

    /// A batch holds what fits in `batch_size` after its header; no linger, no batches.
    #[test]
    fn batches_hold_what_fits_after_the_header() {
        let ms = Dur::from_millis;
        // Kafka's defaults with 1 KiB records: 15 fit in 16384 - 61 bytes, not filling it.
        let b = Batching::new(ms(5), 16384, 1024);
        assert_eq!((b.records, b.full_at_once), (15, false));
        // Exactly two 100-byte records after the 61-byte header: full at once.
        assert_eq!(Batching::new(ms(5), 261, 100).records, 2);
        assert!(Batching::new(ms(5), 261, 100).full_at_once);
        // `batch.size` 0, or a record larger than the batch: one record a batch, sent at once.
        for (size, record) in [(0, 100), (16384, 20000)] {
            let b = Batching::new(ms(5), size, record);
            assert_eq!((b.records, b.full_at_once), (1, true));
        }
        let with = |producers: &str| {
            scenario(
                "kafka",
                &format!(
                    "[producers]
count = 1
{producers}"
                ),
            )
            .resolve()
        };
        // Unset, or no linger: no batches (every record a request of its own).
        assert_eq!(with("").unwrap().batching, None);
        assert_eq!(
            with("linger = \"0s\"\nbatch_size = 100").unwrap().batching,
            None
        );
        assert_eq!(
            with("linger = \"10ms\"").unwrap().batching,
            Some(Batching::new(
                ms(10),
                DEFAULT_BATCH_SIZE,
                DEFAULT_RECORD_SIZE
            ))
        );
        let e = with("record_size = 100").unwrap_err();
        assert_eq!(e[0].path_string(), "producers.record_size");
        assert!(e[0].message.contains("set [producers] linger"), "{e:?}");
    }

    /// What to do at a delivery timeout means nothing without one: refused, naming why.
    #[test]
    fn on_delivery_timeout_needs_a_delivery_timeout() {
        let with = |flavour: &str, producers: &str| {
            scenario(flavour, &format!("[producers]\ncount = 1\n{producers}")).resolve()
        };
        let e = with("activemq", "on_delivery_timeout = \"resend\"").unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].path_string(), "producers.on_delivery_timeout");
        assert!(
            e[0].message.contains("flavour \"activemq\" gives none"),
            "{e:?}"
        );
        let e = with(
            "kafka",
            "delivery_timeout = \"0s\"\non_delivery_timeout = \"drop\"",
        )
        .unwrap_err();
        assert!(
            e[0].message.contains("(delivery_timeout = \"0s\")"),
            "{e:?}"
        );
        assert!(with("kafka", "on_delivery_timeout = \"resend\"").is_ok());
        let r = with(
            "activemq",
            "delivery_timeout = \"10s\"\non_delivery_timeout = \"resend\"",
        )
        .unwrap();
        assert_eq!(r.delivery_timeout, Some(Dur::from_secs(10)));
    }

    #[test]
    fn a_setting_needing_a_default_names_the_flavours_that_give_it() {
        let e = scenario("activemq", "commit_interval = \"1s\"")
            .resolve()
            .unwrap_err();
        assert_eq!(e[0].path_string(), "consumers.commit_interval");
        assert!(
            e[0].message
                .ends_with("(the default of flavour = \"kafka\" with client = \"plain\")"),
            "{e:?}"
        );
        let e = scenario("activemq", "crash_detection = \"lease\"")
            .resolve()
            .unwrap_err();
        assert!(
            e[0].message.contains("flavour = \"sqs\" or \"servicebus\""),
            "{e:?}"
        );
    }
}
