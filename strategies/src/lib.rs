//! ordsim's ordering strategies, one file each: a dispatch policy (broker side) plus a handler
//! (consumer side), behind the [`sim::strategy::Strategy`] interface.
//!
//! This crate also holds the registry: every strategy implements [`Named`] (name, summary,
//! parameters, build) and is listed once in the `registry!` invocation, which generates [`ALL`], the
//! parameter checks and [`run_named`].

#![forbid(unsafe_code)]

pub mod artemis_groups;
pub mod cache_pessimistic;
pub mod competing;
pub mod compose;
pub mod db_optimistic;
pub mod kafka;
pub mod message_groups;
pub mod notifier;
pub mod pulsar_key_shared;
pub mod rabbitmq_hash;
pub mod rabbitmq_sac;
pub mod resequencer;
pub mod servicebus_sessions;
pub mod single;
pub mod sqs_fifo;
pub mod unit_of_order;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sim::history::Observer;
use sim::scenario::{FieldError, Flavour, PathSeg, Scenario};
use sim::strategy::Strategy;
use sim::{FaultPlan, ParamValue, Params, RunError, RunOptions, Status, StrategySummary};

pub use artemis_groups::ArtemisGroups;
pub use cache_pessimistic::CachePessimistic;
pub use competing::Competing;
pub use db_optimistic::DbOptimistic;
pub use kafka::Kafka;
pub use message_groups::MessageGroups;
pub use notifier::Notifier;
pub use pulsar_key_shared::PulsarKeyShared;
pub use rabbitmq_hash::RabbitmqHash;
pub use rabbitmq_sac::RabbitmqSac;
pub use resequencer::Resequencer;
pub use servicebus_sessions::ServicebusSessions;
pub use single::Single;
pub use sqs_fifo::SqsFifo;
pub use unit_of_order::UnitOfOrder;

/// A strategy the registry knows: its name, what it models, its `[strategy.NAME]` parameters, and
/// how to build it for a scenario (or say why it cannot run there).
pub trait Named: Strategy + Sized {
    /// Name as written in scenario files.
    const NAME: &'static str;
    /// One line for `sim list`.
    const SUMMARY: &'static str;
    /// The metric (a [`sim::summary::Metrics`] field) its ordering guarantee is about: 0 there
    /// is what it promises under its faults, if it promises anything.
    const GUARANTEE: &'static str;
    /// `[strategy.NAME]` parameters (unknown fields rejected; every field has a default).
    /// Serialized, they give the effective values (a unit test checks that every serialized field
    /// is described in [`Named::PARAMS`]).
    type Params: DeserializeOwned + Serialize + Default;
    /// What each parameter means, in the order shown (one entry per field of `Params`).
    const PARAMS: &'static [ParamInfo];
    /// The broker product it models, whose defaults it runs on under `flavour = "native"`
    /// (ActiveMQ Classic for the seeds' broker-neutral strategies).
    const FLAVOUR: Flavour = Flavour::Activemq;
    /// What it can be in a composed pair `DISPATCH+HANDLER` ([`compose`]).
    const ROLE: Role;
    /// Rules between parameters, or between a parameter and the scenario, beyond each
    /// parameter's [`ParamInfo::range`] (e.g. an `unbind` of a queue that does not exist): each
    /// problem as (parameter name, what is wrong and what is allowed). Checked in validation, so
    /// an out-of-range value is bad input (exit 2), never "not applicable" in the run.
    fn check(_sc: &Scenario, _params: &Self::Params) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// An instance for `sc`, or the reason it is not applicable there (a strategy that cannot
    /// apply to a valid scenario, e.g. the notifier without source access). The registry calls
    /// it ([`build_named`], [`run_named`], [`builds`]) only with parameters inside their
    /// [`ParamInfo::range`] that pass [`Named::check`] (checked in validation and again there),
    /// so it does not repeat those checks; a direct caller with hand-made parameters skips them.
    fn build(sc: &Scenario, params: Self::Params) -> Result<Self, String>;
}

/// What a strategy can be in a composed pair `DISPATCH+HANDLER` ([`compose`]): declared by the
/// strategy itself ([`Named::ROLE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Its mechanism is its dispatch (its handler is the plain one): it can go before the `+`.
    Dispatch,
    /// Its mechanism is its handler (its dispatch is plain round-robin) and its handler state does
    /// not steer dispatch: it can go after the `+`. `rank` orders the handler parts (`sim list`,
    /// the pairs' chart styles).
    Handler {
        /// Its place among the handler parts.
        rank: u8,
    },
    /// Neither, with the reason for each side.
    Neither {
        /// Why it cannot be a dispatch part.
        as_dispatch: &'static str,
        /// Why it cannot be a handler part.
        as_handler: &'static str,
    },
}

