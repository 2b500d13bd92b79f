//! The command line: malformed scenarios give a clear error (file, line, column, field, what is
//! allowed) and exit code 2; `run` prints the repro line, the fault plan and the table.

use crate::common;

use std::path::PathBuf;

use common::sim;

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordsim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn load_error(text: &str) -> String {
    match ordsim::load_text("bad.toml", text) {
        Ok(_) => panic!("should not load:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unknown_field_is_located() {
    crate::common::at_root();
    let text = common::base("\"competing\"", 2, "").replace("keys = 20", "keys = 20\nkeyz = 3");
    let e = load_error(&text);
    assert!(e.starts_with("bad.toml:8:1"), "{e}");
    assert!(e.contains("keyz") && e.contains("expected one of"), "{e}");
}

#[test]
fn bad_duration_is_located_and_says_what_is_allowed() {
    crate::common::at_root();
    let text = common::base("\"competing\"", 2, "").replace("mean = \"5ms\"", "mean = \"soon\"");
    let e = load_error(&text);
    assert!(e.contains("bad.toml:13:11"), "{e}");
    assert!(e.contains("consumers.service"), "{e}");
    assert!(e.contains("\"250ms\""), "{e}");
}

#[test]
fn zero_consumers_is_rejected() {
    crate::common::at_root();
    let e = load_error(&common::base("\"competing\"", 0, ""));
    assert!(
        e.contains("bad.toml:11:9: field `consumers.count`: must be between 1"),
        "{e}"
    );
}

#[test]
fn fault_naming_an_absent_broker_is_rejected() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\"",
        2,
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"zz\"\nat = \"1s\"\nfor = \"1s\"\n",
    );
    let e = load_error(&text);
    assert!(
        e.contains("field `fault[0].broker`: no broker named \"zz\" (brokers: \"a\")"),
        "{e}"
    );
    assert!(e.contains("bad.toml:16:10"), "{e}");
}

#[test]
fn unknown_strategy_and_bad_strategy_parameters_are_rejected() {
    crate::common::at_root();
    let e = load_error(&common::base("\"competing\", \"magic\"", 2, ""));
    assert!(
        e.contains("field `strategies[1]`: unknown strategy \"magic\""),
        "{e}"
    );
    let e = load_error(&common::base(
        "\"single\"",
        2,
        "[strategy.single]\ntakeover = \"1s\"\n",
    ));
    assert!(
        e.contains("strategy.single") && e.contains("takeover"),
        "{e}"
    );
}

#[test]
fn overlapping_scripted_faults_are_rejected() {
    crate::common::at_root();
    let f = "[[fault]]\nkind = \"db_outage\"\nat = \"1s\"\nfor = \"5s\"\n[[fault]]\nkind = \"db_outage\"\nat = \"3s\"\nfor = \"1s\"\n";
    let e = load_error(&common::base("\"competing\"", 2, f));
    assert!(
        e.contains("fault[1].at") && e.contains("overlaps fault[0]"),
        "{e}"
    );
}

#[test]
fn nonsense_values_are_rejected_with_every_problem_listed() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\"",
        2,
        "[redelivery]\nmultiplier = 0.5\nmax_redeliveries = -7\n",
    )
    .replace("rate = \"100/s\"", "rate = \"0/s\"")
    .replace("keys = 20", "keys = 20\npoison_fraction = 1.5");
    let e = load_error(&text);
    for needle in [
        "workload.rate",
        "poison_fraction",
        "redelivery.multiplier",
        "redelivery.max_redeliveries",
    ] {
        assert!(e.contains(needle), "{needle} missing in:\n{e}");
    }
    assert_eq!(e.lines().count(), 4, "{e}");
}

#[test]
fn malformed_inputs_never_panic() {
    crate::common::at_root();
    for text in [
        "",
        "\u{0}",
        "[[[",
        "strategies = 3",
        "x = 1",
        "[workload]\nmessages = -1",
        "strategies = []\n[[broker]]",
    ] {
        let _ = ordsim::load_text("bad.toml", text).unwrap_err();
    }
}

