//! The pure parts of `sim live`'s pacing and fault timing (issue 37): how the producers kept to
//! the scenario's schedule, when the faults happened beside their plan, and what `--strict`
//! fails. Not behind the `live` feature, so the default `cargo test` checks them.

use std::time::Duration;

/// How far from its planned time a crash or kill may be done (1 ms).
pub const FAULT_PRECISION: Duration = Duration::from_millis(1);

/// When a fault happened, beside its plan (times from the start of the schedule).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultTiming {
    /// What (`broker a killed`, `consumer 0 crashed`, ...).
    pub what: String,
    /// The plan's time.
    pub planned: Duration,
    /// When it was done (the kill's instant, the start of a restart); `None`: not done (a
    /// consumer already down).
    pub actual: Option<Duration>,
    /// A restart: when the broker's port answered.
    pub ready: Option<Duration>,
}

/// A message counts late when it was first written more than this after its scheduled time.
pub const LATE_AFTER: Duration = Duration::from_millis(10);
/// A run falls behind when more than this share of its messages (outside broker outages) is
/// late, or its achieved rate is below `1 - BEHIND_SHARE` of the planned one.
pub const BEHIND_SHARE: f64 = 0.05;
/// After a broker's port answers again, producers need their reconnect delay and this much to
/// catch up: messages scheduled until then are excused from lateness.
pub const CATCH_UP: Duration = Duration::from_millis(200);

/// How the producers kept to the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Pacing {
    /// Messages of the schedule.
    pub messages: usize,
    /// The schedule's rate outside broker outages (per second).
    pub planned_rate: f64,
    /// The rate the same messages were written at (per second; 0 when one was never written).
    pub achieved_rate: f64,
    /// Messages judged (scheduled outside broker outages).
    pub judged: usize,
    /// Of those, late (written more than [`LATE_AFTER`] after their time, or never).
    pub late: usize,
    /// The largest lag of a judged message.
    pub max_lag: Duration,
    /// Beyond the tolerance ([`BEHIND_SHARE`]).
    pub behind: bool,
}

impl Pacing {
    /// One line for the run's output.
    pub fn describe(&self) -> String {
        format!(
            "rate planned {:.0}/s, achieved {:.0}/s; {} of {} message(s) outside outages more than {} ms late (largest lag {:.1} ms){}",
            self.planned_rate,
            self.achieved_rate,
            self.late,
            self.judged,
            LATE_AFTER.as_millis(),
            self.max_lag.as_secs_f64() * 1e3,
            if self.behind {
                format!(
                    ": BEHIND the schedule (tolerance {:.0}%)",
                    BEHIND_SHARE * 100.0
                )
            } else {
                String::new()
            }
        )
    }
}

/// The windows in which a broker was down (from its kill to its port answering again, plus
/// the producers' reconnect delay and [`CATCH_UP`]).
pub fn outages(faults: &[FaultTiming], reconnect: Duration) -> Vec<(Duration, Duration)> {
    let mut out = Vec::new();
    let mut down: Vec<(String, Duration)> = Vec::new();
    for f in faults {
        if let (Some(name), Some(at)) = (f.what.strip_suffix(" killed"), f.actual) {
            down.push((name.to_string(), at));
        }
        if let (Some(name), Some(ready)) = (f.what.strip_suffix(" restarted"), f.ready) {
            if let Some(k) = down.iter().position(|(n, _)| n == name) {
                let (_, from) = down.remove(k);
                out.push((from, ready + reconnect + CATCH_UP));
            }
        }
    }
    out
}

