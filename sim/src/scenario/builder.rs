//! A scenario written in code: the tests' scenarios (and any scenario a program generates)
//! without the TOML text repeated in each.
//!
//! [`ScenarioBuilder`] holds the scenario as a TOML document of typed values and renders it to
//! the text a scenario file holds ([`ScenarioBuilder::to_toml`]); [`ScenarioBuilder::load`]
//! loads that text through [`load_str`], the loader every file goes through. So a built scenario
//! gets the same defaults (serde's and the flavour's), the same validation and the same errors as
//! the file it replaces: a misspelt field is refused (`deny_unknown_fields`), not ignored. Only
//! what is set is written, so a field left out takes its default exactly as in a file.
//!
//! Sections are written as in a file: each method that names a table (`workload`, `broker`,
//! `consumers`, `fault`, `section`) makes it the current one, and [`ScenarioBuilder::with`] sets
//! a field in the current table, the way a line does under a header:
//!
//! ```
//! use sim::scenario::ScenarioBuilder;
//! let text = ScenarioBuilder::new(&["competing"])
//!     .evenly(1, "1/s", 1)
//!     .broker("a")
//!     .consumers(2, "10s")
//!     .fault("slow_consumer")
//!     .with("consumer", 0)
//!     .with("factor", 5)
//!     .with("at", "0s")
//!     .with("for", "100s")
//!     .section("lease")
//!     .with("duration", "30s")
//!     .to_toml();
//! let sc = sim::scenario::load_str("t.toml", &text, &|_| Vec::new()).unwrap();
//! assert_eq!((sc.consumers.count, sc.faults.len()), (2, 1));
//! ```

use super::{load_str, FieldError, Scenario, ScenarioError};
use toml::{Table, Value};

/// A scenario being written: typed values in a TOML document, rendered and loaded through the
/// real loader (see the [module](self)).
#[derive(Clone, Debug)]
pub struct ScenarioBuilder {
    doc: Table,
    /// The table [`ScenarioBuilder::with`] writes to.
    at: At,
}

/// Where the current table is in the document.
#[derive(Clone, Debug)]
enum At {
    /// The top level (`seed`, `flavour`, `strategies`).
    Top,
    /// A table by its dotted path (`consumers`, `strategy.kafka`).
    Table(String),
    /// The last entry of an array of tables (`broker`, `fault`).
    Last(&'static str),
}

/// `{ dist = "exponential", mean = MEAN }`: an exponential duration (e.g. a service time).
pub fn exponential(mean: &str) -> Value {
    let mut t = Table::new();
    t.insert("dist".into(), "exponential".into());
    t.insert("mean".into(), mean.into());
    Value::Table(t)
}

impl ScenarioBuilder {
    /// A scenario comparing `strategies`; nothing else is set yet.
    pub fn new(strategies: &[&str]) -> Self {
        let mut doc = Table::new();
        let list: Vec<Value> = strategies.iter().map(|&s| s.into()).collect();
        doc.insert("strategies".into(), list.into());
        ScenarioBuilder { doc, at: At::Top }
    }

    /// Sets a top-level field (`seed`, `flavour`, `name`, ...); the top level becomes current.
    pub fn top(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.at = At::Top;
        self.with(key, value)
    }

    /// `seed = SEED` (TOML's integers end at `i64::MAX`, as a file's do).
    pub fn seed(self, seed: u64) -> Self {
        let seed = i64::try_from(seed).expect("a seed a file can hold");
        self.top("seed", seed)
    }

    /// `flavour = FLAVOUR`.
    pub fn flavour(self, flavour: &str) -> Self {
        self.top("flavour", flavour)
    }

    /// `[workload]` with `messages`, `rate` (e.g. `"100/s"`) and `keys`.
    pub fn workload(self, messages: u32, rate: &str, keys: u32) -> Self {
        self.section("workload")
            .with("messages", messages)
            .with("rate", rate)
            .with("keys", keys)
    }

    /// [`ScenarioBuilder::workload`] with its messages evenly spaced (`arrival = "constant"`):
    /// the first at 1/rate, no draw.
    pub fn evenly(self, messages: u32, rate: &str, keys: u32) -> Self {
        self.workload(messages, rate, keys)
            .with("arrival", "constant")
    }

    /// A `[[broker]]` named `name`, after those already written (failover order).
    pub fn broker(self, name: &str) -> Self {
        self.push("broker").with("name", name)
    }

    /// `[consumers]` with `count` and `service` (a duration such as `"10ms"`, or
    /// [`exponential`]).
    pub fn consumers(self, count: u32, service: impl Into<Value>) -> Self {
        self.section("consumers")
            .with("count", count)
            .with("service", service)
    }

    /// `prefetch = N` in `[consumers]`.
    pub fn prefetch(self, prefetch: u32) -> Self {
        self.section("consumers").with("prefetch", prefetch)
    }

    /// Makes the last entry of the array of tables `array` (`broker`, `fault`) current again.
    pub fn last(mut self, array: &'static str) -> Self {
        match self.doc.get(array) {
            Some(Value::Array(a)) if matches!(a.last(), Some(Value::Table(_))) => {}
            _ => panic!("no [[{array}]] yet"),
        }
        self.at = At::Last(array);
        self
    }

