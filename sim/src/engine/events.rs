//! Engine events: what the event queue carries. Small and `Copy`: the queue moves them by value,
//! so they are kept to 16 bytes (checked below); a larger payload lives in an engine table and
//! the event carries its index.

/// One engine event. Each is handled in the file of the node kind it concerns. The default
/// only fills the event queue's unused slots (`EventQueue`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) enum Ev {
    Arrival,
    ProducerReconnect(u32),
    ServiceDone {
        c: u32,
        epoch: u32,
    },
    BlockingRetry {
        c: u32,
        epoch: u32,
    },
    /// `ack`: index into `World::acks`.
    AckArrive {
        c: u32,
        ack: u32,
    },
    RedeliveryDue {
        slot: u32,
        id: u64,
    },
    /// A message cancelled back with a rolled-back window waited out its delay (`redelivery.rs`).
    ReturnDue {
        slot: u32,
        id: u64,
    },
    ForwardArrive {
        slot: u32,
        id: u64,
    },
    /// The peer's answer to a forward reaches broker `from`, which acks it to its bridge
    /// `link` toward `to`: one message's credit comes back (`network.rs`).
    BridgeAck {
        from: u16,
        to: u16,
        link: u32,
    },
    ConsumerReconnect {
        c: u32,
        epoch: u32,
    },
    ParkTimeout {
        c: u32,
        epoch: u32,
        serial: u32,
    },
    JobStart(u32),
    /// A delivery to consumer `c` has crossed `dispatch_latency`: it may start it.
    Transit(u32),
    ProducerRetry(u32),
    /// Producer `p`'s oldest batch may have lingered long enough (`linger`, `producer.rs`).
    Linger(u32),
    /// Producer `p`'s oldest waiting send may have reached its `delivery_timeout` (`producer.rs`).
    DeliveryTimeout(u32),
    /// A send the broker holds after its producer gave up on it may be routed (`producer.rs`).
    HeldSend {
        slot: u32,
        id: u64,
    },
    /// HA pair member `broker`, passive, may take over its dead partner's store (`failover.rs`).
    Takeover(u16),
    /// The end of consumer `c`'s suspension number `serial` (`resume_after`).
    Resume {
        c: u32,
        serial: u32,
    },
    /// The `max.poll.interval.ms` of consumer `c`'s poll number `serial` (`poll.rs`).
    PollDeadline {
        c: u32,
        serial: u32,
    },
    /// A paused consumer's failure-detection timeout (`pause.rs`).
    PauseDetected {
        c: u32,
        serial: u32,
    },
    /// A delivery's lease ends (`lease.rs`), unless renewed or settled meanwhile.
    LeaseExpire {
        slot: u32,
        id: u64,
    },
    /// The consumer working on a leased message renews its lease (`lease.rs`).
    LeaseRenew {
        slot: u32,
        id: u64,
    },
    /// A dead consumer's failure-detection timeout (`[consumers] crash_detection = "timeout"`).
    CrashDetected {
        c: u32,
        epoch: u32,
    },
    /// A consumer's auto-commit interval is over: it commits if it is waiting in `poll()`
    /// (`commit.rs`, `[consumers] commit = "interval"`).
    CommitDue {
        c: u32,
        epoch: u32,
    },
    /// Log `l`'s followers may have fetched records: its high watermark moves
    /// (`replication.rs`).
    Replicated(u16),
    /// Producer `p`'s transaction (or commit period) `number` is due to commit (`txn.rs`).
    TxnCommit {
        p: u32,
        number: u32,
    },
    /// A new instance of paused producer `p` starts (its pause number `serial`, a
    /// `producer_pause` with `replaced_after`: `engine/faults.rs`).
    ProducerReplaced {
        p: u32,
        serial: u32,
    },
    /// The controller's election of a new leader of log `l` is over (`failover.rs`).
    LeaderElected(u16),
    /// Replica `r` of log `l` has caught up with its leader (`replication.rs`).
    CaughtUp {
        l: u16,
        r: u8,
    },
    /// The controller fences broker `node` of broker `b`'s Kafka cluster, its session over:
    /// the leaders it held are elected elsewhere, it leaves every ISR (`failover.rs`).
    NodeFenced {
        b: u16,
        node: u16,
    },
    /// The controller's leader imbalance check on broker `b`'s Kafka cluster (`failover.rs`).
    LeaderBalance(u16),
    /// The leaders' ISR check finds broker `node` of broker `b`'s cluster stalled (its
    /// `epoch`-th stall) (`failover.rs`).
    IsrCheck {
        b: u16,
        node: u16,
        epoch: u32,
    },
    FaultStart(u32),
    FaultEnd(u32),
    Wake(u64),
    /// A broker's dispatch, deferred to the same instant: deep in a chain of instant failures
    /// (`redelivery.rs`), so that the stack stays bounded.
    Dispatch(u16),
    #[default]
    DrainDeadline,
}

const _: () = assert!(std::mem::size_of::<Ev>() <= 16);
