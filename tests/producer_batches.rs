//! Producer batches (issue 38 §6): under `[producers] linger` (Kafka's `linger.ms`, with
//! `batch_size` and `record_size` for `batch.size`) a producer sends requests, not records: the
//! records it accumulated go together when the oldest batch has lingered or a batch is full, and
//! `max_in_flight` counts requests. A request failed by a `send_error` fails whole and is retried
//! whole: without idempotence, each of its records lands behind every record of the
//! `max_in_flight - 1` requests after it.
//!
//! These fail on the per-message model (a send is routed at once, `max_in_flight` counts sends):
//! make `Engine::send_slow` and `Engine::send_behind_failure` skip their batching branch (`append`)
//! to see it.

use crate::common::{self, send_failures};
use sim::history::Event;

/// One key, 30 records one every 100ms from 100ms, on one partition of `kafka`; `producers`
/// extends `[producers]`, `faults` follows.
fn scenario(producers: &str, faults: &str) -> String {
    let text = common::one_key(producers, "", faults)
        .replace("strategies = [\"single\"]", "strategies = [\"kafka\"]")
        .replace("service = \"1ms\"", "commit = \"each\"\nservice = \"1ms\"");
    format!("flavour = \"kafka\"\n{text}\n[strategy.kafka]\npartitions = 1\n")
}

/// Every send in the window fails: it holds exactly one request's drain (at 850ms under a 350ms
/// linger: records at 100-400ms go at 450ms, 500-800ms at 850ms, and so on every 400ms).
const ONE_REQUEST_FAILS: &str = r#"
[[fault]]
kind = "send_error"
at = "820ms"
for = "60ms"
"#;

/// Requests of four records: a 350ms linger over records 100ms apart.
const FOUR_A_REQUEST: &str = "linger = \"350ms\"\nretry_backoff = \"10s\"";

/// When each record (by seq) was stored first.
fn stored_at(events: &[Event]) -> Vec<(u32, u64)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut at: Vec<(u32, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { t, msg, .. } if seen.insert(msg.id) => Some((msg.seq, t)),
            _ => None,
        })
        .collect();
    at.sort();
    at
}

/// Without idempotence, 5 requests in flight: the failed request's four records land behind the
/// sixteen of the four requests after it (not one record behind four), and the requests after
/// those wait behind it.
#[test]
fn a_failed_batch_lands_whole_behind_the_requests_in_flight_after_it() {
    let text = scenario(
        &format!("max_in_flight = 5\nidempotence = false\n{FOUR_A_REQUEST}"),
        ONE_REQUEST_FAILS,
    );
    let (m, events) = common::history(&text, "kafka");
    assert_eq!(
        send_failures(&events),
        [(850_000, 4), (850_000, 5), (850_000, 6), (850_000, 7)]
    );
    let order = common::stored_order(&events);
    let expected: Vec<u32> = (0..4).chain(8..24).chain(4..8).chain(24..30).collect();
    assert_eq!(order, expected);
    assert!(m.ordering_violations > 0, "{m:?}");
    assert_eq!((m.applied, m.lost), (30, 0));
}

/// With idempotence the failed request keeps its place: the requests after it wait for its
/// retry, and every record is stored in order.
#[test]
fn with_idempotence_a_failed_batch_keeps_its_place() {
    let text = scenario(
        &format!("max_in_flight = 5\nidempotence = true\n{FOUR_A_REQUEST}"),
        ONE_REQUEST_FAILS,
    );
    let (m, events) = common::history(&text, "kafka");
    assert_eq!(send_failures(&events).len(), 4);
    assert_eq!(common::stored_order(&events), (0..30).collect::<Vec<_>>());
    // Everything from the failed request on is stored at its retry, 10s after it failed.
    for (seq, t) in stored_at(&events) {
        assert_eq!(t >= 10_850_000, seq >= 4, "seq {seq} stored at {t}");
    }
    assert_eq!(m.ordering_violations, 0, "{m:?}");
}

/// The linger's latency: a record waits until its request goes, 350ms after the first record
/// of the request (here every fourth), with nothing failing.
#[test]
fn a_record_waits_for_its_batch_to_linger() {
    let (_, events) = common::history(&scenario(FOUR_A_REQUEST, ""), "kafka");
    for (seq, t) in stored_at(&events) {
        let first = u64::from(seq / 4 * 4);
        let drain = ((first + 1) * 100 + 350) * 1000;
        // The last request holds two records (28, 29); it goes 350ms after the first too.
        assert_eq!(t, drain, "seq {seq}");
    }
}

/// A full batch goes at once: 2 records of 100 bytes fill `batch_size = 261` (61 bytes of batch
/// header), so each request goes at its second record; with `batch_size = 300` a batch is full
/// only when a third record does not fit, which then starts the next batch.
#[test]
fn a_full_batch_goes_without_lingering() {
    let stored = |batch_size: u32| {
        let text = scenario(
            &format!("linger = \"10s\"\nbatch_size = {batch_size}\nrecord_size = 100"),
            "",
        );
        stored_at(&common::history(&text, "kafka").1)
    };
    for (seq, t) in stored(261) {
        assert_eq!(t, u64::from(seq / 2 * 2 + 2) * 100_000, "261: seq {seq}");
    }
    for (seq, t) in stored(300) {
        if seq < 28 {
            assert_eq!(t, u64::from(seq / 2 * 2 + 3) * 100_000, "300: seq {seq}");
        }
    }
}

