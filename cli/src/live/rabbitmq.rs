//! RabbitMQ as a live broker (issue 37): Debian's `rabbitmq-server` started per run as a child
//! process on 127.0.0.1 only, with everything private to a temporary directory (the Mnesia and
//! log directories, `rabbitmq.conf`, `advanced.config`, the enabled-plugins file, the Erlang
//! cookie under a private `HOME`), its own epmd on loopback, SIGKILL by PID, restart on the same
//! Mnesia directory, and cleanup on drop (the PIDs are registered for the Ctrl-C handler like
//! ActiveMQ's, [`super::broker`]).
//!
//! Traffic goes over the project's STOMP client (`rabbitmq_stomp`). The queues, the
//! consistent-hash exchange and its bindings are declared out of band, from a definitions file
//! the node imports at boot (`load_definitions`): the STOMP plugin drops the queue arguments the
//! flavours need (`x-single-active-consumer`, `x-delivery-limit`), and a definitions file is
//! RabbitMQ's documented, declarative, version-stable format, imported before the STOMP port
//! opens, at no cost per run and with no client crate (docs/live.md says why not `rabbitmqctl
//! eval` or an AMQP 0-9-1 crate).

use super::broker::{await_stomp, free_port, reap, register, Process};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The STOMP `host` header the client sends (`localhost`): RabbitMQ takes it as the virtual
/// host, so the definitions declare everything in a vhost of that name.
pub const VHOST: &str = "localhost";
/// The queue of `competing` and `rabbitmq_sac` / `single`.
pub const QUEUE: &str = "ordsim";
/// The consistent-hash exchange of `rabbitmq_hash`.
pub const EXCHANGE: &str = "ordsim.hash";
/// The dead-letter queue (with `dead_letter = "queue"`, through the default exchange).
pub const DLQ: &str = "ordsim.dlq";

/// guest/guest, hashed as RabbitMQ does (`rabbit_password_hashing_sha256`: base64 of a 4-byte
/// salt and SHA-256 of salt and password). A definitions file imported at boot replaces the
/// default user, so it names one; the user may only log in from loopback (RabbitMQ's default
/// `loopback_users`).
const GUEST_HASH: &str = "kI3GCrswBLNZQzHJJ95QLoyfAVooYhnvf7jbqiW9BjOYUloe";

/// Where `rabbitmq-server` is (`ORDSIM_RABBITMQ_SERVER`, else Debian's
/// `/usr/lib/rabbitmq/bin/rabbitmq-server`, the script without the wrapper that switches to the
/// `rabbitmq` user).
pub fn server() -> PathBuf {
    std::env::var_os("ORDSIM_RABBITMQ_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/rabbitmq/bin/rabbitmq-server"))
}

/// Why RabbitMQ cannot be started here, if it cannot.
pub fn missing() -> Option<String> {
    let s = server();
    if !s.is_file() {
        return Some(format!(
            "{} not found: apt-get install rabbitmq-server (.ci/live-rabbitmq.sh), or set ORDSIM_RABBITMQ_SERVER",
            s.display()
        ));
    }
    if Command::new("epmd")
        .arg("-help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        return Some(
            "epmd not found (Debian's erlang-base, a dependency of rabbitmq-server)".into(),
        );
    }
    None
}

/// The installed server's version, from its directory (`rabbitmq_server-3.10.8`): the script
/// is a link into it.
pub fn version() -> Option<String> {
    let real = std::fs::canonicalize(server()).ok()?;
    real.ancestors()
        .filter_map(|p| p.file_name()?.to_str())
        .find_map(|n| n.strip_prefix("rabbitmq_server-"))
        .map(str::to_string)
}

/// The queue type (the flavour: `rabbitmq` classic, `rabbitmq_quorum` quorum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueType {
    /// A classic queue.
    Classic,
    /// A quorum queue.
    Quorum,
}

