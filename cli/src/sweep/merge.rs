//! `sim merge`: the shards of a sweep, combined into the bytes of one unsharded sweep.

use super::{
    csv_line, finalize, out_paths, parse_manifest, parse_rows, run_unit, runs_bytes_limit,
    slice_len, Manifest, SweepRequest, MANIFEST, MAX_MANIFEST_BYTES, RUNS,
};
use crate::CliError;
use sim::scenario::read_bounded;
use std::path::{Path, PathBuf};

/// `sim merge`: combines the shards' directories into the outputs one unsharded sweep writes.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<String>, CliError> {
    merge_verified(dirs, out, 0)
}

/// [`merge`], after re-running `verify` of the rows (evenly spaced over the run indices: no
/// randomness) and comparing each byte for byte with the row a shard saved. Runs are
/// deterministic, so a difference means an edited row (or another scenario file).
pub fn merge_verified(dirs: &[PathBuf], out: &Path, verify: u64) -> Result<Vec<String>, CliError> {
    if let Some(d) = dirs.iter().find(|d| crate::same_file(d, out)) {
        // The merged files would replace the shard's own: its rows stay in the whole, but the
        // shard is gone for any later merge or --resume.
        return Err(CliError::Usage(format!(
            "--out {} is the shard folder {} itself: the merged files would replace the shard's; \
             choose another folder",
            out.display(),
            d.display()
        )));
    }
    let mut manifests = Vec::new();
    let mut rows = Vec::new();
    for d in dirs {
        let path = d.join(MANIFEST);
        let bytes = read_bounded(&path, MAX_MANIFEST_BYTES).map_err(|e| {
            CliError::Usage(format!(
                "{}: {e} (is {} the --out of a finished `sim sweep --shard`?)",
                path.display(),
                d.display()
            ))
        })?;
        let m = parse_manifest(&bytes).map_err(|why| {
            CliError::Usage(format!("{}: not a sweep manifest: {why}", path.display()))
        })?;
        if m.shard.is_none() {
            return Err(CliError::Usage(format!(
                "{}: not a shard (`sim merge` combines the --out directories of `sim sweep --shard I/N`)",
                d.display()
            )));
        }
        let runs_path = d.join(RUNS);
        let bytes = read_bounded(&runs_path, runs_bytes_limit(&m))
            .map_err(|e| CliError::Usage(format!("{}: {e}", runs_path.display())))?;
        let mine = parse_rows(&m, &bytes, &runs_path.display().to_string(), 0)?;
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
    // Before the verification's runs: every file the merge writes.
    let inputs: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| [d.join(MANIFEST), d.join(RUNS)])
        .collect();
    let inputs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
    crate::check_outputs(Some(out), &out_paths(&whole, out, false), &inputs)?;
    if verify > 0 {
        verify_rows(&whole, &rows, verify)?;
    }
    finalize(out, &whole, &rows)
}

/// The run indices `--verify n` re-runs: `n` evenly spaced over `0..runs` (all when n >= runs).
pub fn verify_sample(runs: u64, n: u64) -> Vec<u64> {
    let n = n.min(runs);
    let mut v: Vec<u64> = (0..n)
        .map(|i| ((i as u128 * runs as u128) / n as u128) as u64)
        .collect();
    v.dedup();
    v
}

fn verify_rows(m: &Manifest, rows: &[Vec<String>], n: u64) -> Result<(), CliError> {
    let req = SweepRequest {
        file: PathBuf::from(&m.file),
        seeds: format!("{}..{}", m.seed_first, m.seed_last),
        sets: m
            .params
            .iter()
            .map(|p| format!("{}={}", p.path, p.values.join(",")))
            .collect(),
        strategies: if m.strategies_chosen {
            m.strategies.clone()
        } else {
            Vec::new()
        },
        jobs: 1,
        out: PathBuf::new(),
        shard: None,
        resume: false,
        max_events: m.max_events,
        progress: false,
    };
    let (now, scenarios) = super::plan(&req)?;
    if now.file_hash != m.file_hash {
        return Err(CliError::Usage(format!(
            "--verify: {} has changed since the sweep ran (its hash was {}, now {}): the rows cannot be re-run",
            m.file, m.file_hash, now.file_hash
        )));
    }
    for run in verify_sample(m.runs, n) {
        let again = run_unit(m, &scenarios, run)?;
        let saved = &rows[run as usize];
        if csv_line(&again) != csv_line(saved) {
            return Err(CliError::Usage(format!(
                "--verify: run {run} does not reproduce: the shard saved\n  {}\nbut running it again gives\n  {}\n(runs are deterministic: the saved row was edited, or made by another version)",
                String::from_utf8_lossy(&csv_line(saved)).trim_end(),
                String::from_utf8_lossy(&csv_line(&again)).trim_end()
            )));
        }
    }
    Ok(())
}
