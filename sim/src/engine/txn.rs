//! Kafka transactions (`[producers] transactional = true`, `[consumers] isolation`): every
//! producer is a transactional producer (its own `transactional.id`, idempotent). Its records
//! go in transactions: one begins with the first record written after the last ended
//! (`beginTransaction` is local; the first `AddPartitionsToTxn` opens it at the coordinator)
//! and is committed `commit_interval` later (`commitTransaction`, [`Engine::txn_commit`]).
//!
//! A record is written to the log (the producer is answered: `Enqueue`) at once. A
//! `read_uncommitted` consumer (Kafka's default) reads it then, as any record. A
//! `read_committed` one reads a partition only up to its last stable offset (LSO: the first
//! offset of a transaction still open, `ProducerStateManager.firstUnstableOffset`): a record
//! written after an open transaction's first record waits for that transaction's end, whoever
//! wrote it, and a record of an aborted transaction is never returned (`CompletedFetch`
//! skips the batches of the fetch response's aborted transactions). Here a partition's
//! records above the LSO wait in [`Txns::unstable`], in log order, and go to the broker's
//! queue (readable) as the LSO passes them.
//!
//! A `producer_crash` (the producer node's `crash`, then [`Engine::txn_restart`]): the application
//! commits its progress every `commit_interval` (with transactions, the commit is the
//! transaction's, `sendOffsetsToTransaction` then `commitTransaction`; without, a checkpoint of
//! its input at the same cadence), and a new instance produces again from the last commit:
//! every record written since is written again as a copy (`Event::Resend`). A transactional
//! producer's open transaction is aborted first, by its successor's `initTransactions` (the
//! coordinator bumps the epoch and aborts it, `TransactionCoordinator.handleInitProducerId`)
//! or earlier by the coordinator once it has been open `transaction.timeout.ms` (60s): a
//! `read_committed` consumer never reads its records (`Event::Discard`, reason `aborted`,
//! after the copies are announced), a `read_uncommitted` one reads them as any.
//!
//! A `producer_pause` (`engine/faults.rs`): the paused producer commits nothing; a new instance
//! (`replaced_after`) restarts as after a crash, writing again also what the paused one still
//! holds unsent; the coordinator's abort at the timeout marks its transactional id fenced
//! ([`Engine::txn_fenced`]): the epoch was bumped, and a transactional zombie's late writes are
//! refused when it wakes.
//!
//! Not modelled: the commit's markers take no time to be written; a commit does not wait for
//! the producer's sends still failing or buffered (they join the next transaction); a
//! transaction only lasts its interval, so the transaction timeout fires only for a dead
//! producer's; a crashed producer's sends still retried (`send_error`, `send_timeout`) or
//! batched (`linger`) are not lost with its process: the new instance sends them, as the
//! application would produce them again from its input.
//!
//! A scenario without transactions or producer crashes pays one test per send
//! ([`Engine::store_sent`]'s `replicated` flag, which is set for them too).

use super::events::Ev;
use super::state::{Loc, Msg};
use super::walk::walk;
use super::Engine;
use crate::history::{DiscardReason, Event, Observer};
use crate::scenario::TRANSACTION_TIMEOUT;
use crate::time::Time;
use std::collections::VecDeque;

/// A record written to a log: (slot, id, broker).
type Written = (u32, u64, u16);

/// A record above its partition's last stable offset.
#[derive(Clone, Copy, Debug)]
struct Unstable {
    slot: u32,
    id: u64,
    /// The producer and the number of the transaction it was written in, while that is open
    /// (None: its transaction is over, committed).
    open: Option<(u32, u32)>,
}

