//! The write-ups' claims (docs/sources.md) about the baselines, reproduced by the model (not
//! special-cased).

use crate::common;

fn outage_scenario(mode: &str) -> String {
    common::base(
        "\"single\"",
        1,
        &format!(
            r#"
[redelivery]
mode = "{mode}"
initial_delay = "1s"
max_redeliveries = 6
[[fault]]
kind = "db_outage"
at = "5s"
for = "2500ms"
"#
        ),
    )
}

/// [Coherence+Hibernate]: a single consumer with (ActiveMQ Classic's) blocking redelivery keeps
/// order through a transient DB failure: the failed message is retried before anything behind it.
#[test]
fn single_blocking_keeps_order_through_a_db_outage() {
    crate::common::at_root();
    let m = common::run(&common::scenario(&outage_scenario("blocking")), "single", 7);
    assert!(
        m.coverage.rollbacks > 0,
        "the outage must make processing fail"
    );
    assert!(m.redeliveries > 0);
    assert_eq!(m.ordering_violations, 0);
    assert_eq!(m.final_state_mismatches, 0);
    assert_eq!(m.applied, m.produced);
}

/// [Coherence+Hibernate]: with non-blocking redelivery, m2 waits out its delay while m3 (same
/// record) is applied in the gap; m2 then overwrites it.
#[test]
fn single_non_blocking_reorders_after_a_db_outage() {
    crate::common::at_root();
    let m = common::run(
        &common::scenario(&outage_scenario("non_blocking")),
        "single",
        7,
    );
    assert!(m.ordering_violations > 0, "{m:?}");
    assert_eq!(m.applied, m.produced);
}

#[test]
fn single_without_faults_keeps_order() {
    crate::common::at_root();
    for seed in 1..=5 {
        let m = common::run(
            &common::scenario(&common::base("\"single\"", 3, "")),
            "single",
            seed,
        );
        assert_eq!(m.ordering_violations, 0, "seed {seed}");
        assert_eq!(m.duplicates, 0);
        assert_eq!(m.applied, 2000);
    }
}

#[test]
fn competing_with_8_consumers_reorders() {
    crate::common::at_root();
    let text =
        common::base("\"competing\"", 8, "").replace("rate = \"100/s\"", "rate = \"1000/s\"");
    let m = common::run(&common::scenario(&text), "competing", 7);
    assert!(m.ordering_violations > 0);
    assert_eq!(m.applied, m.produced);
}

/// [ActiveMQ+Camel]: a broker crash in a network of brokers strands messages; they arrive after
/// newer ones.
#[test]
fn failover_scenario_strands_messages_and_breaks_single_consumer_order() {
    crate::common::at_root();
    let sc = ordsim::load(std::path::Path::new("scenarios/failover.toml")).unwrap();
    let mut worst = 0;
    for seed in 1..=5 {
        let m = common::run(&sc, "single", seed);
        assert_eq!(m.coverage.broker_crashes, 1);
        assert!(
            m.coverage.failovers >= 4,
            "producers and consumers fail over"
        );
        assert_eq!(m.lost, 0, "the store is persistent");
        assert_eq!(m.applied, m.produced);
        worst = worst.max(m.ordering_violations);
    }
    assert!(
        worst > 0,
        "stranded messages must overtake newer ones for some seed"
    );
}

/// A poison message with no backout threshold loops at the head forever (IBM MQ's BOTHRESH 0):
/// the run still ends, at its drain bound, and reports it pending.
#[test]
fn poison_without_backout_threshold_ends_pending() {
    crate::common::at_root();
    let text = common::base(
        "\"single\"",
        1,
        "[redelivery]\nmax_redeliveries = -1\ninitial_delay = \"1s\"\n[run]\ndrain_timeout = \"1m\"\n",
    )
    .replace("keys = 20", "keys = 20\npoison_fraction = 0.01");
    let m = common::run(&common::scenario(&text), "single", 3);
    assert!(m.pending_at_end > 0, "{m:?}");
    assert_eq!(m.dead_lettered, 0);
    assert!(
        m.max_block_ms > 10_000.0,
        "the poison message blocks the queue: {}",
        m.max_block_ms
    );
}

