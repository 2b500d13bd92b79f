//! `sim live`: the live twin. The same scenario and the same checkers against a real ActiveMQ
//! Classic started as a child process (docs/live.md). Behind the cargo feature `live`.
//!
//! - [`stomp`]: a minimal STOMP 1.2 client;
//! - [`broker`]: broker processes (configuration, start, SIGKILL, restart, cleanup, Ctrl-C);
//! - [`run`]: producers, consumers, the fault driver and the recorder of one run;
//! - [`calibrate`]: `sim calibrate`, the simulator's range beside the live values;
//! - [`postgres`], [`db`]: a private PostgreSQL per run and the db handlers' SQL (`db_optimistic`,
//!   `notifier`, `db_outage`).
//!
//! Only what can be staged faithfully runs: one broker, the strategies `competing`, `single`
//! and `message_groups`, the faults `consumer_crash` and `broker_crash`. Anything else in the
//! scenario file is refused (exit 2) with the field named.

pub mod broker;
pub mod calibrate;
pub mod db;
pub mod own;
pub mod postgres;
pub mod proxy;
pub mod rabbit_plan;
pub mod rabbitmq;
pub mod run;
pub mod stomp;
pub mod target;
pub mod writelog;

use crate::report;
use crate::trace::TraceHeader;
use crate::{scenario_name, CliError};
use run::{Action, LiveStrategy, Plan};
use sim::faults::{FaultAction, FaultKind};
use sim::history::Event;
use sim::{FaultPlan, Params, RunSummary, Scenario, Status, StrategySummary};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `sim live` was asked.
pub struct LiveRequest {
    /// The scenario file.
    pub file: PathBuf,
    /// Strategies (default: those of the scenario that can be staged; refused if any cannot).
    pub strategies: Vec<String>,
    /// Runs per strategy (seeds `seed`, `seed + 1`, ...).
    pub runs: u32,
    /// First seed (default: the scenario's).
    pub seed: Option<u64>,
    /// Where to write the histories.
    pub out: Option<PathBuf>,
    /// Longest wait for the queue to drain after production and faults.
    pub drain_timeout: Duration,
    /// Fail (exit 1, after the table) when a run fell behind its schedule or a fault missed
    /// its time by more than [`FAULT_PRECISION`].
    pub strict: bool,
    /// `--consumer CMD`: the consumers are copies of this command ([`own`]).
    pub consumer: Option<String>,
    /// `--writes TABLE(KEY,SEQ)`: what the consumers applied is read from this table
    /// ([`writelog`]).
    pub writes: Option<String>,
    /// `--schema FILE`: SQL run on the consumers' database before they start.
    pub schema: Option<PathBuf>,
}

/// What `sim live` found: the text to print, and what `--strict` fails.
pub struct LiveOutcome {
    /// The table, the pacing and the fault times of every run.
    pub text: String,
    /// Runs that fell behind or whose faults missed their time, one line each.
    pub off: Vec<String>,
}

pub use crate::pacing::FAULT_PRECISION;

/// The fields the real broker supplies for `sc` (those its run uses), one line: what the run's
/// output lists.
pub fn supplied_by_the_broker(sc: &Scenario) -> String {
    let used: Vec<String> = crate::staging::broker_supplied_on(rabbit_plan::broker_of(sc))
        .into_iter()
        .filter(|(f, _)| match *f {
            "broker.restart_time" => sc
                .faults
                .iter()
                .any(|f| f.kind == sim::faults::FaultKind::BrokerCrash),
            "network.forward_delay" => sc.brokers.len() > 1,
            _ => true,
        })
        .map(|(f, why)| format!("{f} ({why})"))
        .collect();
    format!(
        "supplied by the broker, not staged from the file: {}\n",
        used.join("; ")
    )
}

/// A run's pacing and fault times, for the output, and what `--strict` fails in it.
pub fn run_notes(label: &str, r: &run::LiveRun) -> (String, Vec<String>) {
    crate::pacing::notes(label, &r.pacing, &r.faults)
}

/// The longest `[network] forward_delay` a network of brokers on loopback stands in for (2 ms).
pub const MAX_FORWARD_DELAY_US: u64 = 2_000;

/// What in the scenario `sim live` cannot stage faithfully, each naming its field (empty: it
/// can stage everything the file asks for `strategies`).
pub fn refusals(text: &str, sc: &Scenario, strategies: &[String]) -> Vec<String> {
    refusals_for(text, sc, strategies, false)
}

