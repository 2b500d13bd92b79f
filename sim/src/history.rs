//! The history: what happened, as typed events. It speaks of messages, keys, sequence numbers,
//! producers, brokers, consumers and times, never of engine objects, so a history recorded from a
//! real broker can be judged by the same checkers. `sim run --trace FILE` writes it as JSON lines.

use crate::time::Time;
use serde::{Deserialize, Serialize};

/// Identity of a message: its id at the broker, entity key, per-key production order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgRef {
    /// Unique, from 0, in the order messages are stored or produced: a produced message's, or
    /// a copy's that a resend stored again (`Event::Resend`: its key and seq are its original's).
    /// Without resends, the global production order.
    pub id: u64,
    /// The entity.
    pub key: u32,
    /// Per-key production order, from 0: the truth the checkers compare against.
    pub seq: u32,
}

/// A node that can crash, recover or lose its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    /// A broker, by index in the scenario.
    Broker(u16),
    /// A consumer.
    Consumer(u32),
    /// A producer.
    Producer(u32),
    /// The target database.
    TargetDb,
    /// The source database.
    SourceDb,
    /// The cache cluster.
    Cache,
}

/// Why processing rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// The target resource was unavailable (transient).
    Outage,
    /// The message itself cannot be processed (permanent).
    Poison,
    /// The strategy gave up (e.g. a lock wait timed out).
    Strategy,
}

/// Why a message vanished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscardReason {
    /// A non-persistent broker crashed holding it.
    BrokerCrash,
    /// A component that had acknowledged it upstream crashed before applying it.
    BufferLost,
    /// The consumer group's position in its partition was set past it before it was ever
    /// fetched (Kafka's `auto.offset.reset = latest` on a partition added to the topic that the
    /// group had no committed offset for): it stays in the log, and nobody reads it.
    OffsetReset,
    /// A Kafka partition's new leader did not have it: the log was cut back to the new
    /// leader's end (a record the crashed leader wrote that its followers had not fetched yet,
    /// or, after an unclean election, one the new leader had missed).
    Truncated,
    /// The Kafka transaction it was written in was aborted (a `producer_crash`: its producer's
    /// successor called `initTransactions`, or the transaction timed out while it was dead): a
    /// `read_committed` consumer never reads it. Its producer wrote it again (a `resend`).
    Aborted,
    /// A zombie producer's late write, refused by its transactional id's epoch (a
    /// `producer_pause`: a new instance, or the coordinator's abort of its timed-out
    /// transaction, bumped the epoch; the partition leader answers `INVALID_PRODUCER_EPOCH`, the
    /// coordinator `PRODUCER_FENCED`, and the client must close). Never written: the new
    /// instance wrote it again (a `resend`).
    Fenced,
}