#[test]
fn poison_with_backout_threshold_is_dead_lettered() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\"",
        2,
        "[redelivery]\nmax_redeliveries = 2\ninitial_delay = \"100ms\"\n",
    )
    .replace("keys = 20", "keys = 20\npoison_fraction = 0.01");
    let m = common::run(&common::scenario(&text), "competing", 3);
    assert!(m.poison_dead_lettered > 0);
    assert_eq!(m.poison_dead_lettered, m.dead_lettered);
    assert_eq!(m.pending_at_end, 0);
    assert_eq!(m.redeliveries, 2 * m.poison_dead_lettered);
}

/// A network blip: the consumer applies the message in hand, but its ack is lost; the broker
/// redelivers it: a duplicate.
#[test]
fn network_blip_makes_duplicates() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\"",
        2,
        "ack_latency = \"2ms\"\n[[fault]]\nkind = \"network_blip\"\nrate = \"30/min\"\nfor = \"500ms\"\n",
    )
    .replace("rate = \"100/s\"", "rate = \"300/s\"");
    let m = common::run(&common::scenario(&text), "competing", 5);
    assert!(m.coverage.disconnects > 0);
    assert!(m.duplicates > 0, "{m:?}");
    assert_eq!(m.applied, m.produced);
}

/// A non-persistent broker loses what it held when it crashes: its queue (a backlog: the
/// consumers are overloaded) and the messages prefetched to consumers (their sessions drop them
/// on failover); the two messages in hand are applied all the same (applied wins).
#[test]
fn non_persistent_broker_crash_loses_messages() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\"",
        2,
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"5s\"\nfor = \"1s\"\n",
    )
    .replace("name = \"a\"", "name = \"a\"\npersistent = false")
    .replace("prefetch = 1", "prefetch = 10")
    .replace("rate = \"100/s\"", "rate = \"300/s\"")
    .replace("mean = \"5ms\"", "mean = \"12ms\"");
    let m = common::run(&common::scenario(&text), "competing", 5);
    assert!(m.lost > 0, "{m:?}");
    assert_eq!(m.applied + m.lost, m.produced);
    assert_eq!(m.duplicates, 0);
}

/// Endpoint suspension after repeated failures, then resume ([MDB-or-batch]).
#[test]
fn endpoint_suspends_and_resumes() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\"",
        1,
        "suspend_after_failures = 3\nresume_after = \"5s\"\n[redelivery]\ninitial_delay = \"100ms\"\nmax_redeliveries = 10\n[[fault]]\nkind = \"db_outage\"\nat = \"2s\"\nfor = \"3s\"\n",
    );
    let m = common::run(&common::scenario(&text), "competing", 5);
    assert!(m.coverage.suspensions > 0);
    assert_eq!(m.applied, m.produced);
    assert_eq!(m.pending_at_end, 0);
}

/// [MDB-or-batch]: an MDB (listener) vs a scheduled batch job under a two-hour database outage.
fn hosting(mode: &str) -> sim::Metrics {
    let consumers = match mode {
        "listener" => "",
        "listener_suspend" => "suspend_after_failures = 10\nresume_after = \"10m\"\n",
        _ => "mode = \"batch\"\n[consumers.batch]\ninterval = \"15m\"\nretries = 3\nretry_delay = \"1m\"\n",
    };
    let text = format!(
        r#"
strategies = ["competing"]
[workload]
messages = 2000
rate = "20/min"
keys = 200
[[broker]]
name = "a"
[redelivery]
initial_delay = "5s"
max_redeliveries = 5
[[fault]]
kind = "db_outage"
at = "10m"
for = "2h"
[run]
drain_timeout = "6h"
[consumers]
count = 2
service = "200ms"
{consumers}
"#
    );
    common::run(&common::scenario(&text), "competing", 1)
}

