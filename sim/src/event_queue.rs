//! The pending-event set, ordered by (time, insertion number), so events at the same instant run
//! in the order they were scheduled. Deterministic by construction: keys are unique, so any
//! correct priority queue pops the same sequence.

use crate::time::Time;

#[derive(Clone, Copy)]
struct Entry<E> {
    time: Time,
    /// Insertion number: unique, so (time, seq) orders every pair of entries.
    seq: u64,
    ev: E,
}

impl<E> Entry<E> {
    /// Whether `self` comes before `other`.
    #[inline(always)]
    fn before(&self, other: &Self) -> bool {
        (self.time, self.seq) < (other.time, other.seq)
    }
}

/// While at most this many events are pending, they are kept sorted; above it, in a heap.
const SORTED_MAX: usize = 16;
/// A heap that shrinks to this many events is sorted again (below `SORTED_MAX`, so a queue whose
/// length hovers around one bound does not switch at every event).
const SORTED_AGAIN: usize = 8;

/// A queue of events of type `E` ordered by time, ties by insertion order.
///
/// The engine usually has a few events pending (one per busy consumer, the next arrival, a few
/// timers): then they are kept in a small array sorted latest first, so `pop` takes the last
/// one and `push` is an insertion-sort step from the end, which on a few entries costs less than
/// a heap's sift-down per pop. A sorted entry needs no insertion number: an event goes before
/// (nearer the end than) none of those of its time already there, so ties keep their order by
/// position.
/// Past [`SORTED_MAX`] pending events, they move to a binary min-heap (an ascending array is
/// one, so switching is a reversal, the positions giving the insertion numbers) with an
/// early-stopping sift, written out here rather than `std::collections::BinaryHeap`, whose `pop`
/// sifts the last element all the way down and back up. Events are `Copy`, so moves are plain
/// copies; their `Default` only fills the array's unused slots.
pub struct EventQueue<E: Copy + Default> {
    /// While the queue is sorted: (time, event) by time descending, the earliest last, ties the
    /// first scheduled last, in `sorted[..n]`. An array rather than a `Vec`: no capacity test
    /// per push, and no bounds test in the insertion step (measured 2026-12-05). Its last slot,
    /// `sorted[SORTED_MAX]`, is where the heap puts the event it pops ([`Self::pop`]).
    sorted: [(Time, E); SORTED_MAX + 1],
    /// How many of `sorted` are events.
    n: usize,
    /// Otherwise: a min-heap by (time, insertion number).
    heap: Vec<Entry<E>>,
    /// The events are in `heap` (never empty then; `sorted` is), not `sorted` (then `heap` is
    /// empty). Derivable from the heap's length, but kept: testing the length instead measured
    /// 0.4 M more instructions on mmc at 200,000 messages (2026-12-05).
    in_heap: bool,
    /// The insertion number of the next event pushed to the heap: larger than every one there.
    next: u64,
}