/// One `[strategy.NAME]` parameter, as `sim list --params` describes it.
#[derive(Clone, Copy, Debug)]
pub struct ParamInfo {
    /// Field name in `[strategy.NAME]`.
    pub name: &'static str,
    /// What it does in the model.
    pub meaning: &'static str,
    /// Unit or accepted values.
    pub unit: &'static str,
    /// Default, as written in a scenario file.
    pub default: &'static str,
    /// The real setting it models.
    pub models: &'static str,
    /// Values that reorder or lose messages even without any fault.
    pub hazard: Option<Hazard>,
    /// The values it takes beyond its type, checked in validation (exit 2 with the parameter's
    /// line and this range). A numeric parameter's upper bound also keeps a run's memory and
    /// setup within the whole-file limits.
    pub range: Range,
    /// What its value costs a run in memory and setup work, if it sizes a table or a setup step
    /// (`None`: a flag, a delay, a cap on something the keys size). Checked in validation against
    /// what the rest of the file leaves of `[run] memory_budget_mb` and `[run] max_events`, so
    /// its bound follows from those limits.
    pub sizes: Option<Sizing>,
}

/// How a parameter's value sizes a run ([`ParamInfo::sizes`]).
#[derive(Clone, Copy, Debug)]
pub struct Sizing {
    /// What one unit of it costs, in words (for the error).
    pub what: &'static str,
    /// Its cost at value `n` in a scenario (which also holds the other parameters it multiplies
    /// with); never smaller for a larger `n`.
    pub cost: fn(n: u64, sc: &Scenario) -> Footprint,
}

/// What a parameter's value costs a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Memory its tables take, in bytes.
    pub bytes: u64,
    /// Setup and rebalance steps, each counted as one engine event against `[run] max_events`.
    pub steps: u64,
}

/// A parameter's value as the effective parameters show it, from `[strategy.NAME]` or its default
/// (for a cost that multiplies two parameters).
pub fn param_u64(sc: &Scenario, strategy: &str, param: &str, default: u64) -> u64 {
    sc.strategy
        .get(strategy)
        .and_then(|t| t.get(param))
        .and_then(toml::Value::as_integer)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(default)
}

