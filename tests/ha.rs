//! HA pairs (`[[broker]] backup_of`): a passive backup shares its primary's store and takes it
//! over when the primary dies (ActiveMQ Classic's shared-store master/slave, Artemis's pair with
//! `allow-failback`).

use crate::common::{run, run_with, scenario};
use sim::history::{Event, Node};

/// Two brokers, `a` and (with `pair`) its backup `b`; `a` crashes at 10s for `down`.
fn pair_text(flavour: &str, pair: bool, a_extra: &str, down: &str) -> String {
    let b = if pair {
        "[[broker]]\nname = \"b\"\nbackup_of = \"a\"\n"
    } else {
        ""
    };
    format!(
        r#"
seed = 3
flavour = "{flavour}"
strategies = ["message_groups"]
[workload]
messages = 3000
rate = "100/s"
keys = 10
[producers]
reconnect_delay = "200ms"
[[broker]]
name = "a"
{a_extra}
{b}
[consumers]
count = 2
prefetch = 10
service = "2ms"
reconnect_delay = "200ms"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "10s"
for = "{down}"
"#
    )
}

/// The pair's broker events (crash, recover, takeover) as `(t, text)`.
fn broker_story(text: &str, seed: u64) -> (sim::Metrics, Vec<(u64, String)>) {
    let sc = scenario(text);
    let mut story = Vec::new();
    let m = run_with(&sc, "message_groups", seed, |e| match *e {
        Event::Crash {
            t,
            node: Node::Broker(b),
        } => story.push((t, format!("crash {b}"))),
        Event::Recover {
            t,
            node: Node::Broker(b),
        } => story.push((t, format!("recover {b}"))),
        Event::Takeover { t, broker, from } => {
            story.push((t, format!("takeover {broker}<-{from}")))
        }
        _ => {}
    });
    (m, story)
}

/// ActiveMQ Classic's slave retries the store's lock every 10s: it serves between 0 and 10s after
/// the master died, drawn per crash (so not always at once), and nothing persistent is lost.
#[test]
fn the_slave_takes_the_store_within_the_lock_interval() {
    let text = pair_text("activemq", true, "", "40s");
    let mut delays = Vec::new();
    for seed in 1..=12 {
        let (m, story) = broker_story(&text, seed);
        assert_eq!(story[0], (10_000_000, "crash 0".into()), "seed {seed}");
        let (t, what) = &story[1];
        assert_eq!(what, "takeover 1<-0", "seed {seed}: {story:?}");
        delays.push(t - 10_000_000);
        assert_eq!((m.lost, m.pending_at_end), (0, 0), "seed {seed}");
    }
    assert!(delays.iter().all(|&d| d <= 10_000_000), "{delays:?}");
    assert!(delays.iter().any(|&d| d > 1_000_000), "{delays:?}");
    assert!(delays.windows(2).any(|w| w[0] != w[1]), "{delays:?}");
}

/// The strength of the pair: without the backup the master's messages wait out the 40s outage;
/// with it they are served again within the lock interval.
#[test]
fn a_backup_cuts_the_wait_to_the_takeover() {
    let alone = run(
        &scenario(&pair_text("activemq", false, "", "40s")),
        "message_groups",
        1,
    );
    let paired = run(
        &scenario(&pair_text("activemq", true, "", "40s")),
        "message_groups",
        1,
    );
    assert!(alone.latency_ms.max > 30_000.0, "{}", alone.latency_ms.max);
    assert!(
        paired.latency_ms.max < 12_000.0,
        "{}",
        paired.latency_ms.max
    );
    assert_eq!(paired.ordering_violations, 0);
}

/// The pair's store is the primary's: a non-persistent one loses what it held with the master,
/// the backup taking over an empty store.
#[test]
fn a_non_persistent_pair_loses_what_the_master_held() {
    // Busy consumers (90% utilised), so that the master holds messages when it dies.
    let busy = |extra: &str| {
        pair_text("activemq", true, extra, "40s").replace("service = \"2ms\"", "service = \"18ms\"")
    };
    let m = run(&scenario(&busy("persistent = false")), "message_groups", 1);
    assert!(m.lost > 0, "{}", m.lost);
    let kept = run(&scenario(&busy("")), "message_groups", 1);
    assert_eq!((kept.lost, kept.pending_at_end), (0, 0));
}

/// ActiveMQ Classic has no failback: the restarted master waits as the slave, and takes the
/// store again only when the new master dies.
#[test]
fn a_restarted_master_waits_as_the_slave() {
    let text = pair_text("activemq", true, "", "5s").replace(
        "for = \"5s\"\n",
        "for = \"5s\"\n[[fault]]\nkind = \"broker_crash\"\nbroker = \"b\"\nat = \"20s\"\nfor = \"5s\"\n",
    );
    let (m, story) = broker_story(&text, 1);
    let what: Vec<&str> = story.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        what,
        [
            "crash 0",
            "takeover 1<-0",
            "recover 0",
            "crash 1",
            "takeover 0<-1",
            "recover 1"
        ],
        "{story:?}"
    );
    assert_eq!(story[2].0, 15_000_000);
    assert_eq!((m.lost, m.pending_at_end), (0, 0));
}

