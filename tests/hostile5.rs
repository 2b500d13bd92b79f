//! Hostile input, round five: `sim live` and `sim calibrate` (never audited before; the tests of
//! classes 1 to 4 need the `live` cargo feature), and the leftovers of round four.
//!
//! Class 1, inputs read unbounded: `sim live` and `sim calibrate` read a scenario (and
//! `--schema`) as every other command does, a FIFO or a device refused before it is opened.
//!
//! Class 2, seeds past the largest: a first seed and a count of runs that pass `u64::MAX` are
//! refused before any run.
//!
//! Class 3, a stop loses nothing: an interrupt (Ctrl-C, or a `kill`'s SIGTERM) or a failure
//! keeps the runs already finished (their table, calibration.csv) and leaves no broker behind.
//!
//! Class 4, what cannot be staged is refused before the first broker starts, the field named.
//!
//! Class 5, a wrong case or a letter off in an enum value: every enum-valued flag (and the
//! values of a file read against a list) suggests the value meant, as the scenario loader does
//! for its fields.
//!
//! Class 6, names that are blank or padded: a scenario's `name` that is empty or only spaces,
//! and a node's name (broker, producer, consumer) with leading or trailing whitespace.
//!
//! Class 7, an output path that cannot be written: one friendly error naming the path, exit 2,
//! before any work.
//!
//! Class 9, an output over an input (round four's class 2, which left out `sim live` and `sim
//! calibrate`): neither writes a history, calibration.csv or a chart over its scenario file, nor
//! one scenario's chart and histories over another's.
//!
//! Class 8, a message that points at what is gone: a broker that fails to start is reported
//! with the end of its log, not the path of a log in a folder removed before the message.

use crate::common::{at_root, fresh_dir, sim, small_history, small_scenario as scenario};

/// Classes 1 to 4: `sim live` and `sim calibrate` (the `live` cargo feature).
#[cfg(feature = "live")]
mod live {
    use super::{fresh_dir, scenario};
    use std::time::{Duration, Instant};

