//! Hostile input, round two (issue 20), at the level of files, folders and processes: a closed or
//! full standard output, FIFOs and devices as inputs, symlink loops, interrupted and concurrent
//! output sets, damaged or edited partial results, and command-line values that disagree with the
//! file's rules. Each test names its class.

use ordsim::sweep::{merge, merge_verified, row_checksum, sweep, SweepRequest, JOURNAL, RUNS};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SIM: &str = env!("CARGO_BIN_EXE_sim");

/// A scenario that runs in milliseconds.
fn small(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            r#"
seed = 3
strategies = ["competing", "single"]
[workload]
messages = 200
rate = "100/s"
keys = 5
[[broker]]
name = "a"
[consumers]
count = 2
service = "5ms"
{extra}
"#
        ),
    )
    .unwrap();
    p
}

fn sim(args: &[&str]) -> std::process::Output {
    crate::common::at_root();
    Command::new(SIM).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---- Class 1: standard output closed or full ----

/// `sim validate F | head -1`: the reader is gone before the plan is written; no panic, no
/// message.
#[test]
fn class1_closed_stdout_ends_quietly() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    // A plan of thousands of lines: more than a pipe holds, so even if another test's child
    // briefly inherits the read end (between its fork and exec), a write meets the closed pipe.
    let f = small(
        tmp.path(),
        "s.toml",
        "[[fault]]\nkind = \"network_blip\"\nrate = \"100/s\"\nfor = \"1ms\"\n[run]\nfault_window = \"100s\"\n",
    );
    let mut child = Command::new(SIM)
        .args(["validate", f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before anything is written: the first write meets a broken pipe.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.is_empty(), "quiet: {err}");
    assert_eq!(out.status.code(), Some(141), "{err}");
}

/// `sim run F > /dev/full`: a clear error and exit 1.
#[test]
fn class1_full_stdout_is_an_error() {
    crate::common::at_root();
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // Not Linux.
    };
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    for args in [vec!["run", f.to_str().unwrap()], vec!["list"]] {
        let out = Command::new(SIM)
            .args(&args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.contains("cannot write standard output") && err.contains("No space left"),
            "{err}"
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    }
}

// ---- Class 2: reading FIFOs, devices, standard input ----

fn mkfifo(p: &Path) -> bool {
    Command::new("mkfifo")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success())
}

