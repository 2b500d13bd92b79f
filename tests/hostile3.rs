//! Hostile input, round three (issue 36): each class's cases are generated, from the strategy
//! registry (every parameter of every strategy) or from the manifest's fields, so a parameter or
//! field added later is covered without a new test.

use std::process::Command;
use strategies::{Range, ALL};

/// The largest value an error's "at most N fits here" allows.
fn fits(e: &str) -> Option<u64> {
    let rest = &e[e.find("at most ")? + "at most ".len()..];
    rest.split_once(" fits here")?.0.parse().ok()
}

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

/// `s.toml` in `dir`: [`base`] with `competing`.
fn competing_file(dir: &std::path::Path) -> std::path::PathBuf {
    let f = dir.join("s.toml");
    std::fs::write(&f, base("competing")).unwrap();
    f
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
            // A parameter that sizes a run is bounded by the file's limits before its range's
            // top (class 2's test); the top of any other range builds.
            let good = if p.sizes.is_some() {
                &good[..1]
            } else {
                &good[..]
            };
            for v in good {
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

/// Every strategy parameter misspelt (a letter added in its middle) is answered with the right
/// name, as a misspelt field of the file is: the strategy's own reading listed the allowed
/// names without a suggestion.
#[test]
fn every_misspelt_parameter_gets_a_suggestion() {
    let mut checked = 0;
    for info in ALL {
        for p in info.params {
            let mid = p.name.len() / 2;
            let typo = format!("{}q{}", &p.name[..mid], &p.name[mid..]);
            let e = load(&with_param(info.name, &typo, "1")).unwrap_err();
            assert!(
                e.contains(&format!("did you mean `{}`?", p.name)),
                "{}.{typo}: {e}",
                info.name
            );
            assert_eq!(e.matches("did you mean").count(), 1, "{e}");
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked}");
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
    let scen = competing_file(dir.path());
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

/// Bidirectional formatting characters (U+202E "right-to-left override" and its kin) are
/// treated as control characters: escaped in a scenario's name and description on the terminal,
/// refused in broker and client names and in `--set`; they reached the terminal raw, where they
/// reorder the text around them.
#[test]
fn bidirectional_formatting_characters_are_escaped_or_refused() {
    for c in [
        '\u{061c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}',
    ] {
        let esc = format!("\\u{{{:x}}}", c as u32);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s.toml");
        std::fs::write(
            &f,
            format!(
                "name = \"a{c}b\"\ndescription = \"d{c}e\"\n{}",
                base("competing")
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(["run", f.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{c:?}");
        assert!(!text.contains(c), "{c:?} reached the terminal raw");
        assert!(text.contains(&format!("scenario a{esc}b")), "{c:?}: {text}");
        // The story's page shows the description: escaped there too, as every text file is
        // (`write_atomic`; the page is written without an anomaly as well, exit 1).
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .args([
                "trace",
                f.to_str().unwrap(),
                "--strategy",
                "competing",
                "--out",
            ])
            .arg(dir.path().join("o"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{c:?}: no anomaly");
        let page = std::fs::read_to_string(dir.path().join("o/timeline.html")).unwrap();
        assert!(!page.contains(c), "{c:?} reached the page raw");
        assert!(page.contains(&format!("d{esc}e")), "{c:?}");
        for (from, to) in [
            ("name = \"a\"", format!("name = \"a{c}\"")),
            ("count = 2", format!("count = 2\nnames = [\"x{c}\", \"y\"]")),
        ] {
            let e = load(&base("competing").replace(from, &to)).unwrap_err();
            assert!(
                e.contains("control character") && !e.contains(c),
                "{c:?}: {e}"
            );
        }
        let e = sim::scenario::parse_set(&format!("consumers.count=1,{c}2")).unwrap_err();
        assert!(e.contains("control character"), "{c:?}: {e}");
    }
    assert!(
        !sim::is_unsafe_char('é') && !sim::is_unsafe_char('日') && !sim::is_unsafe_char('\u{200b}')
    );
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
    // An empty name is refused by the loader since round five; the file name stays guarded.
    let mut sc = load(&named("x")).unwrap();
    sc.name = Some(String::new());
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
    // In the words every command uses since round six (`ordsim::check_outputs`).
    assert!(
        err.contains("--out would write") && err.contains("over the input"),
        "{err}"
    );
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

/// Class 2: every parameter that sizes a run (`ParamInfo::sizes`, from the registry) is bounded
/// by what the whole-file limits leave, not by a fixed number: at the top of its type's range it
/// is refused at its line, naming the value, the limit it breaks, the largest value that fits
/// and how to raise the limit; that largest value loads and one more does not; raising `[run]
/// memory_budget_mb` and `max_events` raises the bound. A parameter that sizes nothing builds
/// at the top of its range (`class3_every_parameter_out_of_range_is_refused_at_its_line`).
#[test]
fn class2_sizing_parameters_follow_the_whole_file_limits() {
    let mut sized = 0;
    for info in ALL {
        for p in info.params.iter().filter(|p| p.sizes.is_some()) {
            let Range::Int(_, hi) = p.range else {
                panic!("{}.{}: a sizing parameter is an integer", info.name, p.name)
            };
            let field = format!("field `strategy.{}.{}`", info.name, p.name);
            let at = format!("bad.toml:{PARAM_LINE}:");
            let with = |v: u64, run: &str| {
                load(&format!(
                    "{}{run}",
                    with_param(info.name, p.name, &v.to_string())
                ))
            };
            let e = with(hi as u64, "").unwrap_err();
            assert!(
                e.contains(&at)
                    && e.contains(&format!("{field}: {hi} needs about"))
                    && (e.contains("raise [run] memory_budget_mb")
                        || e.contains("raise [run] max_events")),
                "{}.{} = {hi}: {e}",
                info.name,
                p.name
            );
            let n = fits(&e).unwrap_or_else(|| panic!("no bound said: {e}"));
            assert!(n >= 1, "{e}");
            with(n, "").unwrap_or_else(|e| panic!("{}.{} = {n}: {e}", info.name, p.name));
            let e = with(n + 1, "").unwrap_err();
            assert!(e.contains(&field), "{e}");
            // Larger limits, a larger bound.
            let roomy = "[run]\nmemory_budget_mb = 8192\nmax_events = 4000000000\n";
            let e = with(hi as u64, roomy).unwrap_err();
            let m = fits(&e).unwrap_or_else(|| panic!("no bound said: {e}"));
            assert!(m > n, "{}.{}: {m} <= {n}", info.name, p.name);
            sized += 1;
        }
    }
    assert!(sized >= 5, "{sized} sizing parameters");
}

/// A valid shard's `sweep.json` and `runs.csv` (one sweep of two seeds, made once), and a
/// valid recorded history: the seeds the readers' fuzz mutates.
fn valid_inputs() -> &'static (Vec<u8>, Vec<u8>, Vec<u8>) {
    static INPUTS: std::sync::OnceLock<(Vec<u8>, Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    INPUTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let scen = competing_file(dir.path());
        let shard = dir.path().join("shard");
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .arg("sweep")
            .arg(&scen)
            .args(["--seeds", "1..2", "--shard", "1/1", "--set", "consumers.count=1,2", "--out"])
            .arg(&shard)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let manifest = std::fs::read(shard.join("sweep.json")).unwrap();
        let compact: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
        let mut journal = format!("#manifest {compact}\n").into_bytes();
        journal.extend(std::fs::read(shard.join("runs.csv")).unwrap());
        let msg = |seq: u32| format!(r#"{{"id":{seq},"key":0,"seq":{seq}}}"#);
        let history = [
            r#"{"type":"header","scenario":"x","strategy":"s","keys":1,"kind":"state","brokers":["b"],"producers":["p"],"consumers":["c"]}"#.to_string(),
            format!(r#"{{"type":"produce","t":1,"msg":{},"producer":0,"timestamp":1,"poison":false}}"#, msg(0)),
            format!(r#"{{"type":"produce","t":2,"msg":{},"producer":0,"timestamp":2,"poison":false}}"#, msg(1)),
            format!(r#"{{"type":"start","t":3,"msg":{},"consumer":0}}"#, msg(1)),
            format!(r#"{{"type":"discard","t":4,"msg":{},"reason":"broker_crash"}}"#, msg(1)),
            format!(r#"{{"type":"apply","t":5,"msg":{},"consumer":0,"state_seq":1}}"#, msg(1)),
            format!(r#"{{"type":"apply","t":6,"msg":{},"consumer":0,"state_seq":0}}"#, msg(0)),
        ]
        .join("\n")
        .into_bytes();
        // The seeds are valid: each reader accepts its own.
        ordsim::sweep::parse_manifest(&manifest).unwrap();
        let (_, rows) = ordsim::sweep::parse_journal(&journal, "j").unwrap().unwrap();
        assert_eq!(rows.len(), 4);
        let h = ordsim::trace::parse_history("h", std::str::from_utf8(&history).unwrap()).unwrap();
        assert_eq!(h.events.len(), 6);
        (manifest, journal, history)
    })
}

/// One edit of a byte string: (what, where, a byte, how many).
type Edit = (u8, usize, u8, usize);

/// `valid` with `edits` applied: a byte changed, inserted or removed, a span repeated or cut.
fn mutate(valid: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = valid.to_vec();
    for &(what, at, byte, n) in edits {
        let at = if b.is_empty() { 0 } else { at % b.len() };
        let end = (at + n).min(b.len());
        match what % 5 {
            0 if !b.is_empty() => b[at] = byte,
            1 => b.insert(at, byte),
            2 => {
                b.drain(at..end);
            }
            3 => {
                let span = b[at..end].to_vec();
                b.splice(at..at, span);
            }
            _ => b.truncate(at),
        }
    }
    b
}

/// Every reader of saved or recorded input on `bytes`: the manifest (`sim merge`), the journal
/// (`sim sweep --resume`, whose rows are a shard's `runs.csv`'s) and the history (`sim trace
/// --history`, read and judged). None panics, and what each accepts is bounded by its input:
/// a manifest's claims pass its check, a journal has no more rows than lines, a history no
/// more events than lines.
fn read_everything(bytes: &[u8], dir: &std::path::Path) {
    if let Ok(m) = ordsim::sweep::parse_manifest(bytes) {
        assert!(m.check().is_ok() && m.runs <= ordsim::sweep::MAX_RUNS);
    }
    let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    if let Ok(Some((m, rows))) = ordsim::sweep::parse_journal(bytes, "j") {
        assert!(rows.len() <= lines);
        assert!(rows.iter().all(|r| r.len() == m.header().len()));
    }
    if let Ok(h) = ordsim::trace::parse_history("h", &String::from_utf8_lossy(bytes)) {
        assert!(h.events.len() <= lines);
    }
    let f = dir.join("h.jsonl");
    std::fs::write(&f, bytes).unwrap();
    let _ = ordsim::trace::trace(&ordsim::trace::TraceRequest {
        file: None,
        history: Some(f),
        strategy: None,
        key: None,
        seed: None,
        max_events: None,
        aim: ordsim::trace::Aim::parse(None, None, None).unwrap(),
        list_keys: false,
    });
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// The fuzz target over the manifest, journal and history readers, run by plain `cargo
    /// test`: arbitrary bytes, and each valid input with random edits, fed to every reader.
    #[test]
    fn fuzz_readers_never_panic(
        noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
        edits in proptest::collection::vec(
            (0u8..5, proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>(), 0usize..64),
            0..6,
        ),
    ) {
        let dir = tempfile::tempdir().unwrap();
        read_everything(&noise, dir.path());
        let (manifest, journal, history) = valid_inputs();
        for valid in [manifest, journal, history] {
            read_everything(&mutate(valid, &edits), dir.path());
        }
    }
}

/// Every file under `dir`, recursively, with its bytes.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

/// Class 5: every path from input into a terminal or a text file escapes what it must. A
/// scenario whose file name, name and description hold control characters and XML's special
/// characters goes through every command that writes (run, sweep, report, trace, explore,
/// check, validate, an error): no standard output, standard error or written file holds a raw
/// control character (but line ends and tabs), every SVG file is well-formed XML, and no SVG or
/// HTML file holds the input's `<` unescaped. Every file each command writes is looked at, so an output added
/// later is covered.
#[test]
fn class5_no_output_path_writes_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let file = lib.join("evil\u{1b}[2J<b>.toml");
    let text = format!(
        "name = \"n\\u001b[31m<evil>&\\u0007\"\n\
         description = \"d\\u001b<&>\\u0000\\nline two\"\n{}\
         [sweep]\nseeds = \"1..2\"\nset = [\"consumers.count=1,2\"]\n\
         [expect]\nseeds = \"1..2\"\n[expect.all]\nordering_violations = 0\n",
        base("competing")
    );
    std::fs::write(&file, &text).unwrap();
    load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let f = file.to_str().unwrap();
    let lib_s = lib.display().to_string();
    let missing = format!("{lib_s}/missing\u{1b}[2J.toml");
    // Each command, and the --out folder it writes (if it writes one).
    let runs: [(&[&str], Option<&str>); 8] = [
        (&["validate", f], None),
        (&["run", f], Some("run")),
        (&["sweep", f, "--seeds", "1..2"], Some("sweep")),
        (&["report", &lib_s], Some("report")),
        (&["trace", f, "--strategy", "competing"], Some("trace")),
        (
            &["explore", f, "--strategy", "competing", "--runs", "1"],
            Some("explore"),
        ),
        (&["check", &lib_s], None),
        (&["run", &missing], None),
    ];
    let raw = |b: &[u8]| {
        b.iter()
            .any(|&c| (c < 0x20 && c != b'\n' && c != b'\t' && c != b'\r') || c == 0x7f)
    };
    let mut looked = 0;
    for (args, out_name) in runs {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sim"));
        cmd.args(args);
        let out_dir = out_name.map(|n| dir.path().join(n));
        if let Some(d) = &out_dir {
            cmd.arg("--out").arg(d);
        }
        let o = cmd.output().unwrap();
        let said = format!("{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(o.status.code().is_some_and(|c| c <= 2), "{said}");
        assert!(
            !raw(&o.stdout) && !raw(&o.stderr),
            "{said}\n{:?}",
            String::from_utf8_lossy(&o.stdout)
        );
        for (p, bytes) in out_dir.map(|d| files_under(&d)).unwrap_or_default() {
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if ext == "png" {
                continue;
            }
            assert!(!raw(&bytes), "{}: a raw control character", p.display());
            if ext == "svg" {
                let mut r = quick_xml::Reader::from_reader(&bytes[..]);
                let mut buf = Vec::new();
                loop {
                    match r.read_event_into(&mut buf) {
                        Ok(quick_xml::events::Event::Eof) => break,
                        Ok(_) => buf.clear(),
                        Err(e) => panic!("{}: not well-formed: {e}", p.display()),
                    }
                }
            }
            if ext == "svg" || ext == "html" {
                let text = String::from_utf8_lossy(&bytes);
                let at = text
                    .find("<evil")
                    .map(|i| &text[i.saturating_sub(200)..i + 10]);
                assert!(at.is_none(), "{}: {at:?}", p.display());
            }
            looked += 1;
        }
    }
    assert!(looked >= 15, "{looked} files looked at");
}

/// Class 6: `sim trace --out` writes its set as `sim run --out` does (the same `OutputSet`):
/// staged, then moved into the folder with `trace-manifest.json` (a hash per file) last; a
/// write stopped before the manifest leaves no manifest (never an old one over new files) and
/// no staging folder after the next write; a second writer holding the folder is refused before
/// any work. (`sim explore --out` goes through the same code with `explore-manifest.json`.)
#[test]
fn class6_trace_outputs_are_staged_as_a_set() {
    let dir = tempfile::tempdir().unwrap();
    let scen = competing_file(dir.path());
    let out = dir.path().join("t");
    let trace = |failpoint: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sim"));
        cmd.arg("trace")
            .arg(&scen)
            .args(["--strategy", "competing", "--out"])
            .arg(&out);
        if let Some(f) = failpoint {
            cmd.env("ORDSIM_FAILPOINT", f);
        }
        cmd.output().unwrap()
    };
    let o = trace(None);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{o:?}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("trace-manifest.json")).unwrap()).unwrap();
    let page = std::fs::read(out.join("timeline.html")).unwrap();
    assert_eq!(
        manifest["files"]["timeline.html"],
        format!("{:016x}", sim::hash::fnv1a(&page))
    );
    let o = trace(Some("trace-out-before-manifest"));
    assert_eq!(o.status.code(), Some(99), "{o:?}");
    assert!(!out.join("trace-manifest.json").exists());
    let o = trace(None);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{o:?}");
    assert!(out.join("trace-manifest.json").exists());
    let left = crate::common::names_containing(dir.path(), "sim-partial");
    assert!(left.is_empty(), "{left:?}");
    // Another writer holds the folder: refused before the run.
    let lock = std::fs::File::create(out.join(ordsim::RUN_LOCK)).unwrap();
    lock.try_lock().unwrap();
    let o = trace(None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is writing into it") && o.stdout.is_empty(),
        "{err}"
    );
}
