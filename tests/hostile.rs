//! Hostile input: whatever a scenario file holds, loading it never panics, and a file that loads
//! runs to its bounds without panicking.

use proptest::prelude::*;

const BASE: &str = r#"
flavour = "activemq"
strategies = ["competing", "single", "message_groups", "unit_of_order"]
[workload]
messages = 50
rate = "100/s"
keys = 5
[producers]
count = 2
[[broker]]
name = "a"
[[broker]]
name = "b"
[network]
kind = "bridge"
forward_delay = "5ms"
prefetch = 1000
network_ttl = 1
conduit_subscriptions = true
decrease_network_consumer_priority = false
[consumers]
count = 2
service = "5ms"
[redelivery]
max_redeliveries = 2
dead_letter = "queue"
[[fault]]
kind = "broker_crash"
broker = "a"
at = "100ms"
for = "200ms"
[run]
drain_timeout = "1m"
max_events = 200000
"#;

/// Every (table, key) of BASE that a mutation may replace.
const FIELDS: &[(&str, &str)] = &[
    ("", "strategies"),
    ("", "seed"),
    ("workload", "messages"),
    ("workload", "rate"),
    ("workload", "keys"),
    ("workload", "poison_fraction"),
    ("workload", "key_distribution"),
    ("workload", "zipf_exponent"),
    ("producers", "count"),
    ("producers", "clock_skew"),
    ("producers", "timestamp_resolution"),
    ("consumers", "count"),
    ("consumers", "prefetch"),
    ("consumers", "service"),
    ("consumers", "ack_latency"),
    ("consumers", "mode"),
    ("redelivery", "max_redeliveries"),
    ("redelivery", "multiplier"),
    ("redelivery", "initial_delay"),
    ("run", "drain_timeout"),
    ("run", "max_events"),
    ("fault", "at"),
    ("fault", "for"),
    ("fault", "kind"),
    ("fault", "rate"),
    ("fault", "broker"),
    ("network", "kind"),
    ("network", "forward_delay"),
    ("network", "prefetch"),
    ("network", "network_ttl"),
    ("network", "conduit_subscriptions"),
    ("network", "decrease_network_consumer_priority"),
    ("", "flavour"),
    ("redelivery", "dead_letter"),
    ("producers", "max_in_flight"),
    ("producers", "idempotence"),
    ("producers", "retry_backoff"),
    ("producers", "call_timeout"),
    ("producers", "delivery_timeout"),
    ("producers", "on_delivery_timeout"),
];

fn toml_value() -> impl Strategy<Value = toml::Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(toml::Value::Integer),
        prop_oneof![
            Just(0i64),
            Just(-1),
            Just(1),
            Just(i64::MAX),
            Just(i64::MIN)
        ]
        .prop_map(toml::Value::Integer),
        any::<f64>().prop_map(toml::Value::Float),
        prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-0.0), Just(1e300)]
            .prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
        ".*".prop_map(toml::Value::String),
        prop_oneof![
            Just("0"),
            Just("1ms"),
            Just("99999999999999h"),
            Just("-5s"),
            Just("1/s"),
            Just("0/s"),
            Just("1e9/s"),
            Just("1..5"),
            Just("> 0"),
            Just("zipf"),
            Just("batch"),
            Just("never"),
            Just("broker_crash"),
            Just("cache_collapse"),
            Just("send_error"),
            Just("resend"),
            Just("a"),
            Just("zz"),
        ]
        .prop_map(|s| toml::Value::String(s.to_string())),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(toml::Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..3)
                .prop_map(|m| toml::Value::Table(m.into_iter().collect())),
        ]
    })
}

