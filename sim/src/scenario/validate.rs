//! Checks of meaning that types cannot express: counts, probabilities, names that must exist,
//! overlapping scripted faults. Every problem is reported, not just the first.

use super::{FaultKind, FieldError, Flavour, PathSeg, Scenario};
use crate::time::Dur;

/// Largest number of keys, consumers, producers or brokers accepted: beyond this the per-key and
/// per-node state would not fit a reasonable memory budget.
pub const MAX_KEYS: u32 = 50_000_000;
/// Largest number of consumers, producers or brokers.
pub const MAX_NODES: u32 = 10_000;

/// Most fault occurrences a whole plan may hold (scripted entries plus the expected occurrences of
/// every random entry), estimated without expanding it. Beyond this the plan alone would take
/// seconds and hundreds of MiB to build.
pub const MAX_PLAN_OCCURRENCES: f64 = 1_000_000.0;
/// Memory a message may need while it is in flight, in bytes (its slot, its place in a queue, a
/// prefetch buffer or a redelivery timer, its checker entry), generously. In the worst case (a
/// broker that never returns, consumers that never keep up) every message is in flight at once.
pub const BYTES_PER_MESSAGE: u64 = 128;
/// Memory per fault occurrence of the expanded plan, in bytes.
pub const BYTES_PER_OCCURRENCE: u64 = 128;
/// Engine events a message needs at the least (its arrival and its processing): the expected
/// event count is at least this times the messages.
pub const EVENTS_PER_MESSAGE: u64 = 2;
/// Engine events a fault occurrence needs at the least (its start and its end).
pub const EVENTS_PER_OCCURRENCE: u64 = 2;
/// Shortest reconnect delay: a client whose broker is down retries after this; at 0 it would retry
/// at every microsecond of the outage.
pub const MIN_RECONNECT_DELAY: Dur = Dur(1_000);
/// Shortest batch interval: a job starts at every interval, whether or not there is work.
pub const MIN_BATCH_INTERVAL: Dur = Dur(1_000);
/// Longest simulated production phase accepted (about 31 years): the arrivals must fit the clock
/// with room for every delay after them.
pub const MAX_PRODUCTION: Dur = Dur(1_000_000_000_000_000);
/// Longest name of a broker, a producer or a consumer, in characters: names appear in every
/// table, trace line and timeline.
pub const MAX_NAME_CHARS: usize = 64;
/// Broker names listed in an error message, at most.
const NAMES_SHOWN: usize = 10;

fn p(segs: &[&str]) -> Vec<PathSeg> {
    segs.iter().map(|s| PathSeg::from(*s)).collect()
}

fn probability(v: f64) -> bool {
    v.is_finite() && (0.0..=1.0).contains(&v)
}

/// Why `[[broker]] version = v` does not fit `flavour` (None: it does).
fn version_problem(flavour: super::FlavourChoice, v: &str) -> Option<String> {
    let f =
        match flavour {
            super::FlavourChoice::Product(f) => f,
            super::FlavourChoice::Native => return Some(
                "a version is one broker product's: set `flavour` to that product (not \"native\")"
                    .into(),
            ),
        };
    let allowed = f.versions();
    if allowed.is_empty() {
        return Some(format!(
            "flavour {:?} does not depend on its version here: leave `version` out",
            f.name()
        ));
    }
    if allowed.contains(&v) {
        return None;
    }
    // A patch release ("4.0.2"): the model knows release lines, within which it behaves alike.
    let mut parts = v.splitn(3, '.');
    if let (Some(major), Some(minor), Some(_)) = (parts.next(), parts.next(), parts.next()) {
        let line = format!("{major}.{minor}");
        if allowed.contains(&line.as_str()) {
            return Some(format!(
                "write the release line, {line:?}: the model knows {} by its major.minor lines",
                f.name()
            ));
        }
    }
    let list = allowed
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let default = f.default_version().unwrap_or_default();
    Some(format!(
        "{v:?} is not a {} version this model knows: one of {list} (default {default:?}{}){}",
        f.name(),
        if allowed.last() == Some(&default) {
            ", the current release"
        } else {
            ""
        },
        crate::suggest::did_you_mean(v, allowed.iter().copied())
    ))
}

