//! `sim judge`: hand-built histories give every figure of the table, figures whose rows a history
//! lacks are unknown (`?`, `null`, an empty cell), never 0, each refusal names its line, and the
//! project's own history judged gives the run's figures.

use crate::common;
use ordsim::judge::{judge_text, JudgeRequest};
use sim::Metrics;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::sim;

fn dir(name: &str) -> PathBuf {
    common::fresh_dir("judge", name)
}

fn write(d: &Path, name: &str, text: &str) -> String {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn request(name: &str) -> JudgeRequest {
    JudgeRequest {
        file: PathBuf::from(name),
        kind: None,
        guarantee: None,
    }
}

/// Every kind of row, each figure made by hand: key a is applied out of order (2 before 1) and
/// 1 again after a redelivery; b is rejected as stale; c1 dead-lettered, c2 dropped; d1 lost, d2
/// applied and never acked, d3 never settled; e applied and acked.
const ALL: &str = "time,event,key,seq,node
0,produce,a,1,p
0,produce,a,2,p
0,produce,b,1,p
0,produce,c,1,p
0,produce,c,2,p
0,produce,d,1,p
0,produce,d,2,p
0,produce,d,3,p
0,produce,e,1,p
10,deliver,a,2,c1
10,apply,a,2,c1
11,ack,a,2,c1
20,deliver,a,1,c2
20,apply,a,1,c2
21,ack,a,1,c2
30,redeliver,a,1,c1
30,apply,a,1,c1
31,ack,a,1,c1
40,reject,b,1,c1
41,ack,b,1,c1
50,dead_letter,c,1,c1
51,drop,c,2,c1
60,lost,d,1,c1
61,apply,d,2,c1
70,apply,e,1,c2
71,ack,e,1,c2
";

fn metrics(j: &ordsim::judge::Judged) -> &Metrics {
    j.summary.strategies[0].metrics.as_ref().unwrap()
}

#[test]
fn every_figure_of_a_hand_built_history() {
    let j = judge_text("all.csv", ALL, &request("all.csv")).unwrap();
    let m = metrics(&j);
    assert_eq!(
        (m.produced, m.applied, m.ordering_violations, m.stale_writes),
        (9, 4, 2, 2)
    );
    assert_eq!((m.stale_rejected, m.lost, m.duplicates), (1, 1, 1));
    assert_eq!((m.dead_lettered, m.innocent_dead_lettered), (1, 1));
    assert_eq!((m.dropped, m.innocent_dropped), (1, 1));
    assert_eq!(
        (m.pending_at_end, m.unacked_at_end, m.undelivered),
        (1, 1, 4)
    );
    assert_eq!((m.final_state_mismatches, m.redeliveries), (4, 1));
    // 4 applied over 71 ms (with undelivered messages, over the whole history).
    assert_eq!(m.throughput_per_s, 56.338);
    // d2 waited from its produce (at 0) until d1 was lost (60 ms); d3 until d2 was applied.
    assert_eq!(m.max_block_ms, 61.0);
    // The first applies took 10, 20, 61 and 70 ms; the 4 never delivered count 71 ms (the end).
    assert!((70.0..70.1).contains(&m.latency_ms.p50), "{m:?}");
    assert!((71.0..71.1).contains(&m.latency_ms.max), "{m:?}");
    assert_eq!(m.sim_time_s, 0.071);
    // Only what no row can say is unknown: poison, the drain, the coverage counters, and why a
    // history with a pending message ended.
    let unknown: Vec<&str> = j
        .unknown
        .iter()
        .map(String::as_str)
        .filter(|u| !u.starts_with("coverage_"))
        .collect();
    assert_eq!(
        unknown,
        [
            "poison_dead_lettered",
            "poison_dropped",
            "drain_start_s",
            "ended_by"
        ]
    );
    let v = &j.summary.strategies[0];
    assert_eq!(
        v.verdict.as_deref(),
        Some(
            "FAIL: 4 of 9 never delivered (1 pending at the end, 1 lost, 1 dead-lettered, \
             1 dropped), 2 ordering violations, 2 stale writes"
        )
    );
    // The table names every figure; only poison_dlq and ended_by are `?`.
    let t = j.text(Path::new("all.csv"));
    let row = t.lines().find(|l| l.starts_with("all.csv ")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().take(20).collect();
    assert_eq!(
        cells,
        [
            "all.csv", "9", "4", "2", "2", "1", "1", "1", "1", "?", "1", "1", "?", "4", "1",
            "56.3", "≥70.0", "≥71.0", "≥71.0", "61.0"
        ],
        "{t}"
    );
}

#[test]
fn a_history_with_every_message_settled_has_ended_by_settled_and_a_stale_writes_guarantee() {
    let text = "time,event,key,seq,node\n0,produce,k,0,p\n0,produce,k,1,p\n\
                5,apply,k,1,c\n6,reject,k,0,c\n7,ack,k,0,c\n7,ack,k,1,c\n";
    let mut req = request("h.csv");
    req.guarantee = Some("stale_writes".into());
    let j = judge_text("h.csv", text, &req).unwrap();
    let m = metrics(&j);
    assert_eq!((m.applied, m.stale_rejected, m.pending_at_end), (1, 1, 0));
    assert!(!j.unknown.contains(&"ended_by".to_string()));
    assert_eq!(j.summary.strategies[0].verdict.as_deref(), Some("ok"));
    // A command workload counts the rejected command as never delivered.
    req.kind = Some(sim::scenario::WorkloadKind::Command);
    let j = judge_text("h.csv", text, &req).unwrap();
    assert_eq!(metrics(&j).undelivered, 1);
}

/// A figure whose rows the file lacks is `?` (table), `null` (summary.json), empty (summary.csv);
/// a figure whose rows it has is a number, 0 included.
#[test]
fn unknown_is_shown_as_unknown_and_zero_as_zero() {
    let d = dir("unknown");
    // Applies only, in order: no violation (a true 0), everything else unknown.
    let f = write(
        &d,
        "applies.csv",
        "time,event,key,seq,node\n1,apply,k,3,c\n2,apply,k,4,c\n3,apply,j,1,c\n",
    );
    let out = d.join("out");
    let (code, text, err) = sim(&["judge", &f, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let row = text
        .lines()
        .find(|l| l.starts_with("applies.csv "))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().take(20).collect();
    assert_eq!(
        cells,
        [
            "applies.csv",
            "?",
            "3",
            "0",
            "0",
            "?",
            "?",
            "0",
            "?",
            "?",
            "?",
            "?",
            "?",
            "?",
            "?",
            "1500",
            "?",
            "?",
            "?",
            "?"
        ],
        "{text}"
    );
    assert!(
        text.contains("?: unknown: the history has no rows"),
        "{text}"
    );
    assert!(
        text.contains(
            "no rows of: produce, deliver, redeliver, reject, ack, dead_letter, drop, lost"
        ),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let st = &json["strategies"][0];
    assert_eq!(st["produced"], serde_json::Value::Null);
    assert_eq!(st["latency_ms"]["p99"], serde_json::Value::Null);
    assert_eq!(st["ordering_violations"], 0);
    assert_eq!(st["applied"], 3);
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let header = r.headers().unwrap().clone();
    let rec = r.records().next().unwrap().unwrap();
    let cell = |name: &str| &rec[header.iter().position(|h| h == name).unwrap()];
    assert_eq!(cell("produced"), "");
    assert_eq!(cell("ordering_violations"), "0");
    assert_eq!(cell("applied"), "3");
    // The keys by name, and the history in the project's form: `sim trace --history` reads it.
    assert_eq!(
        std::fs::read_to_string(out.join("keys.csv")).unwrap(),
        "index,key\n0,k\n1,j\n"
    );
    assert!(out.join("timeline.html").is_file());
    assert!(out.join("judge-manifest.json").is_file());
    let (code, _, err) = sim(&[
        "trace",
        "--history",
        out.join("history.jsonl").to_str().unwrap(),
    ]);
    // No anomaly in it: exit 1, nothing refused.
    assert_eq!(code, 1, "{err}");
}

/// With `produce` rows and nothing pending at the end, the fates of messages never applied whose
/// rows the file lacks are known to be 0 (each such message would be pending); one message left
/// pending makes them unknown again.
#[test]
fn fates_without_rows_are_zero_only_when_every_message_is_accounted_for() {
    let req = request("h.csv");
    let fates = |m: &Metrics| {
        (
            m.stale_rejected,
            m.lost,
            m.dead_lettered,
            m.dropped,
            m.lost_commands,
        )
    };
    let names = [
        "stale_rejected",
        "lost",
        "dead_lettered",
        "dropped",
        "lost_commands",
    ];
    let all =
        "time,event,key,seq,node\n0,produce,k,1,p\n0,produce,k,2,p\n5,apply,k,1,c\n6,apply,k,2,c\n";
    let j = judge_text("h.csv", all, &req).unwrap();
    for n in names {
        assert!(!j.unknown.contains(&n.to_string()), "{n}: {:?}", j.unknown);
    }
    assert_eq!(fates(metrics(&j)), (0, 0, 0, 0, 0));
    // k 3 never applied: it may have been lost, dead-lettered, dropped or rejected unrecorded.
    let one_left = format!("{all}0,produce,k,3,p\n");
    let j = judge_text("h.csv", &one_left, &req).unwrap();
    assert_eq!(metrics(&j).pending_at_end, 1);
    for n in &names[..4] {
        assert!(j.unknown.contains(&n.to_string()), "{n}: {:?}", j.unknown);
    }
    // A command workload's lost commands, alike.
    let mut cmd = request("h.csv");
    cmd.kind = Some(sim::scenario::WorkloadKind::Command);
    let lost_commands = "lost_commands".to_string();
    let j = judge_text("h.csv", all, &cmd).unwrap();
    assert!(!j.unknown.contains(&lost_commands), "{:?}", j.unknown);
    let j = judge_text("h.csv", &one_left, &cmd).unwrap();
    assert!(j.unknown.contains(&lost_commands), "{:?}", j.unknown);
    // Without produce rows nothing says every message is listed.
    let applies = "time,event,key,seq,node\n5,apply,k,1,c\n";
    let j = judge_text("h.csv", applies, &req).unwrap();
    assert!(j.unknown.contains(&"lost".to_string()), "{:?}", j.unknown);
}

/// `--strict` exits 1 on a failing verdict, after the table and the --out files; 0 on a passing
/// one, and without it a failing history exits 0.
#[test]
fn strict_fails_the_step_on_a_failing_verdict_after_writing_everything() {
    let d = dir("strict");
    let bad = write(
        &d,
        "bad.csv",
        "time,event,key,seq,node\n0,produce,k,1,p\n0,produce,k,2,p\n5,apply,k,2,c\n6,apply,k,1,c\n",
    );
    let good = write(
        &d,
        "good.csv",
        "time,event,key,seq,node\n0,produce,k,1,p\n0,produce,k,2,p\n5,apply,k,1,c\n6,apply,k,2,c\n",
    );
    let out = d.join("out");
    let (code, text, err) = sim(&["judge", &bad, "--strict", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}{err}");
    assert!(text.contains("FAIL: 1 ordering violation"), "{text}");
    assert!(
        err.contains("--strict: bad.csv: FAIL: 1 ordering violation"),
        "{err}"
    );
    assert!(
        out.join("summary.json").is_file(),
        "written before the exit"
    );
    let (code, _, err) = sim(&["judge", &bad]);
    assert_eq!(code, 0, "{err}");
    let (code, text, err) = sim(&["judge", &good, "--strict"]);
    assert_eq!(code, 0, "{text}{err}");
}

#[test]
fn csv_and_json_lines_are_judged_alike() {
    let d = dir("forms");
    let csv = write(&d, "h.csv", ALL);
    let mut lines = String::new();
    let mut r = csv::Reader::from_reader(ALL.as_bytes());
    for rec in r.records() {
        let rec = rec.unwrap();
        // Times as durations, seqs as versions (numbers), keys as strings, a log's own `type`.
        lines.push_str(&format!(
            "{{\"type\":\"order\",\"time\":\"{}ms\",\"event\":\"{}\",\"key\":\"{}\",\"version\":{},\"node\":\"{}\",\"msg\":\"x\"}}\n",
            &rec[0], &rec[1], &rec[2], &rec[3], &rec[4]
        ));
    }
    let jsonl = write(&d, "h.jsonl", &lines);
    let (c1, t1, e1) = sim(&["judge", &csv]);
    let (c2, t2, e2) = sim(&["judge", &jsonl]);
    assert_eq!((c1, c2), (0, 0), "{e1}{e2}");
    let figures = |t: &str| -> String {
        let row = t.lines().nth(3).unwrap();
        row.split_once(' ').unwrap().1.trim().to_string()
    };
    assert_eq!(figures(&t1), figures(&t2), "{t1}\n{t2}");
    assert!(t2.contains("(JSON lines: produce 9"), "{t2}");
}

/// Every refusal: exit 2, the file and line named, what is allowed.
#[test]
fn what_cannot_happen_is_refused_with_the_file_and_line() {
    let d = dir("refusals");
    let h = "time,event,key,seq,node\n";
    let cases: [(&str, String, &str); 12] = [
        (
            "backwards",
            format!("{h}5,apply,k,0,c\n6,apply,k,1,d\n4,apply,k,2,c\n"),
            ":4: time went backwards for node \"c\": 4000 µs after 5000 µs on line 2",
        ),
        (
            "never",
            format!("{h}1,produce,k,0,p\n2,apply,k,0,c\n3,ack,k,9,c\n"),
            ":4: ack of key \"k\" seq 9, which no produce row produced",
        ),
        (
            "before",
            format!("{h}1,apply,k,0,c\n2,produce,k,0,p\n"),
            ":2: apply of key \"k\" seq 0 at 1000 µs, before its produce at 2000 µs on line 3",
        ),
        (
            "twice",
            format!("{h}1,produce,k,0,p\n2,produce,k,0,p\n"),
            ":3: key \"k\" seq 0 produced again (first on line 2)",
        ),
        (
            "order",
            format!("{h}1,produce,k,1,p\n2,produce,k,0,q\n"),
            ":3: key \"k\" seq 0 produced after seq 1 (line 2): seq is the key's production order",
        ),
        (
            "event",
            format!("{h}1,produce,k,0,p\n2,commit,k,0,c\n"),
            ":3: event: \"commit\" is not an event: one of produce, deliver, redeliver, apply, reject, ack, dead_letter, drop, lost",
        ),
        (
            "time",
            format!("{h}soon,produce,k,0,p\n"),
            ":2: time: \"soon\" is not a time: write integer milliseconds",
        ),
        (
            "seq",
            format!("{h}1,produce,k,x1,p\n"),
            ":2: seq: \"x1\" is not a whole number from 0",
        ),
        (
            "column",
            "time,event,seq\n1,produce,0\n".to_string(),
            ":1: key: no such column: the header row names time, event, key, seq (or version) and node",
        ),
        (
            "missing",
            format!("{h}1,produce,,0,p\n"),
            ":2: key: missing",
        ),
        (
            "json",
            "{\"time\":1,\"event\":\"produce\",\"key\":\"k\",\"seq\":0}\n{\"time\":2,\n".to_string(),
            ":2: not a JSON object",
        ),
        ("empty", "\n\n".to_string(), ": no events"),
    ];
    for (name, text, want) in cases {
        let f = write(&d, &format!("{name}.csv"), &text);
        let (code, out, err) = sim(&["judge", &f]);
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(
            err.contains(&format!("error: {f}{want}")),
            "{name}: wanted {want:?} in {err}"
        );
        assert!(out.is_empty(), "{name}: {out}");
    }
    let f = write(&d, "ok.csv", ALL);
    let (code, _, err) = sim(&["judge", &f, "--guarantee", "order"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--guarantee \"order\": one of ordering_violations, stale_writes"),
        "{err}"
    );
    let (code, _, err) = sim(&["judge", &f, "--kind", "delta"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--kind \"delta\": one of state, command"),
        "{err}"
    );
}

/// The project's own history (`sim run --trace`) judged gives the run's table row; `sim judge
/// --out` writes the history back in the same form.
#[test]
fn the_projects_own_history_gives_the_runs_figures() {
    common::at_root();
    let d = dir("roundtrip");
    let trace = d.join("run.jsonl");
    let (code, run, err) = sim(&[
        "run",
        "scenarios/consumer-crash.toml",
        "--strategy",
        "competing",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let out = d.join("out");
    let (code, judged, err) = sim(&[
        "judge",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let row = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("competing "))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("{t}"))
    };
    assert_eq!(row(&run), row(&judged));
    assert!(!judged.contains('?'), "{judged}");
    assert!(judged.contains("(the project's JSON lines:"), "{judged}");
    // What --out wrote judges the same again.
    let (code, again, err) = sim(&["judge", out.join("history.jsonl").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(row(&run), row(&again));
    let html = std::fs::read_to_string(out.join("timeline.html")).unwrap();
    assert!(
        html.contains("VIOLATION") || html.contains("violation"),
        "{}",
        &html[..200]
    );
}

fn doc_block<'a>(doc: &'a str, after: &str, fence: &str) -> &'a str {
    let from = doc
        .find(after)
        .unwrap_or_else(|| panic!("docs/judge.md lacks {after:?}"));
    let rest = &doc[from..];
    let start = rest.find(fence).unwrap() + fence.len();
    let len = rest[start..].find("```").unwrap();
    &rest[start..start + len]
}

/// docs/judge.md names every event, and its CSV example prints what it says.
#[test]
fn the_docs_example_prints_what_the_docs_say() {
    let doc = std::fs::read_to_string(common::root().join("docs/judge.md")).unwrap();
    for (name, _) in ordsim::judge::KINDS {
        assert!(
            doc.contains(&format!("| `{name}` |")),
            "docs/judge.md lacks {name}"
        );
    }
    let d = dir("doc");
    write(
        &d,
        "example.csv",
        doc_block(&doc, "## A CSV example", "```csv\n"),
    );
    let want = doc_block(&doc, "`sim judge example.csv` prints", "```\n");
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["judge", "example.csv"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

/// The `jq` one-liner of docs/judge.md makes a history `sim judge` reads (where jq is installed).
#[test]
fn the_docs_jq_one_liner_makes_a_history() {
    if Command::new("jq").arg("--version").output().is_err() {
        eprintln!("skipped: jq is not installed");
        return;
    }
    let doc = std::fs::read_to_string(common::root().join("docs/judge.md")).unwrap();
    let d = dir("jq");
    write(
        &d,
        "app.log",
        doc_block(&doc, "per message applied:", "```\n"),
    );
    let cmd = doc_block(&doc, "becomes a history with `jq`:", "```sh\n");
    let out = Command::new("sh")
        .args(["-c", cmd])
        .current_dir(&d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = judge_text(
        "history.jsonl",
        &std::fs::read_to_string(d.join("history.jsonl")).unwrap(),
        &request("history.jsonl"),
    )
    .unwrap();
    let m = metrics(&j);
    assert_eq!((m.produced, m.applied), (1, 1));
    assert!((44.0..44.1).contains(&m.latency_ms.p50), "{m:?}");
}
