//! The shrunk case as a standalone scenario file: the scenario with scripted faults, the one
//! strategy, the property as `[expect]`, and comments saying what was found, how, and the
//! commands that show and check it.

use super::draw::Mix;
use super::shrink::{Case, Shrunk};
use super::Property;
use sim::expect::Expect;
use sim::{FaultPlan, Scenario};
use std::collections::BTreeMap;
use std::path::Path;

/// What the file says about its origin.
pub struct Context<'a> {
    /// The explored scenario file, as given.
    pub file: &'a str,
    /// The strategy.
    pub strategy: &'a str,
    /// The exploration's seed.
    pub seed: u64,
    /// `--runs`.
    pub runs: u64,
    /// The failing run's index.
    pub run: u64,
    /// Its draw.
    pub mix: &'a Mix,
    /// Its scenario (random faults as drawn).
    pub original: &'a Scenario,
    /// The property.
    pub property: &'a Property,
    /// The bound that fails.
    pub bound: usize,
    /// Its figure on the run.
    pub measured: f64,
    /// The shrunk case.
    pub shrunk: &'a Shrunk<Case>,
    /// Its figure on the shrunk case.
    pub shrunk_measured: f64,
    /// Where the file goes.
    pub target: &'a Path,
}

/// `NAME.STRATEGY.toml`, NAME the scenario's name with anything but letters, digits, `-` and `_`
/// replaced.
pub fn file_name(sc: &Scenario, file: &Path, strategy: &str) -> String {
    let name: String = crate::scenario_name(sc, file)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // `name = ""` would write a hidden file `.STRATEGY.toml`.
    let name = if name.is_empty() { "scenario" } else { &name };
    format!("{name}.{strategy}.toml")
}

fn size(sc: &Scenario) -> String {
    let n = |x: u64, one: &str, many: &str| format!("{x} {}", if x == 1 { one } else { many });
    [
        n(sc.workload.messages, "message", "messages"),
        n(sc.workload.keys as u64, "key", "keys"),
        n(sc.consumers.count as u64, "consumer", "consumers"),
        n(sc.producers.count as u64, "producer", "producers"),
        n(sc.faults.len() as u64, "fault entry", "fault entries"),
    ]
    .join(", ")
}

/// The command that found it.
fn command(ctx: &Context) -> String {
    format!(
        "sim explore {} --strategy {} --seed {} --runs {}",
        ctx.file, ctx.strategy, ctx.seed, ctx.runs
    )
}

/// The lines `sim explore` prints about the result.
pub fn summary_lines(ctx: &Context) -> String {
    let s = ctx.shrunk;
    let (field, bound) = &ctx.property.bounds[ctx.bound];
    let mut out = format!(
        "shrunk in {} candidate runs{}: {}\n  from {}\n  to   {}\n",
        s.tries,
        if s.local_minimum {
            " to a local minimum (no single reduction step still fails)"
        } else {
            " (not a local minimum: the run budget ran out, or the faults stayed random)"
        },
        format_args!("{field} = {} (must be {bound})", ctx.shrunk_measured),
        size(ctx.original),
        size(&s.value.sc),
    );
    let plan = FaultPlan::resolve(&s.value.sc, s.value.seed);
    for l in plan.describe(&s.value.sc) {
        out.push_str(&format!("  {l}\n"));
    }
    let path = ctx.target.display();
    out.push_str(&format!("wrote {path}\n"));
    out.push_str(&format!(
        "show it:  sim trace {path} --strategy {}\ncheck it: sim check {path}\n",
        ctx.strategy
    ));
    out
}

/// The scenario the file holds: the shrunk one, with only the strategy, its seed, the property
/// as `[expect.all]`, and neither `[explore]` nor `[sweep]`.
pub fn scenario(base: &Scenario, ctx: &Context) -> Scenario {
    let c = &ctx.shrunk.value;
    let mut sc = c.sc.clone();
    let stem = ctx
        .target
        .file_stem()
        .map(|s| s.to_string_lossy().replace('.', "-"))
        .unwrap_or_else(|| "explored".into());
    sc.name = Some(stem);
    let (field, bound) = &ctx.property.bounds[ctx.bound];
    sc.description = Some(format!(
        "found by sim explore: {} breaks {field} {bound}",
        ctx.strategy
    ));
    sc.seed = c.seed;
    sc.strategies = vec![ctx.strategy.to_string()];
    sc.strategy = base
        .strategy
        .iter()
        .filter(|(k, _)| *k == ctx.strategy)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    sc.explore = None;
    sc.sweep = None;
    let mut all = BTreeMap::new();
    for (f, b) in &ctx.property.bounds {
        all.insert(f.clone(), *b);
    }
    sc.expect = Some(Expect {
        seeds: None,
        fraction: 1.0,
        bounds: BTreeMap::from([("all".to_string(), all)]),
    });
    sc
}