/// One producer's commits.
#[derive(Clone, Debug, Default)]
struct TxnProducer {
    /// A transaction (or, without transactions, a commit period) is open: its commit is
    /// scheduled.
    open: bool,
    /// When it began.
    opened_at: Time,
    /// The number of the current (or next) one.
    number: u32,
    /// The (broker, partition) logs the open transaction wrote to, each once.
    parts: Vec<(u16, u32)>,
    /// What was written since the application's last commit, in write order, each with the
    /// broker it went to: what a new instance writes again.
    since_commit: Vec<(Msg, u16)>,
    /// Records of its transactions the coordinator aborted while it was dead (the timeout):
    /// discarded once its successor has announced their copies.
    aborted: Vec<Written>,
    /// The coordinator aborted its transaction at the timeout while it was dead or paused,
    /// bumping its transactional id's epoch (`TransactionCoordinator.abortTimedOutTransactions`
    /// -> `prepareFenceProducerEpoch`): the instance that wrote it is fenced. A new instance
    /// (`initTransactions`) has the new epoch.
    fenced: bool,
}

/// The commits of every producer, and each partition's records above its LSO.
pub(super) struct Txns {
    interval: Time,
    transactional: bool,
    read_committed: bool,
    producers: Vec<TxnProducer>,
    /// Per broker, per partition: the records above the last stable offset, in log order
    /// (only for transactions read `read_committed`).
    unstable: Vec<Vec<VecDeque<Unstable>>>,
}

impl Txns {
    pub fn new(
        interval: Time,
        transactional: bool,
        read_committed: bool,
        producers: usize,
        brokers: usize,
    ) -> Txns {
        Txns {
            interval: interval.max(1),
            transactional,
            read_committed: transactional && read_committed,
            producers: vec![TxnProducer::default(); producers],
            unstable: vec![Vec::new(); brokers],
        }
    }

    /// Partition `part` of broker `b`'s records above the LSO.
    fn log(&mut self, b: u16, part: u32) -> &mut VecDeque<Unstable> {
        let parts = &mut self.unstable[b as usize];
        if parts.len() <= part as usize {
            parts.resize(part as usize + 1, VecDeque::new());
        }
        &mut parts[part as usize]
    }

    /// Producer `p`'s open transaction (number `number`) is over: committed (its records
    /// are marked so) or aborted (they leave the logs, returned as (slot, id, broker)). Then
    /// the records below each of its partitions' new LSO leave the logs, returned as (slot,
    /// id, broker) in log order.
    fn end(&mut self, p: u32, number: u32, commit: bool) -> (Vec<Written>, Vec<Written>) {
        let parts = std::mem::take(&mut self.producers[p as usize].parts);
        let (mut aborted, mut readable) = (Vec::new(), Vec::new());
        for &(b, part) in &parts {
            let log = self.log(b, part);
            if commit {
                for u in log.iter_mut().filter(|u| u.open == Some((p, number))) {
                    u.open = None;
                }
            } else {
                log.retain(|u| {
                    let mine = u.open == Some((p, number));
                    if mine {
                        aborted.push((u.slot, u.id, b));
                    }
                    !mine
                });
            }
            while log.front().is_some_and(|u| u.open.is_none()) {
                let u = log.pop_front().expect("front");
                readable.push((u.slot, u.id, b));
            }
        }
        let mut parts = parts;
        parts.clear();
        self.producers[p as usize].parts = parts;
        (aborted, readable)
    }
}

