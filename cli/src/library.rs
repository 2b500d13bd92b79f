//! `sim report`: the committed reports of a scenario library. Each scenario runs at its own seed
//! into `OUT/NAME/` (table, chart, report.md), its `[sweep]` section (if any) into
//! `OUT/NAME/sweep/`, and `OUT/README.md` indexes them. Everything is a function of the scenario
//! files, so regenerating gives the same bytes and a behaviour change shows up as a diff.

use crate::check::scenario_files;
use crate::sweep::{sweep, SweepRequest};
use crate::{create_dir, load, run_scenario, scenario_name, write_atomic, write_outputs};
use crate::{CliError, RunRequest};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// What one scenario contributed.
struct Entry {
    name: String,
    file: PathBuf,
    description: String,
    strategies: usize,
    sweep: bool,
}

/// Regenerates the reports of every scenario under `paths` into `out`; returns the scenario names.
pub fn report(paths: &[PathBuf], out: &Path, jobs: usize) -> Result<Vec<String>, CliError> {
    let files = scenario_files(paths)?;
    let mut loaded = Vec::new();
    for f in &files {
        let sc = load(f)?;
        let name = scenario_name(&sc, f);
        // The name is a folder under OUT: it must not climb out of it or name OUT itself.
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
            return Err(CliError::Usage(format!(
                "{}: the scenario name {name:?} cannot name a report folder (no '/', '\\', '.' or '..')",
                f.display()
            )));
        }
        let clash: Option<&PathBuf> = loaded
            .iter()
            .find(|(n, _, _): &&(String, PathBuf, _)| *n == name)
            .map(|(_, other, _)| other);
        if let Some(other) = clash {
            return Err(CliError::Usage(format!(
                "{} and {} are both named {name:?}: their reports would overwrite each other",
                other.display(),
                f.display()
            )));
        }
        loaded.push((name, f.clone(), sc));
    }
    create_dir(out)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()
        .map_err(|e| CliError::Usage(format!("--jobs: {e}")))?;
    let entries: Vec<Result<Entry, CliError>> = pool.install(|| {
        loaded
            .par_iter()
            .map(|(name, file, sc)| {
                let dir = out.join(name);
                let r = run_scenario(sc.clone(), file, &RunRequest::default(), None)?;
                write_outputs(&r, file, &dir)?;
                if let Some(sw) = &sc.sweep {
                    sweep(&SweepRequest {
                        file: file.clone(),
                        seeds: sw.seeds.to_string(),
                        sets: sw.set.clone(),
                        strategies: sw.strategies.clone(),
                        jobs: 1,
                        out: dir.join("sweep"),
                        shard: None,
                        resume: false,
                        max_events: None,
                        progress: false,
                    })?;
                }
                Ok(Entry {
                    name: name.clone(),
                    file: file.clone(),
                    description: sc.description.clone().unwrap_or_default(),
                    strategies: r.summary.strategies.len(),
                    sweep: sc.sweep.is_some(),
                })
            })
            .collect()
    });
    let entries = entries.into_iter().collect::<Result<Vec<_>, _>>()?;
    write_atomic(&out.join("README.md"), index(&entries, paths).as_bytes())?;
    Ok(entries.into_iter().map(|e| e.name).collect())
}

/// The index page: how to regenerate, the headline charts, one row per scenario.
fn index(entries: &[Entry], paths: &[PathBuf]) -> String {
    let inputs: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let mut s = String::from("# Reports of the bundled scenarios\n\n");
    s.push_str(&format!(
        "Generated into this directory by `sim report {} --out DIR` from the scenario files alone \
         (each at its own seed; \
         sweeps over the seeds their `[sweep]` section names), so the same command gives the same \
         bytes. `cargo test` regenerates them and fails on any difference: a change in the \
         simulator's behaviour shows up here as a reviewable diff.\n\n",
        inputs.join(" "),
    ));
    for e in entries.iter().filter(|e| e.sweep) {
        s.push_str(&format!(
            "## {}: sweep\n\n![{} sweep]({}/sweep/sweep.svg)\n\n[report]({}/sweep/report.md)\n\n",
            e.name, e.name, e.name, e.name
        ));
    }
    s.push_str("## Scenarios\n\n");
    let header: Vec<String> = ["scenario", "file", "strategies", "what it shows", "reports"]
        .map(String::from)
        .to_vec();
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let mut links = format!("[run]({}/report.md)", e.name);
            if e.sweep {
                links.push_str(&format!(", [sweep]({}/sweep/report.md)", e.name));
            }
            vec![
                e.name.clone(),
                format!("`{}`", e.file.display()),
                e.strategies.to_string(),
                e.description.clone(),
                links,
            ]
        })
        .collect();
    s.push_str(&crate::report::markdown_table(&header, &rows, header.len()));
    s
}
