//! ActiveMQ Artemis clustered grouping (`[strategy.artemis_groups] grouping_handler`), on the
//! bundled scenarios/artemis-clustered-grouping.toml: the LOCAL handler binds each group to one
//! node, so producers on two nodes keep a shared entity's order; with its node down a new group's
//! send is held 11 x `timeout` (then routed ungrouped), groups already bound go on, and no send
//! fails. Plus the setting's errors.

use crate::common::{self, run, run_with, scenario};
use sim::history::Event;
use std::collections::BTreeMap;

const MS: u64 = 1000;

fn file() -> String {
    std::fs::read_to_string(
        common::root()
            .join("scenarios")
            .join("artemis-clustered-grouping.toml"),
    )
    .expect("bundled scenario")
}

/// The scenario without its crash of `a`.
fn calm(text: &str) -> String {
    let (fault, expect) = (
        text.find("\n[[fault]]\n").unwrap(),
        text.find("\n[expect]\n").unwrap(),
    );
    format!("{}{}", &text[..fault], &text[expect..])
}

fn load_error(text: &str) -> String {
    match ordsim::load_text("bad.toml", text) {
        Ok(_) => panic!("should not load:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// While `a` (the LOCAL handler) is up, every group has one node: no violation, where the same
/// producers without a handler split a hot entity between `b` and `c`.
#[test]
fn the_handler_keeps_a_shared_entitys_order_across_nodes() {
    let calm = calm(&file());
    for seed in 1..=3 {
        let with = run(&scenario(&calm), "artemis_groups", seed);
        assert_eq!(with.ordering_violations, 0, "seed {seed}");
        let without = run(
            &scenario(&calm.replace("grouping_handler = \"a\"\n", "")),
            "artemis_groups",
            seed,
        );
        assert!(
            without.ordering_violations > 100,
            "seed {seed}: {} violations without a handler",
            without.ordering_violations
        );
    }
}

/// `a` down from 20s to 50s, timeout 2s: the first message of a group first produced in the
/// outage (early enough for the 11 proposals to end before `a` returns) is stored 22s or more
/// after it was produced; messages of groups bound before the crash are stored at once when
/// their producer holds nothing; nothing fails.
#[test]
fn with_the_local_handler_down_new_groups_wait_and_known_groups_go_on() {
    let sc = scenario(&file());
    let (mut produced, mut first_seen) = (BTreeMap::new(), BTreeMap::new());
    let mut stored = BTreeMap::new();
    let mut fails = 0;
    run_with(&sc, "artemis_groups", 1, |e| match *e {
        Event::Produce { t, msg, .. } => {
            produced.insert(msg.id, (t, msg.key));
            first_seen.entry(msg.key).or_insert(t);
        }
        Event::Enqueue { t, msg, .. } => {
            stored.entry(msg.id).or_insert(t);
        }
        Event::SendFail { .. } => fails += 1,
        _ => {}
    });
    assert_eq!(fails, 0);
    let (down, up) = (20_000 * MS, 50_000 * MS);
    let (mut new_groups, mut prompt_known) = (0, 0);
    for (id, &(t, key)) in &produced {
        let wait = stored[id] - t;
        let first = first_seen[&key];
        if first == t && t >= down && t + 22_000 * MS < up {
            new_groups += 1;
            assert!(
                wait >= 22_000 * MS,
                "group {key} first sent at {t}: stored after {wait}us"
            );
        }
        if first < down && t >= down && t < up && wait < MS {
            prompt_known += 1;
        }
    }
    assert!(new_groups >= 5, "{new_groups} new groups in the outage");
    assert!(
        prompt_known >= 10, // every producer is often held by some new group: 14 at seed 1
        "{prompt_known} known-group sends went on at once"
    );
}

/// With the default handler timeout (5s: 11 proposals last 55s) the client's `callTimeout`
/// (30s on the artemis flavour) ends a held send first: at 30s after its hold began the
/// producer sees the send fail, fails its connection, reconnects and sends the message again,
/// while the broker still stores the first send when the handler answers: a duplicate. With
/// `call_timeout = "0s"` the client waits it out: no failure, no resend.
#[test]
fn the_clients_call_timeout_ends_a_held_send_before_the_broker_does() {
    let text = file().replace(
        "grouping_handler_timeout = \"2s\"",
        "grouping_handler_timeout = \"5s\"",
    );
    let sc = scenario(&text);
    let at_30s = held_sends_fail_at_the_call_timeout(&sc);
    assert!(at_30s >= 1, "no send failed 30s after it was held");
    let m = run(&sc, "artemis_groups", 1);
    assert!(m.duplicates >= 1, "{} duplicates", m.duplicates);

    let patient = scenario(&text.replace(
        "reconnect_delay = \"500ms\"",
        "reconnect_delay = \"500ms\"\ncall_timeout = \"0s\"",
    ));
    let m = run(&patient, "artemis_groups", 1);
    let c = &m.coverage;
    assert_eq!((c.send_failures, c.resends_stored, m.duplicates), (0, 0, 0));
}

/// The setting names the field and what it allows: a broker of the file, on the artemis
/// flavour (or native).
#[test]
fn the_grouping_handler_names_a_broker_on_artemis() {
    let text = file();
    let e = load_error(&text.replace("grouping_handler = \"a\"", "grouping_handler = \"z\""));
    assert!(e.contains("grouping_handler"), "{e}");
    assert!(e.contains("\"z\" is not a [[broker]]"), "{e}");
    let e = load_error(&text.replace("flavour = \"artemis\"", "flavour = \"activemq\""));
    assert!(e.contains("grouping_handler"), "{e}");
    assert!(e.contains("flavour = \"artemis\""), "{e}");
    scenario(&text.replace("flavour = \"artemis\"", "flavour = \"native\""));
    let e = load_error(&text.replace(
        "grouping_handler_timeout = \"2s\"",
        "grouping_handler_timeout = \"0s\"",
    ));
    assert!(e.contains("grouping_handler_timeout"), "{e}");
}

/// The bundled scenario under `native` with the producers' batches (`linger = "10ms"`): a
/// held record holds its request, which is asked about again when the hold ends, not on the
/// retry backoff's beat (300ms here, which 2s proposals are not a multiple of).
fn lingering(text: &str) -> String {
    text.replace("flavour = \"artemis\"", "flavour = \"native\"")
        .replace(
            "reconnect_delay = \"500ms\"",
            "reconnect_delay = \"500ms\"\nlinger = \"10ms\"\nretry_backoff = \"300ms\"\ncall_timeout = \"30s\"",
        )
}

/// Under a linger a held request is routed again when the broker's hold ends: a new group's
/// first message, produced in the outage, is stored 22s (11 proposals of 2s) after its request
/// went, within the 10ms linger of its production, when nothing held its producer before. Fails on 68c97ce, where the request was
/// retried on the 300ms retry backoff's beat instead (stored 22.2s after its request).
#[test]
fn under_a_linger_a_held_request_goes_when_its_hold_ends() {
    let sc = scenario(&lingering(&file()));
    let (mut produced, mut first_seen) = (BTreeMap::new(), BTreeMap::new());
    let mut stored = BTreeMap::new();
    run_with(&sc, "artemis_groups", 1, |e| match *e {
        Event::Produce { t, msg, .. } => {
            produced.insert(msg.id, (t, msg.key));
            first_seen.entry(msg.key).or_insert(t);
        }
        Event::Enqueue { t, msg, .. } => {
            stored.entry(msg.id).or_insert(t);
        }
        _ => {}
    });
    let (down, up) = (20_000 * MS, 50_000 * MS);
    let (mut new_groups, mut at_the_end) = (0, 0);
    for (id, &(t, key)) in &produced {
        if first_seen[&key] == t && t >= down && t + 23_000 * MS < up {
            new_groups += 1;
            let wait = stored[id] - t;
            assert!(
                wait >= 22_000 * MS,
                "group {key} sent at {t}: stored after {wait}us"
            );
            at_the_end += usize::from(wait <= 22_010 * MS);
        }
    }
    assert!(new_groups >= 5, "{new_groups} new groups in the outage");
    // Most new groups' first messages wait behind another group's held request of their
    // producer first (4 of 144 at seed 1 go at their own hold's end; 0 on the backoff's beat).
    assert!(
        at_the_end >= 3,
        "{at_the_end} of {new_groups} new groups stored as their hold ended"
    );
}

/// Under a linger the client's `call_timeout` still ends a held send (5s proposals: 55s of
/// holding): the producer sees it fail 30s after its request was held, reconnects and sends it
/// again. Fails on 68c97ce, where a request's retry never looked at `call_timeout`: no send
/// failed and nothing was sent again.
#[test]
fn under_a_linger_the_call_timeout_ends_a_held_request() {
    let text = lingering(&file()).replace(
        "grouping_handler_timeout = \"2s\"",
        "grouping_handler_timeout = \"5s\"",
    );
    held_sends_fail_at_the_call_timeout(&scenario(&text));
}

/// `artemis_groups` on `sc`, seed 1: at least two sends fail, none before the 30s call
/// timeout after it was produced, and each is sent again as a new message (Artemis
/// deduplicates nothing by default). How many failed exactly 30s after they were produced.
fn held_sends_fail_at_the_call_timeout(sc: &sim::scenario::Scenario) -> usize {
    let mut produced = BTreeMap::new();
    let (mut fails, mut at_30s, mut resent) = (0, 0, 0);
    run_with(sc, "artemis_groups", 1, |e| match *e {
        Event::Produce { t, msg, .. } => {
            produced.insert(msg.id, t);
        }
        Event::SendFail { t, msg, .. } => {
            fails += 1;
            let waited = t - produced[&msg.id];
            assert!(waited >= 30_000 * MS, "{msg:?} failed after {waited}us");
            at_30s += usize::from(waited == 30_000 * MS);
        }
        Event::Resend {
            deduplicated,
            of,
            msg,
            ..
        } => {
            assert!(!deduplicated, "artemis deduplicates nothing by default");
            assert_ne!(msg.id, of);
            resent += 1;
        }
        _ => {}
    });
    assert!(fails >= 2, "{fails} sends failed");
    assert_eq!(resent, fails, "each failed send is sent again");
    at_30s
}

/// A send held twice: its first call timed out (the broker still stores the held original),
/// and so did the call of the copy the application sent again (held behind the same handler,
/// down). When the broker stores that held copy at last it is a resend, a new instance with
/// an id of its own, as when a copy goes by the producer's connection. The property tests
/// found it (300,000 cases, seed 445): the copy was stored under the original's id and its
/// producer kept it as a resend still to make, so the message that later took its slot was
/// left out of the pending at the end (conservation: UNACCOUNTED 1). Fails before the fix
/// (with the self-check; and, with only the engine's debug check on its resends kept, there).
#[test]
fn a_held_copy_the_broker_stores_at_last_is_a_resend() {
    let sc = scenario(
        r#"
strategies = ["artemis_groups"]
flavour = "native"
[workload]
group_size = 4
messages = 52
rate = "78/s"
keys = 6
poison_fraction = 0.0230968107000498
kind = "state"
[producers]
count = 2
connect = "spread"
delivery_timeout = "1s"
on_delivery_timeout = "resend"
call_timeout = "100ms"
[[broker]]
name = "b0"
persistent = false
[[broker]]
name = "b1"
persistent = false
[consumers]
count = 1
prefetch = 1
service = { dist = "exponential", mean = "8ms" }
connect = "spread"
ack_latency = "0ms"
suspend_after_failures = 0
resume_after = "2s"
metadata_max_age = "0s"
[redelivery]
mode = "blocking"
initial_delay = "200ms"
multiplier = 2.0
max_delay = "2s"
max_redeliveries = -1
[strategy.artemis_groups]
grouping_handler = "b1"
grouping_handler_timeout = "20ms"
[run]
drain_timeout = "2m"
[[fault]]
kind = "broker_crash"
rate = "5/min"
for = { dist = "exponential", mean = "213ms" }
"#,
    );
    let mut stored = BTreeMap::new();
    let (mut fails, mut resent) = (0, 0);
    // `run_with` fails the test on the checkers' self-check (conservation).
    let m = run_with(&sc, "artemis_groups", 445, |e| match *e {
        Event::Enqueue { msg, .. } => *stored.entry(msg.id).or_insert(0) += 1,
        Event::SendFail { msg, .. } if (msg.key, msg.seq) == (0, 0) => fails += 1,
        Event::Resend { msg, of, .. } if (msg.key, msg.seq) == (0, 0) => {
            assert_ne!(msg.id, of);
            resent += 1;
        }
        _ => {}
    });
    assert_eq!(
        fails, 2,
        "the original's call and its copy's both timed out"
    );
    assert_eq!(resent, 2, "the held copy and the next are both resends");
    let twice: Vec<_> = stored.iter().filter(|&(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "ids stored twice: {twice:?}");
    assert_eq!(m.produced, 52);
}