impl<O: Observer> Engine<'_, O> {
    /// A send of producer `p` with transactions or crashes routed to broker `b` is written
    /// there; a transaction (or a commit period) begins with it if none is open. Under
    /// `read_committed` a transactional record waits above its partition's LSO until its
    /// transaction ends; else it is readable at once.
    #[cold]
    #[inline(never)]
    pub(super) fn store_in_txn(&mut self, b: u16, slot: u32) {
        walk!();
        let now = self.now;
        let m = *self.w.slab.get(slot);
        let p = m.view.producer;
        let txns = self.txns.as_deref_mut().expect("transactions");
        let interval = txns.interval;
        let tp = &mut txns.producers[p as usize];
        tp.since_commit.push((m, b));
        if !tp.open {
            tp.open = true;
            tp.opened_at = now;
            let number = tp.number;
            self.q.push(now + interval, Ev::TxnCommit { p, number });
        }
        if !txns.read_committed {
            self.accept(b, slot);
            return;
        }
        let part = {
            let view = self.view(slot);
            self.strategy.partition(&view)
        };
        let txns = self.txns.as_deref_mut().expect("transactions");
        let tp = &mut txns.producers[p as usize];
        let number = tp.number;
        if !tp.parts.contains(&(b, part)) {
            tp.parts.push((b, part));
        }
        txns.log(b, part).push_back(Unstable {
            slot,
            id: m.view.id,
            open: Some((p, number)),
        });
        // Written: the producer is answered; readable once the LSO passes it.
        self.flush();
        self.w.slab.get_mut(slot).loc = Loc::Queued(b);
        self.emit(Event::Enqueue {
            t: now,
            msg: m.r(),
            broker: b,
        });
    }

    /// Producer `p`'s transaction `number` (or commit period) is due: it commits
    /// (`commitTransaction`: the coordinator writes a commit marker to every partition it
    /// wrote to), so under `read_committed` each of those partitions' LSO moves past every
    /// record whose transaction is over, readable now in log order; its application's commit
    /// point moves to here. A dead producer commits nothing: its transaction is aborted by the
    /// coordinator once open `transaction.timeout.ms`.
    #[inline(never)]
    pub(super) fn txn_commit(&mut self, p: u32, number: u32) {
        walk!();
        let now = self.now;
        let dead = self.w.producers[p as usize].is_dead();
        let Some(txns) = self.txns.as_deref_mut() else {
            return;
        };
        let transactional = txns.transactional;
        let tp = &mut txns.producers[p as usize];
        if !tp.open || tp.number != number {
            return;
        }
        if dead {
            if transactional {
                let timeout = tp.opened_at.saturating_add(TRANSACTION_TIMEOUT.0);
                if now < timeout {
                    self.q.push(timeout, Ev::TxnCommit { p, number });
                } else {
                    tp.fenced = true;
                    self.txn_end(p, false);
                }
            }
            return;
        }
        tp.since_commit.clear();
        self.txn_end(p, true);
    }

    /// Producer `p`'s open transaction ends, committed or aborted; the records it made
    /// readable go to their brokers' queues (aborted ones wait in the producer's `aborted`
    /// until its successor has announced their copies).
    fn txn_end(&mut self, p: u32, commit: bool) {
        let txns = self.txns.as_deref_mut().expect("transactions");
        let tp = &mut txns.producers[p as usize];
        if !tp.open {
            return;
        }
        tp.open = false;
        let number = tp.number;
        tp.number = tp.number.wrapping_add(1);
        if !txns.read_committed {
            return;
        }
        let (aborted, readable) = txns.end(p, number, commit);
        txns.producers[p as usize].aborted.extend(aborted);
        let mut brokers: Vec<u16> = Vec::new();
        for (slot, id, b) in readable {
            let m = self.w.slab.get(slot);
            if m.view.id != id || m.loc != Loc::Queued(b) {
                continue;
            }
            self.w.brokers[b as usize].store(slot);
            if !brokers.contains(&b) {
                brokers.push(b);
            }
        }
        for b in &brokers {
            self.flush();
            self.dispatch(*b);
        }
        // The dispatches' effects run now: a caller's events after this (a restart's resends
        // and discards) must come after theirs.
        if !brokers.is_empty() {
            self.flush();
        }
    }

    /// A new instance of producer `p` starts: `initTransactions` aborts its transactional
    /// id's open transaction (a commit period without transactions just ends), and the
    /// application produces again from its last commit: each record written since is written
    /// again, a copy with a new id (`Event::Resend`, not deduplicated: the new instance's
    /// records are new to the broker), then each record a paused instance still holds unsent
    /// (`held`, in send order, announced as resent at `held_at`). The copies are returned, in
    /// that order, for the producer to send first; then the aborted records are discarded.
    pub(super) fn txn_restart(&mut self, p: u32, held: &[u32], held_at: u16) -> VecDeque<u32> {
        walk!();
        self.txn_end(p, false);
        let txns = self.txns.as_deref_mut().expect("transactions");
        let tp = &mut txns.producers[p as usize];
        tp.fenced = false;
        let mut again = std::mem::take(&mut tp.since_commit);
        let aborted = std::mem::take(&mut tp.aborted);
        for &slot in held {
            again.push((*self.w.slab.get(slot), held_at));
        }
        let mut copies = VecDeque::with_capacity(again.len());
        for (m, b) in again {
            let id = self.w.next_id;
            self.w.next_id += 1;
            let mut copy = m.fresh_copy(id, Loc::Producer(p));
            copy.applied = false;
            (copy.lease_due, copy.leased_at, copy.arrives) = (0, 0, 0);
            let r = copy.r();
            let slot = self.alloc(copy);
            self.emit(Event::Resend {
                t: self.now,
                msg: r,
                of: m.view.id,
                producer: p,
                broker: b,
                deduplicated: false,
            });
            copies.push_back(slot);
        }
        for (slot, id, b) in aborted {
            let m = *self.w.slab.get(slot);
            if m.view.id != id || m.loc != Loc::Queued(b) {
                continue;
            }
            self.emit(Event::Discard {
                t: self.now,
                msg: m.r(),
                reason: DiscardReason::Aborted,
            });
            self.w.slab.release(slot);
        }
        copies
    }

    /// Whether producer `p`'s transactional id's epoch was bumped past its running instance by
    /// the coordinator's abort of its timed-out transaction (`TxnProducer::fenced`).
    pub(super) fn txn_fenced(&self, p: u32) -> bool {
        self.txns
            .as_deref()
            .is_some_and(|t| t.transactional && t.producers[p as usize].fenced)
    }

    /// Paused producer `p` runs again as itself: its transaction (or commit period), if still
    /// open, commits now (its commit came due during the pause, or is rescheduled to the
    /// transaction timeout).
    pub(super) fn txn_wake(&mut self, p: u32) {
        let now = self.now;
        let Some(txns) = self.txns.as_deref_mut() else {
            return;
        };
        let tp = &txns.producers[p as usize];
        if tp.open {
            let number = tp.number;
            self.q.push(now, Ev::TxnCommit { p, number });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitions_log_grows_to_the_partition_asked() {
        let mut t = Txns::new(0, true, true, 2, 1);
        assert_eq!(t.interval, 1, "at least 1µs");
        t.log(0, 3).push_back(Unstable {
            slot: 0,
            id: 0,
            open: Some((0, 0)),
        });
        assert_eq!(t.unstable[0].len(), 4);
        assert_eq!(t.unstable[0][3].len(), 1);
        assert!(t.unstable[0][0].is_empty());
    }

    #[test]
    fn an_end_releases_up_to_the_next_open_transaction() {
        let mut t = Txns::new(1, true, true, 2, 1);
        // Offsets 0..4 of partition 0: p0's, p1's, p0's, p1's.
        for (slot, p) in [(0, 0), (1, 1), (2, 0), (3, 1)] {
            t.log(0, 0).push_back(Unstable {
                slot,
                id: slot as u64,
                open: Some((p, 0)),
            });
        }
        t.producers[0].parts.push((0, 0));
        t.producers[1].parts.push((0, 0));
        // p0 commits: only offset 0 is below the LSO (p1's open transaction starts at 1).
        let (aborted, readable) = t.end(0, 0, true);
        assert!(aborted.is_empty());
        assert_eq!(readable, vec![(0, 0, 0)]);
        // p1 aborts: its records leave, and p0's committed one at offset 2 becomes readable.
        let (aborted, readable) = t.end(1, 0, false);
        assert_eq!(aborted, vec![(1, 1, 0), (3, 3, 0)]);
        assert_eq!(readable, vec![(2, 2, 0)]);
        assert!(t.unstable[0][0].is_empty());
    }
}