#[test]
fn batch_job_backs_out_fewer_innocent_messages_than_a_listener() {
    crate::common::at_root();
    let listener = hosting("listener");
    let suspend = hosting("listener_suspend");
    let batch = hosting("batch");
    for m in [&listener, &suspend, &batch] {
        assert_eq!(m.poison_dead_lettered, 0);
        assert_eq!(m.pending_at_end, 0);
        assert_eq!(m.applied + m.dead_lettered, 2000);
    }
    // A listener retries each message 6 times within 30s: everything that arrives during the
    // outage is backed out.
    assert!(
        listener.innocent_dead_lettered > 300,
        "{}",
        listener.innocent_dead_lettered
    );
    // Suspending the endpoint after 10 failures in a row saves most of them.
    assert!(suspend.coverage.suspensions > 5);
    assert!(suspend.innocent_dead_lettered < listener.innocent_dead_lettered / 4);
    // The job retries in-run with growing delays, then gives up until the next run: fewer still.
    assert!(batch.coverage.batch_runs_given_up > 0);
    assert!(batch.innocent_dead_lettered < suspend.innocent_dead_lettered);
    // The price: a message waits for the next run even when nothing is wrong.
    assert!(batch.latency_ms.p50 > listener.latency_ms.p50);
}

/// `resume_after = "never"` means never: endpoints stopped after repeated failures stay stopped
/// through the drain (they used to be resumed when it began), their messages are pending at the
/// end, and the run says why it ended (`suspended`, not `stuck` or `settled`). With a delay, the
/// same endpoints come back and everything settles.
#[test]
fn an_endpoint_stopped_for_good_stays_stopped() {
    crate::common::at_root();
    let scenario = |resume: &str| {
        common::scenario(&common::base(
            "\"competing\"",
            2,
            &format!(
                "suspend_after_failures = 2\nresume_after = \"{resume}\"\n[redelivery]\ninitial_delay = \"10ms\"\n\
                 [[fault]]\nkind = \"db_outage\"\nat = \"2s\"\nfor = \"3s\"\n"
            ),
        ))
    };
    let mut resumes = 0;
    let m = common::run_with(&scenario("never"), "competing", 7, |e| {
        if matches!(e, sim::history::Event::Resume { .. }) {
            resumes += 1;
        }
    });
    assert_eq!(m.ended_by, sim::summary::EndReason::Suspended, "{m:?}");
    assert_eq!(resumes, 0);
    assert!(m.coverage.suspensions >= 2, "{:?}", m.coverage);
    assert!(m.pending_at_end > 0, "{m:?}");
    assert_eq!(
        m.produced,
        m.applied + m.pending_at_end + m.dead_lettered,
        "{m:?}"
    );
    let m = common::run(&scenario("1s"), "competing", 7);
    assert_eq!(m.ended_by, sim::summary::EndReason::Settled, "{m:?}");
    assert_eq!(m.pending_at_end, 0);
}

/// Non-blocking redelivery without a delay puts the rolled-back message back at the head before
/// the next dispatch decision: one consumer with prefetch 1 on one key then keeps order through
/// database outages (it used to dispatch the next message in the same instant, ahead of the failed
/// one, so the two alternated and whichever was in hand when the outage ended went first). With a
/// delay, later messages overtake it, as the broker documents.
#[test]
fn zero_delay_non_blocking_redelivery_keeps_the_head() {
    let scenario = |delay: &str| {
        let mut faults = String::new();
        for i in 1..=8 {
            faults.push_str(&format!(
                "[[fault]]\nkind = \"db_outage\"\nat = \"{}ms\"\nfor = \"{}ms\"\n",
                i * 2000,
                500 + 37 * i
            ));
        }
        common::scenario(&format!(
            "seed = 7\nstrategies = [\"competing\"]\n[workload]\nmessages = 2000\nrate = \"100/s\"\nkeys = 1\n\
             [[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = {{ dist = \"exponential\", mean = \"5ms\" }}\n\
             [redelivery]\nmode = \"non_blocking\"\ninitial_delay = \"{delay}\"\nmax_redeliveries = -1\n{faults}"
        ))
    };
    let m = common::run(&scenario("0s"), "competing", 7);
    assert!(m.coverage.rollbacks > 8, "{:?}", m.coverage);
    assert_eq!(m.ordering_violations, 0, "{m:?}");
    assert_eq!(m.applied, m.produced);
    let m = common::run(&scenario("100ms"), "competing", 7);
    assert!(m.ordering_violations > 0, "{m:?}");
}