/// [`refusals`], with the user's consumers when `own` (`--consumer`, [`own`]).
pub fn refusals_for(text: &str, sc: &Scenario, strategies: &[String], own: bool) -> Vec<String> {
    let mut out = Vec::new();
    let doc: toml_edit::DocumentMut = match text.parse() {
        Ok(d) => d,
        Err(e) => return vec![format!("the file does not parse: {e}")],
    };
    // Every key written, by its row in the one table (crate::staging::FIELDS).
    let on = rabbit_plan::broker_of(sc);
    if own {
        out.extend(crate::staging::refused_fields_own(on, &doc));
        if has_poison(sc) {
            out.push(
                "poison (--consumer: the consumer's processing is its own, no poison is staged)"
                    .into(),
            );
        }
        for s in strategies {
            if s == "rabbitmq_hash" {
                out.push(
                    "strategy \"rabbitmq_hash\" (--consumer: its consumers subscribe to several \
                     queues, and ORDSIM_QUEUE names one)"
                        .into(),
                );
            } else if !matches!(
                s.as_str(),
                "competing" | "single" | "message_groups" | "rabbitmq_sac"
            ) {
                out.push(format!(
                    "strategy {s:?} (--consumer: competing, single, message_groups on ActiveMQ, \
                     rabbitmq_sac on RabbitMQ; the consumer is the handler)"
                ));
            }
        }
    } else {
        out.extend(crate::staging::refused_fields_on(on, &doc));
    }
    if on == crate::staging::LiveBroker::RabbitMq {
        out.extend(rabbit_plan::refusals(&doc, sc));
    }
    if sc.brokers.is_empty() {
        out.push("[[broker]]: none".into());
    }
    if sc.brokers.len() > 1 && on == crate::staging::LiveBroker::ActiveMq {
        // ActiveMQ's demand-forwarding bridges; `idle_forward` is WebLogic's.
        if sc.network.kind != sim::scenario::NetworkKind::Bridge {
            out.push("network.kind = \"idle_forward\" (ActiveMQ's network is \"bridge\")".into());
        }
        if sc
            .brokers
            .iter()
            .any(|b| b.persistent != sc.brokers[0].persistent)
        {
            out.push(
                "[[broker]] persistent: brokers that differ (one message mode for all)".into(),
            );
        }
    }
    if sc.brokers.len() > 1
        && on == crate::staging::LiveBroker::ActiveMq
        && sc.network.forward_delay.micros() > MAX_FORWARD_DELAY_US
    {
        out.push(format!(
            "network.forward_delay = {} (the loopback bridge forwards in about 1 ms; above 2ms \
             is not staged)",
            sc.network.forward_delay
        ));
    }
    if doc.get("redelivery").is_some() && !rolls_back(sc) {
        out.push(
            "[redelivery] without poison messages (live, nothing else rolls a message back: \
             the policy would not be staged)"
                .into(),
        );
    }
    if let Err(e) = live_redelivery(sc) {
        out.push(e);
    }
    if on == crate::staging::LiveBroker::ActiveMq
        && sc.flavour != sim::scenario::Flavour::default()
        && doc.get("flavour").and_then(|f| f.as_str()) != Some("activemq")
    {
        out.push(format!(
            "flavour = {:?} (the live brokers: ActiveMQ Classic, RabbitMQ)",
            doc.get("flavour").and_then(|f| f.as_str()).unwrap_or("?")
        ));
    }
    if let Some(k) = doc
        .get("workload")
        .and_then(|w| w.get("key_distribution"))
        .and_then(|v| v.as_str())
    {
        if k != "uniform" {
            out.push(format!("workload.key_distribution = {k:?} (uniform only)"));
        }
    }
    let all_db = strategies
        .iter()
        .all(|s| !matches!(db::strategy_of(s, sc), Ok(None)));
    // db_outage: staged for the db handlers, refused below for the others.
    let staged_kind = |k: FaultKind| {
        if own {
            // A pause is a SIGSTOP of the user's process; a blip cuts its proxies ([`proxy`]);
            // poison is refused above; the database the consumers write refuses connections
            // during a db_outage.
            k.spec().live
                || matches!(
                    k,
                    FaultKind::ConsumerPause | FaultKind::NetworkBlip | FaultKind::DbOutage
                )
        } else {
            k.spec().live || k == FaultKind::DbOutage
        }
    };
    for f in sc.faults.iter().filter(|f| !staged_kind(f.kind)) {
        let staged: Vec<&str> = if own {
            vec![
                "consumer_crash",
                "consumer_pause",
                "network_blip",
                "broker_crash",
                "db_outage",
            ]
        } else {
            sim::scenario::FaultKind::ALL
                .into_iter()
                .filter(|k| k.spec().live)
                .map(|k| k.name())
                .collect()
        };
        out.push(format!(
            "[[fault]] kind = {:?} (staged: {})",
            f.kind.name(),
            staged.join(", ")
        ));
    }
    // A window staged as two actions (down, then up) needs its length: refused here, with the
    // entry named, before any run (the plan of each run would refuse it too, later).
    for (i, f) in sc.faults.iter().enumerate() {
        let never = match f.kind {
            FaultKind::BrokerCrash if f.node.is_none() => "a broker that never comes back",
            FaultKind::ConsumerCrash => "a consumer that never comes back",
            FaultKind::ConsumerPause => "a consumer that never resumes",
            FaultKind::NetworkBlip => "a connection that never comes back",
            FaultKind::DbOutage => "a database that never comes back",
            _ => continue,
        };
        if f.duration.is_none() && staged_kind(f.kind) {
            out.push(format!(
                "fault[{i}].for: missing ({:?} without `for` is {never}, not staged)",
                f.kind.name()
            ));
        }
    }
    if sc.consumers.count == 0 {
        out.push("consumers.count = 0".into());
    }
    if !own && !all_db && sc.faults.iter().any(|f| f.kind == FaultKind::DbOutage) {
        out.push(
            "[[fault]] kind = \"db_outage\" with a strategy that writes no database (staged \
             for db_optimistic and notifier only)"
                .into(),
        );
    }
    for s in strategies {
        if LiveStrategy::parse(s).is_none() {
            out.push(format!(
                "strategy {s:?} (staged: competing, single, message_groups, db_optimistic, \
                 notifier; on RabbitMQ rabbitmq_sac, rabbitmq_hash)"
            ));
        }
        out.extend(rabbit_plan::strategy_refusal(on, s));
        if s.starts_with("rabbitmq_") {
            continue; // rabbit_plan::refusals judges their parameters
        }
        match db::strategy_of(s, sc) {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(e) => {
                out.extend(e);
                continue;
            }
        }
        if let Some(t) = sc.strategy.get(s) {
            for (k, v) in t {
                // ActiveMQ's exclusive consumer fails over at once: takeover_delay 0s only.
                let zero = s == "single"
                    && k == "takeover_delay"
                    && v.as_str()
                        .and_then(|d| sim::time::Dur::parse(d).ok())
                        .is_some_and(|d| d.micros() == 0);
                if !zero {
                    out.push(format!("[strategy.{s}] {k}"));
                }
            }
        }
    }
    out
}

/// Whether anything in the scenario rolls a message back: poison, or a `db_outage`.
pub fn rolls_back(sc: &Scenario) -> bool {
    has_poison(sc) || sc.faults.iter().any(|f| f.kind == FaultKind::DbOutage)
}

/// Whether the scenario makes any message poison.
pub fn has_poison(sc: &Scenario) -> bool {
    sc.workload.poison_fraction > 0.0
        || sc
            .faults
            .iter()
            .any(|f| f.kind == sim::faults::FaultKind::Poison)
}

