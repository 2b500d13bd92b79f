//! Duration distributions for service times and fault lengths.

use crate::time::{Dur, Time};
use rand::Rng;
use rand_distr::{Distribution, Exp1, LogNormal};
use serde::{de, Deserialize, Deserializer, Serialize};
use std::fmt;

/// A distribution of durations. In a scenario file either a plain duration (`"5ms"`, constant) or a
/// table: `{ dist = "exponential", mean = "5ms" }`, `{ dist = "lognormal", mean = "5ms", sigma = 0.5 }`,
/// `{ dist = "uniform", min = "1ms", max = "9ms" }`, `{ dist = "constant", value = "5ms" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum DurDist {
    /// Always the same value.
    Constant {
        /// The value.
        value: Dur,
    },
    /// Exponential with the given mean (memoryless: M/M/c service).
    Exponential {
        /// The mean.
        mean: Dur,
    },
    /// Log-normal with the given mean and shape `sigma` (heavy-tailed service).
    Lognormal {
        /// The mean of the distribution (not of its logarithm).
        mean: Dur,
        /// Standard deviation of the underlying normal.
        sigma: f64,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// Lower bound.
        min: Dur,
        /// Upper bound.
        max: Dur,
    },
}

/// [`DurDist`] in the form a scenario file accepts (string shorthand or table).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct DurSpec(pub DurDist);

impl<'de> Deserialize<'de> for DurSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DurSpec, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = DurSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "a duration (\"5ms\") or a table such as { dist = \"exponential\", mean = \"5ms\" }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurSpec, E> {
                constant(Dur::parse(v).map_err(E::custom))
            }
            // A bare number reads as a duration's does (`0` is zero; any other "has no unit"):
            // `service = 0` and `for = 5` were "invalid type: integer", though the rules say a
            // duration's `0` may be written bare.
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<DurSpec, E> {
                constant(Dur::deserialize(de::value::I64Deserializer::<E>::new(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<DurSpec, E> {
                constant(Dur::deserialize(de::value::U64Deserializer::<E>::new(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<DurSpec, E> {
                constant(Dur::deserialize(de::value::F64Deserializer::<E>::new(v)))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, m: A) -> Result<DurSpec, A::Error> {
                DurDist::deserialize(de::value::MapAccessDeserializer::new(m)).map(DurSpec)
            }
        }
        /// The plain duration read (a string, or a bare number as [`Dur`] reads one), as a constant.
        fn constant<E>(value: Result<Dur, E>) -> Result<DurSpec, E> {
            value.map(|value| DurSpec(DurDist::Constant { value }))
        }
        d.deserialize_any(V)
    }
}

impl DurDist {
    /// The mean of the distribution, in microseconds.
    pub fn mean_micros(&self) -> f64 {
        match *self {
            DurDist::Constant { value } => value.0 as f64,
            DurDist::Exponential { mean } | DurDist::Lognormal { mean, .. } => mean.0 as f64,
            DurDist::Uniform { min, max } => (min.0 as f64 + max.0 as f64) / 2.0,
        }
    }

    /// Checks the parameters; `Err` says what is allowed.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            DurDist::Lognormal { sigma, .. }
                if !(sigma.is_finite() && (0.0..=10.0).contains(&sigma)) =>
            {
                Err(format!("sigma must be a number in [0, 10], got {sigma}"))
            }
            DurDist::Uniform { min, max } if min > max => {
                Err(format!("uniform min ({min}) is larger than max ({max})"))
            }
            _ => Ok(()),
        }
    }

    /// A sampler for this distribution (parameters pre-computed).
    pub fn sampler(&self) -> Sampler {
        match *self {
            DurDist::Constant { value } => Sampler::Constant(value.0),
            DurDist::Exponential { mean } if mean.0 == 0 => Sampler::Constant(0),
            DurDist::Exponential { mean } => {
                Sampler::Exp(ExpDraw::new(1.0 / mean.0 as f64).expect("positive rate"))
            }
            DurDist::Lognormal { mean, .. } if mean.0 == 0 => Sampler::Constant(0),
            DurDist::Lognormal { mean, sigma } => {
                // E[X] = exp(mu + sigma^2/2)  =>  mu = ln(mean) - sigma^2/2.
                let mu = (mean.0 as f64).ln() - sigma * sigma / 2.0;
                Sampler::LogNormal(LogNormal::new(mu, sigma).expect("checked sigma"))
            }
            DurDist::Uniform { min, max } => Sampler::Uniform(min.0, max.0),
        }
    }
}

/// Exponential draws: `rand_distr::Exp`'s values, bit for bit (`Exp1`'s ziggurat times
/// `1 / lambda`, computed as `Exp::new` computes it), without the out-of-line `Rng::sample` call
/// that `Exp::sample` goes through (no inlining hint on it: a call frame per draw).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpDraw {
    lambda_inverse: f64,
}

impl ExpDraw {
    /// The exponential distribution of rate `lambda` (`None` unless `lambda >= 0`, as
    /// `Exp::new` refuses).
    pub fn new(lambda: f64) -> Option<ExpDraw> {
        (lambda >= 0.0).then(|| ExpDraw {
            lambda_inverse: 1.0 / lambda,
        })
    }

    /// One draw.
    #[inline(always)]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        Distribution::<f64>::sample(&Exp1, rng) * self.lambda_inverse
    }

    /// One draw rounded as [`round_u64`] rounds it, bit for bit, with one test fewer: a draw is
    /// never negative (`Exp1` is not, `1 / lambda` is not: NaN at worst, for a rate of 0,
    /// which both round to 0).
    #[inline(always)]
    pub fn sample_rounded<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        round_nonnegative(self.sample(rng))
    }
}