/// One history event. `t` is simulated time in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A producer created a message. `timestamp` is its clock reading (may be skewed or coarse).
    Produce {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Producer index.
        producer: u32,
        /// Producer clock reading, microseconds.
        timestamp: u64,
        /// Hidden poison flag (only processing discovers it; the checker needs it to grade).
        poison: bool,
    },
    /// A broker stored the message.
    Enqueue {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Broker index.
        broker: u16,
    },
    /// Store-and-forward to another broker started.
    Forward {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// From.
        from: u16,
        /// To.
        to: u16,
    },
    /// A broker handed the message to a consumer. `delivery` counts from 1.
    Dispatch {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Broker.
        broker: u16,
        /// Consumer.
        consumer: u32,
        /// Delivery number (1 = first delivery).
        delivery: u32,
        /// JMSRedelivered.
        redelivered: bool,
    },
    /// The consumer started processing a delivered message.
    Start {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Consumer.
        consumer: u32,
    },
    /// The target was written. `state_seq` is the seq whose state was written (usually the message's
    /// own; a notifier writes what it read from the source).
    Apply {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Consumer (or strategy worker) that wrote.
        consumer: u32,
        /// Seq of the state written.
        state_seq: u32,
    },
    /// The handler deliberately did not write (stale by version/timestamp) and will ack.
    Reject {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Consumer.
        consumer: u32,
    },
    /// The broker received the consumer's acknowledgement; the message is settled there.
    Ack {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Consumer.
        consumer: u32,
    },
    /// Processing failed and the transaction rolled back.
    Rollback {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Consumer.
        consumer: u32,
        /// Why.
        reason: FailReason,
    },
    /// The message will be redelivered after `delay_us`.
    Redelivery {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Delay.
        delay_us: u64,
        /// Held by the consumer (blocking) or by the broker (non-blocking).
        blocking: bool,
    },
    /// Moved to the dead-letter (backout) queue: settled, not applied.
    DeadLetter {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Broker.
        broker: u16,
    },
    /// The broker gave up on the message (the redelivery limit) and deleted it: no dead-letter
    /// queue (`[redelivery] dead_letter = "drop"`, or the flavour's default). Settled, not applied.
    Drop {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Broker.
        broker: u16,
    },
    /// The lease of a delivery ended (`[lease]`: visibility timeout, lock expiry): the broker
    /// takes the message back and may deliver it again, while `consumer` may still be working on
    /// it.
    Expire {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Broker.
        broker: u16,
        /// The consumer whose lease ended.
        consumer: u32,
    },
    /// A consumer's ack (delete) reached the broker after the delivery was no longer its (its
    /// lease had ended): refused. What the consumer did is done.
    AckFail {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Consumer.
        consumer: u32,
    },
    /// A consumer committed what it processed since its last commit (`[consumers] commit`:
    /// offsets in a log): each record the commit settles follows as an `ack`, each it could not
    /// (its delivery was no longer the consumer's: its partition moved) as an `ack_fail`.
    Commit {
        /// Time.
        t: Time,
        /// Consumer.
        consumer: u32,
        /// How many processed records it covered.
        records: u32,
    },
    /// An operator moved the message from `broker`'s dead-letter queue back to its queue (the
    /// `dlq_replay` fault): it is deliverable again, as new.
    Replay {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Broker.
        broker: u16,
        /// Hidden poison flag (the checker needs it to re-count the message).
        poison: bool,
    },
    /// The message vanished (no copy remains anywhere).
    Discard {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Why.
        reason: DiscardReason,
    },
    /// A node went down.
    Crash {
        /// Time.
        t: Time,
        /// Which.
        node: Node,
    },
    /// A node came back.
    Recover {
        /// Time.
        t: Time,
        /// Which.
        node: Node,
    },
    /// The other member of an HA pair serves `from`'s store from now on: a backup took over
    /// from its dead primary, or a restarted primary took its store back (a failback). The
    /// pair's clients reconnect to it through their failover lists.
    Takeover {
        /// Time.
        t: Time,
        /// The broker that serves now.
        broker: u16,
        /// The member that served before.
        from: u16,
    },
    /// A consumer lost its broker connection (process alive).
    Disconnect {
        /// Time.
        t: Time,
        /// Which.
        node: Node,
    },
    /// A producer or consumer connected to a broker (`failover` when it is not its first).
    Connect {
        /// Time.
        t: Time,
        /// Which.
        node: Node,
        /// Broker.
        broker: u16,
        /// Whether this is a failover (a reconnect after losing a broker).
        failover: bool,
    },
    /// A consumer endpoint was suspended after repeated failures.
    Suspend {
        /// Time.
        t: Time,
        /// Consumer.
        consumer: u32,
    },
    /// A suspended endpoint resumed.
    Resume {
        /// Time.
        t: Time,
        /// Consumer.
        consumer: u32,
    },
    /// A batch job started on a consumer.
    JobStart {
        /// Time.
        t: Time,
        /// Consumer.
        consumer: u32,
    },
    /// A batch job ended: the queue was drained, or it gave up on a resource outage.
    JobEnd {
        /// Time.
        t: Time,
        /// Consumer.
        consumer: u32,
        /// It stopped because of a resource outage (the rest waits for the next run).
        gave_up: bool,
    },
    /// The exclusive/owner assignment changed (single takeover, message group reassignment).
    Reassign {
        /// Time.
        t: Time,
        /// Broker.
        broker: u16,
        /// New owner: a consumer index, or `consumers.count + peer` for the network bridge
        /// toward broker `peer` (a bridge can own a group or be the exclusive consumer).
        consumer: u32,
    },
    /// A send failed at the producer (e.g. `JMSOrderException`: the Unit-of-Order's member is
    /// down); the producer will try again.
    SendFail {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Producer.
        producer: u32,
    },
    /// A producer resent a message whose first send the broker had stored though the answer was
    /// lost (a `send_timeout`), or that a crashed producer's application wrote after its last
    /// commit (a `producer_crash`: the new instance writes it again). `deduplicated`: the broker refused the resend (an idempotent
    /// producer's sequence number, or the broker's `dedup_window`) and `msg` is the message
    /// itself; else the broker stored it again as `msg`, a new message (its own id, an offset or
    /// message id of its own) with the key and seq of message `of`: a duplicate.
    Resend {
        /// Time.
        t: Time,
        /// The copy stored (or, deduplicated, the message refused again).
        msg: MsgRef,
        /// The id of the message first stored.
        of: u64,
        /// Producer.
        producer: u32,
        /// The broker the resend reached.
        broker: u16,
        /// The broker refused it.
        deduplicated: bool,
    },
    /// The producer gave a send up: it was not stored `delivery_timeout` after it was made
    /// (Kafka's `delivery.timeout.ms`: the batch expired, the callback got a
    /// `TimeoutException`). If the broker never stored the message, it never will: it is
    /// given up (`given_up` in the summary) unless `resent`: the application sent it again as a
    /// new send, behind those made since. If the broker had stored a first attempt whose answer
    /// was lost (a `send_timeout`), the message is the broker's as any stored one.
    DeliveryTimeout {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
        /// Producer.
        producer: u32,
        /// The application sent it again (`on_delivery_timeout = "resend"`).
        resent: bool,
    },
    /// A handler read the source database (the notifier strategy).
    SourceRead {
        /// Time.
        t: Time,
        /// The key read.
        key: u32,
        /// Who read.
        consumer: u32,
        /// The seq of the state read (None: no row yet).
        seq: Option<u32>,
    },
    /// The fault phase ended; the drain phase began.
    DrainStart {
        /// Time.
        t: Time,
    },
    /// End of run: the message is still held somewhere (a liveness failure).
    Pending {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
    },
    /// End of run: the message was applied, but the broker still holds its delivery: the ack, or
    /// the offset commit that covers the record, never reached it. A restart of the group or the
    /// queue would deliver it again (a duplicate).
    Unacked {
        /// Time.
        t: Time,
        /// The message.
        msg: MsgRef,
    },
}

