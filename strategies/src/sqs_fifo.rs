//! `sqs_fifo`: an Amazon SQS FIFO queue, message group = key.
//!
//! What SQS does [Q1][Q2] (docs/sources.md): within a message group messages are returned in
//! order, and while any received message of a group is in flight (neither deleted nor visible
//! again) no other message of that group is returned; one receive may return up to 10 messages,
//! several of the same group. Messages of other groups go to any consumer. The rest of SQS is the
//! broker's, not this file's: run it with `flavour = "sqs"`, which leases each receive for the
//! visibility timeout (30s from the receive: a consumer slower than that has its messages received
//! again by another, and its late delete fails; a failed message waits out what is left of it),
//! redrives to a dead-letter queue on the receive after `backout_threshold` (`maxReceiveCount`)
//! receives, puts a message that becomes visible again back at the head of its
//! group, and never notices a dead consumer (its receives come back when their leases end). The
//! window of 20,000 messages the queue looks through for an available group is the broker's
//! `page_size` (20,000 under `flavour = "sqs"`).
//!
//! Strength: one group never has two consumers at once while processing fits in the lease, so
//! per-key order survives consumer crashes and many consumers. Weakness: the lease is a timeout, not
//! a lock: a consumer that is slow or paused past it is still working when the group goes to
//! another consumer (duplicates, out-of-order and stale writes), and redrive to the DLQ lets the
//! rest of the group go on without the message.

use crate::competing::Competing;
use serde::{Deserialize, Serialize};
use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};
use sim::time::Time;

/// `[strategy.sqs_fifo]` parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SqsFifoParams {
    /// Most messages of one group one receive returns (`MaxNumberOfMessages`, 1 to 10).
    #[serde(default = "default_batch")]
    pub batch: u32,
}

fn default_batch() -> u32 {
    10
}

impl Default for SqsFifoParams {
    fn default() -> Self {
        SqsFifoParams {
            batch: default_batch(),
        }
    }
}

/// One message group.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    /// Received messages neither deleted nor visible again.
    in_flight: u32,
    /// The consumer of the receive that made the group busy.
    owner: u32,
    /// When that receive happened: only it may take more of the group.
    received_at: Time,
    /// How many of the group that receive took.
    taken: u32,
}

/// SQS FIFO's group gate over round-robin receives.
#[derive(Debug)]
pub struct SqsFifo {
    groups: Vec<Group>,
    batch: u32,
    /// Who receives next among consumers with room (messages without a group, idle groups).
    rr: Competing,
}

impl SqsFifo {
    /// A queue of `keys` groups at `brokers` brokers, receiving up to `batch` of a group at once.
    pub fn new(keys: u32, brokers: usize, batch: u32) -> Self {
        SqsFifo {
            groups: vec![Group::default(); keys as usize],
            batch,
            rr: Competing::new(brokers),
        }
    }

    /// The group's in-flight message is gone (deleted, redriven) or visible again.
    fn release(&mut self, msg: &MsgView) {
        if let Some(g) = msg.group {
            let st = &mut self.groups[g as usize];
            st.in_flight = st.in_flight.saturating_sub(1);
        }
    }
}

impl Handler for SqsFifo {}

impl crate::Named for SqsFifo {
    const NAME: &'static str = "sqs_fifo";
    const SUMMARY: &'static str = "Amazon SQS FIFO: one receive in flight per message group (up to 10 of it); run with flavour = \"sqs\" (visibility-timeout leases, redrive)";
    const GUARANTEE: &'static str = "ordering_violations";
    const ROLE: crate::Role = crate::Role::Dispatch;
    const FLAVOUR: sim::scenario::Flavour = sim::scenario::Flavour::Sqs;
    type Params = SqsFifoParams;
    const PARAMS: &'static [crate::ParamInfo] = &[crate::ParamInfo {
        name: "batch",
        meaning: "most messages of one group a receive returns; the consumer's prefetch bounds the receive as a whole",
        unit: "1 to 10",
        default: "10",
        range: crate::Range::Int(1, 10),
        sizes: None,
        models: "ReceiveMessage MaxNumberOfMessages (at most 10)",
        hazard: None,
    }];
    fn build(sc: &sim::Scenario, p: SqsFifoParams) -> Result<Self, String> {
        if sc.brokers.len() != 1 {
            return Err(
                "an SQS FIFO queue is one queue: describe it as one [[broker]] (SQS replicates it internally)"
                    .into(),
            );
        }
        Ok(SqsFifo::new(sc.workload.keys, 1, p.batch))
    }
}

