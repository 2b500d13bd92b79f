//! The progress bar of the long commands (`sim run`, `sim check`, `sim sweep`, `sim explore`):
//! drawn on standard error only when it is a terminal and outside CI, and only once the work has
//! taken a second. Where no bar is drawn (a CI log, a pipe), the `sim` binary turns on a
//! heartbeat instead: one line every [`HEARTBEAT_EVERY`] while the work goes on, so that a log
//! shows a long `sim check` is alive.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the heartbeat prints its line.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);

/// Set once by the `sim` binary ([`enable_heartbeat`]); the library's callers (tests) get none.
static HEARTBEAT: AtomicBool = AtomicBool::new(false);

/// Turns the heartbeat on for the long commands of this process (called by the `sim` binary
/// when [`wanted`] is false: standard error is not a terminal, or `CI` is set).
pub fn enable_heartbeat() {
    HEARTBEAT.store(true, Ordering::Relaxed);
}

/// A thread printing `sim: POS/LEN UNIT done, Ns elapsed` every `every` until stopped.
struct Heartbeat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    fn start(
        bar: ProgressBar,
        unit: String,
        every: Duration,
        mut out: Box<dyn Write + Send>,
    ) -> Heartbeat {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let started = Instant::now();
        let thread = std::thread::spawn(move || {
            beat_until_stopped(&flag, every, || {
                let len = bar.length().unwrap_or(0);
                // A log that cannot be written to is no reason to stop the work.
                let _ = writeln!(
                    out,
                    "sim: {}/{len} {unit} done, {}s elapsed",
                    bar.position(),
                    started.elapsed().as_secs()
                );
                let _ = out.flush();
            })
        });
        Heartbeat {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Calls `beat` every `every` until the flag is set. The flag is read before each wait, not
/// only after it: a `stop` that came before this thread first took the lock notified nobody, and
/// a wait then would hold the command's exit for a whole `every` (it held every quick `sim run`
/// with standard error in a pipe or a log for 30 s).
fn beat_until_stopped(flag: &(Mutex<bool>, Condvar), every: Duration, mut beat: impl FnMut()) {
    let (lock, cv) = flag;
    let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
    while !*stopped {
        let (guard, timeout) = cv
            .wait_timeout(stopped, every)
            .unwrap_or_else(|e| e.into_inner());
        stopped = guard;
        if !*stopped && timeout.timed_out() {
            beat();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

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
    heartbeat: Mutex<Option<Heartbeat>>,
}

impl Progress {
    /// A bar over `len` steps of `unit`; with no bar but the heartbeat on ([`enable_heartbeat`]),
    /// a line on standard error every [`HEARTBEAT_EVERY`].
    pub fn new(len: u64, unit: &str, enabled: bool) -> Progress {
        let p = Progress::bar_only(len, unit, enabled);
        if !enabled && HEARTBEAT.load(Ordering::Relaxed) {
            p.beat_to(unit, HEARTBEAT_EVERY, Box::new(std::io::stderr()));
        }
        p
    }

    /// Starts the heartbeat, every `every`, to `out`.
    fn beat_to(&self, unit: &str, every: Duration, out: Box<dyn Write + Send>) {
        let beat = Heartbeat::start(self.bar.clone(), unit.to_string(), every, out);
        *self.heartbeat.lock().unwrap_or_else(|e| e.into_inner()) = Some(beat);
    }

    fn bar_only(len: u64, unit: &str, enabled: bool) -> Progress {
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
            heartbeat: Mutex::new(None),
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

    /// Removes the bar from the terminal; stops the heartbeat.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        if let Some(mut beat) = self
            .heartbeat
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            beat.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer into a shared buffer.
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The heartbeat prints where the work is, while it goes on, and nothing after `finish`.
    #[test]
    fn the_heartbeat_says_how_far_the_work_is() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let p = Progress::bar_only(5, "runs", false);
        p.beat_to(
            "runs",
            Duration::from_millis(5),
            Box::new(Shared(Arc::clone(&buf))),
        );
        p.inc();
        p.inc();
        let text = || String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !text().contains("sim: 2/5 runs done") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(text().contains("sim: 2/5 runs done, "), "{}", text());
        p.finish();
        let after = text().len();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(text().len(), after, "a line after finish");
    }

    /// A stop that comes before the heartbeat's thread first waits ends it at once: the flag is
    /// read before the wait (with the read only after it, this waits an hour).
    #[test]
    fn a_stop_before_the_first_wait_is_not_lost() {
        let flag = Arc::new((Mutex::new(true), Condvar::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let f = Arc::clone(&flag);
        std::thread::spawn(move || {
            let mut beats = 0;
            beat_until_stopped(&f, Duration::from_secs(3600), || beats += 1);
            let _ = tx.send(beats);
        });
        // A liveness bound far above the immediate return, not a timing measurement.
        assert_eq!(rx.recv_timeout(Duration::from_secs(120)), Ok(0));
    }

    /// Without the binary turning it on, the library prints no heartbeat.
    #[test]
    fn no_heartbeat_unless_the_binary_asks() {
        let p = Progress::new(3, "runs", false);
        assert!(p.heartbeat.lock().unwrap().is_none());
    }
}
