//! The committed reports/ are what `sim report scenarios/ --out reports/` makes today: regenerate
//! them into a temporary directory and compare every byte. A failure here means the simulator's
//! behaviour (or a chart) changed: review the difference, then regenerate with
//! `cargo run --release --bin sim -- report scenarios/ --out reports/` and commit it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(root, &p, out);
        } else if p.file_name().is_some_and(|n| n != ".gitkeep") {
            out.insert(
                p.strip_prefix(root).unwrap().to_path_buf(),
                std::fs::read(&p).unwrap(),
            );
        }
    }
}

#[test]
fn committed_reports_are_regenerated_byte_for_byte() {
    crate::common::at_root();
    let tmp = tempfile::tempdir().unwrap();
    // Relative paths, as the README's command uses them: they appear in the reports' repro lines.
    let names = ordsim::library::report(&[PathBuf::from("scenarios")], tmp.path(), 2).unwrap();
    assert!(names.iter().any(|n| n == "failover"));
    let mut fresh = BTreeMap::new();
    walk(tmp.path(), tmp.path(), &mut fresh);
    let mut committed = BTreeMap::new();
    walk(Path::new("reports"), Path::new("reports"), &mut committed);
    let regen =
        "regenerate with `cargo run --release --bin sim -- report scenarios --out reports` \
                 after reviewing why";
    let missing: Vec<_> = fresh
        .keys()
        .filter(|k| !committed.contains_key(*k))
        .collect();
    let extra: Vec<_> = committed
        .keys()
        .filter(|k| !fresh.contains_key(*k))
        .collect();
    assert!(missing.is_empty(), "not committed: {missing:?}; {regen}");
    assert!(
        extra.is_empty(),
        "committed but no longer generated: {extra:?}; {regen}"
    );
    let differ: Vec<_> = fresh
        .iter()
        .filter(|(k, v)| committed[*k] != **v)
        .map(|(k, _)| k)
        .collect();
    assert!(
        differ.is_empty(),
        "differ from the committed reports: {differ:?}; {regen}"
    );
}
