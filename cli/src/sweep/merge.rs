//! `sim merge`: the shards of a sweep, combined into the bytes of one unsharded sweep.

use super::{finalize, parse_rows, slice_len, Manifest, MANIFEST, RUNS};
use crate::CliError;
use std::path::{Path, PathBuf};

/// `sim merge`: combines the shards' directories into the outputs one unsharded sweep writes.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<String>, CliError> {
    let mut manifests = Vec::new();
    let mut rows = Vec::new();
    for d in dirs {
        let path = d.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            CliError::Usage(format!(
                "{}: {e} (is {} the --out of a finished `sim sweep --shard`?)",
                path.display(),
                d.display()
            ))
        })?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| {
            CliError::Usage(format!("{}: not a sweep manifest: {e}", path.display()))
        })?;
        let runs_path = d.join(RUNS);
        let bytes = std::fs::read(&runs_path)
            .map_err(|e| CliError::Usage(format!("{}: {e}", runs_path.display())))?;
        let mine = parse_rows(&m, &bytes);
        if mine.len() as u64 != slice_len(&m) {
            return Err(CliError::Usage(format!(
                "{}: {} of the shard's {} runs are there",
                runs_path.display(),
                mine.len(),
                slice_len(&m)
            )));
        }
        rows.extend(mine);
        manifests.push((d.clone(), m));
    }
    let Some((_, first)) = manifests.first() else {
        return Err(CliError::Usage("merge: no directories given".into()));
    };
    let whole = Manifest {
        shard: None,
        ..first.clone()
    };
    for (d, m) in &manifests {
        if (Manifest {
            shard: None,
            ..m.clone()
        }) != whole
        {
            return Err(CliError::Usage(format!(
                "{} holds another sweep (`{}`), not `{}`",
                d.display(),
                m.command(),
                whole.command()
            )));
        }
    }
    rows.sort_by_key(|r| r[0].parse::<u64>().unwrap_or(u64::MAX));
    for (i, r) in rows.iter().enumerate() {
        let run: u64 = r[0].parse().unwrap_or(u64::MAX);
        if run != i as u64 {
            let what = if run < i as u64 { "twice" } else { "missing" };
            let which = if run < i as u64 { run } else { i as u64 };
            return Err(CliError::Usage(format!(
                "merge: run {which} is {what}: give every shard exactly once"
            )));
        }
    }
    if rows.len() as u64 != whole.runs {
        return Err(CliError::Usage(format!(
            "merge: {} of {} runs present: some shards are missing",
            rows.len(),
            whole.runs
        )));
    }
    finalize(out, &whole, &rows)
}
