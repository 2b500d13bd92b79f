//! Hostile input, round four: each class's cases, with the input that showed it.
//!
//! Class 1, repeated names: every list of names in the scenario format, and every repeatable
//! command-line value, refuses a repeat where it is almost surely a typo (a failover list, a
//! sweep's values, parameters and strategies, explore's bounds), naming the field, the repeated
//! name and what is allowed.
//!
//! Class 2, an output over an input: no command writes a file that is one of its inputs.
//!
//! Class 3, a fault that silently does nothing is refused.
//!
//! Class 4, unfriendly messages: one mistake gives one error, in simulated time's own words.

use crate::common::{at_root, fresh_dir, sim};

fn load(text: &str) -> Result<sim::Scenario, String> {
    ordsim::load_text("bad.toml", text).map_err(|e| e.to_string())
}

/// Two brokers, two producers and two consumers; `extra` is appended.
fn two_brokers(producers: &str, consumers: &str, extra: &str) -> String {
    format!(
        "strategies = [\"competing\", \"single\"]\n\
         [workload]\n\
         messages = 50\n\
         rate = \"100/s\"\n\
         keys = 5\n\
         [producers]\n\
         count = 2\n\
         {producers}\n\
         [[broker]]\n\
         name = \"a\"\n\
         [[broker]]\n\
         name = \"b\"\n\
         [consumers]\n\
         count = 2\n\
         service = \"5ms\"\n\
         {consumers}\n\
         {extra}"
    )
}

/// Class 1: a failover list (`[producers] brokers`, `[consumers] brokers`) that names a broker
/// twice is refused at the repeat's line, with the first place and the broker names; the same
/// lists without the repeat load. (Before: accepted silently, the repeat a second try of the same
/// broker where the user meant another.)
#[test]
fn class1_failover_lists_name_each_broker_once() {
    let ok = two_brokers("brokers = [\"a\", \"b\"]", "brokers = [\"b\", \"a\"]", "");
    load(&ok).expect("distinct lists load");
    for (producers, consumers, field, line) in [
        (
            "brokers = [\"a\", \"b\", \"a\"]",
            "",
            "producers.brokers[2]",
            8,
        ),
        ("", "brokers = [\"b\", \"b\"]", "consumers.brokers[1]", 16),
    ] {
        let e = load(&two_brokers(producers, consumers, "")).unwrap_err();
        let name = if field.starts_with("producers") {
            "a"
        } else {
            "b"
        };
        assert!(
            e.starts_with(&format!("bad.toml:{line}:")),
            "{field}: at its line: {e}"
        );
        for part in [
            format!("field `{field}`"),
            format!("broker \"{name}\" is listed twice (also at [0])"),
            "(brokers: \"a\", \"b\")".to_string(),
        ] {
            assert!(e.contains(&part), "{field}: {part}: {e}");
        }
        assert_eq!(e.lines().count(), 1, "one problem: {e}");
    }
}

/// Class 1: `[sweep]` refuses a value given twice in one `set` entry, one parameter set by two
/// entries (also when written differently: `fault.0.for` and `fault. 00 .for` name one place),
/// and a strategy listed twice: `sim validate` passed them, and `sim report` then ran the same
/// points twice, or failed on them after the scenarios before it had run.
#[test]
fn class1_sweep_sections_repeat_nothing() {
    let fault =
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"100ms\"\nfor = \"50ms\"\n";
    let sweep = |body: &str| {
        two_brokers(
            "",
            "",
            &format!("{fault}[sweep]\nseeds = \"1..2\"\n{body}\n"),
        )
    };
    load(&sweep(
        "set = [\"fault.0.for=1s,2s\", \"consumers.count=1,2\"]\nstrategies = [\"single\"]",
    ))
    .expect("a sweep without repeats loads");
    for (body, field, says) in [
        (
            "set = [\"consumers.count=1,2,1\"]",
            "sweep.set[0]",
            "value \"1\" is given twice",
        ),
        (
            "set = [\"fault.0.for=1s\", \"consumers.count=2\", \"fault. 00 .for=2s\"]",
            "sweep.set[2]",
            "is set twice (also at [0])",
        ),
        (
            "set = [\"fault.0.for=1s\", \"fault.0.for=2s\"]",
            "sweep.set[1]",
            "is set twice (also at [0])",
        ),
        (
            "set = [\"fault.0.for=1s\"]\nstrategies = [\"single\", \"single\"]",
            "sweep.strategies[1]",
            "strategy \"single\" is listed twice",
        ),
    ] {
        let e = load(&sweep(body)).unwrap_err();
        assert!(e.contains(&format!("field `{field}`")), "{body}: {e}");
        assert!(e.contains(says), "{body}: {says}: {e}");
        assert_eq!(e.lines().count(), 1, "one problem: {e}");
    }
}

