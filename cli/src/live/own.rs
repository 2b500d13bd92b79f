//! `sim live FILE --consumer 'CMD ARGS'` (issue 40): the scenario's consumers are the user's own
//! processes. Each of the `count` copies of CMD runs under `sh -c` in a process group of its own
//! (so a signal reaches whatever the shell starts), with the connection details in its
//! environment ([`env`]), and tells the harness what it applied, one JSON line per message on
//! stdout ([`parse_line`]). The fault driver signals the group: `consumer_crash` SIGKILLs it and
//! starts CMD again after `for`, `consumer_pause` sends SIGSTOP and, after `for`, SIGCONT.
//! docs/live.md, "Your own consumer", documents the protocol.

use super::run::{Plan, Shared};
use sim::history::{Event, MsgRef, Node};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Builds the event of a reported message: (time, message, consumer).
type MakeEvent = fn(sim::time::Time, MsgRef, u32) -> Event;

/// Lines of each consumer's stderr kept for an error message.
pub const STDERR_TAIL: usize = 10;

/// The user's consumer command and what a run gives it.
#[derive(Clone, Debug, Default)]
pub struct OwnConsumer {
    /// The command line, run with `sh -c`.
    pub command: String,
    /// `--writes`: what it applied is read from this table's write log, not from stdout.
    pub writes: Option<super::writelog::WriteLog>,
    /// `--schema`: SQL run on the `target` database before the copies start.
    pub schema: Option<String>,
    /// A private PostgreSQL runs beside the broker (`ORDSIM_DATABASE_URL`): with `--writes`,
    /// `--schema`, or a `db_outage` fault.
    pub database: bool,
}

/// One line of a consumer's stdout.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// `{"apply":{"key":K,"seq":N}}`: the consumer wrote message (K, N).
    Apply(u32, u32),
    /// `{"skip":{"key":K,"seq":N}}`: it received (K, N) and left it unwritten as stale.
    Skip(u32, u32),
    /// `{"ack":{"key":K,"seq":N}}`: it acknowledged (K, N) to the broker.
    Ack(u32, u32),
    /// `{"ready":true}`: it has subscribed.
    Ready,
    /// Anything else (ignored; the first one is reported once).
    Other,
    /// A protocol line (`{"apply"...`) that does not say which message: the reason.
    Bad(String),
}

/// A key as the protocol accepts it: the header's number (`1` or `"1"`) or `"k1"` (the
/// message body's and `JMSXGroupID`'s spelling).
fn key_of(v: &serde_json::Value) -> Option<u32> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        serde_json::Value::String(s) => s.strip_prefix('k').unwrap_or(s).parse().ok(),
        _ => None,
    }
}

fn seq_of(v: &serde_json::Value) -> Option<u32> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Parses one stdout line of a consumer.
pub fn parse_line(line: &str) -> Line {
    let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(line.trim())
    else {
        return Line::Other;
    };
    if o.get("ready").is_some() {
        return Line::Ready;
    }
    for (name, make) in [
        ("apply", Line::Apply as fn(u32, u32) -> Line),
        ("skip", Line::Skip),
        ("ack", Line::Ack),
    ] {
        let Some(body) = o.get(name) else { continue };
        let key = body.get("key").and_then(key_of);
        let seq = body.get("seq").and_then(seq_of);
        return match (key, seq) {
            (Some(k), Some(s)) => make(k, s),
            _ => Line::Bad(format!(
                "{name:?} needs \"key\" (1 or \"k1\") and \"seq\" (a number): {}",
                line.trim()
            )),
        };
    }
    Line::Other
}

/// Process groups of the consumers alive, for the Ctrl-C handler.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Signals process group `pgid`.
pub fn signal(pgid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) of a process group this process started (its leader not yet reaped).
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Process groups of own consumers started by this process and not yet reaped (for tests).
pub fn live_groups() -> Vec<i32> {
    GROUPS.lock().map(|g| g.clone()).unwrap_or_default()
}

fn kill_registered() {
    for g in GROUPS.lock().map(|g| g.clone()).unwrap_or_default() {
        signal(g, libc::SIGKILL);
    }
}

/// A started copy of the command: killed (its whole group) and reaped on drop, whatever the way
/// out (an error, a panic, Ctrl-C's unwinding).
pub struct Proc {
    child: Child,
    /// Its process group (the child's PID).
    pub pgid: i32,
}

