//! Which real broker a live run drives, and what differs on the wire between them: where a SEND
//! goes, what a consumer subscribes to, how a NACK says whether to requeue, and where the run
//! reads what is left at its end. ActiveMQ Classic is [`super::broker`]; RabbitMQ is
//! [`super::rabbitmq`].

use super::broker::{Broker, Process, TempDir};
use super::rabbitmq::{self, Rabbit, Topology};
use super::run::{self, LiveStrategy, Plan};
use super::stomp::Frame;

/// A run's broker processes and their temporary directories (removed when dropped, after the
/// processes).
pub type Processes = (Vec<TempDir>, Vec<Box<dyn Process>>);

/// The live broker.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// ActiveMQ Classic (the `activemq` flavour).
    ActiveMq,
    /// RabbitMQ (the `rabbitmq` and `rabbitmq_quorum` flavours) with what the run declares.
    Rabbit(Topology),
}

impl Target {
    /// The product, for the output.
    pub fn product(&self) -> String {
        match self {
            Target::ActiveMq => "ActiveMQ Classic".into(),
            Target::Rabbit(_) => format!(
                "RabbitMQ {}",
                rabbitmq::version().unwrap_or_else(|| "(version unknown)".into())
            ),
        }
    }

    /// The name the user's consumers get in `ORDSIM_BROKER_PRODUCT`.
    pub fn name(&self) -> &'static str {
        match self {
            Target::ActiveMq => "activemq",
            Target::Rabbit(_) => "rabbitmq",
        }
    }

    /// What the user's consumers (`--consumer`) subscribe to under `strategy`: the STOMP
    /// destination (`ORDSIM_QUEUE`) and the extra SUBSCRIBE headers, `name:value` by commas
    /// (`ORDSIM_SUBSCRIBE_HEADERS`). ActiveMQ: the queue, an exclusive subscription for
    /// `single`. RabbitMQ: the declared queue (`/amq/queue/`; single active consumer is the
    /// queue's argument, declared by the run) and its `prefetch-count`.
    pub fn own_subscription(&self, strategy: LiveStrategy, prefetch: u32) -> (String, String) {
        match self {
            Target::ActiveMq => (
                run::QUEUE.to_string(),
                if strategy == LiveStrategy::Single {
                    "activemq.exclusive:true".into()
                } else {
                    String::new()
                },
            ),
            Target::Rabbit(_) => (
                format!("/amq/queue/{}", rabbitmq::QUEUE),
                format!("prefetch-count:{}", prefetch.max(1)),
            ),
        }
    }

    /// `frame` (from [`run::send_frame`]) addressed to this broker's destination for `key`.
    pub fn send(&self, mut frame: Frame, key: u32) -> Frame {
        if let Target::Rabbit(t) = self {
            for (k, v) in frame.headers.iter_mut() {
                if k == "destination" {
                    *v = t.send_destination(key);
                }
            }
        }
        frame
    }

    /// A consumer's SUBSCRIBE frames, in registration order (ids `0`, `1`, ...): ActiveMQ's one
    /// ([`run::subscribe_frame`]), RabbitMQ's one per queue (`prefetch-count`, the queue
    /// declared: `/amq/queue/`).
    pub fn subscriptions(&self, strategy: LiveStrategy, prefetch: u32) -> Vec<Frame> {
        match self {
            Target::ActiveMq => vec![run::subscribe_frame(strategy, prefetch)],
            Target::Rabbit(t) => t
                .queues()
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    Frame::new("SUBSCRIBE")
                        .header("id", i.to_string())
                        .header("destination", format!("/amq/queue/{q}"))
                        .header("ack", "client-individual")
                        .header("prefetch-count", prefetch.max(1).to_string())
                })
                .collect(),
        }
    }

    /// The NACK of a delivery: RabbitMQ requeues unless told `requeue: false`; ActiveMQ
    /// dead-letters (or hands to its redelivery plugin) whatever the header says.
    pub fn nack(&self, ack_id: &str, requeue: bool) -> Frame {
        let f = Frame::new("NACK").header("id", ack_id);
        match self {
            Target::Rabbit(_) if !requeue => f.header("requeue", "false"),
            _ => f,
        }
    }

    /// Whether a message given up on (its last NACK) is deleted at once: RabbitMQ without a
    /// dead-letter exchange. ActiveMQ dead-letters it (read from the DLQ at the end).
    pub fn drops(&self) -> bool {
        matches!(self, Target::Rabbit(t) if !t.dead_letter)
    }

    /// The queues read at the end: (SUBSCRIBE destination, a dead-letter queue).
    pub fn leftovers(&self) -> Vec<(String, bool)> {
        match self {
            Target::ActiveMq => vec![
                (run::QUEUE.to_string(), false),
                (run::DLQ.to_string(), true),
            ],
            Target::Rabbit(t) => {
                let mut v: Vec<(String, bool)> = t
                    .queues()
                    .iter()
                    .map(|q| (format!("/amq/queue/{q}"), false))
                    .collect();
                if t.dead_letter {
                    v.push((format!("/amq/queue/{}", rabbitmq::DLQ), true));
                }
                v
            }
        }
    }

    /// The run's broker processes, configured (not started) in temporary directories that live
    /// as long as the returned guards.
    pub fn processes(&self, plan: &Plan) -> Result<Processes, String> {
        let mut dirs = Vec::new();
        let mut out: Vec<Box<dyn Process>> = Vec::new();
        match self {
            Target::ActiveMq => {
                for (name, conf) in plan.brokers.iter().zip(run::broker_confs(plan)?) {
                    let dir = TempDir::new(&conf.name)
                        .map_err(|e| format!("temporary directory: {e}"))?;
                    out.push(Box::new(Broker::configure(name, &conf, dir.path())?));
                    dirs.push(dir);
                }
            }
            Target::Rabbit(t) => {
                for name in &plan.brokers {
                    let dir = TempDir::new(&format!("rabbit-{}", super::broker::safe_name(name)))
                        .map_err(|e| format!("temporary directory: {e}"))?;
                    out.push(Box::new(Rabbit::configure(name, t, dir.path())?));
                    dirs.push(dir);
                }
            }
        }
        Ok((dirs, out))
    }
}
