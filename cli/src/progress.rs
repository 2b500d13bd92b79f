//! The progress bar of the long commands (`sim run`, `sim check`, `sim sweep`): drawn on standard
//! error only when it is a terminal and outside CI, and only once the work has taken a second.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether to draw progress at all: standard error is a terminal and `CI` is not set.
pub fn wanted() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
}

/// How long the work runs before the bar appears (a quick command prints no bar at all).
pub const DELAY: Duration = Duration::from_secs(1);

/// A bar over `len` steps of `unit` (e.g. "runs"); hidden unless `enabled`, and until [`DELAY`]
/// has passed.
pub struct Progress {
    bar: ProgressBar,
    enabled: bool,
    shown: AtomicBool,
    started: Instant,
}

impl Progress {
    /// A bar over `len` steps of `unit`.
    pub fn new(len: u64, unit: &str, enabled: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit}, eta {{eta}} {{msg}}"
            ))
            .expect("valid template")
            .progress_chars("=> "),
        );
        Progress {
            bar,
            enabled,
            shown: AtomicBool::new(false),
            started: Instant::now(),
        }
    }

    /// One step done (any thread).
    pub fn inc(&self) {
        self.bar.inc(1);
        self.show_if_slow();
    }

    /// What is being worked on now (e.g. the strategy).
    pub fn set_message(&self, msg: String) {
        self.bar.set_message(msg);
        self.show_if_slow();
    }

    fn show_if_slow(&self) {
        if self.enabled
            && self.started.elapsed() >= DELAY
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
