//! ActiveMQ Classic brokers as child processes: configuration generated into a temporary
//! directory (a STOMP connector on 127.0.0.1, KahaDB under the directory, log4j 1.2 to a file),
//! start, wait for the STOMP port, SIGKILL by PID, restart on the same store, and cleanup on drop.
//! Every PID started is registered so that the Ctrl-C handler can kill it too.

use super::stomp::Conn;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// PIDs of the children alive, for the Ctrl-C handler.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Installs the process's Ctrl-C handler ([`crate::interrupt`]) with the SIGKILL of every
/// registered child by PID, so that the run unwinds (and removes its temporary directories) with
/// no broker left behind.
pub fn install_interrupt_handler() {
    crate::interrupt::install(Some(("live brokers", kill_registered)));
}

fn kill_registered() {
    let pids = CHILDREN.lock().map(|g| g.clone()).unwrap_or_default();
    for pid in pids {
        // SAFETY: kill(2) with a PID this process started and has not reaped yet.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
}

pub(super) fn register(pid: u32) {
    if let Ok(mut g) = CHILDREN.lock() {
        g.push(pid);
    }
}

pub(super) fn unregister(pid: u32) {
    if let Ok(mut g) = CHILDREN.lock() {
        g.retain(|&p| p != pid);
    }
}

/// A broker process a live run drives (ActiveMQ's [`Broker`], RabbitMQ's
/// [`super::rabbitmq::Rabbit`]).
pub trait Process {
    /// Its scenario name.
    fn name(&self) -> &str;
    /// Its STOMP port on 127.0.0.1.
    fn port(&self) -> u16;
    /// Starts it and waits until its STOMP port answers CONNECT: the instant it answered.
    fn start(&mut self, timeout: Duration) -> Result<Instant, String>;
    /// SIGKILL now, without reaping: the instant a history records as the crash.
    fn sigkill(&mut self);
    /// SIGKILL by PID and reap (the store stays for a restart).
    fn kill(&mut self);
}

impl Process for Broker {
    fn name(&self) -> &str {
        &self.name
    }
    fn port(&self) -> u16 {
        self.port
    }
    fn start(&mut self, timeout: Duration) -> Result<Instant, String> {
        Broker::start(self, timeout)
    }
    fn sigkill(&mut self) {
        Broker::sigkill(self)
    }
    fn kill(&mut self) {
        Broker::kill(self)
    }
}

/// PIDs started by this process and not yet reaped (for tests).
pub fn live_children() -> Vec<u32> {
    CHILDREN.lock().map(|g| g.clone()).unwrap_or_default()
}

/// Where ActiveMQ is installed (`ORDSIM_ACTIVEMQ_HOME`, else Debian's `/usr/share/activemq`).
pub fn activemq_home() -> PathBuf {
    std::env::var_os("ORDSIM_ACTIVEMQ_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/activemq"))
}

/// Why ActiveMQ cannot be started here, if it cannot.
pub fn missing() -> Option<String> {
    let jar = activemq_home().join("bin/activemq.jar");
    if !jar.is_file() {
        return Some(format!(
            "{} not found: run scripts/live-setup.sh (apt-get install activemq), or set ORDSIM_ACTIVEMQ_HOME",
            jar.display()
        ));
    }
    if Command::new(java())
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        return Some("java not found (Debian's activemq package brings Java 17)".into());
    }
    None
}

