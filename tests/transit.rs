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

#[test]
fn a_delivery_waiting_at_the_front_gets_one_wake_up_however_often_it_is_looked_at() {
    // One consumer, prefetch 10, a message every ms and 0.5 ms of service: while the front
    // delivery is on its way (7 ms), six more are delivered behind it, each looking at the front
    // again. Exactly one engine event per delivery is the transit's: the same run with a transit
    // of 0 (no waiting) has 400 events fewer.
    let run = |latency: &str| {
        let text = scenario(latency, 1, 10, "1000/s", "")
            .replace("service = \"2ms\"", "service = \"500us\"")
            .replace("messages = 400", "messages = 400\narrival = \"constant\"");
        common::run(&common::scenario(&text), "competing", 3)
    };
    let (waiting, instant) = (run("\"7ms\""), run("\"0ms\""));
    assert_eq!(waiting.applied, 400);
    assert_eq!(waiting.events, instant.events + 400);
}

#[test]
fn a_consumer_that_fails_over_starts_its_first_delivery_on_its_own_transit_not_the_old_one() {
    // Broker a's transit is 40 ms, b's 1 ms. a crashes at 480 ms, 21 ms into its delivery's
    // transit (dispatched at 459 ms, seed 5); the consumer fails over to b at once and b's first
    // delivery (483 ms) must start 1 ms after its dispatch, not at 499 ms, when the lost
    // delivery would have arrived.
    let text = r#"
seed = 5
strategies = ["competing"]
[workload]
messages = 400
rate = "200/s"
keys = 8
[producers]
count = 1
reconnect_delay = "1ms"
[[broker]]
name = "a"
dispatch_latency = "40ms"
[[broker]]
name = "b"
dispatch_latency = "1ms"
[consumers]
count = 1
prefetch = 1
service = "1ms"
reconnect_delay = "1ms"
[run]
drain_timeout = "5s"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "480ms"
"#;
    let sc = common::scenario(text);
    let mut dispatched = std::collections::BTreeMap::new();
    let mut from_b = Vec::new();
    common::run_with(&sc, "competing", 5, |e| match *e {
        Event::Dispatch { t, msg, broker, .. } => {
            dispatched.insert(msg.id, (t, broker));
        }
        Event::Start { t, msg, .. } => {
            let (d, broker) = dispatched[&msg.id];
            if broker == 1 {
                from_b.push((msg.id, d, t));
            }
        }
        _ => {}
    });
    assert!(from_b.len() > 100, "{} starts from b", from_b.len());
    for &(id, d, s) in &from_b {
        assert_eq!(
            s,
            d + 1_000,
            "message {id} from b: dispatched at {d}, started at {s}"
        );
    }
}