impl Strategy for SqsFifo {
    fn select(&mut self, ctx: &DispatchCtx, msg: &MsgView, _ctl: &mut Control) -> Select {
        // A message without a group id: SQS FIFO refuses the send; here it goes to anyone.
        let Some(g) = msg.group else {
            return self.rr.pick(ctx).map_or(Select::Stop, Select::Consumer);
        };
        let st = &mut self.groups[g as usize];
        if st.in_flight > 0 {
            // Only the receive that made the group busy takes more of it, up to the batch.
            if st.received_at == ctx.now && st.taken < self.batch {
                if let Some(i) = ctx
                    .consumers
                    .iter()
                    .position(|c| c.id == st.owner && c.free > 0)
                {
                    st.in_flight += 1;
                    st.taken += 1;
                    return Select::Consumer(i);
                }
            }
            return Select::Hold;
        }
        match self.rr.pick(ctx) {
            Some(i) => {
                *st = Group {
                    in_flight: 1,
                    owner: ctx.consumers[i].id,
                    received_at: ctx.now,
                    taken: 1,
                };
                Select::Consumer(i)
            }
            None => Select::Stop,
        }
    }

    fn on_returned(&mut self, _now: Time, _broker: u16, msg: &MsgView, _ctl: &mut Control) {
        self.release(msg);
    }

