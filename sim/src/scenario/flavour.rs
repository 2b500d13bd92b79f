//! Broker flavours: the documented defaults of each broker product for what the scenario file
//! leaves out of `[redelivery]`: the redelivery delay and where it waits, how deliveries are
//! counted against the limit, and what happens to a message the broker gives up on.
//!
//! | flavour | mode | delay | limit | gives up to |
//! |---|---|---|---|---|
//! | `activemq` | blocking (the client's session holds the message) | 1s | `max_redeliveries = 6` (7 deliveries) | the DLQ (`ActiveMQ.DLQ`); non-persistent messages are dropped (`processNonPersistent = false`) |
//! | `artemis` | non-blocking (the broker holds it; later messages go on) | 0 | `max-delivery-attempts = 10` (10 deliveries) | dropped: no `dead-letter-address` in the address-settings defaults (the stock `broker.xml` sets `DLQ`: say `dead_letter = "queue"`) |
//! | `ibm_mq` | non-blocking, no delay: back at the head of the queue | 0 | `BOTHRESH = 0`: no backout, endless redelivery | the backout queue (`BOQNAME`) |
//! | `weblogic` | non-blocking (the destination holds it for the delay) | 0 (`RedeliveryDelay`) | Redelivery Limit -1: unlimited | dropped: no error destination, expiration policy `Discard` |
//! | `sqs` | non-blocking: a message not deleted reappears when the visibility timeout started by its receive (or last renewal) ends | what is left of the lease (30s) | no redrive policy: unlimited (`maxReceiveCount = N` is `backout_threshold = N`, applied on the next receive) | the redrive DLQ |
//! | `kafka` | blocking (Spring Kafka's `DefaultErrorHandler` seeks back to the failed record; `client = "plain"`: no retry) | 0 (`FixedBackOff(0, 9)`) | 9 retries (10 deliveries; `plain`: 1 delivery) | skipped: logged and its offset committed (`dead_letter = "queue"`: a `DeadLetterPublishingRecoverer`'s dead-letter topic) |
//! | `pulsar` | non-blocking (a negative ack: the client asks the broker to redeliver after the delay; later messages go on) | 60s (`negativeAckRedeliveryDelay`, 1 min) | unlimited (no `DeadLetterPolicy`; `maxRedeliverCount = N` is `max_redeliveries = N`) | the dead-letter topic (`<topic>-<subscription>-DLQ`) |
//!
//! `artemis` rolls a failure's whole window back (`[consumers] partial_failure = "rollback"`):
//! the prefetched messages go back with the failed one, in order, uncounted [A15].
//!
//! `pulsar` puts a redelivered message back in its place (the dispatcher replays its redelivery
//! set in position order before it reads on), and looks through the whole queue (it reads on, in
//! batches of `dispatcherMaxReadBatchSize`, past messages for consumers without permits, which
//! go to its replay set [P7]); its consumers' `receiverQueueSize` (1000) is `[consumers]
//! prefetch`, which a flavour does not set. `ackTimeout` is 0 (disabled): no lease.
//! | `rabbitmq` (classic queue) | non-blocking, no delay: a requeued message goes back to its original position | 0 | none: classic queues have no delivery limit | (never) |
//! | `rabbitmq_quorum` (quorum queue, 4.3 by default: `[[broker]] version`) | non-blocking, no delay: a returned message is delivered next (`returns` before `messages`) | 0 | `delivery-limit` 20: dropped on the 21st counted return (21 deliveries; 4.3 counts a reject and a consumer's death, not a nack: `[consumers] return_with`; 3.x has no default limit) | dropped: no dead-letter exchange by default |
//!
//! `rabbitmq_quorum` with `max_redeliveries = -1` (`x-delivery-limit = -1`, no limit) puts a
//! nacked message at the back of the queue (`rabbit_fifo` re-enqueues it) but still gives a gone
//! consumer's messages back at the front (`return_all` into `returns`): the one flavour whose two
//! requeue positions differ ([`RedeliveryPolicy::requeue_lost`]). Both RabbitMQ flavours notice a
//! crashed consumer when its socket closes, and a silent one after the 60s heartbeat timeout; each
//! queue dispatches from its own head (no page limit: the queues behind a consistent-hash exchange
//! do not wait for one another).
//! | `servicebus` | non-blocking, no delay: an abandoned message is served again on the next receive | 0 | `MaxDeliveryCount = 10` (10 deliveries; a lock expiry counts) | the dead-letter subqueue |
//!
//! `servicebus` (Azure Service Bus, a session-enabled queue) locks what it delivers for the
//! queue's `LockDuration` (60s), which the SDK's processor renews while it works
//! (`renew_every`: 10s before the lock ends, `lock - min(lock / 2, 10s)`, so 50s; for at most
//! `MaxAutoLockRenewalDuration`, 5 min: per delivery here, from the session's acceptance under
//! `servicebus_sessions`), notices a crashed receiver when its connection closes (the session
//! is released at once and the messages it had not completed go back uncounted,
//! `count_lost = false`); a frozen process keeps its connection until the service's AMQP idle
//! timeout (120s) and its locks until they expire; each session is served as its own sub-queue
//! (no page: every queued message is looked at) [Z1][Z2][Z4][Z6].
//!
//! Every flavour but `sqs` and `servicebus` holds deliveries without a lease; every one but
//! `sqs` and `kafka` notices a consumer's death when its connection closes; every one but
//! `sqs`, `ibm_mq` and `kafka` requeues at the head. `sqs` (a FIFO queue) leases each receive for the
//! visibility timeout (30s, no renewal), never notices a consumer's death (its receives come back
//! when their leases expire) and puts a message that becomes visible again back in its original
//! place (the head of its message group). A message the consumer fails is not deleted: it stays
//! invisible until the timeout started by its receive ends, not a timeout from the failure
//! ([`RedeliveryPolicy::until_lease_end`]); the redrive policy moves it on the receive that
//! would exceed `maxReceiveCount` ([`RedeliveryDefaults::redrive_on_receive`]) [Q3][Q4][Q8].
//!
//! `kafka` is a log, not a queue: a consumer polls batches (`receive = "batch"`, `prefetch` is
//! `max.poll.records`) and the group notices a dead member after its session timeout (45s,
//! `session.timeout.ms`); records given back after a rebalance resume in offset order. How a
//! consumer commits and what it does with a failed record are its client's (`[consumers]
//! client`, [`KafkaClient::defaults`]): `spring` (the default: Spring Kafka's listener container
//! commits each poll's records once processed, `AckMode.BATCH`, and its `DefaultErrorHandler`
//! retries, the table's row) or `plain` (the `KafkaConsumer`'s auto-commit, made at a poll at
//! most every 5s, `enable.auto.commit` and `auto.commit.interval.ms`; no retry: a failed record
//! is skipped).
//! Producers: every flavour above sends synchronously (`max_in_flight` 1), without idempotence,
//! and retries a failed send after the producer's `reconnect_delay`
//! ([`Flavour::max_in_flight`], [`Flavour::idempotence`], [`Flavour::retry_backoff`]).
//!
//! Sources: docs/sources.md and ../shared/research/brokers.md (ActiveMQ `RedeliveryPolicy` and
//! DLQ handling [A2][A3], Artemis undelivered messages [A8], IBM MQ backout [I1][R4], WebLogic's
//! redelivery attributes), SQS visibility timeout and redrive [Q3][Q4][Q7][Q8], Kafka consumer
//! configs and Spring Kafka's error handler [K3][K6], Pulsar's `ConsumerConfigurationData`
//! and `ServiceConfiguration` [P1][P5], RabbitMQ's queues, quorum queues and heartbeats
//! [B1][B3][B6][B7].

#[cfg(doc)]
use super::Resolved;
use super::{
    Broker, Commit, CrashDetection, KafkaClient, Lease, PartialFailure, Receive, Redelivery,
    RedeliveryMode, ReturnWith,
};
use crate::time::Dur;
use serde::{Deserialize, Serialize};