impl Proc {
    /// SIGKILLs the group and reaps the child.
    pub fn kill(&mut self) {
        signal(self.pgid, libc::SIGKILL);
        let _ = self.child.wait();
        if let Ok(mut g) = GROUPS.lock() {
            g.retain(|&p| p != self.pgid);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The environment of consumer `c` (docs/live.md, "Your own consumer").
pub fn env(
    plan: &Plan,
    ports: &[u16],
    db_port: Option<u16>,
    c: u32,
    dir: &str,
) -> Vec<(String, String)> {
    let list: Vec<u16> = plan.consumer_lists[c as usize]
        .iter()
        .map(|&b| ports[b as usize])
        .collect();
    let first = list.first().copied().unwrap_or(0);
    let all: Vec<String> = list.iter().map(u16::to_string).collect();
    let (queue, headers) = plan.target.own_subscription(plan.strategy, plan.prefetch);
    [
        ("ORDSIM_BROKER_URL", format!("stomp://127.0.0.1:{first}")),
        ("ORDSIM_BROKER_PROTOCOL", "stomp".into()),
        ("ORDSIM_BROKER_PRODUCT", plan.target.name().into()),
        ("ORDSIM_BROKER_HOST", "127.0.0.1".into()),
        ("ORDSIM_BROKER_PORT", first.to_string()),
        ("ORDSIM_BROKER_PORTS", all.join(",")),
        ("ORDSIM_QUEUE", queue),
        ("ORDSIM_PREFETCH", plan.prefetch.max(1).to_string()),
        ("ORDSIM_SUBSCRIBE_HEADERS", headers),
        ("ORDSIM_CONSUMER_ID", c.to_string()),
        ("ORDSIM_CONSUMERS", plan.consumers.to_string()),
        ("ORDSIM_KEYS", plan.keys.to_string()),
        ("ORDSIM_STATE_DIR", dir.to_string()),
    ]
    .into_iter()
    .chain(db_port.into_iter().flat_map(|port| {
        // The URL for any client; the PG* variables for one on libpq's defaults. The session's
        // application_name names the copy in the write log (`--writes`).
        let app = format!("{}{c}", super::writelog::APP_PREFIX);
        [
            (
                "ORDSIM_DATABASE_URL",
                format!("postgresql://ordsim@127.0.0.1:{port}/target?application_name={app}"),
            ),
            ("PGHOST", "127.0.0.1".into()),
            ("PGPORT", port.to_string()),
            ("PGUSER", "ordsim".into()),
            ("PGDATABASE", "target".into()),
            ("PGAPPNAME", app),
        ]
    }))
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Starts `own.command` with `env`, stdout and stderr piped, in a process group of its own.
pub fn start(own: &OwnConsumer, env: &[(String, String)]) -> Result<Proc, String> {
    crate::interrupt::install(Some(("own consumers", kill_registered)));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&own.command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd
        .spawn()
        .map_err(|e| format!("--consumer {:?}: cannot start sh: {e}", own.command))?;
    let pgid = child.id() as i32;
    if let Ok(mut g) = GROUPS.lock() {
        g.push(pgid);
    }
    Ok(Proc { child, pgid })
}

/// The last [`STDERR_TAIL`] lines of a consumer's stderr.
pub type Tail = Arc<Mutex<VecDeque<String>>>;

/// Keeps the tail of `r` in `tail` until EOF.
fn keep_tail(r: impl std::io::Read, tail: Tail) {
    for line in BufReader::new(r).lines().map_while(Result::ok) {
        let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() == STDERR_TAIL {
            t.pop_front();
        }
        t.push_back(line);
    }
}

/// `tail` for an error message.
pub fn show_tail(tail: &Tail) -> String {
    let t = tail.lock().unwrap_or_else(|e| e.into_inner());
    if t.is_empty() {
        "(stderr empty)".into()
    } else {
        format!(
            "stderr ends:\n  {}",
            t.iter().cloned().collect::<Vec<_>>().join("\n  ")
        )
    }
}

/// Consumer `c`'s life: start CMD; record what it reports; when the driver killed it, record
/// the crash (after its last line, so nothing it reported before the kill is lost), wait out
/// its downtime and start it again; when it exits by itself, fail the run naming it.
pub(super) fn consumer(sh: &Shared, c: u32, plan: &Plan, own: &OwnConsumer, dir: &str) {
    let tail = sh.tails[c as usize].clone();
    let env = env(plan, &sh.ports_of(c), sh.db_port, c, dir);
    let mut warned = false;
    let mut warned_apply = false;
    loop {
        if sh.aborted() || sh.stop_consumers.load(Ordering::SeqCst) {
            return;
        }
        if let Some(until) = sh.down(c) {
            if !super::run::sleep_until(sh, until) {
                return;
            }
            sh.rec.push(|t| {
                sh.life(c).down_until = None;
                Event::Recover {
                    t,
                    node: Node::Consumer(c),
                }
            });
        }
        let mut p = match start(own, &env) {
            Ok(p) => p,
            Err(e) => return sh.fail(e, ()),
        };
        let stdout = p.child.stdout.take().expect("piped");
        let stderr = p.child.stderr.take().expect("piped");
        let t2 = tail.clone();
        let err_reader = std::thread::spawn(move || keep_tail(stderr, t2));
        sh.life(c).pgid = Some(p.pgid);
        // Stopped or crashed between the check above and now: the driver found no group to
        // signal; do it here.
        if sh.stop_consumers.load(Ordering::SeqCst) || sh.aborted() || sh.down(c).is_some() {
            signal(p.pgid, libc::SIGKILL);
        }
        let started = Instant::now();
        let mut failure = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let (key, seq, make): (u32, u32, MakeEvent) = match parse_line(&line) {
                Line::Apply(..) if own.writes.is_some() => {
                    if !warned_apply {
                        warned_apply = true;
                        eprintln!(
                            "note: consumer {c}: \"apply\" lines are ignored with --writes (the \
                             write log is what was applied)"
                        );
                    }
                    continue;
                }
                Line::Apply(k, s) => (k, s, |t, msg, c| Event::Apply {
                    t,
                    msg,
                    consumer: c,
                    state_seq: msg.seq,
                }),
                Line::Skip(k, s) => (k, s, |t, msg, c| Event::Reject {
                    t,
                    msg,
                    consumer: c,
                }),
                Line::Ack(k, s) => (k, s, |t, msg, c| Event::Ack {
                    t,
                    msg,
                    consumer: c,
                }),
                Line::Ready => {
                    sh.subscribed[c as usize].store(true, Ordering::SeqCst);
                    continue;
                }
                Line::Bad(why) => {
                    failure = Some(why);
                    break;
                }
                Line::Other => {
                    if !warned {
                        warned = true;
                        eprintln!(
                            "note: consumer {c}: stdout line ignored (not the protocol): {line}"
                        );
                    }
                    continue;
                }
            };
            match sh.rec.find(key, seq) {
                Some(msg) => sh.rec.push(|t| make(t, msg, c)),
                None => {
                    failure = Some(format!(
                        "reported key {key} seq {seq}, never produced ({})",
                        sh.rec.produced_of(key)
                    ));
                    break;
                }
            }
        }
        let killed = sh.down(c).is_some();
        let stopping = sh.stop_consumers.load(Ordering::SeqCst) || sh.aborted();
        // Exited or closed stdout by itself, or broke the protocol: the run fails, naming it.
        if failure.is_some() || !(killed || stopping) {
            signal(p.pgid, libc::SIGKILL);
        }
        let status = p.child.wait().ok();
        sh.life(c).pgid = None;
        let _ = err_reader.join();
        drop(p);
        if failure.is_none() && !killed && !stopping {
            failure = Some(format!(
                "exited by itself {} after it started ({})",
                humanize(started.elapsed()),
                status.map_or("status unknown".into(), |s| s.to_string())
            ));
        }
        if let Some(why) = failure {
            let e = format!(
                "consumer {c} (--consumer {:?}): {why}; {}",
                own.command,
                show_tail(&tail)
            );
            return sh.fail(e, ());
        }
        if killed {
            sh.rec.push(|t| Event::Crash {
                t,
                node: Node::Consumer(c),
            });
            continue;
        }
        return;
    }
}

/// `--writes`: follows the write log on the server at `port` until `done`, recording each
/// committed write as an apply at its commit; then takes what is left once more (the copies are
/// stopped by then). Polls every 10 ms; a refused connection (a `db_outage`) is tried again.
/// A write that names no produced message stops the run.
pub(super) fn follow_writes(
    sh: &Shared,
    log: &super::writelog::WriteLog,
    port: u16,
    done: &std::sync::atomic::AtomicBool,
) {
    let mut client = None;
    let mut warned = false;
    // Tries after `done`: the log is read within 5 s or the run fails, naming why.
    let mut tries_after = 0;
    let mut error = String::new();
    loop {
        if sh.aborted() {
            return;
        }
        let finishing = done.load(Ordering::SeqCst);
        if client.is_none() {
            client =
                super::postgres::connect(port, "target", std::time::Duration::from_secs(1)).ok();
        }
        let taken = client
            .as_mut()
            .map(|c| super::postgres::take_writes(c).map_err(|e| super::postgres::describe(&e)));
        match taken {
            Some(Ok(writes)) => {
                for w in writes {
                    let recorded = w.applied(log, sh.rec.origin_unix_us()).and_then(|a| {
                        match sh.rec.find(a.key, a.seq) {
                            Some(msg) => Ok((a, msg)),
                            None => Err(format!(
                                "wrote key {} seq {}, never produced ({})",
                                a.key,
                                a.seq,
                                sh.rec.produced_of(a.key)
                            )),
                        }
                    });
                    match recorded {
                        Ok((a, msg)) => {
                            let c = a.consumer.unwrap_or_else(|| {
                                if !warned {
                                    warned = true;
                                    eprintln!(
                                        "note: a write to {} by a session whose application_name \
                                         is {:?}, not ordsim-consumer-N: recorded as consumer 0",
                                        log.table, w.app
                                    );
                                }
                                0
                            });
                            sh.rec.insert_apply(a.t, msg, c);
                        }
                        Err(e) => return sh.fail(format!("--writes {}: {e}", log.table), ()),
                    }
                }
                if finishing {
                    return;
                }
            }
            // Terminated (a `db_outage`) or never connected: a new session next time.
            Some(Err(e)) => {
                error = e;
                client = None;
            }
            None => {
                error = "cannot connect to the target database".into();
            }
        }
        if finishing {
            tries_after += 1;
            if tries_after == 500 {
                return sh.fail(format!("--writes: reading the write log: {error}"), ());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Refuses a run whose consumers never reported a message although some were produced.
pub fn reported(own: &OwnConsumer, events: &[Event], tails: &[Tail]) -> Result<(), String> {
    let produced = events.iter().any(|e| matches!(e, Event::Produce { .. }));
    let reports = events
        .iter()
        .any(|e| matches!(e, Event::Apply { .. } | Event::Reject { .. }));
    if !produced || reports {
        return Ok(());
    }
    let shown: Vec<String> = tails
        .iter()
        .enumerate()
        .map(|(c, t)| format!("consumer {c}: {}", show_tail(t)))
        .collect();
    let how = match &own.writes {
        Some(w) => format!(
            "wrote no row of {} (--writes) and printed no \"skip\" line",
            w.table
        ),
        None => "never reported a message on stdout (one JSON line per message: \
                 {\"apply\":{\"key\":\"k1\",\"seq\":17}}, docs/live.md)"
            .into(),
    };
    Err(format!(
        "--consumer {:?} {how}; {}",
        own.command,
        shown.join("; ")
    ))
}

fn humanize(d: std::time::Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// A scratch directory shared by the copies of one run (`ORDSIM_STATE_DIR`), removed with it.
pub fn state_dir() -> Result<super::broker::TempDir, String> {
    super::broker::TempDir::new("consumer").map_err(|e| format!("a scratch directory: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stdout_protocol_is_parsed() {
        assert_eq!(
            parse_line(r#"{"apply":{"key":"k1","seq":17}}"#),
            Line::Apply(1, 17)
        );
        assert_eq!(
            parse_line(r#"{"apply":{"key":3,"seq":"2"}}"#),
            Line::Apply(3, 2)
        );
        assert_eq!(
            parse_line(r#" {"skip":{"key":"4","seq":0}} "#),
            Line::Skip(4, 0)
        );
        assert_eq!(
            parse_line(r#"{"ack":{"key":"k0","seq":5}}"#),
            Line::Ack(0, 5)
        );
        assert_eq!(parse_line(r#"{"ready":true}"#), Line::Ready);
        assert_eq!(parse_line("starting up"), Line::Other);
        assert_eq!(parse_line(r#"{"log":"x"}"#), Line::Other);
        assert_eq!(parse_line("[1,2]"), Line::Other);
        for bad in [
            r#"{"apply":{"key":"k1"}}"#,
            r#"{"apply":{"key":"kx","seq":1}}"#,
            r#"{"apply":{"key":1,"seq":-1}}"#,
            r#"{"apply":17}"#,
        ] {
            let Line::Bad(why) = parse_line(bad) else {
                panic!("{bad}")
            };
            assert!(why.contains("\"apply\" needs"), "{why}");
        }
    }

    /// Runs consumer 0 of a one-consumer plan as `command` (no broker: it never connects),
    /// with key 1 seq 0 produced: what stopped it, and the history.
    fn run_alone(command: &str) -> (Option<String>, Vec<Event>) {
        let text = "strategies = [\"competing\"]\n[workload]\nmessages = 1\nrate = \"1/s\"\n\
                    keys = 2\n[[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"\n";
        let sc = crate::load_text("t", text).unwrap();
        let plan = super::super::plan(
            &sc,
            super::super::run::LiveStrategy::Competing,
            1,
            std::time::Duration::from_secs(1),
        )
        .unwrap();
        let own = OwnConsumer {
            command: command.into(),
            ..Default::default()
        };
        let sh = Shared::new(super::super::run::Recorder::new(2), 1, vec![1]);
        sh.rec.produce(0, 1, false);
        consumer(&sh, 0, &plan, &own, "/tmp");
        let e = sh.error.lock().unwrap().take();
        (e, sh.rec.into_events())
    }

    #[test]
    fn a_consumer_that_exits_is_named_with_its_stderr() {
        let (e, _) = run_alone("echo 'no broker here' >&2; exit 3");
        let e = e.expect("refused");
        assert!(e.contains("consumer 0 (--consumer \"echo"), "{e}");
        assert!(
            e.contains("exited by itself") && e.contains("exit status: 3"),
            "{e}"
        );
        assert!(e.contains("no broker here"), "{e}");
    }

    #[test]
    fn a_report_of_a_message_never_produced_is_refused() {
        let (e, _) = run_alone(r#"echo '{"apply":{"key":"k1","seq":17}}'; sleep 30"#);
        let e = e.expect("refused");
        assert!(
            e.contains("reported key 1 seq 17, never produced (key 1 has seq 0..1 so far)"),
            "{e}"
        );
        let (e, _) = run_alone(r#"echo '{"apply":{"key":"k9","seq":0}}'; sleep 30"#);
        assert!(e.unwrap().contains("keys are 0..2"));
        let (e, _) = run_alone(r#"echo '{"apply":{"key":"k1"}}'; sleep 30"#);
        assert!(e.unwrap().contains("\"apply\" needs"));
    }

    #[test]
    fn reports_become_the_history() {
        // Applied, acked, then exits: the apply and the ack are recorded, the exit refused.
        let (e, events) = run_alone(
            r#"echo hello; echo '{"ready":true}'; echo '{"apply":{"key":"k1","seq":0}}'; echo '{"ack":{"key":1,"seq":0}}'"#,
        );
        assert!(e.unwrap().contains("exited by itself"));
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                Event::Produce { .. } => "produce",
                Event::Apply { consumer: 0, .. } => "apply",
                Event::Ack { consumer: 0, .. } => "ack",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["produce", "apply", "ack"]);
        let own = OwnConsumer {
            command: "x".into(),
            ..Default::default()
        };
        assert!(reported(&own, &events, &[]).is_ok());
        let silent = &events[..1];
        let e = reported(&own, silent, &[Tail::default()]).unwrap_err();
        assert!(
            e.contains("never reported") && e.contains("consumer 0: (stderr empty)"),
            "{e}"
        );
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let tail: Tail = Arc::default();
        let text: String = (0..25).map(|i| format!("line {i}\n")).collect();
        keep_tail(text.as_bytes(), tail.clone());
        let shown = show_tail(&tail);
        assert!(
            shown.contains("line 24") && shown.contains("line 15"),
            "{shown}"
        );
        assert!(!shown.contains("line 14"), "{shown}");
        assert_eq!(show_tail(&Arc::default()), "(stderr empty)");
    }

    #[test]
    fn a_started_group_is_killed_on_drop() {
        // The shell's background child is in its group: killed with it.
        let own = OwnConsumer {
            command: "sleep 30 & echo $!; wait".into(),
            ..Default::default()
        };
        let mut p = start(&own, &[]).unwrap();
        let mut line = String::new();
        BufReader::new(p.child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        let sh = p.child.id();
        drop(p);
        // Gone (or a zombie), or SIGKILL pending (bit 9 of SigPnd/ShdPnd): kill(2) is
        // asynchronous, but a SIGKILL pending is a death sentence.
        let gone = |pid: u32| {
            let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                return true;
            };
            st.lines().any(|l| {
                l.starts_with("State:\tZ")
                    || ((l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
                        && u64::from_str_radix(l[7..].trim(), 16).is_ok_and(|m| m & 0x100 != 0))
            })
        };
        assert!(gone(sh), "the shell is reaped");
        assert!(gone(grandchild), "its background sleep is killed");
    }
}
