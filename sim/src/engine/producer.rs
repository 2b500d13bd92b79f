//! Producers: a message is born (key, seq, producer clock), goes through the strategy's routing,
//! and is stored at a broker; sends that fail (a Unit-of-Order member down, a `send_error` fault)
//! are retried after the retry backoff; a send the strategy holds (`Route::Wait`: Artemis's
//! grouping handler waiting for its arbiter) is no failure, waits, and is routed again when the
//! hold ends, the producer's later sends behind it. Whether later sends wait behind a failed one or overtake
//! it (`max_in_flight`, `idempotence`): [`Engine::send_behind_failure`].
//! A producer without a connection buffers its sends (its failover transport: `failover.rs`).
//! Under a `delivery_timeout` (Kafka's `delivery.timeout.ms`) a send still waiting that long
//! after it was made is given up, and dropped or sent again ([`Engine::delivery_timeout`]).
//! Under a `linger` (Kafka's `linger.ms`, with `batch.size`) a producer sends requests, not
//! messages: records accumulate in a batch per partition and go together ([`Engine::append`]),
//! and the request is what is in flight, fails and is retried ([`Engine::send_request`]).
//! The producer is a node that owns its state ([`Producer`], private fields behind methods).

use super::events::Ev;
use super::state::{HeldSend, Loc, Msg};
use super::walk::walk;
use super::{Engine, Fx};
use crate::history::{Event, MsgRef, Observer};
use crate::scenario::{Batching, OnDeliveryTimeout, Producers};
use crate::strategy::{Route, RouteCtx};
use crate::time::Time;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, VecDeque};