/// All problems of meaning in `s` (empty when it is valid).
pub fn validate(s: &Scenario) -> Vec<FieldError> {
    let mut e = Vec::new();
    let mut err = |path: Vec<PathSeg>, msg: String| e.push(FieldError::new(path, msg));

    if s.strategies.is_empty() {
        err(
            p(&["strategies"]),
            "list at least one strategy (see `sim list`)".into(),
        );
    }
    // The scenario's name heads every table and names `sim report`'s folder: blank, it printed
    // as "scenario : ...", and padded it is not the name it looks like.
    if let Some(problem) = s.name.as_deref().and_then(blank_or_padded) {
        err(
            p(&["name"]),
            format!("{problem} (leave `name` out to go by the file's name)"),
        );
    }
    let mut seen_strategies = std::collections::BTreeSet::new();
    for (i, name) in s.strategies.iter().enumerate() {
        if !seen_strategies.insert(name) {
            err(
                vec!["strategies".into(), PathSeg::Index(i)],
                format!("strategy {name:?} is listed twice"),
            );
        }
    }

    let w = &s.workload;
    if w.keys == 0 || w.keys > MAX_KEYS {
        err(
            p(&["workload", "keys"]),
            format!("must be between 1 and {MAX_KEYS}, got {}", w.keys),
        );
    }
    if w.messages > 0 && w.rate.as_per_sec() <= 0.0 {
        err(
            p(&["workload", "rate"]),
            "must be greater than 0 when messages are produced".into(),
        );
    }
    if w.messages > 0 && w.rate.as_per_sec() > 0.0 {
        // The first arrival comes after one mean gap (and an exponential gap can be 40 times
        // longer); all of them after messages / rate.
        let gap = 1e6 / w.rate.as_per_sec();
        let production = w.messages as f64 * gap;
        if gap * 40.0 > MAX_PRODUCTION.0 as f64 || production > MAX_PRODUCTION.0 as f64 {
            err(
                p(&["workload", "rate"]),
                format!(
                    "at {} the arrivals would take about {} of simulated time, more than the \
                     {} the clock can hold with room to spare; raise the rate or lower the messages",
                    w.rate,
                    Dur(production.max(gap * 40.0).min(u64::MAX as f64 / 8.0) as u64),
                    MAX_PRODUCTION
                ),
            );
        }
    }
    if w.rate.as_per_sec() > 1e9 {
        err(
            p(&["workload", "rate"]),
            "must be at most 1e9/s (the clock resolution is 1us)".into(),
        );
    }
    if !probability(w.group_header_missing) {
        err(
            p(&["workload", "group_header_missing"]),
            format!(
                "must be a probability in [0, 1], got {}",
                w.group_header_missing
            ),
        );
    }
    match w.group_size {
        Some(0) => err(
            p(&["workload", "group_size"]),
            "must be at least 1 (messages per correlation group), or absent for no groups".into(),
        ),
        Some(n) if !w.messages.is_multiple_of(u64::from(n)) => err(
            p(&["workload", "group_size"]),
            format!(
                "must divide [workload] messages ({}) so that every group is produced whole, \
                 got {n}",
                w.messages
            ),
        ),
        _ => {}
    }
    if !probability(w.poison_fraction) {
        err(
            p(&["workload", "poison_fraction"]),
            format!("must be a probability in [0, 1], got {}", w.poison_fraction),
        );
    }
    match (w.key_distribution, w.zipf_exponent) {
        (super::KeyDistribution::Zipf, Some(x)) if !(x.is_finite() && x > 0.0 && x <= 10.0) => err(
            p(&["workload", "zipf_exponent"]),
            format!("must be in (0, 10], got {x}"),
        ),
        (super::KeyDistribution::Uniform, Some(_)) => err(
            p(&["workload", "zipf_exponent"]),
            "only applies with key_distribution = \"zipf\"".into(),
        ),
        _ => {}
    }

    if s.producers.count == 0 || s.producers.count > MAX_NODES {
        err(
            p(&["producers", "count"]),
            format!(
                "must be between 1 and {MAX_NODES}, got {}",
                s.producers.count
            ),
        );
    }
    for (section, delay) in [
        ("producers", s.producers.reconnect_delay),
        ("consumers", s.consumers.reconnect_delay),
    ] {
        if delay < MIN_RECONNECT_DELAY {
            err(
                p(&[section, "reconnect_delay"]),
                format!(
                    "must be at least {MIN_RECONNECT_DELAY}, got {delay}: with its broker down a \
                     client retries after this delay, and shorter retries only spin"
                ),
            );
        }
    }
    if s.producers.max_in_flight == Some(0) {
        err(
            p(&["producers", "max_in_flight"]),
            "must be at least 1 (1: a synchronous send, each waits for the previous one; Kafka's \
             default is 5)"
                .into(),
        );
    }
    if let Some(b) = s.producers.retry_backoff {
        if b < MIN_RECONNECT_DELAY {
            err(
                p(&["producers", "retry_backoff"]),
                format!(
                    "must be at least {MIN_RECONNECT_DELAY}, got {b}: a failed send is retried \
                     after this delay, and shorter retries only spin"
                ),
            );
        }
    }
    if let Some(t) = s.producers.delivery_timeout {
        if t > Dur::ZERO && t < MIN_RECONNECT_DELAY {
            err(
                p(&["producers", "delivery_timeout"]),
                format!(
                    "must be \"0s\" (none) or at least {MIN_RECONNECT_DELAY}, got {t}: a send \
                     not stored this long after it was made is given up (Kafka's \
                     delivery.timeout.ms, 120s), and a resend that soon only spins"
                ),
            );
        }
    }
    if s.producers.timestamp_resolution == Dur::ZERO {
        err(
            p(&["producers", "timestamp_resolution"]),
            "must be at least 1us".into(),
        );
    }

    if s.brokers.is_empty() {
        err(p(&["broker"]), "at least one [[broker]] is needed".into());
    }
    if s.brokers.len() > MAX_NODES as usize {
        err(p(&["broker"]), format!("at most {MAX_NODES} brokers"));
    }
    let mut seen_brokers = std::collections::BTreeSet::new();
    for (i, b) in s.brokers.iter().enumerate() {
        let path = |f: &str| vec![PathSeg::from("broker"), PathSeg::Index(i), PathSeg::from(f)];
        if let Some(problem) = name_problem(&b.name) {
            err(path("name"), problem);
        }
        if !seen_brokers.insert(b.name.as_str()) {
            err(
                path("name"),
                format!("broker name {:?} is used twice", b.name),
            );
        }
        if b.page_size == Some(0) {
            err(path("page_size"), "must be at least 1".into());
        }
        if let Some(Err(m)) = b.dispatch_latency.as_ref().map(|d| d.0.check()) {
            err(path("dispatch_latency"), m);
        }
        if let Some(Err(m)) = b.restart_time.as_ref().map(|d| d.0.check()) {
            err(path("restart_time"), m);
        }
        if let Some(r) = &b.replication {
            replication_problems(s, b, r, &mut |f, m| {
                err(
                    vec![
                        PathSeg::from("broker"),
                        PathSeg::Index(i),
                        PathSeg::from("replication"),
                        PathSeg::from(f),
                    ],
                    m,
                )
            });
        }
        if let Some(v) = &b.version {
            if let Some(m) = version_problem(s.flavour, v) {
                err(path("version"), m);
            } else if matches!(
                s.flavour.product(),
                Flavour::RabbitmqQuorum | Flavour::Kafka
            ) && s.broker_version(i) != s.broker_version(0)
            {
                // One redelivery policy per run: the quorum queue's rules are the first broker's.
                err(
                    path("version"),
                    format!(
                        "{v:?} differs from broker {:?}'s {:?}: a run's brokers share one \
                         {} version",
                        s.brokers[0].name,
                        s.broker_version(0).unwrap_or_default(),
                        s.flavour.product().name(),
                    ),
                );
            }
        }
    }
    if s.consumers.return_with.is_some() && s.flavour != Flavour::RabbitmqQuorum {
        err(
            p(&["consumers", "return_with"]),
            format!(
                "only a RabbitMQ quorum queue tells basic.nack from basic.reject (flavour = \
                 \"rabbitmq_quorum\"); flavour {:?} has no such choice: leave it out",
                s.flavour.name()
            ),
        );
    }
    // Settings of Kafka's clients only: each names what it is, and what the flavour lacks.
    let kafka_only: [(&[&str], bool, &str, &str); 9] = [
        (
            &["consumers", "client"],
            s.consumers.client.is_some(),
            "names a Kafka consumer (\"spring\" or \"plain\")",
            "has no Kafka client",
        ),
        (
            &["producers", "metadata_max_age"],
            s.producers.metadata_max_age.is_some(),
            "is Kafka's metadata.max.age.ms (when a producer sees added partitions)",
            "has no partitions to add",
        ),
        (
            &["consumers", "metadata_max_age"],
            s.consumers.metadata_max_age.is_some(),
            "is Kafka's metadata.max.age.ms (when a consumer group sees added partitions)",
            "has no partitions to add",
        ),
        (
            &["consumers", "auto_offset_reset"],
            s.consumers.auto_offset_reset.is_some(),
            "is Kafka's auto.offset.reset (where a consumer starts in a partition with no \
             committed offset)",
            "has no partitions to add",
        ),
        (
            &["producers", "transactional"],
            s.producers.transactional.is_some(),
            "is Kafka's transactional.id (a transactional producer)",
            "has no transactions",
        ),
        (
            &["consumers", "isolation"],
            s.consumers.isolation.is_some(),
            "is Kafka's isolation.level (whether a consumer reads open and aborted \
             transactions)",
            "has no transactions",
        ),
        (
            &["producers", "linger"],
            s.producers.linger.is_some(),
            "is Kafka's linger.ms (a producer's batches of records per partition)",
            "sends each message on its own",
        ),
        (
            &["producers", "batch_size"],
            s.producers.batch_size.is_some(),
            "is Kafka's batch.size (a producer's batches of records per partition)",
            "sends each message on its own",
        ),
        (
            &["producers", "record_size"],
            s.producers.record_size.is_some(),
            "is Kafka's record size against batch.size (a producer's batches of records per \
             partition)",
            "sends each message on its own",
        ),
    ];
    if s.flavour != Flavour::Kafka && s.flavour != super::FlavourChoice::Native {
        for (path, _, what, lacks) in kafka_only.iter().filter(|k| k.1) {
            err(
                p(path),
                format!(
                    "{what}: it needs flavour = \"kafka\" (or \"native\", for the strategies \
                     modelled on Kafka); flavour {:?} {lacks}: leave it out",
                    s.flavour.name()
                ),
            );
        }
    }
    if let Some(acks) = s.producers.acks {
        if !s.brokers.iter().any(|b| b.replication.is_some()) {
            err(
                p(&["producers", "acks"]),
                format!(
                    "is Kafka's acks: it decides what a partition leader's crash loses, and no \
                     broker here has replicas: add a [broker.replication] table (with \
                     replication_factor) to the broker, or leave out acks = {:?}",
                    acks.name()
                ),
            );
        }
    }
    let names: std::collections::BTreeSet<&str> =
        s.brokers.iter().map(|b| b.name.as_str()).collect();
    // Listed in file order, and only the first few: an error per fault must not copy them all.
    let mut allowed = s
        .brokers
        .iter()
        .take(NAMES_SHOWN)
        .map(|b| format!("{:?}", b.name))
        .collect::<Vec<_>>()
        .join(", ");
    if s.brokers.len() > NAMES_SHOWN {
        allowed.push_str(&format!(" and {} more", s.brokers.len() - NAMES_SHOWN));
    }
    for (section, list) in [
        ("producers", &s.producers.brokers),
        ("consumers", &s.consumers.brokers),
    ] {
        if let Some(list) = list {
            if list.is_empty() {
                err(
                    p(&[section, "brokers"]),
                    "must name at least one broker".into(),
                );
            }
            // A failover list names each broker once: ActiveMQ's FailoverTransport drops a URI it
            // already holds (`FailoverTransport.add`, [A21] in docs/sources.md), so a repeat
            // changes nothing there and is almost surely a typo for another broker here.
            let mut first: std::collections::BTreeMap<&str, usize> = Default::default();
            for (j, n) in list.iter().enumerate() {
                let path = || vec![section.into(), "brokers".into(), PathSeg::Index(j)];
                if !names.contains(&n.as_str()) {
                    err(
                        path(),
                        format!("no broker named {n:?} (brokers: {allowed})"),
                    );
                } else if let Some(&k) = first.get(n.as_str()) {
                    err(
                        path(),
                        format!(
                            "broker {n:?} is listed twice (also at [{k}]): a failover list names \
                             each broker once, in the order tried (brokers: {allowed})"
                        ),
                    );
                } else {
                    first.insert(n.as_str(), j);
                }
            }
        }
    }

    ha_pairs(s, &names, &allowed, &mut err);
    network(s, &mut err);

    for (section, count, names) in [
        ("producers", s.producers.count, &s.producers.names),
        ("consumers", s.consumers.count, &s.consumers.names),
    ] {
        node_names(section, count, names.as_deref(), &mut err);
    }

    let c = &s.consumers;
    if c.count == 0 || c.count > MAX_NODES {
        err(
            p(&["consumers", "count"]),
            format!("must be between 1 and {MAX_NODES}, got {}", c.count),
        );
    }
    if c.prefetch == 0 || c.prefetch > 100_000 {
        err(
            p(&["consumers", "prefetch"]),
            format!("must be between 1 and 100000, got {}", c.prefetch),
        );
    }
    if let Err(m) = c.service.0.check() {
        err(p(&["consumers", "service"]), m);
    }
    match (c.mode, &c.batch) {
        (super::ConsumerMode::Batch, None) => err(
            p(&["consumers", "mode"]),
            "mode = \"batch\" needs a [consumers.batch] table with at least `interval`".into(),
        ),
        (super::ConsumerMode::Listener, Some(_)) => err(
            p(&["consumers", "batch"]),
            "[consumers.batch] only applies with mode = \"batch\"".into(),
        ),
        (_, Some(b)) => {
            if b.interval < MIN_BATCH_INTERVAL {
                err(
                    p(&["consumers", "batch", "interval"]),
                    format!(
                        "must be at least {MIN_BATCH_INTERVAL}, got {}: a job starts at every \
                         interval, with or without work, so shorter intervals only spin",
                        b.interval
                    ),
                );
            }
            if !(b.retry_multiplier.is_finite() && (1.0..=100.0).contains(&b.retry_multiplier)) {
                err(
                    p(&["consumers", "batch", "retry_multiplier"]),
                    format!("must be in [1, 100], got {}", b.retry_multiplier),
                );
            }
        }
        _ => {}
    }

    let r = &s.redelivery;
    if let Some(m) = r.multiplier {
        if !(m.is_finite() && (1.0..=100.0).contains(&m)) {
            err(
                p(&["redelivery", "multiplier"]),
                format!("must be in [1, 100], got {m}"),
            );
        }
    }
    if let Some(n) = r.max_redeliveries {
        if !(-1..=1_000_000).contains(&n) {
            err(
                p(&["redelivery", "max_redeliveries"]),
                format!("must be -1 (unlimited) or between 0 and 1000000, got {n}"),
            );
        }
    }
    if let Some(n) = r.backout_threshold {
        if !(0..=1_000_000).contains(&n) {
            err(
                p(&["redelivery", "backout_threshold"]),
                format!("must be 0 (no threshold: unlimited) or between 1 and 1000000, got {n}"),
            );
        }
    }
    if r.max_redeliveries.is_some() && r.backout_threshold.is_some() {
        err(
            p(&["redelivery", "backout_threshold"]),
            "give either max_redeliveries (N redeliveries: N + 1 deliveries, ActiveMQ, WebLogic) or backout_threshold (N deliveries, IBM MQ BOTHRESH), not both".into(),
        );
    }
    let policy = s.redelivery_policy();
    if policy.max_delay.is_some_and(|m| m < policy.initial_delay) {
        err(
            p(&["redelivery", "max_delay"]),
            format!(
                "must not be shorter than initial_delay ({})",
                policy.initial_delay.readable()
            ),
        );
    }
    let lease = s.lease_policy();
    if let Some(l) = lease {
        if l.duration < MIN_RECONNECT_DELAY {
            err(
                p(&["lease", "duration"]),
                format!(
                    "must be at least {MIN_RECONNECT_DELAY}, got {}",
                    l.duration.readable()
                ),
            );
        }
        if let Some(every) = l.renew_every {
            if every < MIN_RECONNECT_DELAY || every >= l.duration {
                err(
                    p(&["lease", "renew_every"]),
                    format!(
                        "must be at least {MIN_RECONNECT_DELAY} and shorter than the lease ({}), got {}",
                        l.duration.readable(),
                        every.readable()
                    ),
                );
            }
        } else if l.renew_max.is_some() {
            err(
                p(&["lease", "renew_max"]),
                "bounds renewal: give renew_every too".into(),
            );
        }
    }
    let (resolved, problems) = s.resolve_checked();
    // Under `native` each strategy's broker is checked by the strategies' validation
    // (`strategies::validate`), not the `activemq` reading.
    if s.flavour != super::FlavourChoice::Native {
        for problem in problems {
            err(problem.path, problem.message);
        }
    }
    if s.run.max_events == 0 {
        err(p(&["run", "max_events"]), "must be at least 1".into());
    }
    let need = s.estimated_memory_bytes();
    let budget = s.run.memory_budget_mb.saturating_mul(1024 * 1024);
    let occurrences = estimated_occurrences(s);
    whole_file_limits(s, occurrences, need, budget, &mut err);
    if need > budget {
        err(
            p(&["workload", "keys"]),
            format!(
                "{} keys need about {} MiB of per-key state ({} bytes each), more than the memory budget of {} MiB; lower the number of keys or raise [run] memory_budget_mb",
                w.keys,
                need / (1024 * 1024),
                Scenario::BYTES_PER_KEY,
                s.run.memory_budget_mb
            ),
        );
    }

    crate::faults::validate(s, &mut err);
    spin_limits(s, resolved.retry_backoff, &mut err);
    if let Some(sw) = &s.sweep {
        for (i, set) in sw.set.iter().enumerate() {
            if let Err(why) = super::parse_set(set) {
                // Debug-quoted (control characters escaped), cut at 80 characters.
                let mut shown: String = set.chars().take(80).collect();
                if shown.len() < set.len() {
                    shown.push_str("...");
                }
                err(
                    vec!["sweep".into(), "set".into(), PathSeg::Index(i)],
                    format!("{shown:?}: {why} (write \"PATH=V1,V2,...\", e.g. \"consumers.count=1,2,4,8\")"),
                );
            }
        }
        let mut paths: std::collections::BTreeMap<String, usize> = Default::default();
        for (i, set) in sw.set.iter().enumerate() {
            let Ok((path, _)) = super::parse_set(set) else {
                continue;
            };
            if let Some(k) = paths.insert(super::set_path_key(&path), i) {
                err(
                    vec!["sweep".into(), "set".into(), PathSeg::Index(i)],
                    format!(
                        "{path:?} is set twice (also at [{k}]): a parameter takes one entry, \
                         with all its values (\"{path}=V1,V2,...\")"
                    ),
                );
            }
        }
        let mut swept = std::collections::BTreeSet::new();
        for (i, name) in sw.strategies.iter().enumerate() {
            if !swept.insert(name) {
                err(
                    vec!["sweep".into(), "strategies".into(), PathSeg::Index(i)],
                    format!("strategy {name:?} is listed twice: each strategy runs once"),
                );
            } else if !seen_strategies.contains(name) {
                err(
                    vec!["sweep".into(), "strategies".into(), PathSeg::Index(i)],
                    format!("{name:?} is not in the scenario's `strategies`"),
                );
            }
        }
    }
    if let Some(x) = &s.explore {
        explore(x, &mut err);
    }
    if let Some(x) = &s.expect {
        for (path, msg) in crate::expect::validate(x, &s.strategies) {
            err(
                path.iter().map(|k| PathSeg::from(k.as_str())).collect(),
                msg,
            );
        }
    }
    e
}