#[test]
fn binary_exits_2_on_invalid_input_and_names_the_file() {
    crate::common::at_root();
    let p = temp_file("zero.toml", &common::base("\"competing\"", 0, ""));
    let (code, _, err) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("zero.toml:11:9") && err.contains("consumers.count"),
        "{err}"
    );
    let (code, _, err) = sim(&["validate", "/nonexistent/file.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/file.toml"), "{err}");
    let p = temp_file("latin1.toml", "");
    std::fs::write(&p, b"name = \"caf\xe9\"\n").unwrap();
    let (code, _, err) = sim(&["validate", p.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not valid UTF-8"), "{err}");
}

#[test]
fn run_prints_repro_plan_and_table_and_writes_outputs() {
    crate::common::at_root();
    let out = std::env::temp_dir().join(format!("ordsim-out-{}", std::process::id()));
    let (code, stdout, err) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--seed",
        "9",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.starts_with("repro: sim run scenarios/failover.toml --seed 9\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("t=30s broker_crash broker a for 45s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("competing") && stdout.contains("single"),
        "{stdout}"
    );
    // The effective parameters, after the fault plan and before the table, defaults marked.
    let params = stdout.find("\nparameters (").expect("a parameters block");
    assert!(params > stdout.find("fault plan").unwrap(), "{stdout}");
    assert!(params < stdout.find("violations").unwrap(), "{stdout}");
    assert!(stdout.contains("  competing: no parameters\n"), "{stdout}");
    assert!(stdout.contains("  single: takeover_delay=2s\n"), "{stdout}");
    assert!(
        stdout.contains("resequencer_scope=single,") && stdout.contains("timeout=1s (default)"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["seed"], 9);
    assert_eq!(json["strategies"][0]["strategy"], "competing");
    assert_eq!(json["strategies"][0]["params"], serde_json::json!({}));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("  single: takeover_delay=2s\n"), "{report}");
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let runs = json["strategies"].as_array().unwrap().len();
    assert_eq!(
        csv.lines().count(),
        1 + runs,
        "a header and one line per strategy"
    );
}

#[test]
fn json_summary_has_the_contract_fields() {
    crate::common::at_root();
    let (code, stdout, _) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--json",
        "--strategy",
        "single",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["scenario"], "failover");
    let s = &v["strategies"][0];
    assert_eq!(s["status"], "ok");
    for f in [
        "produced",
        "applied",
        "ordering_violations",
        "stale_rejected",
        "lost",
        "duplicates",
        "dead_lettered",
        "poison_dead_lettered",
        "pending_at_end",
        "final_state_mismatches",
        "redeliveries",
        "events",
    ] {
        assert!(s[f].is_u64(), "{f} must be an integer: {s}");
    }
    assert!(s["throughput_per_s"].is_number());
    for p in ["p50", "p99", "max"] {
        assert!(s["latency_ms"][p].is_number());
    }
    assert!(s["max_block_ms"].is_number());
    // Existing fields first, in the contract's order; the effective parameters last.
    let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
    assert_eq!((keys[0].as_str(), keys[1].as_str()), ("strategy", "status"));
    assert_eq!(keys.last().unwrap().as_str(), "params");
    assert_eq!(
        s["params"],
        serde_json::json!({"takeover_delay": {"value": "2s", "default": false}})
    );
}