/// The broker product whose documented defaults apply where the file is silent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    /// ActiveMQ Classic 5.x.
    #[default]
    Activemq,
    /// ActiveMQ Artemis.
    Artemis,
    /// IBM MQ with the JMS client (backout threshold and queue).
    IbmMq,
    /// WebLogic JMS.
    Weblogic,
    /// Amazon SQS (FIFO queues): visibility-timeout leases, redrive to a dead-letter queue.
    Sqs,
    /// Apache Kafka (a partitioned log; consumer groups commit offsets), with Spring Kafka's
    /// default error handler.
    Kafka,
    /// Apache Pulsar with the Java client: negative acks redelivered after a minute, no ack
    /// timeout, unlimited redeliveries unless a `DeadLetterPolicy` is set. Versioned
    /// ([`Flavour::versions`]): 3.x or 4.0 on (the Key_Shared dispatcher), 5.0 by default.
    Pulsar,
    /// RabbitMQ with a classic queue: requeue to the original position, no delivery limit.
    Rabbitmq,
    /// RabbitMQ with a quorum queue: returns delivered first, delivery limit 20, then dropped.
    /// Versioned ([`Flavour::versions`]): 3.x, 4.0-4.2 or 4.3 (the default), which counts a
    /// client's reject but not its nack ([`Flavour::defaults_on`]).
    RabbitmqQuorum,
    /// Azure Service Bus (session-enabled queues): peek-lock with a renewable 60s lock,
    /// `MaxDeliveryCount` 10, dead-letter subqueue.
    Servicebus,
}

