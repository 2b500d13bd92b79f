//! Hostile input, round six: every command checks every output before any work
//! (`ordsim::check_outputs`, one function for all of them).
//!
//! Class 1, an output file that is a directory: whatever a command writes, at its start (a
//! sweep's journal, an output set's lock) or at its end (`runs.csv`, a chart, `report.md`, a
//! manifest, explore's shrunk scenario), a directory at its path is refused before the work with
//! exit 2 and "cannot write PATH: it is a directory".
//!
//! Class 2, a file in the way inside `--out` (`sim report`'s folder of one scenario, or of its
//! sweep, that is a file) or an `--out` under a file with work before the output (`sim merge
//! --verify`): refused before the first run.
//!
//! Class 3, an `--out` that does not take new files (read-only, or on a read-only file system), or
//! a new one inside it, and a `--trace` or `--junit` file there: refused before the work with exit
//! 2 and "not writable".
//!
//! Class 4, a refusal loses nothing: the files a user already had in `--out` (an earlier sweep's
//! outputs, an interrupted sweep's journal, an earlier report) are as they were, byte for byte.
//!
//! Class 5 (the `live` cargo feature): `sim live` and `sim calibrate` refuse a history path that
//! is a directory, or an `--out` that takes no file, before the first broker.
//!
//! Every case checks the exit code, the one line of the message, that no work was done (a file
//! system fact: `--out` holds what it held, no journal, no lock), and that the user's files are
//! unchanged.

use crate::common::{
    at_root, fresh_dir, sim, small_history, small_scenario as scenario, sweep_shards,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file and folder under `dir` (recursively, by path relative to it) with a file's bytes
/// (`None` for a folder): what a refused command must leave as it was.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if p.is_dir() {
                into.insert(rel, None);
                walk(root, &p, into);
            } else {
                into.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut m = BTreeMap::new();
    walk(dir, dir, &mut m);
    m
}

/// Runs `sim ARGS`, expects the refusal `error: cannot write PATH: REASON...` (exit 2, one line,
/// nothing on standard output) and `out` as it was before.
fn refused(args: &[&str], out: &Path, path: &Path, reason: &str) {
    let before = snapshot(out);
    let (code, stdout, err) = sim(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    let wanted = format!("error: cannot write {}: {reason}", path.display());
    assert!(
        err.starts_with(&wanted),
        "{args:?}:\n{err}\nwanted: {wanted}"
    );
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(stdout.is_empty(), "{args:?}: nothing ran: {stdout}");
    assert_eq!(snapshot(out), before, "{args:?}: --out as it was");
}

/// `args --out DIR/out-{i}`, where that folder holds a user's `notes.txt` and a folder (with a
/// file of the user's in it) at `blocked`, where the command writes a file: refused for `reason`.
fn refused_with_a_folder_in_the_way(
    dir: &Path,
    i: usize,
    args: &[&str],
    blocked: &str,
    reason: &str,
) {
    let out = dir.join(format!("out-{i}"));
    std::fs::create_dir_all(out.join(blocked).join("mine")).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let o = out.to_str().unwrap();
    let args: Vec<&str> = args.iter().copied().chain(["--out", o]).collect();
    refused(&args, &out, &out.join(blocked), reason);
}

const IS_A_DIRECTORY: &str =
    "it is a directory, where --out writes a file: move it away, or choose another folder";

/// What the commands of a class read, under one folder: a scenario file (`text`), a recorded
/// history, the two shards of a sweep of it and a scenario library.
struct Inputs {
    scenario: PathBuf,
    history: PathBuf,
    library: PathBuf,
    shards: Vec<PathBuf>,
}

impl Inputs {
    fn new(dir: &Path, text: &str) -> Inputs {
        let scenario = dir.join("s.toml");
        std::fs::write(&scenario, text).unwrap();
        let shards = sweep_shards(&scenario, dir, "1..2", &[]);
        Inputs {
            history: small_history(dir),
            library: library(dir),
            scenario,
            shards,
        }
    }

    /// The scenario, the history, the library and the two shards, as arguments.
    fn args(&self) -> [&str; 5] {
        [
            &self.scenario,
            &self.history,
            &self.library,
            &self.shards[0],
            &self.shards[1],
        ]
        .map(|p| p.to_str().unwrap())
    }
}

/// A scenario library for `sim report`: `a` with a `[sweep]` section, `b` without.
fn library(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.join("a.toml"),
        scenario("[sweep]\nseeds = \"1..2\"\nset = [\"consumers.count=1,2\"]\n"),
    )
    .unwrap();
    std::fs::write(lib.join("b.toml"), scenario("")).unwrap();
    lib
}

