//! The producer's delivery timeout (issue 38 §5): a send not stored `[producers]
//! delivery_timeout` after it was made is given up, as Kafka's `Sender` expires a batch after
//! `delivery.timeout.ms` (120s) and completes its callback with a `TimeoutException`. Dropped
//! (`given_up`, the default) or sent again as a new send (`on_delivery_timeout = "resend"`).

use crate::common::{self, history, one_key, stored_order};

use sim::history::Event;

/// Every send from 500ms to 2.4s fails (seqs 4..=23: one message every 100ms from 100ms).
const OUTAGE: &str = r#"
[[fault]]
kind = "send_error"
at = "450ms"
for = "2s"
"#;

/// Idempotent, retried every 300ms (800ms, 1.1s, ..., 2.3s fail; 2.6s goes through), given up
/// 1.05s after the send: seq s is due at (s + 1) * 100ms + 1.05s, so seqs 4..=14 (due 1.55s to
/// 2.55s) are given up before the retry at 2.6s stores the rest. No deadline ties an event.
fn producers(extra: &str) -> String {
    format!("max_in_flight = 5\nidempotence = true\nretry_backoff = \"300ms\"\ndelivery_timeout = \"1050ms\"\n{extra}")
}

/// (time, seq, resent) of every give-up.
fn timeouts(events: &[Event]) -> Vec<(u64, u32, bool)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::DeliveryTimeout { t, msg, resent, .. } => Some((t, msg.seq, resent)),
            _ => None,
        })
        .collect()
}

/// Drop (the default): the sends still failing at their deadline are given up, oldest first at
/// each deadline, never stored; the summary counts them apart from `lost` and the verdict's
/// undelivered. Before the timeout existed they were retried until the outage ended (0 given
/// up, 30 applied).
#[test]
fn a_send_not_stored_within_the_delivery_timeout_is_given_up() {
    let (m, events) = history(&one_key(&producers(""), "", OUTAGE), "single");
    let expected: Vec<(u64, u32, bool)> = (4..=14u32)
        .map(|s| ((s as u64 + 1) * 100_000 + 1_050_000, s, false))
        .collect();
    assert_eq!(timeouts(&events), expected);
    let kept: Vec<u32> = (0..4).chain(15..30).collect();
    assert_eq!(stored_order(&events), kept);
    assert_eq!(m.given_up, 11);
    assert_eq!(m.coverage.delivery_timeouts, 11);
    assert_eq!(m.lost, 0);
    assert_eq!(m.pending_at_end, 0);
    assert_eq!(m.applied, 19);
    assert_eq!(m.undelivered, 11);
    assert_eq!(m.ordering_violations, 0);
    assert_eq!(
        m.produced,
        m.applied
            + m.stale_rejected
            + m.dead_lettered
            + m.dropped
            + m.pending_at_end
            + m.lost
            + m.given_up
    );
    let v = sim::verdict::judge(&m, "ordering_violations");
    assert_eq!(
        v.failures.first().map(String::as_str),
        Some("11 of 30 never delivered (given up by the producer)")
    );
}

/// Resend: the application sends each given-up message again, a new send behind those made
/// since, so it is stored after later messages of its key: nothing is given up for good, and
/// the key is applied out of order.
#[test]
fn a_resent_give_up_lands_behind_later_sends() {
    let (m, events) = history(
        &one_key(&producers("on_delivery_timeout = \"resend\""), "", OUTAGE),
        "single",
    );
    let t = timeouts(&events);
    assert_eq!(t.len(), 11, "{t:?}");
    assert!(t
        .iter()
        .all(|&(_, s, resent)| resent && (4..=14).contains(&s)));
    // Seq s is sent again at its deadline, (s + 1) * 100ms + 1.05s, behind the sends made
    // until then still waiting: seq 4 (1.55s) behind none of them, seq 5 (1.65s) behind seq 15
    // (sent at 1.6s), and so on; the retry at 2.6s stores the queue in that order.
    let mut expected: Vec<u32> = (0..5).collect();
    for s in 5..=14 {
        expected.extend([s + 10, s]);
    }
    expected.extend(25..30);
    assert_eq!(stored_order(&events), expected);
    assert_eq!(m.given_up, 0);
    assert_eq!(m.coverage.delivery_timeouts, 11);
    assert_eq!(m.applied, 30);
    // Seqs 5..=14, each applied after a newer one.
    assert_eq!(m.ordering_violations, 10);
}

/// `"0s"`: no timeout; the outage's sends are retried until it ends, in order (the behaviour
/// before the timeout existed).
#[test]
fn zero_means_no_delivery_timeout() {
    let text = one_key(&producers(""), "", OUTAGE).replace("\"1050ms\"", "\"0s\"");
    let (m, events) = history(&text, "single");
    assert!(timeouts(&events).is_empty());
    assert_eq!(stored_order(&events), (0..30).collect::<Vec<_>>());
    assert_eq!((m.given_up, m.applied, m.ordering_violations), (0, 30, 0));
}