fn mutate(field: usize, value: toml::Value) -> String {
    let mut doc: toml::Table = toml::from_str(BASE).unwrap();
    let (table, key) = FIELDS[field];
    let target = match table {
        "" => &mut doc,
        "fault" => match doc.get_mut("fault") {
            Some(toml::Value::Array(a)) => a[0].as_table_mut().unwrap(),
            _ => unreachable!(),
        },
        t => doc.get_mut(t).unwrap().as_table_mut().unwrap(),
    };
    target.insert(key.to_string(), value);
    toml::to_string(&doc).unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Arbitrary text is rejected with an error (or loads), never a panic.
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = ordsim::load_text("fuzz.toml", &text);
    }

    /// Arbitrary TOML documents never panic the loader.
    #[test]
    fn arbitrary_toml_never_panics(doc in prop::collection::btree_map("[a-z_]{1,12}", toml_value(), 0..6)) {
        let table: toml::Table = doc.into_iter().collect();
        let text = toml::to_string(&table).unwrap_or_default();
        let _ = ordsim::load_text("fuzz.toml", &text);
    }

    /// Any field of a valid scenario replaced by any value: the loader answers (an error that names
    /// the file) and, when it loads, every strategy runs to its bounds without panicking.
    #[test]
    fn arbitrary_field_values_never_panic(field in 0..FIELDS.len(), value in toml_value(), seed in 0u64..100) {
        let text = mutate(field, value);
        match ordsim::load_text("fuzz.toml", &text) {
            Err(e) => prop_assert!(e.to_string().starts_with("fuzz.toml"), "{e}"),
            Ok(sc) => {
                let mut sc = sc;
                // Keep runs small whatever the mutation asked for.
                sc.workload.messages = sc.workload.messages.min(200);
                sc.run.max_events = sc.run.max_events.min(200_000);
                let plan = sim::FaultPlan::resolve(&sc, seed);
                let opts = sim::RunOptions { seed, max_events: None, max_sim_time: Some(3_600_000_000) };
                for name in sc.strategies.clone() {
                    let r = strategies::run_named(&name, &sc, &plan, &opts, None);
                    prop_assert!(r.is_ok(), "{name}: {:?}\n{text}", r.err());
                }
            }
        }
    }
}

/// The harness is not vacuous: the base file loads, a sensible mutation still loads, and a bad one
/// is rejected with its location.
#[test]
fn mutations_reach_the_engine() {
    assert!(ordsim::load_text("fuzz.toml", BASE).is_ok());
    let ok = mutate(2, toml::Value::Integer(10));
    assert!(ordsim::load_text("fuzz.toml", &ok).is_ok(), "{ok}");
    let bad = mutate(11, toml::Value::Integer(-3));
    let e = ordsim::load_text("fuzz.toml", &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("consumers.count"), "{e}");
}

/// A scenario that would need more memory than its budget is refused up front, with the reason.
#[test]
fn memory_budget_refuses_huge_key_counts() {
    let text = BASE.replace("keys = 5", "keys = 40000000");
    let e = ordsim::load_text("big.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("workload.keys") && e.contains("memory budget"),
        "{e}"
    );
    let raised = text.replace(
        "max_events = 200000",
        "max_events = 200000\nmemory_budget_mb = 20000",
    );
    assert!(ordsim::load_text("big.toml", &raised).is_ok());
}

/// A random fault rate that would expand to millions of occurrences is refused.
#[test]
fn absurd_fault_rates_are_refused() {
    let text =
        format!("{BASE}[[fault]]\nkind = \"network_blip\"\nrate = \"1000/s\"\nfor = \"1ms\"\n")
            .replace(
                "drain_timeout = \"1m\"",
                "drain_timeout = \"1m\"\nfault_window = \"10000h\"",
            );
    let e = ordsim::load_text("rate.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fault[1].rate") && e.contains("occurrences"),
        "{e}"
    );
}

/// A file far larger than any scenario is refused before it is read.
#[test]
fn huge_files_are_refused() {
    let p = std::env::temp_dir().join(format!("ordsim-huge-{}.toml", std::process::id()));
    let mut text = BASE.to_string();
    while text.len() < 6 * 1024 * 1024 {
        text.push_str(
            "# padding padding padding padding padding padding padding padding padding\n",
        );
    }
    std::fs::write(&p, &text).unwrap();
    let e = ordsim::load(&p).unwrap_err().to_string();
    assert!(e.contains("limit for scenario files"), "{e}");
    std::fs::remove_file(&p).ok();
}

// ---- Issue 20: generators for classes 1, 3, 4, 6 and 8 ----

