//! Brokers: the node that owns a broker's state (its store, the consumers attached, its network
//! bridges, its dead-letter queue; [`Broker`], private fields behind methods), and the engine's
//! handling of it: dispatch with prefetch through the strategy's policy, the one requeue of every
//! path, and a message's settlement (ack or dead-letter queue).

use super::events::Ev;
use super::state::{sort_for_put_back, Delivery, Loc, Msg, Slab};
use super::walk::walk;
use super::{Engine, Fx};
use crate::dist::Sampler;
use crate::history::{DiscardReason, Event, MsgRef, Observer};
use crate::ring::Ring;
use crate::scenario::{self, DeadLetter, NetworkKind, Requeue};
use crate::strategy::{ConsumerSlot, Control, DispatchCtx, Select, Strategy};
use crate::time::Time;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// [`Broker::position`] of a consumer not attached to this broker.
const NOT_ATTACHED: u32 = u32::MAX;

/// How deliveries go back to their broker ([`Engine::put_back`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct PutBack {
    /// Where each lands in its queue, which also sets the order they go back in.
    pub at: Requeue,
    /// Only a delivery still held by this consumer goes back (None: still current, whoever
    /// holds it).
    pub holder: Option<u32>,
    /// Only while its broker is up (a consumer's own request: a broker that is down already took
    /// its messages back).
    pub live_broker: bool,
    /// How long each stays undeliverable.
    pub delay: Delay,
    /// Each is recorded as a non-blocking redelivery.
    pub announce: bool,
}

impl PutBack {
    /// Back at `at` at once, silently, whoever holds them (a gone consumer's deliveries).
    pub const fn returned(at: Requeue) -> PutBack {
        PutBack {
            at,
            holder: None,
            live_broker: false,
            delay: Delay::None,
            announce: false,
        }
    }
}

/// How long a delivery put back stays undeliverable ([`PutBack::delay`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Delay {
    /// Not at all.
    None,
    /// Cancelled back unconsumed (a rolled-back window): not counted as a delivery, then held
    /// for the redelivery delay of its count until [`Ev::ReturnDue`].
    Cancelled,
    /// As a failed delivery ([`Engine::invisible_for`]), held until [`Ev::RedeliveryDue`].
    Invisible,
}

/// One broker: its own state, changed only through its methods.
pub(super) struct Broker {
    /// Serving: it accepts connections and dispatches its store.
    up: bool,
    /// Its process runs but it does not serve: the passive member of an HA pair, waiting for
    /// the store's lock (`failover.rs`).
    standby: bool,
    persistent: bool,
    page_size: usize,
    /// The store, in dispatch order (redelivered messages go back to the front).
    queue: Ring<u32>,
    /// Consumers attached, in attach order, each with its free prefetch kept current by the
    /// engine ([`Broker::set_free`] from `sync_load`): dispatch offers this list as it is
    /// instead of rebuilding it from every consumer's load on each call.
    attached: Vec<ConsumerSlot>,
    /// Per consumer index, its position in `attached` ([`NOT_ATTACHED`]: none), so that a
    /// change of one consumer's load costs no search.
    position: Vec<u32>,
    /// The sum of `attached`'s free prefetch: dispatch learns at once whether anyone has room
    /// (most arrivals under load find every consumer full).
    free_total: u32,
    /// Crash nesting (overlapping random crashes): up again when it returns to 0.
    down_depth: u32,
    /// Network bridges from this broker (`[network] kind = "bridge"`), in the order their demand
    /// appeared; one with messages in flight outlives its demand until they are acked.
    bridges: Vec<Bridge>,
    /// How many bridges it has opened: the next one's `link`.
    links_opened: u32,
    /// Its dead-letter queue, in the order messages arrived there (kept for `dlq_replay`).
    dlq: Vec<Msg>,
    /// `dispatch_latency`'s sampler and its own random stream (None: deliveries arrive at once).
    transit: Option<(Sampler, ChaCha8Rng)>,
    /// `restart_time`'s sampler and its own random stream (None: back when the crash ends).
    restart: Option<(Sampler, ChaCha8Rng)>,
    /// How long it refuses a resend of a message it stored (0: it stores every resend).
    dedup_window: Time,
    /// What dispatch learned about the head of its queue, to skip it while nothing changed.
    waits: Waits,
    /// Bumped whenever the strategy hears of an attach or a detach (of a consumer or a bridge):
    /// it voids [`Waits`] even where the candidates look the same again.
    members: u64,
    /// The other member of its HA pair (`backup_of`), with the pair's `takeover` sampler and
    /// this broker's own stream for it, and whether a restarted primary takes its store back.
    pair: Option<Pair>,
}

/// What dispatch learned about the head of a broker's queue: for each of its first messages, in
/// queue order, the answer the strategy promised to repeat ([`Select::HoldFor`] a candidate, by
/// its position among `cands`; [`WAITS_PARKED`]: [`Select::HoldWhileMembers`]) or [`WAITS_ASK`].
/// While the candidates are the same (`cands`, `members`), dispatch skips a message whose answer
/// still stands without asking: a page of messages behind full owners is otherwise asked again
/// on every dispatch. Only for at most [`WAITS_MAX_CANDS`] candidates (their room is a bit mask).
struct Waits {
    head: VecDeque<u8>,
    /// How many messages of the head wait for each candidate, and how many are to be asked
    /// about: when none waits for a candidate with room, the whole head is skipped at once (a
    /// page behind a stalled group owner, on every arrival).
    waiting: [u32; 64],
    asks: u32,
    cands: Vec<u32>,
    members: u64,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            head: VecDeque::new(),
            waiting: [0; 64],
            asks: 0,
            cands: Vec::new(),
            members: 0,
        }
    }
}

/// [`Waits`]: ask the strategy.
const WAITS_ASK: u8 = u8::MAX;
/// [`Waits`]: held until the candidates change (a bit no room mask sets).
const WAITS_PARKED: u8 = 63;
/// [`Waits`]: most candidates it keeps answers for.
const WAITS_MAX_CANDS: usize = 63;

impl Waits {
    /// Keeps what it knows if the candidates are still `cands` at `members`, else forgets it;
    /// returns the mask of candidates with room (None: too many candidates to keep answers).
    #[inline]
    fn check(&mut self, cands: &[ConsumerSlot], members: u64) -> Option<u64> {
        if cands.len() > WAITS_MAX_CANDS {
            self.forget();
            return None;
        }
        if self.members != members
            || self.cands.len() != cands.len()
            || self.cands.iter().zip(cands).any(|(&id, c)| id != c.id)
        {
            self.forget();
            self.cands.clear();
            self.cands.extend(cands.iter().map(|c| c.id));
            self.members = members;
        }
        Some(
            cands
                .iter()
                .enumerate()
                .filter(|(_, c)| c.free > 0)
                .fold(0, |m, (i, _)| m | 1 << i),
        )
    }