/// `[explore]`: non-empty distinct kinds, ranges whose ends are in order and in bounds.
fn explore(x: &super::ExploreSpec, err: &mut impl FnMut(Vec<PathSeg>, String)) {
    if let Some(kinds) = &x.kinds {
        if kinds.is_empty() {
            err(
                p(&["explore", "kinds"]),
                "list at least one fault kind (see `sim list`)".into(),
            );
        }
        for (i, k) in kinds.iter().enumerate() {
            if kinds[..i].contains(k) {
                err(
                    vec!["explore".into(), "kinds".into(), PathSeg::Index(i)],
                    format!("{:?} is listed twice", k.name()),
                );
            }
        }
    }
    if x.max_kinds == Some(0) {
        err(
            p(&["explore", "max_kinds"]),
            "must be at least 1 (a run with no fault kind explores nothing)".into(),
        );
    }
    if let Some([lo, hi]) = x.rate {
        for (i, r) in [lo, hi].into_iter().enumerate() {
            if !(r.as_per_sec() > 0.0 && r.as_per_sec() <= 1000.0) {
                err(
                    vec!["explore".into(), "rate".into(), PathSeg::Index(i)],
                    format!("must be greater than 0 and at most 1000/s, got {r}"),
                );
            }
        }
        if lo.as_per_sec() > hi.as_per_sec() {
            err(
                p(&["explore", "rate"]),
                format!(
                    "the first rate ({lo}) is higher than the second ({hi}): write [low, high]"
                ),
            );
        }
    }
    if let Some([lo, hi]) = x.duration {
        if lo == Dur::ZERO {
            err(
                vec!["explore".into(), "duration".into(), PathSeg::Index(0)],
                "must be longer than 0s".into(),
            );
        }
        if lo > hi {
            err(
                p(&["explore", "duration"]),
                format!("the first duration ({lo}) is longer than the second ({hi}): write [short, long]"),
            );
        }
        if hi > MAX_PRODUCTION {
            err(
                vec!["explore".into(), "duration".into(), PathSeg::Index(1)],
                format!("must be at most {MAX_PRODUCTION}"),
            );
        }
    }
}

