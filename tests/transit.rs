//! `[[broker]] dispatch_latency`: the transit from a broker's dispatch to its consumer
//! (docs/calibration.md, disagreement 3). A delivery counts against the prefetch from its
//! dispatch, is started no earlier than its arrival, and in dispatch order.

use crate::common;

use sim::history::Event;

fn scenario(latency: &str, consumers: u32, prefetch: u32, rate: &str, extra: &str) -> String {
    format!(
        r#"
seed = 3
strategies = ["competing"]
[workload]
messages = 400
rate = "{rate}"
keys = 8
[[broker]]
name = "a"
dispatch_latency = {latency}
[consumers]
count = {consumers}
prefetch = {prefetch}
service = "2ms"
{extra}
"#
    )
}

/// (message id, dispatch time, start time) of one delivery that started.
type Started = (u64, u64, u64);

/// Each delivery that started, per consumer, in start order.
fn dispatch_and_start(text: &str) -> (sim::Metrics, Vec<Vec<Started>>) {
    let sc = common::scenario(text);
    let mut dispatched = std::collections::BTreeMap::new();
    let mut per_consumer: Vec<Vec<Started>> = vec![Vec::new(); sc.consumers.count as usize];
    let m = common::run_with(&sc, "competing", 3, |e| match *e {
        Event::Dispatch {
            t, msg, consumer, ..
        } => {
            dispatched.insert((msg.id, consumer), t);
        }
        Event::Start { t, msg, consumer } => {
            let d = dispatched[&(msg.id, consumer)];
            per_consumer[consumer as usize].push((msg.id, d, t));
        }
        _ => {}
    });
    (m, per_consumer)
}

#[test]
fn an_idle_consumer_starts_a_delivery_its_transit_after_the_dispatch() {
    // 10 messages a second, 2 ms of service: the consumer is idle at every dispatch.
    let (m, starts) = dispatch_and_start(&scenario("\"7ms\"", 1, 1, "10/s", ""));
    assert_eq!(m.applied, 400);
    assert_eq!(starts[0].len(), 400);
    for &(id, d, s) in &starts[0] {
        assert_eq!(
            s,
            d + 7_000,
            "message {id}: dispatched at {d}, started at {s}"
        );
    }
}

#[test]
fn without_a_dispatch_latency_a_delivery_starts_at_once() {
    let text = scenario("\"7ms\"", 1, 1, "10/s", "").replace("dispatch_latency = \"7ms\"\n", "");
    let (_, starts) = dispatch_and_start(&text);
    assert!(starts[0].iter().all(|&(_, d, s)| s == d));
}

#[test]
fn with_prefetch_1_the_transit_is_paid_once_per_message_in_the_consumer_cycle() {
    // Every message is queued at once: the one consumer's cycle is service (2 ms) + the ack's
    // way back (3 ms) + the next delivery's transit (5 ms).
    let text = scenario("\"5ms\"", 1, 1, "100000/s", "ack_latency = \"3ms\"");
    let (m, starts) = dispatch_and_start(&text);
    assert_eq!(m.applied, 400);
    let gaps: Vec<u64> = starts[0].windows(2).map(|w| w[1].2 - w[0].2).collect();
    assert!(
        gaps[5..].iter().all(|&g| g == 10_000),
        "start-to-start gaps: {:?}",
        &gaps[..20]
    );
}

#[test]
fn prefetched_deliveries_start_in_dispatch_order_and_never_before_they_arrive() {
    // A wide distribution: a later delivery often draws a shorter transit than the one before.
    let text = scenario(
        "{ dist = \"uniform\", min = \"0ms\", max = \"40ms\" }",
        3,
        20,
        "800/s",
        "",
    );
    let (m, starts) = dispatch_and_start(&text);
    assert_eq!(m.applied, 400);
    let mut waited = 0;
    for (c, list) in starts.iter().enumerate() {
        let mut dispatched: Vec<(u64, u64)> = list.iter().map(|&(id, d, _)| (d, id)).collect();
        dispatched.sort();
        let order: Vec<u64> = list.iter().map(|&(id, _, _)| id).collect();
        let by_dispatch: Vec<u64> = dispatched.iter().map(|&(_, id)| id).collect();
        assert_eq!(
            order, by_dispatch,
            "consumer {c} started out of dispatch order"
        );
        waited += list.iter().filter(|&&(_, d, s)| s > d).count();
        assert!(list.iter().all(|&(_, d, s)| s >= d));
    }
    assert!(
        waited > 300,
        "only {waited} of 400 starts waited for a transit"
    );
}

#[test]
fn a_consumer_that_crashes_with_deliveries_on_the_way_loses_none_of_them() {
    // A long transit: at the crash, the consumer's whole prefetch is still on its way.
    let text = scenario(
        "\"200ms\"",
        2,
        10,
        "200/s",
        r#"
[[fault]]
kind = "consumer_crash"
consumer = 0
at = "1s"
for = "500ms"
"#,
    );
    let sc = common::scenario(&text);
    let mut redelivered = 0;
    let m = common::run_with(&sc, "competing", 3, |e| {
        if let Event::Dispatch {
            redelivered: true, ..
        } = e
        {
            redelivered += 1;
        }
    });
    assert_eq!((m.applied, m.lost, m.pending_at_end), (400, 0, 0));
    assert!(redelivered >= 10, "{redelivered} redeliveries");
}

#[test]
fn a_bad_dispatch_latency_is_refused_with_its_field() {
    let text = scenario(
        "{ dist = \"lognormal\", mean = \"1ms\", sigma = 20.0 }",
        1,
        1,
        "10/s",
        "",
    );
    let e = ordsim::load_text("t.toml", &text).unwrap_err().to_string();
    assert!(e.contains("dispatch_latency") && e.contains("sigma"), "{e}");
}