/// A release line `"MAJOR.MINOR"` as a pair of numbers, so that releases compare in order
/// (a part that is missing or not a number reads 0).
pub fn release(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

impl Flavour {
    /// Every flavour, in documentation order.
    pub const ALL: [Flavour; 10] = [
        Flavour::Activemq,
        Flavour::Artemis,
        Flavour::IbmMq,
        Flavour::Weblogic,
        Flavour::Sqs,
        Flavour::Kafka,
        Flavour::Pulsar,
        Flavour::Rabbitmq,
        Flavour::RabbitmqQuorum,
        Flavour::Servicebus,
    ];

    /// Every default of this broker product, decided in one exhaustive match: a new flavour
    /// does not compile until each is decided.
    pub const fn defaults(self) -> Defaults {
        // ActiveMQ Classic: the JMS baseline the other JMS brokers differ from.
        const JMS: Defaults = Defaults {
            crash_detection: CrashDetection::Connection,
            restart_takes_over: true,
            max_poll_interval: None,
            failure_detection: Dur::from_secs(30),
            commit: (Commit::Each, Dur::from_secs(5)),
            receive: Receive::Prefetch,
            partial_failure: PartialFailure::Continue,
            lease: None,
            renews_lease: false,
            max_in_flight: 1,
            idempotence: false,
            retry_backoff: None,
            dedup_window: None,
            page_size: 200,
            takeover: Some(Dur::from_secs(10)),
            failback: false,
            call_timeout: None,
            delivery_timeout: None,
            linger: None,
            metadata_max_age: None,
            auto_offset_reset: None,
            read_ahead: ReadAhead::Any,
            redelivery: RedeliveryDefaults {
                mode: RedeliveryMode::Blocking,
                delay: Some(Dur::from_secs(1)),
                limit: Limit::Deliveries(7),
                requeue: Requeue::Head,
                requeue_unlimited: Requeue::Head,
                requeue_lost: Requeue::Head,
                dead_letter: DeadLetter::Queue,
                dead_letter_non_persistent: DeadLetter::Drop,
                delay_in_client: false,
                redrive_on_receive: false,
                count_lost: true,
                count_failed: true,
            },
        };
        // No delay, no limit, back at the head, dead-lettered: what the others differ by.
        const NON_BLOCKING: RedeliveryDefaults = RedeliveryDefaults {
            mode: RedeliveryMode::NonBlocking,
            delay: Some(Dur::ZERO),
            limit: Limit::Unlimited,
            requeue: Requeue::Head,
            requeue_unlimited: Requeue::Head,
            requeue_lost: Requeue::Head,
            dead_letter: DeadLetter::Queue,
            dead_letter_non_persistent: DeadLetter::Queue,
            delay_in_client: false,
            redrive_on_receive: false,
            count_lost: true,
            count_failed: true,
        };
        /// Requeued to the original position everywhere.
        const fn original(r: RedeliveryDefaults) -> RedeliveryDefaults {
            RedeliveryDefaults {
                requeue: Requeue::Original,
                requeue_unlimited: Requeue::Original,
                requeue_lost: Requeue::Original,
                ..r
            }
        }
        /// Deleted once the broker gives up.
        const fn dropped(r: RedeliveryDefaults) -> RedeliveryDefaults {
            RedeliveryDefaults {
                dead_letter: DeadLetter::Drop,
                dead_letter_non_persistent: DeadLetter::Drop,
                ..r
            }
        }
        match self {
            Flavour::Activemq => JMS,
            Flavour::Artemis => Defaults {
                partial_failure: PartialFailure::Rollback,
                takeover: Some(Dur::from_millis(500)),
                failback: true,
                call_timeout: Some(Dur::from_secs(30)),
                redelivery: dropped(RedeliveryDefaults {
                    limit: Limit::Deliveries(10),
                    ..NON_BLOCKING
                }),
                ..JMS
            },
            Flavour::IbmMq => Defaults {
                takeover: None,
                read_ahead: ReadAhead::NonPersistentOnly,
                redelivery: original(NON_BLOCKING),
                ..JMS
            },
            Flavour::Weblogic => Defaults {
                takeover: None,
                redelivery: dropped(NON_BLOCKING),
                ..JMS
            },
            Flavour::Sqs => Defaults {
                crash_detection: CrashDetection::Lease,
                receive: Receive::Batch,
                lease: Some(Dur::from_secs(30)),
                dedup_window: Some(Dur::from_secs(300)),
                page_size: 20_000,
                takeover: None,
                // A message not deleted reappears when the visibility timeout started by its
                // receive (the lease) ends; the redrive policy moves it on the receive after
                // `maxReceiveCount` [Q3][Q4][Q8].
                redelivery: original(RedeliveryDefaults {
                    delay: None,
                    redrive_on_receive: true,
                    ..NON_BLOCKING
                }),
                ..JMS
            },
            Flavour::Kafka => Defaults {
                crash_detection: CrashDetection::Timeout,
                restart_takes_over: false,
                max_poll_interval: Some(Dur::from_secs(300)),
                failure_detection: Dur::from_secs(45),
                // The default client's ([`KafkaClient::defaults`]): Spring Kafka's container
                // commits each poll's records (`AckMode.BATCH`); 5s is `auto.commit.interval.ms`
                // (and Spring's `ackTime`) for `commit = "interval"` [K3][K8].
                commit: (Commit::Batch, Dur::from_secs(5)),
                receive: Receive::Batch,
                max_in_flight: 5,
                idempotence: true,
                retry_backoff: Some(Dur::from_millis(100)),
                delivery_timeout: Some(Dur::from_secs(120)),
                // `metadata.max.age.ms` (5 min) and `auto.offset.reset` (`latest`), the producer's
                // and the consumer's defaults [K20][K21].
                metadata_max_age: Some(Dur::from_secs(300)),
                auto_offset_reset: Some(super::OffsetReset::Latest),
                page_size: u32::MAX,
                takeover: None,
                redelivery: original(dropped(RedeliveryDefaults {
                    mode: RedeliveryMode::Blocking,
                    limit: Limit::Deliveries(10),
                    ..NON_BLOCKING
                })),
                ..JMS
            },
            Flavour::Pulsar => Defaults {
                page_size: u32::MAX,
                takeover: None,
                redelivery: original(RedeliveryDefaults {
                    delay: Some(Dur::from_secs(60)),
                    delay_in_client: true,
                    ..NON_BLOCKING
                }),
                ..JMS
            },
            Flavour::Rabbitmq => Defaults {
                failure_detection: Dur::from_secs(60),
                page_size: u32::MAX,
                takeover: None,
                redelivery: original(dropped(NON_BLOCKING)),
                ..JMS
            },
            // `delivery-limit` 20 [B3]: dropped when a return makes the count exceed it.
            // rabbit_fifo: with a delivery limit a return goes to `returns`, served before
            // `messages`; without one a nack re-enqueues it at the back; a gone consumer's
            // messages go back by `return_all` into `returns` whatever the limit.
            Flavour::RabbitmqQuorum => Defaults {
                failure_detection: Dur::from_secs(60),
                page_size: u32::MAX,
                takeover: None,
                redelivery: dropped(RedeliveryDefaults {
                    limit: Limit::Deliveries(21),
                    requeue_unlimited: Requeue::Tail,
                    ..NON_BLOCKING
                }),
                ..JMS
            },
            // A dead process's socket is closed by its OS: the service closes its session link
            // at once, releasing the session without counting its messages [Z1][Z6]. A frozen
            // one keeps its connection until the AMQP idle timeout (120s) [Z4].
            Flavour::Servicebus => Defaults {
                crash_detection: CrashDetection::Connection,
                failure_detection: Dur::from_secs(120),
                lease: Some(Dur::from_secs(60)),
                renews_lease: true,
                page_size: u32::MAX,
                takeover: None,
                redelivery: RedeliveryDefaults {
                    limit: Limit::Deliveries(10),
                    count_lost: false,
                    ..NON_BLOCKING
                },
                ..JMS
            },
        }
    }

    /// How this broker learns that a consumer process died.
    pub fn crash_detection(self) -> CrashDetection {
        self.defaults().crash_detection
    }

    /// Whether a restarted consumer takes over its dead session at once ([`Defaults`]).
    pub fn restart_takes_over(self) -> bool {
        self.defaults().restart_takes_over
    }

    /// Kafka's `max.poll.interval.ms` ([`Defaults`]).
    pub fn max_poll_interval(self) -> Option<Dur> {
        self.defaults().max_poll_interval
    }

    /// How long until a consumer that stopped answering is dropped ([`Defaults`]).
    pub fn failure_detection(self) -> Dur {
        self.defaults().failure_detection
    }

    /// How its consumers settle what they processed ([`Defaults`]).
    pub fn commit(self) -> (Commit, Dur) {
        self.defaults().commit
    }

    /// How its consumers take messages ([`Defaults`]).
    pub fn receive(self) -> Receive {
        self.defaults().receive
    }

    /// Its delivery lease when the file gives none ([`Defaults`]).
    pub fn lease(self) -> Option<Dur> {
        self.defaults().lease
    }

    /// How its client renews a lease of `duration` when the file does not say: `(renew_every,
    /// renew_max)`. The Service Bus processor renews `duration - min(duration / 2, 10s)` after
    /// each lock (`CalculateRenewDelay`, `MaximumRenewBufferDuration` 10s), for at most
    /// `MaxAutoLockRenewalDuration` (5 min) [Z2][Z5]; the others do not renew.
    pub fn lease_renewal(self, duration: Dur) -> (Option<Dur>, Option<Dur>) {
        if !self.defaults().renews_lease {
            return (None, None);
        }
        let buffer = (duration.0 / 2).min(Dur::from_secs(10).0);
        (
            Some(Dur(duration.0 - buffer).max(Dur(1))),
            Some(Dur::from_secs(300)),
        )
    }

    /// How many sends a producer may have outstanding ([`Defaults`]).
    pub fn max_in_flight(self) -> u32 {
        self.defaults().max_in_flight
    }

    /// Whether the broker refuses a producer's out-of-sequence sends ([`Defaults`]).
    pub fn idempotence(self) -> bool {
        self.defaults().idempotence
    }

    /// The delay before a failed send is retried ([`Defaults`]).
    pub fn retry_backoff(self) -> Option<Dur> {
        self.defaults().retry_backoff
    }

    /// How long a broker remembers a stored message to refuse a resend ([`Defaults`]).
    pub fn dedup_window(self) -> Option<Dur> {
        self.defaults().dedup_window
    }

    /// How many queued messages dispatch looks at ([`Defaults`]).
    pub fn page_size(self) -> u32 {
        self.defaults().page_size
    }

    /// The release lines a `[[broker]] version` may name for this product, oldest first, where
    /// the model's behaviour depends on the version (empty: it does not, and `version` is
    /// refused). The last is the current release, the default. One list per product, decided
    /// here: a flavour gains versions by adding its line, and what each changes is decided in
    /// [`Flavour::defaults_on`] (or by the strategies, through [`crate::Scenario::broker_version`]).
    pub const fn versions(self) -> &'static [&'static str] {
        match self {
            // Key_Shared: 3.x's "recently joined consumers" gate (3.0 LTS, 3.3); PIP-379's
            // draining hashes from 4.0 on (4.0 LTS, 4.1, 4.2; 5.0 removed the classic
            // dispatcher, #26687). 5.0 is the current release (5.0.1 on Maven Central).
            Flavour::Pulsar => &["3.0", "3.3", "4.0", "4.1", "4.2", "5.0"],
            // Quorum queues (3.8 on): 3.x without a default delivery limit; 4.0-4.2 with
            // `delivery-limit` 20 counting every return (`acquired_count`); 4.3 counting only
            // failed deliveries (`delivery_count`) [B3][B8][B9]. 4.3 is the current release
            // (v4.3.5, 2026-08-13, the newest tag of rabbitmq-server).
            Flavour::RabbitmqQuorum => &[
                "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "4.0", "4.1", "4.2", "4.3",
            ],
            // The producer's `linger.ms`: 0 up to 3.9, 5 from 4.0 on (KIP-1030) [K33]. The lines
            // from 3.0 (KIP-679: `acks=all` and idempotence by default; KIP-735: a 45s
            // session), where the rest of the model's defaults start. The default is not the
            // last: see [`Flavour::default_version`].
            Flavour::Kafka => &[
                "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.1",
                "4.2", "4.3",
            ],
            Flavour::Activemq
            | Flavour::Artemis
            | Flavour::IbmMq
            | Flavour::Weblogic
            | Flavour::Sqs
            | Flavour::Rabbitmq
            | Flavour::Servicebus => &[],
        }
    }

    /// The default `version`: the current release ([`Flavour::versions`]' last), except
    /// Kafka's, which stays on 3.9 (the client read, `linger.ms` 0) so that a file without a
    /// version keeps its history; 4.x (`linger.ms` 5) is opt-in. None for a product without
    /// versions.
    pub const fn default_version(self) -> Option<&'static str> {
        match (self, self.versions()) {
            (Flavour::Kafka, _) => Some("3.9"),
            (_, [.., last]) => Some(last),
            (_, []) => None,
        }
    }

    /// This product's defaults on release `version` (None or not one of [`Flavour::versions`]:
    /// the current release), with a client that returns a failed message with `return_with`.
    ///
    /// `rabbitmq_quorum` (`rabbit_fifo`): 3.x has no default delivery limit, so a nacked
    /// message is re-enqueued at the back (rabbitmq-server#10499) while a gone consumer's go
    /// back to `returns`, in front; 4.0-4.2 default `delivery-limit` to 20 and count every
    /// return against it (`acquired_count`), [`Flavour::defaults`]; 4.3 counts only
    /// `delivery_count`, which `basic.reject` and a consumer's death raise but `basic.nack`
    /// does not (#15387), and without a limit puts a rejected message (a `modify` with
    /// `delivery_failed`) in `returns` but a nacked one at the back [B3][B8][B9].
    ///
    /// `kafka`: `linger.ms` 5 from 4.0 on (KIP-1030), 0 before ([`Defaults::linger`]) [K33].
    pub fn defaults_on(self, version: Option<&str>, return_with: ReturnWith) -> Defaults {
        let mut d = self.defaults();
        if self == Flavour::Kafka {
            let v = version
                .filter(|v| self.versions().contains(v))
                .or(self.default_version())
                .unwrap_or_default();
            if release(v) >= (4, 0) {
                d.linger = Some(Dur::from_millis(5));
            }
        }
        if self == Flavour::RabbitmqQuorum {
            let v = version
                .filter(|v| self.versions().contains(v))
                .or(self.default_version())
                .unwrap_or_default();
            let r = &mut d.redelivery;
            // A release after 4.3 keeps 4.3's counting until it is modelled.
            let release = release(v);
            match release {
                (..=3, _) => r.limit = Limit::Unlimited,
                _ if release >= (4, 3) => match return_with {
                    ReturnWith::Nack => r.count_failed = false,
                    ReturnWith::Reject => r.requeue_unlimited = Requeue::Head,
                },
                _ => {}
            }
        }
        d
    }

    /// The name a scenario file uses.
    pub const fn name(self) -> &'static str {
        match self {
            Flavour::Activemq => "activemq",
            Flavour::Artemis => "artemis",
            Flavour::IbmMq => "ibm_mq",
            Flavour::Weblogic => "weblogic",
            Flavour::Sqs => "sqs",
            Flavour::Kafka => "kafka",
            Flavour::Pulsar => "pulsar",
            Flavour::Rabbitmq => "rabbitmq",
            Flavour::RabbitmqQuorum => "rabbitmq_quorum",
            Flavour::Servicebus => "servicebus",
        }
    }
}

impl KafkaClient {
    /// The `kafka` flavour's defaults `d` ([`Flavour::defaults`], which are Spring Kafka's) for
    /// this client. `spring`: as they are: the listener container sets `enable.auto.commit`
    /// false unless the application set it, and commits the offsets of each poll's records once
    /// they are processed (`ContainerProperties.ackMode` `BATCH`, committed at the top of its
    /// next `pollAndInvoke`, and before its error handler runs: [`Resolved::commit_before_retry`]);
    /// its `DefaultErrorHandler` retries a failed record in place (`FixedBackOff(0, 9)`), then
    /// skips it. `plain`: `KafkaConsumer`'s own defaults: auto-
    /// commit (`enable.auto.commit` true, made inside `poll()` by
    /// `ConsumerCoordinator.maybeAutoCommitOffsetsAsync` once `auto.commit.interval.ms` has
    /// passed), and no retry handler: the application's loop logs a failed record and goes on,
    /// the next commit passing it (one delivery, then dropped) [K3][K8][K9].
    pub fn defaults(self, d: Defaults) -> Defaults {
        match self {
            KafkaClient::Spring => d,
            KafkaClient::Plain => Defaults {
                commit: (Commit::Interval, d.commit.1),
                redelivery: RedeliveryDefaults {
                    limit: Limit::Deliveries(1),
                    ..d.redelivery
                },
                ..d
            },
        }
    }