#[test]
fn hazardous_parameters_are_warned_about_and_listed() {
    crate::common::at_root();
    // The resequencer's defaults on four consumers: one resequencer per consumer.
    let p = temp_file(
        "hazard.toml",
        &std::fs::read_to_string("scenarios/failover.toml")
            .unwrap()
            .replace("resequencer_scope = \"single\"", ""),
    );
    let (code, stdout, err) = sim(&["run", p.to_str().unwrap(), "--strategy", "resequencer"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("resequencer_scope=route (default)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  warning: resequencer resequencer_scope: one resequencer per consumer"),
        "{stdout}"
    );
    let (code, stdout, _) = sim(&[
        "run",
        p.to_str().unwrap(),
        "--json",
        "--strategy",
        "resequencer",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let scope = &v["strategies"][0]["params"]["resequencer_scope"];
    assert_eq!(scope["value"], "route");
    assert_eq!(scope["default"], true);
    assert!(scope["warning"].is_string(), "{scope}");

    let (code, out, _) = sim(&["list", "--params"]);
    assert_eq!(code, 0);
    for w in [
        "[strategy.resequencer]",
        "resequencer_scope = route  (default)",
        "Camel stream resequencer timeout",
        "CachedMessageGroupMap",
        "hazard (no fault needed), when \"route\" with more than one consumer",
        "[strategy.competing]",
        "(no parameters)",
        "allowed: 1 to 10\n",
        "sizes: a record per partition",
    ] {
        assert!(out.contains(w), "{w}:\n{out}");
    }
}

#[test]
fn trace_writes_one_history_per_run() {
    crate::common::at_root();
    let p = std::env::temp_dir().join(format!("ordsim-trace-{}.jsonl", std::process::id()));
    let (code, _, err) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--strategy",
        "single",
        "--trace",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&p).unwrap();
    // A header naming the nodes, then the history.
    let mut lines = text.lines();
    let first: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(first["type"], "header");
    let second: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(second["type"], "connect");
    assert!(text.contains("\"type\":\"produce\"") && text.contains("\"type\":\"apply\""));
    let (code, _, err) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--trace",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "two strategies, one trace file: {err}");
}

#[test]
fn list_names_strategies_and_fault_kinds() {
    crate::common::at_root();
    let (code, out, _) = sim(&["list"]);
    assert_eq!(code, 0);
    for w in [
        "competing",
        "single",
        "broker_crash",
        "network_blip",
        "db_outage",
        "poison",
    ] {
        assert!(out.contains(w), "{w}");
    }
}

#[test]
fn an_unknown_strategy_on_the_command_line_is_refused_by_run_and_check_determinism() {
    crate::common::at_root();
    for extra in [&[][..], &["--check-determinism"][..]] {
        let mut args = vec!["run", "scenarios/redelivery.toml", "--strategy", "nope"];
        args.extend_from_slice(extra);
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("unknown strategy \"nope\""), "{args:?}: {err}");
    }
}

/// An overloaded run (400/s offered to one consumer of about 200/s) that cannot drain in time.
fn overloaded() -> String {
    common::base("\"competing\"", 1, "[run]\ndrain_timeout = \"1s\"\n")
        .replace("rate = \"100/s\"", "rate = \"400/s\"")
}

#[test]
fn a_run_that_did_not_settle_is_loud_and_strict_exits_1() {
    crate::common::at_root();
    let p = temp_file("overloaded.toml", &overloaded());
    let (code, out, err) = sim(&["run", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ended_by"), "{out}");
    assert!(out.contains("drain_timeout"), "{out}");
    let warning = out
        .lines()
        .find(|l| l.starts_with("warning: competing"))
        .unwrap_or_else(|| panic!("no warning:\n{out}"));
    assert!(
        warning.contains("offered load 400/s is above the consumers' capacity of about 200/s"),
        "{warning}"
    );

    // --strict: the same table and warning, then exit 1 naming the run.
    let dir = std::env::temp_dir().join(format!("ordsim-strict-{}", std::process::id()));
    let (code, out2, err) = sim(&[
        "run",
        p.to_str().unwrap(),
        "--strict",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(out2.contains(warning), "{out2}");
    assert!(
        err.contains("--strict: 1 run(s) did not settle: competing (ended_by = drain_timeout)"),
        "{err}"
    );
    // The files are written before the exit, and report.md carries the warning too.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(warning), "{md}");
    let _ = std::fs::remove_dir_all(&dir);

    // --json keeps stdout JSON; the warning goes to standard error.
    let (code, out, err) = sim(&["run", p.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("warning"), "{out}");
    assert!(err.contains(warning), "{err}");
}

#[test]
fn an_event_bound_names_its_remedy_and_a_settled_run_passes_strict() {
    crate::common::at_root();
    let p = temp_file("bounded.toml", &common::base("\"competing\"", 2, ""));
    let (code, out, err) = sim(&["run", p.to_str().unwrap(), "--max-events", "500"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(ended_by = max_events); raise [run] max_events or --max-events"),
        "{out}"
    );
    let (code, out, err) = sim(&["run", p.to_str().unwrap(), "--strict"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("settled") && !out.contains("warning:"),
        "{out}"
    );
}

#[test]
fn check_without_any_expect_section_fails() {
    crate::common::at_root();
    let p = temp_file("no-expect.toml", &common::base("\"competing\"", 2, ""));
    let (code, _, err) = sim(&["check", p.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("nothing to check: none of the 1 scenario file(s)")
            && err.contains("has an [expect] section"),
        "{err}"
    );
}

#[test]
fn misspelt_names_get_a_suggestion() {
    crate::common::at_root();
    // An unknown field.
    let text = common::base("\"competing\"", 2, "").replace("keys = 20", "keys = 20\nkeyz = 3");
    let e = load_error(&text);
    assert!(e.contains("did you mean `keys`?"), "{e}");
    // An unknown fault kind.
    let e = load_error(&common::base(
        "\"competing\"",
        2,
        "[[fault]]\nkind = \"broker_crsh\"\nat = \"1s\"\n",
    ));
    assert!(e.contains("did you mean `broker_crash`?"), "{e}");
    // An unknown figure in [expect].
    let e = load_error(&common::base(
        "\"competing\"",
        2,
        "[expect.all]\nordering_violation = 0\n",
    ));
    assert!(e.contains("did you mean `ordering_violations`?"), "{e}");
    // An unknown strategy, in the file and on the command line.
    let p = temp_file("misspelt.toml", &common::base("\"competting\"", 2, ""));
    let (code, _, err) = sim(&["validate", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean `competing`?"), "{err}");
    let p = temp_file("fine.toml", &common::base("\"competing\"", 2, ""));
    let (code, _, err) = sim(&["run", p.to_str().unwrap(), "--strategy", "singel"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean `single`?"), "{err}");
}

#[test]
fn the_root_cause_comes_before_its_consequences() {
    crate::common::at_root();
    // A misspelt strategy also makes its [expect.NAME] section name no strategy: the misspelling
    // is listed first.
    let e = load_error(&common::base(
        "\"competting\"",
        2,
        "[expect.competing]\nlost = 0\n",
    ));
    let lines: Vec<&str> = e.lines().collect();
    assert!(lines.len() >= 2, "{e}");
    assert!(lines[0].contains("unknown strategy \"competting\""), "{e}");
    assert!(lines[1].contains("expect.competing"), "{e}");
    // A broker name used twice is listed before the faults and lists that refer to brokers.
    let e = load_error(&common::base(
        "\"competing\"",
        2,
        "brokers = [\"zz\"]\n[[broker]]\nname = \"a\"\n",
    ));
    let lines: Vec<&str> = e.lines().collect();
    assert!(lines[0].contains("used twice"), "{e}");
}

/// The README's quick start shows exactly what its first command prints (a new column or a changed
/// figure must show up there too: regenerate the block from `sim run scenarios/failover.toml`).
#[test]
fn the_readme_quick_start_is_what_the_first_command_prints() {
    crate::common::at_root();
    let readme = std::fs::read_to_string("README.md").unwrap();
    let start = "The first command prints:\n\n```\n";
    let i = readme.find(start).expect("the quick start block") + start.len();
    let block = &readme[i..i + readme[i..].find("```\n").unwrap()];
    let (code, out, _) = sim(&["run", "scenarios/failover.toml"]);
    assert_eq!(code, 0);
    // One line `  ...` may stand for lines of the output left out (the parameter listing).
    let same = match block.split_once("\n  ...") {
        None => block == out,
        Some((head, rest)) => {
            let tail = &rest[rest.find('\n').map_or(rest.len(), |n| n + 1)..];
            out.len() > head.len() + tail.len() && out.starts_with(head) && out.ends_with(tail)
        }
    };
    assert!(same, "README quick start differs from the output:\n{out}");
}

/// Every generated section of the docs is what its command prints today: a section starts with
/// `<!-- generated by `sim list ARGS` ... -->` and ends with `<!-- end generated -->` (the
/// metric reference from sim/src/metric_defs.rs, docs/scenarios.md's strategy and `[[fault]]`
/// tables from the strategy registry and sim/src/faults.rs). Issue 41: lists written by hand
/// drifted from the code and from each other.
#[test]
fn the_docs_generated_sections_match_the_code() {
    crate::common::at_root();
    let (code, out, _) = sim(&["list", "--metrics"]);
    assert_eq!(code, 0);
    assert_eq!(out, sim::metric_defs::reference_markdown());
    let mut seen = Vec::new();
    let mut docs: Vec<_> = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    for path in docs {
        let doc = std::fs::read_to_string(&path).unwrap();
        let mut rest = doc.as_str();
        while let Some(i) = rest.find("<!-- generated by `sim ") {
            let marker = &rest[i + "<!-- generated by `sim ".len()..];
            let args: Vec<&str> = marker[..marker.find('`').unwrap()].split(' ').collect();
            let start = i + rest[i..].find("-->\n").unwrap() + 4;
            let end = rest.find("<!-- end generated -->").expect("end marker");
            let (code, out, err) = sim(&args);
            assert_eq!(code, 0, "{}: sim {args:?}: {err}", path.display());
            assert_eq!(
                &rest[start..end],
                out,
                "{}: regenerate with `sim {}`",
                path.display(),
                args.join(" ")
            );
            seen.push(args.join(" "));
            rest = &rest[end + 1..];
        }
    }
    for section in ordsim::DOC_SECTIONS {
        let args = format!("list --doc {section}");
        assert!(seen.contains(&args), "no doc carries `sim {args}`");
    }
    assert!(seen.iter().any(|a| a == "list --metrics"), "{seen:?}");
    // The `flavour` row names every flavour the loader accepts.
    let doc = std::fs::read_to_string("docs/scenarios.md").unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `flavour` |"))
        .unwrap();
    for f in sim::scenario::Flavour::ALL {
        assert!(row.contains(&format!("`\"{}\"`", f.name())), "{}", f.name());
    }
}

/// Issue 41: report.md's legend explains every column of its table, the verdict included.
#[test]
fn the_report_legend_explains_the_verdict() {
    let legend = ordsim::columns_legend();
    assert!(legend.contains("`verdict` = `ok` when"), "{legend}");
    assert!(legend.contains("`FAIL:`"), "{legend}");
}

/// The default build has no live twin: `sim live` and `sim calibrate` say how to enable it and
/// exit 2.
#[cfg(not(feature = "live"))]
#[test]
fn live_commands_need_the_live_feature() {
    common::at_root();
    for args in [
        &["live", "scenarios/calibration/crash-groups.toml"][..],
        &["calibrate", "scenarios/calibration"][..],
    ] {
        let (code, _, err) = sim(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("--features live"), "{err}");
    }
}

/// Issue 41: a strategy that delivers nothing never looks better than one that delivers
/// everything. The notifier reads a source that is down for the whole run: every message is
/// dead-lettered, none applied; the competing consumer (one consumer: in order) applies all. The
/// verdicts say so, the notifier's latencies count its messages at the run's end, and the cost
/// chart draws it above the competing consumer.
#[test]
fn a_strategy_that_delivers_nothing_never_ranks_above_one_that_delivers_everything() {
    crate::common::at_root();
    let text = common::base(
        "\"competing\", \"notifier\"",
        1,
        "[[fault]]\nkind = \"source_outage\"\nat = \"0s\"\n",
    )
    .replace("messages = 2000", "messages = 200");
    let file = temp_file("delivers-nothing.toml", &text);
    let out = file.with_extension("out");
    let (code, json, err) = sim(&[
        "run",
        file.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let entry = |name: &str| {
        v["strategies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["strategy"] == name)
            .unwrap()
            .clone()
    };
    let (good, bad) = (entry("competing"), entry("notifier"));
    assert_eq!(
        (&good["valid"], &good["verdict"]),
        (&true.into(), &"ok".into())
    );
    assert_eq!(bad["applied"], 0);
    assert_eq!(bad["valid"], false);
    assert_eq!(
        bad["verdict"],
        "FAIL: 200 of 200 never delivered (dead-lettered)"
    );
    assert_eq!(bad["undelivered"], 200);
    let p99 = |e: &serde_json::Value| e["latency_ms"]["p99"].as_f64().unwrap();
    assert!(p99(&bad) > p99(&good), "{json}");
    // On the cost chart (SVG: y grows downwards) the notifier's label is above the competing
    // consumer's.
    let svg = std::fs::read_to_string(out.join("cost.svg")).unwrap();
    let y_of = |label: &str| -> f64 {
        let at = svg
            .find(label)
            .unwrap_or_else(|| panic!("{label} in {svg}"));
        let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
        let y = &tag[tag.find(" y=\"").unwrap() + 4..];
        y[..y.find('"').unwrap()].parse().unwrap()
    };
    assert!(y_of("notifier: FAIL: 200 of 200") < y_of("competing (0 ordering violations)"));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| FAIL: 200 of 200 never delivered (dead-lettered) |"));
}