/// Class 1: a directory where any command writes a file, whether at its start or at its end, is
/// refused before the work, with exit 2 and the path. Before: `sim sweep` ran every run,
/// journaled them, then failed "cannot write D/runs.csv: Is a directory (os error 21)" with exit
/// 1 (having replaced `runs.csv` and `aggregate.csv` first when the directory was a later file);
/// its journal as a directory was "not a regular file ... delete it"; `sim merge` and `sim
/// report` wrote their other files, then failed (exit 1); `sim explore` searched and shrank, then
/// failed to publish (exit 1); a lock that was a directory was exit 1.
#[test]
fn class1_a_directory_where_a_file_goes_is_refused_before_the_work() {
    at_root();
    let dir = fresh_dir("hostile6", "directory");
    let inputs = Inputs::new(&dir, &scenario(""));
    let [f, hs, l, s1, s2] = inputs.args();
    let explore_file = "scenarios/explore/network.toml";
    let two = [
        "--set",
        "consumers.count=1,2",
        "--set",
        "workload.keys=5,10",
    ];
    let sweep = |extra: &[&'static str]| {
        let mut a = vec!["sweep", f, "--seeds", "1..3", "--jobs", "1"];
        a.extend_from_slice(extra);
        a
    };
    let mut cases: Vec<(Vec<&str>, &str)> = Vec::new();
    for blocked in [
        "runs.partial.csv",
        "runs.csv",
        "aggregate.csv",
        "report.md",
        "sweep.json",
        "sweep.svg",
        "sweep.png",
    ] {
        cases.push((sweep(&[]), blocked));
    }
    // Two swept parameters: one chart per value of the second.
    cases.push((sweep(&two), "sweep-2.png"));
    cases.push((sweep(&["--shard", "1/2"]), "sweep.json"));
    for blocked in ["aggregate.csv", "report.md", "sweep.png"] {
        cases.push((vec!["merge", s1, s2], blocked));
    }
    for blocked in [
        "README.md",
        "b/report.md",
        "a/sweep/sweep.png",
        "a/sweep/runs.partial.csv",
    ] {
        cases.push((vec!["report", l, "--jobs", "1"], blocked));
    }
    for blocked in [
        "explore-network.message_groups.toml",
        "explore-manifest.json",
        ".sim-run.lock",
    ] {
        cases.push((
            vec!["explore", explore_file, "--strategy", "message_groups"],
            blocked,
        ));
    }
    for blocked in ["trace-manifest.json", ".sim-run.lock"] {
        cases.push((vec!["trace", f, "--strategy", "single"], blocked));
    }
    for blocked in ["judge-manifest.json", ".sim-run.lock"] {
        cases.push((vec!["judge", hs], blocked));
    }
    for blocked in ["run-manifest.json", ".sim-run.lock"] {
        cases.push((vec!["run", f, "--strategy", "single"], blocked));
    }
    for (i, (args, blocked)) in cases.into_iter().enumerate() {
        refused_with_a_folder_in_the_way(&dir, i, &args, blocked, IS_A_DIRECTORY);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 2: a file in the way of a folder a command makes inside `--out` (`sim report`'s folder
/// of a scenario, or of its sweep), and an `--out` under a file with work before the output
/// (`sim merge --verify`), are refused before the first run. Before: `sim report` ran and wrote
/// every other scenario's report, then failed; `sim merge --verify` re-ran the rows first (here it
/// would have said the scenario file changed).
#[test]
fn class2_a_file_in_the_way_is_found_before_the_work() {
    at_root();
    let dir = fresh_dir("hostile6", "in-the-way");
    let lib = library(&dir);
    let l = lib.to_str().unwrap();
    for (in_the_way, blocked) in [
        ("b", "b/summary.csv"),
        ("a/sweep", "a/sweep/runs.partial.csv"),
    ] {
        let out = dir.join(format!("report-{}", in_the_way.replace('/', "-")));
        let file = out.join(in_the_way);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "mine").unwrap();
        let o = out.to_str().unwrap();
        refused(
            &["report", l, "--jobs", "1", "--out", o],
            &out,
            &out.join(blocked),
            &format!("{} exists and is not a directory", file.display()),
        );
    }
    // Merge: the verification's runs come after the check (the scenario file changed since the
    // shards ran: the verification would fail first).
    let s = dir.join("s.toml");
    std::fs::write(&s, scenario("")).unwrap();
    let shards = sweep_shards(&s, &dir, "1..2", &[]);
    std::fs::write(&s, scenario("# changed\n")).unwrap();
    let note = dir.join("note.txt");
    std::fs::write(&note, "mine").unwrap();
    let under = note.join("x");
    refused(
        &[
            "merge",
            shards[0].to_str().unwrap(),
            shards[1].to_str().unwrap(),
            "--verify",
            "2",
            "--out",
            under.to_str().unwrap(),
        ],
        &dir.join("shard1"),
        &under,
        &format!(
            "{} exists and is not a directory (--out names a folder to write into)",
            note.display()
        ),
    );
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "mine");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder that takes no new file, and whether it holds the user's `notes.txt` (a folder of
/// ours made read-only; as root, whom permissions do not stop, `/sys`), or None where there is
/// neither. `restore` makes it writable again.
fn read_only_folder(dir: &Path) -> Option<(PathBuf, bool)> {
    use std::os::unix::fs::PermissionsExt as _;
    let ro = dir.join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::write(ro.join("notes.txt"), "mine").unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::File::create(ro.join("probe")).is_err() {
        return Some((ro, true));
    }
    restore(&ro);
    let sys = Path::new("/sys");
    let takes = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(sys.join(".ordsim-hostile6-probe"))
        .is_ok();
    (sys.is_dir() && !takes).then(|| (sys.to_path_buf(), false))
}

fn restore(ro: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if ro.starts_with(std::env::temp_dir()) {
        let _ = std::fs::set_permissions(ro, std::fs::Permissions::from_mode(0o755));
    }
}

/// Class 3: an `--out` that takes no new file (read-only), or a new folder inside it, is refused
/// before the work by every command that writes one, and so are a `--trace` and a `--junit` file
/// there. Before: exit 1 "cannot write RO/.sim-run.lock: Permission denied" (`run`, `trace`,
/// `judge`, `explore`), "RO/runs.partial.csv" (`sweep`), "RO/runs.csv" after reading the shards
/// (`merge`), "RO/a" after a run (`report`); a new folder inside gave the system's words only
/// ("Operation not permitted (os error 1)").
#[test]
fn class3_a_folder_that_takes_no_file_is_refused_before_the_work() {
    at_root();
    let dir = fresh_dir("hostile6", "read-only");
    let Some((ro, ours)) = read_only_folder(&dir) else {
        eprintln!("skipped: no read-only folder here (root, and no /sys)");
        return;
    };
    let inputs = Inputs::new(
        &dir,
        &scenario("[expect]\nseeds = \"1..1\"\n[expect.all]\nlost = 0\n"),
    );
    let [f, hs, l, s1, s2] = inputs.args();
    let explore_file = "scenarios/explore/network.toml";
    let commands: Vec<Vec<&str>> = vec![
        vec!["sweep", f, "--seeds", "1..3", "--jobs", "1"],
        vec!["merge", s1, s2],
        vec!["report", l, "--jobs", "1"],
        vec!["explore", explore_file, "--strategy", "message_groups"],
        vec!["trace", f, "--strategy", "single"],
        vec!["judge", hs],
        vec!["run", f, "--strategy", "single"],
    ];
    let new = ro.join("ordsim-hostile6-new");
    let (r, n) = (ro.to_str().unwrap(), new.to_str().unwrap());
    let watched = if ours { ro.clone() } else { dir.join("lib") };
    for args in &commands {
        let mut a = args.clone();
        a.extend(["--out", r]);
        refused(&a, &watched, &ro, "it is not writable (");
        let mut a = args.clone();
        a.extend(["--out", n]);
        refused(
            &a,
            &watched,
            &new,
            &format!("the folder {r} is not writable ("),
        );
        assert!(!new.exists(), "{a:?}");
    }
    let (junit, trace) = (ro.join("junit.xml"), ro.join("h.jsonl"));
    for (args, path) in [
        (
            vec![
                "check",
                f,
                "--jobs",
                "1",
                "--junit",
                junit.to_str().unwrap(),
            ],
            &junit,
        ),
        (
            vec![
                "run",
                f,
                "--strategy",
                "single",
                "--trace",
                trace.to_str().unwrap(),
            ],
            &trace,
        ),
    ] {
        refused(
            &args,
            &watched,
            path,
            &format!("the folder {r} is not writable ("),
        );
    }
    if ours {
        assert_eq!(
            std::fs::read_to_string(ro.join("notes.txt")).unwrap(),
            "mine"
        );
    }
    restore(&ro);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 4: a refused command leaves the results a user already had in `--out` byte for byte:
/// an earlier sweep's set (the new sweep's `sweep.png` blocked), an interrupted sweep's journal
/// (`--resume` with `runs.csv` blocked), an earlier report (its index blocked, the scenario
/// changed since). Before: the sweep replaced `runs.csv`, `aggregate.csv` and `sweep.svg` with
/// the new seeds' before failing, leaving a mixed set under the old `sweep.json` and `report.md`;
/// the report rewrote every scenario's files before failing on its index.
#[test]
fn class4_a_refusal_keeps_what_the_user_had() {
    at_root();
    let dir = fresh_dir("hostile6", "kept");
    let s = dir.join("s.toml");
    std::fs::write(&s, scenario("")).unwrap();
    let f = s.to_str().unwrap();
    // An earlier, complete sweep; then another over more seeds with sweep.png in the way.
    let out = dir.join("sweep");
    let o = out.to_str().unwrap();
    let (code, _, err) = sim(&["sweep", f, "--seeds", "1..2", "--jobs", "1", "--out", o]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(out.join("sweep.png")).unwrap();
    std::fs::create_dir_all(out.join("sweep.png").join("mine")).unwrap();
    refused(
        &["sweep", f, "--seeds", "1..3", "--jobs", "1", "--out", o],
        &out,
        &out.join("sweep.png"),
        IS_A_DIRECTORY,
    );
    // An interrupted sweep: its journal is kept for --resume, whatever blocks the end.
    let cut = dir.join("cut");
    let c = cut.to_str().unwrap();
    let stopped = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["sweep", f, "--seeds", "1..4", "--jobs", "1", "--out", c])
        .env("ORDSIM_FAILPOINT", "sweep-journal:3")
        .output()
        .unwrap();
    assert_eq!(stopped.status.code(), Some(99));
    std::fs::create_dir_all(cut.join("runs.csv")).unwrap();
    let args = ["sweep", f, "--seeds", "1..4", "--jobs", "1", "--out", c];
    let mut resume = args.to_vec();
    resume.push("--resume");
    refused(&resume, &cut, &cut.join("runs.csv"), IS_A_DIRECTORY);
    // With the folder gone, it resumes from the journal kept.
    std::fs::remove_dir(cut.join("runs.csv")).unwrap();
    let (code, stdout, err) = sim(&resume);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("(5 run now, 3 resumed)"), "{stdout}");
    // An earlier report, then the scenario changed (another seed) and the index blocked.
    let lib = library(&dir);
    let report = dir.join("report");
    let (l, r) = (lib.to_str().unwrap(), report.to_str().unwrap());
    let (code, _, err) = sim(&["report", l, "--jobs", "1", "--out", r]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(lib.join("b.toml"), format!("seed = 9\n{}", scenario(""))).unwrap();
    std::fs::remove_file(report.join("README.md")).unwrap();
    std::fs::create_dir_all(report.join("README.md").join("mine")).unwrap();
    refused(
        &["report", l, "--jobs", "1", "--out", r],
        &report,
        &report.join("README.md"),
        IS_A_DIRECTORY,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Class 5: `sim live` and `sim calibrate` (the `live` cargo feature).
#[cfg(feature = "live")]
mod live {
    use super::{refused, scenario, IS_A_DIRECTORY};
    use crate::common::fresh_dir;

    /// Class 5: a history path that is a directory (of the first run, or of a later one: the
    /// histories are written one per run), a `calibration.csv` or chart that is one, a
    /// `histories` that is a file, are refused before the first broker starts (and before the
    /// simulator's seeds of `sim calibrate`), exit 2. Before: `sim live` ran its brokers, then
    /// failed to write (exit 1); a later run's history was refused only after the runs before it;
    /// `sim calibrate`'s histories likewise.
    #[test]
    fn class5_live_outputs_are_checked_before_the_first_broker() {
        let dir = fresh_dir("hostile6", "live");
        let s = dir.join("s.toml");
        std::fs::write(&s, scenario("")).unwrap();
        let f = s.to_str().unwrap();
        let live = |runs: &'static str| {
            vec![
                "live",
                f,
                "--strategy",
                "single",
                "--seed",
                "1",
                "--runs",
                runs,
            ]
        };
        let calibrate = vec!["calibrate", f, "--sim-seeds", "2", "--runs", "1"];
        let cases: Vec<(Vec<&str>, &str, &str)> = vec![
            (live("1"), "single-1.jsonl", IS_A_DIRECTORY),
            (live("3"), "single-3.jsonl", IS_A_DIRECTORY),
            (calibrate.clone(), "calibration.csv", IS_A_DIRECTORY),
            (calibrate.clone(), "calibration-s.png", IS_A_DIRECTORY),
            (
                calibrate.clone(),
                "histories/s/competing-1.jsonl",
                IS_A_DIRECTORY,
            ),
        ];
        for (i, (args, blocked, reason)) in cases.into_iter().enumerate() {
            super::refused_with_a_folder_in_the_way(&dir, i, &args, blocked, reason);
        }
        // `histories` a file: the folders under --out are made, and none may be a file.
        let out = dir.join("out-file");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("histories"), "mine").unwrap();
        let o = out.to_str().unwrap();
        let mut args = calibrate.clone();
        args.extend(["--out", o]);
        refused(
            &args,
            &out,
            &out.join("histories/s/competing-1.jsonl"),
            &format!(
                "{} exists and is not a directory",
                out.join("histories").display()
            ),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 6: the user's consumer's inputs (`--schema`, `--writes`) are read before anything
    /// installed is looked for, so a bad one is the same error on every machine. Before:
    /// `sim live S --consumer CMD --schema DIR` on a machine without ActiveMQ said "sim live
    /// needs ActiveMQ" (round five's class 1 test failed there); with it, "--schema DIR: ...".
    #[test]
    fn class6_the_consumers_inputs_are_read_before_the_broker_is_looked_for() {
        let dir = fresh_dir("hostile6", "schema-first");
        let file = dir.join("s.toml");
        std::fs::write(&file, scenario("")).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(["live", file.to_str().unwrap(), "--consumer", "true"])
            .args(["--schema", dir.to_str().unwrap()])
            .env("ORDSIM_ACTIVEMQ_HOME", dir.join("no-activemq"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--schema"), "{err}");
        assert!(!err.contains("ActiveMQ"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
