//! `sim live FILE --consumer CMD` (issue 40 section 1) against a real ActiveMQ Classic (cargo
//! feature `live`): the two example consumers in examples/ under examples/own-consumer.toml, and
//! a consumer that exits at once. Each test skips, with its reason printed, when ActiveMQ or
//! python3 is not installed (scripts/live-setup.sh installs ActiveMQ; .ci/run installs python3).

use crate::live::serial;
use ordsim::live::{broker, judge, own, plan, run};
use std::time::Duration;

const SCENARIO: &str = "examples/own-consumer.toml";

fn skip() -> bool {
    if let Some(why) = broker::missing() {
        eprintln!("skipped: {why}");
        return true;
    }
    skip_python()
}

fn skip_python() -> bool {
    let python = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !python {
        eprintln!("skipped: python3 is not installed (the example consumers need it)");
        return true;
    }
    false
}

/// One live run of the example scenario with `command` as its consumers: the judged metrics.
fn run_with(command: &str) -> sim::Metrics {
    run_own(
        SCENARIO,
        own::OwnConsumer {
            command: command.into(),
            ..Default::default()
        },
    )
}

/// One live run of `file` with `own` as its consumers: the judged metrics.
fn run_own(file: &str, own: own::OwnConsumer) -> sim::Metrics {
    crate::common::at_root();
    let text = std::fs::read_to_string(file).unwrap();
    run_text(file, &text, run::LiveStrategy::Competing, own)
}

/// One live run of scenario `text` under `strategy` with `own` as its consumers.
fn run_text(
    file: &str,
    text: &str,
    strategy: run::LiveStrategy,
    own: own::OwnConsumer,
) -> sim::Metrics {
    let command = own.command.clone();
    let sc = ordsim::load_text(file, text).unwrap();
    let refused = ordsim::live::refusals_for(
        text,
        &sc,
        &[ordsim::live::calibrate::strategy_name(strategy).to_string()],
        true,
    );
    assert!(refused.is_empty(), "{refused:?}");
    let mut p = plan(&sc, strategy, sc.seed, Duration::from_secs(30)).unwrap();
    p.own = Some(own);
    let r = run::run(&p).unwrap_or_else(|e| panic!("{command}: {e}"));
    assert!(own::live_groups().is_empty(), "no consumer is left running");
    assert!(
        broker::live_children().is_empty(),
        "no broker is left running"
    );
    let crashes = r
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                sim::history::Event::Crash {
                    node: sim::history::Node::Consumer(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(crashes, 1, "consumer 0 was killed once");
    let blips = sc
        .faults
        .iter()
        .filter(|f| f.kind == sim::scenario::FaultKind::NetworkBlip)
        .count();
    let cuts = r
        .events
        .iter()
        .filter(|e| matches!(e, sim::history::Event::Disconnect { .. }))
        .count();
    assert_eq!(cuts, blips, "each network_blip cut its copy off once");
    judge(&r.events, sc.workload.keys, sc.workload.kind).unwrap()
}

#[test]
fn the_naive_consumer_breaks_order_and_the_guarded_one_does_not() {
    if skip() {
        return;
    }
    let _serial = serial();
    let naive = run_with("python3 examples/naive_consumer.py");
    assert_eq!(naive.produced, 600);
    assert!(
        naive.ordering_violations + naive.stale_writes > 0,
        "the frozen copy's old messages overwrite newer state: {naive:?}"
    );
    assert!(
        naive.duplicates > 0,
        "at the network_blip, the messages copy 0 wrote but had not acked go to copy 1: {naive:?}"
    );
    assert_eq!(naive.stale_rejected, 0);
    let guarded = run_with("python3 examples/guarded_consumer.py");
    assert_eq!(guarded.produced, 600);
    assert_eq!(
        (
            guarded.ordering_violations,
            guarded.stale_writes,
            guarded.lost
        ),
        (0, 0, 0),
        "{guarded:?}"
    );
    assert!(
        guarded.stale_rejected > 0,
        "the guard's skips are in the history: {guarded:?}"
    );
}

#[test]
fn the_write_log_shows_what_a_consumer_wrote_through_a_database_outage() {
    if skip() {
        return;
    }
    if let Some(why) = ordsim::live::postgres::missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = serial();
    let file = "examples/own-consumer-db.toml";
    let with = |command: &str| own::OwnConsumer {
        command: command.into(),
        writes: Some(ordsim::live::writelog::WriteLog::parse("rows(k,state)").unwrap()),
        database: true,
        ..Default::default()
    };
    // Nothing applied is printed: every apply in the history comes from the write log.
    let naive = run_own(file, with("python3 examples/pg_consumer.py"));
    assert_eq!(naive.produced, 600);
    assert!(
        naive.ordering_violations + naive.stale_writes > 0,
        "the frozen copy's old messages overwrite newer rows: {naive:?}"
    );
    assert_eq!((naive.lost, naive.pending_at_end), (0, 0), "{naive:?}");
    let guarded = run_own(file, with("python3 examples/pg_consumer.py --guarded"));
    assert_eq!(
        (
            guarded.ordering_violations,
            guarded.stale_writes,
            guarded.lost
        ),
        (0, 0, 0),
        "{guarded:?}"
    );
    assert!(
        guarded.applied > 0 && guarded.stale_rejected > 0,
        "{guarded:?}"
    );
}

/// The same example on RabbitMQ: the naive consumer breaks order among competing consumers; with
/// single active consumer (the queue's argument, nothing in the consumer) it does not, though
/// the crash still duplicates what copy 0 wrote and had not acked.
#[test]
fn on_rabbitmq_the_naive_consumer_breaks_order_unless_the_queue_has_one_active_consumer() {
    if let Some(why) = ordsim::live::rabbitmq::missing() {
        eprintln!("skipped: {why}");
        return;
    }
    if skip_python() {
        return;
    }
    let _serial = serial();
    crate::common::at_root();
    let text = format!(
        "flavour = \"rabbitmq\"\n{}",
        std::fs::read_to_string(SCENARIO).unwrap()
    );
    let naive = || own::OwnConsumer {
        command: "python3 examples/naive_consumer.py".into(),
        ..Default::default()
    };
    let competing = run_text(SCENARIO, &text, run::LiveStrategy::Competing, naive());
    assert_eq!(competing.produced, 600);
    assert!(
        competing.ordering_violations + competing.stale_writes > 0,
        "{competing:?}"
    );
    let sac = run_text(SCENARIO, &text, run::LiveStrategy::RabbitmqSac, naive());
    assert_eq!(
        (sac.ordering_violations, sac.stale_writes, sac.lost),
        (0, 0, 0),
        "{sac:?}"
    );
    assert_eq!(sac.applied, 600, "{sac:?}");
}

#[test]
fn a_consumer_that_exits_at_once_is_refused_with_its_stderr() {
    if skip() {
        return;
    }
    let _serial = serial();
    crate::common::at_root();
    let e = ordsim::live::live(&ordsim::live::LiveRequest {
        file: SCENARIO.into(),
        strategies: vec![],
        runs: 1,
        seed: None,
        out: None,
        drain_timeout: Duration::from_secs(5),
        strict: false,
        consumer: Some("echo 'cannot reach the database' >&2; exit 3".into()),
        writes: None,
        schema: None,
    })
    .err()
    .expect("refused");
    let e = e.to_string();
    assert!(e.contains("exited by itself"), "{e}");
    assert!(e.contains("cannot reach the database"), "{e}");
    assert!(own::live_groups().is_empty() && broker::live_children().is_empty());
}
