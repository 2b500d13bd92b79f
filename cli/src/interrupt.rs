//! The one Ctrl-C handler of the process. ctrlc accepts a single handler per process, so every
//! command that reacts to Ctrl-C goes through here: a sweep stops starting runs, a live run kills
//! its brokers and unwinds. Installing twice is harmless; the actions registered add up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

/// Set by Ctrl-C: loops that check it stop, and results so far are kept.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// An action the handler runs, by name.
type Action = (&'static str, fn());

/// Run first by the handler, in the order registered (e.g. SIGKILL of live brokers, which must
/// not outlive the process).
static ACTIONS: Mutex<Vec<Action>> = Mutex::new(Vec::new());

/// Installs the handler (once per process) and registers `action` under its name, once (None:
/// only the flag).
pub fn install(action: Option<Action>) {
    static ONCE: Once = Once::new();
    if let (Some(a), Ok(mut actions)) = (action, ACTIONS.lock()) {
        if !actions.iter().any(|(name, _)| *name == a.0) {
            actions.push(a);
        }
    }
    ONCE.call_once(|| {
        // ctrlc refuses only when another handler is already installed: none is, by the Once.
        let _ = ctrlc::set_handler(|| {
            let actions = ACTIONS.lock().map(|a| a.clone()).unwrap_or_default();
            for (_, a) in actions {
                a();
            }
            INTERRUPTED.store(true, Ordering::SeqCst);
        });
    });
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a() {}
    fn b() {}

    /// Each action is registered once however often it is installed, and both commands' actions
    /// stay registered (a second `ctrlc::set_handler` would have been refused).
    #[test]
    fn actions_add_up_once_each() {
        install(Some(("a", a)));
        install(Some(("a", a)));
        install(None);
        install(Some(("b", b)));
        let names: Vec<&str> = ACTIONS.lock().unwrap().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.iter().filter(|n| **n == "a").count(), 1);
        assert!(names.contains(&"b"));
        assert!(!interrupted());
    }
}
