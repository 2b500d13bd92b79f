//! Expectations: the `[expect]` section of a scenario file, and their verdicts.
//!
//! ```toml
//! [expect]
//! seeds = "1..20"            # every seed from 1 to 20 (both included); default: the scenario's seed
//! fraction = 1.0             # share of seeds on which each bound must hold (default 1)
//!
//! [expect.all]               # every strategy of the scenario
//! lost = 0
//! broker_crashes = ">= 1"    # coverage: proves the run did what it claims to test
//!
//! [expect.single]
//! ordering_violations = "> 0"      # a known weakness that must still show
//! "latency_ms.p99" = "< 5000"
//! ```
//!
//! A bound is a number (equality) or a string `"OP NUMBER"` with OP one of `==`, `!=`, `>`, `>=`,
//! `<`, `<=`; or a table `{ value = "> 0", fraction = 0.75 }` whose own share of seeds replaces the
//! block's `fraction` (for a claim that is probabilistic while the others are not). A name is any numeric summary field: `ordering_violations`, `latency_ms.p99` (or
//! `latency_ms_p99`), `coverage.broker_crashes` (or just `broker_crashes`).

use crate::summary::Metrics;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }
}

/// A bound on one figure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    /// The comparison.
    pub op: Op,
    /// The value compared with.
    pub value: f64,
    /// Share of seeds on which it must hold, when it differs from the block's `fraction`.
    pub fraction: Option<f64>,
}

impl Bound {
    /// Whether `self` and `other`, two bounds of one figure, make a range: one lower bound
    /// (`>`, `>=`) and one upper (`<`, `<=`), as `[expect]` writes one with two spellings of the
    /// figure (`"latency_ms.p99" = "> 3000"`, `latency_ms_p99 = "< 8000"`). Any other pair is a
    /// repeat or a contradiction (`lost = 0` and `lost = 1`: no run meets both), a mistake.
    pub fn makes_a_range_with(&self, other: &Bound) -> bool {
        let lower = |b: &Bound| matches!(b.op, Op::Gt | Op::Ge);
        let upper = |b: &Bound| matches!(b.op, Op::Lt | Op::Le);
        (lower(self) && upper(other)) || (upper(self) && lower(other))
    }

    /// Parses `"> 0"`, `">= 1500"`, `"0"`, `"== 3"`.
    pub fn parse(s: &str) -> Result<Bound, String> {
        let t = s.trim();
        let (op, rest) = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">=", Op::Ge),
            ("<=", Op::Le),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .iter()
        .find_map(|(p, op)| t.strip_prefix(p).map(|r| (*op, r)))
        .unwrap_or((Op::Eq, t));
        let value: f64 = rest.trim().parse().map_err(|_| {
            format!("invalid bound {s:?}: write a number or \"OP NUMBER\" with OP one of ==, !=, >, >=, <, <= (e.g. \"> 0\")")
        })?;
        if !value.is_finite() {
            return Err(format!("invalid bound {s:?}: the number must be finite"));
        }
        Ok(Bound {
            op,
            value,
            fraction: None,
        })
    }

    /// Whether `x` satisfies the bound.
    pub fn holds(&self, x: f64) -> bool {
        match self.op {
            Op::Eq => x == self.value,
            Op::Ne => x != self.value,
            Op::Gt => x > self.value,
            Op::Ge => x >= self.value,
            Op::Lt => x < self.value,
            Op::Le => x <= self.value,
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op.text(), self.value)?;
        if let Some(x) = self.fraction {
            write!(f, " on {}% of seeds", x * 100.0)?;
        }
        Ok(())
    }
}

impl Serialize for Bound {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = format!("{} {}", self.op.text(), self.value);
        match self.fraction {
            None => s.serialize_str(&text),
            Some(fraction) => {
                use serde::ser::SerializeStruct;
                let mut st = s.serialize_struct("Bound", 2)?;
                st.serialize_field("value", &text)?;
                st.serialize_field("fraction", &fraction)?;
                st.end()
            }
        }
    }
}