/// The file's text.
pub fn scenario_text(base: &Scenario, ctx: &Context) -> String {
    let sc = scenario(base, ctx);
    let s = ctx.shrunk;
    let (field, bound) = &ctx.property.bounds[ctx.bound];
    let path = ctx.target.display();
    let mut out = String::new();
    let mut c = |l: &str| {
        if l.is_empty() {
            out.push_str("#\n");
        } else {
            out.push_str(&format!("# {l}\n"));
        }
    };
    c(&format!(
        "{} breaks `{field} {bound}`: a failing fault schedule found by `sim explore` and shrunk.",
        ctx.strategy
    ));
    c("");
    c(&format!("Found by: {}", command(ctx)));
    let story = format!(
        "Run {} (seed {}) drew the fault mix: {}; it measured {field} = {} on {}. Shrunk in {} \
         candidate runs{}, each the same seed with the random faults scripted at the times they \
         fired, to {}: {field} = {} here.",
        ctx.run,
        ctx.mix.seed,
        ctx.mix.describe(),
        ctx.measured,
        size(ctx.original),
        s.tries,
        if s.local_minimum {
            " to a local minimum (no single reduction step still fails)"
        } else {
            " (not a local minimum: the run budget ran out, or the faults stayed random)"
        },
        size(&sc),
        ctx.shrunk_measured
    );
    for l in wrap(&story, 96) {
        c(&l);
    }
    if !s.steps.is_empty() {
        for l in wrap(
            &format!(
                "Steps taken ({}): {}.",
                s.steps.len(),
                merged_steps(&s.steps).join("; ")
            ),
            96,
        ) {
            c(&l);
        }
    }
    c("");
    c(&format!(
        "Show it:  sim trace {path} --strategy {}",
        ctx.strategy
    ));
    c(&format!(
        "Check it: sim check {path}    (exit 1 while the weakness is there)"
    ));
    c("The [expect] section is the property explored: put another strategy in `strategies` to see");
    c("whether it holds there. Keep the file as a regression test.");
    out.push('\n');
    let plan = FaultPlan::resolve(&sc, sc.seed);
    let mut fault = 0usize;
    for line in compact_toml(&sc).lines() {
        if line == "[[fault]]" {
            let what: Vec<String> = plan
                .faults
                .iter()
                .filter(|p| p.source == fault)
                .map(|p| p.describe(&sc))
                .collect();
            out.push_str(&format!("# {}\n", what.join("; ")));
            fault += 1;
        } else if line.starts_with("[expect") && !out.contains("\n[expect") {
            out.push_str(&format!(
                "# The property: `sim check` fails on `{field} {bound}`.\n"
            ));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `sc` as TOML a person reads: constant durations as plain strings, distributions as inline
/// tables, and no field that only repeats its default (each is dropped if the file loads to the
/// same scenario without it).
pub fn compact_toml(sc: &Scenario) -> String {
    use toml_edit::{DocumentMut, Item, Value};
    let full = sc.to_toml();
    let Ok(mut doc) = full.parse::<DocumentMut>() else {
        return full;
    };
    // Distributions: `{ dist = "constant", value = "5ms" }` -> "5ms"; others inline.
    let inline = |item: &mut Item| {
        let Some(t) = item.as_table() else { return };
        let constant = t.get("dist").and_then(|d| d.as_str()) == Some("constant");
        let new = match (constant, t.get("value").and_then(|v| v.as_str())) {
            (true, Some(v)) => Item::Value(Value::from(v)),
            _ => Item::Value(Value::InlineTable(t.clone().into_inline_table())),
        };
        *item = new;
    };
    // Removed and inserted again, so the key is formatted as a new one (`key = value`).
    let reinsert = |tb: &mut toml_edit::Table, key: &str| {
        if let Some(mut item) = tb.remove(key) {
            inline(&mut item);
            tb.insert(key, item);
        }
    };
    if let Some(c) = doc.get_mut("consumers").and_then(|c| c.as_table_mut()) {
        reinsert(c, "service");
    }
    if let Some(faults) = doc
        .get_mut("fault")
        .and_then(|f| f.as_array_of_tables_mut())
    {
        for f in faults.iter_mut() {
            reinsert(f, "for");
        }
    }
    let same = |doc: &DocumentMut| {
        sim::scenario::load_str("shrunk", &doc.to_string(), &|_| Vec::new())
            .is_ok_and(|s| s.to_toml() == full)
    };
    if !same(&doc) {
        return full;
    }
    // Drop the keys that repeat a default, then the tables left empty.
    let tables: Vec<String> = doc.iter().map(|(k, _)| k.to_string()).collect();
    for t in tables {
        let keys: Vec<(Option<usize>, String)> = match doc.get(&t) {
            Some(Item::Table(tb)) => tb.iter().map(|(k, _)| (None, k.to_string())).collect(),
            Some(Item::ArrayOfTables(a)) => a
                .iter()
                .enumerate()
                .flat_map(|(i, tb)| tb.iter().map(move |(k, _)| (Some(i), k.to_string())))
                .collect(),
            _ => continue,
        };
        for (i, k) in keys {
            let mut trial = doc.clone();
            let removed = match (trial.get_mut(&t), i) {
                (Some(Item::Table(tb)), None) => tb.remove(&k).is_some(),
                (Some(Item::ArrayOfTables(a)), Some(i)) => {
                    a.get_mut(i).and_then(|tb| tb.remove(&k)).is_some()
                }
                _ => false,
            };
            if removed && same(&trial) {
                doc = trial;
            }
        }
        if let Some(Item::Table(tb)) = doc.get_mut(&t) {
            // A header over nothing but sub-tables (`[expect]` over `[expect.all]`) is implied.
            if !tb.is_empty() && tb.iter().all(|(_, v)| v.is_table()) {
                tb.set_implicit(true);
            }
        }
        let empty = matches!(doc.get(&t), Some(Item::Table(tb)) if tb.is_empty());
        if empty {
            let mut trial = doc.clone();
            trial.remove(&t);
            if same(&trial) {
                doc = trial;
            }
        }
    }
    // Top-level keys that repeat a default.
    let top: Vec<String> = doc
        .iter()
        .filter(|(_, v)| v.is_value())
        .map(|(k, _)| k.to_string())
        .collect();
    for k in top {
        let mut trial = doc.clone();
        trial.remove(&k);
        if same(&trial) {
            doc = trial;
        }
    }
    doc.to_string()
}

/// The steps, runs of the same count merged: `messages 1000 -> 500; messages 500 -> 250` reads
/// `messages 1000 -> 250`.
pub fn merged_steps(steps: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in steps {
        let parts: Option<(&str, &str, &str)> = s.split_once(" -> ").and_then(|(a, b)| {
            let (field, from) = a.rsplit_once(' ')?;
            from.parse::<u64>().ok()?;
            let to = b.split(' ').next()?;
            to.parse::<u64>().ok()?;
            Some((field, from, to))
        });
        if let (Some((field, _, to)), Some(last)) = (parts, out.last_mut()) {
            if let Some((lf, lfrom)) = last
                .split_once(" -> ")
                .and_then(|(a, _)| a.rsplit_once(' '))
                .filter(|(lf, _)| *lf == field)
                .map(|(lf, from)| (lf.to_string(), from.to_string()))
            {
                *last = format!("{lf} {lfrom} -> {to}");
                continue;
            }
        }
        out.push(match parts {
            Some((field, from, to)) => format!("{field} {from} -> {to}"),
            None => s.clone(),
        });
    }
    out
}

/// `text` cut into comment lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    // `A -> B` stays on one line.
    let text = text.replace(" -> ", "\u{0}->\u{0}");
    for w in text.split(' ').map(|w| w.replace('\u{0}', " ")) {
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_merge_by_field() {
        let steps: Vec<String> = [
            "messages 1000 -> 500 (the first half)",
            "messages 500 -> 499",
            "keys 20 -> 10",
            "drop fault db_outage at 1s",
            "keys 10 -> 5",
            "keys 5 -> 4",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            merged_steps(&steps),
            [
                "messages 1000 -> 499",
                "keys 20 -> 10",
                "drop fault db_outage at 1s",
                "keys 10 -> 4"
            ]
        );
    }

    #[test]
    fn wrapping_keeps_words() {
        assert_eq!(wrap("aa bb cc dd", 5), ["aa bb", "cc dd"]);
        assert_eq!(wrap("keys 20 -> 10; x", 8), ["keys", "20 -> 10;", "x"]);
    }
}