    /// A `[[fault]]` of `kind`, after those already written; its fields follow with
    /// [`ScenarioBuilder::with`].
    pub fn fault(self, kind: &str) -> Self {
        self.push("fault").with("kind", kind)
    }

    /// A `[[fault]]` of `kind` at `at` lasting `span` (`at = AT`, `for = SPAN`).
    pub fn fault_for(self, kind: &str, at: &str, span: &str) -> Self {
        self.fault(kind).with("at", at).with("for", span)
    }

    /// Makes the table at the dotted `path` (`lease`, `redelivery`, `strategy.kafka`) current,
    /// creating it (an empty table, as a bare header in a file) if absent.
    pub fn section(mut self, path: &str) -> Self {
        self.table(path);
        self.at = At::Table(path.into());
        self
    }

    /// Sets `key` in the current table (replacing a value set before).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        let value = value.into();
        let table = match self.at.clone() {
            At::Top => &mut self.doc,
            At::Table(path) => self.table(&path),
            At::Last(name) => match self.doc.get_mut(name) {
                Some(Value::Array(a)) => match a.last_mut() {
                    Some(Value::Table(t)) => t,
                    _ => unreachable!("push adds a table"),
                },
                _ => unreachable!("push adds the array"),
            },
        };
        table.insert(key.into(), value);
        self
    }

    /// The scenario file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.doc).expect("a TOML table renders")
    }

    /// Loads [`ScenarioBuilder::to_toml`] as the file `test.toml` through [`load_str`], with
    /// `extra` checks (the strategies' names and parameters).
    pub fn load(
        &self,
        extra: &dyn Fn(&Scenario) -> Vec<FieldError>,
    ) -> Result<Scenario, ScenarioError> {
        load_str("test.toml", &self.to_toml(), extra)
    }

    /// Appends an empty table to the array of tables `name`, current from now on.
    fn push(mut self, name: &'static str) -> Self {
        let entry = self
            .doc
            .entry(name)
            .or_insert_with(|| Value::Array(Vec::new()));
        match entry {
            Value::Array(a) => a.push(Value::Table(Table::new())),
            other => panic!("{name} is {other}, not an array of tables"),
        }
        self.at = At::Last(name);
        self
    }

    /// The table at the dotted `path`, created if absent.
    fn table(&mut self, path: &str) -> &mut Table {
        let mut t = &mut self.doc;
        for part in path.split('.') {
            let v = t.entry(part).or_insert_with(|| Value::Table(Table::new()));
            t = match v {
                Value::Table(inner) => inner,
                other => panic!("{part} in {path} is {other}, not a table"),
            };
        }
        t
    }
}

impl std::fmt::Display for ScenarioBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_toml())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Scenario, ScenarioError> {
        load_str("test.toml", text, &|_| Vec::new())
    }

    /// The scenario as the serializer writes it: equal text, equal scenario.
    fn canonical(sc: &Scenario) -> String {
        toml::to_string(sc).unwrap()
    }

    #[test]
    fn a_built_scenario_is_the_one_its_file_gives() {
        // The same file written another way (inline tables): TOML's meaning, not its layout.
        let file = r#"
seed = 7
flavour = "kafka"
strategies = ["kafka", "single"]
workload = { messages = 10, rate = "1/s", arrival = "constant", keys = 1 }
broker = [{ name = "a" }, { name = "b", persistent = true }]
consumers = { count = 2, prefetch = 500, service = { dist = "exponential", mean = "5ms" } }
strategy = { kafka = { partitions = 3 } }
lease = { duration = "30s" }
fault = [
    { kind = "slow_consumer", consumer = 0, factor = 5, at = "0s", for = "100s" },
    { kind = "consumer_crash", consumer = 1, at = "2s" },
]
"#;
        let built = ScenarioBuilder::new(&["kafka", "single"])
            .seed(7)
            .flavour("kafka")
            .evenly(10, "1/s", 1)
            .broker("a")
            .broker("b")
            .with("persistent", true)
            .consumers(2, exponential("5ms"))
            .prefetch(500)
            .section("strategy.kafka")
            .with("partitions", 3)
            .section("lease")
            .with("duration", "30s")
            .fault_for("slow_consumer", "0s", "100s")
            .with("consumer", 0)
            .with("factor", 5)
            .fault("consumer_crash")
            .with("consumer", 1)
            .with("at", "2s");
        let want = canonical(&load(file).unwrap());
        assert_eq!(canonical(&built.load(&|_| Vec::new()).unwrap()), want);
        // Another value is another scenario: the comparison can tell.
        let other = built.clone().section("lease").with("duration", "31s");
        assert_ne!(canonical(&load(&other.to_toml()).unwrap()), want);
    }

    #[test]
    fn a_misspelt_field_is_refused_as_in_a_file() {
        let b = ScenarioBuilder::new(&["single"]).workload(1, "1/s", 1);
        let b = b.broker("a").consumers(1, "1ms").with("prefech", 1);
        let e = b.load(&|_| Vec::new()).unwrap_err().to_string();
        assert!(e.contains("prefech"), "{e}");
        // And the engine's validation runs: no keys is a problem of meaning, not of syntax.
        let e = ScenarioBuilder::new(&["single"])
            .workload(1, "1/s", 0)
            .broker("a")
            .consumers(1, "1ms")
            .load(&|_| Vec::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("workload.keys"), "{e}");
    }
}