/// Class 1: `sim sweep --set` refuses a value given twice, and one place set by two `--set`s
/// written differently (`fault.0.for` and `fault.00.for`), with exit 2 and no output folder.
/// Before: the first ran every point twice; the second applied both, so the runs labelled
/// `fault.0.for=1s` ran with the other `--set`'s 90s (runs.csv said 1s).
#[test]
fn class1_sweep_set_repeats_are_refused() {
    at_root();
    let dir = fresh_dir("hostile4", "sweep-set");
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        two_brokers(
            "",
            "",
            "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"100ms\"\nfor = \"50ms\"\n",
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    for (sets, says) in [
        (&["consumers.count=1,2,1"][..], "value \"1\" is given twice"),
        (
            &["fault.0.for=1s", "fault.00.for=90s"][..],
            "--set fault.00.for: set twice (as \"fault.0.for\"",
        ),
        (
            &["consumers.count=1", "consumers.count=2"][..],
            "--set consumers.count: set twice",
        ),
    ] {
        let out = dir.join("out");
        let mut args = vec![
            "sweep",
            f,
            "--seeds",
            "1..1",
            "--out",
            out.to_str().unwrap(),
        ];
        for s in sets {
            args.extend(["--set", s]);
        }
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{sets:?}: {err}");
        assert!(err.contains(says), "{sets:?}: {says}: {err}");
        assert!(!out.exists(), "{sets:?}: no output folder");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 1: a broker's name is at most 64 characters, as a producer's or a consumer's (before: a
/// name of 100,000 characters was accepted, and printed in every table, trace line and error).
#[test]
fn class1_broker_names_are_as_short_as_node_names() {
    let long = "x".repeat(65);
    let text = two_brokers("", "", "").replace("name = \"b\"", &format!("name = \"{long}\""));
    let e = load(&text).unwrap_err();
    assert!(
        e.starts_with("bad.toml:12:")
            && e.contains("field `broker[1].name`: at most 64 characters"),
        "{e}"
    );
    let ok = two_brokers("", "", "").replace("name = \"b\"", &format!("name = \"{}\"", &long[1..]));
    load(&ok).expect("64 characters load");
}

/// Class 1: `sim explore --property` takes one bound per figure, or a lower and an upper one (a
/// range), as `[expect]` does (a figure written `latency_ms.p99` or `latency_ms_p99`, or a
/// coverage counter with or without `coverage.`, is one figure). Before: `--property lost=0
/// --property lost=1` was accepted, a property no run can meet, so the first run "failed".
#[test]
fn class1_explore_takes_one_bound_or_a_range_per_figure() {
    at_root();
    let dir = fresh_dir("hostile4", "explore-property");
    let file = dir.join("s.toml");
    std::fs::write(&file, two_brokers("", "", "")).unwrap();
    let f = file.to_str().unwrap();
    let out = dir.join("out");
    let explore = |a: &str, b: &str| {
        sim(&[
            "explore",
            f,
            "--strategy",
            "single",
            "--runs",
            "1",
            "--jobs",
            "1",
            "--property",
            a,
            "--property",
            b,
            "--out",
            out.to_str().unwrap(),
        ])
    };
    for (a, b) in [
        ("lost=0", "lost=1"),
        ("lost=0", "lost = 0"),
        ("latency_ms.p99 < 5000", "latency_ms_p99 < 1"),
        ("failovers = 0", "coverage.failovers >= 0"),
    ] {
        let (code, _, err) = explore(a, b);
        assert_eq!(code, 2, "{a} {b}: {err}");
        assert!(
            err.contains("is given twice") && err.contains("or a lower and an upper one"),
            "{err}"
        );
        assert!(!out.exists(), "{a} {b}: no output folder");
    }
    // A range is one property: the exploration runs.
    let (code, _, err) = explore("latency_ms.p99 >= 0", "latency_ms_p99 < 100000000");
    assert!(!err.contains("is given twice"), "{err}");
    assert!(code == 0 || code == 1, "{code}: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 2, an output over an input: a command refuses, before any work (exit 2, the input
/// untouched, no output folder made), to write a file that is one of its inputs, by whatever path
/// (here a hard link). Before: `sim run s.toml --trace s.toml` and `sim check s.toml --junit
/// s.toml` replaced the scenario with the history or the JUnit XML, and `sim judge D/history.jsonl
/// --out D` replaced the recorded history with its conversion (only `sim explore` refused).
#[test]
fn class2_no_command_writes_over_its_input() {
    at_root();
    let dir = fresh_dir("hostile4", "over-input");
    let file = dir.join("s.toml");
    let text = two_brokers(
        "",
        "",
        "[expect]\nseeds = \"1..1\"\n[expect.all]\nlost = 0\n",
    );
    std::fs::write(&file, &text).unwrap();
    let link = dir.join("link.toml");
    std::fs::hard_link(&file, &link).unwrap();
    let f = file.to_str().unwrap();
    let l = link.to_str().unwrap();
    // A history to judge, in the folder judge's --out names.
    let hist_dir = dir.join("judged");
    std::fs::create_dir(&hist_dir).unwrap();
    let hist = hist_dir.join("history.jsonl");
    let (code, _, err) = sim(&[
        "run",
        f,
        "--strategy",
        "single",
        "--trace",
        hist.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let recorded = std::fs::read(&hist).unwrap();
    let h = hist.to_str().unwrap();
    let hd = hist_dir.to_str().unwrap();
    for (args, flag) in [
        (
            vec!["run", f, "--strategy", "single", "--trace", l],
            "--trace",
        ),
        (
            vec!["run", l, "--strategy", "single", "--trace", f],
            "--trace",
        ),
        (vec!["check", f, "--jobs", "1", "--junit", l], "--junit"),
        (
            vec!["check", dir.to_str().unwrap(), "--jobs", "1", "--junit", f],
            "--junit",
        ),
        (vec!["judge", h, "--out", hd], "--out"),
    ] {
        let (code, _, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(&format!("{flag} would write")) && err.contains("(the same file)"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "{args:?}");
        assert_eq!(std::fs::read(&hist).unwrap(), recorded, "{args:?}");
        assert_eq!(
            std::fs::read_dir(&hist_dir).unwrap().count(),
            1,
            "{args:?}: nothing written beside the history"
        );
    }
    // Other paths still work: the trace beside the file, the JUnit file, judge's other folder.
    let junit = dir.join("junit.xml");
    let (code, _, err) = sim(&[
        "check",
        f,
        "--jobs",
        "1",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let other = dir.join("judge-out");
    let (code, _, err) = sim(&["judge", h, "--out", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 2, an output over an input: `sim merge A B --out A` is refused (exit 2, shard A as it
/// was). Before: the merged files replaced shard A's own.
#[test]
fn class2_merge_does_not_write_over_a_shard() {
    at_root();
    let dir = fresh_dir("hostile4", "merge-over");
    let file = dir.join("s.toml");
    std::fs::write(&file, two_brokers("", "", "")).unwrap();
    let f = file.to_str().unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    for (shard, d) in [("1/2", &a), ("2/2", &b)] {
        let (code, _, err) = sim(&[
            "sweep",
            f,
            "--seeds",
            "1..2",
            "--set",
            "consumers.count=1,2",
            "--shard",
            shard,
            "--jobs",
            "1",
            "--out",
            d.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
    }
    let before = std::fs::read(a.join("runs.csv")).unwrap();
    let (code, _, err) = sim(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        a.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is the shard folder"), "{err}");
    assert_eq!(std::fs::read(a.join("runs.csv")).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 3, a fault that silently does nothing: a random `[[fault]]` drawn over `[run]
/// fault_window = "0s"` is refused (before: accepted, and never drawn: the plan had no
/// occurrence of it and nothing said so).
#[test]
fn class3_a_random_fault_over_no_window_is_refused() {
    let random = "[run]\nfault_window = \"0s\"\n[[fault]]\nkind = \"db_outage\"\nrate = \"10/s\"\nfor = \"1s\"\n";
    let e = load(&two_brokers("", "", random)).unwrap_err();
    assert!(
        e.contains(
            "field `fault[0].rate`: a random fault is drawn over [run] fault_window, which is 0s"
        ),
        "{e}"
    );
    let drawn = random.replace("\"0s\"", "\"1s\"");
    load(&two_brokers("", "", &drawn)).expect("a window of 1s loads");
}

/// Class 4, one mistake, one error: `[run] max_events = 0` is refused once, not followed by an
/// error for every client whose retries would exceed it.
#[test]
fn class4_max_events_zero_is_one_error() {
    let crash =
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"100ms\"\nfor = \"1s\"\n";
    let e = load(&two_brokers(
        "",
        "",
        &format!("[run]\nmax_events = 0\n{crash}"),
    ))
    .unwrap_err();
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("field `run.max_events`: must be at least 1"),
        "{e}"
    );
}

/// Class 4, a message in someone else's words: a duration too large for the parser (`for =
/// "99999999999999999999h"`, `--max-sim-time`) said "values below 1ns are not supported"; it
/// now says what simulated time holds, as a duration just too long does.
#[test]
fn class4_duration_overflow_says_what_fits() {
    let crash = "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"100ms\"\nfor = \"99999999999999999999h\"\n";
    let e = load(&two_brokers("", "", crash)).unwrap_err();
    assert!(
        e.contains("field `fault[0].for`: duration \"99999999999999999999h\" is out of range: simulated time counts whole microseconds, up to about 146,000 years"),
        "{e}"
    );
    assert!(!e.contains("1ns"), "{e}");
}
