//! Hostile input, round three (issue 36): each class's cases are generated, from the strategy
//! registry (every parameter of every strategy) or from the manifest's fields, so a parameter or
//! field added later is covered without a new test.

use std::process::Command;
use strategies::{Range, ALL};

/// A scenario every strategy applies to (one broker, the notifier with source access), with
/// `[strategy.NAME]` holding `PARAM = VALUE` on line [`PARAM_LINE`].
fn with_param(strategy: &str, param: &str, value: &str) -> String {
    format!(
        "{}[strategy.{strategy}]\n{param} = {value}\n",
        base(strategy)
    )
}

/// A scenario of one broker and two consumers running `strategy`.
fn base(strategy: &str) -> String {
    format!(
        "strategies = [\"{strategy}\"]\n\
         [workload]\n\
         messages = 50\n\
         rate = \"100/s\"\n\
         keys = 5\n\
         [[broker]]\n\
         name = \"a\"\n\
         [consumers]\n\
         count = 2\n\
         service = \"5ms\"\n"
    )
}

/// The line of `PARAM = VALUE` in [`with_param`].
const PARAM_LINE: usize = 12;

/// Values just outside and at the ends of a range, as TOML.
fn probes(r: Range) -> (Vec<String>, Vec<String>) {
    match r {
        Range::Any => (Vec::new(), Vec::new()),
        Range::Int(lo, hi) => (
            vec![(lo as i128 - 1).to_string(), (hi as i128 + 1).to_string()],
            vec![lo.to_string(), hi.to_string()],
        ),
        Range::Dur(lo, hi) => {
            let mut bad = vec![format!("\"{}us\"", hi.0 + 1)];
            if lo.0 > 0 {
                bad.push(format!("\"{}us\"", lo.0 - 1));
            }
            (bad, vec![format!("\"{lo}\""), format!("\"{hi}\"")])
        }
    }
}

fn load(text: &str) -> Result<sim::Scenario, String> {
    ordsim::load_text("bad.toml", text).map_err(|e| e.to_string())
}

/// Class 3 and 4: every strategy parameter with a range is refused just outside it (exit 2 from
/// `sim validate`, naming `strategy.NAME.PARAM` at its line and column, with the range), and
/// accepted at both ends, where the strategy then builds (never "not applicable" for a value
/// validation let through). Also values of the wrong type, and an unknown field, are named at
/// their own line, not at the table's header.
#[test]
fn class3_every_parameter_out_of_range_is_refused_at_its_line() {
    let mut probed = 0;
    for info in ALL {
        for p in info.params {
            let (bad, good) = probes(p.range);
            let wrong_type = if p.unit == "bool" {
                "\"maybe\""
            } else {
                "{ x = 1 }"
            };
            for v in bad.iter().map(String::as_str).chain([wrong_type]) {
                let e = load(&with_param(info.name, p.name, v))
                    .err()
                    .unwrap_or_else(|| panic!("{}.{} = {v}: accepted", info.name, p.name));
                let at = format!("bad.toml:{PARAM_LINE}:");
                let field = format!("field `strategy.{}.{}`", info.name, p.name);
                assert!(
                    e.contains(&at) && e.contains(&field),
                    "{}.{} = {v}: {e}",
                    info.name,
                    p.name
                );
                if v != wrong_type && !e.contains("expected") {
                    // Out of range, not out of the type: the range is said.
                    assert!(e.contains(&p.range.to_string()), "{e}");
                }
                probed += 1;
            }
            for v in &good {
                let sc = load(&with_param(info.name, p.name, v))
                    .unwrap_or_else(|e| panic!("{}.{} = {v}: {e}", info.name, p.name));
                strategies::builds(info.name, &sc)
                    .unwrap_or_else(|e| panic!("{}.{} = {v}: not built: {e}", info.name, p.name));
            }
            // Every default is inside its range.
            assert!(p.range.holds(p.default), "{}.{}", info.name, p.name);
        }
        let e = load(&with_param(info.name, "no_such_field", "1")).unwrap_err();
        assert!(
            e.contains(&format!(
                "bad.toml:{PARAM_LINE}:17: field `strategy.{}.no_such_field`",
                info.name
            )),
            "{e}"
        );
    }
    assert!(probed > 60, "{probed} cases");
}