/// Fault fields and the kinds they apply to (`for` is left out: which kinds take a duration is the
/// typed fault plan's business).
const FAULT_FIELDS: &[(&str, &str, &[&str])] = &[
    ("broker", "\"a\"", &["broker_crash"]),
    (
        "consumer",
        "0",
        &["consumer_crash", "network_blip", "slow_consumer"],
    ),
    ("producer", "0", &["clock_skew"]),
    ("factor", "2.0", &["slow_consumer"]),
    ("skew", "\"10ms\"", &["clock_skew"]),
    ("ahead", "false", &["clock_skew"]),
    ("fraction", "0.5", &["poison"]),
];

const KINDS: &[&str] = &[
    "broker_crash",
    "consumer_crash",
    "network_blip",
    "db_outage",
    "slow_consumer",
    "clock_skew",
    "poison",
    "source_outage",
    "cache_collapse",
];

/// A scripted fault of `kind` with what it needs, plus `extra` (a field that may not apply).
fn fault_entry(kind: &str, extra: &str) -> String {
    let needs = match kind {
        "slow_consumer" if !extra.starts_with("factor") => "factor = 3.0\n",
        "clock_skew" if !extra.starts_with("skew") => "skew = \"5ms\"\n",
        "poison" if !extra.starts_with("fraction") => "fraction = 0.1\n",
        _ => "",
    };
    let dur = if kind == "cache_collapse" {
        ""
    } else {
        "for = \"50ms\"\n"
    };
    format!("[[fault]]\nkind = \"{kind}\"\nat = \"1s\"\n{dur}{needs}{extra}\n")
}

/// Loads `text`.
fn load(name: &str, text: &str) -> Result<sim::Scenario, String> {
    ordsim::load_text(name, text).map_err(|e| e.to_string())
}

