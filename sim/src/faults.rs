//! Faults, in one place: the catalogue of kinds (what each does, which `[[fault]]` fields it
//! takes), their validation, and the resolved plan.
//!
//! The scenario file keeps a flat `[[fault]]` table ([`crate::scenario::Fault`]); random faults are
//! expanded, from the seed, into an explicit schedule before the run: the plan, a list of
//! [`PlannedFault`]s whose [`FaultAction`] carries exactly the fields its kind needs. Every
//! strategy of a run faces the same plan; `sim run` prints it; each entry serializes back as a
//! scripted `[[fault]]` so a plan can be written as a standalone scenario. The engine's side (what
//! each action does to the world) is `engine/faults.rs`.
//!
//! Adding a kind: a [`FaultKind`] variant in [`FaultKind::ALL`] with its description
//! ([`FaultKind::spec`]: name, fields, instant or not, whether windows stack, how `sim explore`
//! draws it, whether `sim live` stages it), a [`FaultAction`] variant built in `instance`, and its
//! effect in `engine/faults.rs`: two files.

use crate::dist::{DurDist, DurSpec};
use crate::rng::{stream, Component};
#[cfg(test)]
use crate::scenario::FieldError;
use crate::scenario::{Fault, PathSeg, Scenario};
use crate::time::{Dur, Time};
use rand::Rng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The kinds of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A broker goes down; a persistent store keeps its messages stuck until it returns.
    BrokerCrash,
    /// A consumer process dies; its unacked and prefetched messages are redelivered.
    ConsumerCrash,
    /// A consumer loses its connection; it finishes (applies) what it was doing but cannot ack.
    NetworkBlip,
    /// The target database is unreachable: processing fails and rolls back.
    DbOutage,
    /// A consumer's service time is multiplied by `factor`.
    SlowConsumer,
    /// A producer's clock jumps by `skew` (signed, e.g. "-200ms" written as skew = "200ms", ahead = false).
    ClockSkew,
    /// Messages produced in the window are poison with probability `fraction`.
    Poison,
    /// The source database (read by the notifier) is unreachable.
    SourceOutage,
    /// The cache cluster loses every entry and lock at once (no `for`).
    CacheCollapse,
    /// A consumer process stops for `for` (a GC pause, a frozen VM, a partition) without closing
    /// its connection: the broker notices after `[consumers] failure_detection` and gives its
    /// deliveries to others; the process then resumes and finishes what it had in hand (a zombie
    /// write).
    ConsumerPause,
    /// An operator moves every message in a broker's dead-letter queue (`broker`; absent: every
    /// broker's) back to the tail of its queue (an instant, no `for`): ActiveMQ's console "retry"
    /// or a DLQ redrive, SQS's `StartMessageMoveTask`.
    DlqReplay,
    /// A consumer leaves its group gracefully (it finishes the message in hand, commits and
    /// closes) and joins again after `for`: two membership changes (rebalances), no failure.
    ConsumerLeave,
    /// `count` partitions are added to the topic (an instant): a key-hashing partitioner maps
    /// some keys to new partitions from then on.
    AddPartitions,
    /// A producer's sends (`producer`; absent: every producer's) fail with probability `fraction`
    /// (default 1) during the window, and are retried after its `retry_backoff`: with
    /// `max_in_flight` above 1 and no `idempotence`, later sends may overtake a failed one.
    SendError,
    /// A producer's sends (`producer`; absent: every producer's) are stored but their answer is
    /// lost with probability `fraction` (default 1) during the window (a request timeout): the
    /// producer retries a message the broker already has, which is stored again (a duplicate)
    /// unless the producer is idempotent or the broker's `dedup_window` still remembers it.
    SendTimeout,
    /// An operator resets a broker's message groups (`broker`; absent: every broker's), an
    /// instant: ActiveMQ's JMX `removeAllMessageGroups`, Artemis's `resetAllGroups`. Every group
    /// loses its owner; messages already delivered stay with the old owner.
    ResetGroups,
    /// A member of a distributed destination (`broker`; absent: a random broker each time) is
    /// taken out of its member list for `for` (absent: for good) and added back at the window's
    /// end: routing that hashes over the members (WebLogic Unit-of-Order's hash routing) moves
    /// its units to other members and back. The server stays up.
    MemberLeave,
    /// A producer process dies (`producer`; absent: a random producer each time) and a new
    /// instance starts after `for`: it produces again from its application's last commit
    /// (`[producers] commit_interval`), and, transactional, aborts the open transaction of its
    /// transactional id first (`initTransactions`).
    ProducerCrash,
    /// A producer process stops for `for` (a GC pause, a frozen VM) and then runs on with what
    /// it held: a zombie. With `replaced_after` the application's orchestration starts a new
    /// instance meanwhile; a transactional zombie is fenced by its transactional id's epoch.
    ProducerPause,
    /// One broker of a Kafka cluster (`broker`, `node`) stops fetching as a follower for `for`,
    /// alive: the ISRs it is in wait for it until their leaders drop it
    /// (`replica.lag.time.max.ms`).
    ReplicaStall,
}

/// The optional `[[fault]]` fields whose meaning depends on the kind (`kind`, `at` and `rate`
/// apply to every kind).
pub const KIND_FIELDS: [&str; 10] = [
    "for",
    "broker",
    "consumer",
    "producer",
    "factor",
    "skew",
    "ahead",
    "fraction",
    "count",
    "replaced_after",
];

/// What each `[[fault]]` field means, for the reference in docs/scenarios.md
/// ([`fields_markdown`], which reads the kinds taking each field from [`FaultKind::spec`]).
pub const FIELD_DOCS: [(&str, &str); 13] = [
    ("kind", "required: one of the kinds below"),
    ("at", "scripted: its start time"),
    ("rate", "random: mean occurrences per unit of time during the fault window (at most 1000/s)"),
    ("for", "how long it lasts: a duration, or a duration distribution; absent: never heals"),
    ("broker", "the target broker, by name (`broker_crash`, `member_leave`: absent, a random broker each time; `dlq_replay`, `reset_groups`: absent, every broker)"),
    ("consumer", "the target consumer index, from 0; absent: a random consumer each time"),
    ("producer", "the target producer index, from 0 (`clock_skew`, `producer_crash`, `producer_pause`: absent, a random producer each time; `send_error`, `send_timeout`: absent, every producer)"),
    ("factor", "the service-time multiplier, in (0, 1e6]"),
    ("skew", "the clock's step, a duration"),
    ("ahead", "`true` (the default) steps the clock ahead, `false` back"),
    ("fraction", "a probability in [0, 1]: of a message produced in the window being poison (`poison`), of a send failing (`send_error`, `send_timeout`; default 1)"),
    ("count", "partitions (or hashed queues) added, 1 to 10000"),
    ("replaced_after", "a duration above 0: how long after a `producer_pause` began the application's orchestration starts a new instance of the paused producer (Kafka Streams moving the task once the group drops the paused member); absent: none, the paused instance is the only one"),
];

/// `kind`'s fields, each in backticks, the one it cannot do without marked.
fn fields_cell(spec: &KindSpec) -> String {
    let required = spec.required.map(|(f, _)| f);
    let cells: Vec<String> = spec
        .fields
        .iter()
        .map(|f| {
            if required == Some(*f) {
                format!("`{f}` (required)")
            } else {
                format!("`{f}`")
            }
        })
        .collect();
    if cells.is_empty() {
        "none".into()
    } else {
        cells.join(", ")
    }
}

/// Whether and when a kind takes `for`, in words.
fn for_cell(spec: &KindSpec) -> &'static str {
    if spec.instant {
        "none: an instant"
    } else if spec.required.is_some_and(|(f, _)| f == "for") {
        "required"
    } else if spec.random_needs_duration {
        "optional; required with `rate`"
    } else {
        "optional"
    }
}

/// The kinds' reference table of docs/scenarios.md (`sim list --doc fault-kinds`).
pub fn kinds_markdown() -> String {
    let mut s = String::from(
        "| kind | what happens | its fields | `for` | windows of one target may overlap |\n|---|---|---|---|---|\n",
    );
    for k in FaultKind::ALL {
        let spec = k.spec();
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            spec.name,
            spec.doc,
            fields_cell(&spec),
            for_cell(&spec),
            match (k.may_overlap(), spec.overlap_exception) {
                (true, _) => "yes".to_string(),
                (false, Some(except)) => format!("no; {except}"),
                (false, None) => "no".to_string(),
            }
        ));
    }
    s
}