impl<E: Copy + Default> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            sorted: [(0, E::default()); SORTED_MAX + 1],
            n: 0,
            heap: Vec::new(),
            in_heap: false,
            next: 0,
        }
    }

    /// Schedules `ev` at `time`.
    #[inline]
    pub fn push(&mut self, time: Time, ev: E) {
        self.push_inline(time, ev);
    }

    /// [`Self::push`], its sorted case inlined at the call site: for the engine's two pushes per
    /// message (the next arrival, a service's end), where the call frame (its registers saved
    /// for the heap's case) cost 4.3 M instructions on mmc at 200,000 messages, with no change
    /// in wall time (2026-12-05). The heap's case is out of line.
    // The new event comes after every pending one whose time is not later than `time`: the
    // steps of `push` compare times only.
    #[inline(always)]
    pub fn push_inline(&mut self, time: Time, ev: E) {
        if !self.in_heap {
            let n = self.n;
            if n < SORTED_MAX {
                // Shift the earlier entries one place towards the end, then put `new` before them.
                let v = &mut self.sorted;
                let mut i = n;
                while i > 0 && v[i - 1].0 <= time {
                    v[i] = v[i - 1];
                    i -= 1;
                }
                v[i] = (time, ev);
                self.n = n + 1;
                return;
            }
        }
        self.push_to_heap(time, ev);
    }

    /// [`Self::push`] once the sorted events are too many (or already a heap).
    #[inline(never)]
    fn push_to_heap(&mut self, time: Time, ev: E) {
        if !self.in_heap {
            self.switch_to_heap();
        }
        let seq = self.next;
        self.next += 1;
        let new = Entry { time, seq, ev };
        let v = &mut self.heap;
        let mut i = v.len();
        v.push(new);
        while i > 0 {
            let parent = (i - 1) / 2;
            if v[parent].time <= time {
                break;
            }
            v[i] = v[parent];
            i = parent;
        }
        v[i] = new;
    }

    /// Moves the sorted events to the heap: ascending order is a valid min-heap, and a sorted
    /// event's insertion number is its rank among those pending (ties are in insertion order).
    #[cold]
    #[inline(never)]
    fn switch_to_heap(&mut self) {
        let base = self.next;
        let n = self.n as u64;
        self.heap.clear();
        self.heap.extend(
            self.sorted[..self.n]
                .iter()
                .copied()
                .rev()
                .zip(base..)
                .map(|((time, ev), seq)| Entry { time, seq, ev }),
        );
        self.next = base + n;
        self.n = 0;
        self.in_heap = true;
    }

    /// The earliest event and its time.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        (!self.is_empty()).then(|| self.pop_pending())
    }

    /// [`Self::pop`] for a queue that is not empty, without the `Option`: the engine's loop
    /// tests [`Self::is_empty`] first (through the `Option`, it tested the event's tag again
    /// after the pop, 2 instructions per event, 2026-12-06).
    // Always inlined (the engine's loop is its one caller): the sorted case takes the last entry,
    // cheaper than the call frame it used to pay; the heap's case is out of line.
    // Both cases return the event from a slot of `sorted`: when the heap's case returned it
    // itself, both went through a copy on the stack, which cost the loop 12 instructions per
    // event (mmc, 2026-12-06).
    #[inline(always)]
    pub fn pop_pending(&mut self) -> (Time, E) {
        debug_assert!(!self.is_empty());
        let i = if !self.in_heap {
            self.n -= 1;
            self.n
        } else {
            let popped = self.pop_from_heap();
            debug_assert!(popped);
            SORTED_MAX
        };
        self.sorted[i]
    }

    /// [`Self::pop`] while the queue is a heap: the earliest event goes to `sorted[SORTED_MAX]`
    /// (false: none).
    #[inline(never)]
    fn pop_from_heap(&mut self) -> bool {
        let Some(top) = self.heap_pop() else {
            return false;
        };
        self.sorted[SORTED_MAX] = (top.time, top.ev);
        if self.heap.len() <= SORTED_AGAIN {
            self.heap
                .sort_unstable_by_key(|e| std::cmp::Reverse((e.time, e.seq)));
            self.n = self.heap.len();
            for (to, e) in self.sorted.iter_mut().zip(self.heap.drain(..)) {
                *to = (e.time, e.ev);
            }
            self.in_heap = false;
        }
        true
    }

    /// Removes the heap's root.
    #[inline]
    fn heap_pop(&mut self) -> Option<Entry<E>> {
        let h = &mut self.heap;
        let last = h.pop()?;
        let n = h.len();
        if n == 0 {
            return Some(last);
        }
        let top = h[0];
        // Sift `last` down from the root, stopping as soon as it is not larger than a child.
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && h[r].before(&h[l]) { r } else { l };
            if !h[c].before(&last) {
                break;
            }
            h[i] = h[c];
            i = c;
        }
        h[i] = last;
        Some(top)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        if self.in_heap {
            self.heap.len()
        } else {
            self.n
        }
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
impl<E: Copy + Default> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(5, 'a');
        q.push(1, 'b');
        q.push(5, 'c');
        q.push(1, 'd');
        let out: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(out, vec![(1, 'b'), (1, 'd'), (5, 'a'), (5, 'c')]);
    }

    /// Against a sorted reference: many ties, interleaved pushes and pops.
    #[test]
    fn matches_a_sorted_reference() {
        use rand::Rng;
        let mut rng = crate::rng::stream(9, crate::rng::Component::Strategy, 0, 0);
        let mut q = EventQueue::new();
        let mut reference: Vec<(Time, u64)> = Vec::new();
        let mut n = 0u64;
        for _ in 0..20_000 {
            if rng.random_bool(0.55) {
                let t = rng.random_range(0..50u64);
                q.push(t, n);
                reference.push((t, n));
                n += 1;
            } else {
                reference.sort();
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                assert_eq!(q.pop(), want);
            }
            assert_eq!(q.len(), reference.len());
        }
    }

    /// Against a sorted reference, in bursts that grow the queue past the sorted bound into a
    /// heap and shrink it back, many times.
    #[test]
    fn switching_between_sorted_and_heap_keeps_the_order() {
        use rand::Rng;
        let mut rng = crate::rng::stream(11, crate::rng::Component::Strategy, 0, 0);
        let mut q = EventQueue::new();
        let mut reference: Vec<(Time, u64)> = Vec::new();
        let (mut n, mut now, mut heaps, mut sorts) = (0u64, 0u64, 0, 0);
        for round in 0..400 {
            let burst = rng.random_range(0..3 * SORTED_MAX);
            for _ in 0..burst {
                let t = now + rng.random_range(0..20u64);
                q.push(t, n);
                reference.push((t, n));
                n += 1;
            }
            heaps += usize::from(q.in_heap);
            let pops = if round % 2 == 0 { burst / 2 } else { 2 * burst };
            for _ in 0..pops {
                reference.sort();
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                let got = q.pop();
                assert_eq!(got, want);
                if let Some((t, _)) = got {
                    now = t;
                }
            }
            sorts += usize::from(!q.in_heap && !q.is_empty());
            assert_eq!(q.len(), reference.len());
        }
        assert!(
            heaps > 10 && sorts > 10,
            "{heaps} heap rounds, {sorts} sorted rounds"
        );
    }
}