/// Draws durations from a [`DurDist`].
#[derive(Clone, Debug)]
pub enum Sampler {
    /// Constant.
    Constant(Time),
    /// Exponential (rate per microsecond).
    Exp(ExpDraw),
    /// Log-normal over microseconds.
    LogNormal(LogNormal<f64>),
    /// Uniform over `[min, max]` microseconds.
    Uniform(Time, Time),
}

impl Sampler {
    /// One draw, in microseconds, rounded to the nearest microsecond.
    #[inline(always)]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> Time {
        match self {
            Sampler::Constant(v) => *v,
            Sampler::Exp(e) => e.sample_rounded(rng).min(MAX_DRAW),
            Sampler::LogNormal(l) => to_micros(l.sample(rng)),
            Sampler::Uniform(a, b) => rng.random_range(*a..=*b),
        }
    }
}

#[inline]
fn to_micros(x: f64) -> Time {
    // Saturates at [`MAX_DRAW`]: the same value as `x.round().clamp(0.0, 3.2e15) as Time`.
    round_u64(x).min(MAX_DRAW)
}

/// The longest duration a draw gives: a century, so that one absurd draw cannot overflow the
/// clock.
const MAX_DRAW: Time = 3_200_000_000_000_000;

/// `x.round() as u64` (half away from zero, saturating, NaN to 0), bit for bit, without the libm
/// call `f64::round` compiles to on baseline x86-64 (no SSE4.1): below 2^52 the fraction
/// `x - trunc(x)` is exact, so comparing it with 0.5 rounds exactly as `round` does.
#[inline]
pub(crate) fn round_u64(x: f64) -> u64 {
    if (0.0..4_503_599_627_370_496.0).contains(&x) {
        // Signed conversions are single instructions; the value fits either way.
        let t = x as i64;
        (t + i64::from(x - t as f64 >= 0.5)) as u64
    } else {
        x.round() as u64
    }
}

