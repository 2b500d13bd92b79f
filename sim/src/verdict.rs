//! The verdict on one strategy's run, like Jepsen's `:valid?`: its guarantee held and everything
//! was delivered (`ok`), or why not (`FAIL: 14,435 of 30,000 never delivered (pending at the
//! end)`, `FAIL: 3 ordering violations, 2 stale writes`). And the order in which runs rank, so
//! that no chart or table can make a strategy look better for not delivering.

use crate::summary::Metrics;

/// What a run of one strategy proved: a list of failures, empty when it held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Each failure in words, the worst first: messages never delivered, then the guarantee's
    /// figure, then stale writes (the target went backwards).
    pub failures: Vec<String>,
}

impl Verdict {
    /// Its guarantee held and every message that should have taken effect did.
    pub fn valid(&self) -> bool {
        self.failures.is_empty()
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.valid() {
            f.write_str("ok")
        } else {
            write!(f, "FAIL: {}", self.failures.join(", "))
        }
    }
}

/// `n` with thousands separated by commas (`14,435`).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n thing` or `n things`, `n` grouped (`1 stale write`, `14,435 messages`): every count phrase
/// of the verdicts, warnings and charts (issue 41: "1 stale writes").
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", grouped(n), if n == 1 { one } else { many })
}

/// Judges one run: `guarantee` is the figure the strategy's promise is about
/// (`ordering_violations` or `stale_writes`, `sim list`). It fails when a message never took
/// effect ([`Metrics::undelivered`]), when its guarantee's figure is not 0, or when the target
/// went back to an older state (`stale_writes`, whatever the guarantee). A strategy that guards
/// the write rather than the order is not failed for handling out of order.
pub fn judge(m: &Metrics, guarantee: &str) -> Verdict {
    let mut failures = Vec::new();
    if m.undelivered > 0 {
        // Saturating: a summary read from a file may not add up.
        let lost_commands = m
            .undelivered
            .saturating_sub(m.pending_at_end)
            .saturating_sub(m.lost)
            .saturating_sub(m.given_up)
            .saturating_sub(m.innocent_dead_lettered)
            .saturating_sub(m.innocent_dropped);
        let parts: Vec<(u64, &str)> = [
            (m.pending_at_end, "pending at the end"),
            (m.lost, "lost"),
            (m.given_up, "given up by the producer"),
            (m.innocent_dead_lettered, "dead-lettered"),
            (m.innocent_dropped, "dropped"),
            (lost_commands, "rejected as stale"),
        ]
        .into_iter()
        .filter(|&(n, _)| n > 0)
        .collect();
        // One kind needs no count of its own.
        let why = match parts.as_slice() {
            [(_, what)] => what.to_string(),
            _ => parts
                .iter()
                .map(|(n, what)| format!("{} {what}", grouped(*n)))
                .collect::<Vec<_>>()
                .join(", "),
        };
        failures.push(format!(
            "{} of {} never delivered ({why})",
            grouped(m.undelivered),
            grouped(m.produced)
        ));
    }
    if m.ordering_violations > 0 && guarantee == "ordering_violations" {
        failures.push(count(
            m.ordering_violations,
            "ordering violation",
            "ordering violations",
        ));
    }
    if m.stale_writes > 0 {
        failures.push(count(m.stale_writes, "stale write", "stale writes"));
    }
    Verdict { failures }
}

/// Where a run ranks, best first when sorted: by the messages never delivered, then by its
/// guarantee's figure, then by p99 latency. Not delivering comes first, so a strategy that
/// delivers nothing never ranks above one that delivers everything, however many violations the
/// latter has: a message that never took effect leaves its key wrong for good.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rank {
    /// [`Metrics::undelivered`].
    pub undelivered: u64,
    /// The guarantee's figure.
    pub figure: f64,
    /// `latency_ms.p99` (undelivered messages counted at the run's end).
    pub p99_ms: f64,
}

/// The rank of a run of a strategy whose promise is about `guarantee`.
pub fn rank(m: &Metrics, guarantee: &str) -> Rank {
    Rank {
        undelivered: m.undelivered,
        figure: m.numeric(guarantee).unwrap_or(0.0),
        p99_ms: m.latency_ms.p99,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(produced: u64, undelivered: u64, violations: u64, stale: u64) -> Metrics {
        Metrics {
            produced,
            applied: produced - undelivered,
            pending_at_end: undelivered,
            undelivered,
            ordering_violations: violations,
            stale_writes: stale,
            ..Metrics::default()
        }
    }

    #[test]
    fn the_verdict_names_every_failure_in_one_line() {
        let v = |m: &Metrics, g| judge(m, g).to_string();
        assert_eq!(v(&run(30_000, 0, 0, 0), "ordering_violations"), "ok");
        assert_eq!(
            v(&run(30_000, 14_435, 1, 0), "ordering_violations"),
            "FAIL: 14,435 of 30,000 never delivered (pending at the end), 1 ordering violation"
        );
        assert_eq!(
            v(&run(100, 0, 3, 2), "ordering_violations"),
            "FAIL: 3 ordering violations, 2 stale writes"
        );
        // A strategy that guards the write is judged by its writes, not its handling order.
        assert_eq!(v(&run(100, 0, 71, 0), "stale_writes"), "ok");
        assert_eq!(
            v(&run(100, 0, 71, 48), "stale_writes"),
            "FAIL: 48 stale writes"
        );
        let mixed = Metrics {
            lost: 2,
            innocent_dead_lettered: 3,
            dead_lettered: 5,
            stale_rejected: 4,
            undelivered: 1 + 2 + 3 + 4,
            ..run(1000, 1, 0, 0)
        };
        assert_eq!(
            v(&mixed, "ordering_violations"),
            "FAIL: 10 of 1,000 never delivered (1 pending at the end, 2 lost, 3 dead-lettered, 4 rejected as stale)"
        );
        assert!(!judge(&mixed, "stale_writes").valid());
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    /// The table: delivering nothing, or part, never ranks above delivering everything,
    /// whatever the violations and latencies.
    #[test]
    fn not_delivering_never_ranks_above_delivering() {
        let all = Metrics {
            latency_ms: crate::summary::Latency {
                p50: 5_000.0,
                p99: 3_600_000.0,
                max: 3_600_000.0,
            },
            ..run(30_000, 0, 29_999, 29_999)
        };
        let none = run(30_000, 30_000, 0, 0);
        let half = run(30_000, 14_435, 1, 0);
        for g in ["ordering_violations", "stale_writes"] {
            assert!(rank(&all, g) < rank(&none, g));
            assert!(rank(&all, g) < rank(&half, g));
            assert!(rank(&half, g) < rank(&none, g));
        }
    }
}