/// The same through the command line: `sim validate` exits 2, and `--set` of an out-of-range
/// value is refused before any run (every ranged parameter, one `sim sweep` each would be slow:
/// one parameter per strategy).
#[test]
fn class3_out_of_range_exits_2_from_validate_and_set() {
    let dir = tempfile::tempdir().unwrap();
    for info in ALL {
        let Some(p) = info.params.iter().find(|p| p.range != Range::Any) else {
            continue;
        };
        let (bad, good) = probes(p.range);
        let file = dir.path().join(format!("{}.toml", info.name));
        std::fs::write(&file, with_param(info.name, p.name, &bad[0])).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .arg("validate")
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", info.name);
        assert!(
            err.contains(&format!("strategy.{}.{}", info.name, p.name)),
            "{err}"
        );
        std::fs::write(&file, with_param(info.name, p.name, &good[0])).unwrap();
        let set = format!("strategy.{}.{}={}", info.name, p.name, bad[0]);
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(["sweep"])
            .arg(&file)
            .args(["--seeds", "1..1", "--set", &set, "--out"])
            .arg(dir.path().join(format!("{}-out", info.name)))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{set}: {err}");
        assert!(
            err.contains(&format!("strategy.{}.{}", info.name, p.name)),
            "{err}"
        );
    }
}

/// Class 1 and 2: a manifest read back (a shard's `sweep.json`, a journal's first line) with any
/// count zeroed, inflated or reversed is refused with exit 2 by `sim merge` and by `sim sweep`
/// (with and without `--resume`), never a panic or a run of its claimed size.
#[test]
fn class1_damaged_manifests_are_refused_not_divided_by() {
    let dir = tempfile::tempdir().unwrap();
    let scen = dir.path().join("s.toml");
    std::fs::write(&scen, base("competing")).unwrap();
    let shard = dir.path().join("shard");
    let sim = || Command::new(env!("CARGO_BIN_EXE_sim"));
    let out = sim()
        .arg("sweep")
        .arg(&scen)
        .args(["--seeds", "1..2", "--shard", "1/1", "--out"])
        .arg(&shard)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let good: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shard.join("sweep.json")).unwrap()).unwrap();
    // Every damage of every count the manifest holds.
    let damages: Vec<(&str, serde_json::Value)> = vec![
        ("strategies", serde_json::json!([])),
        ("strategies", serde_json::json!(["competing", "competing"])),
        ("seed_first", serde_json::json!(3)),
        ("seed_last", serde_json::json!(u64::MAX)),
        ("runs", serde_json::json!(0)),
        ("runs", serde_json::json!(1_000_000_000_000_000u64)),
        ("shard", serde_json::json!({"index": 1, "count": 0})),
        ("shard", serde_json::json!({"index": 0, "count": 1})),
        ("shard", serde_json::json!({"index": 3, "count": 2})),
        (
            "params",
            serde_json::json!([{"path": "consumers.count", "values": []}]),
        ),
        (
            "params",
            serde_json::json!([{"path": "a.".repeat(5000) + "b", "values": ["1"]}]),
        ),
    ];
    for (field, value) in damages {
        let mut m = good.clone();
        m[field] = value.clone();
        let text = serde_json::to_string(&m).unwrap();
        // Through sim merge.
        std::fs::write(shard.join("sweep.json"), &text).unwrap();
        let out = sim()
            .arg("merge")
            .arg(&shard)
            .arg("--out")
            .arg(dir.path().join("merged"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "merge, {field} = {value}: {err}"
        );
        assert!(err.contains("not a sweep manifest"), "{err}");
        // Through a journal, with and without --resume.
        let sweep_out = dir.path().join("journaled");
        std::fs::create_dir_all(&sweep_out).unwrap();
        std::fs::write(
            sweep_out.join("runs.partial.csv"),
            format!("#manifest {text}\nrun\n"),
        )
        .unwrap();
        for resume in [false, true] {
            let mut cmd = sim();
            cmd.arg("sweep")
                .arg(&scen)
                .args(["--seeds", "1..2", "--out"])
                .arg(&sweep_out);
            if resume {
                cmd.arg("--resume");
            }
            let out = cmd.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "journal, {field} = {value}: {err}"
            );
            assert!(
                err.contains("runs.partial.csv:1: not a sweep manifest"),
                "{err}"
            );
        }
    }
}