/// [`round_u64`] for an `x` that is not negative (or is NaN), bit for bit: the lower bound's
/// test left out (two of them per message on the M/M/c benchmark, 2026-12-06).
#[inline(always)]
fn round_nonnegative(x: f64) -> u64 {
    debug_assert!(x >= 0.0 || x.is_nan(), "{x} is negative");
    if x < 4_503_599_627_370_496.0 {
        let t = x as i64;
        (t + i64::from(x - t as f64 >= 0.5)) as u64
    } else {
        x.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Component};

    #[test]
    fn round_u64_is_round() {
        let mut rng = stream(3, Component::Consumer, 0, 0);
        let edge = [
            0.0,
            -0.0,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            -0.4,
            -0.5,
            -3.7,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9.1e15,
            1.9e19,
            3.0e19,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let random = (0..100_000).map(|i| {
            let u: f64 = rng.random();
            u * 10f64.powi(i % 18)
        });
        for x in edge.into_iter().chain(random) {
            assert_eq!(round_u64(x), x.round() as u64, "{x}");
            assert_eq!(to_micros(x), x.round().clamp(0.0, 3.2e15) as Time, "{x}");
            if x >= 0.0 || x.is_nan() {
                assert_eq!(round_nonnegative(x), round_u64(x), "{x}");
            }
        }
    }

    /// A rounded exponential draw is the draw rounded, for every rate (0 gives NaN and
    /// infinity), from the same stream.
    #[test]
    fn exp_sample_rounded_is_sample_rounded() {
        for lambda in [1e-6, 1.0 / 3.0, 7.2e-6, 1.0, 1e-15, 0.0] {
            let e = ExpDraw::new(lambda).unwrap();
            let mut a = stream(9, Component::Consumer, 0, 0);
            let mut b = stream(9, Component::Consumer, 0, 0);
            for _ in 0..100_000 {
                assert_eq!(e.sample_rounded(&mut a), round_u64(e.sample(&mut b)));
            }
        }
    }

    /// `ExpDraw` draws what `rand_distr::Exp` draws, bit for bit, from the same stream (the
    /// histories depend on it).
    #[test]
    fn exp_draw_is_rand_distr_exp() {
        for lambda in [1e-6, 1.0 / 3.0, 7.2e-6, 1.0, 0.0] {
            let ours = ExpDraw::new(lambda).unwrap();
            let theirs = rand_distr::Exp::new(lambda).unwrap();
            let mut a = stream(5, Component::Consumer, 0, 0);
            let mut b = stream(5, Component::Consumer, 0, 0);
            for _ in 0..100_000 {
                assert_eq!(
                    ours.sample(&mut a).to_bits(),
                    theirs.sample(&mut b).to_bits()
                );
            }
        }
        assert!(ExpDraw::new(-1.0).is_none() && rand_distr::Exp::new(-1.0).is_err());
        assert!(ExpDraw::new(f64::NAN).is_none() && rand_distr::Exp::new(f64::NAN).is_err());
    }

    #[test]
    fn sample_means_match() {
        let mut rng = stream(1, Component::Consumer, 0, 0);
        for d in [
            DurDist::Exponential { mean: Dur(1000) },
            DurDist::Lognormal {
                mean: Dur(1000),
                sigma: 0.5,
            },
            DurDist::Uniform {
                min: Dur(500),
                max: Dur(1500),
            },
        ] {
            let s = d.sampler();
            let n = 200_000;
            let mean = (0..n).map(|_| s.sample(&mut rng) as f64).sum::<f64>() / n as f64;
            assert!((mean - 1000.0).abs() < 15.0, "{d:?}: {mean}");
        }
    }

    #[test]
    fn spec_accepts_string_and_table() {
        #[derive(Deserialize)]
        struct T {
            a: DurSpec,
            b: DurSpec,
        }
        let t: T =
            toml::from_str("a = \"5ms\"\nb = { dist = \"exponential\", mean = \"2s\" }").unwrap();
        assert_eq!(t.a.0, DurDist::Constant { value: Dur(5000) });
        assert_eq!(
            t.b.0,
            DurDist::Exponential {
                mean: Dur::from_secs(2)
            }
        );
        let e = toml::from_str::<T>("a = \"5ms\"\nb = { dist = \"gamma\", mean = \"2s\" }")
            .err()
            .unwrap();
        assert!(e.to_string().contains("gamma"), "{e}");
    }
}
