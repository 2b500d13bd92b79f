//! The fault mix of one exploration run: which fault kinds are on, at which rate and for how long,
//! and the run's seed, all drawn from `--seed` and the run's index only (swarm testing: each run
//! turns on a random subset of the kinds, so a weakness that another kind would mask still shows).

use crate::CliError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::dist::{DurDist, DurSpec};
use sim::scenario::{ExploreSpec, Fault, FaultKind};
use sim::time::{Dur, Rate};
use sim::Scenario;

/// One kind the runs may turn on: its `[[fault]]` template (kind, target and parameters) and the
/// ranges its rate and mean duration are drawn from.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The entry a drawn fault copies (its `rate` and `for` are replaced by the draw).
    pub template: Fault,
    /// Rate range, occurrences per second (low, high).
    pub rate: (f64, f64),
    /// Range of the mean duration, microseconds (low, high); None for an instant kind.
    pub duration: Option<(f64, f64)>,
}

/// What the runs draw from: the scenario's `[explore]` section resolved against its faults.
#[derive(Clone, Debug)]
pub struct Palette {
    /// One slot per kind, in the order of [`FaultKind::ALL`].
    pub slots: Vec<Slot>,
    /// At most this many kinds on in one run.
    pub max_kinds: usize,
}

/// One run's draw.
#[derive(Clone, Debug)]
pub struct Mix {
    /// The run's seed.
    pub seed: u64,
    /// The random `[[fault]]` entries it adds to the scenario's scripted ones.
    pub faults: Vec<Fault>,
}

/// A drawn fault of `kind` when the scenario has no entry of it to copy, with the parameters
/// its description gives ([`sim::faults::KindSpec::explore_default`]).
fn default_template(kind: FaultKind) -> Fault {
    let mut f = Fault {
        rate: Some(Rate::per_sec(1.0)),
        ..Fault::of(kind)
    };
    (kind.spec().explore_default)(&mut f);
    f
}

/// The mean of a fault's `for`, in microseconds.
fn mean_for(f: &Fault) -> Option<f64> {
    f.duration.as_ref().map(|d| d.0.mean_micros())
}