/// Artemis's `allow-failback`: the restarted primary takes its store back at once, the backup's
/// clients failing over to it; `failback = false` keeps the backup serving.
#[test]
fn artemis_fails_back_unless_told_not_to() {
    let text = pair_text("artemis", true, "", "5s");
    let (m, story) = broker_story(&text, 1);
    let what: Vec<&str> = story.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        what,
        ["crash 0", "takeover 1<-0", "recover 0", "takeover 0<-1"]
    );
    assert!(story[1].0 - 10_000_000 <= 500_000, "{story:?}");
    assert_eq!(story[3].0, 15_000_000);
    assert_eq!((m.lost, m.pending_at_end), (0, 0));
    let (_, story) = broker_story(
        &text.replace("name = \"a\"\n", "name = \"a\"\nfailback = false\n"),
        1,
    );
    let what: Vec<&str> = story.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(what, ["crash 0", "takeover 1<-0", "recover 0"]);
}

/// A passive backup's crash changes nothing its pair's clients see, and a backup that is dead
/// when the master dies takes nothing over: the store waits for whichever member comes back.
#[test]
fn a_dead_backup_takes_nothing_over() {
    let text = pair_text("activemq", true, "", "10s").replace(
        "[[fault]]\n",
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"b\"\nat = \"5s\"\nfor = \"30s\"\n[[fault]]\n",
    );
    let sc = scenario(&text);
    let mut story = Vec::new();
    let m = run_with(&sc, "message_groups", 1, |e| match *e {
        Event::Takeover { t, .. } => story.push((t, "takeover")),
        Event::Disconnect { t, .. } if t < 10_000_000 => story.push((t, "disconnect")),
        Event::Recover {
            t,
            node: Node::Broker(_),
        } => story.push((t, "recover")),
        _ => {}
    });
    // The master comes back at 20s and serves its own store; the backup restarts passive at 35s.
    assert_eq!(story, [(20_000_000, "recover"), (35_000_000, "recover")]);
    assert_eq!((m.lost, m.pending_at_end), (0, 0));
    assert!(m.latency_ms.max > 9_000.0);
}

/// Every way a pair can be misdescribed is refused, naming the field and what is allowed.
#[test]
fn pairs_are_validated() {
    let base = pair_text("activemq", true, "", "5s");
    let cases = [
        (
            base.replace("backup_of = \"a\"", "backup_of = \"x\""),
            "no broker named \"x\"",
        ),
        (
            base.replace("backup_of = \"a\"", "backup_of = \"b\""),
            "cannot be its own backup",
        ),
        (
            base.replace(
                "[consumers]",
                "[[broker]]\nname = \"c\"\nbackup_of = \"a\"\n[consumers]",
            ),
            "already has a backup",
        ),
        (
            base.replace("name = \"a\"\n", "name = \"a\"\nbackup_of = \"b\"\n"),
            "is itself a backup",
        ),
        (
            base.replace("backup_of = \"a\"", "takeover = \"1s\""),
            "is in no HA pair",
        ),
        (
            base.replace("flavour = \"activemq\"", "flavour = \"kafka\""),
            "has no documented takeover time",
        ),
    ];
    for (text, want) in cases {
        let e = ordsim::load_text("test.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "want {want:?}, got: {e}");
        assert!(e.contains("broker"), "{e}");
    }
    let given = base
        .replace("flavour = \"activemq\"", "flavour = \"kafka\"")
        .replace("backup_of = \"a\"", "backup_of = \"a\"\ntakeover = \"3s\"");
    assert!(ordsim::load_text("test.toml", &given).is_ok());
}

/// Under `flavour = "native"` each strategy runs on its own broker's defaults, so an HA pair is
/// checked against each of them: a pair without `takeover` is refused for a strategy whose broker
/// documents none (naming it), never a panic in its run; an unvalidated scenario that does not
/// resolve is an error of the run, not a crash.
#[test]
fn native_pairs_are_checked_on_every_strategys_broker() {
    let text = pair_text("native", true, "", "5s")
        .replace("[\"message_groups\"]", "[\"message_groups\", \"sqs_fifo\"]");
    let e = ordsim::load_text("test.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("broker[1].takeover")
            && e.contains("under flavour = \"native\", sqs_fifo runs on sqs")
            && e.contains("has no documented takeover time"),
        "{e}"
    );
    assert!(!e.contains("message_groups"), "activemq documents one: {e}");
    let given = text.replace("backup_of = \"a\"", "backup_of = \"a\"\ntakeover = \"3s\"");
    assert!(ordsim::load_text("test.toml", &given).is_ok());

    let sc = scenario(&pair_text("native", true, "", "5s"));
    let plan = sim::FaultPlan::resolve(&sc, 3);
    let opts = sim::RunOptions {
        seed: 3,
        max_events: None,
        max_sim_time: None,
    };
    match strategies::run_named("unit_of_order", &sc, &plan, &opts, None) {
        Err(sim::RunError::Unresolved(problems)) => {
            assert!(problems[0].message.contains("takeover"), "{problems:?}")
        }
        other => panic!("want Unresolved, got {:?}", other.map(|s| s.status)),
    }
}