fn java() -> PathBuf {
    if let Some(h) = std::env::var_os("JAVA_HOME") {
        let p = PathBuf::from(h).join("bin/java");
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("java")
}

/// A temporary directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system's temporary directory.
    pub fn new(tag: &str) -> std::io::Result<TempDir> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "ordsim-live-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; the broker binds it next).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One ActiveMQ broker process.
pub struct Broker {
    /// Its scenario name.
    pub name: String,
    /// Its STOMP port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// ActiveMQ's `redeliveryPlugin` policy (`<redeliveryPolicy>` of its default entry): a NACKed
/// message is sent back to its queue by the broker's scheduler after the delay, up to
/// `max_redeliveries` times, then dead-lettered (or, when `dead_letter` is false, discarded:
/// `sendToDlqIfMaxRetriesExceeded = false`). The plugin refuses to start with a delay under 1000
/// ms (`RedeliveryPlugin.validatePolicyDelay`).
#[derive(Clone, Debug, PartialEq)]
pub struct PluginPolicy {
    /// `maximumRedeliveries` (-1: unlimited).
    pub max_redeliveries: i64,
    /// `initialRedeliveryDelay` = `redeliveryDelay`, in ms.
    pub delay_ms: u64,
    /// `backOffMultiplier` (with `useExponentialBackOff` when above 1).
    pub multiplier: f64,
    /// `maximumRedeliveryDelay`, in ms (None: -1, no cap).
    pub max_delay_ms: Option<u64>,
    /// `sendToDlqIfMaxRetriesExceeded`.
    pub dead_letter: bool,
}

/// One broker's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConf {
    /// `brokerName` (letters, digits and `_` only).
    pub name: String,
    /// Persistent store (KahaDB) or none.
    pub persistent: bool,
    /// The STOMP connector's port on 127.0.0.1.
    pub stomp_port: u16,
    /// The OpenWire connector's port on 127.0.0.1 (network bridges connect to it).
    pub openwire_port: u16,
    /// The redelivery plugin, with `schedulerSupport="true"`.
    pub plugin: Option<PluginPolicy>,
    /// Network connectors: one demand-forwarding bridge toward each (peer name, its OpenWire
    /// port).
    pub peers: Vec<(String, u16)>,
    /// The bridges' `prefetchSize`.
    pub bridge_prefetch: u32,
}

impl BrokerConf {
    /// A lone broker on free ports, without plugin or network.
    pub fn single(name: &str, persistent: bool) -> Result<BrokerConf, String> {
        Ok(BrokerConf {
            name: safe_name(name),
            persistent,
            stomp_port: free_port().map_err(|e| format!("no free port: {e}"))?,
            openwire_port: free_port().map_err(|e| format!("no free port: {e}"))?,
            plugin: None,
            peers: Vec::new(),
            bridge_prefetch: 1000,
        })
    }
}

/// A broker name ActiveMQ accepts as `brokerName`.
pub fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The broker's activemq.xml: a STOMP and an OpenWire connector on loopback, KahaDB (or no
/// store) under `dir`, no JMX; advisories only in a network (the bridges learn of remote
/// consumers from them); the scheduler only with the redelivery plugin (without it a NACK
/// dead-letters at once).
///
/// The STOMP connector sets `transport.tcpNoDelay=true`. ActiveMQ's TCP transport leaves Nagle's
/// algorithm on by default and STOMP, unlike OpenWire (whose wire-format negotiation turns
/// `TCP_NODELAY` on for every JMS client), has no way to ask for it: with Nagle on, a MESSAGE
/// frame waits in the broker's kernel while the previous one to that consumer is not yet
/// TCP-acknowledged, that is until the consumer's next write (its delayed ACK frame) or Linux's
/// 40 ms delayed-ACK timer. That stall tripled the live latency (docs/calibration.md); a JMS
/// deployment, which the model describes, does not have it.
///
/// Each network connector is a `static:` bridge toward one peer with ActiveMQ's defaults
/// (`networkTTL` 1, `conduitSubscriptions`, equal priority, not duplex), except that it
/// reconnects every 100 ms after its peer died (the static discovery agent's default backs off
/// exponentially from 1 s to 30 s; the model's bridge is back the moment its peer is).
pub fn activemq_xml(conf: &BrokerConf, dir: &Path) -> String {
    let data = dir.join("data");
    let networked = !conf.peers.is_empty();
    let mut extra = String::new();
    if !conf.peers.is_empty() {
        extra.push_str("    <networkConnectors>\n");
        for (peer, port) in &conf.peers {
            extra.push_str(&format!(
                "      <networkConnector name=\"{name}-to-{peer}\" \
                 uri=\"static:(tcp://127.0.0.1:{port})?useExponentialBackOff=false&amp;initialReconnectDelay=100&amp;maxReconnectDelay=100\" \
                 prefetchSize=\"{prefetch}\" networkTTL=\"1\" conduitSubscriptions=\"true\" \
                 decreaseNetworkConsumerPriority=\"false\" duplex=\"false\"/>\n",
                name = conf.name,
                prefetch = conf.bridge_prefetch.max(1),
            ));
        }
        extra.push_str("    </networkConnectors>\n");
    }
    if let Some(p) = &conf.plugin {
        let backoff = if p.multiplier > 1.0 {
            format!(
                " useExponentialBackOff=\"true\" backOffMultiplier=\"{}\"",
                p.multiplier
            )
        } else {
            String::new()
        };
        extra.push_str(&format!(
            "    <plugins>\n      <redeliveryPlugin fallbackToDeadLetter=\"true\" sendToDlqIfMaxRetriesExceeded=\"{dlq}\">\n\
             \x20       <redeliveryPolicyMap><redeliveryPolicyMap><defaultEntry>\n\
             \x20         <redeliveryPolicy maximumRedeliveries=\"{max}\" initialRedeliveryDelay=\"{d}\" redeliveryDelay=\"{d}\" maximumRedeliveryDelay=\"{cap}\"{backoff}/>\n\
             \x20       </defaultEntry></redeliveryPolicyMap></redeliveryPolicyMap>\n      </redeliveryPlugin>\n    </plugins>\n",
            dlq = p.dead_letter,
            max = p.max_redeliveries,
            d = p.delay_ms,
            cap = p.max_delay_ms.map_or(-1, |c| c as i64),
        ));
    }
    format!(
        r#"<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="{name}" useJmx="false"
          persistent="{persistent}" advisorySupport="{networked}" schedulerSupport="{scheduler}"
          dataDirectory="{data}">
    <persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>
{extra}    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}?transport.tcpNoDelay=true"/>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:{owport}"/>
    </transportConnectors>
  </broker>
</beans>
"#,
        name = conf.name,
        persistent = conf.persistent,
        scheduler = conf.plugin.is_some(),
        port = conf.stomp_port,
        owport = conf.openwire_port,
        data = data.display()
    )
}