/// How a poison message's failure is staged, from `[redelivery]` under the `activemq` flavour:
///
/// - `mode = "non_blocking"` (the broker holds the message for the delay): the broker's
///   `redeliveryPlugin` with `schedulerSupport`; the consumer NACKs, the scheduler sends the
///   message back to the tail of the queue after the delay (so `requeue = "tail"` is required),
///   up to `max_redeliveries`, then the DLQ. The plugin refuses delays under 1 s.
/// - `mode = "blocking"` with one delivery (`max_redeliveries = 0`): NACK at once, dead-lettered
///   by the broker (no plugin).
/// - `mode = "blocking"` with more: the JMS client's blocking redelivery, emulated in the
///   consumer, then a NACK.
///
/// A scenario without poison messages stages no plugin: nothing else rolls a message back.
pub fn live_redelivery(sc: &Scenario) -> Result<run::LiveRedelivery, String> {
    use sim::scenario::{DeadLetter, Limit, RedeliveryMode, Requeue};
    if !rolls_back(sc) {
        return Ok(run::LiveRedelivery::Nack);
    }
    if rabbit_plan::broker_of(sc) == crate::staging::LiveBroker::RabbitMq {
        return rabbit_plan::redelivery(sc);
    }
    let r = sc.redelivery_policy();
    let Some(b) = sc.brokers.first() else {
        return Ok(run::LiveRedelivery::Nack);
    };
    let broker_dl = if b.persistent {
        DeadLetter::Queue
    } else {
        DeadLetter::Drop
    };
    match r.mode {
        RedeliveryMode::NonBlocking => {
            if r.requeue != Requeue::Tail {
                return Err(
                    "redelivery.requeue must be \"tail\" with mode = \"non_blocking\" \
                            (ActiveMQ's redelivery plugin: its scheduler sends the message back \
                            to the tail of the queue)"
                        .into(),
                );
            }
            if r.initial_delay.micros() < 1_000_000 {
                return Err(format!(
                    "redelivery.initial_delay = {} with mode = \"non_blocking\" (the redelivery \
                     plugin refuses delays under 1s: RedeliveryPlugin.validatePolicyDelay)",
                    r.initial_delay
                ));
            }
            let dl = r.dead_letter(b);
            if dl == DeadLetter::Queue && !b.persistent {
                return Err(
                    "redelivery.dead_letter = \"queue\" with a non-persistent broker \
                            (ActiveMQ drops non-persistent messages: processNonPersistent = false)"
                        .into(),
                );
            }
            Ok(run::LiveRedelivery::Plugin(broker::PluginPolicy {
                max_redeliveries: match r.limit {
                    Limit::Unlimited => -1,
                    Limit::Deliveries(n) => i64::from(n) - 1,
                },
                delay_ms: r.initial_delay.micros() / 1000,
                multiplier: r.multiplier,
                max_delay_ms: r.max_delay.map(|d| d.micros() / 1000),
                dead_letter: dl == DeadLetter::Queue,
            }))
        }
        RedeliveryMode::Blocking => {
            if r.dead_letter(b) != broker_dl {
                return Err(format!(
                    "redelivery.dead_letter = {:?} (a NACKed message is {} by ActiveMQ here)",
                    r.dead_letter(b),
                    if b.persistent {
                        "dead-lettered"
                    } else {
                        "dropped"
                    }
                ));
            }
            let (n, unlimited) = match r.limit {
                Limit::Deliveries(n) => (n.max(1), false),
                Limit::Unlimited => (2, true),
            };
            if n == 1 {
                return Ok(run::LiveRedelivery::Nack);
            }
            Ok(run::LiveRedelivery::Client {
                delays: (1..n)
                    .map(|i| Duration::from_micros(r.delay(i).micros()))
                    .collect(),
                unlimited,
            })
        }
    }
}

/// The failover list of client `i` (broker indices): `brokers` by name (default every broker in
/// file order), rotated by `i` under `connect = "spread"`, as the engine orders it.
pub fn failover_list(
    sc: &Scenario,
    list: &Option<Vec<String>>,
    connect: sim::scenario::Connect,
    i: usize,
) -> Vec<u16> {
    let mut l: Vec<u16> = match list {
        Some(names) => names
            .iter()
            .filter_map(|n| sc.broker_index(n).map(|b| b as u16))
            .collect(),
        None => (0..sc.brokers.len() as u16).collect(),
    };
    if connect == sim::scenario::Connect::Spread && !l.is_empty() {
        let n = l.len();
        l.rotate_left(i % n);
    }
    l
}

/// The run plan of `strategy` with `seed`.
pub fn plan(
    sc: &Scenario,
    strategy: LiveStrategy,
    seed: u64,
    drain: Duration,
) -> Result<Plan, String> {
    let fp = FaultPlan::resolve(sc, seed);
    let mut faults = Vec::new();
    for f in &fp.faults {
        let at = Duration::from_micros(f.at);
        // A window's length: without `for`, `what` would be staged, and it is not.
        let lasting = |what: &str| {
            f.duration.map(Duration::from_micros).ok_or_else(|| {
                format!(
                    "{} without `for`: {what} is not staged",
                    f.action.kind().name()
                )
            })
        };
        match f.action {
            FaultAction::BrokerCrash { broker, node: None } => {
                let d = lasting("a broker that never comes back")?;
                faults.push((at, Action::KillBroker(broker)));
                faults.push((at + d, Action::RestartBroker(broker)));
            }
            // Which messages are poison is part of the workload (`run::workload`).
            FaultAction::Poison { .. } => {}
            FaultAction::ConsumerCrash { consumer } => {
                let down = lasting("a consumer that never comes back")?;
                faults.push((at, Action::CrashConsumer { c: consumer, down }));
            }
            FaultAction::ConsumerPause { consumer } => {
                let d = lasting("a consumer that never resumes")?;
                faults.push((at, Action::PauseConsumer(consumer)));
                faults.push((at + d, Action::ResumeConsumer(consumer)));
            }
            FaultAction::NetworkBlip { consumer } => {
                let d = lasting("a connection that never comes back")?;
                faults.push((at, Action::CutConsumer(consumer)));
                faults.push((at + d, Action::HealConsumer(consumer)));
            }
            FaultAction::DbOutage => {
                let d = lasting("a database that never comes back")?;
                faults.push((at, Action::DbDown));
                faults.push((at + d, Action::DbUp));
            }
            ref a => return Err(format!("fault {:?} is not staged", a.kind().name())),
        }
    }
    faults.sort_by_key(|(t, _)| *t);
    let (schedule, poison) = run::workload(sc, calibrate::strategy_name(strategy), seed)?;
    Ok(Plan {
        target: rabbit_plan::target(sc, strategy),
        strategy,
        keys: sc.workload.keys,
        kind: sc.workload.kind,
        producers: sc.producers.count.max(1),
        consumers: sc.consumers.count,
        prefetch: sc.consumers.prefetch,
        persistent: sc.brokers[0].persistent,
        brokers: sc.brokers.iter().map(|b| b.name.clone()).collect(),
        bridge_prefetch: sc.network.prefetch,
        producer_lists: (0..sc.producers.count.max(1) as usize)
            .map(|i| failover_list(sc, &sc.producers.brokers, sc.producers.connect, i))
            .collect(),
        consumer_lists: (0..sc.consumers.count as usize)
            .map(|i| failover_list(sc, &sc.consumers.brokers, sc.consumers.connect, i))
            .collect(),
        poison,
        redelivery: live_redelivery(sc)?,
        service: sc.consumers.service.0.clone(),
        ack_latency: Duration::from_micros(sc.consumers.ack_latency.0),
        reconnect_delay: Duration::from_micros(sc.consumers.reconnect_delay.0),
        producer_reconnect_delay: Duration::from_micros(sc.producers.reconnect_delay.0),
        schedule,
        faults,
        drain_timeout: drain,
        seed,
        db: db::strategy_of(calibrate::strategy_name(strategy), sc).map_err(|e| e.join("; "))?,
        own: None,
    })
}