/// How `sent` (per schedule message, when first written; `None`: never) kept to `schedule`,
/// messages scheduled inside an `excused` window not judged.
pub fn pacing(
    schedule: &[(Duration, u32, u32)],
    sent: &[Option<Duration>],
    excused: &[(Duration, Duration)],
) -> Pacing {
    let n = schedule.len();
    // Both rates over the same messages: each stretch of consecutive messages scheduled
    // outside the outages, its intervals over its scheduled span (planned) and over the span of
    // its writes (achieved). A producer on time writes each stretch in its scheduled span.
    let excused_at = |at: Duration| excused.iter().any(|&(a, b)| a <= at && at < b);
    let (mut gaps, mut planned_span, mut written_span) = (0usize, 0f64, 0f64);
    let mut stretch: Vec<(Duration, Option<Duration>)> = Vec::new();
    let mut close = |st: &mut Vec<(Duration, Option<Duration>)>| {
        if st.len() > 1 {
            gaps += st.len() - 1;
            planned_span += (st[st.len() - 1].0 - st[0].0).as_secs_f64();
            let w: Vec<Duration> = st.iter().filter_map(|x| x.1).collect();
            let (lo, hi) = (w.iter().min(), w.iter().max());
            written_span += match (lo, hi) {
                (Some(lo), Some(hi)) if w.len() == st.len() => (*hi - *lo).as_secs_f64(),
                // A message never written: the stretch was not kept to.
                _ => f64::INFINITY,
            };
        }
        st.clear();
    };
    for (i, &(at, _, _)) in schedule.iter().enumerate() {
        if excused_at(at) {
            close(&mut stretch);
        } else {
            stretch.push((at, sent.get(i).copied().flatten()));
        }
    }
    close(&mut stretch);
    let rate = |span: f64| {
        if span > 0.0 {
            gaps as f64 / span
        } else {
            0.0
        }
    };
    let planned_rate = rate(planned_span);
    let achieved_rate = if written_span.is_finite() {
        rate(written_span)
    } else {
        0.0
    };
    let (mut judged, mut late, mut max_lag) = (0, 0, Duration::ZERO);
    for (i, &(at, _, _)) in schedule.iter().enumerate() {
        if excused_at(at) {
            continue;
        }
        judged += 1;
        match sent.get(i).copied().flatten() {
            Some(w) => {
                let lag = w.saturating_sub(at);
                max_lag = max_lag.max(lag);
                if lag > LATE_AFTER {
                    late += 1;
                }
            }
            None => late += 1,
        }
    }
    let behind = late as f64 > BEHIND_SHARE * judged as f64
        || achieved_rate < (1.0 - BEHIND_SHARE) * planned_rate;
    Pacing {
        messages: n,
        planned_rate,
        achieved_rate,
        judged,
        late,
        max_lag,
        behind,
    }
}