/// Settings a Kafka user would write are checked, each error naming its field.
#[test]
fn batch_settings_are_refused_where_they_mean_nothing() {
    let e = ordsim::load_text(
        "x.toml",
        &scenario(FOUR_A_REQUEST, "")
            .replace("flavour = \"kafka\"", "flavour = \"rabbitmq\"")
            .replace("strategies = [\"kafka\"]", "strategies = [\"single\"]")
            .replace("commit = \"each\"\n", "")
            .replace("[strategy.kafka]\npartitions = 1\n", ""),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("producers.linger") && e.contains("needs flavour = \"kafka\""),
        "{e}"
    );
    let e = ordsim::load_text("x.toml", &scenario("batch_size = 32768", ""))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("producers.batch_size") && e.contains("linger"),
        "{e}"
    );
    let e = ordsim::load_text("x.toml", &scenario("linger = \"5ms\"\nrecord_size = 0", ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("producers.record_size"), "{e}");
}

/// Kafka's release decides the default `linger` (KIP-1030): 3.9 (and a file without a version)
/// sends every record at once; 4.0 on lets each wait 5ms for its batch; a `linger` in the file
/// wins; and `batch_size` is allowed under 4.x without one. Fails before `[[broker]] version`
/// was Kafka's (the version was refused: "flavour \"kafka\" does not depend on its version").
#[test]
fn kafka_4_lingers_5ms_by_default() {
    let on = |version: &str, producers: &str| {
        let text = scenario(producers, "")
            .replace("name = \"a\"\n", &format!("name = \"a\"\n{version}\n"));
        stored_at(&common::history(&text, "kafka").1)
    };
    let sent = |seq: u32| u64::from(seq + 1) * 100_000;
    for version in ["", "version = \"3.9\"", "version = \"3.0\""] {
        for (seq, t) in on(version, "") {
            assert_eq!(t, sent(seq), "{version:?} seq {seq}");
        }
    }
    for version in ["version = \"4.0\"", "version = \"4.3\""] {
        for (seq, t) in on(version, "") {
            assert_eq!(t, sent(seq) + 5_000, "{version:?} seq {seq}");
        }
        for (seq, t) in on(version, "batch_size = 32768") {
            assert_eq!(t, sent(seq) + 5_000, "{version:?} seq {seq}");
        }
        for (seq, t) in on(version, "linger = \"0s\"") {
            assert_eq!(t, sent(seq), "{version:?} linger 0s, seq {seq}");
        }
    }
    let e = ordsim::load_text(
        "x.toml",
        &scenario("", "").replace("name = \"a\"\n", "name = \"a\"\nversion = \"2.8\"\n"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("broker[0].version") || e.contains("version"),
        "{e}"
    );
    assert!(
        e.contains("\"4.0\"") && e.contains("default \"3.9\""),
        "{e}"
    );
}

/// A lost connection under a linger keeps the records in send order. A request (records 4-7)
/// fails at 850ms and waits for its retry at 1050ms; the broker crashes at 950ms with record 8
/// in the accumulator (its linger ends at 1250ms); records 9 on are buffered. The retry, made
/// while disconnected, puts the failed request back ahead of the buffer, and the accumulated
/// record must follow it, not go ahead of it when its linger ends (Kafka: the failed batch is
/// re-enqueued at the front of its partition's deque, `RecordAccumulator.reenqueue`, ahead of
/// the batch accumulated since). Fails on 68c97ce: record 8 is stored before 4-7.
#[test]
fn a_lost_connection_keeps_failed_requests_ahead_of_the_accumulated_records() {
    let text = scenario(
        "max_in_flight = 5\nidempotence = true\nlinger = \"350ms\"\nretry_backoff = \"200ms\"\n\
         reconnect_delay = \"100ms\"",
        &format!(
            "{ONE_REQUEST_FAILS}\n[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"950ms\"\nfor = \"1s\""
        ),
    );
    let (m, events) = common::history(&text, "kafka");
    assert_eq!(
        send_failures(&events)[..4],
        [(850_000, 4), (850_000, 5), (850_000, 6), (850_000, 7)]
    );
    assert_eq!(common::stored_order(&events), (0..30).collect::<Vec<_>>());
    assert_eq!((m.ordering_violations, m.lost), (0, 0), "{m:?}");
}

/// The delivery timeout runs from the batch's creation (`ProducerBatch.createdMs`, checked by
/// `hasReachedDeliveryTimeout`: `deliveryTimeoutMs <= now - createdMs`), not from the request's
/// first failure: every send fails, and each record of a request of four is given up 1s after
/// its batch's first record was sent, not 1s after the request failed 350ms later. Fails on
/// 68c97ce (given up at 1450ms, 1850ms...: the deadline ran from the failure).
#[test]
fn the_delivery_timeout_runs_from_the_batchs_creation() {
    let text = scenario(
        "idempotence = true\nlinger = \"350ms\"\nretry_backoff = \"100ms\"\ndelivery_timeout = \"1s\"",
        "[[fault]]\nkind = \"send_error\"\nat = \"0s\"\nfor = \"5s\"",
    );
    let (m, events) = common::history(&text, "kafka");
    let given_up: Vec<(u32, u64)> = events
        .iter()
        .filter_map(|e| match *e {
            Event::DeliveryTimeout { t, msg, .. } => Some((msg.seq, t)),
            _ => None,
        })
        .collect();
    assert_eq!(given_up.len(), 30, "{given_up:?}");
    for (seq, t) in given_up {
        let created = u64::from(seq / 4 * 4 + 1) * 100_000;
        assert_eq!(t, created + 1_000_000, "seq {seq}");
    }
    assert_eq!((m.applied, m.given_up), (0, 30), "{m:?}");
}