    /// How many messages from position `i` on (at most `max`) are still held without asking,
    /// with `room` the mask of candidates with room. (Out of line: only policies that promise
    /// get here.)
    #[inline(never)]
    fn held_from(&self, i: usize, max: usize, room: u64) -> usize {
        let end = self.head.len().min(i.saturating_add(max));
        if i >= end {
            return 0;
        }
        if self.asks == 0 && !bits(room).any(|w| self.waiting[w] > 0) {
            return end - i;
        }
        let held = |&w: &u8| w != WAITS_ASK && room >> w & 1 == 0;
        let (a, b) = self.head.as_slices();
        let mut k = i;
        if k < a.len() {
            let stop = end.min(a.len());
            if let Some(p) = a[k..stop].iter().position(|w| !held(w)) {
                return k + p - i;
            }
            k = stop;
        }
        if k < end {
            let off = a.len();
            if let Some(p) = b[k - off..end - off].iter().position(|w| !held(w)) {
                return k + p - i;
            }
            k = end;
        }
        k - i
    }

    /// Forgets every answer (the queue's head changed beyond tracking).
    fn forget(&mut self) {
        self.head.clear();
        self.waiting = [0; 64];
        self.asks = 0;
    }

    /// Counts `w` in (`by` 1) or out (`by` -1).
    #[inline]
    fn count(&mut self, w: u8, by: i32) {
        let n = if w == WAITS_ASK {
            &mut self.asks
        } else {
            &mut self.waiting[w as usize]
        };
        *n = n.wrapping_add_signed(by);
    }

    /// [`Self::learn`] in a dispatch call, first checking the candidates if it has not (`room`
    /// None; then the room mask [`Self::check`] returns, None for too many candidates).
    #[inline]
    fn learn_in(
        &mut self,
        i: usize,
        w: u8,
        cands: &[ConsumerSlot],
        members: u64,
        room: &mut Option<Option<u64>>,
    ) {
        if w == WAITS_ASK && i >= self.head.len() {
            // Beyond what is known, a message is asked about anyway.
            return;
        }
        if room.is_none() {
            *room = Some(self.check(cands, members));
        }
        if room.is_some_and(|r| r.is_some()) {
            self.learn(i, w);
        }
    }

    /// The message at position `i` got answer `w` (the ones before it, if unknown, are asked
    /// about: a policy that never promises keeps no answers).
    #[inline]
    fn learn(&mut self, i: usize, w: u8) {
        let len = self.head.len();
        if i < len {
            let old = std::mem::replace(&mut self.head[i], w);
            self.count(old, -1);
            self.count(w, 1);
        } else if w != WAITS_ASK {
            self.head.resize(i, WAITS_ASK);
            self.asks += (i - len) as u32;
            self.head.push_back(w);
            self.count(w, 1);
        }
    }

    /// A message was put in the queue at position `at`.
    fn inserted(&mut self, at: usize) {
        if at < self.head.len() {
            self.head.insert(at, WAITS_ASK);
            self.asks += 1;
        }
    }

    /// The message at position `at` left the queue.
    #[inline]
    fn removed(&mut self, at: usize) {
        if let Some(w) = self.head.remove(at) {
            self.count(w, -1);
        }
    }
}

/// The positions of the bits set in `mask`, lowest first.
#[inline]
fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let b = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            b
        })
    })
}

/// A broker's place in an HA pair (`failover.rs`).
struct Pair {
    partner: u16,
    /// This broker is the pair's primary (the other is `backup_of` it).
    primary: bool,
    takeover: (Sampler, ChaCha8Rng),
    failback: bool,
}

/// What a crash took down ([`Broker::crash`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Down {
    /// Nothing new: it was down already (an overlapping crash).
    Already,
    /// The serving broker: its clients lose their connections.
    Serving,
    /// The passive member of an HA pair: nobody notices.
    Standby,
}

/// Where dispatch sends a message it takes from the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handout {
    /// To this consumer.
    Consumer(u32),
    /// Over this bridge (an index into the broker's bridges).
    Bridge(usize),
    /// Nowhere: the strategy skipped it ([`Select::Skip`]).
    Skip,
}

/// Where an offer stands between two choices ([`Broker::offer_next`]).
pub(super) struct Offer {
    /// The queue position looked at next.
    i: usize,
    /// Room left among all candidates, and among the bridges.
    total_free: u32,
    bridge_free: u32,
    /// What the kept answers tell of the candidates' room ([`Waits::check`]; `None`: not yet
    /// checked in this offer).
    room: Option<Option<u64>>,
}

/// The fixed facts of one dispatch call.
pub(super) struct Pick {
    broker: u16,
    now: Time,
    /// How many of the candidates are local consumers (the bridges follow them).
    locals: usize,
    /// The id strategies see for the bridge toward peer 0 (`[consumers] count`).
    bridge_base: u32,
    /// The strategy may promise ([`Hooks::promises`](crate::strategy::Hooks::promises)): its answers are kept ([`Waits`]).
    keep: bool,
}

/// A network bridge from one broker toward `peer`: one more consumer of the broker's queue while
/// the peer has consumers attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bridge {
    pub peer: u16,
    /// Which of the broker's bridges this is (a serial): the peer's answer to a forward frees
    /// credit only on the bridge that sent it, not on one opened after a restart.
    pub link: u32,
    /// Messages taken and not yet acked (against `[network] prefetch`): the ack comes when the
    /// peer's answer to the forward is back, `forward_delay` after the peer stored it.
    pub in_flight: u32,
    /// The peer has consumers attached: the bridge is offered to dispatch.
    pub demand: bool,
    /// When its latest take goes on the wire to the peer: the bridge's one local consumer
    /// receives the queue's dispatches in order and sends them in that order, so a take never
    /// leaves before the one before it.
    pub sent: Time,
}

impl Broker {
    /// Broker `b` of `sc` (its defaults filled in by `resolved`), with `rngs` the streams of
    /// its `dispatch_latency`, `restart_time` and `takeover` draws.
    pub fn new(
        sc: &scenario::Scenario,
        resolved: &scenario::Resolved,
        b: usize,
        rngs: [ChaCha8Rng; 3],
    ) -> Self {
        let cfg = &sc.brokers[b];
        let r = &resolved.brokers[b];
        let [transit_rng, restart_rng, takeover_rng] = rngs;
        let partner = r.pair.as_ref().map(|p| p.partner);
        let pair = r.pair.as_ref().map(|p| Pair {
            partner: p.partner as u16,
            primary: cfg.backup_of.is_none(),
            takeover: (p.takeover.0.sampler(), takeover_rng),
            failback: p.failback,
        });
        Broker {
            up: cfg.backup_of.is_none(),
            standby: cfg.backup_of.is_some(),
            // The pair's store is the primary's.
            persistent: match (&cfg.backup_of, partner) {
                (Some(_), Some(primary)) => sc.brokers[primary].persistent,
                _ => cfg.persistent,
            },
            page_size: r.page_size as usize,
            queue: Ring::new(),
            attached: Vec::new(),
            position: vec![NOT_ATTACHED; sc.consumers.count as usize],
            free_total: 0,
            down_depth: 0,
            bridges: Vec::new(),
            links_opened: 0,
            dlq: Vec::new(),
            transit: cfg
                .dispatch_latency
                .as_ref()
                .map(|d| (d.0.sampler(), transit_rng)),
            restart: cfg
                .restart_time
                .as_ref()
                .map(|d| (d.0.sampler(), restart_rng)),
            dedup_window: r.dedup_window,
            pair,
            waits: Waits::default(),
            members: 0,
        }
    }

