//! Composed strategies: one strategy's dispatch with another's handler, written `DISPATCH+HANDLER`
//! in a scenario's strategy list (`kafka+db_optimistic`: Kafka's partitions and commits, each
//! write guarded by a version check). Each part keeps its own `[strategy.NAME]` table.
//!
//! A dispatch part decides who gets which message (`select`, `route`, membership, settlement,
//! timers, and what the handler did through `on_handled`); a handler part decides what a
//! delivery does to the target (`begin`, `handle`, `abandon`) and hears world changes. Only
//! strategies whose dispatch is plain round-robin and whose handler state does not steer dispatch
//! can be handler parts; only those whose mechanism is their dispatch can be dispatch parts.
//!
//! Both parts are trait objects, as the engine's strategy is: adding a pair compiles nothing new.

use crate::{build_named, info, run_built, Role, ALL};
use sim::history::Observer;
use sim::strategy::{
    Begin, Control, DispatchCtx, Handler, HandlerCtx, MsgView, Outcome, Route, RouteCtx, Select,
    Strategy, WorldChange,
};
use sim::time::Time;
use sim::{FaultPlan, Params, RunError, RunOptions, Scenario, Status, StrategySummary};

/// The strategies that can be the dispatch part (before the `+`), in registry order.
pub fn dispatch_parts() -> Vec<&'static str> {
    ALL.iter()
        .filter(|i| i.role == Role::Dispatch)
        .map(|i| i.name)
        .collect()
}

/// The strategies that can be the handler part (after the `+`), by their rank.
pub fn handler_parts() -> Vec<&'static str> {
    let mut parts: Vec<(u8, &'static str)> = ALL
        .iter()
        .filter_map(|i| match i.role {
            Role::Handler { rank } => Some((rank, i.name)),
            _ => None,
        })
        .collect();
    parts.sort();
    parts.into_iter().map(|(_, n)| n).collect()
}

/// Why `name` cannot be the handler part of a composed strategy (None: it can).
pub fn handler_refusal(name: &str) -> Option<String> {
    match info(name).map(|i| i.role) {
        Some(Role::Handler { .. }) => None,
        Some(Role::Neither { as_handler, .. }) => Some(format!("{name} cannot be a handler part: {as_handler}")),
        Some(Role::Dispatch) => Some(format!("{name} cannot be a handler part: its mechanism is its dispatch (its handler is the plain one); write it before the +")),
        None => Some(format!("unknown strategy {name:?}")),
    }
}

/// Why `name` cannot be the dispatch part of a composed strategy (None: it can).
pub fn dispatch_refusal(name: &str) -> Option<String> {
    match info(name).map(|i| i.role) {
        Some(Role::Dispatch) => None,
        Some(Role::Neither { as_dispatch, .. }) => Some(format!("{name} cannot be a dispatch part: {as_dispatch}")),
        Some(Role::Handler { .. }) => Some(format!("{name} cannot be a dispatch part: its mechanism is its handler (its dispatch is plain round-robin); write it after the +")),
        None => Some(format!("unknown strategy {name:?}")),
    }
}

/// Why the composed name `dispatch+handler` is refused (None: it is a valid pair).
pub fn refusal(dispatch: &str, handler: &str) -> Option<String> {
    dispatch_refusal(dispatch).or_else(|| handler_refusal(handler))
}

/// Every valid pair, `dispatch+handler` (for `sim list`).
pub fn pairs() -> Vec<String> {
    let handlers = handler_parts();
    dispatch_parts()
        .iter()
        .flat_map(|d| handlers.iter().map(move |h| format!("{d}+{h}")))
        .collect()
}

/// A dispatch part's dispatch with a handler part's handling (its `begin`, `handle`, `abandon`;
/// and world changes, which both hear: a cache collapse, a consumer crash releasing locks).
pub struct Composed {
    dispatch: Box<dyn Strategy>,
    handler: Box<dyn Strategy>,
}

impl Handler for Composed {
    fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Begin {
        self.handler.begin(ctx, msg, ctl)
    }

    fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, ctl: &mut Control) -> Outcome {
        self.handler.handle(ctx, msg, ctl)
    }

    fn abandon(&mut self, now: Time, consumer: u32, msg: &MsgView, ctl: &mut Control) {
        self.handler.abandon(now, consumer, msg, ctl)
    }
}

