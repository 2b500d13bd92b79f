//! The pending-event set: a binary min-heap on (time, insertion number), so events at the same
//! instant run in the order they were scheduled. Deterministic by construction.

use crate::time::Time;

#[derive(Clone, Copy)]
struct Entry<E> {
    /// (time << 64 | insertion number) packed in one integer: a single comparison per heap step.
    key: u128,
    ev: E,
}

/// A queue of events of type `E` ordered by time, ties by insertion order.
///
/// A binary min-heap written out here rather than `std::collections::BinaryHeap`: its `pop` sifts
/// the last element all the way down and back up, which costs more than an early-stopping sift on
/// the small heaps of this engine; events are `Copy`, so moves are plain copies. Keys are unique,
/// so any correct heap pops the same sequence.
pub struct EventQueue<E: Copy> {
    heap: Vec<Entry<E>>,
    next: u64,
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: Vec::with_capacity(1024),
            next: 0,
        }
    }

    /// Schedules `ev` at `time`.
    #[inline]
    pub fn push(&mut self, time: Time, ev: E) {
        let key = ((time as u128) << 64) | self.next as u128;
        self.next += 1;
        let new = Entry { key, ev };
        let h = &mut self.heap;
        let mut i = h.len();
        h.push(new);
        while i > 0 {
            let parent = (i - 1) / 2;
            if h[parent].key <= key {
                break;
            }
            h[i] = h[parent];
            i = parent;
        }
        h[i] = new;
    }

    /// The earliest event and its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let h = &mut self.heap;
        let last = h.pop()?;
        let n = h.len();
        if n == 0 {
            return Some(((last.key >> 64) as Time, last.ev));
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
            let c = if r < n && h[r].key < h[l].key { r } else { l };
            if last.key <= h[c].key {
                break;
            }
            h[i] = h[c];
            i = c;
        }
        h[i] = last;
        Some(((top.key >> 64) as Time, top.ev))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

impl<E: Copy> Default for EventQueue<E> {
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
}