/// Why `strategies` of `sc` cannot run here, if a db handler among them needs a PostgreSQL
/// that is not installed.
pub fn needs_postgres(sc: &Scenario, strategies: &[String]) -> Option<String> {
    let wants = strategies
        .iter()
        .any(|s| matches!(db::strategy_of(s, sc), Ok(Some(_))));
    let why = postgres::missing().filter(|_| wants)?;
    Some(format!(
        "sim live needs PostgreSQL for the db handlers: {why}"
    ))
}

/// The user's consumer of `req` (`--consumer`, `--writes`, `--schema`), its database checked.
fn own_consumer(
    req: &LiveRequest,
    command: &str,
    sc: &Scenario,
) -> Result<own::OwnConsumer, CliError> {
    let writes = req
        .writes
        .as_deref()
        .map(writelog::WriteLog::parse)
        .transpose()
        .map_err(CliError::Usage)?;
    let schema = req
        .schema
        .as_ref()
        .map(|p| {
            let bytes = sim::scenario::read_bounded(p, sim::scenario::MAX_FILE_BYTES)
                .map_err(|e| CliError::Usage(format!("--schema {}: {e}", p.display())))?;
            String::from_utf8(bytes)
                .map_err(|_| CliError::Usage(format!("--schema {}: not UTF-8 text", p.display())))
        })
        .transpose()?;
    let database = writes.is_some()
        || schema.is_some()
        || sc.faults.iter().any(|f| f.kind == FaultKind::DbOutage);
    if let Some(why) = postgres::missing().filter(|_| database) {
        return Err(CliError::Usage(format!(
            "sim live --consumer needs PostgreSQL for the consumers' database (--writes, \
             --schema or a db_outage): {why}"
        )));
    }
    Ok(own::OwnConsumer {
        command: command.to_string(),
        writes,
        schema,
        database,
    })
}

/// Judges a live history with the simulator's checkers (as `sim judge` does).
pub fn judge(
    events: &[Event],
    keys: u32,
    kind: sim::scenario::WorkloadKind,
) -> Result<sim::Metrics, String> {
    crate::judge::judge_events(events, keys, kind)
        .map_err(|e| format!("the live history breaks a self-check: {e}"))
}