impl Palette {
    /// The palette of `sc`: the kinds `[explore] kinds` lists, else those of the scenario's
    /// random `[[fault]]` entries, else every kind that needs no parameter the explorer cannot
    /// choose. A kind with a random entry copies it (targets, parameters) and draws its rate and
    /// mean duration within a factor 4 of the entry's; any other kind draws relative to the fault
    /// window (0.5 to 8 occurrences per window, a mean duration of 1/50 to 1/5 of it). `[explore]
    /// rate` and `duration` replace these ranges for every kind.
    pub fn of(sc: &Scenario) -> Result<Palette, CliError> {
        let spec = sc.explore.clone().unwrap_or_default();
        let random: Vec<&Fault> = sc.faults.iter().filter(|f| f.rate.is_some()).collect();
        let explicit = spec.kinds.is_some();
        let kinds: Vec<FaultKind> = match &spec.kinds {
            Some(k) => k.clone(),
            None if !random.is_empty() => FaultKind::ALL
                .into_iter()
                .filter(|k| random.iter().any(|f| f.kind == *k))
                .collect(),
            None => FaultKind::ALL.to_vec(),
        };
        let window = sc.fault_window_micros().max(1) as f64;
        let mut slots = Vec::new();
        let check = TemplateCheck::new(sc);
        for kind in kinds {
            let own = random.iter().find(|f| f.kind == kind).copied();
            let template = own.cloned().unwrap_or_else(|| default_template(kind));
            if let Some(problem) = check.problem(&template) {
                if explicit {
                    return Err(CliError::Usage(format!(
                        "[explore] kinds: {} cannot be drawn here: {problem}",
                        kind.name()
                    )));
                }
                continue;
            }
            let rate = match (spec.rate, own.and_then(|f| f.rate)) {
                (Some([lo, hi]), _) => (lo.as_per_sec(), hi.as_per_sec()),
                (None, Some(r)) => (r.as_per_sec() / 4.0, (r.as_per_sec() * 4.0).min(1000.0)),
                // Both ends under the loader's 1000/s: in a window under 500us the low end
                // (0.5 per window) was above the high one, and draws went past 1000/s.
                (None, None) => {
                    let hi = (8e6 / window).min(1000.0);
                    ((0.5e6 / window).min(hi), hi)
                }
            };
            let duration = kind
                .takes("for")
                .then(|| match (&spec, own.and_then(mean_for)) {
                    (
                        ExploreSpec {
                            duration: Some([lo, hi]),
                            ..
                        },
                        _,
                    ) => (lo.0 as f64, hi.0 as f64),
                    (_, Some(m)) if m > 0.0 => (m / 4.0, m * 4.0),
                    _ => ((window / 50.0).max(1000.0), (window / 5.0).max(1000.0)),
                });
            slots.push(Slot {
                template,
                rate,
                duration,
            });
        }
        if slots.is_empty() {
            return Err(CliError::Usage(
                "nothing to explore: no fault kind can be drawn for this scenario (list some in [explore] kinds)".into(),
            ));
        }
        let max_kinds = spec
            .max_kinds
            .map_or(slots.len(), |m| (m as usize).min(slots.len()));
        let palette = Palette { slots, max_kinds };
        // The heaviest draw (every kind on, at its highest rate and longest mean) must be a
        // scenario the loader accepts: a rate range too high for the fault window is refused
        // here, not discovered as a run that takes an hour.
        let mut heaviest = palette.draw(0, 0);
        heaviest.faults = palette
            .slots
            .iter()
            .map(|s| {
                let mut f = s.template.clone();
                f.at = None;
                f.rate = Some(Rate::per_sec(s.rate.1));
                f.duration = s.duration.map(|(_, hi)| {
                    DurSpec(DurDist::Exponential {
                        mean: Dur(hi.round().max(1.0) as u64),
                    })
                });
                f
            })
            .collect();
        let mut worst = heaviest.apply(sc);
        worst.expect = None;
        worst.sweep = None;
        if let Some(e) = sim::scenario::validate(&worst).into_iter().next() {
            return Err(CliError::Usage(format!(
                "[explore]: at the top of its ranges a run would not load: {}: {}",
                e.path_string(),
                e.message
            )));
        }
        Ok(palette)
    }

    /// One line per kind: its ranges.
    pub fn describe(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|s| {
                let mut l = format!(
                    "{} at {} to {} per minute",
                    s.template.kind.name(),
                    per_min(s.rate.0),
                    per_min(s.rate.1)
                );
                if let Some((lo, hi)) = s.duration {
                    l.push_str(&format!(
                        ", for a mean of {} to {}",
                        Dur(lo as u64).readable(),
                        Dur(hi as u64).readable()
                    ));
                }
                l
            })
            .collect()
    }

    /// The draw of run `index` under `seed`: a function of the two only.
    pub fn draw(&self, seed: u64, index: u64) -> Mix {
        let mut rng = ChaCha8Rng::seed_from_u64(mix64(seed, index));
        let run_seed = rng.random::<u32>() as u64;
        let n = self.slots.len();
        // Swarm testing: each kind on with probability 1/2, at least one, at most max_kinds.
        let mut on: Vec<usize> = (0..n).filter(|_| rng.random_bool(0.5)).collect();
        if on.is_empty() {
            on.push(rng.random_range(0..n));
        }
        while on.len() > self.max_kinds {
            let drop = rng.random_range(0..on.len());
            on.remove(drop);
        }
        let log_uniform = |rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)| {
            if hi <= lo {
                lo
            } else {
                (rng.random_range(lo.ln()..=hi.ln())).exp()
            }
        };
        let faults = on
            .into_iter()
            .map(|i| {
                let s = &self.slots[i];
                let mut f = s.template.clone();
                f.at = None;
                f.rate = Some(Rate::per_sec(log_uniform(&mut rng, s.rate)));
                f.duration = s.duration.map(|d| {
                    let mean = log_uniform(&mut rng, d).round().max(1.0) as u64;
                    DurSpec(DurDist::Exponential { mean: Dur(mean) })
                });
                f
            })
            .collect();
        Mix {
            seed: run_seed,
            faults,
        }
    }
}

