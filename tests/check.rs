//! `sim check`: the bundled scenario library passes its own expectations; failures are reported
//! with a repro line and exit code 1; results do not depend on `--jobs`.

use std::path::PathBuf;
use std::process::Command;

/// The regression suite: every bundled scenario's expectations hold.
#[test]
fn bundled_scenarios_meet_their_expectations() {
    crate::common::at_root();
    let report = ordsim::check::check(&[PathBuf::from("scenarios")], 2).unwrap();
    let text = report.text();
    eprintln!("{text}");
    assert!(!report.failed(), "{text}");
    let (pass, _, unknown) = report.counts();
    assert!(pass > 0);
    assert_eq!(unknown, 0, "{text}");
}

fn temp_scenario(name: &str, expect: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ordsim-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            r#"
strategies = ["competing", "single"]
[workload]
messages = 500
rate = "100/s"
keys = 10
[[broker]]
name = "a"
[consumers]
count = 4
service = {{ dist = "exponential", mean = "30ms" }}
{expect}
"#
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_broken_expectation_fails_with_a_repro_line_and_exit_code_1() {
    crate::common::at_root();
    let p = temp_scenario(
        "broken.toml",
        "[expect]\nseeds = \"1..3\"\n[expect.competing]\nordering_violations = 0\n[expect.single]\nordering_violations = 0\n",
    );
    let report = ordsim::check::check(std::slice::from_ref(&p), 1).unwrap();
    assert!(report.failed());
    let text = report.text();
    assert!(
        text.contains("FAIL") && text.contains("competing  ordering_violations == 0"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "repro: sim run {} --seed 1 --strategy competing",
            p.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("PASS") && text.contains("single  ordering_violations == 0"),
        "{text}"
    );
    assert!(text.ends_with("1 passed, 1 failed, 0 unknown\n"), "{text}");

    let junit = std::env::temp_dir().join(format!("ordsim-junit-{}.xml", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args([
            "check",
            p.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("failures=\"1\"") && xml.contains("<failure"),
        "{xml}"
    );
}

#[test]
fn invalid_expectations_exit_2() {
    crate::common::at_root();
    let p = temp_scenario("bad.toml", "[expect.single]\nviolations = 0\n");
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(["check", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:13:") && err.contains("expect.single.violations"),
        "{err}"
    );
}

#[test]
fn results_do_not_depend_on_jobs() {
    crate::common::at_root();
    let p = temp_scenario(
        "jobs.toml",
        "[expect]\nseeds = \"1..8\"\n[expect.all]\nlost = 0\nordering_violations = \">= 0\"\n",
    );
    let one = ordsim::check::check(std::slice::from_ref(&p), 1).unwrap();
    let two = ordsim::check::check(std::slice::from_ref(&p), 2).unwrap();
    assert_eq!(one.text(), two.text());
    assert_eq!(one.junit(), two.junit());
}

/// An `[expect]` that states no bound (only `seeds`, or an empty `[expect.all]`) judges nothing:
/// it is skipped with the reason, and a check where nothing else is judged exits 1 as "nothing
/// to check" (it printed "0 passed, 0 failed, 0 unknown" and exited 0: a CI build passed on a
/// file that checked nothing). A check whose every expectation is UNKNOWN (the strategy not
/// applicable) decided nothing either: exit 1.
#[test]
fn a_check_that_judges_nothing_exits_1() {
    crate::common::at_root();
    let sim = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_sim"))
            .arg("check")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let seeds_only = temp_scenario("seeds-only.toml", "[expect]\nseeds = \"1..2\"\n");
    let empty_all = temp_scenario("empty-all.toml", "[expect]\n[expect.all]\n");
    for p in [&seeds_only, &empty_all] {
        let (code, _, err) = sim(&[p.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("states a bound") && err.contains("[expect.all]"),
            "{err}"
        );
    }
    // Beside a file that states bounds, it is skipped with its reason; the other is judged.
    let good = temp_scenario(
        "judged.toml",
        "[expect]\nseeds = \"1..2\"\n[expect.all]\nlost = 0\n",
    );
    let (code, out, err) = sim(&[good.to_str().unwrap(), seeds_only.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("SKIP") && out.contains("states no bound"),
        "{out}"
    );
    assert!(out.ends_with("2 passed, 0 failed, 0 unknown\n"), "{out}");
    // Every expectation UNKNOWN: nothing judged.
    let dir = std::env::temp_dir().join(format!("ordsim-check-{}", std::process::id()));
    let na = dir.join("not-applicable.toml");
    std::fs::write(
        &na,
        r#"
strategies = ["notifier"]
[workload]
messages = 100
rate = "100/s"
keys = 10
[[broker]]
name = "a"
[consumers]
count = 2
service = "1ms"
[strategy.notifier]
source_access = false
[expect]
[expect.all]
lost = 0
"#,
    )
    .unwrap();
    let (code, out, err) = sim(&[na.to_str().unwrap()]);
    assert!(out.contains("UNKNOWN"), "{out}");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("nothing judged"), "{err}");
}
