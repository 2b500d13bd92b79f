//! Simulated time and the human-friendly units scenario files use.
//!
//! Time is an integer count of microseconds ([`Time`]); nothing in the engine reads a wall clock.
//! Durations are written `"250ms"`, `"30s"`, `"2h"` (or `"1h 30m"`); rates `"2000/s"`, `"5/min"`.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A point in simulated time, in microseconds since the start of the run.
pub type Time = u64;

/// Microseconds in one second.
pub const SECOND: Time = 1_000_000;
/// Microseconds in one millisecond.
pub const MILLI: Time = 1_000;

/// A non-negative span of simulated time in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dur(pub u64);

impl Dur {
    /// Zero length.
    pub const ZERO: Dur = Dur(0);

    /// From whole milliseconds.
    pub const fn from_millis(ms: u64) -> Dur {
        Dur(ms * MILLI)
    }

    /// From whole seconds.
    pub const fn from_secs(s: u64) -> Dur {
        Dur(s * SECOND)
    }

    /// In microseconds.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// In seconds, as a float (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / SECOND as f64
    }

    /// Parses `"250ms"`, `"30s"`, `"2h"`, `"1h 30m"`, `"0"`. Errors say what is allowed.
    pub fn parse(s: &str) -> Result<Dur, String> {
        let t = s.trim();
        if t == "0" {
            return Ok(Dur::ZERO);
        }
        // Too long for humantime (past about 3000 years, in its own words, whose limits are not
        // simulated time's) or for the clock: one message.
        let out_of_range = || {
            format!(
                "duration {s:?} is out of range: simulated time counts whole microseconds, up to \
                 about 146,000 years"
            )
        };
        let d = humantime::parse_duration(t).map_err(|e| match e {
            humantime::DurationError::NumberOverflow => out_of_range(),
            e => format!("invalid duration {s:?} ({e}); write a number and a unit, e.g. \"250ms\", \"30s\", \"2h\", \"1h 30m\""),
        })?;
        let micros = d.as_micros();
        if micros > u64::MAX as u128 / 4 {
            return Err(out_of_range());
        }
        if micros == 0 && !d.is_zero() {
            return Err(format!(
                "duration {s:?} is shorter than the 1us resolution of simulated time"
            ));
        }
        Ok(Dur(micros as u64))
    }
}

impl Dur {
    /// For reading, not for loading back: microseconds under 1 ms (`"250us"`), milliseconds to 3
    /// significant digits under 1 s (`"87.7ms"`), seconds to the millisecond under a minute
    /// (`"1.857s"`), and above that the exact form rounded to the millisecond (`"2m 5s 250ms"`).
    pub fn readable(self) -> String {
        fn trim(s: String) -> String {
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            }
        }
        let us = self.0;
        if us == 0 {
            "0s".to_string()
        } else if us < MILLI {
            format!("{us}us")
        } else if us < SECOND {
            let ms = us as f64 / MILLI as f64;
            let digits = if ms >= 100.0 {
                0
            } else if ms >= 10.0 {
                1
            } else {
                2
            };
            format!("{}ms", trim(format!("{ms:.digits$}")))
        } else if us < 60 * SECOND {
            format!("{}s", trim(format!("{:.3}", us as f64 / SECOND as f64)))
        } else {
            Dur((us + MILLI / 2) / MILLI * MILLI).to_string()
        }
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("0s");
        }
        write!(
            f,
            "{}",
            humantime::format_duration(std::time::Duration::from_micros(self.0))
        )
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration string such as \"250ms\", \"30s\" or \"2h\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur::ZERO)
                } else {
                    Err(E::custom(format!(
                        "a bare number ({v}) has no unit; write e.g. \"{v}ms\" or \"{v}s\""
                    )))
                }
            }
            // (Beyond i64: the same words.)
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "a bare number ({v}) has no unit; write e.g. \"{v}ms\" or \"{v}s\""
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "a bare number ({v}) has no unit; write e.g. \"{v}s\""
                )))
            }
        }
        d.deserialize_any(V)
    }
}