/// The table form of a bound: `{ value = "> 0", fraction = 0.75 }`.
struct BoundTable {
    value: BoundValue,
    fraction: f64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BoundValue {
    Int(i64),
    Float(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Bound {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bound, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Bound;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a number, a string such as \"> 0\" or \">= 1500\", or { value = \"> 0\", fraction = 0.75 }",
                )
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Bound, E> {
                Ok(Bound {
                    op: Op::Eq,
                    value: v as f64,
                    fraction: None,
                })
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Bound, E> {
                Ok(Bound {
                    op: Op::Eq,
                    value: v as f64,
                    fraction: None,
                })
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Bound, E> {
                Bound::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Bound, E> {
                Bound::parse(v).map_err(E::custom)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<Bound, A::Error> {
                // Read by hand, so that a dotted name (`coverage.reassignments = 2`, which TOML
                // reads as a table) is answered with how to write it.
                let (mut value, mut fraction) = (None, None);
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "value" => value = Some(m.next_value::<BoundValue>()?),
                        "fraction" => fraction = Some(m.next_value::<f64>()?),
                        other => {
                            return Err(de::Error::custom(format!(
                                "a table here is a bound {{ value = \"> 0\", fraction = 0.75 }}, \
                                 not a group of figures (`{other}`): quote a dotted name, \
                                 \"latency_ms.p99\" = \"< 50\", or write it with underscores \
                                 (latency_ms_p99; a coverage counter also by its own name)"
                            )))
                        }
                    }
                }
                let t = BoundTable {
                    value: value.ok_or_else(|| de::Error::missing_field("value"))?,
                    fraction: fraction.ok_or_else(|| de::Error::missing_field("fraction"))?,
                };
                let mut b = match t.value {
                    BoundValue::Int(v) => Bound {
                        op: Op::Eq,
                        value: v as f64,
                        fraction: None,
                    },
                    BoundValue::Float(v) => Bound {
                        op: Op::Eq,
                        value: v,
                        fraction: None,
                    },
                    BoundValue::Text(s) => Bound::parse(&s).map_err(de::Error::custom)?,
                };
                if !(t.fraction.is_finite() && t.fraction > 0.0 && t.fraction <= 1.0) {
                    return Err(de::Error::custom(format!(
                        "fraction must be in (0, 1], got {}",
                        t.fraction
                    )));
                }
                b.fraction = Some(t.fraction);
                Ok(b)
            }
        }
        d.deserialize_any(V)
    }
}

/// An inclusive range of seeds, written `"1..50"` (or `"1..=50"`, the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    /// First seed.
    pub first: u64,
    /// Last seed (included).
    pub last: u64,
}

/// Most seeds one expectation block may ask for.
pub const MAX_SEEDS: u64 = 100_000;

impl SeedRange {
    /// Parses `"A..B"` / `"A..=B"` (both ends included) or a single `"N"`.
    pub fn parse(s: &str) -> Result<SeedRange, String> {
        let t = s.trim();
        let bad =
            || format!("invalid seed range {s:?}: write \"A..B\" (both included), e.g. \"1..50\"");
        let (a, b) = match t.split_once("..") {
            Some((a, b)) => (a, b.trim_start_matches('=')),
            None => (t, t),
        };
        let first: u64 = a.trim().parse().map_err(|_| bad())?;
        let last: u64 = b.trim().parse().map_err(|_| bad())?;
        if last < first {
            return Err(format!(
                "invalid seed range {s:?}: the last seed is smaller than the first"
            ));
        }
        if last - first >= MAX_SEEDS {
            return Err(format!("seed range {s:?} has more than {MAX_SEEDS} seeds"));
        }
        Ok(SeedRange { first, last })
    }

    /// The seeds, in order.
    pub fn iter(&self) -> impl Iterator<Item = u64> {
        self.first..=self.last
    }
}

impl fmt::Display for SeedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.first, self.last)
    }
}