/// The `[[fault]]` fields' reference table of docs/scenarios.md (`sim list --doc fault-fields`):
/// each field's meaning and the kinds that take it.
pub fn fields_markdown() -> String {
    let mut s = String::from("| field | meaning | kinds that take it |\n|---|---|---|\n");
    for (field, meaning) in FIELD_DOCS {
        let kinds: Vec<String> = if KIND_FIELDS.contains(&field) {
            FaultKind::ALL
                .iter()
                .filter(|k| k.takes(field))
                .map(|k| format!("`{}`", k.name()))
                .collect()
        } else {
            vec!["every kind".into()]
        };
        s.push_str(&format!(
            "| `{field}` | {meaning} | {} |\n",
            kinds.join(", ")
        ));
    }
    s
}

/// Everything the program knows about one kind of fault, in one place: validation, the fault
/// plan, `sim list`, `sim explore`, `sim live` and docs/scenarios.md read it from here
/// ([`FaultKind::spec`], an exhaustive match: a new kind does not compile until it is described).
#[derive(Clone, Copy, Debug)]
pub struct KindSpec {
    /// Its name as written in scenario files.
    pub name: &'static str,
    /// One line for `sim list`.
    pub summary: &'static str,
    /// What it does in full, for the reference in docs/scenarios.md ([`kinds_markdown`]).
    pub doc: &'static str,
    /// The optional `[[fault]]` fields it takes besides `for` (a subset of [`KIND_FIELDS`]).
    pub fields: &'static [&'static str],
    /// The field it cannot do without, with an example.
    pub required: Option<(&'static str, &'static str)>,
    /// An instant: it takes no `for` and has no window, so two of them never overlap.
    pub instant: bool,
    /// Windows of this kind on one target may overlap: their effects add up (two clock steps,
    /// two poison or send-failure probabilities in force), where two crashes of one node could
    /// not both happen.
    pub windows_stack: bool,
    /// Random occurrences need a `for`: without one the first occurrence would never heal and
    /// the later ones would pile onto it. A clock step or a leave may stay for good.
    pub random_needs_duration: bool,
    /// Fills the parameters a fault drawn by `sim explore` needs when the scenario has no entry
    /// of this kind to copy (a kind whose `required` field it leaves unset is drawn only from
    /// the scenario's own entries).
    pub explore_default: fn(&mut Fault),
    /// `sim live` stages it on a real broker (else it refuses a scenario that has it).
    pub live: bool,
    /// Where windows that may not overlap in general may overlap after all, and why (a rule
    /// that depends on the scenario, which validation applies).
    pub overlap_exception: Option<&'static str>,
}

fn no_default(_: &mut Fault) {}

impl FaultKind {
    /// Every kind, in the order `sim list`, validation messages and `sim explore` use.
    pub const ALL: [FaultKind; 20] = [
        FaultKind::BrokerCrash,
        FaultKind::ConsumerCrash,
        FaultKind::NetworkBlip,
        FaultKind::DbOutage,
        FaultKind::SlowConsumer,
        FaultKind::ClockSkew,
        FaultKind::Poison,
        FaultKind::SourceOutage,
        FaultKind::CacheCollapse,
        FaultKind::ConsumerPause,
        FaultKind::DlqReplay,
        FaultKind::ConsumerLeave,
        FaultKind::AddPartitions,
        FaultKind::SendError,
        FaultKind::SendTimeout,
        FaultKind::ResetGroups,
        FaultKind::MemberLeave,
        FaultKind::ProducerCrash,
        FaultKind::ProducerPause,
        FaultKind::ReplicaStall,
    ];