/// A FIFO, a device and a symlink to a device are refused before they are read (no hang, no
/// unbounded read), as scenario files, as `--resume` journals and as `sim merge` inputs.
#[test]
fn class2_fifos_and_devices_are_refused() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.toml");
    assert!(mkfifo(&fifo));
    let link = tmp.path().join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    for (p, kind) in [
        (fifo.as_path(), "FIFO"),
        (Path::new("/dev/zero"), "character device"),
        (link.as_path(), "character device"),
        (tmp.path(), "directory"),
    ] {
        let e = ordsim::load(p).unwrap_err().to_string();
        assert!(e.contains(kind) && e.contains("not a regular file"), "{e}");
        let out = sim(&["validate", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    }

    // A journal that is a FIFO.
    let f = small(tmp.path(), "s.toml", "");
    let out_dir = tmp.path().join("sweep");
    std::fs::create_dir_all(&out_dir).unwrap();
    assert!(mkfifo(&out_dir.join(JOURNAL)));
    let req = SweepRequest {
        file: f.clone(),
        seeds: "1..2".into(),
        sets: vec![],
        strategies: vec![],
        jobs: 1,
        out: out_dir.clone(),
        shard: Some("1/2".into()),
        resume: true,
        max_events: None,
        progress: false,
    };
    let e = sweep(&req).unwrap_err().to_string();
    assert!(e.contains("FIFO"), "{e}");

    // Merge inputs that are a FIFO and a device.
    let shard = tmp.path().join("shard");
    std::fs::create_dir_all(&shard).unwrap();
    assert!(mkfifo(&shard.join("sweep.json")));
    let e = merge(std::slice::from_ref(&shard), &tmp.path().join("m"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("FIFO"), "{e}");
    std::fs::remove_file(shard.join("sweep.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", shard.join("sweep.json")).unwrap();
    let e = merge(std::slice::from_ref(&shard), &tmp.path().join("m"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("character device"), "{e}");
}

/// `-` reads standard input under the same bound: a scenario validates and runs; an endless
/// stream is cut off at the limit.
#[test]
fn class2_stdin_is_read_under_the_bound() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let out = Command::new(SIM)
        .args(["run", "-"])
        .stdin(std::fs::File::open(&f).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("competing"));
    let out = Command::new(SIM)
        .args(["validate", "-"])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>") && err.contains("limit"), "{err}");
}

// ---- Class 5: folders ----

/// A symlink loop (two of them) in a folder given to `sim check`: every real file once.
#[test]
fn class5_symlink_loops_are_visited_once() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("lib");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    small(&d, "a.toml", "[expect.single]\nordering_violations = 0\n");
    std::os::unix::fs::symlink("..", d.join("sub").join("up")).unwrap();
    std::os::unix::fs::symlink(".", d.join("here")).unwrap();
    std::os::unix::fs::symlink("a.toml", d.join("same.toml")).unwrap();
    let files = ordsim::check::scenario_files(&[d.clone(), d.join("sub/up")]).unwrap();
    assert_eq!(files, vec![d.join("a.toml")], "{files:?}");
    let report = ordsim::check::check(&[d], 1).unwrap();
    assert_eq!(report.counts(), (1, 0, 0), "{}", report.text());
}

// ---- Class 7: the output set is one run's ----

fn manifest_matches(dir: &Path) -> bool {
    let Ok(m) = std::fs::read(dir.join(ordsim::RUN_MANIFEST)) else {
        return false;
    };
    let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
    ordsim::RUN_FILES.iter().all(|f| {
        let bytes = std::fs::read(dir.join(f)).unwrap();
        m["files"][f].as_str() == Some(&format!("{:016x}", sim::hash::fnv1a(&bytes)))
    })
}

/// An interrupt between two file moves leaves no manifest (the set is visibly incomplete, never
/// another run's manifest over mixed files); the user's other files stay; the next run completes
/// the set.
#[test]
fn class7_interrupted_output_set_has_no_manifest() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let out = tmp.path().join("out");
    let o = out.to_str().unwrap();
    let ok = sim(&["run", f.to_str().unwrap(), "--out", o, "--seed", "1"]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(manifest_matches(&out));
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    for point in ["run-out-before-chart.svg", "run-out-before-manifest"] {
        let cut = Command::new(SIM)
            .args(["run", f.to_str().unwrap(), "--out", o, "--seed", "2"])
            .env("ORDSIM_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(cut.status.code(), Some(99), "{}", text(&cut.stderr));
        assert!(!out.join(ordsim::RUN_MANIFEST).exists(), "{point}");
    }
    let again = sim(&["run", f.to_str().unwrap(), "--out", o, "--seed", "2"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(manifest_matches(&out));
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert!(summary.contains("\"seed\": 2"), "{summary}");
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
    // No staging folder is left behind.
    let left = crate::common::names_containing(tmp.path(), "sim-partial");
    assert!(left.is_empty(), "{left:?}");
}

/// A second writer into a folder being written is refused; an --out that cannot be written is
/// refused before the run.
#[test]
fn class7_concurrent_writer_and_unwritable_out_are_refused() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(out.join(ordsim::RUN_LOCK))
        .unwrap();
    lock.lock().unwrap();
    let r = sim(&["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("another `sim run`"), "{err}");
    assert!(!out.join("summary.csv").exists());
    lock.unlock().unwrap();

    // Under a regular file: refused with no run (a long scenario would take minutes).
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let long = small(tmp.path(), "long.toml", "");
    std::fs::write(
        &long,
        std::fs::read_to_string(&long)
            .unwrap()
            .replace("messages = 200", "messages = 20000000")
            .replace("rate = \"100/s\"", "rate = \"100000/s\""),
    )
    .unwrap();
    let r = sim(&[
        "run",
        long.to_str().unwrap(),
        "--out",
        blocker.join("out").to_str().unwrap(),
    ]);
    // Bad input, exit 2 (round five).
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    // Refused before the run: nothing of a run (its table) was printed.
    assert!(text(&r.stdout).is_empty(), "{}", text(&r.stdout));
}

// ---- Class 6: damaged or edited partial results ----

/// Two shards of a small sweep.
fn shards(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let f = small(dir, "s.toml", "");
    let dirs = crate::common::sweep_shards(&f, dir, "1..3", &["consumers.count=1,2"]);
    (f, dirs)
}

fn read_rows(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(path)
        .unwrap();
    r.records()
        .map(|x| x.unwrap().iter().map(String::from).collect())
        .collect()
}

fn write_rows(path: &Path, rows: &[Vec<String>]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    for r in rows {
        w.write_record(r).unwrap();
    }
    w.flush().unwrap();
}

/// Re-signs a row after an edit (what a careful forger does; `--verify` still catches it).
fn resign(row: &mut [String]) {
    let n = row.len();
    row[n - 1] = row_checksum(&row[..n - 1]);
}

/// An edited number, a relabelled strategy, a row copied under another run index, `NaN` and text
/// cells: each is refused with the file and line; a re-signed edit is caught by `--verify`.
#[test]
fn class6_edited_shard_rows_are_refused() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = shards(tmp.path());
    let runs = dirs[0].join(RUNS);
    let pristine = read_rows(&runs);
    let header = &pristine[0];
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let produced = col("produced");
    let strategy = col("strategy");

    type Edit = Box<dyn Fn(&mut Vec<Vec<String>>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "edited number",
            Box::new(move |r| r[1][produced] = "199".into()),
            "checksum",
        ),
        (
            "relabelled strategy",
            Box::new(move |r| {
                r[1][strategy] = if r[1][strategy] == "single" {
                    "competing".into()
                } else {
                    "single".into()
                };
                resign(&mut r[1]);
            }),
            "is strategy",
        ),
        (
            "copied under another index",
            Box::new(|r| {
                let mut copy = r[1].clone();
                copy[0] = r[2][0].clone();
                resign(&mut copy);
                r[2] = copy;
            }),
            "but the row says",
        ),
        (
            "NaN",
            Box::new(move |r| {
                r[1][produced] = "NaN".into();
                resign(&mut r[1]);
            }),
            "finite number",
        ),
        (
            "text",
            Box::new(move |r| {
                r[1][produced] = "many".into();
                resign(&mut r[1]);
            }),
            "finite number",
        ),
        (
            "infinity",
            Box::new(move |r| {
                r[1][produced] = "inf".into();
                resign(&mut r[1]);
            }),
            "finite number",
        ),
    ];
    for (what, edit, needle) in cases {
        let mut rows = pristine.clone();
        edit(&mut rows);
        write_rows(&runs, &rows);
        let e = merge(&dirs, &tmp.path().join("m")).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 2, "{what}: {msg}");
        assert!(msg.contains(needle), "{what}: {msg}");
        assert!(
            msg.contains(&format!("{}:", runs.display())),
            "{what}: {msg}"
        );
    }

    // A re-signed edit of a number passes the checksum and the run index, but not a re-run.
    let mut rows = pristine.clone();
    rows[1][produced] = "199".into();
    resign(&mut rows[1]);
    write_rows(&runs, &rows);
    assert!(merge(&dirs, &tmp.path().join("m1")).is_ok());
    let e = merge_verified(&dirs, &tmp.path().join("m2"), 1000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not reproduce"), "{e}");
    write_rows(&runs, &pristine);
    merge_verified(&dirs, &tmp.path().join("m3"), 4).unwrap();
}

/// `sweep --resume` refuses an edited journal row, naming the line.
#[test]
fn class6_edited_journal_is_refused_on_resume() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let (f, dirs) = shards(tmp.path());
    // Build a journal from the first shard's rows: manifest line, header, rows.
    let manifest = std::fs::read_to_string(dirs[0].join("sweep.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let rows = read_rows(&dirs[0].join(RUNS));
    let mut edited = rows.clone();
    let produced = rows[0].iter().position(|h| h == "produced").unwrap();
    edited[2][produced] = "7".into();
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in &edited {
        w.write_record(r).unwrap();
    }
    let body = w.into_inner().unwrap();
    let mut journal =
        format!("#manifest {}\n", serde_json::to_string(&manifest).unwrap()).into_bytes();
    journal.extend(body);
    std::fs::write(dirs[0].join(JOURNAL), &journal).unwrap();
    let e = sweep(&SweepRequest {
        file: f,
        seeds: "1..3".into(),
        sets: vec!["consumers.count=1,2".into()],
        strategies: vec![],
        jobs: 1,
        out: dirs[0].clone(),
        shard: Some("1/2".into()),
        resume: true,
        max_events: None,
        progress: false,
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains(":4:") && e.contains("checksum"), "{e}");
}

/// A chart of non-finite values finishes (an infinite axis used to loop).
#[test]
fn class6_charts_skip_non_finite_values() {
    use ordsim::charts::{sweep_chart, Line, Point, SweepPanel, XAxis};
    let x = XAxis {
        name: "x".into(),
        labels: vec!["1".into(), "2".into()],
        numeric: Some(vec![1.0, 2.0]),
    };
    let panel = SweepPanel {
        title: "t".into(),
        unit: "ms".into(),
        lines: vec![Line {
            strategy: "single".into(),
            points: vec![
                Point {
                    x: 0,
                    mean: f64::INFINITY,
                    ci95: Some((f64::NEG_INFINITY, f64::INFINITY)),
                },
                Point {
                    x: 1,
                    mean: f64::NAN,
                    ci95: None,
                },
            ],
        }],
    };
    assert!(sweep_chart("t", &x, &[panel]).is_ok());
}

// ---- Class 8: the command line agrees with the file ----

/// Duplicate `--strategy`, `--max-events 0`, `--jobs 0` and absurd `--jobs` are refused (exit 2)
/// as the same values in a file are.
#[test]
fn class8_command_line_values_are_checked_like_the_file() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let fs = f.to_str().unwrap();
    let out = tmp.path().join("o");
    let os = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", fs, "--strategy", "single", "--strategy", "single"],
            "given twice",
        ),
        (vec!["run", fs, "--max-events", "0"], "at least 1"),
        (vec!["check", fs, "--jobs", "0"], "--jobs 0"),
        (vec!["check", fs, "--jobs", "100000000"], "between 1 and"),
        (
            vec!["sweep", fs, "--seeds", "1..2", "--out", os, "--jobs", "0"],
            "--jobs 0",
        ),
        (
            vec![
                "sweep",
                fs,
                "--seeds",
                "1..2",
                "--out",
                os,
                "--max-events",
                "0",
            ],
            "at least 1",
        ),
        (
            vec!["run", fs, "--seed", "99999999999999999999999"],
            "--seed",
        ),
        // Cut off at time 0 nothing is produced (the empty table read `ok`); refused before the
        // --out folder is made.
        (
            vec!["run", fs, "--max-sim-time", "0s", "--out", os],
            "--max-sim-time 0s: must be above 0",
        ),
    ];
    for (args, needle) in cases {
        let r = sim(&args);
        let err = text(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert!(!out.exists(), "a refused command made its --out");
}

/// A command that made its `--out` folder and then failed before writing anything into it
/// (a misspelt --strategy, a --trace path that cannot be written, a trace with no anomaly)
/// leaves no empty folder holding only its lock file; a folder that existed before stays, with
/// what was in it.
#[test]
fn class7_a_failed_command_leaves_no_folder_it_made() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let fs = f.to_str().unwrap();
    let out = tmp.path().join("fresh");
    let os = out.to_str().unwrap();
    let bad_trace = tmp.path().join("no/such/dir/t.jsonl");
    for (args, code) in [
        (vec!["run", fs, "--strategy", "singel", "--out", os], 2),
        (
            vec![
                "run",
                fs,
                "--strategy",
                "single",
                "--trace",
                bad_trace.to_str().unwrap(),
                "--out",
                os,
            ],
            // An unwritable --trace is bad input, found before the run (round five).
            2,
        ),
    ] {
        let r = sim(&args);
        assert_eq!(r.status.code(), Some(code), "{args:?}: {}", text(&r.stderr));
        assert!(!out.exists(), "{args:?} left {}", out.display());
    }
    // A folder of the user's is left as it was.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine.txt"), "x").unwrap();
    let r = sim(&["run", fs, "--strategy", "singel", "--out", os]);
    assert_eq!(r.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(out.join("mine.txt")).unwrap(), "x");
    // A run that writes its set keeps the folder it made.
    let r = sim(&["run", fs, "--out", os]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert!(out.join("summary.csv").exists());
}

/// An `--out` that names an existing file, or a folder under one, says so, for every command
/// that writes a folder (the system's words were "File exists (os error 17)" and "Not a
/// directory"), before any run, with exit code 2 (bad input).
#[test]
fn class7_an_out_that_is_a_file_says_so() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let fs = f.to_str().unwrap();
    let file = tmp.path().join("notes.txt");
    std::fs::write(&file, "mine").unwrap();
    let under = file.join("run");
    for (out, says) in [
        (&file, "it exists and is not a directory".to_string()),
        (
            &under,
            format!("{} exists and is not a directory", file.display()),
        ),
    ] {
        let os = out.to_str().unwrap();
        for args in [
            vec!["run", fs, "--out", os],
            vec!["sweep", fs, "--seeds", "1..2", "--out", os],
            vec!["trace", fs, "--strategy", "competing", "--out", os],
            vec![
                "explore",
                fs,
                "--strategy",
                "competing",
                "--runs",
                "2",
                "--out",
                os,
            ],
            vec!["report", fs, "--out", os],
        ] {
            let r = sim(&args);
            let err = text(&r.stderr);
            // Bad input, exit 2 (round five; it was 1, as a write failing after the work).
            assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
            assert!(err.contains(&says), "{args:?}: {err}");
            assert!(err.contains("--out names a folder"), "{args:?}: {err}");
            assert!(text(&r.stdout).is_empty(), "{args:?}: {}", text(&r.stdout));
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

/// Numbers too large name their field; bare-CR line endings get a message; control characters in
/// a scenario's name are escaped in the terminal and in report.md.
#[test]
fn class8_file_numbers_line_endings_and_names() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let base = std::fs::read_to_string(&f).unwrap();

    let big = base.replace("messages = 200", "messages = 99999999999999999999999");
    let e = ordsim::load_text("big.toml", &big).unwrap_err().to_string();
    assert!(
        e.contains("workload.messages") || e.contains("messages"),
        "{e}"
    );
    assert!(e.starts_with("big.toml:"), "{e}");

    let cr = base.replace('\n', "\r");
    let e = ordsim::load_text("cr.toml", &cr).unwrap_err().to_string();
    assert!(e.contains("carriage return"), "{e}");

    let named = format!("name = \"evil\\u001b[2J\\u0007\"\n{base}");
    std::fs::write(&f, named).unwrap();
    let out = tmp.path().join("o");
    let r = sim(&["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let stdout = text(&r.stdout);
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert!(stdout.contains("evil\\u{1b}[2J\\u{7}"), "{stdout}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(!md.contains('\u{1b}'), "{md:?}");
}

// ---- Class 2 (journals) with a deterministic failure point instead of a timed signal ----

/// A sweep stopped right after its fifth journal row, or in the middle of writing its fifth (a
/// torn line), resumes to the bytes of an uninterrupted sweep.
#[test]
fn class2_journal_cut_at_a_failure_point_resumes_to_the_same_bytes() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    let f = small(tmp.path(), "s.toml", "");
    let args = |out: &Path, extra: &[&str]| {
        let mut a: Vec<String> = [
            "sweep",
            f.to_str().unwrap(),
            "--seeds",
            "1..4",
            "--set",
            "consumers.count=1,2",
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
    let whole = tmp.path().join("whole");
    let w = Command::new(SIM).args(args(&whole, &[])).output().unwrap();
    assert!(w.status.success(), "{}", text(&w.stderr));
    for point in ["sweep-journal:5", "sweep-journal-torn:5"] {
        let out = tmp.path().join(point.replace(':', "-"));
        let cut = Command::new(SIM)
            .args(args(&out, &[]))
            .env("ORDSIM_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(cut.status.code(), Some(99), "{}", text(&cut.stderr));
        let journal = std::fs::read_to_string(out.join(JOURNAL)).unwrap();
        // Manifest, header, then five rows (the fifth torn in the second case).
        assert_eq!(journal.lines().count(), 7, "{journal}");
        assert_eq!(journal.ends_with('\n'), point == "sweep-journal:5");
        assert!(!out.join(RUNS).exists());
        let r = Command::new(SIM)
            .args(args(&out, &["--resume"]))
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", text(&r.stderr));
        let resumed = if point == "sweep-journal:5" { 5 } else { 4 };
        assert!(
            text(&r.stdout).contains(&format!("{resumed} resumed")),
            "{}",
            text(&r.stdout)
        );
        for name in [
            "runs.csv",
            "aggregate.csv",
            "report.md",
            "sweep.json",
            "sweep.svg",
        ] {
            assert_eq!(
                std::fs::read(whole.join(name)).unwrap(),
                std::fs::read(out.join(name)).unwrap(),
                "{point}: {name}"
            );
        }
    }
}