/// The error for a parameter naming a broker the scenario does not have: the name, and the
/// brokers it has (the first ten).
pub(crate) fn not_a_broker(sc: &Scenario, name: &str) -> String {
    format!(
        "{name:?} is not a [[broker]] (brokers: {})",
        sc.brokers
            .iter()
            .take(10)
            .map(|b| format!("{:?}", b.name))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The consumer joins and leaves a run may see, each a rebalance of a group: every consumer
/// joins once, and each fault occurrence may take one away and back.
pub fn rebalances(sc: &Scenario) -> u64 {
    let occurrences = sim::scenario::estimated_occurrences(sc).min(u64::MAX as f64 / 4.0) as u64;
    (sc.dispatch_targets() as u64).saturating_add(occurrences.saturating_mul(2))
}

/// The values a parameter takes beyond what its type says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// Every value of its type: a flag, one of the words of its `unit`, a list whose entries
    /// [`Named::check`] looks at, a name checked against the scenario.
    Any,
    /// An integer from the first to the second, both included.
    Int(i64, i64),
    /// A duration from the first to the second, both included (a word such as `"forever"`,
    /// where the type takes one, is not a duration and is left to the type).
    Dur(sim::time::Dur, sim::time::Dur),
}

/// The longest duration a parameter takes: ten years (a timer set this far ahead still fits the
/// clock, and no real setting is longer).
pub const MAX_PARAM_DUR: sim::time::Dur = sim::time::Dur::from_secs(10 * 31_557_600);

impl Range {
    /// A duration from `min` to [`MAX_PARAM_DUR`].
    pub const fn dur_from(min: sim::time::Dur) -> Range {
        Range::Dur(min, MAX_PARAM_DUR)
    }

    /// Why `v` (as written in the file) is out of this range, if it is.
    pub fn refuse(&self, v: &toml::Value) -> Option<String> {
        match (*self, v) {
            (Range::Int(lo, hi), toml::Value::Integer(n)) if !(lo..=hi).contains(n) => {
                Some(format!("{n} is out of range: allowed {self}"))
            }
            (Range::Dur(lo, hi), toml::Value::String(t)) => match sim::time::Dur::parse(t) {
                Ok(d) if d < lo || d > hi => Some(format!("{t:?} is out of range: allowed {self}")),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether the value as shown in the effective parameters is inside the range.
    pub fn holds(&self, shown: &str) -> bool {
        match *self {
            Range::Any => true,
            Range::Int(lo, hi) => shown.parse::<i64>().is_ok_and(|n| (lo..=hi).contains(&n)),
            Range::Dur(lo, hi) => {
                sim::time::Dur::parse(shown).map_or(true, |d| (lo..=hi).contains(&d))
            }
        }
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Range::Any => write!(f, "any value of its type"),
            Range::Int(lo, hi) => write!(f, "{lo} to {hi}"),
            Range::Dur(lo, hi) => write!(f, "\"{lo}\" to \"{hi}\""),
        }
    }
}

/// Values of a parameter that reorder or lose messages without any fault.
#[derive(Clone, Copy, Debug)]
pub struct Hazard {
    /// Which values, in words (for `sim list --params`).
    pub when: &'static str,
    /// Whether the value (as shown in the effective parameters) is one of them, in this scenario.
    pub applies: fn(value: &str, sc: &Scenario) -> bool,
    /// What goes wrong, without any fault.
    pub effect: &'static str,
}

/// No parameters: only an empty table is accepted.
#[derive(Debug, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A strategy's name and what it models.
#[derive(Clone, Copy, Debug)]
pub struct Info {
    /// Name as written in scenario files.
    pub name: &'static str,
    /// One line for `sim list`.
    pub summary: &'static str,
    /// The metric its ordering guarantee is about ([`Named::GUARANTEE`]).
    pub guarantee: &'static str,
    /// Its `[strategy.NAME]` parameters (`sim list --params`).
    pub params: &'static [ParamInfo],
    /// The broker whose defaults it runs on under `flavour = "native"` ([`Named::FLAVOUR`]).
    pub flavour: Flavour,
    /// What it can be in a composed pair ([`Named::ROLE`]).
    pub role: Role,
}

fn params<N: Named>(sc: &Scenario) -> Result<N::Params, FieldError> {
    match sc.strategy.get(N::NAME) {
        None => Ok(N::Params::default()),
        Some(t) => t.clone().try_into().map_err(|e: toml::de::Error| {
            FieldError::new(
                vec![PathSeg::from("strategy"), PathSeg::from(N::NAME)],
                e.message().trim().to_string(),
            )
        }),
    }
}

/// The most problems reported for one `[strategy.NAME]` table (the loader caps what it shows).
const MAX_PARAM_PROBLEMS: usize = 100;

/// Every problem of `[strategy.NAME]` in `sc`, each at its parameter (`strategy.NAME.PARAM`) so
/// the loader points at its line: a value of the wrong type or an unknown field, a value out of
/// its [`ParamInfo::range`], a rule of [`Named::check`].
fn check<N: Named>(sc: &Scenario) -> Vec<FieldError> {
    let Some(t) = sc.strategy.get(N::NAME) else {
        return Vec::new();
    };
    let at = |param: &str| {
        vec![
            PathSeg::from("strategy"),
            PathSeg::from(N::NAME),
            PathSeg::from(param),
        ]
    };
    let p = match params::<N>(sc) {
        Ok(p) => p,
        Err(whole) => {
            // Every field has a default: a table of one field fails only if that field is bad,
            // so each bad field is named (a table of many bad fields is not tried past the cap).
            let mut errs = Vec::new();
            for (k, v) in t {
                let one: toml::Table = std::iter::once((k.clone(), v.clone())).collect();
                if let Err(e) = one.try_into::<N::Params>() {
                    errs.push(FieldError::new(at(k), e.message().trim().to_string()));
                    if errs.len() >= MAX_PARAM_PROBLEMS {
                        break;
                    }
                }
            }
            if errs.is_empty() {
                errs.push(whole);
            }
            return errs;
        }
    };
    let mut errs: Vec<FieldError> = N::PARAMS
        .iter()
        .filter_map(|info| {
            let why = info.range.refuse(t.get(info.name)?)?;
            Some(FieldError::new(at(info.name), why))
        })
        .collect();
    errs.extend(
        N::check(sc, &p)
            .into_iter()
            .map(|(param, why)| FieldError::new(at(param), why)),
    );
    errs
}

/// Each parameter of `N` that sizes a run ([`ParamInfo::sizes`]), at its value in `sc` (or its
/// default), against what the rest of the file leaves of `[run] memory_budget_mb` and `[run]
/// max_events`: the error names the value, the limit it breaks, the largest value that fits and
/// how to raise the limit.
fn check_sizes<N: Named>(sc: &Scenario, p: &N::Params) -> Vec<FieldError> {
    let set = fields(p);
    let budget = sc.run.memory_budget_mb.saturating_mul(1024 * 1024);
    let occurrences = sim::scenario::estimated_occurrences(sc);
    let events = sim::scenario::estimated_events(sc, occurrences).min(u64::MAX as f64) as u64;
    let (bytes_left, steps_left) = (
        budget.checked_sub(sim::scenario::estimated_run_bytes(sc)),
        sc.run.max_events.checked_sub(events),
    );
    // The rest of the file over a limit is reported by the scenario's own check.
    let (Some(bytes_left), Some(steps_left)) = (bytes_left, steps_left) else {
        return Vec::new();
    };
    let fits = |f: Footprint| f.bytes <= bytes_left && f.steps <= steps_left;
    let given = |name: &str| {
        sc.strategy
            .get(N::NAME)
            .is_some_and(|t| t.contains_key(name))
    };
    // Each sizing parameter over the limits, at its value.
    let over: Vec<(&ParamInfo, Sizing, u64, Footprint)> = N::PARAMS
        .iter()
        .filter_map(|info| {
            let sizing = info.sizes?;
            let n = u64::try_from(set.get(info.name)?.as_integer()?).ok()?;
            let cost = (sizing.cost)(n, sc);
            (!fits(cost)).then_some((info, sizing, n, cost))
        })
        .collect();
    // Two that multiply are both over: the one the file set is named, not its partner's default.
    let any_given = over.iter().any(|(info, ..)| given(info.name));
    let mut errs = Vec::new();
    for (info, sizing, n, cost) in over {
        if any_given && !given(info.name) {
            continue;
        }
        // The largest value that fits: the cost grows with the value.
        let (mut lo, mut hi) = (0u64, n);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if fits((sizing.cost)(mid, sc)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let from = if given(info.name) {
            ""
        } else {
            " (its default)"
        };
        let broken = if cost.bytes > bytes_left {
            format!(
                "needs about {} MiB ({}), more than the {} MiB the rest of the file leaves of \
                 [run] memory_budget_mb = {}",
                cost.bytes.div_ceil(1024 * 1024),
                sizing.what,
                bytes_left / (1024 * 1024),
                sc.run.memory_budget_mb
            )
        } else {
            format!(
                "needs about {} setup steps ({}), more than the {} the rest of the file leaves \
                 of [run] max_events = {}",
                cost.steps, sizing.what, steps_left, sc.run.max_events
            )
        };
        let raise = if cost.bytes > bytes_left {
            "memory_budget_mb"
        } else {
            "max_events"
        };
        errs.push(FieldError::new(
            vec![
                PathSeg::from("strategy"),
                PathSeg::from(N::NAME),
                PathSeg::from(info.name),
            ],
            format!(
                "{n}{from} {broken}; at most {lo} fits here: lower it (or the consumers and \
                 faults it multiplies with) or raise [run] {raise}"
            ),
        ));
    }
    errs
}

/// A value as text: strings unquoted, anything else as TOML writes it.
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Serializes a `Params` into its fields.
fn fields<P: Serialize>(p: &P) -> toml::Table {
    match toml::Value::try_from(p) {
        Ok(toml::Value::Table(t)) => t,
        other => panic!("parameters must serialize to a table: {other:?}"),
    }
}

/// The effective values of `p`, in [`Named::PARAMS`] order, each marked default or not and with
/// its hazard warning (in `sc`) if it has one.
pub fn effective<N: Named>(sc: &Scenario, p: &N::Params) -> Params {
    let set = fields(p);
    let def = fields(&N::Params::default());
    Params(
        N::PARAMS
            .iter()
            .map(|info| {
                let value = set.get(info.name).map(value_text).unwrap_or_default();
                let default = set.get(info.name) == def.get(info.name);
                let warning = info
                    .hazard
                    .filter(|h| (h.applies)(&value, sc))
                    .map(|h| h.effect.to_string());
                ParamValue {
                    name: info.name.to_string(),
                    value,
                    default,
                    warning,
                }
            })
            .collect(),
    )
}

/// Strategy `N` built for `sc` from its `[strategy.NAME]` table (or why it cannot run there), and
/// its effective parameters.
fn build_boxed<N: Named + 'static>(sc: &Scenario) -> Built {
    let parsed = checked::<N>(sc);
    let shown = match &parsed {
        Ok(p) => effective::<N>(sc, p),
        Err(_) => Params::default(),
    };
    let built = parsed.and_then(|p| N::build(sc, p));
    (built.map(|s| Box::new(s) as Box<dyn Strategy>), shown)
}

/// `N`'s parameters in `sc`, or the first problem validation reports for them: the registry's
/// ranges and [`Named::check`] are checked here as well, so a scenario built in code (not
/// loaded, so never validated) gets the same refusal as "not applicable", and no strategy's
/// [`Named::build`] repeats them.
fn checked<N: Named>(sc: &Scenario) -> Result<N::Params, String> {
    let p = params::<N>(sc).map_err(|e| e.message)?;
    match check::<N>(sc).into_iter().next() {
        Some(e) => {
            let param = match e.path.last() {
                Some(PathSeg::Key(k)) => k.clone(),
                _ => String::new(),
            };
            Err(format!("[strategy.{}] {param}: {}", N::NAME, e.message))
        }
        None => Ok(p),
    }
}

/// A strategy built for a scenario (or why it cannot run there), and its effective parameters.
pub type Built = (Result<Box<dyn Strategy>, String>, Params);

/// The registry's entry for `name`.
fn info(name: &str) -> Option<&'static Info> {
    ALL.iter().find(|i| i.name == name)
}

/// Runs `built` (named `name`) on `sc`, or reports why it is not applicable.
fn run_built(
    name: &str,
    built: Built,
    sc: &Scenario,
    plan: &FaultPlan,
    opts: &RunOptions,
    observer: Option<&mut dyn Observer>,
) -> Result<StrategySummary, RunError> {
    let (built, shown) = built;
    Ok(match built {
        Ok(mut strategy) => StrategySummary::new(
            name.to_string(),
            Status::Ok,
            None,
            Some(sim::run(sc, plan, &mut *strategy, opts, observer)?),
            shown,
        )
        .judged(guarantee(name)),
        Err(reason) => StrategySummary::new(
            name.to_string(),
            Status::NotApplicable,
            Some(reason),
            None,
            shown,
        ),
    })
}

/// The figure the named strategy's promise is about (`sim list`): a composed pair's is its
/// handler part's when that guards the write (`stale_writes`), else its dispatch part's;
/// `ordering_violations` for a name the registry does not know.
pub fn guarantee(name: &str) -> &'static str {
    let of = |n: &str| info(n).map_or("ordering_violations", |i| i.guarantee);
    match name.split_once('+') {
        Some((_, h)) if of(h) == "stale_writes" => "stale_writes",
        Some((d, _)) => of(d),
        None => of(name),
    }
}

/// The strategies' reference table of docs/scenarios.md (`sim list --doc strategies`): each
/// strategy, what it models, the figure its guarantee is about, the broker whose defaults it runs
/// on under `flavour = "native"`, and what it can be in a composed pair `DISPATCH+HANDLER`.
pub fn reference_markdown() -> String {
    let mut s = String::from(
        "| strategy | what it models | its guarantee is about | under `flavour = \"native\"` | in a pair `DISPATCH+HANDLER` |\n|---|---|---|---|---|\n",
    );
    for i in ALL {
        let role = match i.role {
            Role::Dispatch => "dispatch part (before the `+`)".to_string(),
            Role::Handler { .. } => "handler part (after the `+`)".to_string(),
            Role::Neither {
                as_dispatch,
                as_handler,
            } => format!("neither: {as_dispatch}; {as_handler}"),
        };
        s.push_str(&format!(
            "| `{}` | {} | `{}` | `{}` | {role} |\n",
            i.name,
            i.summary,
            i.guarantee,
            i.flavour.name()
        ));
    }
    s
}

/// The parameters' summary table of docs/scenarios.md (`sim list --doc strategy-params`): each
/// strategy's `[strategy.NAME]` parameters with their defaults (`sim list --params` describes
/// each in full).
pub fn params_markdown() -> String {
    let mut s = String::from("| strategy | parameters (default) |\n|---|---|\n");
    for i in ALL {
        let params: Vec<String> = i
            .params
            .iter()
            .map(|p| format!("`{}` (`{}`)", p.name, p.default))
            .collect();
        let cell = if params.is_empty() {
            "none".to_string()
        } else {
            params.join(", ")
        };
        s.push_str(&format!("| `{}` | {cell} |\n", i.name));
    }
    s
}

/// Lists every strategy once; generates [`ALL`], the parameter checks and [`run_named`].
macro_rules! registry {
    ($($ty:ty),* $(,)?) => {
        /// Every strategy, in the order `sim list` shows them.
        pub const ALL: &[Info] = &[$(Info {
            name: <$ty as Named>::NAME,
            summary: <$ty as Named>::SUMMARY,
            guarantee: <$ty as Named>::GUARANTEE,
            params: <$ty as Named>::PARAMS,
            flavour: <$ty as Named>::FLAVOUR,
            role: <$ty as Named>::ROLE,
        }),*];

        /// Builds the named strategy for `sc` (already on its flavour): None if no strategy has
        /// that name.
        pub fn build_named(name: &str, sc: &Scenario) -> Option<Built> {
            $(if name == <$ty as Named>::NAME {
                return Some(build_boxed::<$ty>(sc));
            })*
            None
        }

        /// Every strategy's serialized default parameters, as field names (for the test that
        /// every field is described).
        #[cfg(test)]
        fn default_fields() -> Vec<(&'static str, Vec<String>)> {
            vec![$((<$ty as Named>::NAME, fields(&<<$ty as Named>::Params as Default>::default()).keys().cloned().collect())),*]
        }

        /// The named strategy's parameters that size a run, checked at their values in `sc`
        /// (or their defaults): empty for an unknown name or a table that does not parse.
        fn sizes_named(sc: &Scenario, name: &str) -> Vec<FieldError> {
            $(if name == <$ty as Named>::NAME {
                return params::<$ty>(sc)
                    .map(|p| check_sizes::<$ty>(sc, &p))
                    .unwrap_or_default();
            })*
            Vec::new()
        }

        fn check_params(sc: &Scenario, name: &str) -> Option<Vec<FieldError>> {
            $(if name == <$ty as Named>::NAME {
                return Some(check::<$ty>(sc));
            })*
            None
        }

        /// Whether the named strategy builds in `sc` (its reason if not): `Ok` for a valid
        /// scenario unless the strategy cannot apply there by design (the tests' check that
        /// every value validation accepts builds).
        pub fn builds(name: &str, sc: &Scenario) -> Result<(), String> {
            $(if name == <$ty as Named>::NAME {
                let sc = &*sc.on_flavour(<$ty as Named>::FLAVOUR);
                let p = checked::<$ty>(sc)?;
                return <$ty as Named>::build(sc, p).map(|_| ());
            })*
            Err(format!("unknown strategy {name:?}"))
        }

        /// The named strategy's effective parameters in `sc` (empty if the name is unknown or
        /// its `[strategy.NAME]` table is invalid).
        pub fn effective_params(name: &str, sc: &Scenario) -> Params {
            $(if name == <$ty as Named>::NAME {
                return params::<$ty>(sc).map(|p| effective::<$ty>(sc, &p)).unwrap_or_default();
            })*
            Params::default()
        }

        /// Runs the named strategy on the scenario and its plan, handing every history event to
        /// `observer` if there is one. The engine takes the strategy as a trait object and is
        /// compiled once, in `sim` ([`sim::run`]). A strategy that cannot run in the scenario
        /// reports `not_applicable` with the reason.
        pub fn run_named(
            name: &str,
            sc: &Scenario,
            plan: &FaultPlan,
            opts: &RunOptions,
            observer: Option<&mut dyn Observer>,
        ) -> Result<StrategySummary, RunError> {
            if name.contains('+') {
                return compose::run_composed(name, sc, plan, opts, observer);
            }
            if let Some(i) = info(name) {
                let sc = &*sc.on_flavour(i.flavour);
                let built = build_named(name, sc).expect("every listed strategy builds");
                return run_built(name, built, sc, plan, opts, observer);
            }
            Ok(StrategySummary::new(
                name.to_string(),
                Status::NotApplicable,
                Some(format!("unknown strategy {name:?}")),
                None,
                Params::default(),
            ))
        }
    };
}

// Braces keep rustfmt from folding the list: one strategy per line.
registry! {
    Competing,
    Single,
    Notifier,
    DbOptimistic,
    CachePessimistic,
    MessageGroups,
    UnitOfOrder,
    Resequencer,
    SqsFifo,
    Kafka,
    ArtemisGroups,
    PulsarKeyShared,
    RabbitmqSac,
    RabbitmqHash,
    ServicebusSessions,
}

/// Whether `name` is a known strategy, or a valid composed pair (`kafka+db_optimistic`).
pub fn is_known(name: &str) -> bool {
    match name.split_once('+') {
        Some((d, h)) => compose::refusal(d, h).is_none(),
        None => ALL.iter().any(|i| i.name == name),
    }
}

/// Checks strategy names and `[strategy.NAME]` tables; used by the scenario loader.
pub fn validate(sc: &Scenario) -> Vec<FieldError> {
    let known = ALL.iter().map(|i| i.name).collect::<Vec<_>>().join(", ");
    let mut errs = Vec::new();
    for (i, name) in sc.strategies.iter().enumerate() {
        if let Some((d, h)) = name.split_once('+') {
            if let Some(reason) = compose::refusal(d, h) {
                errs.push(FieldError::new(
                    vec![PathSeg::from("strategies"), PathSeg::Index(i)],
                    format!(
                        "{name:?}: {reason} (valid pairs: a dispatch part of {} + a handler part of {})",
                        compose::dispatch_parts().join(", "),
                        compose::handler_parts().join(", ")
                    ),
                ));
            }
            continue;
        }
        if !is_known(name) {
            errs.push(FieldError::new(
                vec![PathSeg::from("strategies"), PathSeg::Index(i)],
                format!(
                    "unknown strategy {name:?} (known: {known}){}",
                    sim::suggest::did_you_mean(name, ALL.iter().map(|i| i.name))
                ),
            ));
        }
    }
    errs.extend(native_problems(sc));
    // Every strategy that may run (listed, a part of a listed pair, or given parameters): its
    // table's problems, then, if it has none, what its parameters cost the run.
    let mut named: std::collections::BTreeSet<&str> =
        sc.strategy.keys().map(String::as_str).collect();
    named.extend(sc.strategies.iter().flat_map(|n| n.split('+')));
    for name in named {
        match check_params(sc, name) {
            Some(problem) if !problem.is_empty() => errs.extend(problem),
            Some(_) => errs.extend(sizes_named(sc, name)),
            None if sc.strategy.contains_key(name) => errs.push(FieldError::new(
                vec![PathSeg::from("strategy"), PathSeg::from(name)],
                format!("no strategy named {name:?} takes parameters (known: {known})"),
            )),
            None => {}
        }
    }
    errs
}

/// The broker whose defaults strategy `name` runs on under `flavour = "native"` (a composed
/// pair: its dispatch part's), if the name is known.
pub fn native_flavour(name: &str) -> Option<Flavour> {
    let part = name.split_once('+').map_or(name, |(d, _)| d);
    info(part).map(|i| i.flavour)
}

/// Under `flavour = "native"`, what stops the scenario on the broker of one of its strategies
/// (the scenario's own validation reads it as `activemq`): each broker's problems once, naming
/// the strategies that run there.
fn native_problems(sc: &Scenario) -> Vec<FieldError> {
    if sc.flavour != sim::scenario::FlavourChoice::Native {
        return Vec::new();
    }
    let mut by_flavour: Vec<(Flavour, Vec<&str>)> = Vec::new();
    for name in &sc.strategies {
        let Some(f) = native_flavour(name) else {
            continue;
        };
        match by_flavour.iter_mut().find(|(g, _)| *g == f) {
            Some((_, names)) => names.push(name),
            None => by_flavour.push((f, vec![name])),
        }
    }
    let mut errs = Vec::new();
    for (f, names) in by_flavour {
        if let Err(problems) = sc.on_flavour(f).resolve() {
            for e in problems {
                errs.push(FieldError::new(
                    e.path,
                    format!(
                        "under flavour = \"native\", {} {} on {}: {}",
                        names.join(", "),
                        if names.len() == 1 { "runs" } else { "run" },
                        f.name(),
                        e.message
                    ),
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod param_tests {
    use super::*;

    /// A guarantee names a metric the summary has (and `[expect]` can bound).
    #[test]
    fn every_guarantee_is_a_metric() {
        let metrics: Vec<String> = sim::summary::Metrics::default()
            .fields()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        for i in ALL {
            assert!(
                metrics.iter().any(|m| m == i.guarantee),
                "{}: {} is not a metric",
                i.name,
                i.guarantee
            );
        }
    }

    /// Every serialized field of every strategy's `Params` is described in its `PARAMS`, and
    /// nothing else is; defaults and hazards are consistent with the metadata.
    #[test]
    fn every_parameter_is_described() {
        for (name, keys) in default_fields() {
            let info = ALL.iter().find(|i| i.name == name).unwrap();
            let mut described: Vec<String> =
                info.params.iter().map(|p| p.name.to_string()).collect();
            let mut keys = keys;
            described.sort();
            keys.sort();
            assert_eq!(
                described, keys,
                "{name}: PARAMS vs the fields of its Params"
            );
            for p in info.params {
                assert!(
                    !p.meaning.is_empty() && !p.unit.is_empty() && !p.models.is_empty(),
                    "{name}.{}",
                    p.name
                );
            }
        }
    }

    /// The default text in the metadata is what the default params serialize to.
    #[test]
    fn default_texts_match_the_defaults() {
        // No `[strategy.NAME]` table: every strategy's effective parameters are its defaults.
        // Through the registry, so a strategy added there cannot escape this check.
        let sc = test_util::simple("\"competing\"", 2, 100, "");
        for info in ALL {
            let eff = effective_params(info.name, &sc);
            assert_eq!(eff.0.len(), info.params.len(), "{}", info.name);
            for (v, p) in eff.0.iter().zip(info.params) {
                assert!(v.default, "{}.{}", info.name, p.name);
                assert_eq!(v.value, p.default, "{}.{}", info.name, p.name);
            }
        }
    }
}

#[cfg(test)]
mod native_tests {
    use super::test_util::{run, scenario};
    use super::*;

    /// Poison messages and a consumer crash, on `flavour`: the brokers' defaults differ here
    /// (ActiveMQ redelivers to the same consumer after 1s, 7 deliveries, then the DLQ; Kafka
    /// polls batches and commits every 5s; SQS leases each receive and never gives up).
    fn faulty(flavour: &str) -> Scenario {
        scenario(&format!(
            r#"
flavour = "{flavour}"
strategies = ["competing"]
[workload]
messages = 1500
rate = "100/s"
keys = 20
poison_fraction = 0.004
[[broker]]
name = "a"
[consumers]
count = 3
prefetch = 5
service = {{ dist = "exponential", mean = "10ms" }}
[[fault]]
kind = "consumer_crash"
consumer = 1
at = "5s"
for = "3s"
"#
        ))
    }

    /// `flavour = "native"` runs every strategy, and a composed pair, exactly as it runs on
    /// its own broker's flavour; the flavour matters in this scenario (a broker-neutral
    /// strategy on `native` is not the same run as on `kafka`).
    #[test]
    fn native_runs_each_strategy_on_its_own_brokers_defaults() {
        let native = faulty("native");
        let mut names: Vec<String> = ALL.iter().map(|i| i.name.to_string()).collect();
        names.push("kafka+db_optimistic".into());
        for name in &names {
            let own = match name.split_once('+') {
                Some((d, _)) => ALL.iter().find(|i| i.name == d).unwrap().flavour,
                None => ALL.iter().find(|i| i.name == name).unwrap().flavour,
            };
            assert_eq!(
                run(&native, name, 3),
                run(&faulty(own.name()), name, 3),
                "{name} on {}",
                own.name()
            );
        }
        assert_ne!(
            run(&native, "competing", 3),
            run(&faulty("kafka"), "competing", 3)
        );
        assert_ne!(
            run(&native, "kafka", 3),
            run(&faulty("activemq"), "kafka", 3)
        );
        let kinds: Vec<Flavour> = ALL.iter().map(|i| i.flavour).collect();
        for f in [
            Flavour::Kafka,
            Flavour::Sqs,
            Flavour::Artemis,
            Flavour::Weblogic,
        ] {
            assert!(kinds.contains(&f), "{f:?}: some strategy models it");
        }
        assert_eq!(
            ALL.iter().find(|i| i.name == "competing").unwrap().flavour,
            Flavour::Activemq
        );
    }
}

/// Helpers for the strategies' own tests: run a scenario written inline.
#[cfg(test)]
pub(crate) mod test_util {
    use sim::scenario::{exponential, ScenarioBuilder};
    use sim::strategy::{ConsumerSlot, Control, DispatchCtx, MsgView, Select, Strategy};
    use sim::time::Time;
    use sim::{FaultPlan, Metrics, RunOptions, Scenario};

    /// `select` at broker 0 for `msg` with `slots` (consumer id, free prefetch), as dispatch would
    /// call it: the id of the consumer chosen, or the `Select` when none is.
    pub fn select_at(
        s: &mut impl Strategy,
        now: Time,
        slots: &[(u32, u32)],
        msg: &MsgView,
        ctl: &mut Control,
    ) -> Result<u32, Select> {
        select_on(s, 0, now, slots, msg, ctl)
    }

    /// [`select_at`] at broker `broker`.
    pub fn select_on(
        s: &mut impl Strategy,
        broker: u16,
        now: Time,
        slots: &[(u32, u32)],
        msg: &MsgView,
        ctl: &mut Control,
    ) -> Result<u32, Select> {
        let consumers: Vec<ConsumerSlot> = slots
            .iter()
            .map(|&(id, free)| ConsumerSlot { id, free })
            .collect();
        let ctx = DispatchCtx {
            now,
            broker,
            consumers: &consumers,
        };
        match s.select(&ctx, msg, ctl) {
            Select::Consumer(i) => Ok(consumers[i].id),
            other => Err(other),
        }
    }

    /// Message `id` of `key` (seq = id, the key as its group header), as dispatch shows it.
    pub fn view(id: u64, key: u32) -> MsgView {
        MsgView {
            id,
            key,
            seq: id as u32,
            timestamp: 0,
            producer: 0,
            redeliveries: 0,
            group: Some(key),
        }
    }

    /// Loads a scenario from TOML text, with the strategy checks.
    pub fn scenario(text: &str) -> Scenario {
        sim::scenario::load_str("test.toml", text, &super::validate)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs one strategy with `seed`: its whole summary entry (effective parameters included).
    pub fn summary(sc: &Scenario, strategy: &str, seed: u64) -> sim::StrategySummary {
        let plan = FaultPlan::resolve(sc, seed);
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        super::run_named(strategy, sc, &plan, &opts, None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The hazard warning of parameter `param` in a summary entry, if its value has one.
    pub fn warning(s: &sim::StrategySummary, param: &str) -> Option<String> {
        let p = s.params.0.iter().find(|p| p.name == param);
        p.unwrap_or_else(|| panic!("no parameter {param}"))
            .warning
            .clone()
    }

    /// Loads a built scenario, with the strategy checks.
    pub fn load(b: &ScenarioBuilder) -> Scenario {
        scenario(&b.to_toml())
    }

    /// `strategies` on the `kafka` flavour's broker `kafka`: 4000 records over 40 keys at 100/s
    /// to 3 consumers polling up to 500 (exponential 10ms each), a topic of 6 partitions.
    pub fn kafka_topic(strategies: &[&str]) -> ScenarioBuilder {
        ScenarioBuilder::new(strategies)
            .flavour("kafka")
            .workload(4000, "100/s", 40)
            .broker("kafka")
            .consumers(3, exponential("10ms"))
            .prefetch(500)
            .section("strategy.kafka")
            .with("partitions", 6)
    }

    /// Runs one strategy with `seed`.
    pub fn run(sc: &Scenario, strategy: &str, seed: u64) -> Metrics {
        let plan = FaultPlan::resolve(sc, seed);
        let opts = RunOptions {
            seed,
            max_events: None,
            max_sim_time: None,
        };
        super::run_named(strategy, sc, &plan, &opts, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .metrics
            .expect("applicable")
    }

    /// Whether `strategy` builds in `sc` (made in code, never validated) with its parameter
    /// `field` set to `value`: the registry's check refuses an out-of-range value here too.
    pub fn builds_with(
        strategy: &str,
        sc: &Scenario,
        field: &str,
        value: toml::Value,
    ) -> Result<(), String> {
        let mut sc = sc.clone();
        let table: toml::Table = std::iter::once((field.to_string(), value)).collect();
        sc.strategy.insert(strategy.into(), table);
        crate::builds(strategy, &sc)
    }

    /// One broker, `consumers` consumers with exponential service of mean 10ms, prefetch 1,
    /// `rate` per second, 50 keys, 3000 messages, plus `extra` TOML.
    pub fn simple(strategies: &str, consumers: u32, rate: u32, extra: &str) -> Scenario {
        simple_with(strategies, consumers, rate, 50, "", extra)
    }

    /// [`simple`] with `keys` keys and `workload` lines added to the `[workload]` table.
    pub fn simple_with(
        strategies: &str,
        consumers: u32,
        rate: u32,
        keys: u32,
        workload: &str,
        extra: &str,
    ) -> Scenario {
        scenario(&format!(
            r#"
strategies = [{strategies}]
[workload]
messages = 3000
rate = "{rate}/s"
keys = {keys}
{workload}
[[broker]]
name = "a"
[consumers]
count = {consumers}
service = {{ dist = "exponential", mean = "10ms" }}
{extra}
"#
        ))
    }
}
