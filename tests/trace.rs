//! `sim trace`: the first anomaly found and told (text and timeline.html), `--key`, `--history`
//! round trips from a `--trace` file, exit codes, hostile inputs, names, and annotations leaving
//! the history (and its hash) untouched.

use crate::common;
use std::path::PathBuf;

use common::sim;

fn dir(name: &str) -> PathBuf {
    common::fresh_dir("trace", name)
}

/// `sim trace ARGS --out DIR`: its exit code, standard output and standard error.
fn trace_to(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["trace"];
    all.extend_from_slice(args);
    all.extend(["--out", dir.to_str().unwrap()]);
    sim(&all)
}

const FIRST: &str =
    "first anomaly: ordering violation: key 90 seq 40 applied at 75.079754s by c1, \
                     after seq 114 was applied at 74.651817s by c1";

#[test]
fn the_failover_runs_first_violation_is_told_and_drawn() {
    common::at_root();
    let d = dir("failover");
    let (code, out, err) = trace_to(&d, &["scenarios/failover.toml", "--strategy", "single"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(FIRST), "{out}");
    assert!(out.contains("trace: sim run scenarios/failover.toml --seed 42 --strategy single"));
    // The anomaly and the event it conflicts with are marked in the timeline.
    assert!(
        out.contains(">>      75.079754  apply        seq 40 applied by c1   <-- VIOLATION"),
        "{out}"
    );
    assert!(
        out.contains(" *      74.651817  apply        seq 114 applied by c1"),
        "{out}"
    );
    // The broker's crash and the failovers are part of the story.
    assert!(
        out.contains("30.000000  crash        broker a goes down"),
        "{out}"
    );
    assert!(out.contains("consumer c0 fails over to broker b"), "{out}");
    let html = std::fs::read_to_string(d.join("timeline.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains(r#"id="anomaly""#) && html.contains("data-ready"));
    assert!(html.contains("broker a") && html.contains("target store"));
    // Self-contained: nothing to fetch.
    for bad in ["src=", "<link", "@import", "url("] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    // Same seed, same bytes.
    let (code, out2, _) = trace_to(&d, &["scenarios/failover.toml", "--strategy", "single"]);
    assert_eq!(code, 0);
    assert_eq!(out, out2);
    assert_eq!(
        html,
        std::fs::read_to_string(d.join("timeline.html")).unwrap()
    );
}

#[test]
fn key_chooses_the_story_and_a_clean_key_exits_1() {
    common::at_root();
    let (code, out, err) = sim(&[
        "trace",
        "scenarios/failover.toml",
        "--strategy",
        "single",
        "--key",
        "90",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("first anomaly of the key: ordering violation: key 90 seq 40"));
    // Key 0 is owned by producer p0; under `single` its messages were not stranded.
    let (code, out, err) = sim(&[
        "trace",
        "scenarios/failover.toml",
        "--strategy",
        "db_optimistic",
        "--key",
        "0",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("key 0: no anomaly"), "{out}");
    assert!(
        out.contains("produced by p0"),
        "the story is still told:\n{out}"
    );
    assert!(err.contains("no anomaly on key 0"), "{err}");
    let (code, _, err) = sim(&[
        "trace",
        "scenarios/failover.toml",
        "--strategy",
        "single",
        "--key",
        "100",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--key 100: the scenario has keys 0..100"),
        "{err}"
    );
}

#[test]
fn a_run_without_anomalies_exits_1() {
    common::at_root();
    let d = dir("clean");
    let f = d.join("clean.toml");
    std::fs::write(&f, common::base("\"competing\"", 1, "")).unwrap();
    let (code, out, err) = sim(&["trace", f.to_str().unwrap(), "--strategy", "competing"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("anomalies in the run: none"), "{out}");
    assert!(err.contains("no anomaly in this run"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    common::at_root();
    for args in [
        &["trace", "scenarios/failover.toml"][..],
        &["trace"][..],
        &["trace", "scenarios/failover.toml", "--strategy", "nope"][..],
        &[
            "trace",
            "scenarios/failover.toml",
            "--history",
            "x.jsonl",
            "--strategy",
            "single",
        ][..],
    ] {
        let (code, _, err) = sim(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

#[test]
fn a_trace_file_judged_again_tells_the_same_story() {
    common::at_root();
    let d = dir("roundtrip");
    let t = d.join("single.jsonl");
    let (code, _, err) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--strategy",
        "single",
        "--trace",
        t.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&t).unwrap();
    // The header names the nodes; anomaly lines are annotations beside the events.
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["type"], "header");
    assert_eq!(header["brokers"], serde_json::json!(["a", "b"]));
    assert_eq!(header["consumers"][0], "c0");
    assert_eq!(header["consumers"][4], "bridge->a");
    assert_eq!(header["keys"], 100);
    let anomalies = text
        .lines()
        .filter(|l| l.starts_with(r#"{"type":"anomaly""#))
        .count();
    assert_eq!(anomalies, 37, "18 violations, 1 duplicate, 18 stale writes");
    let (code, out, err) = sim(&["trace", "--history", t.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(FIRST), "{out}");
    assert!(
        out.contains(&format!("trace: history {}", t.display())),
        "{out}"
    );
    let (_, from_run, _) = sim(&["trace", "scenarios/failover.toml", "--strategy", "single"]);
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&out), body(&from_run));
}

#[test]
fn a_history_without_header_is_judged_and_bad_lines_are_located() {
    common::at_root();
    let d = dir("history");
    let f = d.join("h.jsonl");
    let p = |t: u64, seq: u32| {
        format!(
            r#"{{"type":"produce","t":{t},"msg":{{"id":{seq},"key":3,"seq":{seq}}},"producer":0,"timestamp":{t},"poison":false}}"#
        )
    };
    let a = |t: u64, seq: u32| {
        format!(
            r#"{{"type":"apply","t":{t},"msg":{{"id":{seq},"key":3,"seq":{seq}}},"consumer":1,"state_seq":{seq}}}"#
        )
    };
    std::fs::write(&f, [p(1, 0), p(2, 1), a(3, 1), a(4, 0)].join("\n")).unwrap();
    let (code, out, err) = sim(&["trace", "--history", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("first anomaly: ordering violation: key 3 seq 0 applied at 0.000004s by c1, after seq 1 was applied at 0.000003s by c1"),
        "{out}"
    );
    for (text, want) in [
        ("{\"type\":\"produce\"\n", "h.jsonl:1: not JSON"),
        ("\n\n[1,2]\n", "h.jsonl:3: no \"type\" field"),
        (
            "{\"type\":\"apply\",\"t\":-1}\n",
            "h.jsonl:1: bad \"apply\" event",
        ),
        (
            "{\"type\":\"warp\",\"t\":1}\n",
            "h.jsonl:1: bad \"warp\" event",
        ),
        (
            r#"{"type":"source_read","t":1,"key":4294967295,"consumer":0,"seq":null}"#,
            "h.jsonl:1: key 4294967295",
        ),
        (
            &format!("{}\n{}", p(1, 0), r#"{"type":"header","keys":1}"#),
            "h.jsonl:2: the header must come first",
        ),
    ] {
        std::fs::write(&f, text).unwrap();
        let (code, _, err) = sim(&["trace", "--history", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(want), "{text}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A clock going backwards is told with a warning, never a panic.
    std::fs::write(&f, [p(5, 0), p(6, 1), a(7, 1), a(1, 0)].join("\n")).unwrap();
    let (code, out, err) = trace_to(&d, &["--history", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("warning: the history breaks the checkers' rules: malformed history: time went backwards"), "{out}");
    assert!(d.join("timeline.html").exists());
    // A header asking for more keys than a history may use.
    std::fs::write(&f, r#"{"type":"header","scenario":"x","keys":50000000,"kind":"state","brokers":[],"producers":[],"consumers":[]}"#).unwrap();
    let (code, _, err) = sim(&["trace", "--history", f.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("h.jsonl:1: keys: a history is judged with at most 1000000 keys"),
        "{err}"
    );
    // An empty history (or a header alone) is no run: refused as `sim judge` refuses it (exit
    // 2); it read "no anomaly in this run" (exit 1), as a clean run would.
    for text in [
        "",
        "\n\n",
        r#"{"type":"header","scenario":"x","keys":1,"kind":"state","brokers":[],"producers":[],"consumers":[]}"#,
    ] {
        std::fs::write(&f, text).unwrap();
        let (code, _, err) = sim(&["trace", "--history", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{text:?}: {err}");
        assert!(err.contains("h.jsonl: no events"), "{text:?}: {err}");
    }
    // A history in `sim judge`'s forms (CSV, a log's JSON lines) is pointed there.
    for text in [
        "time,event,key,seq\n1,produce,k,0\n",
        "{\"time\":1,\"event\":\"produce\",\"key\":\"k\",\"seq\":0}\n",
    ] {
        std::fs::write(&f, text).unwrap();
        let (code, _, err) = sim(&["trace", "--history", f.to_str().unwrap()]);
        assert_eq!(code, 2, "{text:?}: {err}");
        assert!(
            err.contains("h.jsonl:1: ") && err.contains("is read by `sim judge FILE`"),
            "{text:?}: {err}"
        );
    }
    // A directory is refused, not read.
    let (code, _, err) = sim(&["trace", "--history", d.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn scenario_text_is_html_escaped_and_names_are_used() {
    common::at_root();
    let d = dir("hostile");
    let f = d.join("hostile.toml");
    let text = common::base(
        "\"competing\"",
        2,
        "names = [\"<img onerror=x>\", \"b&\\\"q\"]\n[producers]\nnames = [\"</title><script>alert(1)</script>\"]\n",
    )
    .replace(
        "seed = 7",
        "seed = 7\nname = \"<script>alert('n')</script>\"\ndescription = \"</i><script>alert(2)</script>\"",
    );
    std::fs::write(&f, text).unwrap();
    let (code, out, err) = trace_to(&d, &[f.to_str().unwrap(), "--strategy", "competing"]);
    assert_eq!(code, 0, "competing reorders with two consumers: {out}{err}");
    assert!(
        out.contains("produced by </title><script>alert(1)</script>"),
        "{out}"
    );
    assert!(out.contains("applied by <img onerror=x>") || out.contains("applied by b&\"q"));
    let html = std::fs::read_to_string(d.join("timeline.html")).unwrap();
    assert_eq!(
        html.matches("<script>").count(),
        1,
        "only the page's own script"
    );
    assert!(!html.contains("<img"));
    assert!(html.contains("&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;/i&gt;&lt;script&gt;alert(2)&lt;/script&gt;"));
    assert!(html.contains("b&amp;&quot;q") || html.contains("&lt;img onerror=x&gt;"));
}

#[test]
fn names_must_match_the_count_and_be_distinct() {
    common::at_root();
    let load = |extra: &str| {
        ordsim::load_text("bad.toml", &common::base("\"competing\"", 2, extra))
            .err()
            .map(|e| e.to_string())
    };
    let e = load("names = [\"x\"]").expect("one name for two consumers");
    assert!(
        e.contains(
            "bad.toml:14:9: field `consumers.names`: must list one name per consumer (2), got 1"
        ),
        "{e}"
    );
    let e = load("names = [\"x\", \"x\"]").expect("a name used twice");
    assert!(
        e.contains("bad.toml:14:15") && e.contains("used twice"),
        "{e}"
    );
    let e = load("[producers]\nnames = [\"\"]").expect("an empty name");
    assert!(
        e.contains("producers.names[0]") && e.contains("must not be empty"),
        "{e}"
    );
    assert!(load("names = [\"x\", \"y\"]").is_none());
}

#[test]
fn annotations_leave_the_history_and_its_hash_unchanged() {
    common::at_root();
    let sc = ordsim::load(std::path::Path::new("scenarios/failover.toml")).unwrap();
    let mut fp = sim::history::Fingerprint::new(false, None);
    common::run_with(&sc, "single", 42, |e| {
        sim::history::Observer::event(&mut fp, e)
    });
    let d = dir("hash");
    let t = d.join("t.jsonl");
    let (code, _, err) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--strategy",
        "single",
        "--trace",
        t.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&t).unwrap();
    let mut hash = sim::hash::FNV1A_OFFSET;
    let mut events = 0;
    for l in text.lines() {
        if l.starts_with(r#"{"type":"header""#) || l.starts_with(r#"{"type":"anomaly""#) {
            continue;
        }
        hash = sim::hash::fnv1a_update(hash, l.as_bytes());
        events += 1;
    }
    assert_eq!((hash, events), (fp.hash, fp.events));
    let (code, out, _) = sim(&[
        "run",
        "scenarios/failover.toml",
        "--strategy",
        "single",
        "--check-determinism",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("history hash {:016x}", fp.hash)),
        "{out}"
    );
}

/// The anomaly lines of a trace, by kind, against the summary's figures; returns the trace.
fn assert_lines_agree(file: &str, strategy: &str) -> String {
    let d = dir(&format!("agree-{strategy}"));
    let t = d.join("t.jsonl");
    let (code, out, err) = sim(&[
        "run",
        file,
        "--strategy",
        strategy,
        "--json",
        "--trace",
        t.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = &summary["strategies"][0];
    let text = std::fs::read_to_string(&t).unwrap();
    let count = |kind: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!(r#"{{"type":"anomaly","kind":"{kind}""#)))
            .count() as u64
    };
    for (kind, field) in [
        ("violation", "ordering_violations"),
        ("duplicate", "duplicates"),
        ("stale_write", "stale_writes"),
        ("lost", "lost"),
        ("dropped", "innocent_dropped"),
        ("final_mismatch", "final_state_mismatches"),
    ] {
        assert_eq!(
            Some(count(kind)),
            m[field].as_u64(),
            "{file} {strategy}: {kind} lines vs {field}"
        );
    }
    text
}

#[test]
fn anomaly_lines_agree_with_the_summary() {
    common::at_root();
    assert_lines_agree("scenarios/failover.toml", "single");
    assert_lines_agree("scenarios/clustered-uoo-buffer.toml", "unit_of_order");
    assert_lines_agree("scenarios/commands.toml", "db_optimistic");
    // A non-persistent broker that crashes loses what it holds: `lost` lines name the discard.
    let d = dir("lossy");
    let f = d.join("lossy.toml");
    let text = common::base(
        "\"competing\"",
        1,
        "[[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"5s\"\nfor = \"1s\"\n",
    )
    .replace("name = \"a\"", "name = \"a\"\npersistent = false")
    .replace("mean = \"5ms\"", "mean = \"12ms\"");
    std::fs::write(&f, text).unwrap();
    let lost = assert_lines_agree(f.to_str().unwrap(), "competing");
    let line = lost
        .lines()
        .find(|l| l.starts_with(r#"{"type":"anomaly","kind":"lost""#))
        .expect("a lost message");
    assert!(
        line.contains(r#""conflicts_with":{"type":"discard""#),
        "{line}"
    );
}

#[test]
fn anomaly_aims_at_a_kind_and_shows_the_fault_behind_it() {
    common::at_root();
    let d = dir("aim");
    let (code, out, err) = trace_to(
        &d,
        &[
            "scenarios/zombie.toml",
            "--strategy",
            "single",
            "--anomaly",
            "stale_writes",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "first anomaly: stale write: key 13 got the state of seq 17 at 80.005489s by c0"
        ),
        "{out}"
    );
    // The pause that made c0 a zombie is in the story, at its time, naming the seq it held.
    assert!(
        out.contains("faults that touched key 13's messages: 1 of 1 in the plan"),
        "{out}"
    );
    assert!(
        out.contains(
            " #      20.000000  fault        consumer_pause consumer c0 for 1m (touches seq 17)"
        ),
        "{out}"
    );
    assert!(
        out.contains(" #      80.000000  fault_end    consumer_pause ends"),
        "{out}"
    );
    let html = std::fs::read_to_string(d.join("timeline.html")).unwrap();
    assert!(
        html.contains(r#"<g class="ev fault""#),
        "the fault is drawn"
    );
    assert!(html.contains("consumer_pause consumer c0 for 1m (touches seq 17)"));
    // The annotation's name chooses the same.
    let text = |kind: &str| {
        sim(&[
            "trace",
            "scenarios/zombie.toml",
            "--strategy",
            "single",
            "--anomaly",
            kind,
        ])
    };
    let (code, figure, _) = text("stale_writes");
    assert_eq!(code, 0);
    assert_eq!(figure, text("stale_write").1);
    // A kind the run does not have exits 1 and says which.
    let (code, _, err) = sim(&[
        "trace",
        "scenarios/zombie.toml",
        "--strategy",
        "single",
        "--anomaly",
        "lost",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("no lost in this run"), "{err}");
}

/// `sim trace scenarios/failover.toml --strategy single` with `extra`.
fn single(extra: &[&str]) -> (i32, String, String) {
    let mut a = vec!["trace", "scenarios/failover.toml", "--strategy", "single"];
    a.extend_from_slice(extra);
    sim(&a)
}

#[test]
fn a_misspelt_anomaly_kind_gets_a_suggestion() {
    common::at_root();
    for (typo, want) in [
        ("stale_writs", "stale_writes"),
        ("ordering_violation", "ordering_violations"),
        ("duplicate_", "duplicates"),
        ("final_state_mismatch", "final_state_mismatches"),
    ] {
        let (code, _, err) = single(&["--anomaly", typo]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!("did you mean `{want}`?")),
            "{typo}: {err}"
        );
        assert!(err.contains("ordering_violations, stale_writes"), "{err}");
    }
}

#[test]
fn keys_lists_every_affected_key_with_its_counts() {
    common::at_root();
    let (code, out, err) = single(&["--keys"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("18 key(s) with anomalies, most first:"),
        "{out}"
    );
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("key "))
        .expect("a header row");
    assert!(
        header.contains("ordering_violations  stale_writes  duplicates"),
        "{header}"
    );
    assert!(
        !header.contains("lost"),
        "only the kinds the run has: {header}"
    );
    // Key 90 has the most (a violation, a stale write, a duplicate); the columns add up to the
    // run's figures.
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("key "))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 18);
    assert_eq!(rows[0][..4], ["90", "1", "1", "1"]);
    let col = |i: usize| {
        rows.iter()
            .map(|r| r[i].parse::<u64>().unwrap())
            .sum::<u64>()
    };
    assert_eq!((col(1), col(2), col(3)), (18, 18, 1));
    // Narrowed to a kind and a window.
    let (code, out, _) = single(&["--keys", "--anomaly", "duplicates"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1 key(s) with duplicates, most first:"),
        "{out}"
    );
    let (code, out, err) = single(&["--keys", "--to", "1m"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no key has anomalies up to 1m"), "{out}");
    assert!(err.contains("no anomaly up to 1m in this run"), "{err}");
}

#[test]
fn from_and_to_choose_the_window() {
    common::at_root();
    // The run's anomalies are all after 75s: from 75.1s the first is another key's.
    let (code, out, err) = single(&["--from", "75.1s"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("aimed at: anomalies from 1m 15s 100ms"),
        "{out}"
    );
    let first = out
        .lines()
        .find(|l| l.starts_with("first anomaly"))
        .unwrap();
    assert!(!first.contains("key 90 "), "{first}");
    // No event of the story before the window.
    let times: Vec<f64> = out
        .lines()
        .filter_map(|l| l.get(3..17).and_then(|t| t.trim().parse().ok()))
        .collect();
    assert!(
        !times.is_empty() && times.iter().all(|&t| t >= 75.1),
        "{out}"
    );
    assert!(out.contains("earlier event(s) left out"), "{out}");
    for (args, want) in [
        (&["--from", "2m", "--to", "1m"][..], "is after --to"),
        (&["--from", "soon"][..], "--from: invalid duration"),
    ] {
        let (code, _, err) = single(args);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn reassigns_are_told_only_for_the_traced_key() {
    common::at_root();
    let (code, out, err) = sim(&[
        "trace",
        "scenarios/artemis-groups.toml",
        "--strategy",
        "artemis_groups",
    ]);
    assert_eq!(code, 0, "{err}");
    let told: Vec<&str> = out
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("reassign"))
        .collect();
    // The run has about 200; the story tells the few that moved key 48, each naming it.
    assert!(!told.is_empty() && told.len() < 20, "{}", told.join("\n"));
    for l in &told {
        assert!(l.contains(" 48") && l.contains("owner is now"), "{l}");
    }
    assert!(
        out.contains("reassign event(s) of other keys left out"),
        "{out}"
    );
}