    /// The other member of its HA pair.
    pub fn partner(&self) -> Option<u16> {
        self.pair.as_ref().map(|p| p.partner)
    }

    /// A draw of its pair's takeover time.
    pub fn takeover_delay(&mut self) -> Time {
        let p = self.pair.as_mut().expect("in a pair");
        p.takeover.0.sample(&mut p.takeover.1)
    }

    /// It is its pair's primary and takes its store back when it restarts.
    pub fn fails_back(&self) -> bool {
        self.pair.as_ref().is_some_and(|p| p.primary && p.failback)
    }

    /// Whether it is up.
    #[inline]
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Whether its store survives a crash.
    pub fn persistent(&self) -> bool {
        self.persistent
    }

    /// How long it refuses a resend of a message it stored.
    pub fn dedup_window(&self) -> Time {
        self.dedup_window
    }

    /// The passive member of an HA pair, alive.
    pub fn is_standby(&self) -> bool {
        self.standby
    }

    /// A crash begins: what went down.
    pub fn crash(&mut self) -> Down {
        self.down_depth += 1;
        if self.down_depth > 1 {
            return Down::Already;
        }
        if std::mem::take(&mut self.standby) {
            return Down::Standby;
        }
        // At depth 0 a broker is serving or standing by.
        debug_assert!(self.up);
        self.up = false;
        Down::Serving
    }

    /// A crash ends; true when its process runs again now (no other crash still in force). It
    /// serves at once unless `standby` (its pair's other member holds the store: it waits).
    pub fn recover(&mut self, standby: bool) -> bool {
        self.down_depth = self.down_depth.saturating_sub(1);
        if self.down_depth > 0 || self.up || self.standby {
            return false;
        }
        self.up = !standby;
        self.standby = standby;
        true
    }

    /// Gives up its store (its queue and dead-letter queue) to its HA partner: it does not serve.
    pub fn take_store(&mut self) -> (Ring<u32>, Vec<Msg>) {
        debug_assert!(!self.up);
        self.waits.forget();
        (
            std::mem::take(&mut self.queue),
            std::mem::take(&mut self.dlq),
        )
    }

    /// Takes over its HA pair's store from the partner that held it.
    pub fn adopt_store(&mut self, (mut queue, mut dlq): (Ring<u32>, Vec<Msg>)) {
        // One member holds the store at a time: at most one of the two queues has messages.
        self.waits.forget();
        self.queue.append(&mut queue);
        self.dlq.append(&mut dlq);
    }

    /// The passive member serves (a takeover).
    pub fn serve(&mut self) {
        debug_assert!(self.standby && !self.up);
        self.standby = false;
        self.up = true;
    }

    /// It stops serving and waits as its pair's passive member (a failback: the primary took the
    /// store back); its clients are the engine's to move.
    pub fn stand_down(&mut self) {
        self.up = false;
        self.standby = true;
    }

    /// The draw of its `restart_time` (None: it restarts when the crash ends).
    pub fn restart_delay(&mut self) -> Option<Time> {
        self.restart.as_mut().map(|(s, rng)| s.sample(rng))
    }

    /// The draw of its `dispatch_latency` for one delivery (None: deliveries arrive at once).
    #[inline]
    pub fn transit_delay(&mut self) -> Option<Time> {
        self.transit.as_mut().map(|(s, rng)| s.sample(rng))
    }

    /// Stores a message at the tail of its queue.
    #[inline]
    pub fn store(&mut self, slot: u32) {
        self.queue.push_back(slot);
    }

    /// Puts a message at the head of its queue (a forward recalled).
    pub fn store_first(&mut self, slot: u32) {
        self.waits.inserted(0);
        self.queue.push_front(slot);
    }

    /// Takes the message at the head of its queue.
    pub fn take_first(&mut self) -> Option<u32> {
        self.waits.removed(0);
        self.queue.pop_front()
    }

    /// Takes `slots` out of its queue (records cut from a Kafka log, `replication.rs`).
    pub fn remove_queued(&mut self, slots: &[u32]) {
        self.waits.forget();
        self.queue.retain(|s| !slots.contains(s));
    }

    /// Empties its queue (a non-persistent store lost in a crash).
    pub fn clear_queue(&mut self) {
        self.waits.forget();
        self.queue.clear();
    }

    /// Puts a message taken back from a consumer into its queue at `requeue`: ahead of every
    /// queued message, behind them, or among them in production order (`slab` tells ids).
    fn put_back(&mut self, slot: u32, requeue: Requeue, slab: &Slab) {
        let q = &mut self.queue;
        match requeue {
            Requeue::Head => {
                self.waits.inserted(0);
                q.push_front(slot);
            }
            Requeue::Tail => q.push_back(slot),
            Requeue::Original => {
                let id = slab.get(slot).view.id;
                let at = q
                    .iter()
                    .position(|&s| slab.get(s).view.id > id)
                    .unwrap_or(q.len());
                self.waits.inserted(at);
                q.insert(at, slot);
            }
        }
    }

    /// The consumers attached, in attach order, with their free prefetch.
    #[inline]
    pub fn attached(&self) -> &[ConsumerSlot] {
        &self.attached
    }

    /// Consumer `c` attaches with `free` prefetch.
    pub fn attach(&mut self, c: u32, free: u32) {
        debug_assert_eq!(self.position[c as usize], NOT_ATTACHED, "attached twice");
        self.position[c as usize] = self.attached.len() as u32;
        self.attached.push(ConsumerSlot { id: c, free });
        self.free_total += free;
    }

    /// Consumer `c` detaches (if it was attached).
    pub fn detach(&mut self, c: u32) {
        let at = std::mem::replace(&mut self.position[c as usize], NOT_ATTACHED);
        if at == NOT_ATTACHED {
            return;
        }
        let gone = self.attached.remove(at as usize);
        self.free_total -= gone.free;
        // The ones behind it moved up by one (rare: a detach, not a dispatch).
        for (i, s) in self.attached.iter().enumerate().skip(at as usize) {
            self.position[s.id as usize] = i as u32;
        }
    }

    /// Every consumer detaches at once (the broker crashed).
    pub fn take_attached(&mut self) -> Vec<u32> {
        self.free_total = 0;
        let ids: Vec<u32> = self.attached.drain(..).map(|s| s.id).collect();
        for &c in &ids {
            self.position[c as usize] = NOT_ATTACHED;
        }
        ids
    }

    /// Its copy of consumer `c`'s free prefetch, if `c` is attached here.
    pub fn free_copy(&self, c: u32) -> Option<u32> {
        let at = self.position[c as usize];
        (at != NOT_ATTACHED).then(|| self.attached[at as usize].free)
    }

