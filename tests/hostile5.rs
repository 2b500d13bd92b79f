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

/// One broker, two consumers, 40 messages over 2 s; `extra` is appended.
#[cfg_attr(not(feature = "live"), allow(dead_code))]
fn scenario(extra: &str) -> String {
    format!(
        "strategies = [\"competing\", \"single\"]\n\
         [workload]\n\
         messages = 40\n\
         rate = \"20/s\"\n\
         keys = 5\n\
         [[broker]]\n\
         name = \"a\"\n\
         [consumers]\n\
         count = 2\n\
         service = \"5ms\"\n\
         {extra}"
    )
}

/// Classes 1 to 4: `sim live` and `sim calibrate` (the `live` cargo feature).
#[cfg(feature = "live")]
mod live {
    use super::scenario;
    use crate::common::fresh_dir;
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
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args([
                "live",
                file.to_str().unwrap(),
                "--strategy",
                "single",
                "--runs",
                "2",
                "--out",
                out_dir.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let first = out_dir.join("single-1.jsonl");
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
        let (stdout, err) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(130), "{err}");
        assert!(
            stdout.contains("single@1 "),
            "the finished run's row: {stdout}"
        );
        assert!(
            stdout.contains("(1 of 2 run(s) finished before the error below)"),
            "{stdout}"
        );
        assert!(err.contains("interrupted: 1 of 2 runs"), "{err}");
        std::thread::sleep(Duration::from_millis(300));
        assert!(crate::live::brokers_of(pid).is_empty());
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
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_sim"))
            .args([
                "calibrate",
                file.to_str().unwrap(),
                "--sim-seeds",
                "2",
                "--runs",
                "1",
                "--out",
                out_dir.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let first = out_dir.join("histories/s/competing-1.jsonl");
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
        let (stdout, err) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(130), "{err}");
        assert!(err.contains("interrupted: 1 of 2 runs"), "{err}");
        let csv = std::fs::read_to_string(out_dir.join("calibration.csv")).expect(&err);
        assert!(csv.contains(",competing,"), "{csv}");
        assert!(!csv.contains(",single,"), "{csv}");
        assert!(stdout.contains("competing"), "{stdout}");
        std::thread::sleep(Duration::from_millis(300));
        assert!(crate::live::brokers_of(pid).is_empty());
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
