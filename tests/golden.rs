//! Golden summaries: the JSON of a few bundled scenarios is committed under tests/golden/ and must
//! come out byte-identical (in debug, test and release builds alike: CI runs this test in both). A
//! change in the simulator's behaviour shows up here as a reviewable diff; regenerate on purpose with
//! `ORDSIM_BLESS=1 cargo test --test golden`.

use ordsim::{report, run_scenario, RunRequest};
use std::path::Path;

const GOLDEN: &[(&str, u64)] = &[
    ("scenarios/failover.toml", 42),
    ("scenarios/redelivery.toml", 1),
    ("scenarios/poison.toml", 1),
    ("scenarios/cache-collapse.toml", 1),
    ("scenarios/clustered-uoo.toml", 1),
];

fn golden_path(file: &str, seed: u64) -> String {
    let stem = Path::new(file)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    format!("tests/golden/{stem}-seed{seed}.json")
}

#[test]
fn summaries_match_the_committed_golden_files() {
    let bless = std::env::var_os("ORDSIM_BLESS").is_some();
    let mut diffs = Vec::new();
    for &(file, seed) in GOLDEN {
        let path = Path::new(file);
        let sc = ordsim::load(path).unwrap();
        let req = RunRequest {
            seed: Some(seed),
            ..Default::default()
        };
        let json = report::json(&run_scenario(sc, path, &req, None).unwrap().summary);
        let golden = golden_path(file, seed);
        if bless {
            std::fs::write(&golden, &json).unwrap();
            continue;
        }
        match std::fs::read_to_string(&golden) {
            Ok(expected) if expected == json => {}
            Ok(expected) => {
                let line = expected
                    .lines()
                    .zip(json.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                diffs.push(format!(
                    "{golden}: differs from line {}: expected {:?}, got {:?}",
                    line + 1,
                    expected.lines().nth(line),
                    json.lines().nth(line)
                ));
            }
            Err(e) => diffs.push(format!(
                "{golden}: {e} (run with ORDSIM_BLESS=1 to create it)"
            )),
        }
    }
    assert!(
        diffs.is_empty(),
        "simulator output changed; if intended, regenerate with `ORDSIM_BLESS=1 cargo test --test golden` and review the diff:\n{}",
        diffs.join("\n")
    );
}
