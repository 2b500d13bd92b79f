//! `sim sweep` and `sim merge`: the outputs do not depend on --jobs, shards merge into the bytes of
//! one run, an interrupted sweep resumes to the same bytes, and bad requests are refused.

use crate::common;

use ordsim::sweep::{merge, sweep, SweepRequest, JOURNAL, MANIFEST, RUNS};
use ordsim::CliError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A small scenario with a consumer crash, so strategies differ and runs take milliseconds.
fn scenario_file(dir: &Path) -> PathBuf {
    let text = common::base(
        r#""competing", "single", "db_optimistic""#,
        3,
        r#"
[[fault]]
kind = "consumer_crash"
consumer = 0
at = "5s"
for = "2s"
"#,
    );
    let path = dir.join("small.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn request(file: &Path, out: &Path) -> SweepRequest {
    SweepRequest {
        file: file.to_path_buf(),
        seeds: "1..4".into(),
        sets: vec![
            "consumers.count=1,2,4".into(),
            "consumers.prefetch=1,5".into(),
        ],
        strategies: vec![],
        jobs: 1,
        out: out.to_path_buf(),
        shard: None,
        resume: false,
        max_events: None,
        progress: false,
    }
}

/// Every file of a directory, by name.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn assert_same_files(a: &Path, b: &Path) {
    let (fa, fb) = (files(a), files(b));
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        fb.keys().collect::<Vec<_>>(),
        "file lists differ"
    );
    for (name, bytes) in &fa {
        assert!(bytes == &fb[name], "{name} differs between {a:?} and {b:?}");
    }
}

#[test]
fn a_sweep_writes_runs_aggregate_charts_and_report() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path());
    let out = tmp.path().join("out");
    let o = sweep(&request(&file, &out)).unwrap();
    // 3 x 2 points x 4 seeds x 3 strategies.
    assert_eq!((o.runs, o.executed), (72, 72));
    let f = files(&out);
    for name in [
        "runs.csv",
        "aggregate.csv",
        "sweep.json",
        "report.md",
        "sweep-1.svg",
        "sweep-1.png",
        "sweep-2.svg",
        "sweep-2.png",
    ] {
        assert!(f.contains_key(name), "{name} missing: {:?}", f.keys());
    }
    assert!(
        !f.contains_key(JOURNAL),
        "the journal is removed once complete"
    );
    let runs = String::from_utf8(f["runs.csv"].clone()).unwrap();
    assert_eq!(runs.lines().count(), 73);
    assert!(runs.starts_with("run,consumers.count,consumers.prefetch,seed,strategy,status,"));
    // Row 0: the first value of each parameter, the first seed, the first strategy.
    assert!(runs
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("0,1,1,1,competing,ok,"));
    // Aggregate: one row per point, strategy and numeric metric; `produced` is 2000 in every run.
    let agg = String::from_utf8(f["aggregate.csv"].clone()).unwrap();
    assert!(agg.starts_with(
        "consumers.count,consumers.prefetch,strategy,metric,runs,mean,min,max,ci95_low,ci95_high\n"
    ));
    assert!(agg.contains("\n1,1,competing,produced,4,2000,2000,2000,2000,2000\n"));
    // A single consumer cannot reorder: its violations interval is exactly zero.
    assert!(agg.contains("\n1,1,competing,ordering_violations,4,0,0,0,0,0\n"));
    let png = &f["sweep-1.png"];
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // Issue 41: p50 beside p99, and a count axis (1, 2, 4 consumers) with whole ticks only.
    let svg = String::from_utf8(f["sweep-1.svg"].clone()).unwrap();
    assert!(svg.contains(">\np50 latency\n<") && svg.contains(">\np99 latency\n<"));
    // The x ticks are the centred labels (the y ticks are right-aligned).
    let x_ticks: Vec<&str> = svg
        .split("text-anchor=\"middle\"")
        .skip(1)
        .filter_map(|t| t.split('\n').nth(1))
        .filter(|t| t.parse::<f64>().is_ok())
        .collect();
    assert!(x_ticks.contains(&"4"), "{x_ticks:?}");
    assert!(
        x_ticks.iter().all(|t| !t.contains('.')),
        "a tick at a fraction of a consumer: {x_ticks:?}"
    );
    let report = String::from_utf8(f["report.md"].clone()).unwrap();
    assert!(report.contains("![sweep-1](sweep-1.svg)"));
    assert!(report.contains("| consumers.count | consumers.prefetch | strategy |"));
    // The strategies' effective parameters (before --set) in sweep.json and report.md.
    assert!(
        report
            .contains("- db_optimistic: `compare=timestamp` (default), `read_at=begin` (default)"),
        "{report}"
    );
    let manifest: serde_json::Value = serde_json::from_slice(&f["sweep.json"]).unwrap();
    let bp = &manifest["base_params"];
    assert_eq!(bp[0]["strategy"], "competing");
    assert_eq!(bp[0]["params"], serde_json::json!({}));
    assert_eq!(bp[2]["params"]["compare"]["value"], "timestamp");
}