    /// The name a scenario file uses.
    pub const fn name(self) -> &'static str {
        match self {
            KafkaClient::Spring => "spring",
            KafkaClient::Plain => "plain",
        }
    }
}

/// The file's `flavour`: one broker product's defaults for every strategy, or `native`: each
/// strategy on the defaults of the broker it models (`sqs_fifo` on `sqs`, `kafka` on `kafka`,
/// ...; the seeds' broker-neutral strategies on `activemq`), the scenario resolved per strategy
/// before its run ([`crate::Scenario::on_flavour`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlavourChoice {
    /// Every strategy on this product's defaults.
    Product(Flavour),
    /// Each strategy on its own broker's defaults.
    Native,
}

impl Default for FlavourChoice {
    fn default() -> Self {
        FlavourChoice::Product(Flavour::default())
    }
}

/// Every name the file's `flavour` takes: the products', then `native`.
const CHOICE_NAMES: [&str; Flavour::ALL.len() + 1] = {
    let mut names = ["native"; Flavour::ALL.len() + 1];
    let mut i = 0;
    while i < Flavour::ALL.len() {
        names[i] = Flavour::ALL[i].name();
        i += 1;
    }
    names
};

impl FlavourChoice {
    /// The name a scenario file uses.
    pub const fn name(self) -> &'static str {
        match self {
            FlavourChoice::Product(f) => f.name(),
            FlavourChoice::Native => "native",
        }
    }

    /// The product whose defaults apply: under `native`, before it is resolved per strategy,
    /// `activemq` (the seeds' broker).
    pub const fn product(self) -> Flavour {
        match self {
            FlavourChoice::Product(f) => f,
            FlavourChoice::Native => Flavour::Activemq,
        }
    }
}

impl PartialEq<Flavour> for FlavourChoice {
    fn eq(&self, other: &Flavour) -> bool {
        *self == FlavourChoice::Product(*other)
    }
}

impl Serialize for FlavourChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FlavourChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = FlavourChoice;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a flavour name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FlavourChoice, E> {
                if v == "native" {
                    return Ok(FlavourChoice::Native);
                }
                Flavour::ALL
                    .into_iter()
                    .find(|f| f.name() == v)
                    .map(FlavourChoice::Product)
                    .ok_or_else(|| E::unknown_variant(v, &CHOICE_NAMES))
            }
        }
        d.deserialize_str(V)
    }
}

/// A broker product's defaults for what the scenario file leaves out, beyond `[redelivery]`
/// ([`RedeliveryPolicy::resolve`]). One value per flavour: [`Flavour::defaults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// How the broker learns that a consumer process died: when its connection closes; after
    /// its session timeout (Kafka); or never, its leases expiring (SQS).
    pub crash_detection: CrashDetection,
    /// A restarted consumer takes over its dead session at once (only matters while the broker
    /// has not noticed the death). Kafka's consumers have no `group.instance.id` by default: a
    /// restarted one is a new member, and the rebalance waits for the dead member's session to
    /// time out [K3][K7].
    pub restart_takes_over: bool,
    /// Kafka's `max.poll.interval.ms` (300s [K3]); the other brokers have no poll deadline.
    pub max_poll_interval: Option<Dur>,
    /// How long until a consumer that stopped answering is dropped: ActiveMQ's
    /// `maxInactivityDuration` (30s); Kafka's `session.timeout.ms` (45s since 3.0 [K3]);
    /// RabbitMQ's heartbeat timeout (60s [B7]); Service Bus's AMQP idle timeout (120s).
    pub failure_detection: Dur,
    /// How consumers settle what they processed, and the period of `interval` commits: one ack
    /// per message, or Kafka's auto-commit every 5s (`enable.auto.commit`,
    /// `auto.commit.interval.ms` [K3]).
    pub commit: (Commit, Dur),
    /// How consumers take messages: a topped-up prefetch, or batches (an SQS receive, a Kafka
    /// poll: no push).
    pub receive: Receive,
    /// What a failure does to the rest of a consumer's window: Artemis's JMS client rolls the
    /// whole window back in order (`ClientSessionImpl.rollback`: "This ensures messages are
    /// received in the same order after rollback") [A15]; the others go on with it (ActiveMQ
    /// Classic's blocking redelivery keeps it behind the failed message in the client anyway).
    pub partial_failure: PartialFailure,
    /// The delivery lease when the file gives none (SQS: the 30s default visibility timeout;
    /// Service Bus: the queue's 60s default `LockDuration` [Z2]).
    pub lease: Option<Dur>,
    /// The client renews its leases while it works (the Service Bus processor:
    /// [`Flavour::lease_renewal`]).
    pub renews_lease: bool,
    /// Sends a producer may have outstanding: 1 for the JMS brokers, whose `send` is
    /// synchronous; 5 for Kafka (`max.in.flight.requests.per.connection` [K1]).
    pub max_in_flight: u32,
    /// The broker refuses a producer's out-of-sequence sends: Kafka's `enable.idempotence`
    /// (true since 3.0 [K1][K2]).
    pub idempotence: bool,
    /// The delay before a failed send is retried; None: the producer's `reconnect_delay` (the
    /// JMS brokers); 100ms for Kafka (`retry.backoff.ms` [K1]).
    pub retry_backoff: Option<Dur>,
    /// How long a broker remembers a stored message to refuse a resend: SQS FIFO's 5-minute
    /// deduplication interval [Q5]; none for the others (Kafka refuses resends by the idempotent
    /// producer's sequence numbers; Artemis, Pulsar and Service Bus deduplicate only when
    /// configured to).
    pub dedup_window: Option<Dur>,
    /// How many queued messages dispatch looks at: ActiveMQ's `maxPageSize` (200); SQS FIFO
    /// looks through the first 20,000 for a group it may return [Q2]; a Kafka consumer reads
    /// each partition on its own, each RabbitMQ queue behind a consistent-hash exchange and each
    /// Service Bus session dispatches from its own head (unbounded); a Pulsar dispatcher reads
    /// `dispatcherMaxReadBatchSize` (100) entries at a time, its redelivery set first, and reads
    /// on past messages for consumers without permits (they go to its replay set): unbounded in
    /// 3.x [P5][P7].
    pub page_size: u32,
    /// The longest wait of an HA pair's backup for the shared store's lock after the active
    /// member died; the takeover is drawn uniformly up to it (`[[broker]] takeover` replaces it).
    /// ActiveMQ Classic's slave retries the store's lock every `lockAcquireSleepInterval`, 10s
    /// (`SharedFileLocker`, `AbstractLocker`) [A12]; an Artemis backup every 500 ms
    /// (`FileLockNodeManager.lock`) [A13]. None: no documented figure (the file must give one).
    pub takeover: Option<Dur>,
    /// A restarted primary takes its store back from the backup serving it: Artemis's
    /// `allow-failback` (true: the primary writes `FAILINGBACK` and the backup stops) [A13];
    /// ActiveMQ Classic has no failback (the restarted master waits for the lock as the slave).
    pub failback: bool,
    /// How long a blocking send waits for its answer before the client fails the connection:
    /// Artemis's `callTimeout` (`ActiveMQClient.DEFAULT_CALL_TIMEOUT`, 30s; `ChannelImpl.
    /// sendBlocking` then calls `connection.asyncFail`) [A20]; None: the client waits as long as
    /// it takes (ActiveMQ Classic's `sendTimeout` 0).
    pub call_timeout: Option<Dur>,
    /// How long after a send the producer gives an unstored message up: Kafka's
    /// `delivery.timeout.ms`, 120s (`Sender.sendProducerData` expires in-flight batches and
    /// `RecordAccumulator.expiredBatches` waiting ones, each with a `TimeoutException`) [K11];
    /// None for the JMS brokers, whose synchronous send has no such bound (the application
    /// retries until it is stored).
    pub delivery_timeout: Option<Dur>,
    /// How long a producer's batch waits for more records: Kafka's `linger.ms`, 0 (None) in the
    /// client read and up to 3.9, 5ms from 4.0 on (KIP-1030; [`Flavour::defaults_on`]) [K31][K33].
    /// None: every record is a request of its own.
    pub linger: Option<Dur>,
    /// How often clients refresh their cached metadata, and so see partitions added to a topic:
    /// Kafka's `metadata.max.age.ms`, 5 min for producers and consumers alike
    /// (`Metadata.timeToNextUpdate`) [K20]. None: the other brokers have no partitions.
    pub metadata_max_age: Option<Dur>,
    /// Where a consumer starts in a partition its group has no committed offset for: Kafka's
    /// `auto.offset.reset`, `latest` by default [K21]. None: no such choice.
    pub auto_offset_reset: Option<super::OffsetReset>,
    /// Which messages the client may hold ahead of the one in hand (`[consumers] prefetch`
    /// above 1).
    pub read_ahead: ReadAhead,
    /// What `[redelivery]` leaves out ([`RedeliveryPolicy::resolve`]).
    pub redelivery: RedeliveryDefaults,
}