impl<O: Observer> Engine<'_, O> {
    /// A message is produced; it goes to the producer's broker or waits in its buffer.
    pub(super) fn arrival(&mut self) {
        walk!();
        let (key, seq, producer, poison, group) = self.keys.next();
        let id = self.w.next_id;
        self.w.next_id += 1;
        self.w.produced += 1;
        if self.w.produced < self.sc.workload.messages {
            let gap = self.arrivals.next_gap();
            self.q.push_inline(self.now + gap, Ev::Arrival);
        }
        let clock = self.w.producers[producer as usize].clock(self.now);
        let res = self.timestamp_resolution;
        // (A division per message saved at the default resolution.)
        let timestamp = if res == 1 { clock } else { clock / res * res };
        let r = MsgRef { id, key, seq };
        let slot = self.alloc(Msg::new(
            r,
            timestamp,
            producer,
            poison,
            group,
            Loc::Producer(producer),
        ));
        // The source database commits the new state before the message is sent.
        let src = &mut self.w.source[key as usize];
        src.state = seq + 1;
        src.timestamp = timestamp;
        src.version += 1;
        self.emit(Event::Produce {
            t: self.now,
            msg: r,
            producer,
            timestamp,
            poison,
        });
        self.send(producer, slot);
        self.phase_step();
    }

    /// A send: buffered while disconnected, queued behind earlier failed sends when those block,
    /// else routed by the strategy (and during a `send_error` fault perhaps failed first).
    // Inlined into its two callers (an arrival, a reconnect's flush): on the hot path a call
    // frame costs more than the send-error test it carries.
    #[inline(always)]
    pub(super) fn send(&mut self, p: u32, slot: u32) {
        walk!();
        // Sends in a row (a flush after a reconnect): what the last one set off is over first.
        self.flush();
        let ps = &mut self.w.producers[p as usize];
        if ps.broker.is_none() {
            ps.buffer.push_back(slot);
            self.await_delivery(p, slot);
        } else if !ps.failed.is_empty() {
            self.send_behind_failure(p, slot);
        } else if self.w.send_slow {
            // The one test the send path pays for send errors and batches: false unless a
            // send error is in force or the producers batch.
            self.send_slow(p, slot);
        } else if let Err(block) = self.route_and_enqueue(p, slot) {
            self.send_failed(p, slot, block);
        }
    }

    /// Under a `linger`: the record joins its partition's batch in the producer's accumulator
    /// (`RecordAccumulator.append`). A record that does not fit in its partition's batch
    /// (`Batching::records`) starts a new one, and the full batch makes the connection ready at
    /// once (`RecordAccumulator.ready`: `full = dequeSize > 1 || batch.isFull()`); else the
    /// oldest batch's linger does (`batchReady`: `full || expired`). Then one request carries the
    /// first batch of every partition (`drainBatchesForOneNode`), which is everything
    /// accumulated before the record: a simulated request takes no time, so no other batch
    /// waits behind one of its partition.
    #[inline(never)]
    fn append(&mut self, p: u32, slot: u32, b: Batching) {
        let part = {
            let view = self.view(slot);
            self.strategy.partition(&view) as usize
        };
        let ps = &self.w.producers[p as usize];
        if ps.acc_parts.get(part).is_some_and(|&n| n >= b.records) {
            self.drain(p);
        }
        let now = self.now;
        let limit = self.cfg.delivery_timeout;
        let id = self.w.slab.get(slot).view.id;
        let ps = &mut self.w.producers[p as usize];
        if ps.acc.is_empty() {
            ps.acc_since = now;
        }
        ps.acc.push(slot);
        if ps.acc_parts.len() <= part {
            ps.acc_parts.resize(part + 1, 0);
            ps.acc_created.resize(part + 1, 0);
        }
        if ps.acc_parts[part] == 0 {
            ps.acc_created[part] = now;
        }
        ps.acc_parts[part] += 1;
        if let Some(limit) = limit {
            // Its delivery deadline runs from its batch's creation (`ProducerBatch.createdMs`),
            // or from its first send if it waited before (sent again after a reconnect).
            let since = match ps.deadlines.get(&id) {
                Some(&due) => due.saturating_sub(limit.0),
                None => ps.acc_created[part],
            };
            ps.acc_at.push(since);
        }
        if b.full_at_once && ps.acc_parts[part] >= b.records {
            self.drain(p);
        } else if !ps.linger_armed {
            ps.linger_armed = true;
            let at = ps.acc_since + b.linger.0;
            self.q.push(at, Ev::Linger(p));
        }
    }

    /// Producer `p`'s oldest batch may have lingered long enough: the accumulated records go
    /// as one request, or the timer is armed again for a batch started since.
    // Out of line: the event loop inlines what it calls, and this is not its hot path.
    #[inline(never)]
    pub(super) fn linger(&mut self, p: u32) {
        walk!();
        let Some(b) = self.cfg.batching else {
            return;
        };
        let ps = &mut self.w.producers[p as usize];
        ps.linger_armed = false;
        if ps.acc.is_empty() {
            return;
        }
        let due = ps.acc_since + b.linger.0;
        if due > self.now {
            ps.linger_armed = true;
            self.q.push(due, Ev::Linger(p));
            return;
        }
        self.drain(p);
    }

    /// The accumulated records of producer `p` go as one request.
    fn drain(&mut self, p: u32) {
        let ps = &mut self.w.producers[p as usize];
        let request = std::mem::take(&mut ps.acc);
        let since = std::mem::take(&mut ps.acc_at);
        ps.acc_parts.clear();
        self.send_request(p, request, &since);
    }

    /// Record `i` of a request (`since`: when each record's delivery deadline started, its
    /// batch's creation, under a `delivery_timeout`), `slot` or its copy, waits at producer `p`.
    fn await_in_request(&mut self, p: u32, slot: u32, i: usize, since: &[Time]) {
        if let Some(limit) = self.cfg.delivery_timeout {
            let from = since.get(i).copied().unwrap_or(self.now);
            self.set_deadline(p, slot, from.saturating_add(limit.0));
        }
    }

    /// A request (`slots`, in send order): it waits for the connection when there is none
    /// (ahead of what was buffered since), waits behind failed requests when they block or the
    /// in-flight window is used up, else is sent (the rule at [`Engine::send_behind_failure`],
    /// counted in requests: `max_in_flight` is Kafka's
    /// `max.in.flight.requests.per.connection`). A request failed by a `send_error` fails
    /// whole, and all its records wait for the retry behind the requests that overtake it.
    #[inline(never)]
    fn send_request(&mut self, p: u32, slots: Vec<u32>, since: &[Time]) {
        self.flush();
        let ps = &mut self.w.producers[p as usize];
        if ps.broker.is_none() {
            ps.send_after_reconnect(slots.iter().copied().collect());
            for (i, slot) in slots.into_iter().enumerate() {
                self.await_in_request(p, slot, i, since);
            }
            return;
        }
        let first_failure = ps.failed.is_empty();
        // Behind failed requests it goes only as the window allows.
        if !first_failure && !ps.may_go_ahead(ps.failed_block) {
            ps.groups.push(slots.len() as u32);
            ps.failed.extend(slots.iter().copied());
            for (i, slot) in slots.into_iter().enumerate() {
                self.await_in_request(p, slot, i, since);
            }
            return;
        }
        let out = self.attempt_request(p, &slots);
        if out.waits.is_empty() {
            return;
        }
        let overtakes = self.send_overtakes;
        let ps = &mut self.w.producers[p as usize];
        if first_failure {
            ps.failed_block = out.block;
            ps.overtakes = None;
        } else if out.block {
            ps.failed_block = true;
        }
        if out.errored && ps.overtakes.is_none() {
            ps.overtakes = Some(overtakes);
        }
        ps.groups.push(out.waits.len() as u32);
        ps.failed.extend(out.waits.iter().copied());
        for (slot, i) in out.waits.into_iter().zip(out.of) {
            self.await_in_request(p, slot, i as usize, since);
        }
        match out.held {
            Some(at) => self.schedule_producer_retry_at(p, at),
            None => self.schedule_producer_retry(p),
        }
    }

    /// One attempt at sending the request `slots`: one draw for the request under the
    /// `send_error` and `send_timeout` faults in force (it fails or is answered whole), then
    /// each record is routed in order. What waits for the retry, in order: the records of a
    /// failed request (or the copies of records stored with their answer lost), and those the
    /// strategy's routing refused (a blocking refusal keeps the rest of the request behind it).
    #[inline(never)]
    fn attempt_request(&mut self, p: u32, slots: &[u32]) -> Request {
        self.flush();
        let hit = if self.w.send_errors.is_empty() {
            None
        } else {
            self.send_error_hits(p)
        };
        let mut out = Request::default();
        for (i, &slot) in slots.iter().enumerate() {
            let i = i as u32;
            if out.block {
                out.waits.push(slot);
                out.of.push(i);
                continue;
            }
            // Records in a row: what the last one set off is over first.
            self.flush();
            let res = match hit {
                Some(false) => Ok(Some(slot)),
                Some(true) => self.store_timed_out(p, slot).map(Some),
                None => self.route_and_enqueue(p, slot).map(|_| None),
            };
            match res {
                Ok(None) => {}
                Ok(Some(waits)) => {
                    self.emit_send_fail(p, waits);
                    out.waits.push(waits);
                    out.of.push(i);
                    out.errored = true;
                }
                Err(block) => {
                    // A held send (`Route::Wait`) is no failure: it waits, and so do the rest,
                    // until the hold ends (or the client's call times out).
                    let held = self.w.producers[p as usize].hold.take();
                    if held.is_none() {
                        self.emit_send_fail(p, slot);
                    }
                    out.waits.push(slot);
                    out.of.push(i);
                    out.block = block || held.is_some();
                    out.held = out.held.or(held);
                }
            }
        }
        out
    }

    /// Retries producer `p`'s failed requests in order, each whole as it failed (Kafka's
    /// `Sender.completeBatch` -> `reenqueueBatch`: the batch goes back to the front of its
    /// partition's queue, and is sent again as it was), with the in-flight window counted in
    /// requests as in [`Engine::send_request`].
    #[inline(never)]
    fn retry_requests(&mut self, p: u32) {
        let overtakes = self.send_overtakes;
        let ps = &mut self.w.producers[p as usize];
        let mut pending = std::mem::take(&mut ps.failed);
        let groups = std::mem::take(&mut ps.groups);
        if self.held_call_expired(p, &mut pending) {
            return;
        }
        let mut groups = groups.into_iter();
        let mut still = VecDeque::new();
        let mut still_groups = Vec::new();
        let mut block = false;
        let mut held = None;
        while !pending.is_empty() {
            let n = groups
                .next()
                .map_or(pending.len(), |g| (g as usize).min(pending.len()));
            let slots: Vec<u32> = pending.drain(..n).collect();
            let ps = &mut self.w.producers[p as usize];
            if !ps.may_go_ahead(block) {
                still_groups.push(n as u32);
                still.extend(slots);
                continue;
            }
            let out = self.attempt_request(p, &slots);
            if out.waits.is_empty() {
                continue;
            }
            let ps = &mut self.w.producers[p as usize];
            if out.errored && ps.overtakes.is_none() {
                ps.overtakes = Some(overtakes);
            }
            if out.block {
                block = true;
                ps.failed_block = true;
            }
            held = held.or(out.held);
            still_groups.push(out.waits.len() as u32);
            still.extend(out.waits);
        }
        let ps = &mut self.w.producers[p as usize];
        ps.failed = still;
        ps.groups = still_groups;
        if ps.failed.is_empty() {
            ps.overtakes = None;
        } else if let Some(at) = held {
            self.schedule_producer_retry_at(p, at);
        } else {
            self.schedule_producer_retry(p);
        }
    }

    /// A send while earlier ones wait for their retry: it waits too when they block (a blocking
    /// retry loop in the application, an idempotent producer, or the in-flight window used up),
    /// else it goes ahead of them.
    ///
    /// The rule for a send failed by a `send_error` (see [`Engine::send_errored`]): with
    /// `idempotence`, or `max_in_flight` 1, every later send waits behind it (the broker refuses
    /// sequence numbers out of order, so the retry keeps its place; a synchronous send has nothing
    /// else in flight). Otherwise the `max_in_flight - 1` sends after it were in flight beside it:
    /// they go ahead (each may fail too) and the ones after them wait. So a failed message lands
    /// after at most `max_in_flight - 1` later ones.
    #[inline(never)]
    fn send_behind_failure(&mut self, p: u32, slot: u32) {
        if let Some(b) = self.cfg.batching {
            // Its batch waits in the accumulator: the request is what waits or overtakes.
            self.append(p, slot, b);
            return;
        }
        let ps = &mut self.w.producers[p as usize];
        if !ps.may_go_ahead(ps.failed_block) {
            ps.failed.push_back(slot);
            self.await_delivery(p, slot);
            return;
        }
        if !self.w.send_errors.is_empty() {
            self.send_or_fail(p, slot);
        } else if let Err(block) = self.route_and_enqueue(p, slot) {
            self.send_failed(p, slot, block);
        }
    }

    /// The send path's one flag, again after a `send_error` or `send_timeout` began or ended:
    /// a send takes the slow path while a fault can fail it or under a linger.
    pub(super) fn send_path_changed(&mut self) {
        self.w.send_slow = !self.w.send_errors.is_empty() || self.cfg.batching.is_some();
    }

    /// A send on the slow path: under a `linger` it joins its batch, else (a `send_error` or
    /// `send_timeout` in force) it is attempted.
    #[inline(never)]
    fn send_slow(&mut self, p: u32, slot: u32) {
        match self.cfg.batching {
            Some(b) => self.append(p, slot, b),
            None => self.send_or_fail(p, slot),
        }
    }

    /// A send while a `send_error` or `send_timeout` is in force: it fails (unstored, or stored
    /// with its answer lost), or is routed as any send.
    #[inline(never)]
    fn send_or_fail(&mut self, p: u32, slot: u32) {
        match self.attempt(p, slot) {
            Ok(None) => {}
            Ok(Some(waits)) => self.send_errored(p, waits),
            Err(block) => self.send_failed(p, slot, block),
        }
    }

    /// One attempt at sending `slot`, under the `send_error` and `send_timeout` faults in force:
    /// `Ok(None)`: sent (stored, or refused as a duplicate); `Ok(Some(s))`: failed by a fault,
    /// `s` waits for its retry (a send stored with its answer lost leaves its copy waiting);
    /// `Err(block)`: the strategy's routing refused it.
    fn attempt(&mut self, p: u32, slot: u32) -> Result<Option<u32>, bool> {
        // Retries in a row: what the last one set off is over first.
        self.flush();
        let hit = if self.w.send_errors.is_empty() {
            None
        } else {
            self.send_error_hits(p)
        };
        match hit {
            Some(false) => Ok(Some(slot)),
            Some(true) => self.store_timed_out(p, slot).map(Some),
            None => self.route_and_enqueue(p, slot).map(|_| None),
        }
    }

    /// Whether this send of producer `p` fails under the `send_error` and `send_timeout` faults
    /// in force on `p` or every producer, and if so whether the broker stored it all the same
    /// (`Some(true)`: a `send_timeout`). One draw from `p`'s own stream, made only when such a
    /// fault has a fraction above 0: below the highest `send_error` fraction the send is lost,
    /// else below the highest fraction of all it is stored and its answer lost.
    #[inline(never)]
    fn send_error_hits(&mut self, p: u32) -> Option<bool> {
        let (mut unstored, mut any) = (0.0f64, 0.0f64);
        for &(on, f, stored) in &self.w.send_errors {
            if on.is_none_or(|q| q == p) {
                any = any.max(f);
                if !stored {
                    unstored = unstored.max(f);
                }
            }
        }
        if any <= 0.0 {
            return None;
        }
        let u = self.w.producers[p as usize].send_rng.random::<f64>();
        if u < unstored {
            Some(false)
        } else if u < any {
            Some(true)
        } else {
            None
        }
    }

    /// A send stored by the broker whose answer the producer lost (a `send_timeout`): the send
    /// goes to the broker as any send (a resend is deduplicated or stored again there, see
    /// [`Engine::resend`]) and the producer keeps a copy of it to send again, returned. `Err`:
    /// the strategy's routing refused the send, which failed as any refused send.
    fn store_timed_out(&mut self, p: u32, slot: u32) -> Result<u32, bool> {
        let first = self.w.producers[p as usize]
            .resent
            .iter()
            .find(|&&(s, ..)| s == slot)
            .map(|&(_, at, b, renewed)| (at, b, renewed));
        let retry = self.alloc(*self.w.slab.get(slot));
        match self.route_and_enqueue(p, slot) {
            Ok(b) => {
                // The window of a deduplicating broker runs from the first store.
                let (at, b, renewed) = first.unwrap_or((self.now, b, false));
                self.w.producers[p as usize]
                    .resent
                    .push((retry, at, b, renewed));
                Ok(retry)
            }
            Err(block) => {
                self.w.slab.release(retry);
                Err(block)
            }
        }
    }

    /// The producer sends `slot` again after the broker had stored it (its `resent` entry): the
    /// broker refuses it as a duplicate when the producer is idempotent (sequence numbers) or
    /// the message is still in its `dedup_window`, and the slot is released (true); else it is
    /// stored again as a new message with a new id (false: the caller stores it).
    #[inline(never)]
    fn resend(&mut self, p: u32, slot: u32, b: u16) -> bool {
        let ps = &mut self.w.producers[p as usize];
        let Some(i) = ps.resent.iter().position(|&(s, ..)| s == slot) else {
            return false;
        };
        let (_, at, first, renewed) = ps.resent.swap_remove(i);
        let of = self.msg_ref(slot);
        let window = self.w.brokers[b as usize].dedup_window();
        // A send the application made again after its producer gave it up is a new record: an
        // idempotent producer's sequence numbers do not recognise it (Kafka bumps the epoch
        // after an expired batch, KIP-360).
        let deduplicated = (self.cfg.idempotence && !renewed)
            || (b == first && self.now < at.saturating_add(window));
        let msg = if deduplicated {
            of
        } else {
            let id = self.w.next_id;
            self.w.next_id += 1;
            self.w.slab.get_mut(slot).view.id = id;
            MsgRef { id, ..of }
        };
        self.emit(Event::Resend {
            t: self.now,
            msg,
            of: of.id,
            producer: p,
            broker: b,
            deduplicated,
        });
        if deduplicated {
            self.w.slab.release(slot);
        }
        deduplicated
    }

    /// A send failed by a `send_error` (the broker did not store it): retried after the retry
    /// backoff. If nothing was waiting yet, it opens the in-flight window: how many later sends
    /// may still go ahead of it ([`Engine::send_behind_failure`]); a send that fails inside an
    /// open window waits with the others and leaves the window as it is.
    #[inline(never)]
    fn send_errored(&mut self, p: u32, slot: u32) {
        self.emit_send_fail(p, slot);
        let overtakes = self.send_overtakes;
        let ps = &mut self.w.producers[p as usize];
        if ps.failed.is_empty() {
            ps.failed_block = false;
            ps.overtakes = Some(overtakes);
        } else if ps.overtakes.is_none() {
            ps.overtakes = Some(overtakes);
        }
        ps.failed.push_back(slot);
        self.await_delivery(p, slot);
        self.schedule_producer_retry(p);
    }

    /// The producer saw its send of `slot` fail.
    fn emit_send_fail(&mut self, p: u32, slot: u32) {
        // A send stored with its answer lost set off a dispatch: that comes first.
        self.flush();
        let msg = self.msg_ref(slot);
        self.emit(Event::SendFail {
            t: self.now,
            msg,
            producer: p,
        });
    }

    /// Asks the strategy where the send goes and stores it there; `Err(block)` if it failed.
    // Inlined into the send path (it stopped being when the message grew its lease fields).
    #[inline(always)]
    pub(super) fn route_and_enqueue(&mut self, p: u32, slot: u32) -> Result<u16, bool> {
        walk!();
        let ps = &self.w.producers[p as usize];
        let connected = ps.broker.expect("connected");
        // The context and the view are built only where `route` is called: a strategy without
        // it paid for both on every send.
        let ask = |e: &mut Self| {
            let ctx = RouteCtx {
                now: e.now,
                producer: p,
                connected,
                up: &e.w.broker_up,
                held_since: e.w.producers[p as usize].held(slot),
            };
            e.strategy.route(&ctx, e.w.slab.view(slot))
        };
        let route = if self.hooks.route {
            ask(self)
        } else {
            let plain = Route::Connected;
            if cfg!(debug_assertions) {
                assert_eq!(ask(self), plain, "route left out of hooks()");
            }
            plain
        };
        let b = match self.routed_to(route, connected) {
            Ok(b) => b,
            Err(Unrouted::Held(d)) => {
                // Asked again when the hold ends, or when the client's blocking call gives up.
                let ps = &mut self.w.producers[p as usize];
                let since = ps.held(slot).unwrap_or(self.now);
                ps.held_since = Some((slot, since));
                let mut at = self.now + d.max(1);
                if let Some(limit) = self.cfg.call_timeout {
                    at = at.min((since + limit.0).max(self.now + 1));
                }
                ps.hold = Some(at);
                return Err(true);
            }
            Err(Unrouted::Refused { block }) => {
                self.w.producers[p as usize].release_hold(slot);
                return Err(block);
            }
        };
        let ps = &mut self.w.producers[p as usize];
        ps.release_hold(slot);
        if !ps.resent.is_empty() && self.resend(p, slot, b) {
            return Ok(b);
        }
        self.store_sent(b, slot).map(|()| b)
    }

    /// The broker a send routed `route` by a producer connected to `connected` is stored at,
    /// or why it is not stored now.
    #[inline(always)]
    fn routed_to(&self, route: Route, connected: u16) -> Result<u16, Unrouted> {
        let brokers = &self.w.brokers;
        match route {
            Route::Connected => Ok(connected),
            Route::Broker(b) if brokers[b as usize].is_up() => Ok(b),
            // A send to an HA pair reaches the member serving it.
            Route::Broker(b) => match brokers[b as usize].partner() {
                Some(s) if brokers[s as usize].is_up() => Ok(s),
                _ => Err(Unrouted::Refused { block: true }),
            },
            Route::Fail { block } => Err(Unrouted::Refused { block }),
            Route::Stored(b) => match brokers[b as usize].partner() {
                Some(s) if !brokers[b as usize].is_up() && brokers[s as usize].is_up() => Ok(s),
                _ => Ok(b),
            },
            Route::Wait(d) => Err(Unrouted::Held(d)),
        }
    }

    /// The producer's blocking call for its held send `slot` timed out (`call_timeout`, held
    /// since `since`): the client fails its connection (Artemis's `ChannelImpl.sendBlocking`:
    /// `connection.asyncFail`) and the application sends the message again once reconnected,
    /// ahead of its later sends, while the broker goes on holding the first send and stores it
    /// when the strategy lets it ([`Engine::held_send`]). The resend is a copy, as after a
    /// `send_timeout` ([`Engine::resend`]): stored again unless the broker deduplicates it.
    /// `waiting`: the producer's waiting sends, in order, the copy to go at `at`.
    fn call_timed_out(
        &mut self,
        p: u32,
        slot: u32,
        since: Time,
        mut waiting: VecDeque<u32>,
        at: usize,
    ) {
        let broker = self.w.producers[p as usize]
            .broker
            .expect("a held send has a connection");
        self.emit_send_fail(p, slot);
        let copy = self.alloc(*self.w.slab.get(slot));
        let id = self.w.slab.get(slot).view.id;
        self.w.held_sends.push(HeldSend {
            slot,
            producer: p,
            broker,
            since,
        });
        self.q.push(self.now, Ev::HeldSend { slot, id });
        let ps = &mut self.w.producers[p as usize];
        ps.held_since = None;
        // The window of a deduplicating broker is counted from the hold's start.
        ps.resent.push((copy, since, broker, false));
        ps.groups.clear();
        waiting.insert(at, copy);
        self.buffer_for_reconnect(p, waiting);
        self.then(Fx::ProducerLostBroker(p));
    }

    /// Producer `p`, without a connection, keeps `waiting` (its failed sends, in order) to send
    /// first once reconnected, ahead of what it buffered since the connection went. Under a
    /// linger the records it accumulated since follow them (Kafka re-enqueues a failed batch
    /// at the front of its partition's deque, `RecordAccumulator.reenqueue`): else the
    /// accumulated batch, drained when its linger ends, would go ahead of the failed ones.
    fn buffer_for_reconnect(&mut self, p: u32, mut waiting: VecDeque<u32>) {
        let ps = &mut self.w.producers[p as usize];
        if !ps.acc.is_empty() {
            let moved = waiting.len();
            waiting.extend(ps.acc.drain(..));
            ps.acc_parts.clear();
            let since = std::mem::take(&mut ps.acc_at);
            for (i, &slot) in waiting.iter().enumerate().skip(moved) {
                self.await_in_request(p, slot, i - moved, &since);
            }
        }
        self.w.producers[p as usize].send_after_reconnect(waiting);
    }

    /// A held send whose producer gave up on it ([`Engine::call_timed_out`]) is asked about
    /// again: stored where the strategy routes it, or held on.
    pub(super) fn held_send(&mut self, slot: u32, id: u64) {
        walk!();
        let Some(i) = self.w.held_sends.iter().position(|h| h.slot == slot) else {
            return;
        };
        let h = self.w.held_sends[i];
        if self.w.slab.get(slot).view.id != id {
            return;
        }
        let view = self.view(slot);
        let ctx = RouteCtx {
            now: self.now,
            producer: h.producer,
            connected: h.broker,
            up: &self.w.broker_up,
            held_since: Some(h.since),
        };
        let route = self.strategy.route(&ctx, &view);
        let b = match self.routed_to(route, h.broker) {
            Ok(b) => b,
            Err(Unrouted::Held(d)) => {
                self.q.push(self.now + d.max(1), Ev::HeldSend { slot, id });
                return;
            }
            // Refused at last (no bundled strategy does this after holding): the receiving
            // node stores it, as an unbound group's send is.
            Err(Unrouted::Refused { .. }) => h.broker,
        };
        self.w.held_sends.swap_remove(i);
        // A held copy (the application's send again of a message whose earlier call timed out,
        // or whose answer was lost) is a resend as when it goes by the producer's connection:
        // stored as a new instance unless the broker deduplicates it, and no longer waiting to
        // be sent (its slot may be reused once it settles).
        if self.resend(h.producer, slot, b) {
            return;
        }
        self.accept(b, slot);
    }

    /// The strategy's routing refused a send (e.g. a Unit-of-Order member down): retried after
    /// the retry backoff; `block`: later sends wait behind it.
    pub(super) fn send_failed(&mut self, p: u32, slot: u32, block: bool) {
        walk!();
        if let Some(at) = self.w.producers[p as usize].hold.take() {
            // Not a failure: the broker holds the send (`Route::Wait`), later sends wait.
            let ps = &mut self.w.producers[p as usize];
            ps.failed.push_back(slot);
            ps.failed_block = true;
            self.await_delivery(p, slot);
            self.schedule_producer_retry_at(p, at);
            return;
        }
        self.emit_send_fail(p, slot);
        let ps = &mut self.w.producers[p as usize];
        ps.failed.push_back(slot);
        ps.failed_block = block;
        self.await_delivery(p, slot);
        self.schedule_producer_retry(p);
    }

    /// `slot`, a send of producer `p`, waits at the producer (failed, behind a failed send, or
    /// buffered while disconnected): under a `delivery_timeout` its message's deadline runs from
    /// its send, which is now unless it waited before (a deadline is kept until the message is
    /// given up or the producer has nothing waiting).
    #[inline]
    fn await_delivery(&mut self, p: u32, slot: u32) {
        if let Some(limit) = self.cfg.delivery_timeout {
            self.set_deadline(p, slot, self.now.saturating_add(limit.0));
        }
    }

    /// `slot`'s message is given up at `due` unless it has a deadline already.
    #[inline(never)]
    fn set_deadline(&mut self, p: u32, slot: u32, due: Time) {
        let id = self.w.slab.get(slot).view.id;
        let ps = &mut self.w.producers[p as usize];
        let at = (*ps.deadlines.entry(id).or_insert(due)).max(self.now);
        // Armed, or armed again when this deadline comes first (a deadline from a batch's
        // creation, or from a write its leader lost): the later event is then stale.
        if ps.expiry_at.is_none_or(|t| at < t) {
            ps.expiry_at = Some(at);
            self.q.push(at, Ev::DeliveryTimeout(p));
        }
    }

    /// Producer `p`'s delivery timeout: the sends at the front of its waiting queues (its
    /// failed sends and those behind them, then its buffer) whose deadline has passed are given
    /// up, oldest first, up to the first that is not due, as Kafka's `Sender` expires the
    /// batches of each partition's queue in send order and stops at the first not expired
    /// (`RecordAccumulator.expiredBatches`, `Sender.getExpiredInflightBatches`); then the
    /// timeout is armed again for the new fronts.
    pub(super) fn delivery_timeout(&mut self, p: u32) {
        walk!();
        let Some(limit) = self.cfg.delivery_timeout else {
            return;
        };
        let now = self.now;
        let w = &mut self.w;
        let Producer {
            failed,
            buffer,
            deadlines,
            expiry_at,
            held_since,
            hold,
            overtakes,
            failed_block,
            groups,
            ..
        } = &mut w.producers[p as usize];
        if *expiry_at != Some(now) {
            // A stale event: the timeout was armed again for an earlier deadline.
            return;
        }
        *expiry_at = None;
        let mut expired = Vec::new();
        let mut next: Option<Time> = None;
        let mut from_failed = 0u32;
        for (q, queue) in [&mut *failed, &mut *buffer].into_iter().enumerate() {
            while let Some(&slot) = queue.front() {
                let id = w.slab.get(slot).view.id;
                // Every waiting send has a deadline; one without is given its own from now.
                let due = *deadlines.entry(id).or_insert(now.saturating_add(limit.0));
                if due > now {
                    next = Some(next.map_or(due, |n: Time| n.min(due)));
                    break;
                }
                queue.pop_front();
                if q == 0 {
                    from_failed += 1;
                }
                if held_since.is_some_and(|(s, _)| s == slot) {
                    *held_since = None;
                    *hold = None;
                }
                expired.push(slot);
            }
        }
        if from_failed > 0 && !groups.is_empty() {
            leave_requests(groups, from_failed);
        }
        if failed.is_empty() {
            *overtakes = None;
            *failed_block = false;
        }
        let waiting = failed.len() + buffer.len();
        if waiting == 0 {
            deadlines.clear();
        } else if deadlines.len() > 4 * waiting + 64 {
            // Deadlines of messages stored since: forget them, keeping the waiting ones'.
            let ids: std::collections::BTreeSet<u64> = failed
                .iter()
                .chain(buffer.iter())
                .map(|&s| w.slab.get(s).view.id)
                .collect();
            deadlines.retain(|id, _| ids.contains(id));
        }
        if let Some(at) = next {
            *expiry_at = Some(at);
            self.q.push(at, Ev::DeliveryTimeout(p));
        }
        // Each give-up is over (a resend may reach a consumer) before the next is made.
        for slot in expired {
            self.flush();
            self.give_up_send(p, slot);
        }
    }

    /// Producer `p` gave up its send `slot` at its delivery timeout (the callback's
    /// `TimeoutException`). `drop`: the message is never stored (unless the broker had stored
    /// a first attempt whose answer was lost: then only the copy waiting to be sent again goes).
    /// `resend`: the application sends it again, a new send behind those made since, with a
    /// deadline of its own.
    fn give_up_send(&mut self, p: u32, slot: u32) {
        let resend = self.cfg.on_delivery_timeout == OnDeliveryTimeout::Resend;
        let msg = self.msg_ref(slot);
        self.emit(Event::DeliveryTimeout {
            t: self.now,
            msg,
            producer: p,
            resent: resend,
        });
        let ps = &mut self.w.producers[p as usize];
        ps.deadlines.remove(&msg.id);
        let copy = ps.resent.iter().position(|&(s, ..)| s == slot);
        if resend {
            if let Some(i) = copy {
                ps.resent[i].3 = true;
            }
            self.send(p, slot);
        } else {
            if let Some(i) = copy {
                ps.resent.swap_remove(i);
            }
            self.w.slab.release(slot);
        }
    }

    /// Sends of `p` a partition leader wrote and lost in its crash before its followers had
    /// them, under `acks = "all"` (never acknowledged: `replication.rs`), each with when it was
    /// written: the producer sends them again, in order, before anything it holds (they were
    /// sent first). Their delivery deadline runs from their send (at the latest their write,
    /// unless they waited before), not from the election that cut them: one that has passed
    /// it while its leader was being replaced is given up now (Kafka's request failed at the
    /// crash and its batch expired in the accumulator, `RecordAccumulator.expiredBatches`).
    pub(super) fn send_again_first(&mut self, p: u32, slots: Vec<(u32, Time)>) {
        walk!();
        let mut overdue = false;
        for &(slot, written) in &slots {
            self.w.slab.get_mut(slot).loc = Loc::Producer(p);
            self.emit_send_fail(p, slot);
            if let Some(limit) = self.cfg.delivery_timeout {
                let due = written.saturating_add(limit.0);
                overdue |= due <= self.now;
                self.set_deadline(p, slot, due);
            }
        }
        let ps = &mut self.w.producers[p as usize];
        // Disconnected: ahead of what it buffered; else ahead of its failed sends, retried.
        let connected = ps.broker.is_some();
        let queue = if connected {
            &mut ps.failed
        } else {
            &mut ps.buffer
        };
        let n = slots.len() as u32;
        for (slot, _) in slots.into_iter().rev() {
            queue.push_front(slot);
        }
        if connected {
            if self.cfg.batching.is_some() {
                // One request of their own, ahead of the failed ones (`retry_requests`).
                ps.groups.insert(0, n);
            }
            ps.failed_block = true;
            self.schedule_producer_retry(p);
        }
        if overdue {
            // Given up now, before a reconnect at this instant could send them.
            self.w.producers[p as usize].expiry_at = Some(self.now);
            self.delivery_timeout(p);
        }
    }

    /// A retry of `p`'s failed sends after its retry backoff, unless one is already scheduled.
    fn schedule_producer_retry(&mut self, p: u32) {
        let at = self.now + self.cfg.retry_backoff.0.max(1);
        self.schedule_producer_retry_at(p, at);
    }

    /// A retry of `p`'s waiting sends at `at`, unless one is already scheduled (a held send
    /// retried early is asked about again and waits the rest).
    fn schedule_producer_retry_at(&mut self, p: u32, at: Time) {
        let ps = &mut self.w.producers[p as usize];
        if !ps.retrying {
            ps.retrying = true;
            self.q.push(at, Ev::ProducerRetry(p));
        }
    }

    /// Producer `p`'s held send, if its blocking call has timed out (`call_timeout`), leaves
    /// `pending` (its failed sends, in order) and is given up as the client gives it up
    /// ([`Engine::call_timed_out`], which takes the rest of `pending` too): whether it had.
    fn held_call_expired(&mut self, p: u32, pending: &mut VecDeque<u32>) -> bool {
        let ps = &self.w.producers[p as usize];
        let (Some((slot, since)), Some(limit)) = (ps.held_since, self.cfg.call_timeout) else {
            return false;
        };
        if self.now < since + limit.0 {
            return false;
        }
        let Some(i) = pending.iter().position(|&s| s == slot) else {
            return false;
        };
        pending.remove(i);
        self.call_timed_out(p, slot, since, std::mem::take(pending), i);
        true
    }

    /// Retries the failed sends in order, each as a send again (a `send_error` in force may fail
    /// it anew); a blocking failure keeps everything behind it waiting, and a send failed by a
    /// `send_error` lets only the in-flight window's worth of the ones behind it go ahead (the
    /// rule at [`Engine::send_behind_failure`]).
    pub(super) fn producer_retry(&mut self, p: u32) {
        walk!();
        let ps = &mut self.w.producers[p as usize];
        ps.retrying = false;
        // The round sends everything again: no window is open until one of them fails.
        ps.overtakes = None;
        if ps.broker.is_none() {
            let failed = std::mem::take(&mut ps.failed);
            ps.groups.clear();
            self.buffer_for_reconnect(p, failed);
            return;
        }
        if self.cfg.batching.is_some() {
            self.retry_requests(p);
            return;
        }
        let mut pending = std::mem::take(&mut ps.failed);
        if self.held_call_expired(p, &mut pending) {
            return;
        }
        let mut still = VecDeque::new();
        let mut block = false;
        let mut held = None;
        while let Some(slot) = pending.pop_front() {
            if !self.w.producers[p as usize].may_go_ahead(block) {
                still.push_back(slot);
                continue;
            }
            match self.attempt(p, slot) {
                Ok(None) => {}
                Ok(Some(waits)) => {
                    self.emit_send_fail(p, waits);
                    still.push_back(waits);
                    let ps = &mut self.w.producers[p as usize];
                    if ps.overtakes.is_none() {
                        ps.overtakes = Some(self.send_overtakes);
                    }
                }
                Err(b) => {
                    // A held send (`Route::Wait`) is no failure: it waits, and so do the rest.
                    held = self.w.producers[p as usize].hold.take();
                    if held.is_none() {
                        self.emit_send_fail(p, slot);
                    }
                    still.push_back(slot);
                    block = b;
                    self.w.producers[p as usize].failed_block = b;
                }
            }
        }
        let ps = &mut self.w.producers[p as usize];
        ps.failed = still;
        if ps.failed.is_empty() {
            ps.overtakes = None;
        } else if let Some(at) = held {
            self.schedule_producer_retry_at(p, at);
        } else {
            self.schedule_producer_retry(p);
        }
    }
}