/// Class 1 and 2: a `--set` path of many dotted parts (or a `[sweep] set` entry of one) is
/// refused by `sim sweep` and by `sim validate` alike, whatever its length.
#[test]
fn class1_deep_set_paths_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let scen = dir.path().join("s.toml");
    let base = base("competing");
    for parts in [17, 5_000, 50_000] {
        let path = vec!["a"; parts].join(".");
        std::fs::write(&scen, &base).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .arg("sweep")
            .arg(&scen)
            .args(["--seeds", "1..1", "--set", &format!("{path}=1"), "--out"])
            .arg(dir.path().join("o"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{parts}: {err}");
        assert!(err.contains("dotted parts"), "{err}");
        assert!(err.len() < 2000, "the path is not echoed whole");
        let with_sweep = format!("{base}[sweep]\nseeds = \"1..2\"\nset = [\"{path}=1\"]\n");
        let e = load(&with_sweep).unwrap_err();
        assert!(
            e.contains("field `sweep.set[0]`") && e.contains("dotted parts"),
            "{e}"
        );
    }
    assert!(load(&format!(
        "{base}[sweep]\nseeds = \"1..2\"\nset = [\"consumers.count=1,2\"]\n"
    ))
    .is_ok());
}

/// Class 2: `sim trace --history` bounds its work by its input's size: a history where one
/// message is held by many consumers and discarded many times is judged (the checker's work on
/// it is counted by `a_message_held_by_many_and_gone_many_times_costs_work_linear_in_the_history`
/// in sim/src/checkers/tests.rs), and an event line longer than any event is refused by its line.
#[test]
fn class2_history_work_is_bounded_by_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let msg = r#"{"id":0,"key":0,"seq":0}"#;
    let n = 2000;
    let mut lines = vec![format!(
        r#"{{"type":"produce","t":1,"msg":{msg},"producer":0,"timestamp":1,"poison":false}}"#
    )];
    for c in 0..n {
        lines.push(format!(
            r#"{{"type":"start","t":2,"msg":{msg},"consumer":{c}}}"#
        ));
    }
    for _ in 0..n {
        lines.push(format!(
            r#"{{"type":"discard","t":3,"msg":{msg},"reason":"broker_crash"}}"#
        ));
    }
    let f = dir.path().join("h.jsonl");
    std::fs::write(&f, lines.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["trace", "--history"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{err}");

    let long = format!(
        "{}\n{{\"type\":\"anomaly\",\"pad\":\"{}\"}}\n",
        lines[0],
        "x".repeat(ordsim::trace::MAX_HISTORY_LINE_BYTES)
    );
    std::fs::write(&f, long).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["trace", "--history"])
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("h.jsonl:2: a line of"), "{err}");
}

/// Class 3: a fixed-size array of the file (every `[T; N]` field: `[explore] rate` and
/// `duration`) takes exactly its N elements; a longer one is no longer cut silently.
#[test]
fn class3_fixed_arrays_take_exactly_their_length() {
    for (field, one) in [("rate", "\"1/s\""), ("duration", "\"1s\"")] {
        for n in [0usize, 1, 3, 4] {
            let list = vec![one; n].join(", ");
            let text = format!("{}[explore]\n{field} = [{list}]\n", base("competing"));
            let e = load(&text).unwrap_err();
            assert!(
                e.contains(&format!("field `explore.{field}`"))
                    && e.contains(&format!(
                        "takes exactly 2 elements (a range: [low, high]), not {n}"
                    )),
                "{field} x {n}: {e}"
            );
        }
        let text = format!("{}[explore]\n{field} = [{one}, {one}]\n", base("competing"));
        load(&text).unwrap_or_else(|e| panic!("{field}: {e}"));
    }
}