    /// Runs `sim ARGS`, killed after `secs` seconds: None when it had not ended by then.
    fn sim_within(args: &[&str], secs: u64) -> Option<(i32, String, String)> {
        use std::io::Read;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("runs");
        let t0 = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let (mut out, mut err) = (String::new(), String::new());
                child
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return Some((status.code().unwrap_or(-1), out, err));
            }
            if t0.elapsed() > Duration::from_secs(secs) {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A FIFO at `path` (mkfifo(3)).
    fn fifo(path: &std::path::Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    /// Class 1: `sim live FIFO` and `sim live /dev/zero`, `--schema FIFO`, and `sim calibrate` of
    /// either end at once with exit 2, saying what the path is. Before: `sim live` waited forever for
    /// a writer to the FIFO and read /dev/zero until memory ran out (`read_to_string`), and `sim
    /// calibrate` said "no such file" of both.
    #[test]
    fn class1_live_reads_its_inputs_bounded() {
        let dir = fresh_dir("hostile5", "fifo");
        let pipe = dir.join("s.toml");
        fifo(&pipe);
        let file = dir.join("ok.toml");
        std::fs::write(&file, scenario("")).unwrap();
        let (p, f) = (pipe.to_str().unwrap(), file.to_str().unwrap());
        for (args, says) in [
            (
                vec!["live", p],
                "is a FIFO (named pipe), not a regular file",
            ),
            (vec!["live", "/dev/zero"], "is a character device"),
            (
                vec!["calibrate", p],
                "is a FIFO (named pipe), not a regular file",
            ),
            (vec!["calibrate", "/dev/zero"], "is a character device"),
            (
                vec!["live", f, "--consumer", "true", "--schema", p],
                "--schema",
            ),
        ] {
            let (code, _, err) = sim_within(&args, 20).unwrap_or_else(|| panic!("{args:?} hangs"));
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {says}: {err}");
            assert!(!err.contains("no such file"), "{args:?}: {err}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 2: `sim live --seed 18446744073709551615 --runs 2` and `sim calibrate --sim-seeds
    /// 18446744073709551615` are refused (exit 2) before any broker starts. Before: the first ran a
    /// live run, then the second's seed overflowed (a panic in a debug build, seed 0 in a release
    /// one); calibrate collected 2^64 seeds into a vector (a capacity panic).
    #[test]
    fn class2_seeds_past_the_largest_are_refused() {
        let dir = fresh_dir("hostile5", "seeds");
        let file = dir.join("s.toml");
        std::fs::write(&file, scenario("")).unwrap();
        let f = file.to_str().unwrap();
        let max = u64::MAX.to_string();
        for (args, says) in [
            (
                vec!["live", f, "--seed", &max, "--runs", "2"],
                format!("2 seeds from {max} (--seed, --runs) pass the largest seed"),
            ),
            (
                vec!["calibrate", f, "--sim-seeds", &max],
                format!("--sim-seeds {max}: must be between 1 and 10000000"),
            ),
        ] {
            let (code, out, err) =
                sim_within(&args, 20).unwrap_or_else(|| panic!("{args:?} hangs"));
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains(&says), "{args:?}: {says}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(out.is_empty(), "no run: {out}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Whether ActiveMQ can be started here (the tests that run a broker skip, saying why, when not).
    fn no_broker() -> bool {
        if let Some(why) = ordsim::live::broker::missing() {
            eprintln!("skipped: {why}");
            return true;
        }
        false
    }

    /// `sim ARGS`, interrupted (SIGINT, as Ctrl-C) once `first` exists (its first run ended,
    /// within 60 s): its exit code, standard output and error, after checking that it left no
    /// broker behind.
    fn interrupted_once(args: &[&str], first: &std::path::Path) -> (Option<i32>, String, String) {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let t0 = Instant::now();
        while !first.exists() && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(first.exists(), "the first run did not finish");
        // SAFETY: kill(2) on the child this test started.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGINT);
        }
        let out = child.wait_with_output().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(crate::live::brokers_of(pid).is_empty(), "a broker survived");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Class 3: a `kill` (SIGTERM) of `sim live` stops its broker and removes its temporary
    /// directory, as Ctrl-C does (exit 130). Before: the process died at once and its ActiveMQ
    /// kept running, adopted by init, with its store in /tmp.
    #[test]
    fn class3_a_kill_leaves_no_broker() {
        if no_broker() {
            return;
        }
        let _serial = crate::live::serial();
        let dir = fresh_dir("hostile5", "sigterm");
        let file = dir.join("s.toml");
        std::fs::write(
            &file,
            scenario("").replace("messages = 40", "messages = 400"),
        )
        .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(["live", file.to_str().unwrap(), "--strategy", "single"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let t0 = Instant::now();
        while crate::live::brokers_of(pid).is_empty() && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !crate::live::brokers_of(pid).is_empty(),
            "no broker started"
        );
        std::thread::sleep(Duration::from_secs(2));
        // SAFETY: kill(2) on the child this test started.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{err}");
        assert!(err.contains("interrupted: 0 of 1 runs"), "{err}");
        std::thread::sleep(Duration::from_millis(300));
        let left = crate::live::brokers_of(pid);
        for p in &left {
            // SAFETY: kill(2) of a broker the test's child started and left behind.
            unsafe {
                libc::kill(*p as libc::pid_t, libc::SIGKILL);
            }
        }
        assert!(left.is_empty(), "a broker survived SIGTERM: {left:?}");
        let tag = format!("ordsim-live-{pid}-");
        let dirs: Vec<_> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&tag))
            .collect();
        assert!(dirs.is_empty(), "temporary directories left: {dirs:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 3: Ctrl-C after the first of two runs prints the finished run's table (and its history
    /// stays in --out), and says "1 of 2 runs". Before: nothing but "interrupted: 1 of 0 runs are
    /// saved; continue with: sim live FILE": the finished run's figures were lost.
    #[test]
    fn class3_ctrl_c_keeps_the_finished_runs() {
        if no_broker() {
            return;
        }
        let _serial = crate::live::serial();
        let dir = fresh_dir("hostile5", "ctrl-c");
        let file = dir.join("s.toml");
        std::fs::write(&file, scenario("")).unwrap();
        let out_dir = dir.join("out");
        let (code, stdout, err) = interrupted_once(
            &[
                "live",
                file.to_str().unwrap(),
                "--strategy",
                "single",
                "--runs",
                "2",
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &out_dir.join("single-1.jsonl"),
        );
        assert_eq!(code, Some(130), "{err}");
        assert!(
            stdout.contains("single@1 "),
            "the finished run's row: {stdout}"
        );
        assert!(
            stdout.contains("(1 of 2 run(s) finished before the error below)"),
            "{stdout}"
        );
        assert!(err.contains("interrupted: 1 of 2 runs"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 3: Ctrl-C during `sim calibrate --out D`, after the first strategy's live run,
    /// writes that strategy's rows to D/calibration.csv and prints them. Before: calibration.csv
    /// was written only at the end, so an interrupt lost every row gathered (and said "0 of 0
    /// runs").
    #[test]
    fn class3_ctrl_c_keeps_calibrate_rows() {
        if no_broker() {
            return;
        }
        let _serial = crate::live::serial();
        let dir = fresh_dir("hostile5", "calibrate-ctrl-c");
        let file = dir.join("s.toml");
        std::fs::write(&file, scenario("")).unwrap();
        let out_dir = dir.join("out");
        let (code, stdout, err) = interrupted_once(
            &[
                "calibrate",
                file.to_str().unwrap(),
                "--sim-seeds",
                "2",
                "--runs",
                "1",
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &out_dir.join("histories/s/competing-1.jsonl"),
        );
        assert_eq!(code, Some(130), "{err}");
        assert!(err.contains("interrupted: 1 of 2 runs"), "{err}");
        let csv = std::fs::read_to_string(out_dir.join("calibration.csv")).expect(&err);
        assert!(csv.contains(",competing,"), "{csv}");
        assert!(!csv.contains(",single,"), "{csv}");
        assert!(stdout.contains("competing"), "{stdout}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 5: `sim calibrate --tolerance Lost=1` suggests `lost` (before: "unknown metric
    /// \"Lost\" (rel, or one of: ...)", nothing suggested).
    #[test]
    fn class5_calibrate_tolerance_suggests() {
        let (code, _, err) =
            sim_within(&["calibrate", "x.toml", "--tolerance", "Lost=1"], 20).expect("ends");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("did you mean `lost`?"), "{err}");
    }

    /// Class 8: an ActiveMQ install whose `activemq.jar` is not one (a misconfigured
    /// `ORDSIM_ACTIVEMQ_HOME`) fails at once, quoting the end of the broker's log, and leaves no
    /// temporary folder. Before: "broker a exited (exit status: 1) while starting; see
    /// /tmp/ordsim-live-PID-0-a/stdout.log", a folder already removed.
    #[test]
    fn class8_a_broker_that_fails_to_start_is_quoted() {
        if no_broker() {
            return;
        }
        let dir = fresh_dir("hostile5", "bad-jar");
        std::fs::create_dir_all(dir.join("amq/bin")).unwrap();
        std::fs::write(dir.join("amq/bin/activemq.jar"), "not a jar").unwrap();
        let file = dir.join("s.toml");
        std::fs::write(&file, scenario("")).unwrap();
        let t0 = Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args(["live", file.to_str().unwrap(), "--strategy", "single"])
            .env("ORDSIM_ACTIVEMQ_HOME", dir.join("amq"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(30), "{err}");
        assert!(
            err.contains(
                "broker a exited (exit status: 1) while starting; the end of its stdout.log:"
            ),
            "{err}"
        );
        assert!(
            err.to_lowercase().contains("jar"),
            "the log's own words: {err}"
        );
        assert!(!err.contains("; see /"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 9: `sim live D/single-1.jsonl --strategy single --out D` (a scenario file under the
    /// name its history would take) and `sim calibrate D/calibration.csv --out D` are refused
    /// before any run (exit 2), the file as it was. Before: the live run went, and its history
    /// replaced the scenario; calibrate replaced it with its rows at the end.
    #[test]
    fn class9_no_output_over_the_input() {
        let dir = fresh_dir("hostile5", "over-input");
        let text = scenario("");
        for (cmd, name) in [("live", "single-1.jsonl"), ("calibrate", "calibration.csv")] {
            let file = dir.join(name);
            std::fs::write(&file, &text).unwrap();
            let mut args = vec![cmd, file.to_str().unwrap()];
            if cmd == "live" {
                args.extend(["--strategy", "single"]);
            } else {
                args.extend(["--sim-seeds", "1"]);
            }
            args.extend(["--out", dir.to_str().unwrap()]);
            let (code, out, err) = sim_within(&args, 60).expect("ends");
            assert_eq!(code, 2, "{cmd}: {err}");
            assert!(
                err.contains("--out would write") && err.contains("(the same file)"),
                "{cmd}: {err}"
            );
            assert!(!out.contains("produced"), "{cmd}: nothing ran: {out}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "{cmd}");
        }
        // Nor one output over another: two scenarios of one name (a file given twice, or
        // `a/s.toml` and `b/s.toml`) would share their chart and histories. Before: calibrated
        // one after the other, the second's chart replacing the first's.
        for sub in ["a", "b"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
            std::fs::write(dir.join(sub).join("s.toml"), &text).unwrap();
        }
        let (a, b) = (dir.join("a/s.toml"), dir.join("b/s.toml"));
        for pair in [[&a, &b], [&a, &a]] {
            let (code, out, err) = sim_within(
                &[
                    "calibrate",
                    pair[0].to_str().unwrap(),
                    pair[1].to_str().unwrap(),
                    "--sim-seeds",
                    "1",
                ],
                60,
            )
            .expect("ends");
            assert_eq!(code, 2, "{err}");
            assert!(err.contains("are both named \"s\""), "{err}");
            assert!(out.is_empty(), "{out}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Class 4: a `broker_crash` without `for` is refused by `sim live` and `sim calibrate` before
    /// anything runs, naming the entry's field. Before: refused only when a run's plan was made
    /// ("broker_crash without `for`: a broker that never comes back is not staged", no entry named):
    /// `sim calibrate` ran the simulator's seeds first, and a random entry that drew no occurrence
    /// at the first seed let that seed's live run go before the refusal.
    #[test]
    fn class4_a_fault_without_for_is_refused_before_any_run() {
        let dir = fresh_dir("hostile5", "no-for");
        let file = dir.join("s.toml");
        std::fs::write(
            &file,
            scenario(
                "[[fault]]\nkind = \"consumer_crash\"\nconsumer = 0\nat = \"1s\"\nfor = \"1s\"\n\
                 [[fault]]\nkind = \"broker_crash\"\nbroker = \"a\"\nat = \"1s\"\n",
            ),
        )
        .unwrap();
        let f = file.to_str().unwrap();
        for cmd in ["live", "calibrate"] {
            let t0 = Instant::now();
            let (code, out, err) = sim_within(&[cmd, f], 60).expect("ends");
            assert_eq!(code, 2, "{cmd}: {err}");
            assert!(
                err.contains("fault[1].for: missing (\"broker_crash\" without `for` is a broker that never comes back, not staged)"),
                "{cmd}: {err}"
            );
            assert!(!out.contains("produced"), "{cmd}: no run: {out}");
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{cmd}: no broker started"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Class 5: every enum-valued flag, given its value in the wrong case, suggests the value (exit
/// 2), as `--strategy`, `--anomaly` and the scenario's fields did. Before: `--kind State` said
/// "one of state, command", `--guarantee`, a judged file's `event` and a `version` likewise
/// without a suggestion; a judged CSV's `Sequence` column got "seq: missing" at every row;
/// `--doc Strategies` got clap's list without one; `sim bench --strategy Single` said only
/// "unknown strategy".
#[test]
fn class5_enum_values_suggest_the_value_meant() {
    at_root();
    let dir = fresh_dir("hostile5", "enums");
    let h = small_history(&dir);
    let h = h.to_str().unwrap();
    let events = dir.join("events.csv");
    std::fs::write(&events, "time,event,key,seq,node\n1,Produce,1,1,p0\n").unwrap();
    let columns = dir.join("columns.csv");
    std::fs::write(&columns, "time,event,key,Sequence,node\n1,produce,1,1,p0\n").unwrap();
    let kafka = dir.join("kafka.toml");
    std::fs::write(
        &kafka,
        scenario("")
            .replace(
                "strategies = [\"competing\", \"single\"]",
                "flavour = \"kafka\"\nstrategies = [\"kafka\"]",
            )
            .replace("name = \"a\"", "name = \"a\"\nversion = \"v3.7\""),
    )
    .unwrap();
    let s = dir.join("s.toml");
    std::fs::write(&s, scenario("")).unwrap();
    for (args, meant) in [
        (vec!["judge", h, "--kind", "State"], "state"),
        (vec!["judge", h, "--kind", "comand"], "command"),
        (
            vec!["judge", h, "--guarantee", "Stale_writes"],
            "stale_writes",
        ),
        (vec!["judge", events.to_str().unwrap()], "produce"),
        (vec!["judge", columns.to_str().unwrap()], "seq"),
        (vec!["list", "--doc", "Strategies"], "strategies"),
        (
            vec![
                "bench",
                s.to_str().unwrap(),
                "--strategy",
                "Single",
                "--repeat",
                "1",
            ],
            "single",
        ),
        (vec!["validate", kafka.to_str().unwrap()], "3.7"),
    ] {
        let (code, out, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(&format!("did you mean `{meant}`?")),
            "{args:?}: {err}"
        );
        assert_eq!(err.matches("did you mean").count(), 1, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    // Nothing close: the list, no guess.
    let (code, _, err) = sim(&["judge", h, "--kind", "xyzzy"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("one of state, command") && !err.contains("did you mean"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn load(text: &str) -> Result<sim::Scenario, String> {
    ordsim::load_text("bad.toml", text).map_err(|e| e.to_string())
}

/// Class 6: a scenario `name` that is empty or only spaces is refused (it printed as "scenario
/// : ..." and named no report folder), and so is one padded with spaces; a node's name (a
/// broker's, a producer's, a consumer's) with leading or trailing whitespace is refused through
/// the shared `name_problem`. Before: `name = ""` and `"  "` loaded; `" a"` and `"a"` were two
/// brokers, and `[producers] names = [" p"]` loaded.
#[test]
fn class6_names_are_neither_blank_nor_padded() {
    for (name, says) in [
        (
            "",
            "must not be empty (leave `name` out to go by the file's name)",
        ),
        ("   ", "must not be empty"),
        (" nightly", "\" nightly\" starts or ends with whitespace"),
    ] {
        let e = load(&format!("name = {name:?}\n{}", scenario(""))).unwrap_err();
        assert!(e.starts_with("bad.toml:1:"), "{name:?}: {e}");
        assert!(
            e.contains(&format!("field `name`: {says}")),
            "{name:?}: {e}"
        );
    }
    load(&format!("name = \"nightly run\"\n{}", scenario(""))).expect("a name with a space inside");
    let two = scenario("[[broker]]\nname = \" a\"\n");
    let e = load(&two).unwrap_err();
    assert!(
        e.contains("field `broker[1].name`: \" a\" starts or ends with whitespace: names are compared as written, so \" a\" and \"a\" would be two names; write \"a\""),
        "{e}"
    );
    for (section, names, field) in [
        (
            "[producers]\ncount = 2\nnames = [\"p0\", \"p1 \"]\n",
            "producers",
            "producers.names[1]",
        ),
        ("", "consumers", "consumers.names[0]"),
    ] {
        let text = if names == "consumers" {
            scenario("").replace("count = 2\n", "count = 2\nnames = [\"\\tc0\", \"c1\"]\n")
        } else {
            scenario(section)
        };
        let e = load(&text).unwrap_err();
        assert!(e.contains(&format!("field `{field}`")), "{field}: {e}");
        assert!(
            e.contains("starts or ends with whitespace") || e.contains("control character"),
            "{field}: {e}"
        );
    }
}

/// Class 7: an output path under a regular file (`/etc/passwd/x` as root: the file-as-folder
/// case), or in a folder that does not exist, gives one error naming the path with exit code 2,
/// before any run, for every command that writes. Before: exit 1 for each; `sim run --trace` said
/// only "Not a directory (os error 20)", and `sim check --junit` ran every check before failing
/// to write the JUnit file.
#[test]
fn class7_an_unwritable_output_is_bad_input() {
    at_root();
    let dir = fresh_dir("hostile5", "unwritable");
    let h = small_history(&dir);
    let s = dir.join("s.toml");
    std::fs::write(
        &s,
        scenario("[expect]\nseeds = \"1..1\"\n[expect.all]\nlost = 0\n"),
    )
    .unwrap();
    let note = dir.join("note.txt");
    std::fs::write(&note, "mine").unwrap();
    let under = note.join("x");
    let missing = dir.join("no-such-folder").join("x.xml");
    let (f, hs, u, m) = (
        s.to_str().unwrap(),
        h.to_str().unwrap(),
        under.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    for (args, says) in [
        (
            vec!["run", f, "--strategy", "single", "--out", u],
            "exists and is not a directory",
        ),
        (
            vec!["run", f, "--strategy", "single", "--trace", u],
            "exists and is not a directory",
        ),
        (
            vec!["run", f, "--strategy", "single", "--trace", m],
            "does not exist",
        ),
        (
            vec!["check", f, "--jobs", "1", "--junit", u],
            "exists and is not a directory",
        ),
        (
            vec!["check", f, "--jobs", "1", "--junit", m],
            "does not exist",
        ),
        (
            vec!["judge", hs, "--out", u],
            "exists and is not a directory",
        ),
        (
            vec!["sweep", f, "--seeds", "1..2", "--jobs", "1", "--out", u],
            "exists and is not a directory",
        ),
        (
            vec!["report", f, "--jobs", "1", "--out", u],
            "exists and is not a directory",
        ),
    ] {
        let (code, out, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        let path = args.last().unwrap();
        assert!(
            err.contains(&format!("cannot write {path}: ")),
            "{args:?}: {err}"
        );
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one error: {err}");
        assert!(out.is_empty(), "{args:?}: nothing run: {out}");
    }
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "mine");
    // An --out whose file is a folder there (`D/summary.csv/`, not empty): refused before the
    // work too. Before: `sim run` ran, then failed to move summary.csv in place (exit 1) and its
    // table was never printed; `sim judge` and `sim trace` failed after their work.
    for (args, blocked) in [
        (
            vec!["run", f, "--strategy", "single", "--out"],
            "summary.csv",
        ),
        (vec!["judge", hs, "--out"], "summary.csv"),
        (
            vec!["trace", f, "--strategy", "single", "--out"],
            "timeline.html",
        ),
    ] {
        let out_dir = dir.join(format!("out-{}", args[0]));
        std::fs::create_dir_all(out_dir.join(blocked).join("mine")).unwrap();
        let mut args = args.clone();
        let o = out_dir.to_str().unwrap().to_string();
        args.push(&o);
        let (code, out, err) = sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(&format!("cannot write {o}/{blocked}: it is a directory")),
            "{args:?}: {err}"
        );
        assert!(out.is_empty(), "{args:?}: nothing run: {out}");
        assert!(out_dir.join(blocked).join("mine").exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
