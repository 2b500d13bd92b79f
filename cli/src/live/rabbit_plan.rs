//! How a scenario under a RabbitMQ flavour is staged live (issue 37): which queue type, which
//! queue arguments, where producers send, what a poison message's NACK does, what is refused,
//! and where the installed server's version differs from the modelled one.
//!
//! `rabbitmq_quorum` models the release its `[[broker]] version` names (the current release, 4.3,
//! by default; sim/src/scenario/flavour.rs); Debian 12 ships 3.10. A run stages only the installed
//! server's release line: any other version, written or the default, is refused with the field
//! named ([`refusals`]), so that the simulator and the live run model one release. Where a
//! comparison still differs by construction (the hash exchange's hash function), the run says so
//! ([`version_notes`]).

use super::rabbitmq::{self, QueueType, Topology};
use super::run::{LiveRedelivery, LiveStrategy};
use super::target::Target;
use crate::staging::LiveBroker;
use sim::scenario::{DeadLetter, Flavour, Limit, RedeliveryMode, Requeue, ReturnWith};
use sim::Scenario;

/// The live broker of the scenario's flavour.
pub fn broker_of(sc: &Scenario) -> LiveBroker {
    match sc.flavour.product() {
        Flavour::Rabbitmq | Flavour::RabbitmqQuorum => LiveBroker::RabbitMq,
        _ => LiveBroker::ActiveMq,
    }
}

/// The broker's product name, for the output and the histories' headers.
pub fn product(sc: &Scenario) -> String {
    match broker_of(sc) {
        LiveBroker::ActiveMq => Target::ActiveMq.product(),
        LiveBroker::RabbitMq => format!(
            "RabbitMQ {}",
            rabbitmq::version().unwrap_or_else(|| "(not installed)".into())
        ),
    }
}

/// Why the scenario's broker cannot be started here, if it cannot.
pub fn missing(sc: &Scenario) -> Option<String> {
    match broker_of(sc) {
        LiveBroker::ActiveMq => super::broker::missing().map(|w| format!("ActiveMQ: {w}")),
        LiveBroker::RabbitMq => rabbitmq::missing().map(|w| format!("RabbitMQ: {w}")),
    }
}