    /// Consumer `c`'s free prefetch is now `free` (nothing if it is not attached here: a
    /// consumer whose broker dropped it unnoticed, or a crash that took the whole list).
    #[inline]
    pub fn set_free(&mut self, c: u32, free: u32) {
        let at = self.position[c as usize];
        if at != NOT_ATTACHED {
            let slot = &mut self.attached[at as usize];
            self.free_total = self.free_total - slot.free + free;
            slot.free = free;
        }
    }

    /// A serial for a bridge it opens (`Bridge::link`).
    pub fn new_link(&mut self) -> u32 {
        self.links_opened += 1;
        self.links_opened
    }

    /// Its network bridges, to change (`network.rs`).
    pub fn bridges_mut(&mut self) -> &mut Vec<Bridge> {
        // (Not a change of candidates for [`Waits`]: the bridges offered are among `cands`, and
        // opening or closing one tells the strategy, which calls `members_changed`.)
        &mut self.bridges
    }

    /// The strategy's view of its candidates changed (it was told of an attach or a detach).
    pub fn members_changed(&mut self) {
        self.members += 1;
    }

    /// Starts an offer of its queued messages, up to its page, to its candidates: `ext` (the
    /// local consumers first, `pick.locals` of them, then the bridges with demand: a copy), or
    /// its own attached list when `None`, with `free` the room of all candidates and of the
    /// bridges among them. [`Self::offer_next`] goes on from what this returns.
    #[inline(always)]
    fn offer_start(
        &mut self,
        pick: &Pick,
        ext: Option<&[ConsumerSlot]>,
        free: (u32, u32),
        ctl: &mut Control,
    ) -> Offer {
        if ctl.take_holds_changed(pick.broker) {
            self.members_changed();
        }
        let cands = ext.unwrap_or(&self.attached);
        // Answers are kept only once a strategy has given one: a policy that never holds a
        // message pays nothing for them.
        let room = (pick.keep && !self.waits.head.is_empty())
            .then(|| self.waits.check(cands, self.members));
        Offer {
            i: 0,
            total_free: free.0,
            bridge_free: free.1,
            room,
        }
    }

    /// Offers its queued messages through the strategy's `select`, from where `st` stands, until
    /// one is chosen: it leaves the queue and is returned with where it goes (`None`: the offer
    /// is over). The candidates are `ext`, or its own attached list (`None`), whose room each
    /// choice counts down in place, as the delivery will (`sync_load`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn offer_next(
        &mut self,
        pick: &Pick,
        st: &mut Offer,
        ext: Option<&mut [ConsumerSlot]>,
        slab: &Slab,
        strategy: &mut dyn Strategy,
        ctl: &mut Control,
    ) -> Option<(u32, Handout)> {
        let own = ext.is_none();
        let cands: &mut [ConsumerSlot] = match ext {
            Some(c) => c,
            None => &mut self.attached,
        };
        let locals = pick.locals;
        let keep = pick.keep;
        let Offer {
            i,
            total_free,
            bridge_free,
            room,
        } = st;
        while *total_free > 0 && *i < self.page_size {
            // The messages whose answers still stand, in one pass over what is known.
            if let Some(Some(r)) = *room {
                let skip = self.waits.held_from(*i, self.page_size - *i, r);
                if skip > 0 {
                    *i += skip;
                    continue;
                }
            }
            let Some(&slot) = self.queue.get(*i) else {
                break;
            };
            let view = slab.view(slot);
            // A message that came over a bridge is offered to local consumers only (networkTTL 1).
            let offered = if locals < cands.len() && slab.get(slot).crossed {
                locals
            } else {
                cands.len()
            };
            let ctx = DispatchCtx {
                now: pick.now,
                broker: pick.broker,
                consumers: &cands[..offered],
            };
            match strategy.select(&ctx, view, ctl) {
                Select::Consumer(ci) => {
                    let Some(cand) = cands[..offered].get_mut(ci).filter(|c| c.free > 0) else {
                        // A policy bug must not corrupt the world: hold the message instead.
                        debug_assert!(false, "strategy selected a full or absent consumer");
                        self.waits
                            .learn_in(*i, WAITS_ASK, cands, self.members, room);
                        *i += 1;
                        continue;
                    };
                    cand.free -= 1;
                    *total_free -= 1;
                    if own {
                        self.free_total -= 1;
                    }
                    if cand.free == 0 {
                        if let Some(Some(r)) = room {
                            *r &= !(1 << ci);
                        }
                    }
                    let c = cand.id;
                    if *i == 0 {
                        self.queue.pop_front();
                    } else {
                        self.queue.remove(*i);
                    }
                    if keep {
                        self.waits.removed(*i);
                    }
                    if ci >= locals {
                        *bridge_free -= 1;
                        let peer = (c - pick.bridge_base) as u16;
                        let br = self
                            .bridges
                            .iter()
                            .position(|br| br.peer == peer && br.demand)
                            .expect("offered bridges have demand");
                        return Some((slot, Handout::Bridge(br)));
                    }
                    return Some((slot, Handout::Consumer(c)));
                }
                Select::HoldFor(ci) => {
                    let w = match cands.get(ci) {
                        Some(c) if c.free == 0 && ci < WAITS_MAX_CANDS => ci as u8,
                        // A promise about a candidate with room holds nothing: ask again.
                        _ => WAITS_ASK,
                    };
                    if keep {
                        self.waits.learn_in(*i, w, cands, self.members, room);
                    }
                    *i += 1;
                }
                Select::HoldWhileMembers => {
                    self.waits
                        .learn_in(*i, WAITS_PARKED, cands, self.members, room);
                    *i += 1;
                }
                Select::Hold => {
                    self.waits
                        .learn_in(*i, WAITS_ASK, cands, self.members, room);
                    *i += 1;
                }
                // Only the local consumers were offered: later messages may still go to a bridge.
                Select::Stop if offered < cands.len() && *bridge_free > 0 => {
                    self.waits
                        .learn_in(*i, WAITS_ASK, cands, self.members, room);
                    *i += 1;
                }
                Select::Stop => break,
                Select::Skip => {
                    self.queue.remove(*i);
                    if keep {
                        self.waits.removed(*i);
                    }
                    return Some((slot, Handout::Skip));
                }
            }
        }
        None
    }

    /// Moves a message it gives up on to its dead-letter queue.
    fn dead_letter(&mut self, m: Msg) {
        self.dlq.push(m);
    }

    /// Takes its dead-letter queue, oldest first (a replay).
    fn take_dlq(&mut self) -> Vec<Msg> {
        std::mem::take(&mut self.dlq)
    }
}

/// How many more messages a consumer holding `load` unsettled ones may receive: up to its
/// prefetch, or (taking batches) a whole batch when it holds none and nothing before.
#[inline(always)]
pub(super) fn free_of(load: u32, prefetch: u32, batch: bool) -> u32 {
    if batch {
        if load == 0 {
            prefetch
        } else {
            0
        }
    } else {
        prefetch.saturating_sub(load)
    }
}