/// Under a `linger`: `n` records given up from the front of the failed queue leave its requests
/// (`groups`, the records of each, oldest first).
#[inline(never)]
fn leave_requests(groups: &mut Vec<u32>, mut n: u32) {
    while n > 0 {
        match groups.first_mut() {
            Some(g) if *g <= n => {
                n -= *g;
                groups.remove(0);
            }
            Some(g) => {
                *g -= n;
                n = 0;
            }
            None => break,
        }
    }
}

/// What a request's attempt leaves waiting ([`Engine::attempt_request`]).
#[derive(Default)]
struct Request {
    /// The records (or copies) that wait for the retry, in order.
    waits: Vec<u32>,
    /// The place in the request of the record each of `waits` is (or is a copy of).
    of: Vec<u32>,
    /// A `send_error` failed the request.
    errored: bool,
    /// The broker holds a record (`Route::Wait`): when to ask again (the hold's end, or the
    /// client's `call_timeout`), not after the retry backoff.
    held: Option<Time>,
    /// The strategy refused a record and the rest wait behind it.
    block: bool,
}

/// Why a send is not stored now ([`Engine::routed_to`]).
#[derive(Clone, Copy)]
enum Unrouted {
    /// The broker holds it this much longer (`Route::Wait`).
    Held(Time),
    /// Refused; `block`: the producer's later sends wait behind it.
    Refused { block: bool },
}

