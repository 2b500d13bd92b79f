//! `competing`: plain competing consumers (the baseline).
//!
//! Models a JMS queue with several consumers and no ordering feature at all: the broker hands each
//! message to the next consumer with free prefetch, round-robin (ActiveMQ's default dispatch), and
//! the handler applies it. Reorders as soon as more than one consumer is busy with the same key.

use sim::strategy::{Control, DispatchCtx, Handler, MsgView, Select, Strategy};

/// Round-robin dispatch, plain apply.
#[derive(Debug, Default)]
pub struct Competing {
    /// Per broker: index (into the attached list) where the next search starts.
    next: Vec<usize>,
}

impl Competing {
    /// A new instance for `brokers` brokers.
    pub fn new(brokers: usize) -> Self {
        Competing {
            next: vec![0; brokers],
        }
    }
}

impl Handler for Competing {}

impl Strategy for Competing {
    #[inline]
    fn select(&mut self, ctx: &DispatchCtx, _msg: &MsgView, _ctl: &mut Control) -> Select {
        let n = ctx.consumers.len();
        let start = self.next[ctx.broker as usize];
        for k in 0..n {
            let i = (start + k) % n;
            if ctx.consumers[i].free > 0 {
                self.next[ctx.broker as usize] = (i + 1) % n;
                return Select::Consumer(i);
            }
        }
        Select::Stop
    }
}