/// `sim live`: runs, prints the comparison table (one row per strategy and run).
pub fn live(req: &LiveRequest) -> Result<LiveOutcome, CliError> {
    if req.consumer.is_none() && (req.writes.is_some() || req.schema.is_some()) {
        return Err(CliError::Usage(
            "--writes and --schema go with --consumer (they describe your consumer's database)"
                .into(),
        ));
    }
    // Bounded, and a FIFO or a device refused before it is opened, as every command reads.
    let text = sim::scenario::read_scenario_text(&req.file)?;
    let sc = crate::load_text(&sim::scenario::display_path(&req.file), &text)?;
    let names = if req.strategies.is_empty() {
        sc.strategies.clone()
    } else {
        req.strategies.clone()
    };
    crate::check_strategy_names(&names)?;
    let refused = refusals_for(&text, &sc, &names, req.consumer.is_some());
    if !refused.is_empty() {
        return Err(CliError::Usage(format!(
            "sim live cannot stage {} faithfully: {}",
            req.file.display(),
            refused.join("; ")
        )));
    }
    if req.runs == 0 {
        return Err(CliError::Usage("--runs must be at least 1".into()));
    }
    let seed0 = req.seed.unwrap_or(sc.seed);
    crate::check_seed_range(
        seed0,
        u64::from(req.runs),
        if req.seed.is_some() {
            "--seed, --runs"
        } else {
            "the scenario's seed, --runs"
        },
    )
    .map_err(CliError::Usage)?;
    // Every output checked first: what cannot be written is found without a broker.
    if let Some(dir) = &req.out {
        let inputs: Vec<&Path> = std::iter::once(req.file.as_path())
            .chain(req.schema.as_deref())
            .collect();
        crate::check_outputs(
            Some(dir),
            &history_outputs(dir, &names, seed0, req.runs),
            &inputs,
        )?;
    }
    // The user's consumer's inputs (`--writes`, `--schema`) read before anything installed is
    // looked for: a bad input is the same error on a machine without the broker.
    let own = match &req.consumer {
        Some(command) => Some(own_consumer(req, command, &sc)?),
        None => None,
    };
    if let Some(why) = rabbit_plan::missing(&sc) {
        return Err(CliError::Usage(format!("sim live needs {why}")));
    }
    if let Some(why) = needs_postgres(&sc, &names) {
        return Err(CliError::Usage(why));
    }
    if let Some(dir) = &req.out {
        crate::create_dir(dir)?;
    }
    // Every run's plan before the first broker starts: a fault the plan cannot stage is refused
    // now, not after the runs before it.
    let mut plans = Vec::new();
    for name in &names {
        let strategy = LiveStrategy::parse(name).expect("refused above");
        for i in 0..req.runs {
            let seed = seed0 + u64::from(i);
            let mut p = plan(&sc, strategy, seed, req.drain_timeout).map_err(CliError::Usage)?;
            p.own = own.clone();
            plans.push((name, seed, p));
        }
    }
    broker::install_interrupt_handler();
    let total = plans.len() as u64;
    let mut entries = Vec::new();
    let mut notes = supplied_by_the_broker(&sc) + &rabbit_plan::version_notes(&sc, &names);
    let mut off = Vec::new();
    let mut failed = None;
    for (name, seed, p) in &plans {
        let (name, seed) = (*name, *seed);
        let done = entries.len() as u64;
        let one = (|| {
            let r = run::run(p).map_err(|e| live_error(&e, done, total, &req.file))?;
            let (n, o) = run_notes(&format!("{name} seed {seed}"), &r);
            if let Some(dir) = &req.out {
                write_history(dir, &sc, &req.file, name, seed, &r.events)?;
            }
            let m = judge(&r.events, sc.workload.keys, sc.workload.kind)
                .map_err(|e| CliError::Live(format!("{name} seed {seed}: {e}")))?;
            Ok::<_, CliError>((n, o, m))
        })();
        let (n, o, m) = match one {
            Ok(x) => x,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        notes.push_str(&n);
        off.extend(o);
        let label = if req.runs > 1 {
            format!("{name}@{seed}")
        } else {
            name.clone()
        };
        entries.push(
            StrategySummary::new(label, Status::Ok, None, Some(m), Params::default())
                .judged(strategies::guarantee(name)),
        );
    }
    let finished = entries.len();
    let summary = RunSummary {
        scenario: scenario_name(&sc, &req.file),
        seed: seed0,
        strategies: entries,
    };
    let text = format!(
        "live: sim live {} (seeds {}..{}), {}\n{}{notes}",
        req.file.display(),
        seed0,
        seed0 + u64::from(req.runs) - 1,
        broker_at(&sc),
        report::table(&summary)
    );
    if let Some(e) = failed {
        // The runs finished before an interrupt or a failure are kept: their table (and with
        // --out their histories) before the error.
        if finished > 0 {
            crate::stdout_write(&format!(
                "{text}({finished} of {total} run(s) finished before the error below)\n"
            ))?;
        }
        return Err(e);
    }
    Ok(LiveOutcome { text, off })
}

/// The live broker and where it is installed, for the output.
pub fn broker_at(sc: &Scenario) -> String {
    match rabbit_plan::broker_of(sc) {
        crate::staging::LiveBroker::ActiveMq => {
            format!("ActiveMQ Classic at {}", broker::activemq_home().display())
        }
        crate::staging::LiveBroker::RabbitMq => format!(
            "{} at {}",
            rabbit_plan::product(sc),
            rabbitmq::server().display()
        ),
    }
}

/// A run's error as the CLI's: `done` of `total` runs of `file` had finished.
pub fn live_error(e: &str, done: u64, total: u64, file: &Path) -> CliError {
    if e == "interrupted" {
        CliError::Interrupted {
            done,
            total,
            resume: format!(
                "sim live {} (a live run cannot be resumed: this runs every run again)",
                file.display()
            ),
        }
    } else {
        CliError::Live(e.to_string())
    }
}

/// The histories `--out DIR` would write (`DIR/STRATEGY-SEED.jsonl`, for `names` and the `runs`
/// seeds from `seed0`) that are there already, and the first of each strategy: what
/// [`crate::check_outputs`] checks before any run. Only a path that exists can be a directory in
/// the way or one of the inputs, and `--runs` may be large: the others are not listed.
pub fn history_outputs(
    dir: &Path,
    names: &[String],
    seed0: u64,
    runs: u32,
) -> Vec<(&'static str, PathBuf)> {
    let ours = |file_name: &str| {
        let Some((name, seed)) = file_name
            .strip_suffix(".jsonl")
            .and_then(|stem| stem.rsplit_once('-'))
        else {
            return false;
        };
        let Ok(seed) = seed.parse::<u64>() else {
            return false;
        };
        names.iter().any(|n| n == name) && seed >= seed0 && seed - seed0 < u64::from(runs)
    };
    let mut paths: std::collections::BTreeSet<PathBuf> =
        names.iter().map(|n| history_file(dir, n, seed0)).collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_str().is_some_and(ours) {
                paths.insert(e.path());
            }
        }
    }
    paths.into_iter().map(|p| ("--out", p)).collect()
}

/// `DIR/STRATEGY-SEED.jsonl`: where [`write_history`] writes a run's history.
pub fn history_file(dir: &Path, strategy: &str, seed: u64) -> PathBuf {
    dir.join(format!("{strategy}-{seed}.jsonl"))
}