impl Serialize for SeedRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SeedRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SeedRange, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = SeedRange;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a seed range such as \"1..20\" (both included), or one seed \"7\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SeedRange, E> {
                SeedRange::parse(v).map_err(E::custom)
            }
            // `seeds = 5` was "invalid type: integer `5`, expected a string".
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SeedRange, E> {
                Err(E::custom(format!(
                    "a bare number ({v}): write the seeds as a string, \"{v}\" for one seed or \
                     \"1..{v}\" for a range (both included)"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

fn one() -> f64 {
    1.0
}

/// The `[expect]` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Expect {
    /// Seeds to run (default: the scenario's seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<SeedRange>,
    /// Share of the seeds on which each bound must hold.
    #[serde(default = "one")]
    pub fraction: f64,
    /// Bounds per strategy name, or `all` for every strategy.
    #[serde(flatten)]
    pub bounds: BTreeMap<String, BTreeMap<String, Bound>>,
}

/// Read by hand rather than with `#[serde(flatten)]`: flatten buffers the strategies' tables
/// before reading them, so an error in one bound (`ordering_violations = "> zero"`) lost its
/// place and was reported at the `[expect]` header. Read straight from the document, each
/// bound's error carries its own line, column and field.
impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expect, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Expect;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table: seeds, fraction, and a table of bounds per strategy or `all`")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<Expect, A::Error> {
                let mut e = Expect {
                    fraction: one(),
                    ..Expect::default()
                };
                let mut fraction = false;
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "seeds" if e.seeds.is_some() => {
                            return Err(de::Error::duplicate_field("seeds"))
                        }
                        "seeds" => e.seeds = Some(m.next_value()?),
                        "fraction" if fraction => {
                            return Err(de::Error::duplicate_field("fraction"))
                        }
                        "fraction" => {
                            fraction = true;
                            e.fraction = m.next_value()?;
                        }
                        _ => {
                            let bounds: BTreeMap<String, Bound> = m.next_value()?;
                            if e.bounds.insert(k.clone(), bounds).is_some() {
                                return Err(de::Error::custom(format!("duplicate key `{k}`")));
                            }
                        }
                    }
                }
                Ok(e)
            }
        }
        d.deserialize_map(V)
    }
}

/// A verdict, as Jepsen's checkers give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The bound held (on enough seeds).
    Pass,
    /// It did not.
    Fail,
    /// The run could not decide (the strategy was not applicable).
    Unknown,
}

/// One expectation over all its seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Strategy.
    pub strategy: String,
    /// Figure name as written.
    pub field: String,
    /// The bound.
    pub bound: Bound,
    /// Verdict.
    pub verdict: Verdict,
    /// (seed, measured value) per seed, None when not applicable.
    pub measured: Vec<(u64, Option<f64>)>,
    /// Seeds on which it held.
    pub held: usize,
    /// Why unknown.
    pub reason: Option<String>,
}

impl Evaluation {
    /// The first seed on which the bound failed.
    pub fn first_failing_seed(&self) -> Option<u64> {
        self.measured
            .iter()
            .find(|(_, v)| v.is_some_and(|x| !self.bound.holds(x)))
            .map(|(s, _)| *s)
    }

    /// A short account of the measured values: the value for one seed, else min/max over seeds.
    pub fn measured_text(&self) -> String {
        let vals: Vec<f64> = self.measured.iter().filter_map(|(_, v)| *v).collect();
        match vals.len() {
            0 => "not measured".into(),
            1 => format!("{}", vals[0]),
            n => {
                let min = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("held on {}/{n} seeds, min {min}, max {max}", self.held)
            }
        }
    }
}

impl Expect {
    /// The (strategy, field, bound) triples to check for a scenario running `strategies`: the `all`
    /// block expands to every strategy; a strategy's own bound on the same field replaces it.
    pub fn expand(&self, strategies: &[String]) -> Vec<(String, String, Bound)> {
        let mut out: Vec<(String, String, Bound)> = Vec::new();
        for s in strategies {
            let mut fields: BTreeMap<&str, Bound> = BTreeMap::new();
            if let Some(all) = self.bounds.get("all") {
                fields.extend(all.iter().map(|(k, b)| (k.as_str(), *b)));
            }
            if let Some(own) = self.bounds.get(s) {
                fields.extend(own.iter().map(|(k, b)| (k.as_str(), *b)));
            }
            out.extend(
                fields
                    .into_iter()
                    .map(|(k, b)| (s.clone(), k.to_string(), b)),
            );
        }
        out
    }