/// An event rate, stored as events per second.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rate {
    per_sec: f64,
    text_unit: RateUnit,
}

/// The unit a rate was written in, kept so it prints back as written.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
enum RateUnit {
    Second,
    Minute,
    Hour,
    /// Any other span: `"1/3min"` is one per three minutes.
    Span(Dur),
}

impl RateUnit {
    fn secs(self) -> f64 {
        match self {
            RateUnit::Second => 1.0,
            RateUnit::Minute => 60.0,
            RateUnit::Hour => 3600.0,
            RateUnit::Span(d) => d.as_secs_f64(),
        }
    }
    fn name(self) -> String {
        match self {
            RateUnit::Second => "s".into(),
            RateUnit::Minute => "min".into(),
            RateUnit::Hour => "h".into(),
            RateUnit::Span(d) => d.to_string(),
        }
    }
    /// The unit after the slash: any duration [`Dur::parse`] accepts (`"3min"`, `"90 s"`), or a
    /// bare unit meaning one of it (`"s"`, `"sec"`, `"minute"`, `"hour"`): the same spellings as
    /// durations.
    fn parse(u: &str) -> Result<RateUnit, String> {
        let u = u.trim();
        let d = if u.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            Dur::parse(u)?
        } else {
            Dur::parse(&format!("1{u}"))
                .map_err(|_| format!("unknown unit {u:?} (e.g. s, sec, min, h, or a span: 3min)"))?
        };
        Ok(match d {
            Dur::ZERO => return Err(format!("the unit {u:?} is zero long")),
            d if d == Dur::from_secs(1) => RateUnit::Second,
            d if d == Dur::from_secs(60) => RateUnit::Minute,
            d if d == Dur::from_secs(3600) => RateUnit::Hour,
            d => RateUnit::Span(d),
        })
    }
}

impl Rate {
    /// A rate of `n` events per second.
    pub fn per_sec(n: f64) -> Rate {
        Rate {
            per_sec: n,
            text_unit: RateUnit::Second,
        }
    }

    /// Events per second.
    pub fn as_per_sec(self) -> f64 {
        self.per_sec
    }