    /// Its description.
    pub const fn spec(self) -> KindSpec {
        // A window on a node: two of one kind on one node cannot both be in force.
        const NODE: KindSpec = KindSpec {
            name: "",
            summary: "",
            doc: "",
            fields: &[],
            required: None,
            instant: false,
            windows_stack: false,
            random_needs_duration: true,
            explore_default: no_default,
            live: false,
            overlap_exception: None,
        };
        match self {
            FaultKind::BrokerCrash => KindSpec {
                name: "broker_crash",
                doc: "a broker goes down; a persistent store keeps its messages stuck until it returns; producers and consumers fail over",
                summary: "a broker goes down; a persistent store keeps its messages stuck until it returns, producers and consumers fail over",
                fields: &["broker"],
                live: true,
                overlap_exception: Some(
                    "yes on a broker whose partitions have followers (`[broker.replication]` \
                     `replication_factor` above 1): each crash takes down the leader of the moment",
                ),
                ..NODE
            },
            FaultKind::ConsumerCrash => KindSpec {
                name: "consumer_crash",
                doc: "a consumer process dies with the message in hand; its unacked and prefetched messages are redelivered (marked redelivered) at the front of the queue",
                summary: "a consumer process dies; its unacked and prefetched messages are redelivered (marked redelivered)",
                fields: &["consumer"],
                live: true,
                ..NODE
            },
            FaultKind::NetworkBlip => KindSpec {
                name: "network_blip",
                doc: "a consumer loses its connection: it still applies the message in hand, but its ack is lost (a duplicate); its unacked and prefetched messages go back",
                summary: "a consumer loses its connection: it still applies the message in hand but its ack is lost (duplicate)",
                fields: &["consumer"],
                ..NODE
            },
            FaultKind::DbOutage => KindSpec {
                name: "db_outage",
                doc: "the target database is down: processing fails, rolls back, and is redelivered",
                summary: "the target database is down: processing fails, rolls back, and is redelivered",
                ..NODE
            },
            FaultKind::SlowConsumer => KindSpec {
                name: "slow_consumer",
                doc: "a consumer's service time is multiplied by `factor` (in (0, 1e6])",
                summary: "a consumer's service time is multiplied by `factor`",
                fields: &["consumer", "factor"],
                required: Some(("factor", "e.g. 10.0")),
                explore_default: |f| f.factor = Some(10.0),
                ..NODE
            },
            FaultKind::ClockSkew => KindSpec {
                name: "clock_skew",
                doc: "a producer's clock steps by `skew`; `ahead = false` steps it back (default `true`)",
                summary: "a producer's clock steps by `skew` (`ahead = false` steps it back)",
                fields: &["producer", "skew", "ahead"],
                required: Some(("skew", "e.g. \"200ms\"")),
                windows_stack: true,
                random_needs_duration: false,
                explore_default: |f| f.skew = Some(Dur::from_secs(1)),
                ..NODE
            },
            FaultKind::Poison => KindSpec {
                name: "poison",
                doc: "messages produced in the window are poison (processing always fails) with probability `fraction`",
                summary: "messages produced in the window are poison with probability `fraction` (processing always fails)",
                fields: &["fraction"],
                required: Some(("fraction", "in [0, 1]")),
                windows_stack: true,
                explore_default: |f| f.fraction = Some(0.05),
                live: true,
                ..NODE
            },
            FaultKind::SourceOutage => KindSpec {
                name: "source_outage",
                doc: "the source database (read by the notifier) is unreachable: reads fail and roll back",
                summary: "the source database (read by the notifier) is unreachable: reads fail and roll back",
                ..NODE
            },
            FaultKind::CacheCollapse => KindSpec {
                name: "cache_collapse",
                doc: "the cache cluster (of `cache_pessimistic`) loses every entry and lock at once",
                summary: "the cache cluster loses every entry and lock at once (an instant: no `for`)",
                instant: true,
                random_needs_duration: false,
                ..NODE
            },
            FaultKind::ConsumerPause => KindSpec {
                name: "consumer_pause",
                doc: "a consumer's process stops for `for` (a GC pause, a frozen VM) with its connection open: nothing happens until `[consumers] failure_detection` has passed, then the broker redelivers its messages to the others; when the process resumes it finishes the message it had in hand and writes it, after its work was given away (a zombie write: duplicate, and out of order if newer messages were applied meanwhile). A pause shorter than the detection only delays",
                summary: "a consumer stops (GC pause, frozen VM) with its connection open: after [consumers] failure_detection the broker redelivers its messages; it then resumes and writes what it had in hand (a zombie)",
                fields: &["consumer"],
                // A process paused for good never writes again: that is a crash, not a pause.
                required: Some(("for", "e.g. \"45s\"; a pause for good is a consumer_crash")),
                ..NODE
            },
            FaultKind::DlqReplay => KindSpec {
                name: "dlq_replay",
                doc: "an operator moves every message of a broker's dead-letter queue back to the tail of its queue, oldest first (ActiveMQ's console retry, SQS's DLQ redrive `StartMessageMoveTask`); each is new to the broker (delivery count from 1), a poison one still poison. A replayed message counts once, by its last outcome (applied, dead-lettered again, ...); applied after newer messages of its key it is an ordering violation. A broker that is down is skipped",
                summary: "an operator moves the dead-letter queue's messages back to the tail of their queue (`broker`, absent: every broker; an instant: no `for`)",
                fields: &["broker"],
                instant: true,
                random_needs_duration: false,
                ..NODE
            },
            FaultKind::ConsumerLeave => KindSpec {
                name: "consumer_leave",
                doc: "a consumer leaves its group gracefully: it finishes the message in hand, commits what it processed and disconnects (what it had received and not started goes back); it joins again after `for` (absent: for good). Both are membership changes: a strategy that assigns partitions (`kafka`) rebalances. A static member (`restart_takes_over = true` with `crash_detection = \"timeout\"`: Kafka's `group.instance.id`) sends no LeaveGroup: its session is held, its partitions wait, and only `failure_detection` after it left does its group drop it",
                summary: "a consumer leaves its group gracefully (finishes the message in hand, commits, closes) and joins again after `for` (absent: for good): a membership change, not a failure",
                fields: &["consumer"],
                random_needs_duration: false,
                ..NODE
            },
            FaultKind::AddPartitions => KindSpec {
                name: "add_partitions",
                doc: "`count` partitions are added to the topic. Under `kafka` each producer's partitioner maps some keys to new partitions from its next metadata refresh (`[producers] metadata_max_age`, 5 min, each producer on its own cycle), while their earlier records wait in the old ones [K4][K20]; the group rebalances onto the new partitions at its leader's refresh (`[consumers] metadata_max_age`) [K22], and a new partition's first owner starts at `[consumers] auto_offset_reset`: under `latest` (Kafka's default) the records written to it before are skipped, counted lost [K21]. `rabbitmq_hash` binds `count` more queues to its exchange at once (at most 1000 in all) [B4]",
                summary: "`count` partitions are added to the topic (an instant): strategies that hash keys to partitions (`kafka`) remap some keys",
                fields: &["count"],
                required: Some(("count", "e.g. 6")),
                instant: true,
                random_needs_duration: false,
                ..NODE
            },
            FaultKind::SendError => KindSpec {
                name: "send_error",
                doc: "during the window each send, and each retry, of the producer fails with probability `fraction` (default 1; several faults in force on a producer: the highest). The broker did not store it: a `send_fail` event, retried after `[producers] retry_backoff`; later sends wait behind it or overtake it by `max_in_flight` and `idempotence` (see `[producers]`). Draws come from the producer's own seeded stream",
                summary: "a producer's sends fail with probability `fraction` (default 1) and are retried after [producers] retry_backoff (`producer`, absent: every producer); with max_in_flight > 1 and no idempotence up to max_in_flight - 1 later sends overtake a failed one",
                fields: &["producer", "fraction"],
                windows_stack: true,
                ..NODE
            },
            FaultKind::SendTimeout => KindSpec {
                name: "send_timeout",
                doc: "during the window each send, and each resend, of the producer is stored by the broker but its answer is lost with probability `fraction` (default 1): a request timeout after the write. The producer sees a failure (`send_fail`) and resends after `[producers] retry_backoff`, as after a `send_error`; the broker refuses the resend when the producer is idempotent or the message is inside its `dedup_window` (a `resend` event, `deduplicated`), and otherwise stores it again as a new message with the same key and seq (a `resend` event naming the copy: a duplicate, perhaps behind newer messages). A `send_error` and a `send_timeout` in force together share one draw: below the `send_error`'s fraction the send is lost, else below the larger fraction it is stored with its answer lost",
                summary: "a producer's sends are stored but their answer is lost with probability `fraction` (default 1): the producer retries after [producers] retry_backoff and the broker stores the message again (a duplicate), unless [producers] idempotence is on or the broker's dedup_window still remembers it",
                fields: &["producer", "fraction"],
                windows_stack: true,
                ..NODE
            },
            FaultKind::ResetGroups => KindSpec {
                name: "reset_groups",
                doc: "an operator resets the message groups of a broker's queue (`broker`; absent: every broker): every group loses its owner and its next message is assigned afresh, as to a new group (ActiveMQ's JMX `removeAllMessageGroups`, `MessageGroupMap.removeAll`; Artemis's `resetAllGroups`, `QueueImpl.groups.removeAll()` [A17]). Nothing is recalled: messages already dispatched or prefetched stay with the old owner, so a new owner may apply a group's next message while the old one still holds earlier ones (a `reassign` event when the owner changes). Only grouping strategies keep such a map (`message_groups`, `artemis_groups`; Artemis's `group-rebalance-pause-dispatch` guards a consumer's arrival, not this reset); the others ignore it. A broker that is down is skipped",
                summary: "an operator resets a broker's message groups (`broker`, absent: every broker; an instant: no `for`): each group's next message gets a new owner while the old one keeps what it was sent (`message_groups`, `artemis_groups`)",
                fields: &["broker"],
                instant: true,
                random_needs_duration: false,
                ..NODE
            },
            FaultKind::MemberLeave => KindSpec {
                name: "member_leave",
                doc: "a member of a distributed destination (`broker`; absent: a random broker each time) is removed from its member list, its server staying up, and added back after `for` (absent: for good): WebLogic's uniform distributed queue, whose members follow its targeting. `unit_of_order`'s hash routing hashes each unit over the members in the list, so the leaving member's units go to other members from the next send, while their earlier messages are still on it; the re-add moves them back [W2][W5]. Each member keeps its own units' state, so a unit split over two members may be delivered out of order. The Path Service's map keeps a unit's recorded member: its sends fail while that member is out (and are retried), new units are load-balanced over the members in the list. Nothing else routes by member: the other strategies ignore it",
                summary: "a member leaves a distributed destination's member list (its server stays up) and is added back after `for`: `unit_of_order`'s hash routing moves its units away and back",
                fields: &["broker"],
                ..NODE
            },
            FaultKind::ProducerCrash => KindSpec {
                name: "producer_crash",
                doc: "a producer process dies (`producer`; absent: a random producer each time): what it had not sent waits, with what the application produces meanwhile, and a new instance starts after `for` (absent: never). The application produces again from its last commit (`[producers] commit_interval`): every record it wrote since is written again, a new record with the same key and seq (a `resend` event naming the copy: a duplicate for whoever read the first). A transactional producer's new instance first aborts the open transaction of its transactional id (`initTransactions` bumps the epoch [K39]; also aborted by the coordinator once open `transaction.timeout.ms`, 60s): a `read_committed` consumer never reads its records (each a `discard`, reason `aborted`, its copy read once), a `read_uncommitted` one has read them or will (duplicates). Transactions are Kafka's; under the other flavours the application commits every 100ms (`commit_interval` is a Kafka setting)",
                summary: "a producer process dies and a new one starts after `for`, producing again from its last commit ([producers] commit_interval); transactional, it aborts the open transaction first (read_committed consumers never see it)",
                fields: &["producer"],
                ..NODE
            },
            FaultKind::ProducerPause => KindSpec {
                name: "producer_pause",
                doc: "a producer process stops for `for` (`producer`; absent: a random producer each time): a GC pause, a frozen VM. Nothing it holds moves: its waiting, batched and failed sends stay with it, unsent, and what the application produces meanwhile waits; when it wakes it sends what it held, then the rest. With `replaced_after` (shorter than `for`) the application's orchestration starts a new instance of it after that long (Kafka Streams moves the task once the group has dropped the paused member): as after a `producer_crash`, it produces again from the last commit (`[producers] commit_interval`), every record written since and every record the paused one holds written again as a copy (a `resend` event), and a transactional one first aborts its transactional id's open transaction, bumping the epoch [K40]. The paused instance is then a zombie. Transactional (`[producers] transactional`), its late writes are refused by the epoch: the partition leader's `InvalidProducerEpochException` and the coordinator's `PRODUCER_FENCED`, fatal for the client, which must close [K42][K43] (each a `discard`, reason `fenced`, its copy written once); also without a replacement when the pause outlasted `transaction.timeout.ms` (60s: the coordinator aborted the transaction with an epoch bump [K41]): then the application starts a new instance at once, as after a crash. Without transactions (idempotence or none: the new instance is a new producer id) its late writes are written: duplicates of the replacement's copies, behind newer records (ordering violations). A paused producer resumes under any flavour",
                summary: "a producer process stops (GC pause, frozen VM) for `for` and then sends what it held; with `replaced_after` a new instance takes over meanwhile from the last commit, and the zombie's late writes are fenced (transactional: refused by the epoch) or written (duplicates, out of order)",
                fields: &["producer", "replaced_after"],
                // A process paused for good never writes again: that is a crash, not a pause.
                required: Some(("for", "e.g. \"90s\"; a pause for good is a producer_crash")),
                ..NODE
            },
            FaultKind::ReplicaStall => KindSpec {
                name: "replica_stall",
                doc: "one broker of a Kafka cluster (`broker` with `[broker.replication] brokers`, and `node`) stops fetching as a follower for `for`, alive (a long pause, a slow disk, a partition between brokers): the ISRs it is in wait for it, so their high watermarks stop (nothing new readable; under `acks=all` nothing acknowledged), until each leader's ISR check drops it, the first check (every `replica_lag_time_max` / 2 from the start) more than `replica_lag_time_max` (30s) after its last fetch (`Partition.maybeShrinkIsr`); then they go on with fewer, or, below `min_insync_replicas`, refuse `acks=all` writes (retried until `delivery_timeout`). The partitions it leads go on. Back, it catches up and rejoins the ISRs [K48]",
                summary: "a Kafka cluster's broker stops fetching as a follower for `for`: the ISRs wait for it until replica_lag_time_max (30s) drops it",
                fields: &["broker"],
                ..NODE
            },
        }
    }