impl Event {
    /// Whether the event is progress: a message produced, delivered, applied, rejected, acked,
    /// rolled back, dead-lettered, dropped, discarded or given up by its producer. (A fault starting or ending is progress too; the
    /// engine counts those itself.) Reconnect attempts, failed sends, timers and job starts are
    /// not: a run that only does those cannot settle anything.
    #[inline]
    pub fn is_progress(&self) -> bool {
        matches!(
            self,
            Event::Produce { .. }
                | Event::Dispatch { .. }
                | Event::Apply { .. }
                | Event::Reject { .. }
                | Event::Ack { .. }
                | Event::Rollback { .. }
                | Event::DeadLetter { .. }
                | Event::Drop { .. }
                | Event::Discard { .. }
                | Event::DeliveryTimeout { .. }
        )
    }

    /// The message the event is about, if it is about one.
    pub fn msg(&self) -> Option<MsgRef> {
        match *self {
            Event::Produce { msg, .. }
            | Event::Enqueue { msg, .. }
            | Event::Forward { msg, .. }
            | Event::Dispatch { msg, .. }
            | Event::Start { msg, .. }
            | Event::Apply { msg, .. }
            | Event::Reject { msg, .. }
            | Event::Ack { msg, .. }
            | Event::Rollback { msg, .. }
            | Event::Redelivery { msg, .. }
            | Event::Expire { msg, .. }
            | Event::AckFail { msg, .. }
            | Event::Replay { msg, .. }
            | Event::DeadLetter { msg, .. }
            | Event::Drop { msg, .. }
            | Event::Discard { msg, .. }
            | Event::SendFail { msg, .. }
            | Event::Resend { msg, .. }
            | Event::DeliveryTimeout { msg, .. }
            | Event::Pending { msg, .. }
            | Event::Unacked { msg, .. } => Some(msg),
            _ => None,
        }
    }