impl Mix {
    /// The scenario of this run: `sc`'s scripted faults and the drawn random ones.
    pub fn apply(&self, sc: &Scenario) -> Scenario {
        let mut out = sc.clone();
        out.faults.retain(|f| f.at.is_some());
        out.faults.extend(self.faults.iter().cloned());
        out
    }

    /// The drawn faults in a few words: `broker_crash 2.1/min for ~12s, cache_collapse 0.5/min`.
    pub fn describe(&self) -> String {
        self.faults
            .iter()
            .map(|f| {
                let mut s = format!(
                    "{} {}/min",
                    f.kind.name(),
                    per_min(f.rate.map_or(0.0, |r| r.as_per_sec()))
                );
                if let Some(m) = mean_for(f) {
                    s.push_str(&format!(" for ~{}", Dur(m as u64).readable()));
                }
                s
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn per_min(per_sec: f64) -> String {
    let x = per_sec * 60.0;
    let digits = if x >= 10.0 {
        1
    } else if x >= 1.0 {
        2
    } else {
        3
    };
    format!("{x:.digits$}")
}

/// What a drawn fault would be refused for in a scenario: the scenario without its faults,
/// expectations and sweep, validated once, and what that alone is refused for, so that only what
/// a fault adds counts (a kind refused with a setting is reported at the setting: a producer
/// crash beside `[broker.replication]`, at `producers.commit_interval`).
struct TemplateCheck {
    base: Scenario,
    without: Vec<(String, String)>,
}

impl TemplateCheck {
    fn new(sc: &Scenario) -> Self {
        let mut base = sc.clone();
        base.faults = Vec::new();
        base.expect = None;
        base.sweep = None;
        let without = refusals(&base).collect();
        TemplateCheck { base, without }
    }

    /// Why a drawn entry like `template` would not load, if it would not.
    fn problem(&self, template: &Fault) -> Option<String> {
        let mut f = template.clone();
        f.at = None;
        f.rate = Some(Rate::per_sec(1.0));
        if f.kind.takes("for") {
            f.duration = Some(DurSpec(DurDist::Constant {
                value: Dur::from_secs(1),
            }));
        }
        let mut one = self.base.clone();
        one.faults = vec![f];
        refusals(&one)
            .find(|e| !self.without.contains(e))
            .map(|(path, message)| format!("{path}: {message}"))
    }
}

/// What the loader refuses `sc` for, as (path, message).
fn refusals(sc: &Scenario) -> impl Iterator<Item = (String, String)> {
    sim::scenario::validate(sc)
        .into_iter()
        .map(|e| (e.path_string(), e.message))
}

/// SplitMix64's finaliser: a well-mixed 64-bit value of `seed` and `index`.
pub fn mix64(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Scenario {
        crate::load_text(
            "t.toml",
            &format!(
                r#"
strategies = ["competing"]
[workload]
messages = 1000
rate = "100/s"
keys = 10
[[broker]]
name = "a"
[[broker]]
name = "b"
[consumers]
count = 2
service = "1ms"
{extra}
"#
            ),
        )
        .unwrap()
    }

    #[test]
    fn the_draw_depends_on_the_seed_and_index_only() {
        let p = Palette::of(&scenario("")).unwrap();
        let d = |s, i| format!("{:?}", p.draw(s, i));
        assert_eq!(d(7, 3), d(7, 3));
        assert_ne!(d(7, 3), d(7, 4));
        assert_ne!(d(7, 3), d(8, 3));
        // Every drawn scenario loads.
        for i in 0..200 {
            let sc = p.draw(1, i).apply(&scenario(""));
            let problems = sim::scenario::validate(&sc);
            assert!(problems.is_empty(), "run {i}: {problems:?}");
        }
    }

    #[test]
    fn without_faults_every_kind_is_in_the_palette_and_each_run_turns_some_on() {
        let sc = scenario("");
        let p = Palette::of(&sc).unwrap();
        // Every kind the explorer can give parameters to (a new kind with a required parameter
        // it does not know is left out until default_template learns it).
        let check = TemplateCheck::new(&sc);
        let drawable: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|k| check.problem(&default_template(*k)).is_none())
            .collect();
        assert!(drawable.len() >= 10, "{drawable:?}");
        let kinds: Vec<FaultKind> = p.slots.iter().map(|s| s.template.kind).collect();
        assert_eq!(kinds, drawable);
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..100 {
            let m = p.draw(1, i);
            assert!(!m.faults.is_empty());
            seen.extend(m.faults.iter().map(|f| f.kind));
        }
        assert_eq!(seen.len(), drawable.len(), "every kind drawn sometime");
    }

    #[test]
    fn the_explore_section_bounds_the_draw() {
        let sc = scenario(
            "[[fault]]\nkind = \"broker_crash\"\nrate = \"1/min\"\nfor = \"10s\"\nbroker = \"a\"\n\
             [[fault]]\nkind = \"db_outage\"\nrate = \"1/min\"\nfor = \"10s\"\n\
             [explore]\nkinds = [\"broker_crash\", \"cache_collapse\"]\nmax_kinds = 1\n\
             rate = [\"2/min\", \"4/min\"]\nduration = [\"1s\", \"2s\"]\n",
        );
        let p = Palette::of(&sc).unwrap();
        assert_eq!(p.slots.len(), 2);
        for i in 0..100 {
            let m = p.draw(3, i);
            assert_eq!(m.faults.len(), 1);
            let f = &m.faults[0];
            let r = f.rate.unwrap().as_per_sec() * 60.0;
            assert!((2.0 - 1e-9..=4.0 + 1e-9).contains(&r), "{r}");
            match f.kind {
                FaultKind::BrokerCrash => {
                    assert_eq!(f.broker.as_deref(), Some("a"), "the entry's target is kept");
                    let mean = mean_for(f).unwrap();
                    assert!((1e6..=2e6).contains(&mean), "{mean}");
                }
                FaultKind::CacheCollapse => assert!(f.duration.is_none()),
                k => panic!("{k:?} is not in the palette"),
            }
        }
    }

    /// A fault window under 500us (no messages, or `[run] fault_window = "100us"`): the default
    /// rate range stays low <= high <= 1000/s, and every draw is a scenario the loader accepts
    /// (the low end was 0.5e6 / window: 5000/s against a high end of 1000/s, and draws between
    /// them were above the loader's limit).
    #[test]
    fn a_tiny_fault_window_keeps_the_rate_range_in_order() {
        for extra in [
            "[run]\nfault_window = \"100us\"\n",
            "[run]\nfault_window = \"1us\"\n",
        ] {
            let sc = scenario(extra);
            let p = Palette::of(&sc).unwrap();
            for s in &p.slots {
                assert!(
                    s.rate.0 <= s.rate.1 && s.rate.1 <= 1000.0,
                    "{extra}: {:?}",
                    s.rate
                );
            }
            for i in 0..40 {
                let mix = p.draw(7, i);
                for f in &mix.faults {
                    let r = f.rate.unwrap().as_per_sec();
                    assert!(r > 0.0 && r <= 1000.0, "{extra} draw {i}: {r}/s");
                }
                let bad: Vec<_> = refusals(&mix.apply(&sc)).collect();
                assert!(bad.is_empty(), "{extra} draw {i}: {bad:?}");
            }
        }
    }

    #[test]
    fn ranges_too_heavy_for_the_window_are_refused() {
        let sc = scenario(
            "[run]\nfault_window = \"1000h\"\n[explore]\nkinds = [\"db_outage\"]\nrate = [\"1/s\", \"1000/s\"]\n",
        );
        let e = Palette::of(&sc).unwrap_err().to_string();
        assert!(
            e.contains("[explore]") && e.contains("fault[0].rate"),
            "{e}"
        );
    }

    #[test]
    fn random_entries_choose_the_kinds_and_centre_the_ranges() {
        let sc = scenario("[[fault]]\nkind = \"consumer_crash\"\nrate = \"4/min\"\nfor = \"8s\"\n");
        let p = Palette::of(&sc).unwrap();
        assert_eq!(p.slots.len(), 1);
        let s = &p.slots[0];
        assert!((s.rate.0 * 60.0 - 1.0).abs() < 1e-9 && (s.rate.1 * 60.0 - 16.0).abs() < 1e-9);
        assert_eq!(s.duration, Some((2e6, 32e6)));
    }
}
