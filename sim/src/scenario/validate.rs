//! Checks of meaning that types cannot express: counts, probabilities, names that must exist,
//! overlapping scripted faults. Every problem is reported, not just the first.

use super::{FieldError, PathSeg, Scenario};
use crate::time::Dur;

/// Largest number of keys, consumers, producers or brokers accepted: beyond this the per-key and
/// per-node state would not fit a reasonable memory budget.
pub const MAX_KEYS: u32 = 50_000_000;
/// Largest number of consumers, producers or brokers.
pub const MAX_NODES: u32 = 10_000;

fn p(segs: &[&str]) -> Vec<PathSeg> {
    segs.iter().map(|s| PathSeg::from(*s)).collect()
}

fn probability(v: f64) -> bool {
    v.is_finite() && (0.0..=1.0).contains(&v)
}

/// All problems of meaning in `s` (empty when it is valid).
pub fn validate(s: &Scenario) -> Vec<FieldError> {
    let mut e = Vec::new();
    let mut err = |path: Vec<PathSeg>, msg: String| e.push(FieldError::new(path, msg));

    if s.strategies.is_empty() {
        err(
            p(&["strategies"]),
            "list at least one strategy (see `sim list`)".into(),
        );
    }
    for (i, name) in s.strategies.iter().enumerate() {
        if s.strategies[..i].contains(name) {
            err(
                vec!["strategies".into(), PathSeg::Index(i)],
                format!("strategy {name:?} is listed twice"),
            );
        }
    }

    let w = &s.workload;
    if w.keys == 0 || w.keys > MAX_KEYS {
        err(
            p(&["workload", "keys"]),
            format!("must be between 1 and {MAX_KEYS}, got {}", w.keys),
        );
    }
    if w.messages > 0 && w.rate.as_per_sec() <= 0.0 {
        err(
            p(&["workload", "rate"]),
            "must be greater than 0 when messages are produced".into(),
        );
    }
    if w.rate.as_per_sec() > 1e9 {
        err(
            p(&["workload", "rate"]),
            "must be at most 1e9/s (the clock resolution is 1us)".into(),
        );
    }
    if !probability(w.group_header_missing) {
        err(
            p(&["workload", "group_header_missing"]),
            format!(
                "must be a probability in [0, 1], got {}",
                w.group_header_missing
            ),
        );
    }
    if !probability(w.poison_fraction) {
        err(
            p(&["workload", "poison_fraction"]),
            format!("must be a probability in [0, 1], got {}", w.poison_fraction),
        );
    }
    match (w.key_distribution, w.zipf_exponent) {
        (super::KeyDistribution::Zipf, Some(x)) if !(x.is_finite() && x > 0.0 && x <= 10.0) => err(
            p(&["workload", "zipf_exponent"]),
            format!("must be in (0, 10], got {x}"),
        ),
        (super::KeyDistribution::Uniform, Some(_)) => err(
            p(&["workload", "zipf_exponent"]),
            "only applies with key_distribution = \"zipf\"".into(),
        ),
        _ => {}
    }

    if s.producers.count == 0 || s.producers.count > MAX_NODES {
        err(
            p(&["producers", "count"]),
            format!(
                "must be between 1 and {MAX_NODES}, got {}",
                s.producers.count
            ),
        );
    }
    if s.producers.timestamp_resolution == Dur::ZERO {
        err(
            p(&["producers", "timestamp_resolution"]),
            "must be at least 1us".into(),
        );
    }

    if s.brokers.is_empty() {
        err(p(&["broker"]), "at least one [[broker]] is needed".into());
    }
    if s.brokers.len() > MAX_NODES as usize {
        err(p(&["broker"]), format!("at most {MAX_NODES} brokers"));
    }
    for (i, b) in s.brokers.iter().enumerate() {
        let path = |f: &str| vec![PathSeg::from("broker"), PathSeg::Index(i), PathSeg::from(f)];
        if b.name.trim().is_empty() {
            err(path("name"), "must not be empty".into());
        }
        if s.brokers[..i].iter().any(|o| o.name == b.name) {
            err(
                path("name"),
                format!("broker name {:?} is used twice", b.name),
            );
        }
        if b.page_size == 0 {
            err(path("page_size"), "must be at least 1".into());
        }
    }
    let names: Vec<&str> = s.brokers.iter().map(|b| b.name.as_str()).collect();
    let allowed = names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    for (section, list) in [
        ("producers", &s.producers.brokers),
        ("consumers", &s.consumers.brokers),
    ] {
        if let Some(list) = list {
            if list.is_empty() {
                err(
                    p(&[section, "brokers"]),
                    "must name at least one broker".into(),
                );
            }
            for (j, n) in list.iter().enumerate() {
                if !names.contains(&n.as_str()) {
                    err(
                        vec![section.into(), "brokers".into(), PathSeg::Index(j)],
                        format!("no broker named {n:?} (brokers: {allowed})"),
                    );
                }
            }
        }
    }

    let c = &s.consumers;
    if c.count == 0 || c.count > MAX_NODES {
        err(
            p(&["consumers", "count"]),
            format!("must be between 1 and {MAX_NODES}, got {}", c.count),
        );
    }
    if c.prefetch == 0 || c.prefetch > 100_000 {
        err(
            p(&["consumers", "prefetch"]),
            format!("must be between 1 and 100000, got {}", c.prefetch),
        );
    }
    if let Err(m) = c.service.0.check() {
        err(p(&["consumers", "service"]), m);
    }
    match (c.mode, &c.batch) {
        (super::ConsumerMode::Batch, None) => err(
            p(&["consumers", "mode"]),
            "mode = \"batch\" needs a [consumers.batch] table with at least `interval`".into(),
        ),
        (super::ConsumerMode::Listener, Some(_)) => err(
            p(&["consumers", "batch"]),
            "[consumers.batch] only applies with mode = \"batch\"".into(),
        ),
        (_, Some(b)) => {
            if b.interval == Dur::ZERO {
                err(
                    p(&["consumers", "batch", "interval"]),
                    "must be longer than 0".into(),
                );
            }
            if !(b.retry_multiplier.is_finite() && (1.0..=100.0).contains(&b.retry_multiplier)) {
                err(
                    p(&["consumers", "batch", "retry_multiplier"]),
                    format!("must be in [1, 100], got {}", b.retry_multiplier),
                );
            }
        }
        _ => {}
    }

    let r = &s.redelivery;
    if !(r.multiplier.is_finite() && (1.0..=100.0).contains(&r.multiplier)) {
        err(
            p(&["redelivery", "multiplier"]),
            format!("must be in [1, 100], got {}", r.multiplier),
        );
    }
    if r.max_redeliveries < -1 || r.max_redeliveries > 1_000_000 {
        err(
            p(&["redelivery", "max_redeliveries"]),
            format!(
                "must be -1 (unlimited) or between 0 and 1000000, got {}",
                r.max_redeliveries
            ),
        );
    }
    if r.max_delay.is_some_and(|m| m < r.initial_delay) {
        err(
            p(&["redelivery", "max_delay"]),
            "must not be shorter than initial_delay".into(),
        );
    }
    if s.run.max_events == 0 {
        err(p(&["run", "max_events"]), "must be at least 1".into());
    }
    let need = s.estimated_memory_bytes();
    let budget = s.run.memory_budget_mb.saturating_mul(1024 * 1024);
    if need > budget {
        err(
            p(&["workload", "keys"]),
            format!(
                "{} keys need about {} MiB of per-key state ({} bytes each), more than the memory budget of {} MiB; lower the number of keys or raise [run] memory_budget_mb",
                w.keys,
                need / (1024 * 1024),
                Scenario::BYTES_PER_KEY,
                s.run.memory_budget_mb
            ),
        );
    }

    crate::faults::validate(s, &mut err);
    if let Some(sw) = &s.sweep {
        for (i, set) in sw.set.iter().enumerate() {
            let ok = set.split_once('=').is_some_and(|(path, values)| {
                !path.trim().is_empty() && values.split(',').all(|v| !v.trim().is_empty())
            });
            if !ok {
                err(
                    vec!["sweep".into(), "set".into(), PathSeg::Index(i)],
                    format!("{set:?}: write \"PATH=V1,V2,...\", e.g. \"consumers.count=1,2,4,8\""),
                );
            }
        }
        for (i, name) in sw.strategies.iter().enumerate() {
            if !s.strategies.contains(name) {
                err(
                    vec!["sweep".into(), "strategies".into(), PathSeg::Index(i)],
                    format!("{name:?} is not in the scenario's `strategies`"),
                );
            }
        }
    }
    if let Some(x) = &s.expect {
        for (path, msg) in crate::expect::validate(x, &s.strategies) {
            err(
                path.iter().map(|k| PathSeg::from(k.as_str())).collect(),
                msg,
            );
        }
    }
    e
}