/// What a run declares: one queue, or a consistent-hash exchange over `hash_queues` queues.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// Classic or quorum.
    pub queue_type: QueueType,
    /// `x-single-active-consumer` on every queue (`rabbitmq_sac`, `single`, `rabbitmq_hash`).
    pub sac: bool,
    /// 0: one queue, [`QUEUE`], which producers send to; N: the exchange [`EXCHANGE`] bound to
    /// queues `ordsim.0` .. `ordsim.N-1` in that order.
    pub hash_queues: u32,
    /// Each binding's weight (its key: the queue's ring points).
    pub weight: u32,
    /// `x-delivery-limit` (quorum queues only).
    pub delivery_limit: Option<u32>,
    /// `x-dead-letter-exchange` = the default exchange, routing to [`DLQ`].
    pub dead_letter: bool,
    /// Durable queues (persistent messages survive a restart).
    pub durable: bool,
}

impl Topology {
    /// One durable queue of type `queue_type` with single active consumer and a delivery limit
    /// of 20 (quorum only), no exchange, no dead-letter queue: what the other fields change.
    pub fn sac_queue(queue_type: QueueType) -> Topology {
        Topology {
            queue_type,
            sac: true,
            hash_queues: 0,
            weight: 1,
            delivery_limit: (queue_type == QueueType::Quorum).then_some(20),
            dead_letter: false,
            durable: true,
        }
    }

    /// The queues consumers subscribe to, in binding order.
    pub fn queues(&self) -> Vec<String> {
        if self.hash_queues == 0 {
            vec![QUEUE.to_string()]
        } else {
            (0..self.hash_queues)
                .map(|q| format!("{QUEUE}.{q}"))
                .collect()
        }
    }

    /// Where a producer sends a message of `key`: the queue itself (`/amq/queue/`, which refers
    /// to the declared queue; `/queue/NAME` would declare it again, without its arguments, and
    /// fail), or the exchange with the key as the routing key.
    pub fn send_destination(&self, key: u32) -> String {
        if self.hash_queues == 0 {
            format!("/amq/queue/{QUEUE}")
        } else {
            format!("/exchange/{EXCHANGE}/{key}")
        }
    }
}

/// The definitions file the node imports at boot: the user, the vhost, its permissions, the
/// queues with their arguments, the exchange and its bindings.
pub fn definitions(t: &Topology) -> String {
    let mut args = serde_json::Map::new();
    if t.queue_type == QueueType::Quorum {
        args.insert("x-queue-type".into(), json!("quorum"));
        if let Some(n) = t.delivery_limit {
            args.insert("x-delivery-limit".into(), json!(n));
        }
    }
    if t.sac {
        args.insert("x-single-active-consumer".into(), json!(true));
    }
    if t.dead_letter {
        args.insert("x-dead-letter-exchange".into(), json!(""));
        args.insert("x-dead-letter-routing-key".into(), json!(DLQ));
    }
    // A quorum queue is always durable.
    let durable = t.durable || t.queue_type == QueueType::Quorum;
    let mut queues: Vec<serde_json::Value> = t
        .queues()
        .iter()
        .map(|q| {
            json!({"name": q, "vhost": VHOST, "durable": durable, "auto_delete": false,
                   "arguments": args})
        })
        .collect();
    if t.dead_letter {
        queues.push(json!({"name": DLQ, "vhost": VHOST, "durable": durable,
                           "auto_delete": false, "arguments": {}}));
    }
    let (exchanges, bindings) = if t.hash_queues == 0 {
        (json!([]), json!([]))
    } else {
        (
            json!([{"name": EXCHANGE, "vhost": VHOST, "type": "x-consistent-hash",
                    "durable": true, "auto_delete": false, "internal": false, "arguments": {}}]),
            serde_json::Value::Array(
                t.queues()
                    .iter()
                    .map(|q| {
                        json!({"source": EXCHANGE, "vhost": VHOST, "destination": q,
                               "destination_type": "queue",
                               "routing_key": t.weight.max(1).to_string(), "arguments": {}})
                    })
                    .collect(),
            ),
        )
    };
    let doc = json!({
        "users": [{"name": "guest", "password_hash": GUEST_HASH,
                   "hashing_algorithm": "rabbit_password_hashing_sha256",
                   "tags": ["administrator"]}],
        "vhosts": [{"name": VHOST}],
        "permissions": [{"user": "guest", "vhost": VHOST, "configure": ".*", "write": ".*",
                         "read": ".*"}],
        "queues": queues,
        "exchanges": exchanges,
        "bindings": bindings,
    });
    serde_json::to_string_pretty(&doc).expect("definitions serialize")
}