/// log4j 1.2 configuration: warnings and errors to `broker.log` in the directory.
pub fn log4j_properties(dir: &Path) -> String {
    format!(
        "log4j.rootLogger=WARN, file\n\
         log4j.appender.file=org.apache.log4j.FileAppender\n\
         log4j.appender.file.File={}\n\
         log4j.appender.file.layout=org.apache.log4j.PatternLayout\n\
         log4j.appender.file.layout.ConversionPattern=%d %-5p %c - %m%n\n",
        dir.join("broker.log").display()
    )
}

impl Broker {
    /// Writes the configuration `conf` into `dir` (not started yet).
    pub fn configure(name: &str, conf: &BrokerConf, dir: &Path) -> Result<Broker, String> {
        let cdir = dir.join("conf");
        std::fs::create_dir_all(&cdir).map_err(|e| format!("{}: {e}", cdir.display()))?;
        std::fs::write(cdir.join("activemq.xml"), activemq_xml(conf, dir))
            .and_then(|_| std::fs::write(cdir.join("log4j.properties"), log4j_properties(dir)))
            .map_err(|e| format!("{}: {e}", cdir.display()))?;
        Ok(Broker {
            name: name.to_string(),
            port: conf.stomp_port,
            dir: dir.to_path_buf(),
            child: None,
        })
    }