    /// Its name as written in scenario files.
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether this kind takes the `[[fault]]` field `field` (one of [`KIND_FIELDS`]).
    pub fn takes(self, field: &str) -> bool {
        let spec = self.spec();
        if field == "for" {
            !spec.instant
        } else {
            spec.fields.contains(&field)
        }
    }

    /// Whether the kind is an instant (no `for`).
    pub const fn is_instant(self) -> bool {
        self.spec().instant
    }

    /// Whether two scripted faults of this kind on one target may overlap in time (an instant
    /// has no window; stacking windows add their effects up).
    pub const fn may_overlap(self) -> bool {
        let spec = self.spec();
        spec.instant || spec.windows_stack
    }
}

/// What one planned fault does, with exactly the fields its kind needs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultAction {
    /// Broker `broker` (an index) goes down.
    BrokerCrash {
        /// Broker index.
        broker: u16,
        /// Which of its Kafka cluster's brokers (`[broker.replication] brokers`).
        #[serde(skip_serializing_if = "Option::is_none")]
        node: Option<u16>,
    },
    /// Consumer process `consumer` dies.
    ConsumerCrash {
        /// Consumer index.
        consumer: u32,
    },
    /// Consumer `consumer` loses its connection.
    NetworkBlip {
        /// Consumer index.
        consumer: u32,
    },
    /// Consumer `consumer`'s process stops, its connection open.
    ConsumerPause {
        /// Consumer index.
        consumer: u32,
    },
    /// The target database is unreachable.
    DbOutage,
    /// Consumer `consumer` works `factor` times slower.
    SlowConsumer {
        /// Consumer index.
        consumer: u32,
        /// Service-time multiplier, > 0.
        factor: f64,
    },
    /// Producer `producer`'s clock steps by `skew` microseconds (signed).
    ClockSkew {
        /// Producer index.
        producer: u32,
        /// Signed step, microseconds.
        skew: i64,
    },
    /// Messages produced meanwhile are poison with probability `fraction`.
    Poison {
        /// Probability in [0, 1].
        fraction: f64,
    },
    /// The source database is unreachable.
    SourceOutage,
    /// The cache cluster loses everything (an instant).
    CacheCollapse,
    /// The dead-letter queue of broker `broker` (None: of every broker) is moved back to its
    /// queue's tail (an instant).
    DlqReplay {
        /// Broker index, or every broker.
        broker: Option<u16>,
    },
    /// Consumer `consumer` leaves its group gracefully (and joins again at the fault's end).
    ConsumerLeave {
        /// Consumer index.
        consumer: u32,
    },
    /// `count` partitions are added (an instant).
    AddPartitions {
        /// How many, at least 1.
        count: u32,
    },
    /// Sends of producer `producer` (None: of every producer) fail with probability `fraction`.
    SendError {
        /// Producer index, or every producer.
        producer: Option<u32>,
        /// Probability in [0, 1].
        fraction: f64,
    },
    /// Sends of producer `producer` (None: of every producer) are stored but answered as failed
    /// with probability `fraction`.
    SendTimeout {
        /// Producer index, or every producer.
        producer: Option<u32>,
        /// Probability in [0, 1].
        fraction: f64,
    },
    /// The message groups of broker `broker` (None: of every broker) lose their owners (an
    /// instant).
    ResetGroups {
        /// Broker index, or every broker.
        broker: Option<u16>,
    },
    /// Broker `broker` leaves the distributed destination's member list (and is added back at
    /// the fault's end).
    MemberLeave {
        /// Broker index.
        broker: u16,
    },
    /// Producer `producer` dies (and a new instance starts at the fault's end).
    ProducerCrash {
        /// Producer index.
        producer: u32,
    },
    /// Producer `producer`'s process stops (and runs on at the fault's end, a zombie if a new
    /// instance started `replaced_after` into the pause).
    ProducerPause {
        /// Producer index.
        producer: u32,
        /// When a new instance starts, after the pause began (microseconds); None: never.
        replaced_after: Option<Time>,
    },
    /// Broker `node` of broker `broker`'s Kafka cluster stops fetching (and fetches again at
    /// the fault's end).
    ReplicaStall {
        /// Broker index.
        broker: u16,
        /// The cluster's broker.
        node: u16,
    },
}

impl FaultAction {
    /// Its kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            FaultAction::BrokerCrash { .. } => FaultKind::BrokerCrash,
            FaultAction::ConsumerCrash { .. } => FaultKind::ConsumerCrash,
            FaultAction::NetworkBlip { .. } => FaultKind::NetworkBlip,
            FaultAction::ConsumerPause { .. } => FaultKind::ConsumerPause,
            FaultAction::DbOutage => FaultKind::DbOutage,
            FaultAction::SlowConsumer { .. } => FaultKind::SlowConsumer,
            FaultAction::ClockSkew { .. } => FaultKind::ClockSkew,
            FaultAction::Poison { .. } => FaultKind::Poison,
            FaultAction::SourceOutage => FaultKind::SourceOutage,
            FaultAction::CacheCollapse => FaultKind::CacheCollapse,
            FaultAction::DlqReplay { .. } => FaultKind::DlqReplay,
            FaultAction::ConsumerLeave { .. } => FaultKind::ConsumerLeave,
            FaultAction::AddPartitions { .. } => FaultKind::AddPartitions,
            FaultAction::SendError { .. } => FaultKind::SendError,
            FaultAction::SendTimeout { .. } => FaultKind::SendTimeout,
            FaultAction::ResetGroups { .. } => FaultKind::ResetGroups,
            FaultAction::MemberLeave { .. } => FaultKind::MemberLeave,
            FaultAction::ProducerCrash { .. } => FaultKind::ProducerCrash,
            FaultAction::ProducerPause { .. } => FaultKind::ProducerPause,
            FaultAction::ReplicaStall { .. } => FaultKind::ReplicaStall,
        }
    }

    /// The one node it acts on, if it names one (a broker, consumer or producer); None for the
    /// faults of resources, of every producer, or of every broker.
    pub fn node(&self) -> Option<crate::history::Node> {
        use crate::history::Node;
        match *self {
            FaultAction::BrokerCrash { broker, .. }
            | FaultAction::ReplicaStall { broker, .. }
            | FaultAction::MemberLeave { broker }
            | FaultAction::DlqReplay {
                broker: Some(broker),
            }
            | FaultAction::ResetGroups {
                broker: Some(broker),
            } => Some(Node::Broker(broker)),
            FaultAction::ConsumerCrash { consumer }
            | FaultAction::NetworkBlip { consumer }
            | FaultAction::ConsumerPause { consumer }
            | FaultAction::ConsumerLeave { consumer }
            | FaultAction::SlowConsumer { consumer, .. } => Some(Node::Consumer(consumer)),
            FaultAction::ClockSkew { producer, .. }
            | FaultAction::ProducerCrash { producer }
            | FaultAction::ProducerPause { producer, .. }
            | FaultAction::SendError {
                producer: Some(producer),
                ..
            }
            | FaultAction::SendTimeout {
                producer: Some(producer),
                ..
            } => Some(Node::Producer(producer)),
            _ => None,
        }
    }
}