/// Cases per property: `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), ..ProptestConfig::default() })]

    /// Class 1: a field given to a kind it does not apply to is refused by validation, naming the
    /// field; a field that applies loads, and the run does not panic.
    #[test]
    fn class1_fields_of_other_kinds_are_refused(kind in 0..KINDS.len(), field in 0..FAULT_FIELDS.len(), seed in 0u64..50) {
        let (name, value, kinds) = FAULT_FIELDS[field];
        let kind = KINDS[kind];
        let text = format!("{BASE}{}", fault_entry(kind, &format!("{name} = {value}")));
        let r = ordsim::load_text("f.toml", &text);
        if kinds.contains(&kind) {
            let sc = r.map_err(|e| TestCaseError::fail(e.to_string()))?;
            let plan = sim::FaultPlan::resolve(&sc, seed);
            let opts = sim::RunOptions { seed, max_events: None, max_sim_time: None };
            for s in &sc.strategies {
                prop_assert!(strategies::run_named(s, &sc, &plan, &opts, None).is_ok());
            }
        } else {
            let e = r.unwrap_err().to_string();
            prop_assert!(e.contains(&format!("fault[1].{name}")) && e.contains("does not apply"), "{e}");
        }
    }

    /// Class 3: whatever the random faults, the message count, the memory budget and max_events,
    /// a file is either refused with the reason or fits its limits: the whole plan, the messages
    /// in flight and the events a run needs. Loading is fast either way (nothing is expanded).
    #[test]
    fn class3_whole_file_limits_hold(
        rates in prop::collection::vec((1u32..1000, prop_oneof![Just("s"), Just("min"), Just("h")]), 0..16),
        window_h in 1u64..20_000,
        messages in prop_oneof![0u64..1000, any::<u64>(), Just(1u64 << 62)],
        budget in prop_oneof![Just(4096u64), 1u64..1_000_000],
        max_events in prop_oneof![Just(2_000_000_000u64), 1u64..u64::MAX],
    ) {
        let mut text = BASE
            .replace("messages = 50", &format!("messages = {messages}"))
            .replace("max_events = 200000", &format!("max_events = {max_events}\nmemory_budget_mb = {budget}\nfault_window = \"{window_h}h\""));
        for (r, unit) in &rates {
            text.push_str(&format!("[[fault]]\nkind = \"network_blip\"\nrate = \"{r}/{unit}\"\nfor = \"1ms\"\n"));
        }
        let r = load("big.toml", &text);
        match r {
            Err(e) => prop_assert!(e.starts_with("big.toml"), "{e}"),
            Ok(sc) => {
                let occ = sim::scenario::estimated_occurrences(&sc);
                prop_assert!(occ <= sim::scenario::MAX_PLAN_OCCURRENCES);
                prop_assert!(sim::scenario::estimated_events(&sc, occ) <= sc.run.max_events as f64);
                prop_assert!(sc.workload.messages.saturating_mul(sim::scenario::BYTES_PER_MESSAGE) <= budget.saturating_mul(1 << 20));
            }
        }
    }

    /// Class 4: reconnect delays, batch intervals and rates that would spin or overflow the clock
    /// are refused; what loads runs to an end (the only broker down for good) without a
    /// self-check failure, within its event bound.
    #[test]
    fn class4_spinning_settings_are_refused_or_end(
        reconnect_us in prop_oneof![Just(0u64), 1u64..5_000, Just(100_000)],
        batch_us in prop::option::of(prop_oneof![Just(0u64), 1u64..5_000, Just(1_000_000)]),
        rate_exp in 0i32..40,
        seed in 0u64..20,
    ) {
        let rate = format!("{}/s", 10f64.powi(-rate_exp).max(1e-300));
        let batch = match batch_us {
            Some(us) => format!("mode = \"batch\"\n[consumers.batch]\ninterval = \"{us}us\"\n"),
            None => String::new(),
        };
        let text = format!(
            "strategies = [\"competing\"]\n[workload]\nmessages = 20\nrate = \"{rate}\"\nkeys = 2\n\
             [producers]\nreconnect_delay = \"{reconnect_us}us\"\n[[broker]]\nname = \"a\"\n\
             [consumers]\ncount = 1\nservice = \"1ms\"\nreconnect_delay = \"{reconnect_us}us\"\n{batch}\
             [[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"0s\"\n\
             [run]\ndrain_timeout = \"10s\"\nmax_events = 1000000\n"
        );
        if let Ok(sc) = ordsim::load_text("spin.toml", &text) {
            prop_assert!(sc.producers.reconnect_delay >= sim::scenario::MIN_RECONNECT_DELAY);
            let plan = sim::FaultPlan::resolve(&sc, seed);
            let opts = sim::RunOptions { seed, max_events: None, max_sim_time: None };
            let r = strategies::run_named("competing", &sc, &plan, &opts, None);
            prop_assert!(r.is_ok(), "{:?}\n{text}", r.err());
            let m = r.unwrap().metrics.unwrap();
            prop_assert!(m.events <= 1_000_000);
        } else {
            let e = ordsim::load_text("spin.toml", &text).unwrap_err().to_string();
            prop_assert!(
                e.contains("reconnect_delay") || e.contains("interval") || e.contains("workload.rate"),
                "{e}"
            );
        }
    }

    /// Class 8: `--jobs`, `--max-events` and `--strategy` lists are judged as the file's values
    /// are; any scenario name prints without a control character.
    #[test]
    fn class8_command_line_checks_agree(
        jobs in prop_oneof![0usize..3, any::<usize>()],
        max_events in prop::option::of(prop_oneof![Just(0u64), any::<u64>()]),
        picks in prop::collection::vec(0usize..3, 0..5),
        name in "\\PC*|[\\x00-\\x1f\\x7f]{0,5}",
    ) {
        prop_assert_eq!(ordsim::check_jobs(jobs).is_ok(), (1..=ordsim::MAX_JOBS).contains(&jobs));
        prop_assert_eq!(ordsim::check_max_events(max_events).is_ok(), max_events != Some(0));
        let names: Vec<String> = picks.iter().map(|&i| ["single", "competing", "resequencer"][i].to_string()).collect();
        let dup = names.iter().enumerate().any(|(i, n)| names[..i].contains(n));
        prop_assert_eq!(ordsim::check_strategy_names(&names).is_ok(), !dup);
        let mut sc = ordsim::load_text("n.toml", BASE).unwrap();
        sc.name = Some(name);
        let shown = ordsim::scenario_name(&sc, std::path::Path::new("n.toml"));
        prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
    }
}