impl Strategy for Composed {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, ctl: &mut Control) -> Select {
        self.dispatch.select(ctx, msg, ctl)
    }

    fn route(&mut self, ctx: &RouteCtx, msg: &MsgView) -> Route {
        self.dispatch.route(ctx, msg)
    }

    fn partition(&self, msg: &MsgView) -> u32 {
        self.dispatch.partition(msg)
    }

    fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.dispatch.on_attach(now, broker, consumer, ctl)
    }

    fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.dispatch.on_detach(now, broker, consumer, ctl)
    }

    fn on_silent_detach(&mut self, now: Time, broker: u16, consumer: u32, ctl: &mut Control) {
        self.dispatch.on_silent_detach(now, broker, consumer, ctl)
    }

    fn on_returned(&mut self, now: Time, broker: u16, msg: &MsgView, ctl: &mut Control) {
        self.dispatch.on_returned(now, broker, msg, ctl)
    }

    fn on_handled(
        &mut self,
        now: Time,
        consumer: u32,
        msg: &MsgView,
        outcome: &Outcome,
        ctl: &mut Control,
    ) {
        self.dispatch.on_handled(now, consumer, msg, outcome, ctl)
    }

    fn on_settled(&mut self, now: Time, msg: &MsgView, ctl: &mut Control) {
        self.dispatch.on_settled(now, msg, ctl)
    }

    // Handler parts set no timers: every wake-up is the dispatch part's.
    fn on_wake(&mut self, now: Time, token: u64, ctl: &mut Control) {
        self.dispatch.on_wake(now, token, ctl)
    }

    fn on_start(&mut self, seed: u64) {
        self.dispatch.on_start(seed);
        self.handler.on_start(seed);
    }

    fn on_world(&mut self, now: Time, change: WorldChange, ctl: &mut Control) {
        self.dispatch.on_world(now, change, ctl);
        self.handler.on_world(now, change, ctl);
    }
}