/// The release line (`"3.10"`) of a server version (`"3.10.8"`).
pub fn release_line(v: &str) -> String {
    v.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Why the scenario's `rabbitmq_quorum` version cannot be staged on a server of version
/// `installed` (None: it can): only the installed release line is; `return_with = "reject"`
/// only where the server counts a reject as a nack (before 4.3), as STOMP's NACK is a nack.
pub fn version_refusal(sc: &Scenario, installed: &str) -> Option<String> {
    if queue_type(sc) != QueueType::Quorum {
        return None;
    }
    let line = release_line(installed);
    let want = sc.broker_version(0).unwrap_or_default();
    if want != line {
        let written = sc.brokers.first().is_some_and(|b| b.version.is_some());
        let how = if written {
            ""
        } else {
            ", the default: the current release"
        };
        let fix = if Flavour::RabbitmqQuorum.versions().contains(&line.as_str()) {
            format!("set it to \"{line}\" to stage it")
        } else {
            format!("the model has no version {line}")
        };
        return Some(format!(
            "[[broker]] version = \"{want}\"{how} (the installed RabbitMQ is {installed}: {fix})"
        ));
    }
    // The model of this line counts a nack as a failure: a reject is the same there.
    let counts_alike = Flavour::RabbitmqQuorum
        .defaults_on(Some(&line), ReturnWith::Nack)
        .redelivery
        .count_failed;
    if sc.consumers.return_with == Some(ReturnWith::Reject) && !counts_alike {
        return Some(format!(
            "consumers.return_with = \"reject\" (the live client's STOMP NACK is a basic.nack, \
             which RabbitMQ {installed} does not count against the delivery limit)"
        ));
    }
    None
}

fn queue_type(sc: &Scenario) -> QueueType {
    if sc.flavour == Flavour::RabbitmqQuorum {
        QueueType::Quorum
    } else {
        QueueType::Classic
    }
}

/// Where a NACK with requeue puts the message: a classic queue at its original position; a
/// quorum queue at the front when it has a delivery limit (`rabbit_fifo`'s `returns`, delivered
/// next) and at the back without one (3.10-3.13: the aux machine turns the return into a
/// `requeue`). 3.10.8 was measured doing both (docs/live.md, "Versions").
pub fn requeue_on(qt: QueueType, limited: bool) -> Requeue {
    match qt {
        QueueType::Classic => Requeue::Original,
        QueueType::Quorum if limited => Requeue::Head,
        QueueType::Quorum => Requeue::Tail,
    }
}

/// The quorum queue's `x-delivery-limit` (returns before it drops), from the flavour's limit.
fn delivery_limit(sc: &Scenario) -> Option<u32> {
    match (queue_type(sc), sc.redelivery_policy().limit) {
        (QueueType::Quorum, Limit::Deliveries(n)) => Some(n.saturating_sub(1)),
        _ => None,
    }
}

/// A poison message's NACK: `max_redeliveries = 0` is a NACK without requeue (dropped, or
/// dead-lettered with `dead_letter = "queue"`); otherwise a NACK with requeue, redelivered at
/// once, until the quorum queue's delivery limit (a classic queue has none).
pub fn redelivery(sc: &Scenario) -> Result<LiveRedelivery, String> {
    let r = sc.redelivery_policy();
    if r.mode != RedeliveryMode::NonBlocking {
        return Err(
            "redelivery.mode = \"blocking\" (RabbitMQ's queue redelivers a NACKed message; \
             no client holds it)"
                .into(),
        );
    }
    if r.initial_delay.micros() != 0 {
        return Err(format!(
            "redelivery.initial_delay = {} (RabbitMQ redelivers at once: 0s only)",
            r.initial_delay
        ));
    }
    match (queue_type(sc), r.limit) {
        (_, Limit::Deliveries(1)) => Ok(LiveRedelivery::Nack),
        (_, Limit::Unlimited) => Ok(LiveRedelivery::Requeue(None)),
        (QueueType::Quorum, Limit::Deliveries(n)) => Ok(LiveRedelivery::Requeue(Some(n - 1))),
        (QueueType::Classic, Limit::Deliveries(n)) => Err(format!(
            "redelivery.max_redeliveries = {} (a classic queue has no delivery limit: 0, \
             a NACK without requeue, or unlimited)",
            n - 1
        )),
    }
}

/// What the run declares for `strategy`.
pub fn topology(sc: &Scenario, strategy: LiveStrategy) -> Topology {
    let params = sc.strategy.get("rabbitmq_hash");
    let int = |k: &str, d: u32| {
        params
            .and_then(|t| t.get(k))
            .and_then(|v| v.as_integer())
            .map_or(d, |v| v.max(1) as u32)
    };
    let hash = strategy == LiveStrategy::RabbitmqHash;
    let dead_letter = super::has_poison(sc)
        && sc
            .brokers
            .first()
            .is_some_and(|b| sc.redelivery_policy().dead_letter(b) == DeadLetter::Queue);
    Topology {
        queue_type: queue_type(sc),
        sac: strategy != LiveStrategy::Competing,
        hash_queues: if hash { int("queues", 1) } else { 0 },
        weight: int("weight", 1),
        delivery_limit: delivery_limit(sc),
        dead_letter,
        durable: sc.brokers.first().is_none_or(|b| b.persistent),
    }
}

/// The live target of `strategy` under the scenario's flavour.
pub fn target(sc: &Scenario, strategy: LiveStrategy) -> Target {
    match broker_of(sc) {
        LiveBroker::ActiveMq => Target::ActiveMq,
        LiveBroker::RabbitMq => Target::Rabbit(topology(sc, strategy)),
    }
}

/// Whether `strategy` can be staged on `broker` (None) or why not.
pub fn strategy_refusal(broker: LiveBroker, strategy: &str) -> Option<String> {
    let s = LiveStrategy::parse(strategy)?;
    match (broker, s) {
        (LiveBroker::ActiveMq, LiveStrategy::RabbitmqSac | LiveStrategy::RabbitmqHash) => {
            Some(format!(
                "strategy {strategy:?} (RabbitMQ's: flavour = \"rabbitmq\" or \"rabbitmq_quorum\")"
            ))
        }
        (LiveBroker::RabbitMq, LiveStrategy::MessageGroups) => Some(format!(
            "strategy {strategy:?} (ActiveMQ's JMSXGroupID; on RabbitMQ: rabbitmq_hash)"
        )),
        _ => None,
    }
}

/// What a RabbitMQ scenario asks that cannot be staged (besides [`crate::staging`]'s rows):
/// several brokers, a non-persistent quorum queue, `[strategy.rabbitmq_hash]` values, and a
/// requeue position the installed server does not have.
pub fn refusals(doc: &toml_edit::DocumentMut, sc: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    if sc.brokers.len() > 1 {
        out.push(format!(
            "[[broker]]: {} brokers (one RabbitMQ node; no federation or shovel is staged)",
            sc.brokers.len()
        ));
    }
    if queue_type(sc) == QueueType::Quorum && sc.brokers.iter().any(|b| !b.persistent) {
        out.push(
            "[[broker]] persistent = false with rabbitmq_quorum (a quorum queue keeps every \
             message on disk)"
                .into(),
        );
    }
    if let Some(t) = sc.strategy.get("rabbitmq_hash") {
        for (k, v) in t {
            let ok = match k.as_str() {
                "queues" | "weight" => true,
                "registration" => v.as_str() == Some("same"),
                _ => false,
            };
            if !ok {
                out.push(format!(
                    "[strategy.rabbitmq_hash] {k} (staged: queues, weight, registration = \"same\")"
                ));
            }
        }
    }
    if let Some(t) = sc.strategy.get("rabbitmq_sac") {
        out.extend(t.keys().map(|k| format!("[strategy.rabbitmq_sac] {k}")));
    }
    out.extend(version_refusal(
        sc,
        &rabbitmq::version().unwrap_or_else(|| "3.10".into()),
    ));
    // A requeue position written in the file must be the installed server's.
    let written = doc
        .get("redelivery")
        .and_then(|r| r.get("requeue"))
        .is_some();
    if written && super::has_poison(sc) {
        let r = sc.redelivery_policy();
        let broker = requeue_on(queue_type(sc), delivery_limit(sc).is_some());
        if r.requeue != broker {
            out.push(format!(
                "redelivery.requeue = {:?} (the installed RabbitMQ puts a NACKed message {:?})",
                r.requeue, broker
            ));
        }
    }
    out
}

/// Where the installed server differs from the model of its release line, one line each (empty
/// when it does not): printed with the run, and in docs/live.md.
pub fn version_notes(sc: &Scenario, strategies: &[String]) -> String {
    if broker_of(sc) != LiveBroker::RabbitMq {
        return String::new();
    }
    let mut out = String::new();
    if strategies.iter().any(|s| s == "rabbitmq_hash") {
        out.push_str(
            "version: which key lands in which queue differs (RabbitMQ hashes with \
             erlang:phash2, the simulator with murmur2): the spread, not the mapping, is compared\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_version_decides_the_requeue_position() {
        assert_eq!(requeue_on(QueueType::Classic, false), Requeue::Original);
        assert_eq!(requeue_on(QueueType::Quorum, true), Requeue::Head);
        assert_eq!(requeue_on(QueueType::Quorum, false), Requeue::Tail);
    }

    fn quorum(broker: &str, consumers: &str) -> Scenario {
        crate::load_text(
            "t.toml",
            &format!(
                "flavour = \"rabbitmq_quorum\"\nstrategies = [\"competing\"]\n[workload]\n\
                 messages = 1\nrate = \"1/s\"\nkeys = 1\n[[broker]]\nname = \"a\"\n{broker}\n\
                 [consumers]\ncount = 1\nservice = \"1ms\"\n{consumers}"
            ),
        )
        .unwrap()
    }

    /// A live run stages only the installed release line: the default (4.3) and any other
    /// version are refused naming the field and the value that stages; a reject only where
    /// the server counts it as STOMP's nack.
    #[test]
    fn only_the_installed_release_line_is_staged() {
        let e = version_refusal(&quorum("", ""), "3.10.8").unwrap();
        assert!(
            e.contains("version = \"4.3\", the default") && e.contains("\"3.10\""),
            "{e}"
        );
        let e = version_refusal(&quorum("version = \"4.2\"", ""), "3.10.8").unwrap();
        assert!(e.starts_with("[[broker]] version = \"4.2\" ("), "{e}");
        assert_eq!(
            version_refusal(&quorum("version = \"3.10\"", ""), "3.10.8"),
            None
        );
        let reject = "return_with = \"reject\"";
        assert_eq!(
            version_refusal(&quorum("version = \"3.10\"", reject), "3.10.8"),
            None
        );
        assert_eq!(version_refusal(&quorum("", ""), "4.3.5"), None);
        let e = version_refusal(&quorum("", reject), "4.3.5").unwrap();
        assert!(e.starts_with("consumers.return_with"), "{e}");
        assert!(version_refusal(&quorum("", ""), "3.7.1")
            .unwrap()
            .contains("no version 3.7"));
    }
}