/// Class 6 generator: any single-cell edit of a shard's runs.csv is refused by `sim merge`, or
/// leaves the cell's text as it was.
#[test]
fn class6_any_cell_edit_is_refused() {
    use proptest::test_runner::{Config, TestRunner};
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("s.toml");
    std::fs::write(
        &f,
        BASE.replace(
            "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"100ms\"\nfor = \"200ms\"\n",
            "",
        ),
    )
    .unwrap();
    let dirs = crate::common::sweep_shards(&f, tmp.path(), "1..2", &[]);
    let runs = dirs[1].join(ordsim::sweep::RUNS);
    let pristine = std::fs::read_to_string(&runs).unwrap();
    let rows: Vec<Vec<String>> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(pristine.as_bytes())
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    let mut runner = TestRunner::new(Config {
        cases: cases(100),
        ..Config::default()
    });
    let strategy = (
        1..rows.len(),
        0..rows[0].len(),
        prop_oneof![
            Just("NaN".to_string()),
            Just("inf".to_string()),
            Just("-1".to_string()),
            Just("".to_string()),
            Just("single".to_string()),
            "[0-9]{1,4}",
            "\\PC{0,8}",
        ],
    );
    runner
        .run(&strategy, |(row, col, value)| {
            let mut edited = rows.clone();
            let same = edited[row][col] == value;
            edited[row][col] = value;
            let mut w = csv::Writer::from_path(&runs).unwrap();
            for r in &edited {
                w.write_record(r).unwrap();
            }
            w.flush().unwrap();
            let r = ordsim::sweep::merge(&dirs, &tmp.path().join("m"));
            std::fs::write(&runs, &pristine).unwrap();
            prop_assert_eq!(r.is_ok(), same, "{:?}", r.err().map(|e| e.to_string()));
            Ok(())
        })
        .unwrap();
}

/// Class 3: a tiny file with a dozen fast random faults (each under the per-entry cap) is refused
/// at once for the whole plan, without expanding it; 2^62 messages are refused for memory and
/// events; raising the limits in the file lets a large count load.
#[test]
fn a_dozen_fast_random_faults_are_refused_at_once() {
    let mut text = BASE.replace(
        "max_events = 200000",
        "max_events = 200000\nfault_window = \"900s\"",
    );
    for _ in 0..12 {
        text.push_str("[[fault]]\nkind = \"network_blip\"\nrate = \"1000/s\"\nfor = \"1ms\"\n");
    }
    let e = ordsim::load_text("dozen.toml", &text)
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `fault`") && e.contains("in all"), "{e}");

    let huge = BASE.replace("messages = 50", "messages = 4611686018427387904");
    let e = ordsim::load_text("huge.toml", &huge)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("memory_budget_mb") && e.contains("max_events"),
        "{e}"
    );

    let many = BASE
        .replace("messages = 50", "messages = 100000000")
        .replace("rate = \"100/s\"", "rate = \"1000000/s\"");
    let e = ordsim::load_text("many.toml", &many)
        .unwrap_err()
        .to_string();
    assert!(e.contains("raise [run] memory_budget_mb"), "{e}");
    let raised = many.replace(
        "max_events = 200000",
        "max_events = 1000000000\nmemory_budget_mb = 20000",
    );
    assert!(ordsim::load_text("many.toml", &raised).is_ok());
}

/// Class 3: reporting many problems is capped: a file of 4 MiB with tens of thousands of bad and
/// overlapping faults is answered with the first 100 problems and their location, then how many
/// more. (The overlap check sorts once per kind and target, `check_overlaps`; no wall-clock
/// bound here, by the house rule on timed tests.)
#[test]
fn many_problems_are_capped() {
    let mut text = BASE.to_string();
    let entry =
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"nope\"\nat = \"1s\"\nfor = \"1h\"\n";
    while text.len() + entry.len() < 4 * 1024 * 1024 - 1024 {
        text.push_str(entry);
    }
    let e = ordsim::load_text("many.toml", &text)
        .unwrap_err()
        .to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(
        lines.len(),
        sim::scenario::MAX_PROBLEMS_SHOWN + 1,
        "{}",
        lines[0]
    );
    assert!(
        lines[0].starts_with("many.toml:") && lines[0].contains("fault["),
        "{}",
        lines[0]
    );
    assert!(lines.last().unwrap().contains("more problems"), "{e}");
}