/// Which messages a broker's client may take ahead of the one its application is processing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadAhead {
    /// Any message, up to the consumer's prefetch.
    Any,
    /// Only non-persistent ones received outside a transaction: IBM MQ's classes for JMS read
    /// ahead only those, and only when the queue's `DEFREADA` and the destination's
    /// `READAHEADALLOWED` allow it (off by default); a persistent message is got one at a time
    /// [I2].
    NonPersistentOnly,
}

/// A broker product's defaults for `[redelivery]` (the module's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedeliveryDefaults {
    /// Blocking (the consumer's session holds a failed message) or not (the broker does).
    pub mode: RedeliveryMode,
    /// The delay before a redelivery; None: the lease's duration (SQS: a message reappears when
    /// its visibility timeout ends).
    pub delay: Option<Dur>,
    /// When the broker gives up.
    pub limit: Limit,
    /// Where a failed message goes back.
    pub requeue: Requeue,
    /// Where it goes back when the limit is unlimited (a `rabbitmq_quorum` queue without a
    /// delivery limit re-enqueues at the back); `requeue` for every other flavour.
    pub requeue_unlimited: Requeue,
    /// Where a gone consumer's deliveries go back.
    pub requeue_lost: Requeue,
    /// What it does with a message it gives up on.
    pub dead_letter: DeadLetter,
    /// ... when the message is not persistent (ActiveMQ's `processNonPersistent = false`).
    pub dead_letter_non_persistent: DeadLetter,
    /// A non-blocking delay is the client's timer, not the broker's: Pulsar's negative ack
    /// (`NegativeAcksTracker`) leaves the message among the consumer's unacked ones until the
    /// timer asks for its redelivery, so a consumer that goes first has it back at once with
    /// the rest (`removeConsumer`) [P6].
    pub delay_in_client: bool,
    /// The limit is applied when the message would be received again, not when it fails or its
    /// lease ends: SQS counts receives (`ApproximateReceiveCount`) and moves a message whose
    /// count would exceed `maxReceiveCount` to the dead-letter queue on that receive [Q3].
    pub redrive_on_receive: bool,
    /// A gone consumer's deliveries count against the limit: false for Service Bus, whose
    /// delivery count rises when a lock expires or a message is abandoned, not when a session
    /// is closed (its receiver's connection with it) with messages not completed [Z1].
    pub count_lost: bool,
    /// A failure (the consumer's rollback, nack or reject) counts against the limit: false for a
    /// RabbitMQ 4.3 quorum queue whose client returns failed messages with `basic.nack`, which
    /// raises `acquired_count` but not the `delivery_count` the limit reads [B9]
    /// ([`Flavour::defaults_on`]).
    pub count_failed: bool,
}

/// The largest `max_in_flight` an idempotent producer may have: Kafka's broker keeps the sequence
/// state of the last 5 batches per producer, and the client refuses `enable.idempotence = true`
/// with `max.in.flight.requests.per.connection` above 5 [K1].
pub const MAX_IDEMPOTENT_IN_FLIGHT: u32 = 5;

/// What a broker does with a message once the redelivery limit is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetter {
    /// Moves it to a dead-letter (backout, error) queue: `dead_lettered`.
    Queue,
    /// Deletes it: `dropped`.
    Drop,
}

/// Where a message goes back in its queue (`[redelivery] requeue`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requeue {
    /// Ahead of every queued message (several at once keep their production order).
    Head,
    /// Behind every queued message.
    Tail,
    /// Among the queued messages, in production order (IBM MQ's backout, SQS FIFO, RabbitMQ
    /// classic queues "if possible").
    Original,
}

/// `[lease]` with the flavour's default filled in: what the engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeasePolicy {
    /// How long a delivery is leased.
    pub duration: Dur,
    /// Renewal period while the consumer works on it.
    pub renew_every: Option<Dur>,
    /// No renewal beyond this long after the delivery.
    pub renew_max: Option<Dur>,
}

impl LeasePolicy {
    /// The lease of `l` under `flavour`: None when deliveries are not leased.
    pub fn resolve(flavour: Flavour, l: &Lease) -> Option<Self> {
        let duration = l.duration.or(flavour.lease())?;
        let (every, max) = flavour.lease_renewal(duration);
        Some(LeasePolicy {
            duration,
            renew_every: l.renew_every.or(every),
            renew_max: l.renew_max.or(max),
        })
    }
}

/// The redelivery limit, in deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Redelivered forever.
    Unlimited,
    /// The broker gives up after this many deliveries (at least 1).
    Deliveries(u32),
}

/// `[redelivery]` with the flavour's defaults filled in: what the engine runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedeliveryPolicy {
    /// Blocking (the consumer holds the message) or non-blocking (the broker does).
    pub mode: RedeliveryMode,
    /// Delay before the first redelivery.
    pub initial_delay: Dur,
    /// Each further delay is the previous one times this.
    pub multiplier: f64,
    /// Cap on the delay.
    pub max_delay: Option<Dur>,
    /// When the broker gives up.
    pub limit: Limit,
    /// Where a failed (rolled-back) message goes back in its queue.
    pub requeue: Requeue,
    /// Where the deliveries of a consumer that is gone (crashed, disconnected) go back: the same
    /// as `requeue` for every flavour but `rabbitmq_quorum` without a delivery limit.
    pub requeue_lost: Requeue,
    /// A non-blocking delay runs in the client, which dies with it ([`RedeliveryDefaults`]).
    pub delay_in_client: bool,
    /// A failed message (not deleted) becomes deliverable when its current lease ends, not a
    /// delay after the failure: SQS, when the file gives no `initial_delay`, keeps it invisible
    /// until the visibility timeout started by its receive (or by the last
    /// `ChangeMessageVisibility`, `[lease] renew_every`) runs out [Q4][Q8]. An `initial_delay` is
    /// the consumer's `ChangeMessageVisibility(delay)` at the failure: timed from the failure.
    pub until_lease_end: bool,
    /// The limit is applied on the next receive ([`RedeliveryDefaults::redrive_on_receive`]).
    pub redrive_on_receive: bool,
    /// A gone consumer's deliveries count against the limit ([`RedeliveryDefaults`]).
    pub count_lost: bool,
    /// A failed delivery counts against the limit ([`RedeliveryDefaults::count_failed`]).
    pub count_failed: bool,
    /// What it does then, when the file says (else per broker: [`RedeliveryPolicy::dead_letter`]).
    dead_letter: Option<DeadLetter>,
    flavour: Flavour,
}

impl RedeliveryPolicy {
    /// The policy of `r` under `flavour`'s current release, with the client's default verb
    /// (with `lease`: SQS redelivers after the visibility timeout).
    pub fn resolve(flavour: Flavour, r: &Redelivery, lease: &Lease) -> Self {
        let d = flavour.defaults_on(None, ReturnWith::default());
        Self::resolve_on(flavour, &d, r, lease)
    }