/// Runs the composed strategy `name` (`dispatch+handler`).
pub(crate) fn run_composed(
    name: &str,
    sc: &Scenario,
    plan: &FaultPlan,
    opts: &RunOptions,
    observer: Option<&mut dyn Observer>,
) -> Result<StrategySummary, RunError> {
    let (d, h) = name.split_once('+').expect("a composed name");
    if let Some(reason) = refusal(d, h) {
        return Ok(StrategySummary::new(
            name.to_string(),
            Status::NotApplicable,
            Some(reason),
            None,
            Params::default(),
        ));
    }
    // `flavour = "native"`: the pair runs on the dispatch part's broker.
    let sc = &*sc.on_flavour(info(d).expect("a dispatch part").flavour);
    let (handler, handler_params) = build_named(h, sc).expect("a handler part");
    let (dispatch, mut shown) = build_named(d, sc).expect("a dispatch part");
    shown.0.extend(handler_params.0);
    let built = dispatch.and_then(|dispatch| {
        Ok(Box::new(Composed {
            dispatch,
            handler: handler?,
        }) as Box<dyn Strategy>)
    });
    run_built(name, (built, shown), sc, plan, opts, observer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{kafka_topic, load, run};

    #[test]
    fn only_dispatch_mechanisms_go_first_and_only_self_contained_handlers_second() {
        assert_eq!(refusal("kafka", "db_optimistic"), None);
        assert_eq!(refusal("sqs_fifo", "cache_pessimistic"), None);
        assert!(refusal("kafka", "resequencer")
            .unwrap()
            .contains("owns dispatch state"));
        assert!(refusal("kafka", "unit_of_order")
            .unwrap()
            .contains("before the +"));
        assert!(refusal("db_optimistic", "notifier")
            .unwrap()
            .contains("after the +"));
        assert!(refusal("kafka", "nope").unwrap().contains("unknown"));
        assert_eq!(pairs().len(), 33);
        // Each strategy's declared role, read from the registry (sim list and the pairs' chart
        // styles follow these orders).
        assert_eq!(
            dispatch_parts(),
            [
                "competing",
                "single",
                "message_groups",
                "unit_of_order",
                "sqs_fifo",
                "kafka",
                "artemis_groups",
                "pulsar_key_shared",
                "rabbitmq_sac",
                "rabbitmq_hash",
                "servicebus_sessions"
            ]
        );
        assert_eq!(
            handler_parts(),
            ["db_optimistic", "notifier", "cache_pessimistic"]
        );
        assert!(refusal("resequencer", "notifier")
            .unwrap()
            .contains("its ordering happens in its handler"));
        assert!(pairs().contains(&"message_groups+db_optimistic".to_string()));
    }

    /// Kafka's replay after a crash re-applies older states; with a version check in the target
    /// (`kafka+db_optimistic`, comparing producer versions) they are refused instead: no stale
    /// write, and the dispatch is still Kafka's (one owner per partition, commits).
    #[test]
    fn a_guarding_handler_refuses_what_kafka_replays() {
        // The plain client's auto-commit: the replay spans seconds of records.
        let guarded = kafka_topic(&["kafka", "kafka+db_optimistic"])
            .section("consumers")
            .with("client", "plain")
            .section("strategy.db_optimistic")
            .with("compare", "version");
        let crash = guarded.fault_for("consumer_crash", "7s", "10s");
        let sc = load(&crash.with("consumer", 0));
        let plain = run(&sc, "kafka", 1);
        assert!(plain.stale_writes > 0 && plain.duplicates > 0, "{plain:?}");
        let guarded = run(&sc, "kafka+db_optimistic", 1);
        // The replayed older states are refused (acked without a write); only a key's newest
        // state, replayed, is written again (a harmless duplicate: the same version).
        assert_eq!(guarded.stale_writes, 0, "{guarded:?}");
        assert!(guarded.duplicates < plain.duplicates, "{guarded:?}");
        assert!(guarded.redeliveries > 0, "the replay happened");
        assert_eq!((guarded.lost, guarded.final_state_mismatches), (0, 0));
        assert!(guarded.coverage.commits > 0, "Kafka's commits still run");
        assert!(
            guarded.coverage.reassignments > 0,
            "Kafka's assignment still runs"
        );
    }

    /// A refused pair is refused by the loader, with the reason.
    #[test]
    fn the_loader_refuses_a_pair_with_its_reason() {
        let text = r#"
strategies = ["kafka+resequencer"]
[workload]
messages = 10
rate = "10/s"
keys = 2
[[broker]]
name = "a"
[consumers]
count = 1
service = "1ms"
"#;
        let err = sim::scenario::load_str("t.toml", text, &crate::validate)
            .map(|_| ())
            .expect_err("refused")
            .to_string();
        assert!(err.contains("owns dispatch state"), "{err}");
    }

    // --- Composed's forwarding: each call reaches the part it belongs to, arguments and
    // answers unchanged.

    use sim::history::FailReason;
    use sim::strategy::Row;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A part that logs every call it gets (as "part call args") and answers with marked values.
    struct Part {
        name: &'static str,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl Part {
        fn note(&self, what: String) {
            self.log.borrow_mut().push(format!("{} {what}", self.name));
        }
    }

    impl Handler for Part {
        fn begin(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Begin {
            self.note(format!("begin {} {} {}", ctx.now, ctx.consumer, msg.id));
            Begin::Wait { timeout: Some(5) }
        }
        fn handle(&mut self, ctx: &HandlerCtx, msg: &MsgView, _ctl: &mut Control) -> Outcome {
            self.note(format!("handle {} {} {}", ctx.step, ctx.consumer, msg.id));
            Outcome::After { delay: 3, step: 2 }
        }
        fn abandon(&mut self, now: Time, consumer: u32, msg: &MsgView, _ctl: &mut Control) {
            self.note(format!("abandon {now} {consumer} {}", msg.id));
        }
    }

    impl Strategy for Part {
        fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, _ctl: &mut Control) -> Select {
            self.note(format!("select {} {} {}", ctx.now, ctx.broker, msg.id));
            Select::Hold
        }
        fn route(&mut self, ctx: &RouteCtx, msg: &MsgView) -> Route {
            self.note(format!("route {} {}", ctx.producer, msg.id));
            Route::Broker(1)
        }
        fn on_attach(&mut self, now: Time, broker: u16, consumer: u32, _ctl: &mut Control) {
            self.note(format!("attach {now} {broker} {consumer}"));
        }
        fn on_detach(&mut self, now: Time, broker: u16, consumer: u32, _ctl: &mut Control) {
            self.note(format!("detach {now} {broker} {consumer}"));
        }
        fn on_returned(&mut self, now: Time, broker: u16, msg: &MsgView, _ctl: &mut Control) {
            self.note(format!("returned {now} {broker} {}", msg.id));
        }
        fn on_handled(
            &mut self,
            now: Time,
            consumer: u32,
            msg: &MsgView,
            outcome: &Outcome,
            _ctl: &mut Control,
        ) {
            self.note(format!("handled {now} {consumer} {} {outcome:?}", msg.id));
        }
        fn on_settled(&mut self, now: Time, msg: &MsgView, _ctl: &mut Control) {
            self.note(format!("settled {now} {}", msg.id));
        }
        fn on_wake(&mut self, now: Time, token: u64, _ctl: &mut Control) {
            self.note(format!("wake {now} {token}"));
        }
        fn on_world(&mut self, now: Time, change: WorldChange, _ctl: &mut Control) {
            self.note(format!("on_world {now} {change:?}"));
        }
        fn on_start(&mut self, seed: u64) {
            self.note(format!("start {seed}"));
        }
    }

    /// The cache handler part hears a cache collapse: an older message is accepted after it.
    #[test]
    fn the_cache_handler_part_hears_a_cache_collapse() {
        let mut h: Box<dyn Strategy> = Box::new(crate::CachePessimistic::new(
            1,
            1,
            1,
            crate::cache_pessimistic::CachePessimisticParams::default(),
        ));
        let ctl = &mut Control::default();
        let rows = [Row::default(); 1];
        let ctx = HandlerCtx::for_tests(0, 0, 0, &rows);
        let at = |ts: u64| MsgView {
            timestamp: ts,
            ..crate::test_util::view(ts, 0)
        };
        let mut deliver = |h: &mut Box<dyn Strategy>, ts| {
            assert_eq!(h.begin(&ctx, &at(ts), ctl), Begin::Proceed);
            h.handle(&ctx, &at(ts), ctl)
        };
        assert!(matches!(deliver(&mut h, 10), Outcome::Applied { .. }));
        assert_eq!(deliver(&mut h, 5), Outcome::Rejected);
        h.on_world(0, WorldChange::CacheCollapse, &mut Control::default());
        assert!(matches!(deliver(&mut h, 5), Outcome::Applied { .. }));
    }

    #[test]
    fn a_composed_strategy_forwards_each_call_to_its_part() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let part = |name| Part {
            name,
            log: log.clone(),
        };
        let mut s = Composed {
            dispatch: Box::new(part("d")),
            handler: Box::new(part("h")),
        };
        s.on_start(42);
        let ctl = &mut Control::default();
        let m = crate::test_util::view(9, 2);
        let rows = [Row::default(); 4];
        let ctx = HandlerCtx::for_tests(11, 3, 1, &rows);
        assert_eq!(s.begin(&ctx, &m, ctl), Begin::Wait { timeout: Some(5) });
        assert_eq!(
            s.handle(&ctx, &m, ctl),
            Outcome::After { delay: 3, step: 2 }
        );
        s.abandon(12, 3, &m, ctl);
        let dctx = DispatchCtx {
            now: 13,
            broker: 1,
            consumers: &[],
        };
        assert_eq!(s.select(&dctx, &m, ctl), Select::Hold);
        let rctx = RouteCtx {
            now: 14,
            producer: 4,
            connected: 0,
            up: &[true, true],
            held_since: None,
        };
        assert_eq!(s.route(&rctx, &m), Route::Broker(1));
        s.on_attach(15, 1, 5, ctl);
        s.on_detach(16, 1, 6, ctl);
        s.on_returned(17, 1, &m, ctl);
        s.on_handled(18, 7, &m, &Outcome::Failed(FailReason::Outage), ctl);
        s.on_settled(19, &m, ctl);
        s.on_wake(20, 77, ctl);
        s.on_world(21, WorldChange::CacheCollapse, ctl);
        assert_eq!(
            *log.borrow(),
            [
                "d start 42",
                "h start 42",
                "h begin 11 3 9",
                "h handle 1 3 9",
                "h abandon 12 3 9",
                "d select 13 1 9",
                "d route 4 9",
                "d attach 15 1 5",
                "d detach 16 1 6",
                "d returned 17 1 9",
                "d handled 18 7 9 Failed(Outage)",
                "d settled 19 9",
                "d wake 20 77",
                "d on_world 21 CacheCollapse",
                "h on_world 21 CacheCollapse",
            ]
        );
    }
}