/// `[[broker]] backup_of`, `takeover` and `failback`: each pair is two distinct brokers, a
/// primary with one backup that is not itself a primary's backup, and has a takeover time.
fn ha_pairs(
    s: &Scenario,
    names: &std::collections::BTreeSet<&str>,
    allowed: &str,
    err: &mut impl FnMut(Vec<PathSeg>, String),
) {
    let mut backed: std::collections::BTreeMap<&str, usize> = Default::default();
    // Looked up by name once, so that a file of many brokers validates in n log n.
    let index: std::collections::BTreeMap<&str, usize> = s
        .brokers
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.as_str(), i))
        .collect();
    let primaries: std::collections::BTreeSet<&str> = s
        .brokers
        .iter()
        .filter_map(|b| b.backup_of.as_deref())
        .collect();
    for (i, b) in s.brokers.iter().enumerate() {
        let path = |f: &str| vec![PathSeg::from("broker"), PathSeg::Index(i), PathSeg::from(f)];
        if let Some(t) = &b.takeover {
            if let Err(m) = t.0.check() {
                err(path("takeover"), m);
            }
        }
        let Some(primary) = b.backup_of.as_deref() else {
            let unpaired = !primaries.contains(b.name.as_str());
            if unpaired && (b.takeover.is_some() || b.failback.is_some()) {
                let f = if b.takeover.is_some() {
                    "takeover"
                } else {
                    "failback"
                };
                err(
                    path(f),
                    format!(
                        "broker {:?} is in no HA pair: `{f}` is for a broker that is \
                         `backup_of` another or has a backup",
                        b.name
                    ),
                );
            }
            continue;
        };
        if primary == b.name {
            err(
                path("backup_of"),
                format!("broker {:?} cannot be its own backup", b.name),
            );
            continue;
        }
        if !names.contains(primary) {
            err(
                path("backup_of"),
                format!("no broker named {primary:?} (brokers: {allowed})"),
            );
            continue;
        }
        let p = index[primary];
        if s.brokers[p].backup_of.is_some() {
            err(
                path("backup_of"),
                format!(
                    "broker {primary:?} is itself a backup: a pair is a primary and its backup"
                ),
            );
            continue;
        }
        if let Some(first) = backed.insert(primary, i) {
            err(
                path("backup_of"),
                format!(
                    "broker {primary:?} already has a backup ({:?}): one backup per primary is modelled",
                    s.brokers[first].name
                ),
            );
            continue;
        }
        // Its takeover time, the flavour's default or not: `Scenario::resolve`.
    }
}

