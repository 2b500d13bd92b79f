//! RabbitMQ quorum queues by release (issue 39 §2, "Versions where behaviour changed"): the
//! `rabbitmq_quorum` flavour's `[[broker]] version` and its client's `[consumers] return_with`.
//! `rabbit_fifo` 3.x has no default delivery limit and re-enqueues a nacked message at the back
//! (rabbitmq-server#10499); 4.0-4.2 default `delivery-limit` to 20 and count every return; 4.3
//! counts `delivery_count`, which a `basic.reject` and a consumer's death raise and a `basic.nack`
//! does not (rabbitmq-server#15387).

use crate::common;
use sim::history::Event;

/// Five messages of one key 1ms apart from 1ms, the first poison, one consumer with prefetch 1 and 10ms
/// of work; `broker` extends the `[[broker]]`, `consumers` the `[consumers]`, `rest` follows.
/// Returns the metrics and the id of every dispatched message, in order.
fn nack_run(broker: &str, consumers: &str, rest: &str) -> (sim::Metrics, Vec<u64>) {
    let sc = common::scenario(&format!(
        r#"
flavour = "rabbitmq_quorum"
strategies = ["competing"]
[workload]
messages = 5
rate = "1000/s"
arrival = "constant"
keys = 1
[[broker]]
name = "rabbit"
{broker}
[consumers]
count = 1
prefetch = 1
service = "10ms"
{consumers}
[run]
drain_timeout = "2s"
[[fault]]
kind = "poison"
at = "500us"
for = "1ms"
fraction = 1.0
{rest}
"#
    ));
    let mut ids = Vec::new();
    let m = common::run_with(&sc, "competing", 1, |e| {
        if let Event::Dispatch { msg, .. } = *e {
            ids.push(msg.id);
        }
    });
    assert_eq!(ids.first(), Some(&0), "the poison message goes first");
    (m, ids)
}

/// How often message 0 (the poison one) was delivered.
fn deliveries_of_poison(ids: &[u64]) -> usize {
    ids.iter().filter(|&&i| i == 0).count()
}

/// 3.x: no delivery limit by default, and without one a nack re-enqueues the message at the
/// back: the four later messages go first, and the poison message is never given up on. 4.2
/// delivers it next (`returns`) and drops it on its 21st return.
#[test]
fn a_3x_quorum_queue_requeues_a_nack_at_the_back_without_a_limit() {
    let (m, ids) = nack_run("version = \"3.13\"", "", "");
    assert_eq!(&ids[..6], &[0, 1, 2, 3, 4, 0], "{ids:?}");
    assert_eq!((m.poison_dropped, m.dropped), (0, 0), "{m:?}");
    assert!(deliveries_of_poison(&ids) > 21, "{ids:?}");
    let (m, ids) = nack_run("version = \"4.2\"", "", "");
    assert_eq!(&ids[..3], &[0, 0, 0], "{ids:?}");
    assert_eq!(deliveries_of_poison(&ids), 21);
    assert_eq!(m.poison_dropped, 1, "{m:?}");
    // 3.x with a limit written: returns go first and count, as on 4.0-4.2.
    let (m, ids) = nack_run(
        "version = \"3.10\"",
        "",
        "[redelivery]\nmax_redeliveries = 2",
    );
    assert_eq!(&ids[..4], &[0, 0, 0, 1], "{ids:?}");
    assert_eq!(m.poison_dropped, 1, "{m:?}");
}

/// 4.3 (the default): a nacked message is delivered next but never counted, so a poison message
/// is never dropped; a rejected one is, on its 21st delivery as on 4.2.
#[test]
fn rabbitmq_4_3_counts_a_reject_but_not_a_nack() {
    let (m, ids) = nack_run("", "", "");
    assert_eq!(&ids[..3], &[0, 0, 0], "{ids:?}");
    assert_eq!(m.poison_dropped, 0, "{m:?}");
    assert!(deliveries_of_poison(&ids) > 21, "{ids:?}");
    assert_eq!(m.pending_at_end, 5, "{m:?}");
    let (m, ids) = nack_run("version = \"4.3\"", "return_with = \"nack\"", "");
    assert_eq!(
        (m.poison_dropped, deliveries_of_poison(&ids) > 21),
        (0, true)
    );
    let (m, ids) = nack_run("", "return_with = \"reject\"", "");
    assert_eq!(deliveries_of_poison(&ids), 21);
    assert_eq!((m.poison_dropped, m.applied), (1, 4), "{m:?}");
    // Before 4.3 the verbs are alike.
    let (m, ids) = nack_run("version = \"4.1\"", "return_with = \"reject\"", "");
    assert_eq!((m.poison_dropped, deliveries_of_poison(&ids)), (1, 21));
}

