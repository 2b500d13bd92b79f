//! `[[broker]] restart_time`: a crashed broker is back only its restart time after its
//! `broker_crash` ends (the process's start and the store's recovery; docs/calibration.md,
//! disagreement 7).

use crate::common::{self, history, one_key};

use sim::history::{Event, Node};

/// When broker 0 went down and came back, in order.
fn outages(events: &[Event]) -> Vec<(u64, u64)> {
    let mut down = None;
    let mut out = Vec::new();
    for e in events {
        match *e {
            Event::Crash {
                t,
                node: Node::Broker(0),
            } => down = Some(t),
            Event::Recover {
                t,
                node: Node::Broker(0),
            } => out.push((down.take().expect("a recover follows a crash"), t)),
            _ => {}
        }
    }
    out
}

const CRASH: &str = r#"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "1s"
for = "2s"
"#;

/// Down at 1s for 2s, then 1.5s of restart: back at 4.5s, and nothing is dispatched before.
/// Without `restart_time` it is back when the fault ends, at 3s.
#[test]
fn a_crashed_broker_is_back_its_restart_time_after_the_crash_ends() {
    let (m, events) = history(&one_key("", "restart_time = \"1500ms\"", CRASH), "single");
    assert_eq!(outages(&events), [(1_000_000, 4_500_000)]);
    let dispatched: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Dispatch { t, .. } => Some(t),
            _ => None,
        })
        .collect();
    assert!(
        !dispatched.iter().any(|&t| t > 1_000_000 && t < 4_500_000),
        "{dispatched:?}"
    );
    assert!(dispatched.contains(&4_500_000), "{dispatched:?}");
    assert_eq!((m.applied, m.lost, m.pending_at_end), (30, 0, 0));
    let (_, events) = history(&one_key("", "", CRASH), "single");
    assert_eq!(outages(&events), [(1_000_000, 3_000_000)]);
}

/// A distribution is drawn at each crash, from the broker's own stream of the seed: two crashes
/// get two draws inside its bounds, and the same seed the same two.
#[test]
fn a_restart_time_distribution_is_drawn_at_each_crash_from_the_seed() {
    let faults = r#"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "500ms"
for = "200ms"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "2s"
for = "200ms"
"#;
    let text = one_key(
        "",
        "restart_time = { dist = \"uniform\", min = \"100ms\", max = \"900ms\" }",
        faults,
    );
    let sc = common::scenario(&text);
    let run = |seed| {
        let mut events = Vec::new();
        common::run_with(&sc, "single", seed, |e| events.push(*e));
        outages(&events)
    };
    let o = run(1);
    assert_eq!(o.len(), 2, "{o:?}");
    let restarts: Vec<u64> = o.iter().map(|&(down, up)| up - down - 200_000).collect();
    for &r in &restarts {
        assert!((100_000..=900_000).contains(&r), "{restarts:?}");
    }
    assert_ne!(restarts[0], restarts[1], "one draw per crash");
    assert_eq!(run(1), o);
    assert_ne!(run(2), o, "another seed, other draws");
}

#[test]
fn a_bad_restart_time_is_refused_with_its_field() {
    let text = one_key(
        "",
        "restart_time = { dist = \"uniform\", min = \"2s\", max = \"1s\" }",
        CRASH,
    );
    let e = ordsim::load_text("t.toml", &text).unwrap_err().to_string();
    assert!(e.contains("restart_time"), "{e}");
}