/// The `kafka` flavour gives Kafka's 120s (`delivery.timeout.ms`); the JMS flavours none. A
/// send failing for 130s is given up under `kafka`, retried until stored under `activemq`.
#[test]
fn kafka_gives_up_after_120s_by_default_and_jms_never() {
    let outage = "[[fault]]\nkind = \"send_error\"\nat = \"450ms\"\nfor = \"130s\"";
    let base = one_key("retry_backoff = \"1s\"", "", outage);
    let kafka = format!("flavour = \"kafka\"\n{base}").replace("\"single\"", "\"kafka\"");
    let sc = common::scenario(&kafka);
    let cfg = sc.resolve().unwrap();
    assert_eq!(cfg.delivery_timeout, Some(sim::time::Dur::from_secs(120)));
    let (m, events) = history(&kafka, "kafka");
    let t = timeouts(&events);
    // Seq 4 (sent at 500ms) is the first given up, 120s after its send.
    assert_eq!(t.first(), Some(&(120_500_000, 4, false)), "{t:?}");
    assert!(m.given_up > 0);
    let activemq = format!("flavour = \"activemq\"\n{base}");
    assert_eq!(
        common::scenario(&activemq)
            .resolve()
            .unwrap()
            .delivery_timeout,
        None
    );
    let (m, events) = history(&activemq, "single");
    assert!(timeouts(&events).is_empty());
    assert_eq!((m.given_up, m.applied), (0, 30));
}

/// A producer without a connection buffers its sends (its broker crashed): those buffered past
/// the timeout are given up too (Kafka's `RecordAccumulator.expiredBatches`: batches never
/// sent expire as in-flight ones do), and every message is still accounted for.
#[test]
fn buffered_sends_expire_too() {
    let crash = "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"450ms\"\nfor = \"2s\"";
    let text = one_key(
        "reconnect_delay = \"100ms\"\ndelivery_timeout = \"1s\"",
        "",
        crash,
    );
    let (m, events) = history(&text, "single");
    let t = timeouts(&events);
    assert!(!t.is_empty());
    // Each given up 1s after its send (seq s sent at (s + 1) * 100ms).
    assert!(
        t.iter()
            .all(|&(at, s, _)| at == (s as u64 + 1) * 100_000 + 1_000_000),
        "{t:?}"
    );
    assert_eq!(m.given_up, t.len() as u64);
    assert_eq!(
        m.produced,
        m.applied + m.given_up + m.pending_at_end + m.lost
    );
    assert_eq!(m.ordering_violations, 0);
}

/// A send whose first attempt the broker stored though its answer was lost (`send_timeout`, on
/// the send at 500ms), and whose resends then fail (a `send_error` until 2.45s): when the
/// resend is given up, the message is the broker's (applied once), not given up; the sends
/// waiting behind it, never stored, are.
#[test]
fn giving_up_the_resend_of_a_stored_send_loses_nothing() {
    let faults = r#"
[[fault]]
kind = "send_timeout"
at = "450ms"
for = "100ms"
[[fault]]
kind = "send_error"
at = "550ms"
for = "1900ms"
"#;
    let (m, events) = history(&one_key(&producers(""), "", faults), "single");
    let t = timeouts(&events);
    assert_eq!(
        t.iter().map(|x| x.1).collect::<Vec<_>>(),
        (4..=14).collect::<Vec<_>>()
    );
    let kept: Vec<u32> = (0..5).chain(15..30).collect();
    assert_eq!(stored_order(&events), kept);
    assert_eq!((m.given_up, m.applied, m.duplicates), (10, 20, 0));
    assert_eq!(m.coverage.delivery_timeouts, 11);
}