/// rabbitmq.conf: no AMQP listener, STOMP on 127.0.0.1 only, the definitions imported at boot,
/// warnings to the log file only.
pub fn rabbitmq_conf(stomp_port: u16, dir: &Path) -> String {
    format!(
        "listeners.tcp = none\n\
         stomp.listeners.tcp.1 = 127.0.0.1:{stomp_port}\n\
         load_definitions = {}\n\
         log.file.level = warning\n\
         log.console = false\n",
        dir.join("definitions.json").display()
    )
}

/// advanced.config: the Erlang distribution listens on 127.0.0.1 only (by default it binds
/// 0.0.0.0).
pub const ADVANCED_CONFIG: &str = "[{kernel, [{inet_dist_use_interface, {127,0,0,1}}]}].\n";

/// The enabled-plugins file.
pub const ENABLED_PLUGINS: &str = "[rabbitmq_stomp,rabbitmq_consistent_hash_exchange].\n";

/// One RabbitMQ node and its epmd.
pub struct Rabbit {
    /// Its scenario name.
    pub name: String,
    /// Its STOMP port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    node: String,
    epmd_port: u16,
    dist_port: u16,
    epmd: Option<Child>,
    child: Option<Child>,
}

impl Rabbit {
    /// Writes the configuration for `topology` into `dir` (not started yet), on free ports.
    pub fn configure(name: &str, topology: &Topology, dir: &Path) -> Result<Rabbit, String> {
        let port = || free_port().map_err(|e| format!("no free port: {e}"));
        let (stomp, epmd_port, dist_port) = (port()?, port()?, port()?);
        for d in ["mnesia", "log", "home"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let write = |f: &str, text: &str| {
            std::fs::write(dir.join(f), text).map_err(|e| format!("{}: {e}", dir.display()))
        };
        write("rabbitmq.conf", &rabbitmq_conf(stomp, dir))?;
        write("advanced.config", ADVANCED_CONFIG)?;
        write("enabled_plugins", ENABLED_PLUGINS)?;
        write("definitions.json", &definitions(topology))?;
        // Read instead of /etc/rabbitmq/rabbitmq-env.conf.
        write("rabbitmq-env.conf", "")?;
        Ok(Rabbit {
            name: name.to_string(),
            port: stomp,
            node: format!(
                "ordsim{}_{}@localhost",
                std::process::id(),
                super::broker::safe_name(name)
            ),
            dir: dir.to_path_buf(),
            epmd_port,
            dist_port,
            epmd: None,
            child: None,
        })
    }

    /// Starts epmd if it is not running: in the foreground (not `-daemon`), so that it is this
    /// process's child, stopped by PID.
    fn start_epmd(&mut self) -> Result<(), String> {
        if self.epmd.is_some() {
            return Ok(());
        }
        let child = Command::new("epmd")
            .args(["-address", "127.0.0.1", "-port"])
            .arg(self.epmd_port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start epmd: {e}"))?;
        register(child.id());
        self.epmd = Some(child);
        // The node registers with epmd as it boots: wait for its port.
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.epmd_port)).is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(format!("epmd did not open port {}", self.epmd_port));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn spawn(&mut self) -> Result<(), String> {
        let d = &self.dir;
        let out = std::fs::File::create(d.join("stdout.log")).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(server())
            .env("HOME", d.join("home"))
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq.conf"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", d.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_CONF_ENV_FILE", d.join("rabbitmq-env.conf"))
            .env("RABBITMQ_PID_FILE", d.join("rabbitmq.pid"))
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            // The script then execs the VM (no signal-forwarding shell in between): the child's
            // PID is the node's, and SIGKILL by PID kills the broker itself.
            .env("RUNNING_UNDER_SYSTEMD", "true")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server().display()))?;
        register(child.id());
        self.child = Some(child);
        Ok(())
    }
}