/// One fault occurrence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedFault {
    /// Start, microseconds.
    pub at: Time,
    /// Length (None: an instant, or never heals by itself).
    pub duration: Option<Time>,
    /// What it does.
    pub action: FaultAction,
    /// Index of the `[[fault]]` entry it came from.
    pub source: usize,
}

/// All fault occurrences of a run, by start time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultPlan {
    /// The occurrences, sorted by (at, source).
    pub faults: Vec<PlannedFault>,
}

/// Safety bound: a random fault entry may expand to at most this many occurrences.
pub const MAX_OCCURRENCES: usize = 1_000_000;

impl FaultPlan {
    /// Expands the scenario's faults with `seed`. Each `[[fault]]` entry draws from its own stream,
    /// so editing one entry does not move the others.
    pub fn resolve(s: &Scenario, seed: u64) -> FaultPlan {
        let window = s.fault_window_micros();
        let mut faults = Vec::new();
        for (i, f) in s.faults.iter().enumerate() {
            let mut rng = stream(seed, Component::Faults, i as u32, 0);
            if let Some(at) = f.at {
                faults.push(instance(s, f, i, at.0, &mut rng));
            } else if let Some(rate) = f.rate {
                let exp = Exp::new(rate.as_per_sec() / 1e6).expect("validated rate > 0");
                let mut t = 0f64;
                for _ in 0..MAX_OCCURRENCES {
                    t += exp.sample(&mut rng);
                    if t >= window as f64 {
                        break;
                    }
                    faults.push(instance(s, f, i, t as Time, &mut rng));
                }
            }
        }
        faults.sort_by_key(|f| (f.at, f.source));
        FaultPlan { faults }
    }

    /// The plan as scripted `[[fault]]` entries (for writing a plan back as a scenario).
    pub fn as_scripted(&self, s: &Scenario) -> Vec<Fault> {
        self.faults
            .iter()
            .map(|p| {
                let mut f = Fault {
                    at: Some(Dur(p.at)),
                    duration: p
                        .duration
                        .map(|d| DurSpec(DurDist::Constant { value: Dur(d) })),
                    ..Fault::of(p.action.kind())
                };
                match p.action {
                    FaultAction::BrokerCrash { broker, node } => {
                        f.broker = Some(s.brokers[broker as usize].name.clone());
                        f.node = node.map(u32::from);
                    }
                    FaultAction::MemberLeave { broker } => {
                        f.broker = Some(s.brokers[broker as usize].name.clone())
                    }
                    FaultAction::ReplicaStall { broker, node } => {
                        f.broker = Some(s.brokers[broker as usize].name.clone());
                        f.node = Some(u32::from(node));
                    }
                    FaultAction::ConsumerCrash { consumer }
                    | FaultAction::NetworkBlip { consumer }
                    | FaultAction::ConsumerPause { consumer }
                    | FaultAction::ConsumerLeave { consumer } => f.consumer = Some(consumer),
                    FaultAction::AddPartitions { count } => f.count = Some(count),
                    FaultAction::ProducerCrash { producer } => f.producer = Some(producer),
                    FaultAction::ProducerPause {
                        producer,
                        replaced_after,
                    } => {
                        f.producer = Some(producer);
                        f.replaced_after = replaced_after.map(Dur);
                    }
                    FaultAction::SlowConsumer { consumer, factor } => {
                        f.consumer = Some(consumer);
                        f.factor = Some(factor);
                    }
                    FaultAction::ClockSkew { producer, skew } => {
                        f.producer = Some(producer);
                        f.skew = Some(Dur(skew.unsigned_abs()));
                        f.ahead = Some(skew >= 0);
                    }
                    FaultAction::Poison { fraction } => f.fraction = Some(fraction),
                    FaultAction::DlqReplay { broker } | FaultAction::ResetGroups { broker } => {
                        f.broker = broker.map(|b| s.brokers[b as usize].name.clone())
                    }
                    FaultAction::SendError { producer, fraction }
                    | FaultAction::SendTimeout { producer, fraction } => {
                        f.producer = producer;
                        f.fraction = Some(fraction);
                    }
                    FaultAction::DbOutage
                    | FaultAction::SourceOutage
                    | FaultAction::CacheCollapse => {}
                }
                f
            })
            .collect()
    }

    /// Human-readable lines, one per occurrence.
    pub fn describe(&self, s: &Scenario) -> Vec<String> {
        self.faults.iter().map(|p| p.describe(s)).collect()
    }
}

fn instance<R: Rng>(s: &Scenario, f: &Fault, source: usize, at: Time, rng: &mut R) -> PlannedFault {
    // Draw order is fixed: duration, then target.
    let duration = f.duration.as_ref().map(|d| d.0.sampler().sample(rng));
    let consumer = |rng: &mut R| {
        f.consumer
            .unwrap_or_else(|| rng.random_range(0..s.consumers.count))
    };
    let broker = |rng: &mut R| match &f.broker {
        Some(n) => s.broker_index(n).expect("validated broker name") as u16,
        None => rng.random_range(0..s.brokers.len()) as u16,
    };
    let action = match f.kind {
        FaultKind::BrokerCrash => FaultAction::BrokerCrash {
            broker: broker(rng),
            node: f.node.map(|n| n as u16),
        },
        FaultKind::MemberLeave => FaultAction::MemberLeave {
            broker: broker(rng),
        },
        FaultKind::ConsumerCrash => FaultAction::ConsumerCrash {
            consumer: consumer(rng),
        },
        FaultKind::NetworkBlip => FaultAction::NetworkBlip {
            consumer: consumer(rng),
        },
        FaultKind::ConsumerPause => FaultAction::ConsumerPause {
            consumer: consumer(rng),
        },
        FaultKind::ConsumerLeave => FaultAction::ConsumerLeave {
            consumer: consumer(rng),
        },
        FaultKind::AddPartitions => FaultAction::AddPartitions {
            count: f.count.expect("validated: add_partitions has a count"),
        },
        FaultKind::SlowConsumer => FaultAction::SlowConsumer {
            consumer: consumer(rng),
            factor: f.factor.expect("validated: slow_consumer has a factor"),
        },
        FaultKind::ClockSkew => {
            let producer = f
                .producer
                .unwrap_or_else(|| rng.random_range(0..s.producers.count));
            let skew = f.skew.map_or(0, |d| d.0.min(i64::MAX as u64) as i64);
            FaultAction::ClockSkew {
                producer,
                skew: if f.ahead.unwrap_or(true) { skew } else { -skew },
            }
        }
        FaultKind::Poison => FaultAction::Poison {
            fraction: f.fraction.expect("validated: poison has a fraction"),
        },
        FaultKind::ReplicaStall => FaultAction::ReplicaStall {
            broker: broker(rng),
            node: f.node.unwrap_or(0) as u16,
        },
        FaultKind::ProducerCrash => FaultAction::ProducerCrash {
            producer: f
                .producer
                .unwrap_or_else(|| rng.random_range(0..s.producers.count)),
        },
        FaultKind::ProducerPause => FaultAction::ProducerPause {
            producer: f
                .producer
                .unwrap_or_else(|| rng.random_range(0..s.producers.count)),
            replaced_after: f.replaced_after.map(|d| d.0),
        },
        FaultKind::DbOutage => FaultAction::DbOutage,
        FaultKind::SourceOutage => FaultAction::SourceOutage,
        FaultKind::CacheCollapse => FaultAction::CacheCollapse,
        FaultKind::DlqReplay => FaultAction::DlqReplay {
            broker: f
                .broker
                .as_ref()
                .map(|n| s.broker_index(n).expect("validated broker name") as u16),
        },
        FaultKind::ResetGroups => FaultAction::ResetGroups {
            broker: f
                .broker
                .as_ref()
                .map(|n| s.broker_index(n).expect("validated broker name") as u16),
        },
        // No draw: absent `producer` means every producer, not a random one.
        FaultKind::SendError => FaultAction::SendError {
            producer: f.producer,
            fraction: f.fraction.unwrap_or(1.0),
        },
        FaultKind::SendTimeout => FaultAction::SendTimeout {
            producer: f.producer,
            fraction: f.fraction.unwrap_or(1.0),
        },
    };
    PlannedFault {
        at,
        duration,
        action,
        source,
    }
}