    /// The policy of `r` under `flavour` with its defaults `defaults` (of one release and
    /// client: [`Flavour::defaults_on`]).
    pub fn resolve_on(
        flavour: Flavour,
        defaults: &Defaults,
        r: &Redelivery,
        lease: &Lease,
    ) -> Self {
        let d = defaults.redelivery;
        let (mode, limit) = (d.mode, d.limit);
        let leased = LeasePolicy::resolve(flavour, lease);
        let delay = d
            .delay
            .unwrap_or_else(|| leased.map_or(Dur::ZERO, |l| l.duration));
        let until_lease_end = d.delay.is_none() && r.initial_delay.is_none() && leased.is_some();
        let limit = match (r.max_redeliveries, r.backout_threshold) {
            (Some(n), _) if n < 0 => Limit::Unlimited,
            (Some(n), _) => Limit::Deliveries((n as u32).saturating_add(1)),
            (None, Some(n)) if n <= 0 => Limit::Unlimited,
            (None, Some(n)) => Limit::Deliveries(n as u32),
            (None, None) => limit,
        };
        let requeue = if limit == Limit::Unlimited {
            d.requeue_unlimited
        } else {
            d.requeue
        };
        let requeue_lost = d.requeue_lost;
        RedeliveryPolicy {
            mode: r.mode.unwrap_or(mode),
            initial_delay: r.initial_delay.unwrap_or(delay),
            multiplier: r.multiplier.unwrap_or(1.0),
            max_delay: r.max_delay,
            limit,
            requeue: r.requeue.unwrap_or(requeue),
            requeue_lost: r.requeue.unwrap_or(requeue_lost),
            delay_in_client: d.delay_in_client,
            until_lease_end,
            redrive_on_receive: d.redrive_on_receive,
            count_lost: d.count_lost,
            count_failed: d.count_failed,
            dead_letter: r.dead_letter,
            flavour,
        }
    }

    /// Whether the broker gives up on a message that failed its `deliveries`-th delivery.
    #[inline]
    pub fn gives_up(&self, deliveries: u32) -> bool {
        matches!(self.limit, Limit::Deliveries(n) if deliveries >= n)
    }

    /// What broker `b` does with a message it gives up on.
    pub fn dead_letter(&self, b: &Broker) -> DeadLetter {
        let d = self.flavour.defaults().redelivery;
        self.dead_letter.unwrap_or(if b.persistent {
            d.dead_letter
        } else {
            d.dead_letter_non_persistent
        })
    }

    /// The delay before redelivery number `n` (1-based).
    pub fn delay(&self, n: u32) -> Dur {
        let mut d = self.initial_delay.0 as f64 * self.multiplier.powi(n.saturating_sub(1) as i32);
        if let Some(cap) = self.max_delay {
            d = d.min(cap.0 as f64);
        }
        Dur(d.clamp(0.0, 3.2e15) as u64)
    }

