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