/// One producer's connection and clock.
pub(super) struct Producer {
    /// Failover list (broker indices, in the order tried).
    list: Vec<u16>,
    /// Connected broker.
    broker: Option<u16>,
    /// Whether it has connected before (a later connect is a failover).
    connected_once: bool,
    /// A reconnect attempt is scheduled.
    reconnecting: bool,
    /// Its process is dead (a `producer_crash`): it connects again only once restarted.
    dead: bool,
    /// Messages sent while disconnected, in send order.
    buffer: VecDeque<u32>,
    /// Sends that failed (the strategy's routing refused them, e.g. a Unit-of-Order member down,
    /// or a `send_error` fault), and the later sends waiting behind them, in send order, to retry.
    failed: VecDeque<u32>,
    /// Later sends wait behind the failed ones (the strategy's blocking retry loop in the
    /// application; a `send_error` failure uses `overtakes`).
    failed_block: bool,
    /// A retry of the failed sends is scheduled.
    retrying: bool,
    /// While a send that failed by a `send_error` waits for its retry and sends may overtake it
    /// (`max_in_flight` > 1, no idempotence): how many more later sends may still go ahead of it
    /// (they were in flight with it). At 0, later sends wait behind it (`failed_block`). None:
    /// no such failure outstanding.
    overtakes: Option<u32>,
    /// Waiting sends whose first attempt the broker stored though the producer saw it fail (a
    /// `send_timeout`): (slot, when it was stored, where). Its resend is deduplicated or stored
    /// again ([`crate::engine::Engine`]'s `resend`).
    /// `renewed`: the application sent it again after giving it up (`on_delivery_timeout =
    /// "resend"`): a new record, which an idempotent producer's sequence numbers do not cover.
    resent: Vec<(u32, Time, u16, bool)>,
    /// Under a `delivery_timeout`: when each waiting message (by id) is given up. Set when a
    /// send starts waiting; kept for messages stored since until nothing waits.
    deadlines: BTreeMap<u64, Time>,
    /// When the `Ev::DeliveryTimeout` scheduled is due, if one is (an earlier one scheduled
    /// since makes it stale).
    expiry_at: Option<Time>,
    /// Set by a send the broker holds (`Route::Wait`): when to route it again. Taken at once by
    /// the caller that saw the send refused.
    hold: Option<Time>,
    /// The send the broker holds (`Route::Wait`) and since when.
    held_since: Option<(u32, Time)>,
    /// Draws whether a send fails during a `send_error` fault (its own stream, so the draws
    /// move nothing else).
    send_rng: ChaCha8Rng,
    /// Clock offset in microseconds (fixed skew + clock_skew faults).
    clock_offset: i64,
    /// Under a `linger`: the records accumulated for its next request, in send order.
    acc: Vec<u32>,
    /// Under a `linger`: how many of `acc` go to each partition (its batches' sizes).
    acc_parts: Vec<u32>,
    /// Under a `linger`: when its oldest batch in `acc` was started.
    acc_since: Time,
    /// Under a `linger`: when each partition's batch in `acc` was started (by partition, as
    /// `acc_parts`).
    acc_created: Vec<Time>,
    /// Under a `linger` and a `delivery_timeout`: when each record of `acc` started its delivery
    /// deadline (its batch's creation, Kafka's `ProducerBatch.createdMs`), as `acc`.
    acc_at: Vec<Time>,
    /// An `Ev::Linger` is scheduled.
    linger_armed: bool,
    /// Under a `linger`: how many records of `failed` each request holds, in order (a
    /// request is retried whole).
    groups: Vec<u32>,
    /// Its process is paused (a `producer_pause`), or was and a new instance took over while
    /// the paused one has not woken yet: what the paused one holds.
    paused: Option<Box<Paused>>,
    /// How many pauses it has had (a replacement scheduled for an earlier one is stale).
    pauses: u32,
}