impl PlannedFault {
    /// One line: `t=10s broker_crash broker a for 30s`, times rounded for reading
    /// ([`Dur::readable`]; the plan itself keeps microseconds).
    pub fn describe(&self, s: &Scenario) -> String {
        let mut line = format!(
            "t={} {}",
            Dur(self.at).readable(),
            self.action.kind().name()
        );
        match self.action {
            FaultAction::BrokerCrash { broker, node } => {
                line.push_str(&format!(" broker {}", s.brokers[broker as usize].name));
                if let Some(n) = node {
                    line.push_str(&format!(" node {n}"));
                }
            }
            FaultAction::MemberLeave { broker } => {
                line.push_str(&format!(" broker {}", s.brokers[broker as usize].name))
            }
            FaultAction::ReplicaStall { broker, node } => line.push_str(&format!(
                " broker {} node {node}",
                s.brokers[broker as usize].name
            )),
            FaultAction::ConsumerCrash { consumer }
            | FaultAction::NetworkBlip { consumer }
            | FaultAction::ConsumerPause { consumer }
            | FaultAction::ConsumerLeave { consumer } => {
                line.push_str(&format!(" consumer {consumer}"))
            }
            FaultAction::AddPartitions { count } => line.push_str(&format!(" count {count}")),
            FaultAction::ProducerCrash { producer } => {
                line.push_str(&format!(" producer {producer}"))
            }
            FaultAction::ProducerPause {
                producer,
                replaced_after,
            } => {
                line.push_str(&format!(" producer {producer}"));
                if let Some(r) = replaced_after {
                    line.push_str(&format!(" replaced after {}", Dur(r).readable()));
                }
            }
            FaultAction::SlowConsumer { consumer, factor } => {
                line.push_str(&format!(" consumer {consumer} x{factor}"))
            }
            FaultAction::ClockSkew { producer, skew } => line.push_str(&format!(
                " producer {producer} {}{}",
                if skew < 0 { "-" } else { "+" },
                Dur(skew.unsigned_abs()).readable()
            )),
            FaultAction::Poison { fraction } => line.push_str(&format!(" fraction {fraction}")),
            FaultAction::DlqReplay { broker } | FaultAction::ResetGroups { broker } => match broker
            {
                Some(b) => line.push_str(&format!(" broker {}", s.brokers[b as usize].name)),
                None => line.push_str(" every broker"),
            },
            FaultAction::SendError { producer, fraction }
            | FaultAction::SendTimeout { producer, fraction } => {
                match producer {
                    Some(p) => line.push_str(&format!(" producer {p}")),
                    None => line.push_str(" every producer"),
                }
                line.push_str(&format!(" fraction {fraction}"));
            }
            FaultAction::DbOutage | FaultAction::SourceOutage | FaultAction::CacheCollapse => {}
        }
        match self.duration {
            Some(d) => line.push_str(&format!(" for {}", Dur(d).readable())),
            None if self.action.kind().is_instant() => {}
            None => line.push_str(" (never heals)"),
        }
        line
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} fault(s)", self.faults.len())
    }
}

fn fault_path(i: usize, field: &str) -> Vec<PathSeg> {
    vec![
        PathSeg::from("fault"),
        PathSeg::Index(i),
        PathSeg::from(field),
    ]
}

/// Every problem of meaning in the scenario's `[[fault]]` entries: timing, fields that do not
/// apply to their kind, missing or out-of-range parameters, absent targets, and overlapping
/// scripted faults.
pub(crate) fn validate(s: &Scenario, err: &mut impl FnMut(Vec<PathSeg>, String)) {
    // A set: a file may hold many faults and brokers, and validation stays n log n.
    let names: BTreeSet<&str> = s.brokers.iter().map(|b| b.name.as_str()).collect();
    let allowed = names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    for (i, f) in s.faults.iter().enumerate() {
        validate_one(s, i, f, &names, &allowed, err);
    }
    check_overlaps(s, err);
}

fn validate_one(
    s: &Scenario,
    i: usize,
    f: &Fault,
    names: &BTreeSet<&str>,
    allowed: &str,
    err: &mut impl FnMut(Vec<PathSeg>, String),
) {
    let kind = f.kind;
    match (f.at, f.rate) {
        (None, None) => err(
            fault_path(i, "kind"),
            "give either `at` (scripted) or `rate` (random)".into(),
        ),
        (Some(_), Some(_)) => err(
            fault_path(i, "rate"),
            "give either `at` or `rate`, not both".into(),
        ),
        (None, Some(r)) if r.as_per_sec() <= 0.0 => {
            err(fault_path(i, "rate"), "must be greater than 0".into())
        }
        (None, Some(r)) if r.as_per_sec() > 1000.0 => {
            err(fault_path(i, "rate"), "must be at most 1000/s".into())
        }
        _ => {}
    }
    // Fields that mean nothing for this kind are refused, each with the kinds that take it.
    let present = [
        ("for", f.duration.is_some()),
        ("broker", f.broker.is_some()),
        ("consumer", f.consumer.is_some()),
        ("producer", f.producer.is_some()),
        ("factor", f.factor.is_some()),
        ("skew", f.skew.is_some()),
        ("ahead", f.ahead.is_some()),
        ("fraction", f.fraction.is_some()),
        ("count", f.count.is_some()),
        ("replaced_after", f.replaced_after.is_some()),
    ];
    debug_assert_eq!(present.map(|(n, _)| n), KIND_FIELDS);
    for (field, given) in present {
        if given && !kind.takes(field) {
            let takers: Vec<&str> = FaultKind::ALL
                .into_iter()
                .filter(|k| k.takes(field))
                .map(FaultKind::name)
                .collect();
            let what = if field == "for" {
                format!(
                    "kind = \"{}\" is an instant and takes no `for`",
                    kind.name()
                )
            } else {
                format!(
                    "does not apply to kind = \"{}\" (only to {})",
                    kind.name(),
                    takers.join(", ")
                )
            };
            err(fault_path(i, field), what);
        }
    }
    node_problems(s, i, f, err);
    if let Some((field, example)) = kind.spec().required {
        let given = present.iter().any(|(n, g)| *n == field && *g);
        if !given {
            err(
                fault_path(i, field),
                format!("{} needs `{field}` ({example})", kind.name()),
            );
        }
    }
    if f.rate.is_some() && f.duration.is_none() && kind.spec().random_needs_duration {
        err(
            fault_path(i, "for"),
            "a random fault needs a duration `for`".into(),
        );
    }
    if let Some(d) = &f.duration {
        if let Err(m) = d.0.check() {
            err(fault_path(i, "for"), m);
        }
    }
    if let Some(r) = f.rate {
        let window = s.fault_window_micros();
        if window == 0 && s.run.fault_window.is_some() {
            // Drawn over no time at all, a random entry never happens, silently.
            err(
                fault_path(i, "rate"),
                "a random fault is drawn over [run] fault_window, which is 0s here: it would \
                 never occur; give fault_window a length (or leave it out: the expected \
                 production time), or give this entry an `at`"
                    .into(),
            );
        }
        let expected = r.as_per_sec() * window as f64 / 1e6;
        if expected > MAX_OCCURRENCES as f64 {
            err(
                fault_path(i, "rate"),
                format!(
                    "about {expected:.0} occurrences over the {} fault window, more than the {} a fault entry may expand to; lower the rate or [run] fault_window",
                    Dur(window),
                    MAX_OCCURRENCES
                ),
            );
        }
    }
    if let Some(b) = &f.broker {
        if !names.contains(&b.as_str()) {
            err(
                fault_path(i, "broker"),
                format!("no broker named {b:?} (brokers: {allowed})"),
            );
        }
    }
    if let Some(c) = f.consumer {
        if c >= s.consumers.count {
            err(
                fault_path(i, "consumer"),
                format!(
                    "no consumer {c}: consumers are numbered 0 to {}",
                    s.consumers.count.saturating_sub(1)
                ),
            );
        }
    }
    if let Some(pr) = f.producer {
        if pr >= s.producers.count {
            err(
                fault_path(i, "producer"),
                format!(
                    "no producer {pr}: producers are numbered 0 to {}",
                    s.producers.count.saturating_sub(1)
                ),
            );
        }
    }
    if let Some(x) = f.factor {
        if !(x.is_finite() && x > 0.0 && x <= 1e6) {
            err(
                fault_path(i, "factor"),
                format!("must be in (0, 1e6], got {x}"),
            );
        }
    }
    if let Some(x) = f.fraction {
        if !(x.is_finite() && (0.0..=1.0).contains(&x)) {
            err(
                fault_path(i, "fraction"),
                format!("must be a probability in [0, 1], got {x}"),
            );
        }
    }
    if let Some(n) = f.count {
        if !(1..=10_000).contains(&n) {
            err(
                fault_path(i, "count"),
                format!("must be between 1 and 10000 partitions, got {n}"),
            );
        }
    }
    if f.replaced_after == Some(Dur::ZERO) {
        err(
            fault_path(i, "replaced_after"),
            "is how long after the pause began a new instance starts: above 0s (a replacement \
             at once is a producer_crash)"
                .into(),
        );
    }
}

