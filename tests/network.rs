//! The network of brokers (`[network] kind = "bridge"`): the bridge competes with local consumers,
//! never holds more than its prefetch, does not send a message back, and what a broker held when
//! it died (its bridge's unstored messages included) arrives late; a peer that dies sends the
//! bridge's messages back. Plus the `[network]` fields' errors, with file:line:column.

use crate::common::{self, run_with, scenario};
use sim::history::{Event, Node};
use std::collections::BTreeSet;

fn file(name: &str) -> String {
    std::fs::read_to_string(common::root().join("scenarios").join(name)).expect("bundled scenario")
}

fn load_error(text: &str) -> String {
    match ordsim::load_text("bad.toml", text) {
        Ok(_) => panic!("should not load:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// Forwards, and the consumers that applied, in one run.
fn forwards_and_appliers(text: &str, strategy: &str, seed: u64) -> (u64, BTreeSet<u32>) {
    let (mut forwards, mut appliers) = (0, BTreeSet::new());
    run_with(&scenario(text), strategy, seed, |e| match *e {
        Event::Forward { .. } => forwards += 1,
        Event::Apply { consumer, .. } => {
            appliers.insert(consumer);
        }
        _ => {}
    });
    (forwards, appliers)
}

/// Consumers on both brokers, producers on `a`, no fault: `a`'s bridge takes a share of the
/// messages, so `b`'s consumers (1 and 3) apply some. With `idle_forward` (the old model: forward
/// only from a broker without consumers) nothing crosses and `b`'s consumers stay idle.
#[test]
fn the_bridge_competes_with_local_consumers() {
    let text = file("network-of-brokers.toml");
    for strategy in ["competing", "message_groups"] {
        let (forwards, appliers) = forwards_and_appliers(&text, strategy, 1);
        assert!(forwards > 1000, "{strategy}: {forwards} forwards");
        assert_eq!(appliers, BTreeSet::from([0, 1, 2, 3]), "{strategy}");
    }
    let idle = text.replace("kind = \"bridge\"", "kind = \"idle_forward\"").replace(
        "prefetch = 1000\nnetwork_ttl = 1\nconduit_subscriptions = true\ndecrease_network_consumer_priority = false\n",
        "",
    );
    let (forwards, appliers) = forwards_and_appliers(&idle, "competing", 1);
    assert_eq!(forwards, 0);
    assert_eq!(appliers, BTreeSet::from([0, 2]));
}

/// With competing consumers the bridge's messages and the local consumers' messages of one key
/// overtake each other: ordering violations between a message applied at `b` and one applied at
/// `a`.
#[test]
fn competing_reorders_across_the_bridge() {
    let text = file("network-of-brokers.toml");
    let mut applied_at = std::collections::BTreeMap::<u32, (u32, u32)>::new(); // key -> (seq, consumer)
    let mut across = 0;
    run_with(&scenario(&text), "competing", 1, |e| {
        if let Event::Apply { msg, consumer, .. } = *e {
            if let Some(&(seq, by)) = applied_at.get(&msg.key) {
                if seq > msg.seq && by % 2 != consumer % 2 {
                    across += 1;
                }
            }
            let last = applied_at.entry(msg.key).or_insert((msg.seq, consumer));
            if msg.seq >= last.0 {
                *last = (msg.seq, consumer);
            }
        }
    });
    assert!(across > 0, "no reorder between the brokers' consumers");
}

/// The bridge holds at most `[network] prefetch` messages taken and not yet stored by the peer,
/// and it does fill that credit when the link is slow; a message that crossed is never sent back
/// (`networkTTL` 1), though `b` has a bridge toward `a`, whose consumers have room.
#[test]
fn the_bridge_never_holds_more_than_its_prefetch_and_never_sends_back() {
    let text = file("network-of-brokers.toml")
        .replace("prefetch = 1000", "prefetch = 3")
        .replace("forward_delay = \"5ms\"", "forward_delay = \"100ms\"");
    let (mut in_flight, mut most, mut back) = (0i64, 0i64, 0);
    let mut travelling = BTreeSet::new();
    run_with(&scenario(&text), "competing", 2, |e| match *e {
        Event::Forward { msg, from, .. } => {
            if from == 1 {
                back += 1;
            }
            travelling.insert(msg.id);
            in_flight += 1;
            most = most.max(in_flight);
        }
        Event::Enqueue { msg, broker: 1, .. } if travelling.remove(&msg.id) => in_flight -= 1,
        _ => {}
    });
    assert_eq!(most, 3, "the bridge's credit");
    assert_eq!(back, 0, "a forwarded message went back");
}

/// The bridge's credit is a round trip [A19]: broker `a` acks a forward, and its bridge may take
/// another, only when `b`'s answer is back, `forward_delay` after `b` stored the message. With a
/// credit of 3 on a 100 ms link, never more than 3 forwards are out unanswered, and the bridge
/// does use all 3. Credit given back at the store instead lets a fourth forward leave at the very
/// instant of the store, 100 ms before the first answer could be back.
#[test]
fn the_bridges_credit_comes_back_with_the_peers_answer() {
    let text = file("network-of-brokers.toml")
        .replace("prefetch = 1000", "prefetch = 3")
        .replace("forward_delay = \"5ms\"", "forward_delay = \"100ms\"");
    let delay = 100_000;
    for seed in 1..=3 {
        let mut travelling = BTreeSet::new();
        let mut answers = std::collections::VecDeque::new(); // when each answer is back at a
        let (mut unanswered, mut most, mut forwards) = (0u32, 0u32, 0);
        run_with(&scenario(&text), "competing", seed, |e| match *e {
            Event::Forward {
                msg, from: 0, t, ..
            } => {
                while answers.front().is_some_and(|&back| back <= t) {
                    answers.pop_front();
                    unanswered -= 1;
                }
                unanswered += 1;
                forwards += 1;
                most = most.max(unanswered);
                travelling.insert(msg.id);
            }
            Event::Enqueue { msg, broker: 1, t } if travelling.remove(&msg.id) => {
                answers.push_back(t + delay);
            }
            _ => {}
        });
        assert!(forwards > 10, "seed {seed}: {forwards} forwards");
        assert_eq!(most, 3, "seed {seed}: forwards out unanswered at once");
    }
}

/// Broker `a` dies at 15s and returns at 35s. The messages it held at that instant (stored,
/// prefetched by its consumers and unacknowledged, or taken by its bridge and not yet stored by
/// `b`) are exactly the messages its bridge forwards after it returns (it has no consumer left):
/// nothing else arrives late through it, and each of them is applied only then. On some seed a
/// message was on the wire when `a` died (the bridge sends at once: no `dispatch_latency`): `b`
/// stored it after the kill and it is not among the late ones (`a`'s resend after the restart
/// is a duplicate `b` drops).
#[test]
fn exactly_the_messages_a_held_arrive_late() {
    let sc = scenario(&file("network-of-brokers-crash.toml"));
    let mut on_wire_somewhere = false;
    for strategy in ["competing", "single", "message_groups"] {
        for seed in 1..=5 {
            let (mut crash, mut recover) = (None, None);
            let mut at_a = BTreeSet::new(); // enqueued at a, neither acked nor stored at b yet
            let mut on_bridge = BTreeSet::new(); // forwarded by a, not yet stored at b
            let mut held = BTreeSet::new();
            let mut on_wire = BTreeSet::new();
            let mut stored_at_b_after = BTreeSet::new();
            let mut late = BTreeSet::new();
            let mut applied_after = BTreeSet::new();
            run_with(&sc, strategy, seed, |e| match *e {
                Event::Crash {
                    node: Node::Broker(0),
                    ..
                } => {
                    crash = Some(e.time());
                    held = at_a.difference(&on_bridge).copied().collect();
                    on_wire = on_bridge.clone();
                }
                Event::Recover {
                    node: Node::Broker(0),
                    t,
                } => recover = Some(t),
                Event::Enqueue { msg, broker: 1, .. } if crash.is_some() => {
                    stored_at_b_after.insert(msg.id);
                }
                Event::Enqueue { msg, broker, .. } if crash.is_none() => {
                    if broker == 0 {
                        at_a.insert(msg.id);
                    } else {
                        at_a.remove(&msg.id);
                        on_bridge.remove(&msg.id);
                    }
                }
                Event::Ack { msg, .. } if crash.is_none() => {
                    at_a.remove(&msg.id);
                }
                Event::Forward {
                    msg, from: 0, t, ..
                } => {
                    if crash.is_none() {
                        on_bridge.insert(msg.id);
                    } else {
                        let back = recover.expect("a is down: it forwards nothing");
                        assert!(t >= back);
                        late.insert(msg.id);
                    }
                }
                Event::Apply { msg, t, .. } if recover.is_some_and(|r| t >= r) => {
                    applied_after.insert(msg.id);
                }
                _ => {}
            });
            assert!(crash.is_some() && recover.is_some());
            assert!(
                !held.is_empty() || !on_wire.is_empty() || strategy == "single",
                "{strategy} seed {seed}: a held nothing and sent nothing"
            );
            assert_eq!(late, held, "{strategy} seed {seed}");
            assert!(held.is_subset(&applied_after), "{strategy} seed {seed}");
            assert!(
                on_wire.is_subset(&stored_at_b_after),
                "{strategy} seed {seed}"
            );
            assert!(on_wire.is_disjoint(&late), "{strategy} seed {seed}");
            on_wire_somewhere |= !on_wire.is_empty();
        }
    }
    assert!(
        on_wire_somewhere,
        "no seed had a message on the wire when a died"
    );
}

/// Broker `b` dies while `a`'s bridge has messages on their way to it: they go back to `a`'s
/// store and its consumers apply them; none is stored at `b`.
#[test]
fn a_peer_that_dies_sends_the_bridges_messages_back() {
    let text = file("network-of-brokers.toml")
        .replace("forward_delay = \"5ms\"", "forward_delay = \"200ms\"")
        + "[[fault]]\nkind = \"broker_crash\"\nbroker = \"b\"\nat = \"10s\"\nfor = \"5s\"\n";
    let sc = scenario(&text);
    let mut crashed = false;
    let mut on_bridge = BTreeSet::new();
    let mut returned = BTreeSet::new();
    let mut redispatched_at_a = BTreeSet::new();
    let mut stored_at_b = BTreeSet::new();
    run_with(&sc, "competing", 3, |e| match *e {
        Event::Crash {
            node: Node::Broker(1),
            ..
        } => {
            crashed = true;
            returned = on_bridge.clone();
        }
        Event::Forward { msg, from: 0, .. } if !crashed => {
            on_bridge.insert(msg.id);
        }
        Event::Enqueue { msg, broker: 1, .. } => {
            if crashed {
                stored_at_b.insert(msg.id);
            } else {
                on_bridge.remove(&msg.id);
            }
        }
        Event::Dispatch { msg, broker: 0, .. } if crashed => {
            redispatched_at_a.insert(msg.id);
        }
        _ => {}
    });
    assert!(!returned.is_empty(), "nothing was on the bridge");
    assert!(returned.is_subset(&redispatched_at_a));
    assert!(returned.is_disjoint(&stored_at_b));
}

/// The `[network]` fields: errors name the file, line, column and field, and say what is allowed
/// (values of ActiveMQ settings that are not modelled are refused, not ignored).
#[test]
fn network_fields_are_checked_with_their_location() {
    let two = |net: &str| {
        common::base(
            "\"competing\"",
            2,
            &format!("[[broker]]\nname = \"b\"\n[network]\n{net}\n"),
        )
    };
    let e = load_error(&two("prefetch = 0"));
    assert!(
        e.contains("bad.toml:17:12: field `network.prefetch`: must be between 1 and 100000"),
        "{e}"
    );
    let e = load_error(&two("conduit_subscriptions = false"));
    assert!(
        e.contains("bad.toml:17:25: field `network.conduit_subscriptions`")
            && e.contains("not modelled"),
        "{e}"
    );
    let e = load_error(&two("decrease_network_consumer_priority = true"));
    assert!(
        e.contains("bad.toml:17:38: field `network.decrease_network_consumer_priority`")
            && e.contains("not modelled"),
        "{e}"
    );
    let e = load_error(&two("network_ttl = 0"));
    assert!(
        e.contains("bad.toml:17:15: field `network.network_ttl`: must be at least 1"),
        "{e}"
    );
    let e = load_error(&two("kind = \"idle_forward\"\nprefetch = 10"));
    assert!(
        e.contains("bad.toml:18:12: field `network.prefetch`: only applies with kind = \"bridge\""),
        "{e}"
    );
    let e = load_error(&two("kind = \"mesh\""));
    assert!(
        e.contains("bad.toml:17:8") && e.contains("bridge") && e.contains("idle_forward"),
        "{e}"
    );
    // Two brokers: a longer TTL is the same network (a message never goes back). Three: refused.
    scenario(&two("network_ttl = 3"));
    let e = load_error(&common::base(
        "\"competing\"",
        2,
        "[[broker]]\nname = \"b\"\n[[broker]]\nname = \"c\"\n[network]\nnetwork_ttl = 2\n",
    ));
    assert!(
        e.contains("bad.toml:19:15: field `network.network_ttl`") && e.contains("3 brokers"),
        "{e}"
    );
}

/// The same crash with a non-persistent store at `a`: what its bridge had taken and not sent is
/// lost with `a`'s store (a `discard` at the crash), not forwarded later; what was on the wire
/// (here everything taken and not stored by `b`: the bridge sends at once) reaches `b`.
#[test]
fn a_non_persistent_broker_loses_what_its_bridge_had_not_handed_over() {
    let text = file("network-of-brokers-crash.toml").replacen(
        "[[broker]]\nname = \"a\"\n",
        "[[broker]]\nname = \"a\"\npersistent = false\n",
        1,
    );
    let sc = scenario(&text);
    let mut seen = 0;
    for seed in 1..=5 {
        let mut crashed = false;
        let mut on_bridge = BTreeSet::new();
        let (mut at_crash, mut discarded, mut forwarded_late) =
            (BTreeSet::new(), BTreeSet::new(), 0);
        let mut stored_at_b_after = BTreeSet::new();
        run_with(&sc, "competing", seed, |e| match *e {
            Event::Crash {
                node: Node::Broker(0),
                ..
            } => {
                crashed = true;
                at_crash = on_bridge.clone();
            }
            Event::Forward { msg, from: 0, .. } => {
                if crashed {
                    forwarded_late += 1;
                } else {
                    on_bridge.insert(msg.id);
                }
            }
            Event::Enqueue { msg, broker: 1, .. } => {
                if crashed {
                    stored_at_b_after.insert(msg.id);
                } else {
                    on_bridge.remove(&msg.id);
                }
            }
            Event::Discard { msg, .. } => {
                discarded.insert(msg.id);
            }
            _ => {}
        });
        assert!(at_crash.is_disjoint(&discarded), "seed {seed}");
        assert!(at_crash.is_subset(&stored_at_b_after), "seed {seed}");
        assert_eq!(forwarded_late, 0, "seed {seed}: a's store was lost");
        seen += at_crash.len();
    }
    assert!(seen > 0, "no message was on the bridge when a died");
}

/// Issue 41: messages that crossed a bridge to a broker whose consumers all left never move
/// again (the bridge never forwards a message a second time, nor back where it came from: as
/// ActiveMQ's `NetworkBridgeFilter` with `networkTTL` 1). Producers send to `a`, `c1` starts on
/// `b` and fails over to `a` when `b` crashes; `b` returns with what had crossed and no consumer.
/// The run ends `stuck` at once, not at the 4-hour drain bound with "raise drain_timeout", and
/// the warning names the bridge. A composed strategy strands the same way.
#[test]
fn messages_stranded_behind_a_bridge_end_the_run_stuck() {
    let text =
        "strategies = [\"competing\", \"message_groups\", \"message_groups+db_optimistic\"]\n\
        [workload]\nmessages = 2000\nrate = \"200/s\"\nkeys = 20\n[producers]\nbrokers = [\"a\"]\n\
        [[broker]]\nname = \"a\"\n[[broker]]\nname = \"b\"\n[network]\nkind = \"bridge\"\n\
        [consumers]\ncount = 2\nprefetch = 10\nservice = \"8ms\"\nconnect = \"spread\"\n\
        [[fault]]\nkind = \"broker_crash\"\nbroker = \"b\"\nat = \"3s\"\nfor = \"5s\"\n\
        [run]\ndrain_timeout = \"4h\"\n";
    let sc = scenario(text);
    for strategy in [
        "competing",
        "message_groups",
        "message_groups+db_optimistic",
    ] {
        let (m, events) = common::history(text, strategy);
        assert_eq!(m.ended_by, sim::summary::EndReason::Stuck, "{strategy}");
        assert!(m.pending_at_end > 0, "{strategy}: {m:?}");
        assert!(m.sim_time_s < 60.0, "{strategy}: {}", m.sim_time_s);
        // What is pending had crossed to `b`.
        let crossed: BTreeSet<u64> = events
            .iter()
            .filter_map(|e| match *e {
                Event::Forward { msg, to: 1, .. } => Some(msg.id),
                _ => None,
            })
            .collect();
        for e in &events {
            if let Event::Pending { msg, .. } = *e {
                assert!(crossed.contains(&msg.id), "{strategy}: {msg:?}");
            }
        }
    }
    let summary = ordsim::run_scenario(
        sc.clone(),
        std::path::Path::new("strand.toml"),
        &ordsim::RunRequest::default(),
        None,
    )
    .unwrap()
    .summary;
    let warnings = ordsim::report::unsettled_warnings(&summary, &sc);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    for w in warnings {
        assert!(
            w.contains("is stuck") && w.contains("crossed a network bridge"),
            "{w}"
        );
        assert!(!w.contains("drain_timeout"), "{w}");
    }
}

/// Issue 39 §1, the bridge's window at a kill: with consumers on `b` only, every message of `a`
/// crosses its bridge, reaching the bridge `dispatch_latency` (5 ms here) after `a` dispatches
/// it and then `forward_delay` (20 ms) on the wire to `b`'s store. When `a` is killed, exactly
/// the forwards its bridge had not sent yet (taken in the last 5 ms) are stranded: forwarded again
/// after the restart. Those already on the wire (taken 5-25 ms before) reach `b` after the kill
/// and are not forwarded again (`b` drops `a`'s resend as a duplicate). The old model kept every
/// forward `b` had not stored with `a`: taken up to 20 ms before the kill.
#[test]
fn a_kill_strands_only_the_forwards_the_bridge_had_not_sent() {
    let text = file("calibration/net-consumers-on-survivor.toml")
        .replace(
            "dispatch_latency = { dist = \"lognormal\", mean = \"1.7ms\", sigma = 0.7 }",
            "dispatch_latency = \"5ms\"",
        )
        .replace("forward_delay = \"1ms\"", "forward_delay = \"20ms\"")
        .replace("rate = \"50/s\"", "rate = \"400/s\"")
        .replace("messages = 300", "messages = 2000");
    let sc = scenario(&text);
    let (mut unsent_somewhere, mut on_wire_somewhere) = (false, false);
    for seed in 1..=5 {
        let mut crash = None;
        let mut taken = std::collections::BTreeMap::new(); // id -> last take by a before the kill
        let mut stored_at_b_after = BTreeSet::new();
        let mut late = BTreeSet::new();
        run_with(&sc, "competing", seed, |e| match *e {
            Event::Crash {
                node: Node::Broker(0),
                t,
            } => crash = Some(t),
            Event::Forward {
                msg, from: 0, t, ..
            } => {
                if crash.is_none() {
                    taken.insert(msg.id, t);
                } else {
                    late.insert(msg.id);
                }
            }
            Event::Enqueue {
                msg, broker: 1, t, ..
            } if crash.is_some_and(|c| t > c) => {
                stored_at_b_after.insert(msg.id);
            }
            _ => {}
        });
        let k = crash.expect("a was killed");
        let unsent: BTreeSet<u64> = taken
            .iter()
            .filter(|&(_, &t)| t + 5_000 > k)
            .map(|(&id, _)| id)
            .collect();
        let on_wire: BTreeSet<u64> = taken
            .iter()
            .filter(|&(_, &t)| t + 5_000 <= k && t + 25_000 > k)
            .map(|(&id, _)| id)
            .collect();
        assert_eq!(late, unsent, "seed {seed}: stranded = taken and not sent");
        assert!(
            on_wire.is_subset(&stored_at_b_after) && on_wire.is_disjoint(&late),
            "seed {seed}: what was on the wire reached b and was not sent again"
        );
        unsent_somewhere |= !unsent.is_empty();
        on_wire_somewhere |= !on_wire.is_empty();
    }
    assert!(unsent_somewhere && on_wire_somewhere);
}