/// A paused producer instance (`producer_pause`): what it held when it stopped.
#[derive(Debug)]
struct Paused {
    /// Its sends not yet written (failed and waiting for their retry, batched, buffered), in
    /// send order: nothing moves them while it is paused.
    held: VecDeque<u32>,
    /// A new instance has started meanwhile: the paused one is a zombie.
    replaced: bool,
    /// Which pause of the producer it is.
    serial: u32,
    /// The broker it was connected to (else the first of its list): where its sends are said
    /// to be written again by a new instance.
    broker: u16,
}

/// What a paused producer instance holds when it wakes ([`Producer::wake`]).
pub(super) struct Woken {
    /// Its sends not yet written, in send order.
    pub held: VecDeque<u32>,
    /// A new instance took over meanwhile (it is a zombie).
    pub replaced: bool,
    /// The broker it was connected to when it paused (else the first of its list).
    pub broker: u16,
}

impl Producer {
    pub fn new(
        list: Vec<u16>,
        cfg: &Producers,
        rng: &mut ChaCha8Rng,
        send_rng: ChaCha8Rng,
    ) -> Self {
        let skew = cfg.clock_skew.0 as i64;
        let clock_offset = if skew > 0 {
            rng.random_range(-skew..=skew)
        } else {
            0
        };
        Producer {
            list,
            broker: None,
            connected_once: false,
            reconnecting: false,
            dead: false,
            buffer: VecDeque::new(),
            failed: VecDeque::new(),
            failed_block: false,
            retrying: false,
            overtakes: None,
            resent: Vec::new(),
            deadlines: BTreeMap::new(),
            expiry_at: None,
            hold: None,
            held_since: None,
            send_rng,
            clock_offset,
            acc: Vec::new(),
            acc_parts: Vec::new(),
            acc_since: 0,
            acc_created: Vec::new(),
            acc_at: Vec::new(),
            linger_armed: false,
            groups: Vec::new(),
            paused: None,
            pauses: 0,
        }
    }