/// `[network]`: the bridge's settings, and the values of ActiveMQ's settings that are not
/// modelled (rejected rather than ignored).
/// `[producers] names` / `[consumers] names`: one per node, distinct, printable.
fn node_names(
    section: &str,
    count: u32,
    names: Option<&[String]>,
    err: &mut impl FnMut(Vec<PathSeg>, String),
) {
    let Some(names) = names else { return };
    if names.len() != count as usize {
        err(
            p(&[section, "names"]),
            format!(
                "must list one name per {} ({count}), got {}",
                &section[..section.len() - 1],
                names.len()
            ),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for (j, n) in names.iter().enumerate() {
        let path = || vec![section.into(), "names".into(), PathSeg::Index(j)];
        if let Some(problem) = name_problem(n) {
            err(path(), problem);
        } else if !seen.insert(n.as_str()) {
            err(path(), format!("name {n:?} is used twice"));
        }
    }
}

/// What is wrong with a node's name (a broker's, a producer's, a consumer's), if anything: the
/// first of empty, padded with whitespace, a control character, too long. Names appear in every
/// table, trace line and timeline.
fn name_problem(n: &str) -> Option<String> {
    let chars = n.chars().count();
    if let problem @ Some(_) = blank_or_padded(n) {
        problem
    } else if n.chars().any(crate::is_unsafe_char) {
        Some(format!(
            "{n:?} holds a control character (or a bidirectional formatting one); names appear in \
             terminals and reports"
        ))
    } else if chars > MAX_NAME_CHARS {
        Some(format!("at most {MAX_NAME_CHARS} characters, got {chars}"))
    } else {
        None
    }
}

/// A name that is empty or only spaces, or that starts or ends with a space (names are compared
/// as written: " a" and "a" would be two brokers, a reference to "a" would miss " a").
fn blank_or_padded(n: &str) -> Option<String> {
    if n.trim().is_empty() {
        Some("must not be empty".into())
    } else if n.trim() != n {
        Some(format!(
            "{n:?} starts or ends with whitespace: names are compared as written, so {n:?} and {:?} \
             would be two names; write {:?}",
            n.trim(),
            n.trim()
        ))
    } else {
        None
    }
}

fn network(s: &Scenario, err: &mut impl FnMut(Vec<PathSeg>, String)) {
    let n = &s.network;
    let path = |f: &str| p(&["network", f]);
    if n.kind == super::NetworkKind::IdleForward {
        let d = super::Network::default();
        for (field, set) in [
            ("prefetch", n.prefetch != d.prefetch),
            ("network_ttl", n.network_ttl != d.network_ttl),
            (
                "conduit_subscriptions",
                n.conduit_subscriptions != d.conduit_subscriptions,
            ),
            (
                "decrease_network_consumer_priority",
                n.decrease_network_consumer_priority != d.decrease_network_consumer_priority,
            ),
        ] {
            if set {
                err(
                    path(field),
                    "only applies with kind = \"bridge\" (an idle broker forwards its whole store)"
                        .into(),
                );
            }
        }
        return;
    }
    if n.prefetch == 0 || n.prefetch > 100_000 {
        err(
            path("prefetch"),
            format!("must be between 1 and 100000, got {}", n.prefetch),
        );
    }
    if n.network_ttl == 0 {
        err(
            path("network_ttl"),
            "must be at least 1 (ActiveMQ's default, one hop)".into(),
        );
    } else if n.network_ttl > 1 && s.brokers.len() > 2 {
        err(
            path("network_ttl"),
            format!(
                "{} is not modelled with {} brokers: demand and messages travel one hop only; \
                 use 1 (with two brokers any value is the same network, a message never goes \
                 back to a broker it came from)",
                n.network_ttl,
                s.brokers.len()
            ),
        );
    }
    if !n.conduit_subscriptions {
        err(
            path("conduit_subscriptions"),
            "false (one bridge subscription per remote consumer) is not modelled; use true, \
             ActiveMQ's default: one subscription per peer broker"
                .into(),
        );
    }
    if n.decrease_network_consumer_priority {
        err(
            path("decrease_network_consumer_priority"),
            "true (local consumers served before the bridge) is not modelled; use false: the \
             bridge competes with local consumers at equal priority"
                .into(),
        );
    }
}

/// The occurrences the whole plan is expected to hold: one per scripted entry, rate x window per
/// random entry (each capped as [`crate::faults::FaultPlan::resolve`] caps it). Computed from the
/// entries, without expanding them.
pub fn estimated_occurrences(s: &Scenario) -> f64 {
    let window = s.fault_window_micros() as f64 / 1e6;
    s.faults
        .iter()
        .map(|f| match (f.at, f.rate) {
            (Some(_), _) => 1.0,
            (None, Some(r)) if r.as_per_sec() > 0.0 => {
                (r.as_per_sec() * window).min(crate::faults::MAX_OCCURRENCES as f64)
            }
            _ => 0.0,
        })
        .sum()
}

/// The engine events a run of `s` is expected to need at the least.
pub fn estimated_events(s: &Scenario, occurrences: f64) -> f64 {
    s.workload.messages as f64 * EVENTS_PER_MESSAGE as f64
        + occurrences * EVENTS_PER_OCCURRENCE as f64
}

/// The memory the fault plan's `occurrences` take.
fn plan_bytes(occurrences: f64) -> u64 {
    (occurrences.min(u64::MAX as f64 / 256.0) as u64) * BYTES_PER_OCCURRENCE
}

/// The memory a run of `s` may need whatever its strategy, in bytes: the keys' and nodes' state
/// ([`Scenario::estimated_memory_bytes`]), every message in flight at once, the fault plan.
/// A strategy parameter that sizes a table takes its bytes from what this leaves of `[run]
/// memory_budget_mb`.
pub fn estimated_run_bytes(s: &Scenario) -> u64 {
    s.estimated_memory_bytes()
        .saturating_add(s.workload.messages.saturating_mul(BYTES_PER_MESSAGE))
        .saturating_add(plan_bytes(estimated_occurrences(s)))
}

/// Limits on the whole file, checked before anything is expanded or run: the whole fault plan,
/// the messages that may be in flight at once, and the events a run needs.
fn whole_file_limits(
    s: &Scenario,
    occurrences: f64,
    keys_bytes: u64,
    budget: u64,
    err: &mut impl FnMut(Vec<PathSeg>, String),
) {
    let random = s.faults.iter().filter(|f| f.rate.is_some()).count();
    if occurrences > MAX_PLAN_OCCURRENCES {
        err(
            p(&["fault"]),
            format!(
                "the faults would expand to about {occurrences:.0} occurrences in all ({} entries, \
                 {random} of them random, over a {} fault window), more than the {MAX_PLAN_OCCURRENCES} \
                 a whole plan may hold; lower the rates or [run] fault_window",
                s.faults.len(),
                Dur(s.fault_window_micros()),
            ),
        );
    }
    let mib = |b: u64| b.div_ceil(1024 * 1024);
    let messages_bytes = s.workload.messages.saturating_mul(BYTES_PER_MESSAGE);
    let plan_bytes = plan_bytes(occurrences);
    if keys_bytes <= budget && estimated_run_bytes(s) > budget {
        err(
            p(&["workload", "messages"]),
            format!(
                "{} messages may need up to {} MiB while in flight ({BYTES_PER_MESSAGE} bytes each, \
                 all of them if a broker never returns), which with the keys' and nodes' {} MiB and the fault \
                 plan's {} MiB is more than the memory budget of {} MiB; lower the messages or \
                 raise [run] memory_budget_mb",
                s.workload.messages,
                mib(messages_bytes),
                mib(keys_bytes),
                mib(plan_bytes),
                s.run.memory_budget_mb
            ),
        );
    }
    let events = estimated_events(s, occurrences);
    if s.run.max_events > 0 && events > s.run.max_events as f64 {
        err(
            p(&["workload", "messages"]),
            format!(
                "a run needs at least about {events:.0} engine events ({EVENTS_PER_MESSAGE} per \
                 message, {EVENTS_PER_OCCURRENCE} per fault occurrence), more than [run] \
                 max_events = {}: it would stop before producing every message; lower the \
                 messages or raise [run] max_events",
                s.run.max_events
            ),
        );
    }
}

/// Settings that would make a run spin without progress for longer than its event bound allows:
/// clients retrying a broker that is down for the rest of the run, batch jobs that start with no
/// work. Each retry or job start is an engine event; over the whole run (production, then the
/// drain phase) they must fit in `[run] max_events`.
fn spin_limits(s: &Scenario, retry_backoff: Dur, err: &mut impl FnMut(Vec<PathSeg>, String)) {
    if s.run.max_events == 0 {
        // Refused on its own: every client's retries would exceed it, one error each.
        return;
    }
    let scripted_end = s
        .faults
        .iter()
        .filter_map(|f| f.at)
        .map(|a| a.0)
        .max()
        .unwrap_or(0);
    let horizon = s
        .expected_production_micros()
        .max(s.fault_window_micros())
        .max(scripted_end)
        .saturating_add(s.run.drain_timeout.0) as f64;
    let budget = s.run.max_events as f64;
    let brokers_can_fail = s.faults.iter().any(|f| f.kind == FaultKind::BrokerCrash);
    let spin = |clients: u32, every: Dur| clients as f64 * horizon / every.0.max(1) as f64;
    let mut check = |path: Vec<PathSeg>, events: f64, what: &str| {
        if events > budget {
            err(
                path,
                format!(
                    "{what} over the run's {} (production, then drain_timeout) could take about \
                     {events:.0} engine events, more than [run] max_events = {}; make it longer \
                     (or lower drain_timeout, or raise max_events)",
                    Dur(horizon as u64),
                    s.run.max_events
                ),
            )
        }
    };
    if brokers_can_fail {
        for (section, count, delay) in [
            ("producers", s.producers.count, s.producers.reconnect_delay),
            ("consumers", s.consumers.count, s.consumers.reconnect_delay),
        ] {
            if delay >= MIN_RECONNECT_DELAY {
                check(
                    p(&[section, "reconnect_delay"]),
                    spin(count, delay),
                    &format!("{count} {section} retrying every {delay} while their broker is down"),
                );
            }
        }
    }
    if s.faults
        .iter()
        .any(|f| matches!(f.kind, FaultKind::SendError | FaultKind::SendTimeout))
    {
        let backoff = retry_backoff;
        if backoff >= MIN_RECONNECT_DELAY {
            let count = s.producers.count;
            check(
                p(&["producers", "retry_backoff"]),
                spin(count, backoff),
                &format!("{count} producers retrying failed sends every {backoff}"),
            );
        }
    }
    if let (super::ConsumerMode::Batch, Some(b)) = (s.consumers.mode, &s.consumers.batch) {
        if b.interval >= MIN_BATCH_INTERVAL {
            check(
                p(&["consumers", "batch", "interval"]),
                spin(s.consumers.count, b.interval),
                &format!(
                    "{} batch jobs starting every {}",
                    s.consumers.count, b.interval
                ),
            );
        }
    }
}

/// The most replicas a partition may have in a scenario (a cluster's brokers).
pub const MAX_REPLICATION_FACTOR: u32 = 32;

/// What is wrong with broker `b`'s `[broker.replication]` table: `err(field, message)`.
fn replication_problems(
    s: &Scenario,
    b: &super::Broker,
    r: &super::Replication,
    err: &mut dyn FnMut(&str, String),
) {
    if s.flavour != Flavour::Kafka && s.flavour != super::FlavourChoice::Native {
        err(
            "replication_factor",
            format!(
                "[broker.replication] is a Kafka topic's replicas: it needs flavour = \"kafka\" \
                 (or \"native\"); flavour {:?} replicates nothing this way (an HA pair is \
                 backup_of): leave the table out",
                s.flavour.name()
            ),
        );
    }
    if !(1..=MAX_REPLICATION_FACTOR).contains(&r.replication_factor) {
        err(
            "replication_factor",
            format!(
                "must be 1 to {MAX_REPLICATION_FACTOR} (copies of each partition, the leader's \
                 included), got {}",
                r.replication_factor
            ),
        );
    }
    if !(1..=MAX_REPLICATION_FACTOR).contains(&r.min_insync_replicas) {
        err(
            "min_insync_replicas",
            format!(
                "must be 1 to {MAX_REPLICATION_FACTOR} (Kafka's min.insync.replicas is at least \
                 1; above replication_factor it counts as the factor), got {}",
                r.min_insync_replicas
            ),
        );
    }
    if let Err(m) = r.replication_lag.0.check() {
        err("replication_lag", m);
    }
    if let Err(m) = r.leader_election_time.0.check() {
        err("leader_election_time", m);
    }
    if r.replica_lag_time_max.is_some_and(|d| d.0 < 2) {
        err(
            "replica_lag_time_max",
            "must be at least 2us (the leader checks every half of it)".into(),
        );
    }
    if let Some(n) = r.brokers {
        if !(r.replication_factor..=MAX_REPLICATION_FACTOR).contains(&n) {
            err(
                "brokers",
                format!(
                    "must be replication_factor ({}) to {MAX_REPLICATION_FACTOR}: each of a \
                     partition's replicas is on its own broker (Kafka's placer refuses a factor \
                     above the brokers registered), got {n}",
                    r.replication_factor
                ),
            );
        }
    } else if r.replica_lag_time_max.is_some() {
        err(
            "replica_lag_time_max",
            "is how long a stalled follower stays in the ISR: it needs `brokers` (a \
             replica_stall names one of the cluster's brokers)"
                .into(),
        );
    } else if r.auto_leader_rebalance.is_some() {
        err(
            "auto_leader_rebalance",
            "moves leaders back to their preferred brokers: it needs `brokers` (the cluster's \
             brokers, over which the leaders are spread)"
                .into(),
        );
    }
    if b.backup_of.is_some() {
        err(
            "replication_factor",
            "a broker with Kafka replicas cannot also be an HA pair's backup (backup_of): its \
             followers are its failover"
                .into(),
        );
    }
    if !b.persistent {
        err(
            "replication_factor",
            "Kafka's log is on disk: a broker with [broker.replication] must be persistent \
             (leave out persistent = false)"
                .into(),
        );
    }
}