/// [`history_file`]: the trace header, then the events.
pub fn write_history(
    dir: &Path,
    sc: &Scenario,
    file: &Path,
    strategy: &str,
    seed: u64,
    events: &[Event],
) -> Result<(), CliError> {
    let mut header = TraceHeader::of(sc, file, Some(strategy), Some(seed));
    header.description = Some(format!(
        "live run against {}: {}",
        rabbit_plan::product(sc),
        sc.description.clone().unwrap_or_default()
    ));
    let out = crate::trace::history_jsonl(&header, events);
    crate::write_atomic(&history_file(dir, strategy, seed), &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::history::{MsgRef, Node};

    pub(super) fn refused(text: &str, strategies: &[&str]) -> Vec<String> {
        let sc = crate::load_text("t", text).unwrap();
        let names: Vec<String> = strategies.iter().map(|s| s.to_string()).collect();
        refusals(text, &sc, &names)
    }

    pub(super) const BASE: &str = r#"
strategies = ["competing"]
[workload]
messages = 10
rate = "10/s"
keys = 2
[[broker]]
name = "a"
persistent = true
[consumers]
count = 2
prefetch = 1
service = "1ms"
"#;

    #[test]
    fn the_staged_subset_is_accepted() {
        let t = format!(
            "{BASE}[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"1s\"\nfor = \"1s\"\n\
             [[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"2s\"\nfor = \"1s\"\n"
        );
        assert_eq!(
            refused(&t, &["competing", "single", "message_groups"]),
            Vec::<String>::new()
        );
        let bundled = include_str!("../../../scenarios/calibration/crash-groups.toml");
        assert_eq!(
            refused(bundled, &["competing", "message_groups"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_broker_turns_nagle_off_on_its_stomp_connector() {
        let mut conf = broker::BrokerConf::single("a", true).unwrap();
        conf.stomp_port = 61613;
        let x = broker::activemq_xml(&conf, Path::new("/tmp/x"));
        assert!(
            x.contains(r#"uri="stomp://127.0.0.1:61613?transport.tcpNoDelay=true""#),
            "{x}"
        );
    }

    #[test]
    fn every_calibration_scenario_can_be_staged() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/calibration");
        let files = calibrate::scenario_files(&[dir]).unwrap();
        assert!(!files.is_empty());
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let sc = crate::load_text("t", &text).unwrap();
            assert_eq!(
                refusals(&text, &sc, &sc.strategies),
                Vec::<String>::new(),
                "{f:?}"
            );
            assert!(
                sc.expect.is_none(),
                "{f:?}: calibration scenarios carry no [expect]"
            );
        }
    }

    #[test]
    fn what_cannot_be_staged_is_named() {
        assert_eq!(refused(BASE, &["resequencer"]).len(), 1);
        assert!(refused(BASE, &["resequencer"])[0].contains("\"resequencer\""));
        let t = format!(
            "{BASE}[[fault]]\nkind = \"network_blip\"\nconsumer = 0\nat = \"1s\"\nfor = \"1s\"\n"
        );
        assert!(refused(&t, &["competing"])[0].contains("network_blip"));
        let t = format!(
            "{BASE}[[fault]]\nkind = \"member_leave\"\nbroker = \"a\"\nat = \"1s\"\nfor = \"1s\"\n"
        );
        assert!(refused(&t, &["competing"])[0].contains("\"member_leave\" (staged: "));
        let t = BASE.replace(
            "service = \"1ms\"",
            "service = \"1ms\"\nsuspend_after_failures = 3",
        );
        assert_eq!(
            refused(&t, &["competing"]),
            vec!["consumers.suspend_after_failures (not staged)".to_string()]
        );
        let t = BASE.replace("keys = 2", "keys = 2\ngroup_header_missing = 0.1");
        assert_eq!(
            refused(&t, &["competing"]),
            vec!["workload.group_header_missing (every SEND carries its group)".to_string()]
        );
        // Accepted once and silently not staged (issue 37): now refused, the field named.
        let t = format!("{BASE}[redelivery]\nmode = \"non_blocking\"\n");
        assert_eq!(refused(&t, &["competing"]).len(), 1);
        assert!(refused(&t, &["competing"])[0].starts_with("[redelivery] without poison"));
        let t = format!("{BASE}[lease]\nduration = \"1s\"\n");
        assert_eq!(
            refused(&t, &["competing"]),
            vec!["[lease] (no lease is staged)".to_string()]
        );
        let t = format!("{BASE}[strategy.single]\ntakeover_delay = \"2s\"\n");
        assert_eq!(
            refused(&t, &["single"]),
            vec!["[strategy.single] takeover_delay".to_string()]
        );
        let t = format!("{BASE}[strategy.single]\ntakeover_delay = \"0s\"\n");
        assert!(refused(&t, &["single"]).is_empty());
    }

    #[test]
    fn own_consumers_stage_a_pause_and_refuse_poison_and_the_db_handlers() {
        let own = |text: &str, strategies: &[&str]| {
            let sc = crate::load_text("t", text).unwrap();
            let names: Vec<String> = strategies.iter().map(|s| s.to_string()).collect();
            refusals_for(text, &sc, &names, true)
        };
        let pause = format!(
            "{BASE}[[fault]]\nkind = \"consumer_pause\"\nconsumer = 1\nat = \"1s\"\nfor = \"1s\"\n"
        );
        assert!(own(&pause, &["competing", "single", "message_groups"]).is_empty());
        // ordsim's own consumer threads cannot pause: still refused without --consumer.
        assert!(refused(&pause, &["competing"])[0].contains("consumer_pause"));
        let bundled = include_str!("../../../examples/own-consumer.toml");
        assert!(own(bundled, &["competing"]).is_empty());
        let r = own(&format!("{BASE}{POISON}"), &["competing"]);
        assert!(r.iter().any(|x| x.contains("fault.fraction")), "{r:?}");
        assert!(
            r.iter().any(|x| x.starts_with("poison (--consumer")),
            "{r:?}"
        );
        let r = own(BASE, &["db_optimistic"]);
        assert!(
            r.iter().any(|x| x.contains("the consumer is the handler")),
            "{r:?}"
        );
        let blip = format!(
            "{BASE}[[fault]]\nkind = \"network_blip\"\nconsumer = 0\nat = \"1s\"\nfor = \"1s\"\n"
        );
        // RabbitMQ: competing, single and rabbitmq_sac; rabbitmq_hash and message_groups refused.
        let rabbit = format!("flavour = \"rabbitmq\"\n{BASE}");
        assert!(
            own(&rabbit, &["competing", "single", "rabbitmq_sac"]).is_empty(),
            "{:?}",
            own(&rabbit, &["competing", "single", "rabbitmq_sac"])
        );
        assert!(own(&rabbit, &["rabbitmq_hash"])[0].contains("several queues"));
        assert!(own(&rabbit, &["message_groups"])[0].contains("JMSXGroupID"));
        let env_of = |text: &str, s: LiveStrategy| {
            let p = plan(
                &crate::load_text("t", text).unwrap(),
                s,
                1,
                Duration::from_secs(1),
            )
            .unwrap();
            own::env(&p, &[61613], None, 0, "/tmp")
        };
        let var = |env: &[(String, String)], k: &str| {
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        };
        let e = env_of(&rabbit, LiveStrategy::RabbitmqSac);
        assert_eq!(
            var(&e, "ORDSIM_QUEUE").as_deref(),
            Some("/amq/queue/ordsim")
        );
        assert_eq!(
            var(&e, "ORDSIM_BROKER_PRODUCT").as_deref(),
            Some("rabbitmq")
        );
        assert!(var(&e, "ORDSIM_SUBSCRIBE_HEADERS")
            .unwrap()
            .starts_with("prefetch-count:"));
        let e = env_of(BASE, LiveStrategy::Single);
        assert_eq!(var(&e, "ORDSIM_QUEUE").as_deref(), Some("/queue/ordsim"));
        assert_eq!(
            var(&e, "ORDSIM_SUBSCRIBE_HEADERS").as_deref(),
            Some("activemq.exclusive:true")
        );
        // A blip cuts the copy's proxies: staged for own consumers, refused for ordsim's.
        assert!(own(&blip, &["competing"]).is_empty());
        assert!(refused(&blip, &["competing"])[0].contains("network_blip"));
        let faults_of = |text: &str| {
            plan(
                &crate::load_text("t", text).unwrap(),
                LiveStrategy::Competing,
                1,
                Duration::from_secs(1),
            )
            .unwrap()
            .faults
        };
        let (one, two) = (Duration::from_secs(1), Duration::from_secs(2));
        assert_eq!(
            faults_of(&blip),
            [
                (one, Action::CutConsumer(0)),
                (two, Action::HealConsumer(0))
            ]
        );
        // A staged list names it for own consumers.
        let slow = format!(
            "{BASE}[[fault]]\nkind = \"slow_consumer\"\nconsumer = 0\nfactor = 2.0\nat = \"1s\"\nfor = \"1s\"\n"
        );
        let r = own(&slow, &["competing"]);
        assert!(
            r.iter()
                .any(|x| x.contains("slow_consumer") && x.contains("network_blip")),
            "{r:?}"
        );
        assert_eq!(
            faults_of(&pause),
            [
                (one, Action::PauseConsumer(1)),
                (two, Action::ResumeConsumer(1))
            ]
        );
    }

    #[test]
    fn frames_carry_the_strategy() {
        let m = MsgRef {
            id: 7,
            key: 3,
            seq: 2,
        };
        let f = run::send_frame(m, LiveStrategy::MessageGroups, true, false);
        assert_eq!(f.get("JMSXGroupID"), Some("k3"));
        assert_eq!(f.get("persistent"), Some("true"));
        assert_eq!(run::msg_of(&f), Some(m));
        assert_eq!(
            run::send_frame(m, LiveStrategy::Competing, false, false).get("JMSXGroupID"),
            None
        );
        let s = run::subscribe_frame(LiveStrategy::Single, 10);
        assert_eq!(s.get("activemq.exclusive"), Some("true"));
        assert_eq!(s.get("activemq.prefetchSize"), Some("10"));
        assert_eq!(s.get("ack"), Some("client-individual"));
        assert_eq!(
            run::subscribe_frame(LiveStrategy::Competing, 10).get("activemq.exclusive"),
            None
        );
    }

    #[test]
    fn a_client_only_history_is_judged() {
        // What a live run records: no enqueue, no broker-side dispatch bookkeeping, a crash, a
        // replayed (duplicate, out of order) apply, and a message left in the queue.
        let rec = run::Recorder::new(1);
        let a = rec.produce(0, 0, false);
        let b = rec.produce(0, 0, false);
        let c = rec.produce(0, 0, false);
        for (m, consumer) in [(a, 0), (b, 1)] {
            rec.push(|t| Event::Dispatch {
                t,
                msg: m,
                broker: 0,
                consumer,
                delivery: 1,
                redelivered: false,
            });
            rec.push(|t| Event::Start {
                t,
                msg: m,
                consumer,
            });
            rec.push(|t| Event::Apply {
                t,
                msg: m,
                consumer,
                state_seq: m.seq,
            });
        }
        rec.push(|t| Event::Ack {
            t,
            msg: b,
            consumer: 1,
        });
        rec.push(|t| Event::Crash {
            t,
            node: Node::Consumer(0),
        });
        rec.push(|t| Event::Apply {
            t,
            msg: a,
            consumer: 1,
            state_seq: a.seq,
        });
        rec.push(|t| Event::Ack {
            t,
            msg: a,
            consumer: 1,
        });
        rec.push(|t| Event::Pending { t, msg: c });
        assert!(rec.applied(a.id) && !rec.applied(c.id));
        let m = judge(&rec.into_events(), 1, sim::scenario::WorkloadKind::State).unwrap();
        assert_eq!(m.produced, 3);
        assert_eq!(m.applied, 2);
        assert_eq!(m.duplicates, 1);
        assert_eq!(m.ordering_violations, 1);
        assert_eq!(m.pending_at_end, 1);
        assert_eq!(m.coverage.consumer_crashes, 1);
    }

    /// The live producers send what `sim run --seed` produces: the same times, producers and
    /// keys (drawn from the simulator's streams, so whatever strategy's run they are read from),
    /// and another seed sends something else.
    #[test]
    fn the_live_workload_is_the_simulators_at_the_same_seed() {
        let text = BASE
            .replace("messages = 10", "messages = 200")
            .replace("keys = 2", "keys = 8")
            .replace("[[broker]]", "[producers]\ncount = 2\n[[broker]]");
        let sc = crate::load_text("t", &text).unwrap();
        let (s, poison) = run::workload(&sc, "competing", 3).unwrap();
        assert_eq!(s.len(), 200);
        assert!(poison.iter().all(|p| !p));
        let mut produced = Vec::new();
        let plan = sim::faults::FaultPlan::resolve(&sc, 3);
        let opts = sim::RunOptions {
            seed: 3,
            max_events: None,
            max_sim_time: None,
        };
        let mut see = |e: &sim::history::Event| {
            if let sim::history::Event::Produce {
                t, msg, producer, ..
            } = *e
            {
                produced.push((Duration::from_micros(t), producer, msg.key));
            }
        };
        strategies::run_named("single", &sc, &plan, &opts, Some(&mut see)).unwrap();
        assert_eq!(s, produced);
        assert!(s.iter().any(|m| m.1 == 1), "both producers send");
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0));
        assert_ne!(s, run::workload(&sc, "competing", 4).unwrap().0);
    }

    const POISON: &str =
        "[[fault]]\nkind = \"poison\"\nat = \"1010ms\"\nfor = \"20ms\"\nfraction = 1.0\n";

    fn redelivery_of(extra: &str) -> Result<run::LiveRedelivery, String> {
        let t = format!("{BASE}{POISON}{extra}");
        live_redelivery(&crate::load_text("t", &t).unwrap())
    }

    #[test]
    fn poison_is_staged_as_a_nack_with_or_without_the_plugin() {
        // Without poison no plugin, whatever [redelivery] says.
        let sc = crate::load_text(
            "t",
            &format!("{BASE}[redelivery]\nmode = \"non_blocking\"\n"),
        )
        .unwrap();
        assert_eq!(live_redelivery(&sc), Ok(run::LiveRedelivery::Nack));
        // One delivery: NACK, dead-lettered at once by the broker.
        let r = redelivery_of("[redelivery]\nmax_redeliveries = 0\n").unwrap();
        assert_eq!(r, run::LiveRedelivery::Nack);
        assert_eq!(r.final_nacks(), Some(1));
        // The activemq flavour's default: the JMS client's blocking redelivery, 1s x 6, emulated.
        let r = redelivery_of("").unwrap();
        assert_eq!(r.client_delay(1), Some(Duration::from_secs(1)));
        assert_eq!(r.client_delay(6), Some(Duration::from_secs(1)));
        assert_eq!(r.client_delay(7), None);
        assert_eq!(r.final_nacks(), Some(1));
        // Broker-side: the redelivery plugin.
        let r = redelivery_of(
            "[redelivery]\nmode = \"non_blocking\"\ninitial_delay = \"2s\"\nmax_redeliveries = 3\nrequeue = \"tail\"\n",
        )
        .unwrap();
        let run::LiveRedelivery::Plugin(p) = &r else {
            panic!("{r:?}")
        };
        assert_eq!(
            (p.max_redeliveries, p.delay_ms, p.dead_letter),
            (3, 2000, true)
        );
        assert_eq!(r.final_nacks(), Some(4));
        assert_eq!(r.client_delay(1), None);
        // What the plugin cannot do is named.
        let e = redelivery_of("[redelivery]\nmode = \"non_blocking\"\ninitial_delay = \"2s\"\n")
            .unwrap_err();
        assert!(e.contains("redelivery.requeue"), "{e}");
        let e = redelivery_of(
            "[redelivery]\nmode = \"non_blocking\"\ninitial_delay = \"500ms\"\nrequeue = \"tail\"\n",
        )
        .unwrap_err();
        assert!(e.contains("redelivery.initial_delay"), "{e}");
        let t = format!("{BASE}{POISON}[redelivery]\nmax_redeliveries = 0\n");
        assert!(refused(&t, &["competing", "single", "message_groups"]).is_empty());
        let t = format!("{BASE}{POISON}[redelivery]\ndead_letter = \"drop\"\n");
        assert!(refused(&t, &["competing"])[0].contains("redelivery.dead_letter"));
    }

    #[test]
    fn the_plugin_and_the_network_are_in_the_broker_config() {
        let mut c = broker::BrokerConf::single("a", true).unwrap();
        let x = broker::activemq_xml(&c, Path::new("/tmp/x"));
        assert!(x.contains(r#"schedulerSupport="false""#) && !x.contains("redeliveryPlugin"));
        assert!(x.contains(r#"advisorySupport="false""#) && !x.contains("networkConnector"));
        c.plugin = Some(broker::PluginPolicy {
            max_redeliveries: 2,
            delay_ms: 1000,
            multiplier: 1.0,
            max_delay_ms: None,
            dead_letter: true,
        });
        c.peers = vec![("b".into(), 61617)];
        c.bridge_prefetch = 50;
        let x = broker::activemq_xml(&c, Path::new("/tmp/x"));
        assert!(x.contains(r#"schedulerSupport="true""#), "{x}");
        assert!(
            x.contains(r#"<redeliveryPolicy maximumRedeliveries="2" initialRedeliveryDelay="1000" redeliveryDelay="1000" maximumRedeliveryDelay="-1"/>"#),
            "{x}"
        );
        assert!(x.contains(r#"sendToDlqIfMaxRetriesExceeded="true""#), "{x}");
        assert!(x.contains(r#"advisorySupport="true""#), "{x}");
        assert!(x.contains("static:(tcp://127.0.0.1:61617)"), "{x}");
        assert!(
            x.contains(r#"prefetchSize="50" networkTTL="1" conduitSubscriptions="true""#),
            "{x}"
        );
        assert!(
            x.contains(&format!(r#"uri="tcp://127.0.0.1:{}""#, c.openwire_port)),
            "{x}"
        );
    }

    /// A `poison` window with `fraction = 1.0` poisons every message produced inside it and no
    /// other; `poison_fraction` poisons about its share of the rest, the same ones at one seed.
    #[test]
    fn poison_windows_and_fractions_pick_the_messages() {
        let text = BASE
            .replace("messages = 10", "messages = 100")
            .replace("rate = \"10/s\"", "rate = \"50/s\"\narrival = \"constant\"");
        let sc = crate::load_text("t", &format!("{text}{POISON}")).unwrap();
        let (s, p) = run::workload(&sc, "competing", 1).unwrap();
        let window = Duration::from_millis(1010)..Duration::from_millis(1030);
        for (m, poison) in s.iter().zip(&p) {
            assert_eq!(*poison, window.contains(&m.0), "the message at {:?}", m.0);
        }
        assert_eq!(p.iter().filter(|x| **x).count(), 1, "1020 ms only");
        let sc = crate::load_text(
            "t",
            &text.replace("keys = 2", "keys = 2\npoison_fraction = 0.5"),
        )
        .unwrap();
        let (_, p) = run::workload(&sc, "competing", 1).unwrap();
        let n = p.iter().filter(|x| **x).count();
        assert!((30..=70).contains(&n), "{n}");
        assert_eq!(p, run::workload(&sc, "competing", 1).unwrap().1);
    }

    #[test]
    fn the_recorder_counts_a_poison_message_settled_after_its_last_nack() {
        let rec = run::Recorder::new(1);
        let a = rec.produce(0, 0, true);
        let b = rec.produce(0, 0, false);
        rec.push(|t| Event::Apply {
            t,
            msg: b,
            consumer: 0,
            state_seq: b.seq,
        });
        assert_eq!(rec.progress(Some(2)), (2, 1));
        rec.nacked(a.id);
        assert_eq!(rec.progress(Some(2)), (2, 1));
        rec.nacked(a.id);
        assert_eq!(rec.progress(Some(2)), (2, 2));
        assert_eq!(rec.progress(None), (2, 1));
        let f = run::send_frame(a, LiveStrategy::Competing, true, true);
        assert!(run::poison_of(&f));
        assert!(!run::poison_of(&run::send_frame(
            b,
            LiveStrategy::Competing,
            true,
            false
        )));
    }

    #[test]
    fn failover_lists_follow_the_engine() {
        let t = BASE.replace(
            "[[broker]]\nname = \"a\"\npersistent = true\n",
            "[[broker]]\nname = \"a\"\n[[broker]]\nname = \"b\"\n",
        );
        let sc = crate::load_text("t", &t).unwrap();
        use sim::scenario::Connect;
        assert_eq!(failover_list(&sc, &None, Connect::First, 1), vec![0, 1]);
        assert_eq!(failover_list(&sc, &None, Connect::Spread, 1), vec![1, 0]);
        assert_eq!(
            failover_list(&sc, &Some(vec!["b".into()]), Connect::First, 0),
            vec![1]
        );
        // The default forward_delay (5 ms) is more than a loopback bridge takes: refused.
        let r = refused(&t, &["competing"]);
        assert!(
            r.len() == 1 && r[0].starts_with("network.forward_delay = 5ms"),
            "{r:?}"
        );
        let t = format!("{t}[network]\nforward_delay = \"1ms\"\n");
        assert!(refused(&t, &["competing"]).is_empty());
        let listed = supplied_by_the_broker(&crate::load_text("t", &t).unwrap());
        assert!(listed.contains("network.forward_delay"), "{listed}");
        assert!(listed.contains("broker.dispatch_latency"), "{listed}");
        assert!(
            !listed.contains("restart_time"),
            "no broker crash: {listed}"
        );
    }
}