    /// The broker it is connected to.
    pub fn connected_to(&self) -> Option<u16> {
        self.broker
    }

    /// Its clock at simulated time `now` (never before 0).
    #[inline(always)]
    pub fn clock(&self, now: Time) -> u64 {
        let t = now as i64;
        // Most clocks are never skewed: no saturating add for them.
        let t = if self.clock_offset == 0 {
            t
        } else {
            t.saturating_add(self.clock_offset)
        };
        t.max(0) as u64
    }

    /// Its clock steps by `skew` microseconds (a `clock_skew` fault starting, or ending with the
    /// opposite sign).
    pub fn step_clock(&mut self, skew: i64) {
        self.clock_offset = self.clock_offset.saturating_add(skew);
    }

    /// The messages whose first send the broker stored though the producer saw it fail, and that
    /// it has not sent again yet.
    pub fn unsent_resends(&self) -> impl Iterator<Item = u32> + '_ {
        self.resent.iter().map(|&(slot, ..)| slot)
    }

    /// Reconnecting: `sends` (waiting ones, in order) join its buffer ahead of what it buffered
    /// since, to go first once connected.
    pub fn send_after_reconnect(&mut self, sends: VecDeque<u32>) {
        for slot in sends.into_iter().rev() {
            self.buffer.push_front(slot);
        }
    }

    /// Since when the broker has held its send `slot`, if it does.
    fn held(&self, slot: u32) -> Option<Time> {
        self.held_since.filter(|&(s, _)| s == slot).map(|(_, t)| t)
    }

    /// Its send `slot` is no longer held (stored or refused).
    fn release_hold(&mut self, slot: u32) {
        if self.held(slot).is_some() {
            self.held_since = None;
        }
    }

    /// Its broker went down: the connection is dropped (a send the broker held is sent anew on
    /// the next connection); true when a reconnect must be scheduled (none is yet).
    /// Whether a send (or request) may go now, behind failed ones: not behind a blocking
    /// failure (`blocked`), nor once the `max_in_flight - 1` that may overtake a failed one
    /// have gone (`overtakes`, counted down here).
    pub fn may_go_ahead(&mut self, blocked: bool) -> bool {
        if blocked || self.overtakes == Some(0) {
            return false;
        }
        if let Some(n) = &mut self.overtakes {
            *n -= 1;
        }
        true
    }

    /// Its process dies: false if it was dead already. It loses its connection.
    pub fn crash(&mut self) -> bool {
        if std::mem::replace(&mut self.dead, true) {
            return false;
        }
        self.lose_broker();
        true
    }

    /// Its process starts again after a crash: false if it was not dead, or if it is paused
    /// (a paused process is not dead: only its wake or a replacement runs it again).
    pub fn restart(&mut self) -> bool {
        if self.paused.as_ref().is_some_and(|z| !z.replaced) {
            return false;
        }
        std::mem::replace(&mut self.dead, false)
    }

    /// Its process stops (a `producer_pause`): the number of this pause, or None if it is not
    /// running (dead, paused, or a zombie of an earlier pause has not woken yet). Nothing it
    /// holds moves: its failed, batched and buffered sends are set aside, in send order, and
    /// what the application produces meanwhile waits in its buffer (it has no connection).
    pub fn pause(&mut self) -> Option<u32> {
        if self.dead || self.paused.is_some() {
            return None;
        }
        self.dead = true;
        let broker = self.broker.or(self.list.first().copied()).unwrap_or(0);
        self.lose_broker();
        let mut held = std::mem::take(&mut self.failed);
        held.extend(self.acc.drain(..));
        held.append(&mut self.buffer);
        self.acc_parts.clear();
        self.acc_at.clear();
        self.groups.clear();
        self.overtakes = None;
        self.failed_block = false;
        self.pauses = self.pauses.wrapping_add(1);
        self.paused = Some(Box::new(Paused {
            held,
            replaced: false,
            serial: self.pauses,
            broker,
        }));
        Some(self.pauses)
    }

    /// A new instance starts while pause `serial` lasts: the sends the paused one holds (their
    /// slots, in send order) and the broker it was connected to, or None if that pause is over or was replaced already. The
    /// producer runs again (as the new instance); the paused one keeps what it held.
    pub fn replace(&mut self, serial: u32) -> Option<(Vec<u32>, u16)> {
        let z = self.paused.as_mut()?;
        if z.serial != serial || z.replaced {
            return None;
        }
        z.replaced = true;
        self.dead = false;
        Some((z.held.iter().copied().collect(), z.broker))
    }

    /// The paused instance runs again: what it held, or None if it is not paused. Unless a new
    /// instance took over, the producer runs again (as itself).
    pub fn wake(&mut self) -> Option<Woken> {
        let z = self.paused.take()?;
        if !z.replaced {
            self.dead = false;
        }
        Some(Woken {
            held: z.held,
            replaced: z.replaced,
            broker: z.broker,
        })
    }

    /// Whether `slot` is a send the broker stored with its answer lost, waiting to be sent
    /// again (a `send_timeout`): its entry goes, and true.
    pub fn forget_resend(&mut self, slot: u32) -> bool {
        match self.resent.iter().position(|&(s, ..)| s == slot) {
            Some(i) => {
                self.resent.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Whether its process is dead.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    pub fn lose_broker(&mut self) -> bool {
        self.broker = None;
        self.held_since = None;
        !std::mem::replace(&mut self.reconnecting, true)
    }

    /// A connection attempt through its failover list, `up` telling which brokers are up.
    pub fn try_connect(&mut self, up: impl Fn(u16) -> bool) -> Attempt {
        self.reconnecting = false;
        if self.broker.is_some() {
            return Attempt::AlreadyConnected;
        }
        let Some(b) = self.list.iter().copied().find(|&b| up(b)) else {
            self.reconnecting = true;
            return Attempt::NoneUp;
        };
        self.broker = Some(b);
        let failover = self.connected_once;
        self.connected_once = true;
        Attempt::Connected {
            broker: b,
            failover,
            buffered: std::mem::take(&mut self.buffer),
        }
    }
}

/// The outcome of [`Producer::try_connect`].
pub(super) enum Attempt {
    /// It was connected already.
    AlreadyConnected,
    /// No broker of its list is up: it tries again later.
    NoneUp,
    /// Connected to `broker` (a failover unless it is the first connection), with the sends it
    /// buffered meanwhile, in send order.
    Connected {
        broker: u16,
        failover: bool,
        buffered: VecDeque<u32>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn producer() -> Producer {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut p = Producer::new(
            vec![0, 1],
            &Producers::default(),
            &mut rng,
            ChaCha8Rng::seed_from_u64(2),
        );
        assert!(matches!(
            p.try_connect(|_| true),
            Attempt::Connected { broker: 0, .. }
        ));
        p
    }

    /// A pause sets aside what the producer holds (failed, then batched, then buffered, in send
    /// order) and stops it; the wake hands it back and runs it again.
    #[test]
    fn a_pause_holds_everything_unsent_until_the_wake() {
        let mut p = producer();
        p.failed.extend([1, 2]);
        p.groups.push(2);
        p.overtakes = Some(3);
        p.acc.extend([3, 4]);
        p.acc_parts.push(2);
        assert_eq!(p.pause(), Some(1));
        assert!(p.is_dead() && p.connected_to().is_none());
        assert!(p.failed.is_empty() && p.acc.is_empty() && p.groups.is_empty());
        assert!(p.acc_parts.is_empty() && p.overtakes.is_none());
        // Paused: no second pause, no restart (a crash's end does not wake it).
        assert_eq!(p.pause(), None);
        assert!(!p.restart());
        // What the application produces meanwhile waits in the buffer, not with the paused one.
        p.buffer.push_back(5);
        let w = p.wake().expect("paused");
        assert_eq!(w.held, [1, 2, 3, 4]);
        assert!(!w.replaced);
        assert_eq!(w.broker, 0);
        assert!(!p.is_dead());
        assert_eq!(p.buffer, [5]);
        assert!(p.wake().is_none(), "woken once");
    }

    /// A replacement runs the producer again while the paused instance keeps what it held, and
    /// only for the pause it was scheduled for; the zombie's wake then leaves the new instance
    /// running, and a pause of the new instance waits for the zombie's wake.
    #[test]
    fn a_replacement_runs_while_the_zombie_keeps_what_it_held() {
        let mut p = producer();
        p.acc.push(7);
        let serial = p.pause().expect("running");
        assert!(p.replace(serial + 1).is_none(), "another pause's");
        assert_eq!(p.replace(serial), Some((vec![7], 0)));
        assert!(p.replace(serial).is_none(), "replaced once");
        assert!(!p.is_dead());
        assert_eq!(p.pause(), None, "the zombie has not woken");
        let w = p.wake().expect("a zombie");
        assert!(w.replaced);
        assert_eq!(w.held, [7]);
        assert!(!p.is_dead());
        // A stale replacement after the wake does nothing.
        assert!(p.replace(serial).is_none());
        assert_eq!(p.pause(), Some(serial + 1));
    }

    /// A dead producer does not pause; a crash of a paused one changes nothing.
    #[test]
    fn a_dead_producer_does_not_pause() {
        let mut p = producer();
        assert!(p.crash());
        assert_eq!(p.pause(), None);
        assert!(p.restart());
        assert!(p.pause().is_some());
        assert!(!p.crash());
        assert!(p.wake().is_some());
        assert!(!p.is_dead());
    }

    /// A send stored with its answer lost is remembered until sent again or forgotten.
    #[test]
    fn forget_resend_removes_only_its_entry() {
        let mut p = producer();
        p.resent.push((9, 0, 0, false));
        assert!(!p.forget_resend(8));
        assert!(p.forget_resend(9));
        assert!(p.resent.is_empty());
    }
}