/// Class 4: settings that make a run spin are refused with the reason: a 0 s reconnect delay, a
/// batch interval of a microsecond, retries that would outnumber max_events; a rate so small that
/// its first arrival overflows the clock is an input error (exit 2).
#[test]
fn spinning_settings_are_refused() {
    for (edit, needle) in [
        (
            (
                "service = \"5ms\"",
                "service = \"5ms\"\nreconnect_delay = \"0s\"",
            ),
            "consumers.reconnect_delay",
        ),
        (
            (
                "service = \"5ms\"",
                "service = \"5ms\"\nmode = \"batch\"\n[consumers.batch]\ninterval = \"1us\"",
            ),
            "consumers.batch.interval",
        ),
        (
            (
                "service = \"5ms\"",
                "service = \"5ms\"\nreconnect_delay = \"1ms\"",
            ),
            "could take about",
        ),
        (
            ("rate = \"100/s\"", "rate = \"0.000000000000001/s\""),
            "workload.rate",
        ),
    ] {
        let text = BASE
            .replace(edit.0, edit.1)
            .replace("drain_timeout = \"1m\"", "drain_timeout = \"10h\"");
        let e = ordsim::load_text("spin.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

/// Class 4, engine side: the only broker is down for good and clients retry it every
/// millisecond. Nothing can settle, so the run ends as `stuck` after at most
/// `STUCK_AFTER_EVENTS` events without progress, not after an hour of drain (millions of
/// reconnect events per client).
#[test]
fn class4_a_broker_down_for_good_ends_stuck_at_once() {
    let text =
        "strategies = [\"competing\"]\n[workload]\nmessages = 50\nrate = \"100/s\"\nkeys = 2\n\
                [producers]\nreconnect_delay = \"1ms\"\n[[broker]]\nname = \"a\"\n\
                [consumers]\ncount = 2\nservice = \"1ms\"\nreconnect_delay = \"1ms\"\n\
                [[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"200ms\"\n\
                [run]\ndrain_timeout = \"100h\"\n";
    let sc = ordsim::load_text("stuck.toml", text).unwrap();
    let m = crate::common::run(&sc, "competing", 1);
    assert_eq!(m.ended_by, sim::summary::EndReason::Stuck);
    assert!(m.pending_at_end > 0, "{m:?}");
    let span = sim::engine::STUCK_AFTER_EVENTS;
    assert!(m.events > span && m.events < span + 10_000, "{}", m.events);
    // It stopped within seconds of simulated time, not at the drain bound.
    assert!(m.sim_time_s < 3600.0, "{}", m.sim_time_s);
}

/// ... but a long outage that will end is waited for: the clients retry more than
/// `STUCK_AFTER_EVENTS` times without progress, yet the broker's planned restart is still to
/// come, so the run goes on and settles.
#[test]
fn class4_an_outage_that_ends_is_waited_for() {
    let text = "strategies = [\"competing\"]\n[workload]\nmessages = 50\nrate = \"100/s\"\nkeys = 2\n\
                [producers]\nreconnect_delay = \"1ms\"\n[[broker]]\nname = \"a\"\n\
                [consumers]\ncount = 2\nservice = \"1ms\"\nreconnect_delay = \"1ms\"\n\
                [[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"200ms\"\nfor = \"10min\"\n";
    let sc = ordsim::load_text("long.toml", text).unwrap();
    let m = crate::common::run(&sc, "competing", 1);
    assert_eq!(m.ended_by, sim::summary::EndReason::Settled, "{m:?}");
    assert_eq!(m.applied, 50);
    assert!(m.events > sim::engine::STUCK_AFTER_EVENTS, "{}", m.events);
}