/// A run's pacing and fault times, for the output, and what `--strict` fails in it.
pub fn notes(label: &str, pacing: &Pacing, faults: &[FaultTiming]) -> (String, Vec<String>) {
    let mut off = Vec::new();
    let mut text = format!("{label}: {}\n", pacing.describe());
    if pacing.behind {
        off.push(format!("{label}: behind the schedule"));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for f in faults {
        let actual = match f.actual {
            Some(a) => {
                let delta = a.as_secs_f64() - f.planned.as_secs_f64();
                // Crashes and kills are held to the precision; a restart's port opening is
                // the broker's own time (reported, not judged).
                if f.ready.is_none() && delta.abs() > FAULT_PRECISION.as_secs_f64() {
                    off.push(format!(
                        "{label}: {} {:+.1} ms from its time",
                        f.what,
                        delta * 1e3
                    ));
                }
                format!("{:.1} ms ({:+.2} ms)", ms(a), delta * 1e3)
            }
            None => "not done (already down)".into(),
        };
        text.push_str(&format!(
            "  {}: planned {:.1} ms, done {actual}{}\n",
            f.what,
            ms(f.planned),
            f.ready
                .map(|o| format!(", port open {:.1} ms", ms(o)))
                .unwrap_or_default()
        ));
    }
    (text, off)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// 100 messages 10 ms apart (100/s).
    fn schedule() -> Vec<(Duration, u32, u32)> {
        (1..=100).map(|i| (ms(10 * i), 0, 0)).collect()
    }

    #[test]
    fn a_producer_on_time_keeps_the_rate() {
        let s = schedule();
        let sent: Vec<Option<Duration>> = s.iter().map(|x| Some(x.0 + ms(2))).collect();
        let p = pacing(&s, &sent, &[]);
        assert_eq!((p.messages, p.judged, p.late), (100, 100, 0));
        assert!((p.planned_rate - 100.0).abs() < 1e-6, "{p:?}");
        assert!(p.achieved_rate > 98.0 && !p.behind, "{p:?}");
        assert_eq!(p.max_lag, ms(2));
        assert!(!p.describe().contains("BEHIND"));
    }

    #[test]
    fn a_producer_waiting_for_each_receipt_falls_behind() {
        // What the first live twin did (one SEND per receipt): here 25 ms a message against a
        // schedule of one each 10 ms, 40/s of the planned 100/s.
        let s = schedule();
        let sent: Vec<Option<Duration>> = (1..=100).map(|i| Some(ms(25 * i))).collect();
        let p = pacing(&s, &sent, &[]);
        assert!(p.behind, "{p:?}");
        assert!((p.achieved_rate - 40.0).abs() < 1e-9, "{p:?}");
        assert!(p.describe().contains("BEHIND the schedule (tolerance 5%)"));
        // A few late messages (a stall) within the tolerance; more than 5% beyond it.
        let mut sent: Vec<Option<Duration>> = s.iter().map(|x| Some(x.0)).collect();
        for x in sent.iter_mut().take(5) {
            *x = x.map(|t| t + ms(11));
        }
        assert!(!pacing(&s, &sent, &[]).behind);
        sent[5] = None;
        let p = pacing(&s, &sent, &[]);
        assert_eq!(p.late, 6);
        assert!(p.behind);
    }

    #[test]
    fn messages_scheduled_while_a_broker_is_down_are_excused() {
        let faults = vec![
            FaultTiming {
                what: "broker a killed".into(),
                planned: ms(300),
                actual: Some(ms(300)),
                ready: None,
            },
            FaultTiming {
                what: "broker a restarted".into(),
                planned: ms(400),
                actual: Some(ms(400)),
                ready: Some(ms(500)),
            },
        ];
        let w = outages(&faults, ms(100));
        assert_eq!(w, vec![(ms(300), ms(500) + ms(100) + CATCH_UP)]);
        let s = schedule();
        // Everything from 300 ms to 800 ms waits until 800 ms.
        let sent: Vec<Option<Duration>> = s
            .iter()
            .map(|x| Some(if x.0 < ms(300) { x.0 } else { x.0.max(ms(800)) }))
            .collect();
        let p = pacing(&s, &sent, &w);
        assert_eq!(p.judged, 50);
        assert_eq!(p.late, 0, "{p:?}");
        // The outage does not count against the rate: both over the stretches outside it.
        assert!((p.achieved_rate - p.planned_rate).abs() < 1e-6, "{p:?}");
        assert!((p.planned_rate - 100.0).abs() < 1e-6, "{p:?}");
        assert!(!p.behind);
        assert!(pacing(&s, &sent, &[]).behind);
    }

    #[test]
    fn faults_off_their_time_by_more_than_the_precision_are_named() {
        let on_time = |what: &str, d: Duration| FaultTiming {
            what: what.into(),
            planned: ms(400),
            actual: Some(ms(400) + d),
            ready: None,
        };
        let p = pacing(&schedule(), &[], &[]);
        let faults = vec![
            on_time("consumer 0 crashed", Duration::from_micros(900)),
            on_time("consumer 1 crashed", ms(20)),
            FaultTiming {
                what: "broker a restarted".into(),
                planned: ms(400),
                actual: Some(ms(400)),
                ready: Some(ms(2400)),
            },
        ];
        let (text, off) = notes("competing seed 1", &p, &faults);
        assert!(
            text.contains("consumer 0 crashed: planned 400.0 ms, done 400.9 ms (+0.90 ms)"),
            "{text}"
        );
        assert!(text.contains("port open 2400.0 ms"), "{text}");
        assert!(
            off.iter().any(|o| o.contains("behind the schedule")),
            "{off:?}"
        );
        assert!(
            off.iter()
                .any(|o| o == "competing seed 1: consumer 1 crashed +20.0 ms from its time"),
            "{off:?}"
        );
        assert!(!off.iter().any(|o| o.contains("consumer 0")), "{off:?}");
        assert!(!off.iter().any(|o| o.contains("restarted")), "{off:?}");
    }
}
