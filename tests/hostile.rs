//! Hostile input: whatever a scenario file holds, loading it never panics, and a file that loads
//! runs to its bounds without panicking.

use proptest::prelude::*;

const BASE: &str = r#"
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
[consumers]
count = 2
service = "5ms"
[redelivery]
max_redeliveries = 2
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