/// Validation: a timeout between 0 and 1ms is refused; the choice is `drop` or `resend`.
#[test]
fn bad_values_are_refused() {
    for (producers, field) in [
        ("delivery_timeout = \"10us\"", "producers.delivery_timeout"),
        ("on_delivery_timeout = \"retry\"", "on_delivery_timeout"),
    ] {
        let text = one_key(producers, "", "");
        let err = match ordsim::load_text("t.toml", &text) {
            Ok(_) => panic!("{producers} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(field), "{producers}: {err}");
    }
}

/// Found by the property tests (proptest's case, as it drew it): two sends of a producer given up
/// at the same instant and sent again, under a `producer_pause` and `send_error`s. The first
/// resend reached a consumer, whose start the router deferred; the second give-up was emitted
/// before it (a debug build's router check stopped the run). Each give-up is now over before the
/// next: the run completes, in the test profile with its debug assertions.
#[test]
fn give_ups_at_one_instant_are_each_over_before_the_next() {
    let sc = common::scenario(CASE_PAUSE);
    let m = common::run(&sc, "competing", 38);
    assert_eq!(m.produced, 123);
    assert!(m.coverage.delivery_timeouts >= 2, "{:?}", m.coverage);
}

const CASE_PAUSE: &str = r#"strategies = ["competing"]
flavour = "activemq"
[workload]
group_size = 1
messages = 123
rate = "65/s"
keys = 6
poison_fraction = 0
kind = "state"
[producers]
count = 2
connect = "spread"
delivery_timeout = "200ms"
on_delivery_timeout = "resend"
[[broker]]
name = "b0"
persistent = false
[consumers]
count = 2
prefetch = 1
service = { dist = "exponential", mean = "8ms" }
connect = "spread"
ack_latency = "0ms"
suspend_after_failures = 0
resume_after = "2s"
[redelivery]
mode = "blocking"
initial_delay = "200ms"
multiplier = 2.0
max_delay = "2s"
max_redeliveries = 0
[run]
drain_timeout = "2m"
[[fault]]
kind = "producer_pause"
rate = "12/min"
for = { dist = "exponential", mean = "172ms" }
replaced_after = "86ms"
[[fault]]
kind = "send_error"
rate = "1/min"
for = { dist = "exponential", mean = "227ms" }
fraction = 0.5"#;

/// Found by the property tests: a Kafka-like producer crashes; its new instance announces copies
/// of what it had written since its checkpoint (`resend`); two of those copies are given up at
/// their delivery timeout before any broker stored them, and their originals, poison, are
/// dropped by the broker. The checkers counted each unstored copy as still at a broker, so the
/// two messages were never accounted for (a conservation self-check failure); they are dropped.
#[test]
fn a_copy_given_up_before_it_was_stored_does_not_keep_its_message_open() {
    let sc = common::scenario(CASE_CRASH);
    let m = common::run(&sc, "competing", 767);
    assert_eq!(m.produced, 240);
    assert_eq!(
        (m.dropped, m.given_up, m.lost, m.pending_at_end),
        (20, 88, 0, 0)
    );
    assert!(m.coverage.resends_stored > 0);
}

const CASE_CRASH: &str = r#"strategies = ["competing"]
flavour = "native"
[workload]
group_size = 4
messages = 240
rate = "185/s"
keys = 12
poison_fraction = 0.07495232934311008
kind = "state"
[producers]
count = 2
connect = "spread"
delivery_timeout = "200ms"
on_delivery_timeout = "drop"
[[broker]]
name = "b0"
persistent = false
[consumers]
count = 1
prefetch = 2
service = { dist = "exponential", mean = "8ms" }
connect = "spread"
ack_latency = "0ms"
suspend_after_failures = 0
resume_after = "2s"
[redelivery]
mode = "non_blocking"
initial_delay = "200ms"
multiplier = 2.0
max_delay = "2s"
[run]
drain_timeout = "2m"
[[fault]]
kind = "producer_crash"
rate = "54/min"
for = { dist = "exponential", mean = "768ms" }
[[fault]]
kind = "send_error"
rate = "44/min"
for = { dist = "exponential", mean = "38ms" }
fraction = 0.5"#;

/// Found by the property tests: a producer's records fail to be stored (`send_error`), it is
/// paused and replaced (`producer_pause`), its new instance's copies are stored, and the paused
/// one's originals, never stored, are then given up. Each given-up original was one instance
/// fewer of its message; the checkers counted it as nothing, so a copy's drop later (poison) left
/// its message open (a conservation self-check failure). Now every message is accounted for.
#[test]
fn an_original_given_up_after_its_copy_was_stored_is_one_instance_fewer() {
    let sc = common::scenario(CASE_PAUSED_ORIGINALS);
    let m = common::run(&sc, "competing", 329);
    assert_eq!(m.produced, 68);
    assert_eq!(
        m.applied + m.dropped + m.given_up + m.lost + m.pending_at_end + m.dead_lettered,
        68
    );
    assert!(m.dropped >= 1);
}

const CASE_PAUSED_ORIGINALS: &str = r#"strategies = ["competing"]
flavour = "activemq"
[workload]
group_size = 2
messages = 68
rate = "69/s"
keys = 9
poison_fraction = 0.0857228649023578
kind = "state"
[producers]
count = 2
connect = "spread"
retry_backoff = "50ms"
delivery_timeout = "200ms"
on_delivery_timeout = "drop"
[[broker]]
name = "b0"
persistent = false
[consumers]
count = 1
prefetch = 1
service = { dist = "exponential", mean = "8ms" }
connect = "spread"
ack_latency = "0ms"
suspend_after_failures = 0
resume_after = "2s"
[redelivery]
mode = "non_blocking"
initial_delay = "200ms"
multiplier = 2.0
max_delay = "2s"
max_redeliveries = 1
[run]
drain_timeout = "2m"
[[fault]]
kind = "broker_crash"
rate = "43/min"
for = { dist = "exponential", mean = "10ms" }
[[fault]]
kind = "producer_pause"
rate = "36/min"
for = { dist = "exponential", mean = "10ms" }
replaced_after = "5ms"
[[fault]]
kind = "send_error"
rate = "16/min"
for = { dist = "exponential", mean = "201ms" }
fraction = 0.5"#;
