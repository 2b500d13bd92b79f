//! Latency percentiles in fixed memory (an HDR histogram over microseconds).
//!
//! A run records one latency per message: the counting is done here, in the buckets of an
//! `hdrhistogram::Histogram` of three significant digits (the same index for every value, a few
//! instructions inlined at the apply), and the histogram itself is built from the counts only
//! when the figures are read, once per run. Its answers are the histogram's own: a bucket's
//! lowest value falls in the same bucket, so the rebuilt histogram has the same counts.

use crate::time::Time;
use hdrhistogram::Histogram;

/// log2 of the half count of sub-buckets: 2048 sub-buckets for three significant digits
/// (hdrhistogram's `sub_bucket_count_magnitude` is ceil(log2(2 * 10^3)) = 11), unit 1 µs.
const HALF_MAGNITUDE: u32 = 10;
/// Sub-bucket 2047 and below are bucket 0 (`sub_bucket_mask`).
const SUB_BUCKET_MASK: u64 = (1 << (HALF_MAGNITUDE + 1)) - 1;
/// hdrhistogram's `leading_zero_count_base`: 64 - unit magnitude (0) - 11.
const LEADING_ZERO_BASE: u32 = 64 - (HALF_MAGNITUDE + 1);

/// hdrhistogram's counts index of `value` (`Histogram::index_for`, unit magnitude 0).
#[inline(always)]
fn index_for(value: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = (value >> bucket) as usize;
    ((bucket as usize + 1) << HALF_MAGNITUDE) + sub_bucket - (1 << HALF_MAGNITUDE)
}

/// The lowest value counted at `index` (hdrhistogram's `value_for`).
fn value_for(index: usize) -> u64 {
    let half = 1usize << HALF_MAGNITUDE;
    let bucket = (index >> HALF_MAGNITUDE) as i64 - 1;
    let sub_bucket = (index & (half - 1)) + half;
    if bucket < 0 {
        (sub_bucket - half) as u64
    } else {
        (sub_bucket as u64) << bucket
    }
}

/// Produce -> apply latencies.
#[derive(Default)]
pub struct LatencyHistogram {
    /// Counts by hdrhistogram index, grown to the largest index recorded.
    counts: Vec<u64>,
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        LatencyHistogram { counts: Vec::new() }
    }

    /// One latency, in microseconds.
    // Always inlined: once per message, a few instructions where the call frame cost as much.
    #[inline(always)]
    pub fn record(&mut self, us: Time) {
        let i = index_for(us);
        match self.counts.get_mut(i) {
            Some(c) => *c += 1,
            None => self.grow_and_record(i),
        }
    }

    #[cold]
    #[inline(never)]
    fn grow_and_record(&mut self, i: usize) {
        self.counts.resize(i + 1, 0);
        self.counts[i] += 1;
    }

    /// The histogram of what was recorded (three significant digits, auto-resizing).
    fn histogram(&self) -> Histogram<u64> {
        let mut h = Histogram::new(3).expect("valid precision");
        h.auto(true);
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                // With auto-resize on, `record_n` grows the range; it cannot fail for a u64.
                let _ = h.record_n(value_for(i), n);
            }
        }
        h
    }

    /// The values at quantiles 0.5 and 0.99 and the largest value recorded (to histogram
    /// precision); 0 each when empty.
    pub fn figures(&self) -> (Time, Time, Time) {
        let h = self.histogram();
        if h.is_empty() {
            (0, 0, 0)
        } else {
            (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// What the checkers used to keep: every value recorded into the histogram itself.
    fn direct(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new(3).unwrap();
        h.auto(true);
        for &v in values {
            let _ = h.record(v);
        }
        h
    }

    /// The counts give the histogram's own index for every value, and the figures are the
    /// ones the histogram gives with every value recorded into it (the summaries depend on it).
    #[test]
    fn figures_are_the_histograms() {
        let mut rng = crate::rng::stream(4, crate::rng::Component::Strategy, 0, 0);
        let mut sets: Vec<Vec<u64>> = vec![
            vec![],
            vec![0],
            vec![0, 0, 1],
            vec![2047, 2048, 2049, 4095, 4096, 4097],
            vec![3_200_000_000_000_000, 1],
            vec![u64::MAX / 2, 7],
        ];
        for scale in [10u64, 1_000, 100_000, 10_000_000, 1_000_000_000_000] {
            sets.push((0..5_000).map(|_| rng.random_range(0..scale)).collect());
        }
        for values in sets {
            let want = direct(&values);
            let mut ours = LatencyHistogram::new();
            for &v in &values {
                ours.record(v);
            }
            let h = ours.histogram();
            assert_eq!(h.len(), want.len());
            for &v in &values {
                assert_eq!(value_for(index_for(v)), want.lowest_equivalent(v), "{v}");
                assert_eq!(h.count_at(v), want.count_at(v), "{v}");
            }
            for q in [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_eq!(h.value_at_quantile(q), want.value_at_quantile(q), "{q}");
            }
            if !values.is_empty() {
                assert_eq!(h.max(), want.max());
                assert_eq!(
                    ours.figures(),
                    (
                        want.value_at_quantile(0.5),
                        want.value_at_quantile(0.99),
                        want.max()
                    )
                );
            } else {
                assert_eq!(ours.figures(), (0, 0, 0));
            }
        }
    }
}
