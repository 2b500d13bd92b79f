//! The db handlers against a real PostgreSQL (cargo feature `live`, issue 37 section 4). Each
//! test skips, with its reason printed, when PostgreSQL (or, for a live run, ActiveMQ) is not
//! installed (`.ci/live-postgres.sh` installs PostgreSQL).

use crate::live::{brokers_of, serial};
use ordsim::live::{broker, judge, plan, postgres, run};
use sim::history::{Event, FailReason, Node};
use std::time::Duration;

fn skip_without_postgres() -> bool {
    if let Some(why) = postgres::missing() {
        eprintln!("skipped: {why}");
        return true;
    }
    false
}

fn skip_without_both() -> bool {
    if let Some(why) = broker::missing() {
        eprintln!("skipped: {why}");
        return true;
    }
    skip_without_postgres()
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn a_private_server_refuses_and_admits_connections_and_stops_by_pid() {
    if skip_without_postgres() {
        return;
    }
    let _serial = serial();
    let mut s = postgres::Server::start(Duration::from_secs(60)).expect("postgres starts");
    let pid = s.pid().unwrap();
    assert!(broker::live_children().contains(&pid));
    let t = Duration::from_secs(2);
    let mut held = s.connect("target", t).expect("a session on target");
    held.batch_execute("INSERT INTO rows VALUES (1, 5, 1)")
        .unwrap();
    // Only on 127.0.0.1: nothing else in the data directory's settings.
    let r = held.query_one("SHOW listen_addresses", &[]).unwrap();
    assert_eq!(r.get::<_, String>(0), "127.0.0.1");
    s.refuse().unwrap();
    // Refused for new sessions, and the open one was terminated.
    let e = s.connect("target", t).err().expect("refused");
    assert!(
        postgres::describe(&e).contains("not currently accepting connections"),
        "{e:?}"
    );
    assert!(held.query("SELECT 1", &[]).is_err());
    // The source database is not part of the outage.
    assert!(s.connect("source", t).is_ok());
    s.admit().unwrap();
    assert_eq!(s.target_rows().unwrap(), vec![(1, 5)]);
    s.stop();
    std::thread::sleep(Duration::from_millis(100));
    assert!(!alive(pid), "the postmaster survived its stop");
    assert!(!broker::live_children().contains(&pid));
}

/// One live run of a bundled calibration scenario (about 10 s), judged.
fn live_run(file: &str, strategy: run::LiveStrategy) -> (Vec<Event>, sim::Metrics) {
    crate::common::at_root();
    let text = std::fs::read_to_string(file).unwrap();
    let sc = ordsim::load_text(file, &text).unwrap();
    let p = plan(&sc, strategy, 1, Duration::from_secs(30)).unwrap();
    // `run` itself fails when the database's final rows differ from the history's last applies.
    let r = run::run(&p).expect("the live run");
    let m = judge(&r.events, sc.workload.keys, sc.workload.kind).expect("judged");
    assert!(
        broker::live_children().is_empty(),
        "a child survived the run"
    );
    (r.events, m)
}

fn outage_seen(events: &[Event]) {
    let node = |e: &Event| match e {
        Event::Crash { node, .. } | Event::Recover { node, .. } => Some(*node),
        _ => None,
    };
    assert_eq!(
        events
            .iter()
            .filter(|e| node(e) == Some(Node::TargetDb))
            .count(),
        2,
        "one db_outage: its crash and its recovery"
    );
    // 50 messages/s through a 1 s outage: processing rolls back for the outage.
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Rollback {
            reason: FailReason::Outage,
            ..
        }
    )));
}

#[test]
fn db_optimistic_live_rejects_stale_messages_and_writes_no_stale_state() {
    if skip_without_both() {
        return;
    }
    let _serial = serial();
    let (events, m) = live_run(
        "scenarios/calibration/db-optimistic-outage.toml",
        run::LiveStrategy::DbOptimistic,
    );
    eprintln!(
        "db_optimistic live: applied {} stale_rejected {} redeliveries {} stale_writes {}",
        m.applied, m.stale_rejected, m.redeliveries, m.stale_writes
    );
    outage_seen(&events);
    // The strategy's guarantee, held by the real versioned write.
    assert_eq!(m.stale_writes, 0);
    assert_eq!(m.final_state_mismatches, 0);
    assert_eq!(m.produced, 300);
    assert_eq!(m.lost, 0);
    // Every message settled: applied or rejected as stale.
    assert_eq!(m.applied + m.stale_rejected, 300);
}

#[test]
fn notifier_live_reads_the_source_for_every_delivery_and_writes_what_it_read() {
    if skip_without_both() {
        return;
    }
    let _serial = serial();
    let (events, m) = live_run(
        "scenarios/calibration/notifier-outage.toml",
        run::LiveStrategy::Notifier,
    );
    eprintln!(
        "notifier live: applied {} stale_writes {} violations {} source_reads {}",
        m.applied, m.stale_writes, m.ordering_violations, m.coverage.source_reads
    );
    outage_seen(&events);
    let starts = events
        .iter()
        .filter(|e| matches!(e, Event::Start { .. }))
        .count() as u64;
    assert_eq!(
        m.coverage.source_reads, starts,
        "one source read per delivery"
    );
    // A write carries a state read from the source: never older than the notification's own.
    for e in &events {
        if let Event::Apply { msg, state_seq, .. } = e {
            assert!(*state_seq >= msg.seq, "{e:?}");
        }
    }
    assert_eq!(m.lost, 0);
}

#[test]
fn ctrl_c_stops_the_database_it_started() {
    if skip_without_both() {
        return;
    }
    crate::common::at_root();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["live", "scenarios/calibration/notifier-outage.toml"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The postmaster's command line names the run's temporary directory (`...-pg/data`).
    let postmaster = || {
        brokers_of(pid).into_iter().find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("-pg/data"))
        })
    };
    let t0 = std::time::Instant::now();
    while postmaster().is_none() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let pg = postmaster().expect("no postgres started");
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on the child this test started.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(pg), "postgres survived Ctrl-C");
    assert!(brokers_of(pid).is_empty(), "a child survived Ctrl-C");
}