impl<O: Observer> Engine<'_, O> {
    /// Whether broker `b`'s attached list has every consumer's free prefetch as its load stands
    /// (for a debug check: `sync_load` was called after every change of load).
    fn free_in_sync(&self, b: u16) -> bool {
        let bs = &self.w.brokers[b as usize];
        bs.attached
            .iter()
            .all(|s| s.free == self.free_prefetch(s.id))
            && bs.attached.iter().map(|s| s.free).sum::<u32>() == bs.free_total
    }

    /// Stores a message at the tail of broker `b`'s queue (a send or a forward arriving).
    #[inline(always)]
    pub(super) fn enqueue_back(&mut self, b: u16, slot: u32) {
        walk!();
        // The message read where it is written: one lookup of the slot.
        let m = self.w.slab.get_mut(slot);
        m.loc = Loc::Queued(b);
        let msg = m.r();
        self.w.brokers[b as usize].store(slot);
        self.emit(Event::Enqueue {
            t: self.now,
            msg,
            broker: b,
        });
    }

    /// Puts the deliveries in `self.w.returned` back in their brokers' queues, in message-id
    /// order (as a broker redispatches unacked messages first, in their original order; with
    /// `requeue = "head"`, ahead of everything queued). Invalid (stale) deliveries are skipped.
    pub(super) fn requeue_returned(&mut self) {
        walk!();
        if self.w.returned.is_empty() {
            return;
        }
        let returned = std::mem::take(&mut self.w.returned);
        let how = PutBack::returned(self.cfg.redelivery.requeue_lost);
        let returned = self.put_back(returned, how);
        self.w.returned = returned;
    }

    /// The one way deliveries go back to their brokers (a consumer gone, a rolled-back window,
    /// an abandoned batch): ordered for `how.at`, each still current (and, with `how.holder`,
    /// still its holder's) put back at once or held for its delay, as `how` says. Returns the
    /// emptied vector for reuse.
    pub(super) fn put_back(&mut self, mut back: Vec<Delivery>, how: PutBack) -> Vec<Delivery> {
        walk!();
        sort_for_put_back(&mut back, how.at);
        for &d in &back {
            self.put_back_one(d, how);
        }
        back.clear();
        back
    }

    /// [`Self::put_back`] of one delivery.
    pub(super) fn put_back_one(&mut self, d: Delivery, how: PutBack) {
        walk!();
        let m = self.w.slab.get(d.slot);
        let current = match how.holder {
            Some(c) => self.w.slab.valid(&d, c),
            None => {
                m.view.id == d.id
                    && matches!(m.loc, Loc::Delivered { delivery, .. } if delivery == d.delivery)
            }
        };
        if !current || (how.live_broker && !self.w.brokers[d.broker as usize].is_up()) {
            return;
        }
        let delay = match how.delay {
            Delay::None => 0,
            Delay::Cancelled => {
                // Not a delivery: its count goes back, and the delay is the one for that count.
                let m = self.w.slab.get_mut(d.slot);
                m.undelivered();
                self.cfg.redelivery.delay(m.deliveries()).0
            }
            Delay::Invisible => self.invisible_for(d.slot, self.w.slab.counted(d.slot)),
        };
        if how.announce {
            let msg = self.w.slab.get(d.slot).r();
            self.emit(Event::Redelivery {
                t: self.now,
                msg,
                delay_us: delay,
                blocking: false,
            });
        }
        if delay == 0 {
            self.requeue_at(d.broker, d.slot, how.at);
        } else {
            self.w.slab.get_mut(d.slot).loc = Loc::Held(d.broker);
            let (slot, id) = (d.slot, d.id);
            let ev = match how.delay {
                Delay::Cancelled => Ev::ReturnDue { slot, id },
                _ => Ev::RedeliveryDue { slot, id },
            };
            self.q.push(self.now + delay, ev);
        }
    }

    /// A message taken back from a consumer is deliverable again at broker `b`: back in its
    /// queue where `[redelivery] requeue` says, and the strategy told. The one requeue of a
    /// rollback, a redelivery delay ending and a lease expiring ([`Self::requeue_at`] for a
    /// consumer leaving and a batch job's rollback).
    #[inline]
    pub(super) fn requeue(&mut self, b: u16, slot: u32) {
        walk!();
        self.requeue_at(b, slot, self.cfg.redelivery.requeue);
    }

    /// [`Self::requeue`] at `at` (a gone consumer's deliveries: `requeue_lost`; a batch job's
    /// rollback: the head).
    pub(super) fn requeue_at(&mut self, b: u16, slot: u32, at: Requeue) {
        walk!();
        self.w.slab.get_mut(slot).loc = Loc::Queued(b);
        self.w.brokers[b as usize].put_back(slot, at, &self.w.slab);
        self.returned_hook(b, slot);
    }

    /// Tells the strategy that the message in `slot` is deliverable again at broker `b`.
    #[inline]
    fn returned_hook(&mut self, b: u16, slot: u32) {
        if !self.hooks.on_returned && !cfg!(debug_assertions) {
            return;
        }
        let view = self.view(slot);
        let before = self.ctl.requests.len();
        self.strategy.on_returned(self.now, b, &view, &mut self.ctl);
        if !self.hooks.on_returned {
            self.skipped_hook_did_nothing(before, "on_returned");
        }
    }

    /// The broker side of a consumer leaving: its unacked deliveries go back to the queue.
    pub(super) fn return_deliveries(&mut self, deliveries: impl IntoIterator<Item = Delivery>) {
        walk!();
        self.w.returned.extend(deliveries);
        self.requeue_returned();
    }

    /// Hands queued messages to consumers with free prefetch, as the strategy's policy decides.
    /// Network bridges toward peers with consumers (`bridge`) are offered after the local
    /// consumers; with `idle_forward` a broker without consumers forwards its store instead.
    // The two cases with nothing to hand out are inlined at the call sites (about one call in
    // two under load: an arrival that finds every consumer full, an ack with the queue empty),
    // so they pay no call frame; `dispatch_some` is the rest.
    #[inline(always)]
    pub(super) fn dispatch(&mut self, b: u16) {
        walk!();
        // Behind effects still waiting (the consumers of an earlier dispatch starting): after
        // them, as the call came after theirs.
        if self.waiting() {
            self.then(Fx::Dispatch(b));
            return;
        }
        let bs = &self.w.brokers[b as usize];
        if !bs.up || bs.queue.is_empty() {
            return;
        }
        if bs.free_total == 0 && bs.bridges.is_empty() && !bs.attached.is_empty() {
            // What `dispatch_some` does when no consumer is free and there is no bridge.
            debug_assert!(self.free_in_sync(b), "stale consumer load");
            self.apply_control();
            return;
        }
        match (bs.bridges.is_empty(), self.plain_dispatch) {
            (true, true) => self.dispatch_some::<false, true>(b),
            (true, false) => self.dispatch_some::<false, false>(b),
            (false, _) => self.dispatch_some::<true, false>(b),
        }
    }

    /// [`Self::dispatch`] past its inlined tests, for a broker with network bridges or not
    /// (`BRIDGES`): without, an instance that knows its candidates are the broker's own list;
    /// and for a plain dispatch or not (`PLAIN`, [`Engine::plain_dispatch`]): an instance
    /// without the tests of the features a plain one does not have.
    #[inline(never)]
    fn dispatch_some<const BRIDGES: bool, const PLAIN: bool>(&mut self, b: u16) {
        debug_assert!(!PLAIN || self.plain_dispatch);
        let bi = b as usize;
        // `dispatch`, its one caller, has tested this.
        debug_assert!(self.w.brokers[bi].up && !self.w.brokers[bi].queue.is_empty());
        let has_bridges = BRIDGES;
        debug_assert_eq!(has_bridges, !self.w.brokers[bi].bridges.is_empty());
        if self.w.brokers[bi].attached.is_empty() && !has_bridges {
            if !self.bridged() {
                self.forward_all(b);
            }
            return;
        }
        let bridge_prefetch = self.sc.network.prefetch;
        debug_assert!(self.free_in_sync(b), "stale consumer load");
        // Most arrivals under load find every consumer full: the broker's running total answers
        // that without looking at a consumer.
        let any_free = {
            let bs = &self.w.brokers[bi];
            bs.free_total > 0
                || (has_bridges
                    && bs
                        .bridges
                        .iter()
                        .any(|br| br.demand && br.in_flight < bridge_prefetch))
        };
        if !any_free {
            self.apply_control();
            return;
        }
        let mut total_free = self.w.brokers[bi].free_total;
        // With bridges, the candidates are a copy that adds them after the local consumers
        // (`cands[..locals]`), counted down by the offer; else the broker's own list, counted
        // down in place as its deliveries will (`sync_load`).
        let mut ext = None;
        let locals = self.w.brokers[bi].attached.len();
        let mut bridge_free = 0u32;
        if has_bridges {
            let mut cands = std::mem::take(&mut self.scratch);
            cands.clear();
            cands.extend_from_slice(&self.w.brokers[bi].attached);
            let base = self.sc.consumers.count;
            for br in self.w.brokers[bi].bridges.iter().filter(|br| br.demand) {
                let free = bridge_prefetch.saturating_sub(br.in_flight);
                bridge_free += free;
                cands.push(ConsumerSlot {
                    id: base + u32::from(br.peer),
                    free,
                });
            }
            total_free += bridge_free;
            ext = Some(cands);
        }
        let pick = Pick {
            broker: b,
            now: self.now,
            locals,
            bridge_base: self.sc.consumers.count,
            keep: !PLAIN && self.hooks.promises,
        };
        // The broker hands each message to its consumer as it chooses it: a delivery changes
        // nothing a later choice sees (the consumer's room was counted down as the delivery
        // leaves it). Except over a bridge, under SQS's redrive on receive (a delivery may be a
        // dead-lettering, which tells the strategy), with batch receives (a consumer's room is a
        // whole batch until the offer ends) and from a skipped message on (its discard tells the
        // strategy): those handouts are carried out after the offer, in the order chosen.
        let mut defer = has_bridges
            || (!PLAIN && (self.cfg.redelivery.redrive_on_receive || self.batch_receive));
        // The consumers that received something, in the order of their first delivery: the
        // first one here (most dispatches hand out to one), the others in `started_scratch`.
        let mut first = None;
        // Nothing below dispatches again (a nested dispatch would share the lists).
        debug_assert!(self.started_scratch.is_empty() && self.handouts.is_empty());
        let mut st = self.w.brokers[bi].offer_start(
            &pick,
            ext.as_deref(),
            (total_free, bridge_free),
            &mut self.ctl,
        );
        loop {
            // What `offer_next` would find first (the broker not looked up again to learn it).
            if st.total_free == 0 {
                break;
            }
            let next = {
                let w = &mut self.w;
                w.brokers[bi].offer_next(
                    &pick,
                    &mut st,
                    ext.as_deref_mut(),
                    &w.slab,
                    &mut *self.strategy,
                    &mut self.ctl,
                )
            };
            let Some((slot, to)) = next else {
                break;
            };
            match to {
                Handout::Consumer(c) if !defer => {
                    self.handed_to(&mut first, c);
                    // Its room in the broker's list is already what the delivery leaves.
                    self.deliver::<PLAIN>(b, c, slot, true);
                }
                _ => {
                    defer = true;
                    self.handouts.push((slot, to));
                }
            }
        }
        if let Some(cands) = ext {
            self.scratch = cands;
        }
        if !self.handouts.is_empty() {
            let mut out = std::mem::take(&mut self.handouts);
            for &(slot, to) in &out {
                match to {
                    Handout::Bridge(br) => self.bridge_take(b, br, slot),
                    Handout::Skip => self.skip(slot),
                    Handout::Consumer(c) => {
                        self.handed_to(&mut first, c);
                        self.deliver::<PLAIN>(b, c, slot, false);
                    }
                }
            }
            out.clear();
            self.handouts = out;
        }
        debug_assert!(
            self.free_in_sync(b),
            "an offer's count-down left a stale load"
        );
        // Only the consumers that received something may have work to start: each does, after
        // this step (the router), then the strategy's requests. The last start and the
        // strategy's requests (from `select`, and whatever the starts leave) are one step.
        let Some(f) = first else {
            self.apply_control();
            return;
        };
        let n = self.started_scratch.len();
        if n == 0 && (PLAIN || !self.poll_hook) {
            // Most dispatches hand out to one consumer: its start and the strategy's requests.
            // (The loop below does the same for n = 0; skipping it saved 3.8 M instructions on
            // mmc, and a loop over the others first, then the last, without this case, measured
            // 1-2% more wall time, 2026-12-05.)
            self.then(Fx::StartThenApply(f));
            return;
        }
        for i in 0..=n {
            let c = if i == 0 {
                f
            } else {
                self.started_scratch[i - 1]
            };
            if !PLAIN && self.poll_hook {
                self.then(Fx::Polled(c));
            }
            self.then(if i == n {
                Fx::StartThenApply(c)
            } else {
                Fx::StartNext(c)
            });
        }
        self.started_scratch.clear();
    }

    /// Consumer `c` received a message in this dispatch: `first`, or one of `started_scratch`.
    #[inline(always)]
    fn handed_to(&mut self, first: &mut Option<u32>, c: u32) {
        match *first {
            None => *first = Some(c),
            Some(f) if f != c && !self.started_scratch.contains(&c) => {
                self.started_scratch.push(c);
            }
            Some(_) => {}
        }
    }

    /// The message leaves the broker for good: acked or dead-lettered.
    #[inline(always)]
    pub(super) fn settle(&mut self, slot: u32) {
        walk!();
        // The view is built only for the hook: a strategy without it pays nothing for it (the
        // slot's contents stay as they are until the slot is taken again).
        // Released first: the slot is looked up once for both (what `drop_held` may emit reads
        // nothing of the slab).
        let id = self.w.slab.release(slot);
        self.drop_held(id);
        if self.hooks.on_settled {
            let view = self.view(slot);
            self.strategy.on_settled(self.now, &view, &mut self.ctl);
        } else if cfg!(debug_assertions) {
            let view = self.view(slot);
            let before = self.ctl.requests.len();
            self.strategy.on_settled(self.now, &view, &mut self.ctl);
            self.skipped_hook_did_nothing(before, "on_settled");
        }
    }

    /// The strategy skipped the queued message in `slot` ([`Select::Skip`]: its group's
    /// position was set past it): nobody will read it, so it is lost, and gone from the broker.
    #[cold]
    #[inline(never)]
    fn skip(&mut self, slot: u32) {
        let msg = self.msg_ref(slot);
        self.emit(Event::Discard {
            t: self.now,
            msg,
            reason: DiscardReason::OffsetReset,
        });
        self.settle(slot);
    }

    /// The broker's copy of message `id` is gone for good: if the strategy had taken it over and
    /// then dropped it, it is lost now.
    // The test inlined (once per settled message, nearly always nothing held); the rest out of
    // line.
    #[inline(always)]
    pub(super) fn drop_held(&mut self, id: u64) {
        walk!();
        if !self.w.held.is_empty() {
            self.drop_held_slow(id);
        }
    }

    /// [`Self::drop_held`] past its test.
    #[inline(never)]
    fn drop_held_slow(&mut self, id: u64) {
        if self.w.held.get(&id).is_some_and(|h| h.dropped) {
            let h = self.w.held.remove(&id).expect("present");
            self.emit(Event::Discard {
                t: self.now,
                msg: h.msg,
                reason: DiscardReason::BufferLost,
            });
        }
    }

    /// Broker `b` gives up on a message (the redelivery limit): it moves it to its dead-letter
    /// queue or deletes it, as the policy says for this broker.
    pub(super) fn give_up(&mut self, b: u16, slot: u32) {
        walk!();
        let msg = self.msg_ref(slot);
        self.w.held.remove(&msg.id);
        let t = self.now;
        match self
            .cfg
            .redelivery
            .dead_letter(&self.sc.brokers[b as usize])
        {
            DeadLetter::Queue => {
                self.emit(Event::DeadLetter { t, msg, broker: b });
                let m = *self.w.slab.get(slot);
                self.w.brokers[b as usize].dead_letter(m);
            }
            DeadLetter::Drop => self.emit(Event::Drop { t, msg, broker: b }),
        }
        self.settle(slot);
    }

    /// An operator moves broker `b`'s dead-letter queue back to the tail of its queue, oldest
    /// first: each message is new to the broker (its delivery count starts again) and keeps its
    /// hidden poison flag. A broker that is down cannot be asked.
    pub(super) fn dlq_replay(&mut self, b: u16) {
        walk!();
        if !self.w.brokers[b as usize].up || self.w.brokers[b as usize].dlq.is_empty() {
            return;
        }
        let dlq = self.w.brokers[b as usize].take_dlq();
        for m in dlq {
            self.emit(Event::Replay {
                t: self.now,
                msg: m.r(),
                broker: b,
                poison: m.poison,
            });
            let slot = self.alloc(m.fresh_copy(m.view.id, Loc::Queued(b)));
            self.enqueue_back(b, slot);
        }
        self.dispatch(b);
    }

    /// How long the failed delivery of the message in `slot` (its `deliveries`-th) stays
    /// undeliverable: the policy's delay from the failure, or, with `until_lease_end` (SQS), what
    /// is left of its lease: the visibility timeout runs from the receive (or the last
    /// `ChangeMessageVisibility`), not from the failure [Q4][Q8].
    pub(super) fn invisible_for(&self, slot: u32, deliveries: u32) -> u64 {
        walk!();
        let r = &self.cfg.redelivery;
        if r.until_lease_end {
            self.w.slab.get(slot).lease_due.saturating_sub(self.now)
        } else {
            r.delay(deliveries).0
        }
    }

    /// Whether brokers are joined by demand-forwarding bridges.
    #[inline]
    pub(super) fn bridged(&self) -> bool {
        walk!();
        self.sc.network.kind == NetworkKind::Bridge
    }

    /// A delivery of the message in `slot` was just made: its lease starts.
    #[inline]
    pub(super) fn lease_start(&mut self, slot: u32, id: u64) {
        walk!();
        if let Some(l) = self.cfg.lease {
            let due = self.now + l.duration.0;
            let m = self.w.slab.get_mut(slot);
            m.lease_due = due;
            m.leased_at = self.now;
            self.q.push(due, Ev::LeaseExpire { slot, id });
        }
    }

    /// Consumer `c`'s ack (delete) of `d` reached a broker that no longer counts the delivery as
    /// its: with leases, the broker refuses it (recorded); else the connection it came over is
    /// gone and the ack with it.
    #[cold]
    #[inline(never)]
    pub(super) fn ack_refused(&mut self, c: u32, d: Delivery, msg: MsgRef) {
        walk!();
        let connected = self.w.consumers[c as usize].connected_to() == Some(d.broker);
        if self.cfg.lease.is_some() && connected && self.w.brokers[d.broker as usize].is_up() {
            self.emit(Event::AckFail {
                t: self.now,
                msg,
                consumer: c,
            });
        }
    }

    /// Broker `b` pushes a message to consumer `c`.
    // Inlined into dispatch's two call sites. `counted`: the broker's list already holds the
    // consumer's room after this delivery (the offer counted it down in place). `PLAIN`: a
    // plain dispatch's ([`Engine::plain_dispatch`]), without transit or redrive on receive.
    #[inline(always)]
    pub(super) fn deliver<const PLAIN: bool>(&mut self, b: u16, c: u32, slot: u32, counted: bool) {
        walk!();
        if PLAIN {
            debug_assert!(self.w.brokers[b as usize].transit.is_none());
        } else if let Some(delay) = self.w.brokers[b as usize].transit_delay() {
            // No later delivery overtakes it: the consumer takes its buffer in order, and only
            // the front's arrival gates the start (`start_one`).
            self.w.slab.get_mut(slot).arrives = self.now + delay;
        }
        self.hand_over::<PLAIN>(b, c, slot, false, counted);
    }

    /// The receive that would exceed `maxReceiveCount` moves the message in `slot` to the
    /// dead-letter queue instead; the broker receives again at this instant (the rest of its
    /// group may go now), as a long-polling receive returns what else is there.
    #[cold]
    #[inline(never)]
    fn redrive_on_receive(&mut self, b: u16, slot: u32) {
        self.give_up(b, slot);
        self.q.push(self.now, Ev::Dispatch(b));
    }

    /// Message `slot` of broker `b` is delivered to consumer `c` (one more delivery): into its
    /// buffer's back (a dispatch), or its front (a blocking redelivery, which the client makes
    /// to itself ahead of what it prefetched). The one place a delivery is made.
    /// `counted`: the broker's copy of the consumer's room already is what this delivery
    /// leaves (no `sync_load`). `PLAIN`: no redrive on receive ([`Engine::plain_dispatch`]).
    #[inline(always)]
    pub(super) fn hand_over<const PLAIN: bool>(
        &mut self,
        b: u16,
        c: u32,
        slot: u32,
        front: bool,
        counted: bool,
    ) {
        walk!();
        let m = self.w.slab.get_mut(slot);
        // SQS's redrive policy acts on the receive that would exceed `maxReceiveCount` [Q3].
        let r = &self.cfg.redelivery;
        if !PLAIN && r.redrive_on_receive && r.gives_up(m.deliveries()) {
            // Not delivered: the consumer's room, counted down by the offer, is as it was.
            self.sync_load(c);
            self.redrive_on_receive(b, slot);
            return;
        }
        let delivery = m.delivered();
        m.loc = Loc::Delivered {
            broker: b,
            consumer: c,
            delivery,
        };
        let (msg, id) = (m.r(), m.view.id);
        self.emit(Event::Dispatch {
            t: self.now,
            msg,
            broker: b,
            consumer: c,
            delivery,
            redelivered: delivery > 1,
        });
        let d = Delivery {
            slot,
            id,
            delivery,
            broker: b,
        };
        self.w.consumers[c as usize].receive(d, front);
        if counted {
            debug_assert!(self.load_in_sync(c), "the offer's count-down of {c}'s room");
        } else {
            self.sync_load(c);
        }
        self.lease_start(slot, id);
    }

    /// A message from a producer reaches broker `b`: stored at its tail, then handed out if a
    /// consumer has room.
    #[inline(always)]
    pub(super) fn accept(&mut self, b: u16, slot: u32) {
        walk!();
        // A producer sending several in a row (a retry, a flush after a reconnect): what the
        // last one set off is over before this one is stored, as it was when calls nested.
        self.flush();
        self.enqueue_back(b, slot);
        self.dispatch(b);
    }

    /// Store-and-forward (`idle_forward`): moves the whole queue toward the first peer that is up
    /// and has consumers.
    pub(super) fn forward_all(&mut self, from: u16) {
        walk!();
        let Some(to) = (0..self.w.brokers.len() as u16).find(|&p| {
            p != from
                && self.w.brokers[p as usize].is_up()
                && !self.w.brokers[p as usize].attached().is_empty()
        }) else {
            return;
        };
        let at = self.now + self.sc.network.forward_delay.0;
        while let Some(slot) = self.w.brokers[from as usize].take_first() {
            self.send_over(from, to, slot, at);
        }
    }

    /// Puts a message on its way from `from` to `to`, arriving at `at`.
    fn send_over(&mut self, from: u16, to: u16, slot: u32, at: u64) {
        let m = self.w.slab.get_mut(slot);
        m.loc = Loc::Forwarding {
            from,
            to,
            due: at as u32,
            orphan: false,
        };
        let (msg, id) = (m.r(), m.view.id);
        self.emit(Event::Forward {
            t: self.now,
            msg,
            from,
            to,
        });
        self.q.push(at, Ev::ForwardArrive { slot, id });
    }

    /// The bridge `bridge` of broker `from` takes the message at `slot` (already out of the queue).
    /// It reaches the bridge's local consumer after a draw of `from`'s `dispatch_latency` (the
    /// bridge is one of its consumers), not before the bridge's previous take, and goes on the
    /// wire then.
    pub(super) fn bridge_take(&mut self, from: u16, bridge: usize, slot: u32) {
        walk!();
        let transit = self.w.brokers[from as usize].transit_delay().unwrap_or(0);
        let br = &mut self.w.brokers[from as usize].bridges_mut()[bridge];
        br.in_flight += 1;
        br.sent = br.sent.max(self.now + transit);
        let (to, sent) = (br.peer, br.sent);
        let at = sent + self.sc.network.forward_delay.0;
        // When it reaches the bridge and goes on the wire: a crash of `from` before strands it.
        self.w.slab.get_mut(slot).arrives = sent;
        self.send_over(from, to, slot, at);
    }

    /// The deliveries of the message in `slot`, whose current one failed, that count against
    /// the redelivery limit once it is returned: a failure returned without counting (a
    /// RabbitMQ 4.3 quorum queue's `basic.nack`, `count_failed = false`) leaves the count where
    /// it was, so the limit reads the deliveries that failed otherwise (a consumer's death).
    /// Every path of a failure (a listener's, a batch job's) asks here, and records the return
    /// with [`Engine::returned_failed`] when the message goes back.
    pub(super) fn failed_deliveries(&self, slot: u32) -> u32 {
        walk!();
        let counted = self.w.slab.counted(slot);
        counted.saturating_sub(u32::from(!self.cfg.redelivery.count_failed))
    }

    /// The failed delivery of the message in `slot` went back to the broker: one the broker
    /// does not count is left out of its count from now on ([`Engine::failed_deliveries`]).
    pub(super) fn returned_failed(&mut self, slot: u32) {
        walk!();
        if !self.cfg.redelivery.count_failed {
            self.w.slab.uncount(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(free: &[u32]) -> Vec<ConsumerSlot> {
        free.iter()
            .enumerate()
            .map(|(i, &free)| ConsumerSlot { id: i as u32, free })
            .collect()
    }

    /// The head's answers follow the queue through removals and insertions, and a message is
    /// skipped only while the candidate it waits for has no room.
    #[test]
    fn waits_follow_the_queue_and_the_room() {
        let mut w = Waits::default();
        let full = slots(&[0, 0, 3]);
        let room = w.check(&full, 0).expect("few candidates");
        assert_eq!(room, 0b100);
        // Positions 0..4: waiting for 0, for 1, parked, ask.
        for (i, a) in [0, 1, WAITS_PARKED, WAITS_ASK].into_iter().enumerate() {
            w.learn(i, a);
        }
        assert_eq!(
            w.held_from(0, 10, room),
            3,
            "stops at the message to ask about"
        );
        assert_eq!(w.held_from(0, 2, room), 2, "not beyond the page");
        w.removed(3);
        assert_eq!(
            w.held_from(0, 10, room),
            3,
            "nothing to ask about: all of it"
        );
        // Candidate 1 has room: its message is asked about again.
        assert_eq!(w.held_from(0, 10, 0b110), 1);
        // A message put in front is asked about; the others keep their answers.
        w.inserted(0);
        assert_eq!(w.held_from(0, 10, room), 0);
        assert_eq!(w.held_from(1, 10, room), 3);
        w.removed(0);
        w.removed(0);
        assert_eq!(w.head, [1, WAITS_PARKED]);
        assert_eq!((w.waiting[0], w.waiting[1], w.asks), (0, 1, 0));
        // Other candidates, or a membership change: everything is forgotten.
        assert!(w.check(&slots(&[0, 0]), 0).is_some());
        assert!(w.head.is_empty());
        w.learn(0, 1);
        assert!(w.check(&slots(&[0, 0]), 1).is_some());
        assert!(w.head.is_empty());
        // A promise beyond what is known: the messages before it are asked about; an ask
        // beyond it is not kept.
        w.forget();
        w.learn(2, 1);
        w.learn(3, WAITS_ASK);
        assert_eq!(w.head, [WAITS_ASK, WAITS_ASK, 1]);
        assert_eq!((w.asks, w.waiting[1]), (2, 1));
        assert_eq!(w.held_from(2, 10, 0), 1);
        // Too many candidates for a room mask: no answers kept.
        assert_eq!(w.check(&slots(&[0; 64]), 1), None);
        assert_eq!(bits(0b1010_0001).collect::<Vec<_>>(), [0, 5, 7]);
    }
}