impl Process for Rabbit {
    fn name(&self) -> &str {
        &self.name
    }

    fn port(&self) -> u16 {
        self.port
    }

    fn start(&mut self, timeout: Duration) -> Result<Instant, String> {
        if self.child.is_some() {
            return Ok(Instant::now());
        }
        if let Err(e) = self.start_epmd() {
            self.kill();
            return Err(e);
        }
        self.spawn()?;
        // The Erlang node boots in 5-20 s here, and over a minute on a loaded machine (one
        // calibration start timed out at 60 s with a load average of 12 on 2 cores).
        let timeout = timeout.max(Duration::from_secs(180));
        // The definitions are imported before the STOMP listener starts: a CONNECT answered
        // means the queues exist.
        let (out, log) = (self.dir.join("stdout.log"), self.dir.join("log"));
        await_stomp(
            &mut self.child,
            self.port,
            timeout,
            &format!("broker {} (rabbitmq-server)", self.name),
            &[&out, &log],
        )
    }

    fn sigkill(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
        }
    }

    /// SIGKILL the node by PID and reap it (epmd stays for a restart; the Mnesia directory too).
    fn kill(&mut self) {
        reap(&mut self.child);
    }
}

impl Drop for Rabbit {
    fn drop(&mut self) {
        self.kill();
        reap(&mut self.epmd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_carry_what_stomp_cannot() {
        let t = Topology::sac_queue(QueueType::Quorum);
        let d: serde_json::Value = serde_json::from_str(&definitions(&t)).unwrap();
        let args = &d["queues"][0]["arguments"];
        assert_eq!(args["x-queue-type"], "quorum");
        assert_eq!(args["x-single-active-consumer"], true);
        assert_eq!(args["x-delivery-limit"], 20);
        assert_eq!(d["queues"][0]["vhost"], VHOST);
        assert_eq!(d["exchanges"].as_array().unwrap().len(), 0);
        assert_eq!(t.send_destination(3), "/amq/queue/ordsim");
        let h = Topology {
            queue_type: QueueType::Classic,
            hash_queues: 3,
            weight: 2,
            delivery_limit: None,
            dead_letter: true,
            ..t
        };
        let d: serde_json::Value = serde_json::from_str(&definitions(&h)).unwrap();
        assert_eq!(
            d["queues"].as_array().unwrap().len(),
            4,
            "3 queues and the DLQ"
        );
        assert_eq!(d["queues"][0]["arguments"].get("x-queue-type"), None);
        assert_eq!(
            d["queues"][0]["arguments"]["x-dead-letter-routing-key"],
            DLQ
        );
        assert_eq!(d["exchanges"][0]["type"], "x-consistent-hash");
        assert_eq!(d["bindings"][2]["destination"], "ordsim.2");
        assert_eq!(d["bindings"][2]["routing_key"], "2");
        assert_eq!(h.send_destination(7), "/exchange/ordsim.hash/7");
    }

    #[test]
    fn everything_listens_on_loopback() {
        let c = rabbitmq_conf(61613, Path::new("/tmp/x"));
        assert!(c.contains("listeners.tcp = none\n"), "{c}");
        assert!(
            c.contains("stomp.listeners.tcp.1 = 127.0.0.1:61613\n"),
            "{c}"
        );
        assert!(ADVANCED_CONFIG.contains("{inet_dist_use_interface, {127,0,0,1}}"));
    }
}