    /// The PID of the running process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Starts the process and waits until its STOMP port answers CONNECT (at most `timeout`):
    /// the instant it answered.
    pub fn start(&mut self, timeout: Duration) -> Result<Instant, String> {
        if self.child.is_some() {
            return Ok(Instant::now());
        }
        let home = activemq_home();
        let conf = self.dir.join("conf");
        let out = std::fs::File::create(self.dir.join("stdout.log")).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(java())
            .arg("-Xms64m")
            .arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            .arg("-XX:TieredStopAtLevel=1")
            .arg(format!("-Dactivemq.home={}", home.display()))
            .arg(format!("-Dactivemq.base={}", self.dir.display()))
            .arg(format!("-Dactivemq.conf={}", conf.display()))
            .arg(format!(
                "-Dactivemq.data={}",
                self.dir.join("data").display()
            ))
            .arg(format!(
                "-Dlog4j.configuration=file:{}",
                conf.join("log4j.properties").display()
            ))
            .arg("-jar")
            .arg(home.join("bin/activemq.jar"))
            .arg("start")
            .arg(format!(
                "xbean:file:{}",
                conf.join("activemq.xml").display()
            ))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start java: {e}"))?;
        register(child.id());
        self.child = Some(child);
        let log = self.dir.join("stdout.log");
        await_stomp(
            &mut self.child,
            self.port,
            timeout,
            &format!("broker {}", self.name),
            &[&log],
        )
    }

    /// Sends SIGKILL now, without waiting for the process to end: the instant a history records
    /// as the crash. [`Broker::kill`] then reaps it.
    pub fn sigkill(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
        }
    }

    /// SIGKILL by PID and reap (the store stays for a restart).
    pub fn kill(&mut self) {
        reap(&mut self.child);
    }
}

/// SIGKILLs the process in `child` by PID, if any, and reaps it.
pub(super) fn reap(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
        unregister(c.id());
    }
}

/// Waits until the starting process in `child` answers CONNECT on its STOMP `port` (at most
/// `timeout`): the instant it answered. On Ctrl-C or the timeout the process is killed and
/// reaped; if it exits it is reaped, and the error names `what` and quotes the end of its `logs`
/// (they live in the run's temporary directory, removed before the error is printed).
pub(super) fn await_stomp(
    child: &mut Option<Child>,
    port: u16,
    timeout: Duration,
    what: &str,
    logs: &[&Path],
) -> Result<Instant, String> {
    let t0 = Instant::now();
    loop {
        if crate::interrupt::interrupted() {
            reap(child);
            return Err("interrupted".into());
        }
        if let Some(c) = child {
            if let Ok(Some(status)) = c.try_wait() {
                unregister(c.id());
                *child = None;
                return Err(format!(
                    "{what} exited ({status}) while starting{}",
                    log_tails(logs)
                ));
            }
        }
        if let Ok(c) = Conn::connect(port, Duration::from_millis(500)) {
            let open = Instant::now();
            c.disconnect();
            return Ok(open);
        }
        if t0.elapsed() > timeout {
            reap(child);
            return Err(format!(
                "{what} did not open STOMP port {port} within {timeout:?}{}",
                log_tails(logs)
            ));
        }
        // Tried every 10 ms: the port's opening is reported as the restart's end.
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The last lines of each log in `logs` that has any, for an error: "; the end of LOG: ...".
fn log_tails(logs: &[&Path]) -> String {
    const LINES: usize = 8;
    let mut out = String::new();
    for log in logs {
        // A log is a file or a folder of them (RabbitMQ's `log`): the files directly in it.
        let files: Vec<PathBuf> = if log.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(log)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            v.sort();
            v
        } else {
            vec![log.to_path_buf()]
        };
        for f in files {
            let Ok(bytes) = std::fs::read(&f) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if lines.is_empty() {
                continue;
            }
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            out.push_str(&format!(
                "; the end of its {name}:\n    {}",
                lines[lines.len().saturating_sub(LINES)..].join("\n    ")
            ));
        }
    }
    out
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}