    /// Parses `"2000/s"`, `"5/min"`, `"0.5/h"`, `"1/3min"`: the unit is spelt as a duration is.
    pub fn parse(s: &str) -> Result<Rate, String> {
        let allowed = "write a count per unit, e.g. \"2000/s\", \"5/min\", \"1/h\" or \"1/3min\"";
        let (num, unit) = s
            .trim()
            .split_once('/')
            .ok_or_else(|| format!("invalid rate {s:?}: {allowed}"))?;
        let n: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("invalid rate {s:?}: {num:?} is not a number; {allowed}"))?;
        if !n.is_finite() || n < 0.0 {
            return Err(format!("invalid rate {s:?}: must be a finite number >= 0"));
        }
        let unit = RateUnit::parse(unit).map_err(|e| format!("invalid rate {s:?}: {e}"))?;
        Ok(Rate {
            per_sec: n / unit.secs(),
            text_unit: unit,
        })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.per_sec * self.text_unit.secs();
        write!(f, "{}/{}", n, self.text_unit.name())
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Rate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a rate string such as \"2000/s\", \"5/min\" or \"1/3min\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Rate, E> {
                Rate::parse(v).map_err(E::custom)
            }
            // A bare number was "invalid type: integer `100`, expected a string": say what a
            // rate is, as a duration's bare number does.
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Rate, E> {
                Err(no_unit(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Rate, E> {
                Err(no_unit(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Rate, E> {
                Err(no_unit(v))
            }
        }
        fn no_unit<E: de::Error>(v: impl fmt::Display) -> E {
            E::custom(format!(
                "a bare number ({v}) has no unit; write a count per unit, e.g. \"{v}/s\" or \"{v}/min\""
            ))
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print_back() {
        assert_eq!(Dur::parse("250ms").unwrap(), Dur(250_000));
        assert_eq!(Dur::parse("30s").unwrap(), Dur::from_secs(30));
        assert_eq!(Dur::parse("2h").unwrap(), Dur::from_secs(7200));
        assert_eq!(Dur::parse("1h 30m").unwrap(), Dur::from_secs(5400));
        assert_eq!(Dur::parse("0").unwrap(), Dur::ZERO);
        for d in ["250ms", "30s", "2h", "1h 30m", "0s", "1us"] {
            let x = Dur::parse(d).unwrap();
            assert_eq!(Dur::parse(&x.to_string()).unwrap(), x, "{d}");
        }
        assert!(Dur::parse("ten").is_err());
        assert!(Dur::parse("5").is_err());
        assert!(Dur::parse("1ns").is_err());
        assert!(Dur::parse("99999999999999999999h").is_err());
    }

    #[test]
    fn readable_durations_round_to_what_a_reader_needs() {
        assert_eq!(Dur(0).readable(), "0s");
        assert_eq!(Dur(250).readable(), "250us");
        assert_eq!(Dur(87_691).readable(), "87.7ms");
        assert_eq!(Dur(5_000).readable(), "5ms");
        assert_eq!(Dur(1_234).readable(), "1.23ms");
        assert_eq!(Dur(250_400).readable(), "250ms");
        assert_eq!(Dur(1_857_261).readable(), "1.857s");
        assert_eq!(Dur::from_secs(5).readable(), "5s");
        assert_eq!(Dur(10_250_000).readable(), "10.25s");
        assert_eq!(Dur(125_250_400).readable(), "2m 5s 250ms");
    }

    #[test]
    fn rates_parse() {
        assert_eq!(Rate::parse("2000/s").unwrap().as_per_sec(), 2000.0);
        assert_eq!(Rate::parse("6/min").unwrap().as_per_sec(), 0.1);
        assert_eq!(Rate::parse("7.2/s").unwrap().to_string(), "7.2/s");
        assert!(Rate::parse("-1/s").is_err());
        assert!(Rate::parse("5").is_err());
        assert!(Rate::parse("5/fortnight").is_err());
        assert!(Rate::parse("NaN/s").is_err());
    }

    #[test]
    fn rates_and_durations_accept_the_same_unit_spellings() {
        // One per three minutes, and it prints back to what loads the same rate.
        let r = Rate::parse("1/3min").unwrap();
        assert!((r.as_per_sec() - 1.0 / 180.0).abs() < 1e-12);
        assert_eq!(Rate::parse(&r.to_string()).unwrap(), r);
        assert_eq!(Rate::parse("2/90s").unwrap().as_per_sec(), 2.0 / 90.0);
        for unit in [
            "s", "sec", "second", "seconds", "m", "min", "minute", "minutes", "h", "hr", "hour",
            "hours", "ms",
        ] {
            let d = Dur::parse(&format!("1{unit}"));
            let r = Rate::parse(&format!("5/{unit}"));
            assert_eq!(d.is_ok(), r.is_ok(), "{unit}: {d:?} vs {r:?}");
            assert!(
                (r.unwrap().as_per_sec() - 5.0 / d.unwrap().as_secs_f64()).abs() < 1e-9,
                "{unit}"
            );
        }
        // "5 sec" and "5sec": both accepted or both refused, as durations and as rate units.
        for (a, b) in [("5 sec", "5sec"), ("3 min", "3min")] {
            assert_eq!(Dur::parse(a).is_ok(), Dur::parse(b).is_ok(), "{a} / {b}");
            assert_eq!(
                Rate::parse(&format!("1/{a}")).is_ok(),
                Rate::parse(&format!("1/{b}")).is_ok(),
                "{a} / {b}"
            );
        }
        assert!(Rate::parse("1/0s").is_err());
        assert!(Rate::parse("1/parsec").is_err());
        // The units of old still print as they did.
        assert_eq!(Rate::parse("5/min").unwrap().to_string(), "5/min");
        assert_eq!(Rate::parse("5/sec").unwrap().to_string(), "5/s");
    }
}
