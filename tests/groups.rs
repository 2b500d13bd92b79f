//! Fixed-size correlation groups (`[workload] group_size`, issue 39 §2): orders of N lines, the
//! figure `incomplete_groups` judged from the history, the aggregator completing an order by its
//! size, and the outputs that carry the figure only when the scenario has groups.

use crate::common;

const FILE: &str = "scenarios/correlation-groups.toml";

fn text() -> String {
    common::at_root();
    std::fs::read_to_string(FILE).expect("the bundled scenario")
}

/// The bundled scenario: the two orders with a poison line are incomplete for every strategy;
/// the aggregator holds the other three lines of each. Without `group_size` the figure is absent
/// and the aggregator, correlating on the key, completes aggregates of lines of different orders
/// (other lines are held: those of each key's last, unfinished aggregate).
#[test]
fn the_poison_lines_leave_two_orders_incomplete() {
    let grouped = common::scenario(&text());
    for s in [
        "competing",
        "message_groups",
        "unit_of_order",
        "resequencer",
    ] {
        let m = common::run(&grouped, s, 1);
        assert_eq!(m.incomplete_groups, Some(2), "{s}: {m:?}");
        assert_eq!(m.poison_dead_lettered, 2, "{s}");
    }
    let m = common::run(&grouped, "resequencer", 1);
    assert_eq!(m.pending_at_end, 6, "{m:?}");
    let plain = common::scenario(&text().replace("group_size = 4\n", ""));
    let m = common::run(&plain, "resequencer", 1);
    assert_eq!(m.incomplete_groups, None);
    assert_ne!(m.pending_at_end, 6, "{m:?}");
}

/// The figure is in the JSON, the CSV and the table of a grouped scenario, and in none of them
/// without groups (so the outputs of every other scenario keep their bytes).
#[test]
fn the_outputs_carry_the_figure_only_with_groups() {
    common::at_root();
    let plain = text().replace("group_size = 4\n", "");
    let dir = common::fresh_dir("groups", "plain");
    std::fs::create_dir_all(&dir).unwrap();
    let plain_file = dir.join("plain.toml");
    std::fs::write(&plain_file, plain).unwrap();
    for (file, grouped) in [
        (FILE.to_string(), true),
        (plain_file.display().to_string(), false),
    ] {
        let (code, json, err) = common::sim(&["run", &file, "--json", "--strategy", "competing"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(json.contains("\"incomplete_groups\": 2"), grouped, "{json}");
        assert_eq!(json.contains("incomplete_groups"), grouped, "{json}");
        let out = dir.join(if grouped { "g" } else { "p" });
        let (code, table, err) = common::sim(&[
            "run",
            &file,
            "--strategy",
            "competing",
            "--out",
            &out.display().to_string(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(table.contains("incomplete"), grouped, "{table}");
        let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        let header = r.headers().unwrap().clone();
        let row = r.records().next().unwrap().unwrap();
        assert_eq!(header.len(), row.len(), "{csv}");
        match header.iter().position(|h| h == "incomplete_groups") {
            Some(i) => {
                assert!(grouped);
                assert_eq!(&row[i], "2");
            }
            None => assert!(!grouped, "{csv}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Validation names the field and what is allowed.
#[test]
fn a_group_size_that_cannot_be_produced_whole_is_refused() {
    for (size, needle) in [
        ("0", "must be at least 1"),
        ("3", "must divide [workload] messages (2000)"),
    ] {
        let t = text().replace("group_size = 4", &format!("group_size = {size}"));
        let e = match ordsim::load_text("bad.toml", &t) {
            Ok(_) => panic!("group_size = {size} should not load"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("workload.group_size"), "{e}");
        assert!(e.contains(needle), "{e}");
    }
}

/// A trace carries `group_size` in its header, so `sim judge` of it counts the incomplete orders
/// as the run did.
#[test]
fn a_judged_trace_counts_the_incomplete_groups() {
    common::at_root();
    let dir = common::fresh_dir("groups", "judge");
    let trace = dir.join("t.jsonl").display().to_string();
    let (code, _, err) = common::sim(&[
        "run",
        FILE,
        "--strategy",
        "unit_of_order",
        "--trace",
        &trace,
    ]);
    assert_eq!(code, 0, "{err}");
    let (_, table, err) = common::sim(&["judge", &trace]);
    let lines: Vec<&str> = table.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("strategy"))
        .expect(&err);
    let cols: Vec<&str> = lines[head].split_whitespace().collect();
    let row: Vec<&str> = lines[head + 2].split_whitespace().collect();
    let i = cols.iter().position(|c| *c == "incomplete").expect(&table);
    assert_eq!(row[i], "2", "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