#[test]
fn output_does_not_depend_on_jobs() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path());
    let one = tmp.path().join("one");
    let two = tmp.path().join("two");
    sweep(&request(&file, &one)).unwrap();
    sweep(&SweepRequest {
        jobs: 3,
        ..request(&file, &two)
    })
    .unwrap();
    assert_same_files(&one, &two);
}

#[test]
fn shards_merge_into_the_bytes_of_one_sweep() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path());
    let whole = tmp.path().join("whole");
    sweep(&request(&file, &whole)).unwrap();
    let mut dirs = Vec::new();
    for i in 1..=3 {
        let d = tmp.path().join(format!("shard{i}"));
        let o = sweep(&SweepRequest {
            shard: Some(format!("{i}/3")),
            jobs: 2,
            ..request(&file, &d)
        })
        .unwrap();
        assert_eq!(o.runs, 24);
        dirs.push(d);
    }
    // Order of the shards on the command line does not matter.
    dirs.reverse();
    let merged = tmp.path().join("merged");
    merge(&dirs, &merged).unwrap();
    assert_same_files(&whole, &merged);

    // A missing shard, or one given twice, is refused.
    let e = merge(&dirs[..2], &tmp.path().join("m2")).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    let mut twice = dirs.clone();
    twice.push(dirs[1].clone());
    let e = merge(&twice, &tmp.path().join("m3")).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
}

#[test]
fn an_interrupted_sweep_resumes_to_the_same_bytes() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path());
    let whole = tmp.path().join("whole");
    sweep(&request(&file, &whole)).unwrap();

    // Fake an interruption: the journal holds some runs in completion order and a torn last line.
    let part = tmp.path().join("part");
    std::fs::create_dir_all(&part).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(whole.join(MANIFEST)).unwrap()).unwrap();
    let runs = std::fs::read_to_string(whole.join(RUNS)).unwrap();
    // The journal's rows carry a checksum cell, over the cells as read (a verdict such as
    // "FAIL: 3 ordering violations, 2 stale writes" is quoted: it has commas).
    let with_sum = |l: &str| {
        let record = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(l.as_bytes())
            .records()
            .next()
            .unwrap()
            .unwrap();
        let cells: Vec<String> = record.iter().map(String::from).collect();
        format!("{l},{}", ordsim::sweep::row_checksum(&cells))
    };
    let runs: Vec<String> = runs.lines().map(String::from).collect();
    let lines: Vec<String> = runs[1..].iter().map(|l| with_sum(l)).collect();
    let header = format!("{},{}", runs[0], ordsim::sweep::CHECKSUM);
    let kept: Vec<String> = lines.iter().filter(|l| l.len() % 3 != 0).cloned().collect();
    let mut journal = format!(
        "#manifest {}\n{header}\n",
        serde_json::to_string(&manifest).unwrap()
    );
    for l in kept.iter().rev() {
        journal.push_str(l);
        journal.push('\n');
    }
    let torn = lines.iter().find(|l| l.len() % 3 == 0).unwrap();
    journal.push_str(&torn[..torn.len() / 2]);
    std::fs::write(part.join(JOURNAL), &journal).unwrap();

    // Without --resume the saved runs are not thrown away.
    let e = sweep(&request(&file, &part)).unwrap_err();
    assert!(matches!(e, CliError::Usage(_)), "{e}");
    assert!(e.to_string().contains("--resume"), "{e}");
    assert_eq!(
        std::fs::read_to_string(part.join(JOURNAL)).unwrap(),
        journal
    );

    let o = sweep(&SweepRequest {
        resume: true,
        jobs: 2,
        ..request(&file, &part)
    })
    .unwrap();
    assert_eq!(o.executed as usize, lines.len() - kept.len());
    assert_same_files(&whole, &part);

    // A journal of another sweep is not resumed into this one.
    std::fs::write(part.join(JOURNAL), &journal).unwrap();
    let e = sweep(&SweepRequest {
        resume: true,
        seeds: "1..5".into(),
        ..request(&file, &part)
    })
    .unwrap_err();
    assert!(e.to_string().contains("not as this sweep"), "{e}");
}