/// A `broker_crash`'s `node`: one of its Kafka cluster's brokers, given exactly when its broker
/// has `[broker.replication] brokers`.
fn node_problems(s: &Scenario, i: usize, f: &Fault, err: &mut impl FnMut(Vec<PathSeg>, String)) {
    let cluster = |name: &str| {
        s.broker_index(name)
            .and_then(|b| s.brokers[b].replication.as_ref())
            .and_then(|r| r.brokers)
    };
    if !matches!(f.kind, FaultKind::BrokerCrash | FaultKind::ReplicaStall) {
        if f.node.is_some() {
            err(
                fault_path(i, "node"),
                format!(
                    "does not apply to kind = \"{}\" (only to broker_crash and replica_stall, \
                     on a Kafka cluster with [broker.replication] brokers)",
                    f.kind.name()
                ),
            );
        }
        return;
    }
    let stall = f.kind == FaultKind::ReplicaStall;
    if stall
        && f.broker
            .as_deref()
            .is_none_or(|name| s.broker_index(name).is_some() && cluster(name).is_none())
    {
        err(
            fault_path(i, "broker"),
            "replica_stall stops one broker of a Kafka cluster fetching: name a broker with \
             [broker.replication] brokers, and the cluster's broker with `node`"
                .into(),
        );
        return;
    }
    let Some(name) = f.broker.as_deref() else {
        if s.brokers
            .iter()
            .any(|b| b.replication.as_ref().is_some_and(|r| r.brokers.is_some()))
        {
            err(
                fault_path(i, "broker"),
                "name the broker: a random pick could be a Kafka cluster ([broker.replication] \
                 brokers), whose crash needs `node`"
                    .into(),
            );
        } else if f.node.is_some() {
            err(
                fault_path(i, "node"),
                "names one of a Kafka cluster's brokers: it needs `broker` (one with \
                 [broker.replication] brokers)"
                    .into(),
            );
        }
        return;
    };
    match (cluster(name), f.node) {
        (Some(n), None) => err(
            fault_path(i, "node"),
            format!(
                "broker {name:?} is a Kafka cluster of {n} brokers ([broker.replication] \
                 brokers): say which one {}, node = 0 to {}",
                if stall { "stalls" } else { "crashes" },
                n - 1
            ),
        ),
        (Some(n), Some(k)) if k >= n => err(
            fault_path(i, "node"),
            format!(
                "must be 0 to {} (broker {name:?}'s cluster has {n} brokers), got {k}",
                n - 1
            ),
        ),
        (None, Some(_)) if s.broker_index(name).is_some() => err(
            fault_path(i, "node"),
            format!(
                "broker {name:?} has no [broker.replication] brokers: `node` names one of a \
                 Kafka cluster's brokers"
            ),
        ),
        _ => {}
    }
}

/// A `broker_crash` of a broker whose partitions have followers (`[broker.replication]` with
/// `replication_factor` above 1): each crash takes down the leader of the moment, so crashes
/// may overlap (a new leader crashing while the old one is still down): the kind's
/// [`KindSpec::overlap_exception`].
fn crashes_a_leader(s: &Scenario, f: &Fault) -> bool {
    f.kind == FaultKind::BrokerCrash
        && f.broker
            .as_deref()
            .and_then(|name| s.broker_index(name))
            .and_then(|i| s.brokers[i].replication.as_ref())
            .is_some_and(|r| r.replication_factor > 1 && r.brokers.is_none())
}

/// Two scripted faults of the same kind on the same target must not overlap: the second would act
/// on a node that is already down, and the user surely meant something else. Sorted by target and
/// start, so the check is n log n, and each fault is reported once (against the earlier-starting
/// fault on its target that ends last).
fn check_overlaps(s: &Scenario, err: &mut impl FnMut(Vec<PathSeg>, String)) {
    let scripted: Vec<(usize, &Fault, u64, u64)> = s
        .faults
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let at = f.at?.0;
            let end = match f.duration.as_ref().map(|d| &d.0) {
                Some(DurDist::Constant { value }) => at.saturating_add(value.0),
                _ => u64::MAX,
            };
            Some((i, f, at, end))
        })
        .collect();
    let mut by_target: Vec<&(usize, &Fault, u64, u64)> = scripted
        .iter()
        .filter(|(_, f, _, _)| !f.kind.may_overlap() && !crashes_a_leader(s, f))
        .collect();
    let target = |f: &Fault| (f.kind, f.broker.clone(), f.node, f.consumer, f.producer);
    by_target.sort_by(|a, b| {
        target(a.1)
            .cmp(&target(b.1))
            .then(a.2.cmp(&b.2))
            .then(a.0.cmp(&b.0))
    });
    // (index, end) of the fault that ends last among those of this target started so far.
    let mut reach: Option<(usize, u64)> = None;
    for (k, &&(i, f, start, end)) in by_target.iter().enumerate() {
        if k > 0 && target(by_target[k - 1].1) != target(f) {
            reach = None;
        }
        if let Some((j, until)) = reach {
            if start < until {
                // Name the fault as the file orders them: the later entry overlaps the earlier.
                let (at, other) = if i > j { (i, j) } else { (j, i) };
                err(
                    fault_path(at, "at"),
                    format!(
                        "overlaps fault[{other}] ({} on the same target); make them follow each other",
                        f.kind.name()
                    ),
                );
            }
        }
        if reach.is_none_or(|(_, until)| end > until) {
            reach = Some((i, end));
        }
    }
}

