//! The map is true: docs/design.md names every engine file, every file of the command line,
//! every fault kind, every flavour and every strategy; docs/scenarios.md names every fault kind and
//! flavour. A file, kind or flavour added without its line fails here.

use crate::common::root;
use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The `.rs` files directly in `dir` (relative to the repository), sorted.
fn rust_files(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v
}

fn missing<'a>(doc: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names.into_iter().filter(|n| !doc.contains(n)).collect()
}

/// The names not written in `doc` as code: `` `name` `` or `` `"name"` ``.
fn missing_code<'a>(doc: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .into_iter()
        .filter(|n| !doc.contains(&format!("`{n}`")) && !doc.contains(&format!("`\"{n}\"`")))
        .collect()
}

#[test]
fn design_names_every_engine_and_cli_file() {
    let design = read("docs/design.md");
    let engine: Vec<String> = rust_files("sim/src/engine")
        .into_iter()
        .map(|f| format!("engine/{f}"))
        .collect();
    assert!(engine.len() > 10, "{engine:?}");
    let gone = missing(&design, engine.iter().map(String::as_str));
    assert!(
        gone.is_empty(),
        "docs/design.md's code layout lacks {gone:?}"
    );
    let cli = rust_files("cli/src");
    let gone = missing(&design, cli.iter().map(String::as_str));
    assert!(
        gone.is_empty(),
        "docs/design.md's code layout lacks cli/src/{gone:?}"
    );
    for dir in ["sweep", "explore", "live"] {
        assert!(Path::new(&root().join("cli/src").join(dir)).is_dir());
        assert!(design.contains(&format!("{dir}/ ")), "{dir}/");
    }
}

#[test]
fn design_and_scenarios_name_every_fault_kind_flavour_and_strategy() {
    let design = read("docs/design.md");
    let scenarios = read("docs/scenarios.md");
    let kinds = sim::scenario::FaultKind::ALL.map(|k| k.name());
    let mut flavours: Vec<&str> = sim::scenario::Flavour::ALL.map(|f| f.name()).to_vec();
    flavours.push("native");
    for (doc, name) in [(&design, "design.md"), (&scenarios, "scenarios.md")] {
        let gone = missing_code(doc, kinds);
        assert!(
            gone.is_empty(),
            "docs/{name} lacks the fault kinds {gone:?}"
        );
        let gone = missing_code(doc, flavours.iter().copied());
        assert!(gone.is_empty(), "docs/{name} lacks the flavours {gone:?}");
    }
    let gone = missing(&design, strategies::ALL.iter().map(|i| i.name));
    assert!(
        gone.is_empty(),
        "docs/design.md lacks the strategies {gone:?}"
    );
}

/// The README is a user's document: under 20,000 bytes, depth in docs/.
#[test]
fn readme_stays_under_20000_bytes() {
    let readme = read("README.md");
    assert!(readme.len() < 20_000, "README.md is {} bytes", readme.len());
}

/// The `sim trace` examples of the README and docs/trace.md find what they say they find (exit 0:
/// an anomaly on the key named, of the kind named, a key listed), so a change of results that
/// moves the anomalies shows here.
#[test]
fn the_docs_trace_examples_find_an_anomaly() {
    crate::common::at_root();
    let docs = [read("README.md"), read("docs/trace.md")];
    let examples: Vec<Vec<&str>> = docs
        .iter()
        .flat_map(|d| d.lines())
        .filter(|l| l.starts_with("sim trace scenarios/") && !l.contains("--out"))
        .map(|l| {
            l.split('#')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .skip(1)
                .collect()
        })
        .collect();
    // The README's three (--key, --keys, --anomaly) and docs/trace.md's three.
    assert!(examples.len() >= 6, "{examples:?}");
    for flag in ["--key", "--keys", "--anomaly", "--from"] {
        assert!(
            examples.iter().any(|a| a.contains(&flag)),
            "no example of {flag}"
        );
    }
    for args in examples {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "sim {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Every `[workload]` field is in docs/scenarios.md's table, and every figure only some workloads
/// have (absent from a default summary, e.g. `incomplete_groups`) is named in docs/design.md and
/// docs/metrics.md, with the field that brings it.
#[test]
fn docs_name_every_workload_field_and_optional_figure() {
    let scenarios = read("docs/scenarios.md");
    let sc = crate::common::scenario(
        &std::fs::read_to_string(root().join("scenarios/correlation-groups.toml")).unwrap(),
    );
    let mut w = sc.workload.clone();
    w.zipf_exponent = Some(1.0);
    let table = toml::Value::try_from(&w).expect("workload serializes");
    let fields: Vec<String> = table.as_table().unwrap().keys().cloned().collect();
    assert!(fields.iter().any(|f| f == "group_size"), "{fields:?}");
    let gone = missing_code(&scenarios, fields.iter().map(String::as_str));
    assert!(
        gone.is_empty(),
        "docs/scenarios.md lacks [workload] {gone:?}"
    );
    let all = sim::Metrics::every().fields();
    let plain = sim::Metrics::default().fields();
    let optional: Vec<&str> = all
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !plain.iter().any(|(p, _)| p == k))
        .collect();
    assert_eq!(optional, ["incomplete_groups"]);
    for doc in ["docs/design.md", "docs/metrics.md"] {
        let text = read(doc);
        let gone = missing_code(&text, optional.iter().copied());
        assert!(gone.is_empty(), "{doc} lacks {gone:?}");
        assert!(text.contains("`[workload] group_size"), "{doc}");
    }
}
