//! `sim live` against a real ActiveMQ Classic (cargo feature `live`). Each test skips, with its
//! reason printed, when ActiveMQ or Java is not installed (scripts/live-setup.sh installs them).

use ordsim::live::{broker, judge, run};
use sim::history::{Event, Node};
use std::time::Duration;

fn skip() -> bool {
    if let Some(why) = broker::missing() {
        eprintln!("skipped: {why}");
        return true;
    }
    false
}

/// The `java` processes started by sim process `pid`: their command line names its temporary
/// directories (`ordsim-live-PID-...`).
fn brokers_of(pid: u32) -> Vec<u32> {
    let tag = format!("ordsim-live-{pid}-");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(&tag) {
                out.push(p);
            }
        }
    }
    out
}

fn tiny_plan(strategy: run::LiveStrategy, faults: Vec<(Duration, run::Action)>) -> run::Plan {
    let sc = ordsim::load_text(
        "tiny",
        r#"
strategies = ["competing"]
[workload]
messages = 150
rate = "100/s"
keys = 5
[[broker]]
name = "a"
persistent = true
[consumers]
count = 2
prefetch = 5
service = "2ms"
ack_latency = "10ms"
"#,
    )
    .unwrap();
    run::Plan {
        strategy,
        keys: 5,
        kind: sim::scenario::WorkloadKind::State,
        producers: 1,
        consumers: 2,
        prefetch: 5,
        persistent: true,
        broker: "a".into(),
        service: sc.consumers.service.0.clone(),
        ack_latency: Duration::from_millis(10),
        reconnect_delay: Duration::from_millis(100),
        schedule: run::schedule(&sc, 1),
        faults,
        drain_timeout: Duration::from_secs(20),
        seed: 1,
    }
}

#[test]
fn tiny_live_run_with_a_consumer_crash_and_a_broker_crash_is_judged_and_cleaned_up() {
    if skip() {
        return;
    }
    let plan = tiny_plan(
        run::LiveStrategy::MessageGroups,
        vec![
            (
                Duration::from_millis(300),
                run::Action::CrashConsumer {
                    c: 0,
                    down: Duration::from_millis(300),
                },
            ),
            (Duration::from_millis(800), run::Action::KillBroker),
            (Duration::from_millis(1000), run::Action::RestartBroker),
        ],
    );
    let events = run::run(&plan).expect("the live run");
    let m = judge(&events, plan.keys, plan.kind).expect("the checkers accept a client history");
    eprintln!(
        "live tiny run: produced {} applied {} violations {} duplicates {} lost {} pending {} p99 {:.1}ms",
        m.produced,
        m.applied,
        m.ordering_violations,
        m.duplicates,
        m.lost,
        m.pending_at_end,
        m.latency_ms.p99
    );
    assert_eq!(m.produced, 150);
    // A persistent broker loses nothing; everything drained.
    assert_eq!(m.lost, 0);
    assert_eq!(m.applied, 150);
    let crashed = |n: Node| {
        events
            .iter()
            .any(|e| matches!(e, Event::Crash { node, .. } if *node == n))
    };
    assert!(crashed(Node::Consumer(0)));
    assert!(crashed(Node::Broker(0)));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Recover {
            node: Node::Broker(0),
            ..
        }
    )));
    // Every broker process started was killed and reaped.
    assert!(broker::live_children().is_empty());
    assert!(brokers_of(std::process::id()).is_empty());
}

#[test]
fn ctrl_c_stops_every_broker_it_started() {
    if skip() {
        return;
    }
    crate::common::at_root();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "live",
            "scenarios/calibration/crash-groups.toml",
            "--strategy",
            "competing",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until its broker runs, then Ctrl-C.
    let t0 = std::time::Instant::now();
    while brokers_of(pid).is_empty() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!brokers_of(pid).is_empty(), "no broker started");
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(brokers_of(pid).is_empty(), "a broker survived Ctrl-C");
}

#[test]
fn a_scenario_that_cannot_be_staged_is_refused_with_exit_2_naming_the_field() {
    crate::common::at_root();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["live", "scenarios/failover.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot stage"), "{err}");
    assert!(err.contains("[[broker]]: 2 brokers"), "{err}");
}