/// A batch job's rollback is a failure like a listener's: under 4.3 its nack does not count
/// (the poison message is never dropped), under 4.2 it does (dropped on its 21st delivery), and
/// on 3.x it goes back at the back of the queue, where the queue puts a nacked message.
#[test]
fn a_batch_jobs_rollback_follows_the_queues_rules_too() {
    let batch = "mode = \"batch\"";
    let job = "[consumers.batch]\ninterval = \"100ms\"";
    let (m, ids) = nack_run("version = \"4.3\"", batch, job);
    assert_eq!(&ids[..3], &[0, 0, 0], "{ids:?}");
    assert_eq!(m.poison_dropped, 0, "{m:?}");
    assert!(deliveries_of_poison(&ids) > 21, "{ids:?}");
    let (m, ids) = nack_run("version = \"4.2\"", batch, job);
    assert_eq!(deliveries_of_poison(&ids), 21, "{ids:?}");
    assert_eq!((m.poison_dropped, m.applied), (1, 4), "{m:?}");
    let (_, ids) = nack_run("version = \"3.13\"", batch, job);
    assert_eq!(&ids[..6], &[0, 1, 2, 3, 4, 0], "{ids:?}");
}

/// 4.3 under nacks: a consumer's death still raises the count (`return_all` with
/// `delivery_failed`), so a poison message whose consumers die past the limit is dropped.
#[test]
fn rabbitmq_4_3_counts_a_consumer_death_under_nacks() {
    let crashes = "[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"55ms\"\nfor = \"10ms\"\n\
                   [[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"105ms\"\nfor = \"10ms\"";
    let limit = "[redelivery]\nmax_redeliveries = 1";
    let (m, _) = nack_run("", "", &format!("{limit}\n{crashes}"));
    assert_eq!(
        m.poison_dropped, 1,
        "two deaths exceed x-delivery-limit 1: {m:?}"
    );
    let (m, ids) = nack_run("", "", limit);
    assert_eq!(m.poison_dropped, 0, "nacks alone never do: {m:?}");
    assert!(deliveries_of_poison(&ids) > 2, "{ids:?}");
}

/// 4.3 without a limit (`x-delivery-limit = -1`): a reject (`modify` with `delivery_failed`)
/// goes to `returns`, delivered next; a nack is re-enqueued at the back.
#[test]
fn rabbitmq_4_3_without_a_limit_puts_a_reject_first_and_a_nack_last() {
    let unlimited = "[redelivery]\nmax_redeliveries = -1";
    let (_, ids) = nack_run("", "return_with = \"reject\"", unlimited);
    assert_eq!(&ids[..3], &[0, 0, 0], "{ids:?}");
    let (_, ids) = nack_run("", "", unlimited);
    assert_eq!(&ids[..6], &[0, 1, 2, 3, 4, 0], "{ids:?}");
    // 4.2: both verbs are a `return`, re-enqueued at the back without a limit.
    let (_, ids) = nack_run("version = \"4.2\"", "return_with = \"reject\"", unlimited);
    assert_eq!(&ids[..6], &[0, 1, 2, 3, 4, 0], "{ids:?}");
}

/// The version is validated: a friendly error naming the allowed values; refused on a flavour
/// without versions; `return_with` only on a quorum queue; one version for all brokers.
#[test]
fn versions_and_the_settle_verb_are_validated() {
    let file = |flavour: &str, broker: &str, consumers: &str| {
        format!(
            "flavour = \"{flavour}\"\nstrategies = [\"competing\"]\n[workload]\nmessages = 1\n\
             rate = \"1/s\"\nkeys = 1\n[[broker]]\nname = \"a\"\n{broker}\n[consumers]\n\
             count = 1\nservice = \"1ms\"\n{consumers}"
        )
    };
    let err = |text: String| match ordsim::load_text("t.toml", &text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    };
    let e = err(file("rabbitmq_quorum", "version = \"4.4\"", ""));
    assert!(e.contains("broker[0].version"), "{e}");
    assert!(
        e.contains("\"3.8\"") && e.contains("\"4.2\"") && e.contains("default \"4.3\""),
        "{e}"
    );
    let e = err(file("rabbitmq", "version = \"4.3\"", ""));
    assert!(e.contains("leave `version` out"), "{e}");
    let e = err(file("activemq", "", "return_with = \"reject\""));
    assert!(e.contains("consumers.return_with"), "{e}");
    let e = err(file("rabbitmq_quorum", "", "return_with = \"ack\""));
    assert!(e.contains("nack") && e.contains("reject"), "{e}");
    let two = "version = \"4.2\"\n[[broker]]\nname = \"b\"\nversion = \"3.13\"";
    let e = err(file("rabbitmq_quorum", two, ""));
    assert!(
        e.contains("broker[1].version") && e.contains("\"4.2\""),
        "{e}"
    );
    let sc = common::scenario(&file("rabbitmq_quorum", "", ""));
    assert_eq!(sc.broker_version(0), Some("4.3"));
}
