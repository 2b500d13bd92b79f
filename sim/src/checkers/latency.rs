//! Latency percentiles in fixed memory (an HDR histogram over microseconds).

use crate::time::Time;
use hdrhistogram::Histogram;

/// Produce -> apply latencies.
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl LatencyHistogram {
    /// Three significant digits, auto-resizing: exact enough for milliseconds, O(log range) memory.
    pub fn new() -> Self {
        let mut h = Histogram::new(3).expect("valid precision");
        h.auto(true);
        LatencyHistogram { h }
    }

    /// One latency, in microseconds.
    #[inline]
    pub fn record(&mut self, us: Time) {
        // With auto-resize on, `record` grows the range; it cannot fail for a u64 value.
        let _ = self.h.record(us);
    }

    /// The value at quantile `q` (0 when empty).
    pub fn quantile(&self, q: f64) -> Time {
        if self.h.is_empty() {
            0
        } else {
            self.h.value_at_quantile(q)
        }
    }

    /// The largest value recorded (to histogram precision).
    pub fn max(&self) -> Time {
        if self.h.is_empty() {
            0
        } else {
            self.h.max()
        }
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}