/// Collects [`validate`]'s problems as field errors (for tests).
#[cfg(test)]
fn problems(s: &Scenario) -> Vec<FieldError> {
    let mut e = Vec::new();
    validate(s, &mut |path, msg| e.push(FieldError::new(path, msg)));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(fault: &str) -> Scenario {
        let text = format!(
            r#"
strategies = ["competing"]
[workload]
messages = 10
rate = "10/s"
keys = 2
[producers]
count = 2
[[broker]]
name = "a"
[consumers]
count = 2
service = "1ms"
[[fault]]
{fault}
"#
        );
        crate::scenario::load_str("t.toml", &text, &|_| Vec::new())
            .or_else(|e| match e {
                // Keep the scenario to look at the problems ourselves.
                crate::scenario::ScenarioError::Invalid { .. } => {
                    Ok(toml::from_str(&text).expect("types are right"))
                }
                other => Err(other),
            })
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A value for each kind-dependent field that is valid wherever the field applies.
    fn value(field: &str) -> &'static str {
        match field {
            "for" => "\"1s\"",
            "broker" => "\"a\"",
            "consumer" | "producer" => "1",
            "factor" => "2.0",
            "skew" => "\"5ms\"",
            "ahead" => "false",
            "fraction" => "0.5",
            "count" => "3",
            "replaced_after" => "\"500ms\"",
            other => panic!("no value for {other}"),
        }
    }

    /// Every field on every kind: accepted exactly where [`FaultKind::takes`] says, refused
    /// elsewhere with the field named; and a valid scripted fault of each kind, with every field
    /// it takes, plans and describes itself without a panic.
    #[test]
    fn every_field_is_checked_against_every_kind() {
        // A replica_stall needs a Kafka cluster (tests/kafka_leaders.rs checks its fields).
        for kind in FaultKind::ALL
            .into_iter()
            .filter(|&k| k != FaultKind::ReplicaStall)
        {
            let required = kind
                .spec()
                .required
                .map(|(f, _)| format!("{f} = {}\n", value(f)))
                .unwrap_or_default();
            for field in KIND_FIELDS {
                if kind.spec().required.is_some_and(|(f, _)| f == field) {
                    continue;
                }
                let text = format!(
                    "kind = \"{}\"\nat = \"1s\"\n{required}{field} = {}\n",
                    kind.name(),
                    value(field)
                );
                let errs = problems(&scenario(&text));
                let on_field: Vec<_> = errs
                    .iter()
                    .filter(|e| e.path_string() == format!("fault[0].{field}"))
                    .collect();
                if kind.takes(field) {
                    assert!(errs.is_empty(), "{} {field}: {errs:?}", kind.name());
                } else {
                    assert_eq!(on_field.len(), 1, "{} {field}: {errs:?}", kind.name());
                }
            }
            // Everything it takes at once: valid, and the plan carries it.
            let mut text = format!("kind = \"{}\"\nat = \"1s\"\n", kind.name());
            for field in KIND_FIELDS.iter().filter(|f| kind.takes(f)) {
                text.push_str(&format!("{field} = {}\n", value(field)));
            }
            let sc = scenario(&text);
            assert!(problems(&sc).is_empty(), "{text}: {:?}", problems(&sc));
            let plan = FaultPlan::resolve(&sc, 1);
            assert_eq!(plan.faults.len(), 1);
            assert_eq!(plan.faults[0].action.kind(), kind);
            assert_eq!(plan.faults[0].duration.is_some(), kind.takes("for"));
            // Written back as a scripted entry, it plans the same.
            let back = plan.as_scripted(&sc);
            let mut sc2 = sc.clone();
            sc2.faults = back;
            assert_eq!(FaultPlan::resolve(&sc2, 7), plan, "{}", kind.name());
            assert!(plan.describe(&sc)[0].contains(kind.name()));
        }
    }

    /// `replaced_after` is above 0s, and only a `producer_pause`'s; the plan carries it.
    #[test]
    fn replaced_after_is_a_pauses_and_above_zero() {
        let sc = scenario(
            "kind = \"producer_pause\"\nat = \"1s\"\nfor = \"5s\"\nreplaced_after = \"0s\"",
        );
        let errs = problems(&sc);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].path_string(), "fault[0].replaced_after");
        assert!(errs[0].message.contains("above 0s"), "{}", errs[0].message);
        let sc = scenario(
            "kind = \"producer_pause\"\nat = \"1s\"\nfor = \"5s\"\nreplaced_after = \"2s\"\nproducer = 1",
        );
        assert!(problems(&sc).is_empty());
        let plan = FaultPlan::resolve(&sc, 1);
        assert_eq!(
            plan.faults[0].action,
            FaultAction::ProducerPause {
                producer: 1,
                replaced_after: Some(2_000_000)
            }
        );
        assert_eq!(
            plan.describe(&sc)[0],
            "t=1s producer_pause producer 1 replaced after 2s for 5s"
        );
    }

    /// The instant kind refuses a duration (it used to reach an `unreachable!` in the engine).
    #[test]
    fn cache_collapse_takes_no_duration() {
        let sc = scenario("kind = \"cache_collapse\"\nat = \"1s\"\nfor = \"5s\"");
        let errs = problems(&sc);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].path_string(), "fault[0].for");
        assert!(errs[0].message.contains("instant"), "{}", errs[0].message);
    }

    /// A required parameter that is missing is named; one out of range is refused.
    #[test]
    fn required_parameters_are_named() {
        for (kind, field) in [
            ("slow_consumer", "factor"),
            ("clock_skew", "skew"),
            ("poison", "fraction"),
            ("producer_pause", "for"),
        ] {
            let errs = problems(&scenario(&format!("kind = \"{kind}\"\nat = \"1s\"")));
            assert_eq!(errs.len(), 1, "{kind}: {errs:?}");
            assert_eq!(errs[0].path_string(), format!("fault[0].{field}"));
        }
        let errs = problems(&scenario(
            "kind = \"poison\"\nat = \"1s\"\nfraction = 1.5\nfor = \"1s\"",
        ));
        assert_eq!(errs.len(), 1, "{errs:?}");
        let errs = problems(&scenario(
            "kind = \"slow_consumer\"\nat = \"1s\"\nfactor = 0.0\nfor = \"1s\"",
        ));
        assert_eq!(errs.len(), 1, "{errs:?}");
    }

    /// Random faults of a kind that heals need `for`; a random clock step does not.
    #[test]
    fn random_faults_need_a_duration_except_clock_steps() {
        for kind in FaultKind::ALL {
            let mut text = format!("kind = \"{}\"\nrate = \"1/s\"\n", kind.name());
            // The field under test stays out even for a kind that always needs it.
            if let Some((f, _)) = kind.spec().required.filter(|(f, _)| *f != "for") {
                text.push_str(&format!("{f} = {}\n", value(f)));
            }
            let errs = problems(&scenario(&text));
            let wants = kind.spec().random_needs_duration;
            assert_eq!(
                errs.iter().any(|e| e.path_string() == "fault[0].for"),
                wants,
                "{}: {errs:?}",
                kind.name()
            );
        }
    }

    /// Two scripted faults of one kind on one target, the second starting inside the first's
    /// window (or at a later instant): refused exactly for the kinds that may not overlap, and
    /// `sim explore`'s shrinking reads the same description ([`FaultKind::may_overlap`]).
    #[test]
    fn overlapping_windows_are_refused_only_where_they_cannot_both_be_in_force() {
        for kind in FaultKind::ALL
            .into_iter()
            .filter(|&k| k != FaultKind::ReplicaStall)
        {
            let mut one = format!("kind = \"{}\"\n", kind.name());
            for field in KIND_FIELDS.iter().filter(|f| kind.takes(f) && **f != "for") {
                one.push_str(&format!("{field} = {}\n", value(field)));
            }
            if kind.takes("for") {
                one.push_str("for = \"10s\"\n");
            }
            let text = format!("{one}at = \"1s\"\n[[fault]]\n{one}at = \"5s\"\n");
            let errs = problems(&scenario(&text));
            let refused = errs.iter().any(|e| e.message.contains("overlaps fault[0]"));
            assert_eq!(refused, !kind.may_overlap(), "{}: {errs:?}", kind.name());
            assert_eq!(
                errs.len(),
                usize::from(refused),
                "{}: {errs:?}",
                kind.name()
            );
        }
        // The kinds whose windows add up, and the instants, by name: a slip in the table shows.
        let may: Vec<&str> = FaultKind::ALL
            .into_iter()
            .filter(|k| k.may_overlap())
            .map(FaultKind::name)
            .collect();
        assert_eq!(
            may,
            [
                "clock_skew",
                "poison",
                "cache_collapse",
                "dlq_replay",
                "add_partitions",
                "send_error",
                "send_timeout",
                "reset_groups"
            ]
        );
    }

    /// Every kind is in [`FaultKind::ALL`] once, and its description's name is what serde reads.
    #[test]
    fn every_kind_is_listed_once_under_its_serde_name() {
        for (i, kind) in FaultKind::ALL.into_iter().enumerate() {
            assert_eq!(FaultKind::ALL.iter().position(|k| *k == kind), Some(i));
            let back: FaultKind = serde_json::from_str(&format!("\"{}\"", kind.name())).unwrap();
            assert_eq!(back, kind);
            assert!(!kind.spec().summary.is_empty());
            assert!(!kind.spec().doc.is_empty(), "{}: no doc", kind.name());
            for f in kind.spec().fields {
                assert!(
                    KIND_FIELDS.contains(f) && *f != "for",
                    "{}: {f}",
                    kind.name()
                );
            }
        }
    }

    /// The fields' reference names every field once, and a kind it names takes that field.
    #[test]
    fn the_field_reference_covers_every_field_and_names_only_kinds_taking_it() {
        let mut named: Vec<&str> = FIELD_DOCS.iter().map(|(f, _)| *f).collect();
        named.sort_unstable();
        let mut want: Vec<&str> = KIND_FIELDS
            .iter()
            .copied()
            .chain(["kind", "at", "rate"])
            .collect();
        want.sort_unstable();
        assert_eq!(named, want);
        for (field, meaning) in FIELD_DOCS {
            for k in FaultKind::ALL {
                if meaning.contains(&format!("`{}`", k.name())) {
                    assert!(k.takes(field), "{field}'s meaning names {}", k.name());
                }
            }
        }
        let table = fields_markdown();
        assert!(table.contains("| `consumer` |"));
        assert_eq!(table.matches("| `consumer` |").count(), 1);
        assert!(kinds_markdown().contains("| `cache_collapse` |"));
    }
}
