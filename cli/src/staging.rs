//! What `sim live` does with every field of the scenario file (issue 37): one table, [`FIELDS`],
//! decides whether a field is staged live, refused (exit 2, the field named), supplied by the real
//! broker (listed in the run's output), or without effect on a live run. A test derives the
//! field list from the scenario parser, so a new field fails it until it is classified here.
//!
//! Not behind the `live` feature: the table and its test run in the default `cargo test`.

/// How `sim live` treats one scenario field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Staging {
    /// Staged live as described (some values may still be refused by a check in `live`).
    Staged(&'static str),
    /// Refused when the file writes it (exit 2, the field named): the reason.
    Refused(&'static str),
    /// What the real broker does stands in for it; the run's output lists it.
    Broker(&'static str),
    /// No effect on what `sim live` runs (labels, or read by other commands only).
    Unused(&'static str),
}

use Staging::{Broker, Refused, Staged, Unused};

/// Every field of the scenario file: `field` (top level, a whole table when it has no `table.`
/// rows) or `table.field` (`broker` and `fault` are arrays of tables).
pub const FIELDS: &[(&str, Staging)] = &[
    ("name", Unused("a label")),
    ("description", Unused("a label")),
    (
        "seed",
        Staged("the schedule, the poison draws, the fault plan, service times"),
    ),
    ("flavour", Staged("\"activemq\" only (the live broker)")),
    (
        "strategies",
        Staged("competing, single, message_groups; db_optimistic, notifier against PostgreSQL"),
    ),
    (
        "strategy",
        Staged(
            "refused except [strategy.single] takeover_delay = \"0s\", [strategy.db_optimistic] \
             (compare = \"version\"), [strategy.notifier]",
        ),
    ),
    ("expect", Unused("judged by `sim check`, not by `sim live`")),
    ("lease", Refused("no lease is staged")),
    ("run", Refused("the simulator's run bounds")),
    ("sweep", Refused("read by `sim sweep`")),
    ("explore", Refused("read by `sim explore`")),
    ("workload.messages", Staged("the producers' schedule")),
    ("workload.rate", Staged("the producers' schedule, paced")),
    ("workload.arrival", Staged("Poisson or constant arrivals")),
    ("workload.keys", Staged("keys drawn uniformly")),
    (
        "workload.key_distribution",
        Staged("\"uniform\" only (others refused)"),
    ),
    ("workload.zipf_exponent", Refused("uniform keys only")),
    ("workload.kind", Staged("state or command, as judged")),
    (
        "workload.poison_fraction",
        Staged("poison drawn from the seed"),
    ),
    (
        "workload.group_header_missing",
        Refused("every SEND carries its group"),
    ),
    (
        "workload.group_size",
        Refused("the live producers draw every message's key: no orders of fixed size"),
    ),
    ("producers.count", Staged("one thread and connection each")),
    ("producers.names", Unused("labels")),
    ("producers.brokers", Staged("the failover list")),
    ("producers.connect", Staged("the failover list's order")),
    (
        "producers.reconnect_delay",
        Staged("the wait before a producer reconnects"),
    ),
    (
        "producers.timestamp_resolution",
        Unused("read by timestamp strategies only, none staged"),
    ),
    ("producers.key_ownership", Refused("not staged")),
    ("producers.clock_skew", Refused("not staged")),
    ("producers.max_in_flight", Refused("Kafka's producer")),
    ("producers.idempotence", Refused("Kafka's producer")),
    ("producers.retry_backoff", Refused("Kafka's producer")),
    (
        "producers.call_timeout",
        Refused("Artemis's client; no live broker holds a send"),
    ),
    (
        "producers.delivery_timeout",
        Refused("Kafka's producer; the live producers retry a send until it is stored"),
    ),
    (
        "producers.on_delivery_timeout",
        Refused("Kafka's producer; the live producers retry a send until it is stored"),
    ),
    (
        "producers.metadata_max_age",
        Refused("Kafka's producer; no live broker adds partitions"),
    ),
    (
        "producers.acks",
        Refused("Kafka's producer; no live broker has partition replicas"),
    ),
    ("producers.linger", Refused("Kafka's producer batches")),
    ("producers.batch_size", Refused("Kafka's producer batches")),
    ("producers.record_size", Refused("Kafka's producer batches")),
    (
        "producers.transactional",
        Refused("Kafka's transactional producer"),
    ),
    (
        "producers.commit_interval",
        Refused("the checkpoint of a producer_crash; no live producer crashes"),
    ),
    ("broker.name", Staged("one ActiveMQ process per broker")),
    (
        "broker.persistent",
        Staged("KahaDB and persistent SENDs (the same for all)"),
    ),
    (
        "broker.dispatch_latency",
        Broker("the real broker's transit from SEND to MESSAGE"),
    ),
    (
        "broker.restart_time",
        Broker("the real broker's start after SIGKILL, until its port opens"),
    ),
    ("broker.page_size", Refused("not staged")),
    ("broker.dedup_window", Refused("not staged")),
    (
        "broker.backup_of",
        Refused("HA pairs (shared-store master/slave) are not staged"),
    ),
    ("broker.takeover", Refused("HA pairs are not staged")),
    (
        "broker.replication",
        Refused("Kafka's partition replicas; no live broker is a Kafka cluster"),
    ),
    ("broker.failback", Refused("HA pairs are not staged")),
    (
        "broker.version",
        Refused("one ActiveMQ release here; the activemq flavours have no versions"),
    ),
    (
        "network.kind",
        Staged("\"bridge\" only (ActiveMQ's network)"),
    ),
    ("network.prefetch", Staged("the bridges' prefetchSize")),
    (
        "network.forward_delay",
        Broker("the loopback bridge's forwarding, about 1 ms (above 2 ms refused)"),
    ),
    (
        "network.network_ttl",
        Refused("ActiveMQ's default, 1, only"),
    ),
    (
        "network.conduit_subscriptions",
        Refused("ActiveMQ's default only"),
    ),
    (
        "network.decrease_network_consumer_priority",
        Refused("ActiveMQ's default only"),
    ),
    ("consumers.count", Staged("one thread and connection each")),
    ("consumers.names", Unused("labels")),
    ("consumers.prefetch", Staged("activemq.prefetchSize")),
    ("consumers.service", Staged("drawn per message")),
    (
        "consumers.ack_latency",
        Staged("ACK that long after the apply"),
    ),
    (
        "consumers.reconnect_delay",
        Staged("the wait before a consumer reconnects"),
    ),
    ("consumers.brokers", Staged("the failover list")),
    ("consumers.connect", Staged("the failover list's order")),
    ("consumers.failure_detection", Refused("not staged")),
    ("consumers.commit", Refused("Kafka's consumer")),
    ("consumers.commit_interval", Refused("Kafka's consumer")),
    ("consumers.crash_detection", Refused("not staged")),
    ("consumers.restart_takes_over", Refused("not staged")),
    ("consumers.max_poll_interval", Refused("Kafka's consumer")),
    ("consumers.partial_failure", Refused("not staged")),
    ("consumers.return_with", Refused("RabbitMQ's client")),
    ("consumers.client", Refused("Kafka's consumer")),
    (
        "consumers.metadata_max_age",
        Refused("Kafka's consumer; no live broker adds partitions"),
    ),
    (
        "consumers.auto_offset_reset",
        Refused("Kafka's consumer; no live broker adds partitions"),
    ),
    (
        "consumers.isolation",
        Refused("Kafka's consumer; no live broker has transactions"),
    ),
    ("consumers.receive", Refused("not staged")),
    ("consumers.suspend_after_failures", Refused("not staged")),
    ("consumers.resume_after", Refused("not staged")),
    ("consumers.mode", Refused("batch consumers are not staged")),
    ("consumers.batch", Refused("batch consumers are not staged")),
    (
        "fault.kind",
        Staged("consumer_crash, broker_crash, poison; db_outage with the db handlers"),
    ),
    ("fault.at", Staged("the fault plan")),
    ("fault.rate", Staged("the fault plan")),
    ("fault.for", Staged("the fault plan")),
    ("fault.broker", Staged("which broker")),
    ("fault.consumer", Staged("which consumer")),
    ("fault.fraction", Staged("poison's share")),
    ("fault.producer", Refused("no producer fault is staged")),
    ("fault.factor", Refused("no slowdown is staged")),
    ("fault.skew", Refused("no clock fault is staged")),
    ("fault.ahead", Refused("no clock fault is staged")),
    ("fault.count", Refused("not staged")),
    ("fault.node", Refused("no Kafka cluster is staged")),
    (
        "fault.replaced_after",
        Refused("no producer fault is staged"),
    ),
    (
        "redelivery.mode",
        Staged("with poison (without, [redelivery] is refused)"),
    ),
    ("redelivery.initial_delay", Staged("with poison")),
    ("redelivery.multiplier", Staged("with poison")),
    ("redelivery.max_delay", Staged("with poison")),
    ("redelivery.max_redeliveries", Staged("with poison")),
    ("redelivery.backout_threshold", Staged("with poison")),
    ("redelivery.dead_letter", Staged("with poison")),
    ("redelivery.requeue", Staged("with poison")),
];

/// The real broker a live run drives (chosen by the scenario's flavour).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveBroker {
    /// ActiveMQ Classic (`flavour = "activemq"`): [`FIELDS`].
    ActiveMq,
    /// RabbitMQ (`flavour = "rabbitmq"` or `"rabbitmq_quorum"`): [`RABBITMQ`], else [`FIELDS`].
    RabbitMq,
}

/// RabbitMQ's rows where they differ from [`FIELDS`] (ActiveMQ's): a field staged on ActiveMQ
/// may be refused on RabbitMQ, and the other way round.
pub const RABBITMQ: &[(&str, Staging)] = &[
    (
        "flavour",
        Staged("\"rabbitmq\" (classic queue) or \"rabbitmq_quorum\" (quorum queue)"),
    ),
    (
        "strategies",
        Staged("competing; single and rabbitmq_sac (x-single-active-consumer); rabbitmq_hash"),
    ),
    (
        "strategy",
        Staged("[strategy.rabbitmq_hash] queues, weight, registration = \"same\"; others refused"),
    ),
    (
        "workload.poison_fraction",
        Staged("poison drawn from the seed, NACKed"),
    ),
    (
        "broker.name",
        Staged("one rabbitmq-server node (one broker)"),
    ),
    (
        "broker.persistent",
        Staged("durable queues and persistent SENDs (a quorum queue: always)"),
    ),
    (
        "broker.dispatch_latency",
        Broker("RabbitMQ's transit from SEND to MESSAGE"),
    ),
    (
        "broker.version",
        Staged("the installed server's release line only (written or the default; others refused)"),
    ),
    (
        "consumers.return_with",
        Staged("\"nack\" (STOMP's NACK is a basic.nack); \"reject\" where the server counts both alike (before 4.3)"),
    ),
    (
        "broker.restart_time",
        Broker("rabbitmq-server's boot after SIGKILL, until its STOMP port opens"),
    ),
    (
        "network.kind",
        Refused("one RabbitMQ node: no network of brokers"),
    ),
    (
        "network.prefetch",
        Refused("one RabbitMQ node: no network of brokers"),
    ),
    (
        "network.forward_delay",
        Refused("one RabbitMQ node: no network of brokers"),
    ),
    ("consumers.prefetch", Staged("the STOMP prefetch-count")),
    ("consumers.brokers", Staged("one node")),
    ("consumers.connect", Staged("one node")),
    ("producers.brokers", Staged("one node")),
    ("producers.connect", Staged("one node")),
    (
        "redelivery.mode",
        Staged("with poison: \"non_blocking\" only (the queue redelivers at once)"),
    ),
    (
        "redelivery.initial_delay",
        Staged("with poison: 0 only (RabbitMQ has no redelivery delay)"),
    ),
    (
        "redelivery.max_redeliveries",
        Staged("with poison: 0 is a NACK without requeue; a quorum queue's x-delivery-limit"),
    ),
    (
        "redelivery.backout_threshold",
        Refused("IBM MQ's and SQS's; say max_redeliveries"),
    ),
    (
        "redelivery.dead_letter",
        Staged("with poison: x-dead-letter-exchange to a queue, or none"),
    ),
    (
        "redelivery.requeue",
        Staged("with poison: the queue type's position (others refused)"),
    ),
];

/// `sim live --consumer CMD` (issue 40): the rows that differ when the consumers are the user's
/// processes: what ordsim's consumer threads stage is now the consumer's own.
pub const OWN_CONSUMER: &[(&str, Staging)] = &[
    (
        "strategies",
        Staged(
            "competing; on ActiveMQ message_groups (JMSXGroupID on every SEND) and single \
             (ORDSIM_SUBSCRIBE_HEADERS asks for an exclusive subscription); on RabbitMQ \
             single and rabbitmq_sac (the queue is declared single-active-consumer)",
        ),
    ),
    (
        "consumers.count",
        Staged("copies of the command, one process group each"),
    ),
    (
        "consumers.prefetch",
        Staged("ORDSIM_PREFETCH, for the consumer's SUBSCRIBE"),
    ),
    (
        "consumers.service",
        Unused("the consumer's own work takes its time"),
    ),
    (
        "consumers.ack_latency",
        Unused("the consumer acks when it does"),
    ),
    (
        "consumers.reconnect_delay",
        Unused("the consumer reconnects when it does"),
    ),
    (
        "consumers.brokers",
        Staged("ORDSIM_BROKER_PORTS, the consumer's failover list"),
    ),
    (
        "consumers.connect",
        Staged("the order of ORDSIM_BROKER_PORTS"),
    ),
    (
        "workload.poison_fraction",
        Refused("the consumer's processing is its own: no poison is staged"),
    ),
    (
        "fault.kind",
        Staged(
            "consumer_crash (SIGKILL, started again after `for`), consumer_pause (SIGSTOP, then \
             SIGCONT), broker_crash, db_outage (the consumers' database refuses connections)",
        ),
    ),
    (
        "fault.fraction",
        Refused("the consumer's processing is its own: no poison is staged"),
    ),
];

/// How `path` is staged with the user's consumers (`--consumer`): [`OWN_CONSUMER`]'s row first,
/// else the broker's.
pub fn staging_own(broker: LiveBroker, path: &str) -> Option<Staging> {
    match OWN_CONSUMER.iter().find(|(f, _)| *f == path) {
        Some((_, s)) => Some(*s),
        None => staging_on(broker, path),
    }
}

/// How `path` is staged on `broker`: RabbitMQ's own row first, else [`staging`].
pub fn staging_on(broker: LiveBroker, path: &str) -> Option<Staging> {
    if broker == LiveBroker::RabbitMq {
        if let Some((_, s)) = RABBITMQ.iter().find(|(f, _)| *f == path) {
            return Some(*s);
        }
    }
    staging(path)
}

/// How `path` (`field` or `table.field`) is staged: its own row, else its table's (`None`: not
/// classified, which `sim live` refuses).
pub fn staging(path: &str) -> Option<Staging> {
    let own = FIELDS.iter().find(|(f, _)| *f == path).map(|(_, s)| *s);
    own.or_else(|| {
        let (table, _) = path.split_once('.')?;
        FIELDS.iter().find(|(f, _)| *f == table).map(|(_, s)| *s)
    })
}

/// Whether `table` is classified field by field (it has `table.x` rows).
pub fn per_field(table: &str) -> bool {
    let prefix = format!("{table}.");
    FIELDS.iter().any(|(f, _)| f.starts_with(&prefix))
}

/// The fields a file writes that `sim live` refuses, as `[table]` or `table.field`, each with
/// its reason: every key written (top level, the tables classified field by field, every
/// `[[broker]]` and `[[fault]]`), refused if its row says so or it has none.
pub fn refused_fields(doc: &toml_edit::DocumentMut) -> Vec<String> {
    refused_fields_on(LiveBroker::ActiveMq, doc)
}

/// [`refused_fields`] on `broker`.
pub fn refused_fields_on(broker: LiveBroker, doc: &toml_edit::DocumentMut) -> Vec<String> {
    refused_by(|p| staging_on(broker, p), doc)
}

/// [`refused_fields`] with the user's consumers ([`OWN_CONSUMER`]).
pub fn refused_fields_own(broker: LiveBroker, doc: &toml_edit::DocumentMut) -> Vec<String> {
    refused_by(|p| staging_own(broker, p), doc)
}

fn refused_by(
    staging_of: impl Fn(&str) -> Option<Staging>,
    doc: &toml_edit::DocumentMut,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |path: String, shown: String| match staging_of(&path) {
        Some(Refused(why)) => out.push(format!("{shown} ({why})")),
        None => out.push(format!("{shown} (not staged)")),
        _ => {}
    };
    for (k, item) in doc.iter() {
        if !per_field(k) {
            check(k.to_string(), format!("[{k}]"));
            continue;
        }
        let tables: Vec<&dyn toml_edit::TableLike> = match item.as_array_of_tables() {
            Some(a) => a.iter().map(|t| t as &dyn toml_edit::TableLike).collect(),
            None => item.as_table_like().into_iter().collect(),
        };
        for t in tables {
            for (f, _) in t.iter() {
                check(format!("{k}.{f}"), format!("{k}.{f}"));
            }
        }
    }
    out
}

/// The fields the real broker supplies (what the run's output lists).
pub fn broker_supplied() -> Vec<(&'static str, &'static str)> {
    broker_supplied_on(LiveBroker::ActiveMq)
}

/// [`broker_supplied`] on `broker`.
pub fn broker_supplied_on(broker: LiveBroker) -> Vec<(&'static str, &'static str)> {
    FIELDS
        .iter()
        .filter_map(|(f, _)| match staging_on(broker, f) {
            Some(Broker(why)) => Some((*f, why)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest scenario the parser accepts, with `probe` (an unknown key) in `table`
    /// (`""`: at the top level).
    fn with_probe(table: &str) -> String {
        let mut parts = [
            ("", "strategies = [\"competing\"]\n".to_string()),
            (
                "workload",
                "messages = 1\nrate = \"1/s\"\nkeys = 1\n".into(),
            ),
            ("broker", "name = \"a\"\n".into()),
            ("consumers", "count = 1\nservice = \"1ms\"\n".into()),
            ("fault", "kind = \"consumer_crash\"\n".into()),
            ("producers", String::new()),
            ("network", String::new()),
            ("redelivery", String::new()),
        ];
        let mut text = String::new();
        for (t, body) in parts.iter_mut() {
            if *t == table {
                body.push_str("zz_probe = 1\n");
            }
            match *t {
                "" => text.push_str(body),
                "broker" | "fault" => text.push_str(&format!("[[{t}]]\n{body}")),
                _ => text.push_str(&format!("[{t}]\n{body}")),
            }
        }
        text
    }

    /// The fields of `table` as the parser knows them: the names its unknown-field error lists
    /// (serde's derive lists every field of a `deny_unknown_fields` struct).
    fn parser_fields(table: &str) -> Vec<String> {
        let err = toml::from_str::<sim::Scenario>(&with_probe(table))
            .expect_err("an unknown field is refused")
            .to_string();
        let expected = err
            .split_once("expected")
            .unwrap_or_else(|| panic!("{table}: {err}"))
            .1;
        let names: Vec<String> = expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        assert!(names.len() > 1, "{table}: {err}");
        names
    }

    #[test]
    fn every_field_of_the_scenario_schema_is_classified() {
        let mut unclassified = Vec::new();
        let mut seen = Vec::new();
        for top in parser_fields("") {
            if per_field(&top) {
                for f in parser_fields(&top) {
                    let path = format!("{top}.{f}");
                    if !FIELDS.iter().any(|(p, _)| *p == path) {
                        unclassified.push(path.clone());
                    }
                    seen.push(path);
                }
            } else if staging(&top).is_none() {
                unclassified.push(top.clone());
            }
            seen.push(top);
        }
        assert!(
            unclassified.is_empty(),
            "scenario fields not classified in staging::FIELDS: {unclassified:?}"
        );
        // No row names a field the parser does not know (a renamed or removed field).
        let stale: Vec<&str> = FIELDS
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| !seen.iter().any(|s| s == p))
            .collect();
        assert!(stale.is_empty(), "rows for unknown fields: {stale:?}");
        // RabbitMQ's rows name known fields too, and every field is classified on both brokers.
        let stale: Vec<&str> = RABBITMQ
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| !seen.iter().any(|s| s == p))
            .collect();
        assert!(
            stale.is_empty(),
            "RabbitMQ rows for unknown fields: {stale:?}"
        );
        for b in [LiveBroker::ActiveMq, LiveBroker::RabbitMq] {
            let missing: Vec<&String> = seen
                .iter()
                .filter(|p| (p.contains('.') || !per_field(p)) && staging_on(b, p).is_none())
                .collect();
            assert!(missing.is_empty(), "{b:?}: {missing:?}");
        }
        // The tables walked field by field are those the probe scenario reaches.
        for t in ["workload", "producers", "broker", "network", "consumers"] {
            assert!(per_field(t), "{t}");
        }
    }

    #[test]
    fn a_new_field_fails_the_classification() {
        // What the test above does with a field the table lacks: `staging` has no row for it.
        assert_eq!(staging("workload.brand_new"), None);
        assert_eq!(
            staging("lease.duration"),
            Some(Refused("no lease is staged"))
        );
        assert!(matches!(
            staging("producers.reconnect_delay"),
            Some(Staged(_))
        ));
    }

    #[test]
    fn written_fields_are_refused_by_their_row() {
        let doc: toml_edit::DocumentMut = "seed = 1\n[lease]\nduration = \"1s\"\n\
            [network]\nforward_delay = \"1ms\"\nnetwork_ttl = 2\n[[fault]]\nkind = \"x\"\nskew = \"1s\"\n"
            .parse()
            .unwrap();
        assert_eq!(
            refused_fields(&doc),
            vec![
                "[lease] (no lease is staged)".to_string(),
                "network.network_ttl (ActiveMQ's default, 1, only)".into(),
                "fault.skew (no clock fault is staged)".into(),
            ]
        );
        // The same field, refused on one broker and supplied by the other.
        assert_eq!(
            refused_fields_on(LiveBroker::RabbitMq, &doc),
            vec![
                "[lease] (no lease is staged)".to_string(),
                "network.forward_delay (one RabbitMQ node: no network of brokers)".into(),
                "network.network_ttl (ActiveMQ's default, 1, only)".into(),
                "fault.skew (no clock fault is staged)".into(),
            ]
        );
        let names: Vec<&str> = broker_supplied_on(LiveBroker::RabbitMq)
            .iter()
            .map(|(f, _)| *f)
            .collect();
        assert_eq!(
            names,
            vec!["broker.dispatch_latency", "broker.restart_time"]
        );
        let names: Vec<&str> = broker_supplied().iter().map(|(f, _)| *f).collect();
        assert_eq!(
            names,
            vec![
                "broker.dispatch_latency",
                "broker.restart_time",
                "network.forward_delay"
            ]
        );
    }
}