/// Class 5: no control character from input reaches a terminal or a text file raw. Every
/// control character is refused in a `--set` argument and a `[sweep] set` entry (whose values
/// become sweep CSV cells, report.md text and sweep.svg labels), and the names of a recorded
/// history's header are escaped as they are read (the trace's text and its page).
#[test]
fn class5_control_characters_are_refused_or_escaped() {
    let controls = (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32);
    for c in controls {
        for arg in [
            format!("consumers.count=1,{c}2"),
            format!("consu{c}mers.count=1"),
            format!("strategy.single.takeover_delay=1s{c}"),
        ] {
            let e = sim::scenario::parse_set(&arg).unwrap_err();
            assert!(
                e.contains("control character") || e.contains("empty"),
                "{c:?}: {e}"
            );
        }
    }
    let e = load(&format!(
        "{}[sweep]\nseeds = \"1..2\"\nset = [\"consumers.count=1,\\u001b[31m2\"]\n",
        base("competing")
    ))
    .unwrap_err();
    assert!(
        e.contains("control character") && !e.contains('\u{1b}'),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("h.jsonl");
    let msg = |seq: u32| format!(r#"{{"id":{seq},"key":0,"seq":{seq}}}"#);
    let lines = [
        r#"{"type":"header","scenario":"x\u001b[2J\u0000","description":"d\u001b","strategy":"s\u0007","keys":1,"kind":"state","brokers":["b\u001b"],"producers":["p\u001b"],"consumers":["c\u001b"]}"#.to_string(),
        format!(r#"{{"type":"produce","t":1,"msg":{},"producer":0,"timestamp":1,"poison":false}}"#, msg(0)),
        format!(r#"{{"type":"produce","t":2,"msg":{},"producer":0,"timestamp":2,"poison":false}}"#, msg(1)),
        format!(r#"{{"type":"apply","t":3,"msg":{},"consumer":0,"state_seq":1}}"#, msg(1)),
        format!(r#"{{"type":"apply","t":4,"msg":{},"consumer":0,"state_seq":0}}"#, msg(0)),
    ];
    std::fs::write(&f, lines.join("\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["trace", "--history"])
        .arg(&f)
        .arg("--out")
        .arg(dir.path().join("o"))
        .output()
        .unwrap();
    let all = [
        out.stdout.clone(),
        out.stderr.clone(),
        std::fs::read(dir.path().join("o/timeline.html")).unwrap(),
    ]
    .concat();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for c in [0x1bu8, 0, 7] {
        assert!(!all.contains(&c), "{c:#x} written raw");
    }
}

/// Class 6: outputs are never left damaged. A failed write leaves no `*.tmp` beside its target
/// (`write_atomic`, through which every command's files go); `sim explore` never writes its
/// shrunk file over its own input, nor a hidden file for `name = ""`; an `--out` that cannot be
/// written fails before the work (`sim trace`, `sim explore`).
#[test]
fn class6_outputs_are_not_left_damaged() {
    let dir = tempfile::tempdir().unwrap();
    // A target that cannot be replaced (a non-empty folder): the write fails, no tmp is left.
    let target = dir.path().join("t");
    std::fs::create_dir_all(target.join("inside")).unwrap();
    assert!(ordsim::write_atomic(&target, b"x").is_err());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["t".to_string()]);

    let named = |name: &str| format!("name = \"{name}\"\n{}", base("competing"));
    let sc = load(&named("")).unwrap();
    let f = ordsim::explore::write::file_name(&sc, std::path::Path::new("in.toml"), "competing");
    assert!(!f.starts_with('.'), "{f}");

    let input = dir.path().join("x.competing.toml");
    std::fs::write(&input, named("x")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .arg("explore")
        .arg(&input)
        .args(["--strategy", "competing", "--runs", "1", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("over its input"), "{err}");
    assert_eq!(std::fs::read_to_string(&input).unwrap(), named("x"));

    // An --out that is a file: refused before any run.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, "").unwrap();
    for args in [
        vec![
            "explore",
            input.to_str().unwrap(),
            "--strategy",
            "competing",
            "--runs",
            "1",
        ],
        vec!["trace", input.to_str().unwrap(), "--strategy", "competing"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(&args)
            .arg("--out")
            .arg(blocked.join("sub"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("blocked"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("anomaly") && out.stdout.is_empty(),
            "{args:?}: ran first"
        );
    }
}

/// Class 5: a control character written into any value or key of a scenario file never reaches
/// an error message raw: every strategy parameter (from the registry), the file's words
/// (flavour, distributions, modes, fault kinds), names and keys, with every control character
/// the TOML can hold.
#[test]
fn class5_errors_escape_control_characters() {
    let mut texts = Vec::new();
    for info in ALL {
        for p in info.params {
            texts.push(with_param(info.name, p.name, "\"x\\u001b\""));
        }
        texts.push(with_param(info.name, "\"k\\u001b\"", "1"));
    }
    let b = base("competing");
    for (from, to) in [
        ("[workload]", "flavour = \"k\\u001b\"\n[workload]"),
        ("[workload]", "[workload]\nkey_distribution = \"z\\u001b\""),
        ("[consumers]", "[consumers]\nmode = \"m\\u001b\""),
        ("[consumers]", "[consumers]\n\"f\\u001b\" = 1"),
        ("name = \"a\"", "name = \"a\"\n[[fault]]\nkind = \"k\\u001b\"\nat = \"1s\""),
        ("name = \"a\"", "name = \"a\"\n[[fault]]\nkind = \"broker_crash\"\nbroker = \"b\\u001b\"\nat = \"1s\"\nfor = \"1s\""),
        ("strategies = [\"competing\"]", "strategies = [\"c\\u001b\"]"),
    ] {
        texts.push(b.replacen(from, to, 1));
    }
    for c in (1u32..0x20).chain(0x7f..0xa0).filter(|&c| c != 0x0a) {
        texts.push(b.replacen(
            "[workload]",
            &format!("flavour = \"k\\u{c:04x}\"\n[workload]"),
            1,
        ));
    }
    for t in &texts {
        let e = load(t).unwrap_err();
        assert!(
            !e.chars().any(|c| c.is_control() && c != '\n'),
            "{t}\n{e:?}"
        );
    }
}
