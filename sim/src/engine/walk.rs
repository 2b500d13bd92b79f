//! The measure of how a message walks through the engine's files (issue 35: "a message's walk
//! from production to ack crosses at most 10 file transitions"), in test builds only: every
//! handler other files may call (`pub(super)`) and every step the router carries out enters its
//! file with [`walk!`]; a call whose file differs from its caller's is one transition. Release
//! builds compile none of it.

#[cfg(test)]
use std::cell::RefCell;

#[cfg(test)]
#[derive(Default)]
struct Walk {
    /// The files of the handlers on the stack, innermost last (empty: the loop, in `mod.rs`).
    stack: Vec<&'static str>,
    /// Calls into a file other than the caller's, since [`reset`].
    transitions: u64,
    /// The files entered, in order, since [`reset`] (for the test's message).
    trail: Vec<&'static str>,
}

#[cfg(test)]
thread_local! {
    static WALK: RefCell<Walk> = RefCell::new(Walk::default());
}

#[cfg(test)]
/// A handler of `file` is entered; the walk leaves it when the guard drops.
pub(super) fn enter(file: &'static str) -> Guard {
    WALK.with(|w| {
        let mut w = w.borrow_mut();
        // An empty stack is the loop or the router (`mod.rs`): entering any file from there is
        // a transition.
        if w.stack.last() != Some(&file) {
            w.transitions += 1;
            w.trail.push(file);
        }
        w.stack.push(file);
    });
    Guard
}

#[cfg(test)]
/// Leaves the handler's file when dropped.
pub(super) struct Guard;

#[cfg(test)]
impl Drop for Guard {
    fn drop(&mut self) {
        WALK.with(|w| {
            w.borrow_mut().stack.pop();
        });
    }
}

#[cfg(test)]
/// Starts counting afresh (this thread's walk).
pub(super) fn reset() {
    WALK.with(|w| {
        let mut w = w.borrow_mut();
        w.transitions = 0;
        w.trail.clear();
    });
}

#[cfg(test)]
/// The transitions since [`reset`], and the files entered at each.
pub(super) fn counted() -> (u64, Vec<&'static str>) {
    WALK.with(|w| {
        let w = w.borrow();
        (w.transitions, w.trail.clone())
    })
}

/// Enters the current file's handler, in test builds (see the module's text).
macro_rules! walk {
    () => {
        #[cfg(test)]
        let _walk = super::walk::enter(file!());
    };
}
pub(super) use walk;

#[cfg(test)]
mod tests {
    use crate::faults::FaultPlan;
    use crate::scenario::load_str;
    use crate::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};
    use crate::{run, RunOptions};

    /// Hands each message to the first consumer with room.
    struct FirstFree;
    impl Handler for FirstFree {}
    impl Strategy for FirstFree {
        fn select(&mut self, ctx: &DispatchCtx, _msg: &MsgView, _ctl: &mut Control) -> Select {
            match ctx.consumers.iter().position(|c| c.free > 0) {
                Some(i) => Select::Consumer(i),
                None => Select::Hold,
            }
        }
    }

    /// The transitions of the one message of `extra`'s scenario, from its production on (the
    /// connects at time 0 are not its walk), and the files entered.
    fn walk_of(extra: &str) -> (u64, Vec<&'static str>) {
        let text = format!(
            "strategies = [\"x\"]\n[workload]\nmessages = 1\nrate = \"10/s\"\nkeys = 1\n\
             [[broker]]\nname = \"a\"\n[consumers]\ncount = 1\nservice = \"1ms\"\n{extra}"
        );
        let sc = load_str("walk.toml", &text, &|_| Vec::new()).expect("a valid scenario");
        let plan = FaultPlan::resolve(&sc, 1);
        let opts = RunOptions {
            seed: 1,
            max_events: None,
            max_sim_time: None,
        };
        let mut first = true;
        let mut observe = |e: &crate::history::Event| {
            if first && matches!(e, crate::history::Event::Produce { .. }) {
                first = false;
                super::reset();
            }
        };
        run(&sc, &plan, &mut FirstFree, &opts, Some(&mut observe)).expect("runs");
        super::counted()
    }

    #[test]
    fn a_message_walks_from_production_to_its_ack_across_at_most_10_files() {
        let (n, trail) = walk_of("");
        eprintln!("walk: {n} transitions: {trail:?}");
        assert!(n <= 10, "{n} file transitions: {trail:?}");
    }
}
