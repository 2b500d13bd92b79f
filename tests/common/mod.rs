//! Helpers shared by the integration tests.

use sim::history::Event;
use sim::{FaultPlan, Metrics, RunOptions, Scenario};

/// Loads a scenario from TOML text (panics with the loader's message on error).
pub fn scenario(text: &str) -> Scenario {
    ordsim::load_text("test.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs one strategy with the scenario's seed (or `seed`), collecting nothing.
pub fn run(sc: &Scenario, strategy: &str, seed: u64) -> Metrics {
    let plan = FaultPlan::resolve(sc, seed);
    let opts = RunOptions {
        seed,
        max_events: None,
        max_sim_time: None,
    };
    strategies::run_named(strategy, sc, &plan, &opts, None)
        .unwrap_or_else(|e| panic!("{strategy} seed {seed}: {e}"))
        .metrics
        .expect("applicable")
}

/// Runs one strategy and hands every history event to `f`.
pub fn run_with(sc: &Scenario, strategy: &str, seed: u64, mut f: impl FnMut(&Event)) -> Metrics {
    let plan = FaultPlan::resolve(sc, seed);
    let opts = RunOptions {
        seed,
        max_events: None,
        max_sim_time: None,
    };
    strategies::run_named(strategy, sc, &plan, &opts, Some(&mut f))
        .unwrap_or_else(|e| panic!("{strategy} seed {seed}: {e}"))
        .metrics
        .expect("applicable")
}

/// Runs `strategy` on `text` with seed 1, keeping the history.
pub fn history(text: &str, strategy: &str) -> (Metrics, Vec<Event>) {
    let sc = scenario(text);
    let mut events = Vec::new();
    let m = run_with(&sc, strategy, 1, |e| events.push(*e));
    (m, events)
}

/// 30 messages of one key, one every 100ms from 100ms, to one consumer with 1ms of work;
/// `producers` and `broker` extend their tables (`[producers]`, the one `[[broker]]` "a"), and
/// `faults` follows.
pub fn one_key(producers: &str, broker: &str, faults: &str) -> String {
    format!(
        r#"
strategies = ["single"]
[workload]
messages = 30
rate = "10/s"
arrival = "constant"
keys = 1
[producers]
{producers}
[[broker]]
name = "a"
{broker}
[consumers]
count = 1
service = "1ms"
{faults}
"#
    )
}

/// A small, fault-free base scenario; tests append or replace sections.
pub fn base(strategies: &str, consumers: u32, extra: &str) -> String {
    format!(
        r#"
seed = 7
strategies = [{strategies}]
[workload]
messages = 2000
rate = "100/s"
keys = 20
[[broker]]
name = "a"
[consumers]
count = {consumers}
prefetch = 1
service = {{ dist = "exponential", mean = "5ms" }}
{extra}
"#
    )
}

/// One key, one consumer with a window of 10 and a 20ms service, constant arrivals at 100/s,
/// and a database outage `outage` = (at, for): every message in hand during it fails. `top` goes
/// at the top level (with `strategies`), `consumers` into `[consumers]`, `redelivery` into
/// `[redelivery]`.
pub fn outage_window(
    top: &str,
    messages: u32,
    consumers: &str,
    redelivery: &str,
    outage: (&str, &str),
) -> String {
    let (at, span) = outage;
    format!(
        r#"
{top}
[workload]
messages = {messages}
rate = "100/s"
arrival = "constant"
keys = 1
[[broker]]
name = "a"
[consumers]
count = 1
prefetch = 10
service = "20ms"
{consumers}
[redelivery]
{redelivery}
[[fault]]
kind = "db_outage"
at = "{at}"
for = "{span}"
"#
    )
}

/// Runs the `sim` binary: its exit code, standard output and standard error.
pub fn sim(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh, empty temporary folder `ordsim-TOPIC-PID-NAME`.
pub fn fresh_dir(topic: &str, name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ordsim-{topic}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The repository's root (where `scenarios/` and `reports/` are).
pub fn root() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Makes the repository's root the working directory of the test process, once, so that paths
/// such as `scenarios/failover.toml` (and the repro lines printed with them) read as a user types
/// them. Every test that uses such a path, or starts the `sim` binary, calls this first.
pub fn at_root() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_current_dir(root()).expect("the repository root exists"));
}

/// Runs a sweep of `file` as two shards (`1/2`, `2/2`) into `dir/shard1` and `dir/shard2`.
pub fn sweep_shards(
    file: &std::path::Path,
    dir: &std::path::Path,
    seeds: &str,
    sets: &[&str],
) -> Vec<std::path::PathBuf> {
    (1..=2)
        .map(|i| {
            let d = dir.join(format!("shard{i}"));
            ordsim::sweep::sweep(&ordsim::sweep::SweepRequest {
                file: file.to_path_buf(),
                seeds: seeds.into(),
                sets: sets.iter().map(|s| s.to_string()).collect(),
                strategies: vec![],
                jobs: 1,
                out: d.clone(),
                shard: Some(format!("{i}/2")),
                resume: false,
                max_events: None,
                progress: false,
            })
            .unwrap();
            d
        })
        .collect()
}

/// The names in `dir` containing `part` (e.g. staging folders, `sim-partial`, left behind).
pub fn names_containing(dir: &std::path::Path, part: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(part))
        .collect()
}

/// The seqs in the order the broker first stored them.
pub fn stored_order(events: &[Event]) -> Vec<u32> {
    let mut seen = std::collections::BTreeSet::new();
    events
        .iter()
        .filter_map(|e| match *e {
            Event::Enqueue { msg, .. } if seen.insert(msg.id) => Some(msg.seq),
            _ => None,
        })
        .collect()
}

/// The send failures of a history, as (time, seq): when each send failed and which record.
pub fn send_failures(events: &[Event]) -> Vec<(u64, u32)> {
    events
        .iter()
        .filter_map(|e| match *e {
            Event::SendFail { t, msg, .. } => Some((t, msg.seq)),
            _ => None,
        })
        .collect()
}

/// One broker, two consumers (`competing`, `single`), 40 messages over 2 s; `extra` is appended
/// (a section or two): the hostile-input tests' scenario.
pub fn small_scenario(extra: &str) -> String {
    format!(
        "strategies = [\"competing\", \"single\"]\n\
         [workload]\n\
         messages = 40\n\
         rate = \"20/s\"\n\
         keys = 5\n\
         [[broker]]\n\
         name = \"a\"\n\
         [consumers]\n\
         count = 2\n\
         service = \"5ms\"\n\
         {extra}"
    )
}

/// A history of [`small_scenario`] run with `single` (`sim run --trace`), written in `dir` as
/// `h.jsonl` (the scenario as `h.toml`).
pub fn small_history(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("h.toml");
    std::fs::write(&file, small_scenario("")).unwrap();
    let h = dir.join("h.jsonl");
    let (code, _, err) = sim(&[
        "run",
        file.to_str().unwrap(),
        "--strategy",
        "single",
        "--trace",
        h.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    h
}
