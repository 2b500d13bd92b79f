//! `sim live` against a real RabbitMQ (cargo feature `live`, issue 37). Each test skips, with its
//! reason printed, when rabbitmq-server is not installed (.ci/live-rabbitmq.sh installs it). They
//! share tests/live.rs's lock: each checks at its end that no process it started is left.

use crate::live::{assert_no_broker_left, serial};
use ordsim::live::broker::{self, Process};
use ordsim::live::rabbitmq::{self, QueueType, Rabbit, Topology};
use ordsim::live::{judge, run};
use sim::history::{Event, Node};
use std::time::Duration;

fn skip() -> bool {
    if let Some(why) = rabbitmq::missing() {
        eprintln!("skipped: {why}");
        return true;
    }
    false
}

/// The inodes of the sockets process `pid` holds.
fn socket_inodes(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().to_string();
            l.strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_string)
        })
        .collect()
}

/// The listening TCP sockets (local address as /proc/net shows it, hex) among `inodes`.
fn listening(inodes: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address, state 0A = LISTEN, inode.
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                out.push(f[1].to_string());
            }
        }
    }
    out
}

#[test]
fn the_node_and_its_epmd_listen_on_loopback_only_and_are_stopped_by_pid() {
    if skip() {
        return;
    }
    let _serial = serial();
    let dir = broker::TempDir::new("rabbit-listen").unwrap();
    let t = Topology::sac_queue(QueueType::Quorum);
    let mut node = Rabbit::configure("listen", &t, dir.path()).unwrap();
    node.start(Duration::from_secs(120))
        .expect("rabbitmq-server starts");
    let pids = broker::live_children();
    assert_eq!(pids.len(), 2, "the node and its epmd: {pids:?}");
    let inodes: Vec<String> = pids.iter().flat_map(|&p| socket_inodes(p)).collect();
    let addrs = listening(&inodes);
    // STOMP, the Erlang distribution, epmd (IPv4, and epmd's ::1).
    assert!(addrs.len() >= 3, "{addrs:?}");
    let loopback = |a: &String| {
        a.starts_with("0100007F:") || a.starts_with("00000000000000000000000001000000:")
    };
    assert!(
        addrs.iter().all(loopback),
        "listening beyond loopback: {addrs:?}"
    );
    drop(node);
    assert_no_broker_left();
}

fn scenario(flavour: &str, strategies: &str, extra: &str) -> sim::Scenario {
    // A quorum queue is staged on the installed server's release line only (Debian 12: 3.10).
    let version = if flavour == "rabbitmq_quorum" {
        "version = \"3.10\""
    } else {
        ""
    };
    ordsim::load_text(
        "tiny-rabbit",
        &format!(
            r#"
flavour = "{flavour}"
strategies = [{strategies}]
[workload]
messages = 150
rate = "100/s"
arrival = "constant"
keys = 5
[[broker]]
name = "rabbit"
{version}
[consumers]
count = 2
prefetch = 5
service = "2ms"
ack_latency = "10ms"
{extra}
"#
        ),
    )
    .unwrap()
}

fn live(sc: &sim::Scenario, s: run::LiveStrategy) -> (sim::Metrics, Vec<Event>) {
    let plan = ordsim::live::plan(sc, s, 1, Duration::from_secs(30)).unwrap();
    let r = run::run(&plan).expect("the live run");
    let m = judge(&r.events, plan.keys, plan.kind).expect("the checkers accept the history");
    eprintln!(
        "live rabbitmq {s:?}: produced {} applied {} violations {} duplicates {} lost {} pending {}",
        m.produced, m.applied, m.ordering_violations, m.duplicates, m.lost, m.pending_at_end
    );
    assert_no_broker_left();
    (m, r.events)
}

fn applied_by(events: &[Event], c: u32) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::Apply { consumer, .. } if *consumer == c))
        .count()
}

#[test]
fn quorum_single_active_consumer_keeps_order_through_a_consumer_crash_and_a_broker_kill() {
    if skip() {
        return;
    }
    let _serial = serial();
    let sc = scenario(
        "rabbitmq_quorum",
        "\"rabbitmq_sac\"",
        "[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"400ms\"\nfor = \"300ms\"\n\
         [[fault]]\nkind = \"broker_crash\"\nbroker = \"rabbit\"\nat = \"1s\"\nfor = \"200ms\"\n",
    );
    let (m, events) = live(&sc, run::LiveStrategy::RabbitmqSac);
    assert_eq!(m.produced, 150);
    // A quorum queue keeps every message through SIGKILL; everything is applied.
    assert_eq!(m.lost, 0);
    assert_eq!(m.applied, 150);
    // The standby took over at the crash: both consumers applied, the queue's x-single-active-
    // consumer (declared out of band) kept them from applying at once.
    assert!(applied_by(&events, 0) > 0 && applied_by(&events, 1) > 0);
    assert_eq!(m.ordering_violations, 0);
    for n in [Node::Consumer(0), Node::Broker(0)] {
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::Crash { node, .. } if *node == n)));
    }
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Recover {
            node: Node::Broker(0),
            ..
        }
    )));
}