    /// Judges one expectation from the metrics per seed (`None`: not applicable, with reason).
    pub fn judge(
        &self,
        strategy: &str,
        field: &str,
        bound: Bound,
        per_seed: &[(u64, Result<&Metrics, String>)],
    ) -> Evaluation {
        let mut measured = Vec::with_capacity(per_seed.len());
        let mut reason = None;
        for (seed, m) in per_seed {
            match m {
                Ok(m) => measured.push((*seed, m.numeric(field))),
                Err(r) => {
                    reason.get_or_insert_with(|| r.clone());
                    measured.push((*seed, None));
                }
            }
        }
        let decided: Vec<f64> = measured.iter().filter_map(|(_, v)| *v).collect();
        let held = decided.iter().filter(|&&x| bound.holds(x)).count();
        let verdict = if decided.len() < measured.len() {
            Verdict::Unknown
        } else if held as f64
            >= (bound.fraction.unwrap_or(self.fraction) * measured.len() as f64).ceil() - 1e-9
        {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        Evaluation {
            strategy: strategy.to_string(),
            field: field.to_string(),
            bound,
            verdict,
            measured,
            held,
            reason: reason.or_else(|| {
                (verdict == Verdict::Unknown).then(|| {
                    if Metrics::every().numeric(field).is_some() {
                        format!("{field:?} is counted only with [workload] group_size")
                    } else {
                        format!("no numeric figure named {field:?}")
                    }
                })
            }),
        }
    }
}

/// Checks of an `[expect]` section against the scenario's strategy list (path, message).
pub fn validate(e: &Expect, strategies: &[String]) -> Vec<(Vec<String>, String)> {
    let mut errs = Vec::new();
    if !(e.fraction.is_finite() && e.fraction > 0.0 && e.fraction <= 1.0) {
        errs.push((
            vec!["expect".into(), "fraction".into()],
            format!("must be in (0, 1], got {}", e.fraction),
        ));
    }
    let names = Metrics::numeric_field_names();
    for (s, fields) in &e.bounds {
        if s != "all" && !strategies.contains(s) {
            errs.push((
                vec!["expect".into(), s.clone()],
                format!(
                    "{s:?} is neither `all` nor a strategy of this scenario ({}){}",
                    strategies.join(", "),
                    crate::suggest::did_you_mean(
                        s,
                        std::iter::once("all").chain(strategies.iter().map(|x| x.as_str()))
                    )
                ),
            ));
        }
        // Two spellings of one figure (`latency_ms.p99`, `latency_ms_p99`) are two keys of the
        // table: a range, or a mistake ([`Bound::makes_a_range_with`]).
        let mut bounded: BTreeMap<String, Vec<(&str, &Bound)>> = BTreeMap::new();
        for (f, b) in fields {
            if let Some(key) = Metrics::figure_key(f) {
                let others = bounded.entry(key).or_default();
                if let Some((g, c)) = others.iter().find(|(_, c)| !b.makes_a_range_with(c)) {
                    errs.push((
                        vec!["expect".into(), s.clone(), f.clone()],
                        format!(
                            "{f:?} = \"{b}\" bounds the figure {g:?} = \"{c}\" bounds too: a \
                             figure takes one bound, or a lower and an upper one (a range)"
                        ),
                    ));
                }
                others.push((f, b));
            }
            if Metrics::every().numeric(f).is_none() {
                let shown: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
                errs.push((
                    vec!["expect".into(), s.clone(), f.clone()],
                    format!(
                        "no summary figure named {f:?}; figures: {}{}",
                        shown.join(", "),
                        crate::suggest::did_you_mean(f, shown.iter().copied())
                    ),
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every figure an `[expect]` may bound, misspelt by one letter anywhere, is suggested back,
    /// unless the misspelling is as near another figure; the words in another order too.
    #[test]
    fn every_misspelt_figure_gets_the_right_suggestion() {
        let names = Metrics::numeric_field_names();
        let message = |field: &str| {
            let e: Expect = toml::from_str(&format!("[all]\n{field} = 0")).expect("a bound table");
            validate(&e, &[]).into_iter().map(|(_, m)| m).next()
        };
        let mut checked = 0;
        for name in &names {
            for (i, c) in name.char_indices().filter(|(_, c)| c.is_ascii_lowercase()) {
                let typo = format!(
                    "{}{}{}",
                    &name[..i],
                    if c == 'q' { 'x' } else { 'q' },
                    &name[i + 1..]
                );
                let near = names
                    .iter()
                    .filter(|n| strsim::osa_distance(&typo, n) <= 1)
                    .count();
                if near > 1 || Metrics::default().numeric(&typo).is_some() {
                    continue;
                }
                let m = message(&typo).unwrap_or_else(|| panic!("{typo} accepted"));
                assert!(
                    m.ends_with(&format!("; did you mean `{name}`?")),
                    "{typo}: {m}"
                );
                checked += 1;
            }
        }
        assert!(checked > 500, "{checked}");
        let m = message("p99_latency").unwrap();
        assert!(m.ends_with("; did you mean `latency_ms_p99`?"), "{m}");
    }

    #[test]
    fn bounds_parse_and_hold() {
        assert!(Bound::parse("> 0").unwrap().holds(1.0));
        assert!(!Bound::parse("> 0").unwrap().holds(0.0));
        assert!(Bound::parse(">=1500").unwrap().holds(1500.0));
        assert!(Bound::parse("0").unwrap().holds(0.0));
        assert!(Bound::parse("!= 0").unwrap().holds(2.0));
        assert!(Bound::parse("<= 2.5").unwrap().holds(2.5));
        assert!(Bound::parse("about 3").is_err());
        assert!(Bound::parse("> NaN").is_err());
    }

    #[test]
    fn a_bound_may_carry_its_own_fraction() {
        let e: Expect = toml::from_str(
            "[single]\nordering_violations = { value = \"> 0\", fraction = 0.5 }\nlost = 0",
        )
        .unwrap();
        let b = e.bounds["single"]["ordering_violations"];
        assert_eq!(b.fraction, Some(0.5));
        assert_eq!(b.to_string(), "> 0 on 50% of seeds");
        let m = |v: u64| Metrics {
            ordering_violations: v,
            ..Metrics::default()
        };
        let (a, c) = (m(0), m(2));
        let per: Vec<(u64, Result<&Metrics, String>)> = vec![(1, Ok(&a)), (2, Ok(&c))];
        assert_eq!(
            e.judge("single", "ordering_violations", b, &per).verdict,
            Verdict::Pass
        );
        let back: Expect = toml::from_str(&toml::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        assert!(
            toml::from_str::<Expect>("[single]\nlost = { value = 0, fraction = 2.0 }").is_err()
        );
        assert!(toml::from_str::<Expect>("[single]\nlost = { value = 0 }").is_err());
        // A dotted name is a TOML table: the answer says how to write it.
        let dotted = toml::from_str::<Expect>("[single]\ncoverage.reassignments = 2")
            .unwrap_err()
            .to_string();
        assert!(
            dotted.contains("(`reassignments`): quote a dotted name"),
            "{dotted}"
        );
    }

    #[test]
    fn seed_ranges() {
        assert_eq!(SeedRange::parse("1..50").unwrap().iter().count(), 50);
        assert_eq!(
            SeedRange::parse("1..=50").unwrap(),
            SeedRange::parse("1..50").unwrap()
        );
        assert_eq!(
            SeedRange::parse("7").unwrap().iter().collect::<Vec<_>>(),
            vec![7]
        );
        assert!(SeedRange::parse("5..1").is_err());
        assert!(SeedRange::parse("0..99999999").is_err());
    }

    #[test]
    fn expansion_and_judgement() {
        let e: Expect = toml::from_str(
            "seeds = \"1..4\"\nfraction = 0.5\n[all]\nlost = 0\n[single]\nordering_violations = \"> 0\"\nlost = \"<= 1\"",
        )
        .unwrap();
        let strategies = vec!["competing".to_string(), "single".to_string()];
        let x = e.expand(&strategies);
        assert_eq!(x.len(), 3);
        assert_eq!(x[2].0, "single");
        assert_eq!(x[2].2, Bound::parse("> 0").unwrap());
        assert_eq!(
            x[1].2,
            Bound::parse("<= 1").unwrap(),
            "the strategy's own bound wins"
        );
        let m = |v: u64| Metrics {
            ordering_violations: v,
            ..Metrics::default()
        };
        let (a, b, c, d) = (m(0), m(3), m(0), m(5));
        let per: Vec<(u64, Result<&Metrics, String>)> =
            vec![(1, Ok(&a)), (2, Ok(&b)), (3, Ok(&c)), (4, Ok(&d))];
        let ev = e.judge(
            "single",
            "ordering_violations",
            Bound::parse("> 0").unwrap(),
            &per,
        );
        assert_eq!(ev.verdict, Verdict::Pass, "2 of 4 with fraction 0.5");
        assert_eq!(ev.first_failing_seed(), Some(1));
        let strict = Expect {
            fraction: 1.0,
            ..e.clone()
        };
        assert_eq!(
            strict
                .judge(
                    "single",
                    "ordering_violations",
                    Bound::parse("> 0").unwrap(),
                    &per
                )
                .verdict,
            Verdict::Fail
        );
        let na: Vec<(u64, Result<&Metrics, String>)> = vec![(1, Err("no source access".into()))];
        let ev = e.judge("notifier", "lost", Bound::parse("0").unwrap(), &na);
        assert_eq!(ev.verdict, Verdict::Unknown);
        assert_eq!(ev.reason.as_deref(), Some("no source access"));
    }

    #[test]
    fn validation_names_bad_fields_and_strategies() {
        let e: Expect = toml::from_str(
            "[single]\nviolations = 0\n[magic]\nlost = 0\n[all]\nbroker_crashes = \">= 1\"",
        )
        .unwrap();
        let errs = validate(&e, &["single".to_string()]);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs
            .iter()
            .any(|(p, m)| p.last().unwrap() == "violations" && m.contains("ordering_violations")));
        assert!(errs.iter().any(|(p, _)| p.last().unwrap() == "magic"));
    }

    /// Two spellings of one figure in one table are two bounds of it: a lower and an upper one
    /// make a range (hot-keys.toml writes one so); any other pair is refused, by any spelling.
    /// The same figure in two tables (`all` and a strategy's) is two expectations.
    #[test]
    fn a_figure_takes_one_bound_or_a_range_per_table_by_any_spelling() {
        let one = |table: &str| -> Vec<(Vec<String>, String)> {
            let e: Expect = toml::from_str(table).unwrap();
            validate(&e, &["single".to_string()])
        };
        for (a, b) in [
            ("\"latency_ms.p99\"", "latency_ms_p99"),
            ("broker_crashes", "coverage_broker_crashes"),
            ("broker_crashes", "\"coverage.broker_crashes\""),
        ] {
            for (x, y) in [
                ("<= 9", "< 5"),
                ("0", "0"),
                ("== 1", "> 0"),
                ("!= 2", "< 5"),
            ] {
                let errs = one(&format!("[single]\n{a} = \"{x}\"\n{b} = \"{y}\""));
                assert_eq!(errs.len(), 1, "{a} {x}, {b} {y}: {errs:?}");
                assert!(errs[0].1.contains("a lower and an upper one"), "{errs:?}");
            }
            for (x, y) in [("> 3", "< 9"), ("<= 9", ">= 3")] {
                let errs = one(&format!("[single]\n{a} = \"{x}\"\n{b} = \"{y}\""));
                assert!(errs.is_empty(), "{a} {x}, {b} {y}: {errs:?}");
            }
        }
        assert!(one("[single]\nlost = 0\nduplicates = 0").is_empty());
        assert!(one("[all]\nlost = 0\n[single]\nlost = 0").is_empty());
    }
}
