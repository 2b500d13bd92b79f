//! The pending-event set: a binary min-heap on (time, insertion number), so events at the same
//! instant run in the order they were scheduled. Deterministic by construction.

use crate::time::Time;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    /// (time << 64 | insertion number) packed in one integer: a single comparison per heap step.
    key: u128,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key) // reversed: BinaryHeap is a max-heap
    }
}

/// A queue of events of type `E` ordered by time, ties by insertion order.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next: u64,
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            next: 0,
        }
    }

    /// Schedules `ev` at `time`.
    #[inline]
    pub fn push(&mut self, time: Time, ev: E) {
        let key = ((time as u128) << 64) | self.next as u128;
        self.next += 1;
        self.heap.push(Entry { key, ev });
    }

    /// The earliest event and its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.heap.pop().map(|e| ((e.key >> 64) as Time, e.ev))
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

impl<E> Default for EventQueue<E> {
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
}