#[test]
fn the_consistent_hash_exchange_feeds_queues_with_one_active_consumer_each() {
    if skip() {
        return;
    }
    let _serial = serial();
    let sc = scenario(
        "rabbitmq",
        "\"rabbitmq_hash\"",
        "[strategy.rabbitmq_hash]\nqueues = 2\nregistration = \"same\"\n",
    );
    let (m, events) = live(&sc, run::LiveStrategy::RabbitmqHash);
    assert_eq!(m.applied, 150);
    // Both queues are consumed (each subscription's MESSAGE frames) ...
    // ... and consumer 0, registered first on both, is active on both: consumer 1 gets nothing.
    assert_eq!(applied_by(&events, 0), 150);
    assert_eq!(m.ordering_violations, 0);
}

#[test]
fn a_quorum_queue_drops_a_poison_message_at_its_delivery_limit() {
    if skip() {
        return;
    }
    let _serial = serial();
    let sc = scenario(
        "rabbitmq_quorum",
        "\"competing\"",
        "[redelivery]\nmax_redeliveries = 2\n\
         [[fault]]\nkind = \"poison\"\nat = \"495ms\"\nfor = \"10ms\"\nfraction = 1.0\n",
    );
    let plan = ordsim::live::plan(
        &sc,
        run::LiveStrategy::Competing,
        1,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(plan.redelivery, run::LiveRedelivery::Requeue(Some(2)));
    let (m, events) = live(&sc, run::LiveStrategy::Competing);
    let poison: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Rollback { msg, .. } => Some(msg.id),
            _ => None,
        })
        .collect();
    // x-delivery-limit = 2: three deliveries, each NACKed with requeue, then dropped.
    assert_eq!(poison.len(), 3, "{poison:?}");
    assert!(poison.iter().all(|&id| id == poison[0]));
    assert_eq!(m.applied, 149);
    assert_eq!(m.pending_at_end, 0);
    // Dropped at its last NACK (no dead-letter exchange), as the model records it: not lost.
    assert_eq!(m.lost, 0);
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::Drop { msg, .. } if msg.id == poison[0])));
}

/// Where RabbitMQ 3.10 puts a NACKed message, read off a backlog (one consumer busy 40 ms a
/// message, 50 arrivals a second, the poison message produced at 520 ms): with a delivery limit
/// it goes to `returns` and is delivered next, every time, until the limit drops it; without one
/// it goes to the back, behind the messages produced after it (rabbit_fifo's source: the aux
/// machine turns a return into a `requeue` only when the queue has no limit). The model puts it
/// at the same places (`requeue_on`, the 3.10 flavour's defaults).
#[test]
fn a_quorum_queue_delivers_a_nacked_message_next_with_a_delivery_limit_and_last_without() {
    if skip() {
        return;
    }
    let _serial = serial();
    let text = |redelivery: &str| {
        format!(
            r#"
flavour = "rabbitmq_quorum"
strategies = ["competing"]
[workload]
messages = 60
rate = "50/s"
arrival = "constant"
keys = 4
[[broker]]
name = "rabbit"
version = "3.10"
[consumers]
count = 1
prefetch = 1
service = "40ms"
ack_latency = "2ms"
{redelivery}
[[fault]]
kind = "poison"
at = "510ms"
for = "20ms"
fraction = 1.0
"#
        )
    };
    // The dispatches as (message, delivery), in order.
    let dispatches = |sc: &sim::Scenario, drain: Duration| {
        let plan = ordsim::live::plan(sc, run::LiveStrategy::Competing, 1, drain).unwrap();
        let r = run::run(&plan).expect("the live run");
        assert_no_broker_left();
        let poison: Vec<u64> = r
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Produce {
                    msg, poison: true, ..
                } => Some(msg.id),
                _ => None,
            })
            .collect();
        assert_eq!(poison.len(), 1, "one poison message: {poison:?}");
        let d: Vec<(u64, u32)> = r
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Dispatch { msg, delivery, .. } => Some((msg.id, *delivery)),
                _ => None,
            })
            .collect();
        (poison[0], d)
    };
    let limited =
        ordsim::load_text("limit", &text("[redelivery]\nmax_redeliveries = 2\n")).unwrap();
    let (p, d) = dispatches(&limited, Duration::from_secs(30));
    let first = d.iter().position(|&(m, _)| m == p).expect("delivered");
    assert_eq!(
        &d[first..first + 3],
        &[(p, 1), (p, 2), (p, 3)],
        "with a limit: delivered next each time"
    );
    assert!(
        d[first + 3..].iter().all(|&(m, _)| m != p),
        "dropped after 3"
    );
    let unlimited = ordsim::load_text("no-limit", &text("")).unwrap();
    let (p, d) = dispatches(&unlimited, Duration::from_secs(3));
    let first = d.iter().position(|&(m, _)| m == p).expect("delivered");
    let again = first
        + 1
        + d[first + 1..]
            .iter()
            .position(|&(m, _)| m == p)
            .expect("again");
    // Behind every message waiting at its NACK: the backlog is several messages deep by then.
    assert!(
        again - first > 5,
        "without a limit: at the back ({first} -> {again})"
    );
    assert!(d[first + 1..again].iter().all(|&(m, n)| m > p && n == 1));
}