    fn on_settled(&mut self, _now: Time, msg: &MsgView, _ctl: &mut Control) {
        self.release(msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, scenario, select_at, view as msg};
    use sim::scenario::{exponential, ScenarioBuilder};

    /// One receive takes up to `batch` messages of a group; a later receive takes none of it
    /// while any is in flight; a deletion or a return reopens the group for anyone.
    #[test]
    fn a_group_has_one_receive_in_flight() {
        let mut s = SqsFifo::new(4, 1, 2);
        let mut ctl = Control::default();
        let slots = [(0, 5), (1, 5)];
        assert_eq!(select_at(&mut s, 10, &slots, &msg(1, 0), &mut ctl), Ok(0));
        // The same receive (same instant) takes a second one of the group, to the same consumer.
        assert_eq!(select_at(&mut s, 10, &slots, &msg(2, 0), &mut ctl), Ok(0));
        // But not a third (batch 2), nor does another group wait for it.
        assert_eq!(
            select_at(&mut s, 10, &slots, &msg(3, 0), &mut ctl),
            Err(Select::Hold)
        );
        assert_eq!(select_at(&mut s, 10, &slots, &msg(4, 1), &mut ctl), Ok(1));
        // A later receive holds the group while one of the two is in flight.
        s.on_settled(20, &msg(1, 0), &mut ctl);
        assert_eq!(
            select_at(&mut s, 20, &slots, &msg(3, 0), &mut ctl),
            Err(Select::Hold)
        );
        // Visible again (a lease ended, a rollback): the group is free, for any consumer.
        s.on_returned(30, 0, &msg(2, 0), &mut ctl);
        assert_eq!(select_at(&mut s, 30, &slots, &msg(2, 0), &mut ctl), Ok(0));
        s.on_settled(31, &msg(2, 0), &mut ctl);
        assert_eq!(select_at(&mut s, 32, &slots, &msg(3, 0), &mut ctl), Ok(1));
    }

    /// A later receive takes none of a busy group even with room left in the first one's batch
    /// and its consumer free: only the receive of the same instant adds to it.
    #[test]
    fn a_later_receive_takes_none_of_a_busy_group_even_below_the_batch() {
        let mut s = SqsFifo::new(1, 1, 10);
        let mut ctl = Control::default();
        let slots = [(0, 5), (1, 5)];
        assert_eq!(select_at(&mut s, 10, &slots, &msg(1, 0), &mut ctl), Ok(0));
        assert_eq!(
            select_at(&mut s, 11, &slots, &msg(2, 0), &mut ctl),
            Err(Select::Hold)
        );
    }

    /// A receive returns up to 10 messages of a group unless the table says otherwise.
    #[test]
    fn the_default_batch_is_10() {
        assert_eq!(SqsFifoParams::default().batch, 10);
        let p: SqsFifoParams = toml::from_str("").unwrap();
        assert_eq!(p.batch, 10);
    }

    /// `batch` is SQS's MaxNumberOfMessages, 1 to 10; the queue is one `[[broker]]`.
    #[test]
    fn build_takes_a_batch_of_1_to_10_and_one_broker() {
        use crate::Named;
        let one = scenario(&sqs().to_toml());
        for batch in [1, 10] {
            let s = SqsFifo::build(&one, SqsFifoParams { batch }).expect("valid");
            assert_eq!(s.batch, batch);
        }
        // Out of range: refused by the registry, which builds it (not by `build`).
        for batch in [0, 11] {
            let e = crate::test_util::builds_with("sqs_fifo", &one, "batch", batch.into());
            assert!(e.unwrap_err().contains("allowed 1 to 10"));
        }
        let two = scenario(&sqs().broker("r").to_toml());
        assert!(SqsFifo::build(&two, SqsFifoParams { batch: 10 }).is_err());
    }

    /// The receive that made a group busy cannot add to a full consumer: the message waits.
    #[test]
    fn more_of_a_busy_group_waits_when_its_consumer_is_full() {
        let mut s = SqsFifo::new(1, 1, 10);
        let mut ctl = Control::default();
        assert_eq!(
            select_at(&mut s, 5, &[(0, 1), (1, 1)], &msg(1, 0), &mut ctl),
            Ok(0)
        );
        assert_eq!(
            select_at(&mut s, 5, &[(0, 0), (1, 1)], &msg(2, 0), &mut ctl),
            Err(Select::Hold)
        );
    }

    /// 2000 messages over 20 groups at 40/s to four consumers (10 messages a receive, 50ms each)
    /// on one SQS FIFO queue `q`.
    fn sqs() -> ScenarioBuilder {
        ScenarioBuilder::new(&["sqs_fifo"])
            .flavour("sqs")
            .workload(2000, "40/s", 20)
            .broker("q")
            .with("page_size", 20000)
            .consumers(4, exponential("50ms"))
            .prefetch(10)
    }

    /// Strength: consumers that crash (their receives come back only when the visibility
    /// timeout ends) never break a group's order, and every message is applied once.
    #[test]
    fn order_survives_consumer_crashes() {
        let crashes = sqs()
            .fault("consumer_crash")
            .with("rate", "1/20s")
            .with("for", "5s");
        let sc = scenario(&crashes.to_toml());
        let mut expiries = 0;
        for seed in 1..=3 {
            let m = run(&sc, "sqs_fifo", seed);
            assert!(m.coverage.consumer_crashes > 0, "seed {seed}");
            expiries += m.coverage.lease_expiries;
            assert_eq!(m.ordering_violations, 0, "seed {seed}");
            assert_eq!(m.applied, 2000, "seed {seed}");
            assert_eq!(m.lost, 0, "seed {seed}");
        }
        // Some crashes caught a consumer holding messages: they came back by their leases.
        assert!(expiries > 0);
        // Plain competing consumers on the same queue reorder.
        assert!(run(&sc, "competing", 1).ordering_violations > 0);
    }

    /// Weakness: a consumer slower than the visibility timeout is still working on its receive
    /// when the group is received again by another: duplicates, out-of-order writes, and deletes
    /// refused.
    #[test]
    fn a_consumer_slower_than_the_visibility_timeout_breaks_order() {
        let slow = sqs().fault_for("slow_consumer", "10s", "60s");
        let sc = scenario(&slow.with("consumer", 0).with("factor", 200).to_toml());
        let m = run(&sc, "sqs_fifo", 1);
        assert!(m.coverage.lease_expiries > 0);
        assert!(m.coverage.failed_acks > 0);
        assert!(m.duplicates > 0);
        assert!(m.ordering_violations > 0);
    }

    /// A batch job's rollback gives the message back the way every other requeue does, so the
    /// strategy hears it: its group is received again and the poison message reaches the
    /// dead-letter queue (the rollback used to skip the strategy's hook, and the group stayed
    /// locked for good: 111 of 300 messages pending, no redelivery).
    #[test]
    fn a_batch_jobs_rollback_reopens_the_group() {
        let sc = scenario(
            r#"
strategies = ["sqs_fifo"]
[workload]
messages = 300
rate = "50/s"
keys = 10
poison_fraction = 0.02
[[broker]]
name = "a"
[consumers]
count = 2
service = "5ms"
mode = "batch"
[consumers.batch]
interval = "10s"
[redelivery]
backout_threshold = 3
[run]
drain_timeout = "10m"
"#,
        );
        let m = run(&sc, "sqs_fifo", 1);
        assert!(m.poison_dead_lettered > 0, "{m:?}");
        assert!(m.redeliveries > 0, "{m:?}");
        assert_eq!(m.pending_at_end, 0, "{m:?}");
        assert_eq!(m.ended_by, sim::summary::EndReason::Settled);
    }
}