    /// The event's time.
    #[inline]
    pub fn time(&self) -> Time {
        match *self {
            Event::Produce { t, .. }
            | Event::Enqueue { t, .. }
            | Event::Forward { t, .. }
            | Event::Dispatch { t, .. }
            | Event::Start { t, .. }
            | Event::Apply { t, .. }
            | Event::Reject { t, .. }
            | Event::Ack { t, .. }
            | Event::Rollback { t, .. }
            | Event::Redelivery { t, .. }
            | Event::Expire { t, .. }
            | Event::AckFail { t, .. }
            | Event::Commit { t, .. }
            | Event::Replay { t, .. }
            | Event::DeadLetter { t, .. }
            | Event::Drop { t, .. }
            | Event::Discard { t, .. }
            | Event::Crash { t, .. }
            | Event::Recover { t, .. }
            | Event::Takeover { t, .. }
            | Event::Disconnect { t, .. }
            | Event::Connect { t, .. }
            | Event::Suspend { t, .. }
            | Event::Resume { t, .. }
            | Event::Reassign { t, .. }
            | Event::SourceRead { t, .. }
            | Event::SendFail { t, .. }
            | Event::Resend { t, .. }
            | Event::DeliveryTimeout { t, .. }
            | Event::JobStart { t, .. }
            | Event::JobEnd { t, .. }
            | Event::DrainStart { t }
            | Event::Pending { t, .. }
            | Event::Unacked { t, .. } => t,
        }
    }
}

/// Receives every history event as it happens. The engine is generic over it, so a run without a
/// trace pays nothing.
pub trait Observer {
    /// One event.
    fn event(&mut self, e: &Event);
}

/// Observes nothing.
pub struct NoObserver;

impl Observer for NoObserver {
    #[inline(always)]
    fn event(&mut self, _: &Event) {}
}

/// An observer behind a trait object, so that the engine is compiled once for every observed run
/// rather than once per observer type.
pub struct DynObserver<'a>(pub &'a mut dyn Observer);

impl Observer for DynObserver<'_> {
    #[inline]
    fn event(&mut self, e: &Event) {
        self.0.event(e)
    }
}

impl<F: FnMut(&Event)> Observer for F {
    #[inline]
    fn event(&mut self, e: &Event) {
        self(e)
    }
}

/// Writes events as JSON lines.
pub struct JsonLines<W: std::io::Write> {
    out: W,
    /// First write error, if any (reported after the run; the run itself goes on).
    pub error: Option<std::io::Error>,
}

impl<W: std::io::Write> JsonLines<W> {
    /// Wraps a writer (buffer it).
    pub fn new(out: W) -> Self {
        JsonLines { out, error: None }
    }

    /// Flushes and returns the writer, or the first error.
    pub fn finish(mut self) -> std::io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: std::io::Write> Observer for JsonLines<W> {
    fn event(&mut self, e: &Event) {
        if self.error.is_some() {
            return;
        }
        let r = serde_json::to_writer(&mut self.out, e).map_err(std::io::Error::from);
        if let Err(err) = r.and_then(|_| self.out.write_all(b"\n")) {
            self.error = Some(err);
        }
    }
}

/// A fingerprint of a whole history: FNV-1a over every event's JSON line, optionally with the
/// running hash after each event so a second run can name the first event that differs (as madsim
/// and FoundationDB check determinism).
pub struct Fingerprint {
    /// Running hash.
    pub hash: u64,
    /// Events seen.
    pub events: u64,
    /// Running hash after each event, when recording.
    pub trail: Option<Vec<u64>>,
    /// Stop recording here: the first event whose running hash differs from this trail.
    pub compare: Option<Vec<u64>>,
    /// The first differing event (index, event) when comparing.
    pub first_difference: Option<(u64, Event)>,
    buf: Vec<u8>,
}

impl Fingerprint {
    /// A fingerprint that records the trail (first run) or compares with one (second run).
    pub fn new(record: bool, compare: Option<Vec<u64>>) -> Self {
        Fingerprint {
            hash: crate::hash::FNV1A_OFFSET,
            events: 0,
            trail: record.then(Vec::new),
            compare,
            first_difference: None,
            buf: Vec::with_capacity(256),
        }
    }
}

impl Observer for Fingerprint {
    fn event(&mut self, e: &Event) {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, e).expect("events serialize");
        self.hash = crate::hash::fnv1a_update(self.hash, &self.buf);
        if let Some(t) = &mut self.trail {
            t.push(self.hash);
        }
        if self.first_difference.is_none() {
            if let Some(c) = &self.compare {
                if c.get(self.events as usize) != Some(&self.hash) {
                    self.first_difference = Some((self.events, *e));
                }
            }
        }
        self.events += 1;
    }
}