    /// The limit in the words of the file: `"6 redeliveries (7 deliveries)"`.
    pub fn describe_limit(&self) -> String {
        match self.limit {
            Limit::Unlimited => "unlimited redeliveries".into(),
            Limit::Deliveries(1) => "1 delivery".to_string(),
            Limit::Deliveries(n) => format!("{n} deliveries"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redelivery(toml_text: &str) -> Redelivery {
        toml::from_str(toml_text).unwrap()
    }

    fn no_lease() -> Lease {
        Lease::default()
    }

    /// SQS: a failed message waits for the lease from its receive unless the file times a
    /// visibility change from the failure (`initial_delay`); the redrive comes with a receive.
    /// No other flavour does either.
    #[test]
    fn sqs_failures_wait_for_the_lease_and_redrive_on_receive() {
        let sqs = RedeliveryPolicy::resolve(Flavour::Sqs, &redelivery(""), &no_lease());
        assert!(sqs.until_lease_end && sqs.redrive_on_receive);
        assert_eq!(sqs.initial_delay, Dur::from_secs(30));
        let own = RedeliveryPolicy::resolve(
            Flavour::Sqs,
            &redelivery("initial_delay = \"5s\""),
            &no_lease(),
        );
        assert!(!own.until_lease_end && own.redrive_on_receive);
        for f in Flavour::ALL.iter().filter(|f| **f != Flavour::Sqs) {
            let p = RedeliveryPolicy::resolve(*f, &redelivery(""), &no_lease());
            assert!(!p.until_lease_end && !p.redrive_on_receive, "{f:?}");
        }
    }

    fn broker(persistent: bool) -> Broker {
        toml::from_str(&format!("name = \"a\"\npersistent = {persistent}")).unwrap()
    }

    /// `rabbitmq_quorum` by release: 3.x no default limit (a nack at the back); 4.0-4.2 a limit
    /// of 20 returns, every return counted; 4.3 (the default) counts a reject, not a nack, and
    /// without a limit puts a reject first. Every other flavour has no versions.
    #[test]
    fn rabbitmq_quorum_releases_differ_in_limit_position_and_counting() {
        let q = Flavour::RabbitmqQuorum;
        assert_eq!(q.default_version(), Some("4.3"));
        let r = |v: &str, w| q.defaults_on(Some(v), w).redelivery;
        let v3 = r("3.13", ReturnWith::Nack);
        assert_eq!(
            (v3.limit, v3.requeue_unlimited),
            (Limit::Unlimited, Requeue::Tail)
        );
        assert_eq!(v3.requeue_lost, Requeue::Head);
        let v42 = r("4.2", ReturnWith::Nack);
        assert_eq!(v42, r("4.0", ReturnWith::Reject));
        assert_eq!(v42, q.defaults().redelivery);
        assert!(v42.count_failed && v42.limit == Limit::Deliveries(21));
        let nack = r("4.3", ReturnWith::Nack);
        assert!(!nack.count_failed && nack.count_lost);
        assert_eq!(nack.requeue_unlimited, Requeue::Tail);
        let reject = r("4.3", ReturnWith::Reject);
        assert!(reject.count_failed);
        assert_eq!(reject.requeue_unlimited, Requeue::Head);
        assert_eq!(q.defaults_on(None, ReturnWith::Nack).redelivery, nack);
        // Another product's defaults do not depend on a version (Pulsar's version is read by
        // its strategy, not here).
        for f in Flavour::ALL.into_iter().filter(|f| *f != q) {
            let expected = match f {
                Flavour::Pulsar => Some("5.0"),
                Flavour::Kafka => Some("3.9"),
                _ => None,
            };
            assert_eq!(f.default_version(), expected, "{f:?}");
            assert_eq!(f.defaults_on(None, ReturnWith::Nack), f.defaults(), "{f:?}");
            for v in f.versions().iter().filter(|_| f != Flavour::Kafka) {
                assert_eq!(
                    f.defaults_on(Some(v), ReturnWith::Reject),
                    f.defaults(),
                    "{f:?} {v}"
                );
            }
        }
    }

    /// Kafka by release: `linger.ms` 0 up to 3.9 (and by default, 3.9), 5ms from 4.0 on
    /// (KIP-1030); nothing else the model has differs between them [K33].
    #[test]
    fn kafka_releases_differ_in_linger_only() {
        let k = Flavour::Kafka;
        let on = |v: Option<&str>| k.defaults_on(v, ReturnWith::Nack);
        assert_eq!(on(None), k.defaults());
        assert_eq!(on(None).linger, None);
        for v in k.versions() {
            let d = on(Some(v));
            let linger = (release(v) >= (4, 0)).then(|| Dur::from_millis(5));
            assert_eq!(d.linger, linger, "{v}");
            assert_eq!(Defaults { linger: None, ..d }, k.defaults(), "{v}");
        }
    }

    #[test]
    fn max_redeliveries_n_allows_n_plus_one_deliveries() {
        let p = RedeliveryPolicy::resolve(
            Flavour::Activemq,
            &redelivery("max_redeliveries = 5"),
            &no_lease(),
        );
        assert_eq!(p.limit, Limit::Deliveries(6));
        assert!(!p.gives_up(5));
        assert!(p.gives_up(6));
    }

    #[test]
    fn backout_threshold_n_allows_n_deliveries_and_zero_disables_it() {
        let p = RedeliveryPolicy::resolve(
            Flavour::IbmMq,
            &redelivery("backout_threshold = 5"),
            &no_lease(),
        );
        assert!(!p.gives_up(4));
        assert!(p.gives_up(5));
        let off = RedeliveryPolicy::resolve(
            Flavour::Activemq,
            &redelivery("backout_threshold = 0"),
            &no_lease(),
        );
        assert_eq!(off.limit, Limit::Unlimited);
        let minus = RedeliveryPolicy::resolve(
            Flavour::Artemis,
            &redelivery("max_redeliveries = -1"),
            &no_lease(),
        );
        assert!(!minus.gives_up(u32::MAX));
    }

    /// `native` is a choice of the file, not a product: it reads and writes by name beside the
    /// products, and a typo lists every name.
    #[test]
    fn the_file_chooses_a_product_or_native() {
        for f in Flavour::ALL {
            let c: FlavourChoice = toml::Value::String(f.name().into()).try_into().unwrap();
            assert_eq!(c, FlavourChoice::Product(f));
            assert_eq!(toml::Value::try_from(c).unwrap().as_str(), Some(f.name()));
        }
        let native: FlavourChoice = toml::Value::String("native".into()).try_into().unwrap();
        assert_eq!(
            (native, native.product()),
            (FlavourChoice::Native, Flavour::Activemq)
        );
        let e = toml::Value::String("kafkaa".into())
            .try_into::<FlavourChoice>()
            .unwrap_err()
            .to_string();
        for name in CHOICE_NAMES {
            assert!(e.contains(&format!("`{name}`")), "{e}");
        }
        assert_eq!(CHOICE_NAMES.len(), Flavour::ALL.len() + 1);
    }

    #[test]
    fn each_flavour_has_its_documented_defaults() {
        let none = redelivery("");
        let p = |f| RedeliveryPolicy::resolve(f, &none, &no_lease());
        let amq = p(Flavour::Activemq);
        assert_eq!(
            (amq.mode, amq.initial_delay, amq.limit),
            (
                RedeliveryMode::Blocking,
                Dur::from_secs(1),
                Limit::Deliveries(7)
            )
        );
        assert_eq!(amq.dead_letter(&broker(true)), DeadLetter::Queue);
        assert_eq!(amq.dead_letter(&broker(false)), DeadLetter::Drop);
        let art = p(Flavour::Artemis);
        assert_eq!(
            (art.mode, art.initial_delay, art.limit),
            (
                RedeliveryMode::NonBlocking,
                Dur::ZERO,
                Limit::Deliveries(10)
            )
        );
        assert_eq!(art.dead_letter(&broker(true)), DeadLetter::Drop);
        let mq = p(Flavour::IbmMq);
        assert_eq!(
            (mq.mode, mq.limit),
            (RedeliveryMode::NonBlocking, Limit::Unlimited)
        );
        assert_eq!(mq.dead_letter(&broker(false)), DeadLetter::Queue);
        let wls = p(Flavour::Weblogic);
        assert_eq!(wls.limit, Limit::Unlimited);
        assert_eq!(wls.dead_letter(&broker(true)), DeadLetter::Drop);
        let kafka = p(Flavour::Kafka);
        assert_eq!(
            (kafka.mode, kafka.initial_delay, kafka.limit, kafka.requeue),
            (
                RedeliveryMode::Blocking,
                Dur::ZERO,
                Limit::Deliveries(10),
                Requeue::Original
            )
        );
        assert_eq!(kafka.dead_letter(&broker(true)), DeadLetter::Drop);
        assert_eq!(Flavour::Kafka.failure_detection(), Dur::from_secs(45));
        assert_eq!(Flavour::Kafka.commit(), (Commit::Batch, Dur::from_secs(5)));
        assert_eq!(Flavour::Activemq.commit().0, Commit::Each);
    }

    /// The Kafka client: Spring Kafka's container (the flavour's defaults) commits each poll's
    /// records and retries a failed one 10 times; the plain `KafkaConsumer` auto-commits every
    /// 5s at a poll and skips a failed record; nothing else differs.
    #[test]
    fn the_kafka_client_decides_the_commit_and_the_retries() {
        let d = Flavour::Kafka.defaults();
        assert_eq!(KafkaClient::default(), KafkaClient::Spring);
        assert_eq!(KafkaClient::Spring.defaults(d), d);
        let plain = KafkaClient::Plain.defaults(d);
        assert_eq!(plain.commit, (Commit::Interval, Dur::from_secs(5)));
        assert_eq!(plain.redelivery.limit, Limit::Deliveries(1));
        assert_eq!(
            Defaults {
                commit: d.commit,
                redelivery: d.redelivery,
                ..plain
            },
            d
        );
    }

    /// Only Kafka's consumers poll under a deadline (`max.poll.interval.ms`, 300s) and rejoin as
    /// new members after a restart (no `group.instance.id`) [K3][K7].
    #[test]
    fn only_kafka_has_a_poll_deadline_and_dynamic_membership() {
        for f in Flavour::ALL {
            let kafka = f == Flavour::Kafka;
            assert_eq!(
                f.max_poll_interval(),
                kafka.then(|| Dur::from_secs(300)),
                "{f:?}"
            );
            assert_eq!(f.restart_takes_over(), !kafka, "{f:?}");
        }
    }

    /// Dispatch looks 200 messages deep (ActiveMQ's `maxPageSize`), SQS FIFO 20,000 [Q2], and a
    /// Kafka consumer reads every partition on its own.
    #[test]
    fn each_flavour_has_its_dispatch_window() {
        for f in Flavour::ALL {
            let expected = match f {
                Flavour::Sqs => 20_000,
                Flavour::Kafka
                | Flavour::Rabbitmq
                | Flavour::RabbitmqQuorum
                | Flavour::Servicebus
                | Flavour::Pulsar => u32::MAX,
                _ => 200,
            };
            assert_eq!(f.page_size(), expected, "{f:?}");
        }
    }

    /// Every JMS flavour (and SQS) sends synchronously, without idempotence, and retries after
    /// the reconnect delay; the file's values win, and an absent backoff is the reconnect delay.
    #[test]
    fn producers_send_synchronously_by_default() {
        for f in Flavour::ALL.into_iter().filter(|&f| f != Flavour::Kafka) {
            assert_eq!(
                (f.max_in_flight(), f.idempotence(), f.retry_backoff()),
                (1, false, None),
                "{}",
                f.name()
            );
        }
        // Kafka's producer: 5 in flight, idempotent since 3.0, 100ms between retries [K1][K2].
        let k = Flavour::Kafka;
        assert_eq!(
            (k.max_in_flight(), k.idempotence(), k.retry_backoff()),
            (5, true, Some(Dur::from_millis(100)))
        );
        let sc: crate::scenario::Scenario = toml::from_str(
            "strategies = [\"single\"]\n[workload]\nmessages = 1\nrate = \"1/s\"\nkeys = 1\n\
             [producers]\nreconnect_delay = \"2s\"\n[[broker]]\nname = \"a\"\n\
             [consumers]\ncount = 1\nservice = \"1ms\"",
        )
        .unwrap();
        let r = sc.resolve().unwrap();
        assert_eq!(
            (r.max_in_flight, r.idempotence, r.retry_backoff),
            (1, false, Dur::from_secs(2))
        );
        let mut sc = sc;
        sc.producers.max_in_flight = Some(4);
        sc.producers.idempotence = Some(true);
        sc.producers.retry_backoff = Some(Dur::from_millis(100));
        let r = sc.resolve().unwrap();
        assert_eq!(
            (r.max_in_flight, r.idempotence, r.retry_backoff),
            (4, true, Dur::from_millis(100))
        );
    }

    /// Pulsar's Java client: a negative ack is redelivered after `negativeAckRedeliveryDelay`
    /// (1 min) while later messages go on; no `DeadLetterPolicy`, so no limit (with
    /// `maxRedeliverCount = N`, written `max_redeliveries = N`, the (N + 1)th failed delivery
    /// goes to the dead-letter topic); `ackTimeout` 0: no lease; a closed connection is noticed
    /// at once; one ack per message; the broker pushes up to the receiver queue [P1][P5].
    #[test]
    fn pulsar_negative_acks_wait_a_minute_and_never_give_up() {
        let f = Flavour::Pulsar;
        let p = RedeliveryPolicy::resolve(f, &redelivery(""), &no_lease());
        assert_eq!(
            (p.mode, p.initial_delay, p.limit, p.requeue),
            (
                RedeliveryMode::NonBlocking,
                Dur::from_secs(60),
                Limit::Unlimited,
                Requeue::Original
            )
        );
        assert_eq!(p.delay(5), Dur::from_secs(60), "no backoff by default");
        assert!(!p.gives_up(u32::MAX));
        assert_eq!(p.dead_letter(&broker(true)), DeadLetter::Queue);
        let dlq = RedeliveryPolicy::resolve(f, &redelivery("max_redeliveries = 3"), &no_lease());
        assert!(!dlq.gives_up(3) && dlq.gives_up(4));
        assert_eq!(LeasePolicy::resolve(f, &no_lease()), None);
        assert_eq!(f.crash_detection(), CrashDetection::Connection);
        assert_eq!(f.commit().0, Commit::Each);
        assert_eq!(f.receive(), Receive::Prefetch);
        assert_eq!(f.failure_detection(), Dur::from_secs(30));
        assert_eq!(
            (f.max_in_flight(), f.idempotence(), f.retry_backoff()),
            (1, false, None)
        );
        assert_eq!(f.name(), "pulsar");
        let sc: crate::scenario::Scenario = toml::from_str(
            "flavour = \"pulsar\"\nstrategies = [\"single\"]\n[workload]\nmessages = 1\nrate = \"1/s\"\nkeys = 1\n\
             [[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"",
        )
        .unwrap();
        assert_eq!(sc.flavour, FlavourChoice::Product(Flavour::Pulsar));
    }

    /// A `[[broker]] version`: the product's list, the current release by default, a friendly
    /// error naming the allowed values, refused on a flavour without versions and under native.
    #[test]
    fn broker_versions_are_the_products_and_default_to_the_current_release() {
        let file = |flavour: &str, version: &str| {
            format!(
                "flavour = \"{flavour}\"\nstrategies = [\"single\"]\n[workload]\nmessages = 1\nrate = \"1/s\"\n\
                 keys = 1\n[[broker]]\nname = \"a\"\n{version}\n[consumers]\ncount = 1\nservice = \"1ms\""
            )
        };
        let parse = |flavour: &str, version: &str| -> crate::scenario::Scenario {
            toml::from_str(&file(flavour, version)).unwrap()
        };
        let problems = |sc: &crate::scenario::Scenario| {
            crate::scenario::validate(sc)
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        };
        assert_eq!(Flavour::Pulsar.default_version(), Some("5.0"));
        assert_eq!(Flavour::Activemq.default_version(), None);
        for f in Flavour::ALL.into_iter().filter(|f| *f != Flavour::Kafka) {
            assert_eq!(f.default_version(), f.versions().last().copied());
        }
        // Kafka's default stays on 3.9 (its histories unchanged); 4.x is opt-in.
        assert_eq!(Flavour::Kafka.default_version(), Some("3.9"));
        assert_eq!(parse("kafka", "").broker_version(0), Some("3.9"));
        let bad = problems(&parse("kafka", "version = \"2.8\""));
        assert!(
            bad.contains("default \"3.9\")") && !bad.contains("current release"),
            "{bad}"
        );
        let sc = parse("pulsar", "");
        assert_eq!(sc.broker_version(0), Some("5.0"));
        assert_eq!(problems(&sc), "");
        let sc = parse("pulsar", "version = \"3.3\"");
        assert_eq!(sc.broker_version(0), Some("3.3"));
        assert_eq!(problems(&sc), "");
        let bad = problems(&parse("pulsar", "version = \"3.11\""));
        assert!(
            bad.contains("broker[0].version") || bad.contains("version"),
            "{bad}"
        );
        assert!(bad.contains("\"3.3\"") && bad.contains("\"5.0\""), "{bad}");
        // A patch release is pointed to its line.
        let patch = problems(&parse("pulsar", "version = \"4.0.2\""));
        assert!(patch.contains("release line, \"4.0\""), "{patch}");
        let unknown = problems(&parse("pulsar", "version = \"4.9.2\""));
        assert!(unknown.contains("one of"), "{unknown}");
        let sc = parse("activemq", "version = \"5.18\"");
        assert_eq!(sc.broker_version(0), None);
        assert!(
            problems(&sc).contains("leave `version` out"),
            "{}",
            problems(&sc)
        );
        assert_eq!(problems(&parse("activemq", "")), "");
        let native = problems(&parse("native", "version = \"4.0\""));
        assert!(native.contains("native"), "{native}");
    }

    /// RabbitMQ: a classic queue requeues to the original position and has no delivery limit;
    /// a quorum queue (4.0-4.2, and 4.3 by default) delivers returns first and drops a message on
    /// its 21st return (`delivery-limit` 20, no dead-letter exchange); with `x-delivery-limit = -1` a nack goes to
    /// the back while a gone consumer's messages still come back first [B1][B3].
    #[test]
    fn rabbitmq_classic_and_quorum_queues() {
        let none = redelivery("");
        let classic = RedeliveryPolicy::resolve(Flavour::Rabbitmq, &none, &no_lease());
        assert_eq!(
            (classic.mode, classic.initial_delay, classic.limit),
            (RedeliveryMode::NonBlocking, Dur::ZERO, Limit::Unlimited)
        );
        assert_eq!(
            (classic.requeue, classic.requeue_lost),
            (Requeue::Original, Requeue::Original)
        );
        let quorum = RedeliveryPolicy::resolve(Flavour::RabbitmqQuorum, &none, &no_lease());
        assert_eq!(quorum.limit, Limit::Deliveries(21));
        assert!(!quorum.gives_up(20) && quorum.gives_up(21));
        assert_eq!(
            (quorum.requeue, quorum.requeue_lost),
            (Requeue::Head, Requeue::Head)
        );
        assert_eq!(quorum.dead_letter(&broker(true)), DeadLetter::Drop);
        let unlimited = RedeliveryPolicy::resolve(
            Flavour::RabbitmqQuorum,
            &redelivery("max_redeliveries = -1"),
            &no_lease(),
        );
        assert_eq!(unlimited.limit, Limit::Unlimited);
        assert_eq!(
            (unlimited.requeue, unlimited.requeue_lost),
            (Requeue::Tail, Requeue::Head)
        );
        // The file's `requeue` is both positions.
        let set = RedeliveryPolicy::resolve(
            Flavour::RabbitmqQuorum,
            &redelivery("requeue = \"original\""),
            &no_lease(),
        );
        assert_eq!(
            (set.requeue, set.requeue_lost),
            (Requeue::Original, Requeue::Original)
        );
        for f in [Flavour::Rabbitmq, Flavour::RabbitmqQuorum] {
            assert_eq!(f.failure_detection(), Dur::from_secs(60));
            assert_eq!(f.crash_detection(), CrashDetection::Connection);
            assert_eq!(f.commit().0, Commit::Each);
            assert_eq!(f.receive(), Receive::Prefetch);
            assert_eq!(f.lease(), None);
        }
        // Every other flavour puts both back in the same place.
        for f in Flavour::ALL {
            let p = RedeliveryPolicy::resolve(f, &none, &no_lease());
            if f != Flavour::RabbitmqQuorum {
                assert_eq!(p.requeue, p.requeue_lost, "{f:?}");
            }
        }
    }

    #[test]
    fn the_file_overrides_the_flavour() {
        let r = redelivery("mode = \"blocking\"\ninitial_delay = \"5s\"\ndead_letter = \"queue\"\nmax_redeliveries = 2");
        let p = RedeliveryPolicy::resolve(Flavour::Artemis, &r, &no_lease());
        assert_eq!(p.mode, RedeliveryMode::Blocking);
        assert_eq!(p.initial_delay, Dur::from_secs(5));
        assert_eq!(p.limit, Limit::Deliveries(3));
        assert_eq!(p.dead_letter(&broker(false)), DeadLetter::Queue);
    }

    /// Service Bus: a 60s lock renewed 10s before it ends (50s) for up to 5 min, a crashed
    /// receiver found when its connection closes (its messages back uncounted), 10 deliveries
    /// then the dead-letter subqueue, abandon back at the head at once [Z1][Z2][Z5][Z6].
    #[test]
    fn servicebus_has_its_documented_defaults() {
        let f = Flavour::Servicebus;
        let p = RedeliveryPolicy::resolve(f, &redelivery(""), &no_lease());
        assert_eq!(
            (p.mode, p.initial_delay, p.limit, p.requeue),
            (
                RedeliveryMode::NonBlocking,
                Dur::ZERO,
                Limit::Deliveries(10),
                Requeue::Head
            )
        );
        assert_eq!(p.dead_letter(&broker(true)), DeadLetter::Queue);
        assert_eq!(
            LeasePolicy::resolve(f, &no_lease()),
            Some(LeasePolicy {
                duration: Dur::from_secs(60),
                renew_every: Some(Dur::from_secs(50)),
                renew_max: Some(Dur::from_secs(300)),
            })
        );
        // A shorter lock is renewed halfway through it (buffer min(lock / 2, 10s)).
        let short: Lease = toml::from_str("duration = \"10s\"").unwrap();
        let l = LeasePolicy::resolve(f, &short).unwrap();
        assert_eq!(l.renew_every, Some(Dur::from_secs(5)));
        // The file's renewal wins; other flavours do not renew.
        let own: Lease = toml::from_str("renew_every = \"20s\"").unwrap();
        assert_eq!(
            LeasePolicy::resolve(f, &own).unwrap().renew_every,
            Some(Dur::from_secs(20))
        );
        assert_eq!(
            LeasePolicy::resolve(Flavour::Sqs, &no_lease())
                .unwrap()
                .renew_every,
            None
        );
        assert_eq!(f.crash_detection(), CrashDetection::Connection);
        assert!(!p.count_lost, "a closed session raises no delivery count");
        for other in Flavour::ALL.into_iter().filter(|&o| o != f) {
            assert!(
                RedeliveryPolicy::resolve(other, &redelivery(""), &no_lease()).count_lost,
                "{other:?}"
            );
        }
        assert_eq!(f.failure_detection(), Dur::from_secs(120));
        assert_eq!(f.receive(), Receive::Prefetch);
        assert_eq!(f.commit().0, Commit::Each);
        assert_eq!(f.name(), "servicebus");
    }
}