#[test]
fn bad_requests_are_refused_before_anything_runs() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path());
    let out = tmp.path().join("out");
    let cases: [(&[&str], &str, &str); 8] = [
        (&["consumers.count"], "1..2", "no '='"),
        // A strategy the sweep does not run: its parameter changes nothing.
        (
            &["strategy.kafka.partitions=1,2"],
            "1..2",
            "kafka is not among the strategies swept (competing, single, db_optimistic)",
        ),
        // An index into an array the file does not have.
        (
            &["lease.0.duration=1s"],
            "1..2",
            "the file has no lease entries: index 0 does not exist",
        ),
        (&["consumers.count=1,,2"], "1..2", "empty value"),
        (&["consumers.count=0"], "1..2", "consumers.count"),
        (&["consumers.cuont=2"], "1..2", "cuont"),
        (
            &["broker.3.persistent=true"],
            "1..2",
            "index 3 does not exist",
        ),
        (&["consumers.count=1"], "5..2", "--seeds"),
    ];
    for (sets, seeds, needle) in cases {
        let e = sweep(&SweepRequest {
            sets: sets.iter().map(|s| s.to_string()).collect(),
            seeds: seeds.into(),
            ..request(&file, &out)
        })
        .unwrap_err();
        assert_eq!(e.exit_code(), 2, "{sets:?}: {e}");
        assert!(e.to_string().contains(needle), "{sets:?}: {e}");
        assert!(!out.join(RUNS).exists());
    }
    // Grids too large to hold are refused up front.
    let many: Vec<String> = (0..8)
        .map(|i| {
            format!(
                "workload.keys={}",
                (1..=20)
                    .map(|v| (v + i).to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .enumerate()
        .map(|(i, s)| {
            if i == 0 {
                s
            } else {
                s.replace("workload.keys", &format!("workload.x{i}"))
            }
        })
        .collect();
    let e = sweep(&SweepRequest {
        sets: many,
        ..request(&file, &out)
    })
    .unwrap_err();
    assert!(e.to_string().contains("grid points"), "{e}");
    for shard in ["0/3", "4/3", "1/0", "a/b", "2"] {
        let e = sweep(&SweepRequest {
            shard: Some(shard.into()),
            ..request(&file, &out)
        })
        .unwrap_err();
        assert!(e.to_string().contains("--shard"), "{shard}: {e}");
    }
}

#[test]
fn ctrl_c_keeps_finished_runs_and_resume_completes_them() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path());
    let out = tmp.path().join("out");
    let sim = env!("CARGO_BIN_EXE_sim");
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "sweep",
            file.to_str().unwrap(),
            "--seeds",
            "1..200",
            "--set",
            "consumers.count=1,2,4",
            "--jobs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let child = std::process::Command::new(sim)
        .args(args(&[]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until some runs are journaled, then interrupt.
    let journal = out.join(JOURNAL);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let n = std::fs::read_to_string(&journal)
            .map(|s| s.lines().count())
            .unwrap_or(0);
        if n > 12 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // 600 runs take seconds; the signal comes after the first dozen: the sweep must not finish.
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");
    assert!(!out.join(RUNS).exists(), "no partial runs.csv");
    let resumed = std::process::Command::new(sim)
        .args(args(&["--resume"]))
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(!stdout.contains(", 0 resumed"), "{stdout}");
    let whole = tmp.path().join("whole");
    let w = std::process::Command::new(sim)
        .args(args(&[]).iter().map(|a| {
            if a == out.to_str().unwrap() {
                whole.to_str().unwrap().to_string()
            } else {
                a.clone()
            }
        }))
        .output()
        .unwrap();
    assert!(w.status.success());
    assert_same_files(&whole, &out);
}
