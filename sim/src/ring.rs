//! [`Ring`]: the engine's and the checkers' double-ended queue of small `Copy` values (a
//! broker's queue of message slots, a consumer's buffer of deliveries, a key's window of
//! records), in a buffer whose capacity is a power of two.
//!
//! Why not `std::collections::VecDeque`: its capacity is any number, so each access wraps its
//! index with a compare and a subtract and reads the capacity through its allocation; here a
//! wrap is one `and` with a mask. On the benchmark model these three queues take several
//! accesses per message, and `VecDeque`'s inlined code measured 153 instructions per message
//! (callgrind, `scenarios/bench/mmc.toml`, 2026-12-05). Every slot of the buffer always holds
//! a value (a copy of the value that made it grow fills the new ones), so there is nothing
//! uninitialised to track. The hot accesses (push, pop, `get`) index the buffer unchecked
//! (`Ring::slot`): the one `unsafe` of the simulator (the live twin's system calls aside),
//! whose invariant (a non-empty buffer's length is `mask + 1`, so `i & mask` is in bounds)
//! debug builds assert at each access and the property test below checks against `VecDeque`.
//! The bounds tests it left out cost 5.5 M instructions on `mmc.toml` at 200,000 messages;
//! its wall time was 0.99-1.00 of before in paired series (2026-12-06).

use std::fmt;

/// A double-ended queue of `Copy` values, growing by doubling (never shrinking), with the
/// subset of `VecDeque`'s interface the engine uses.
#[derive(Clone)]
pub struct Ring<T: Copy> {
    /// Every slot holds a value; its length, the capacity, is 0 or a power of two.
    buf: Vec<T>,
    /// Where the front is.
    head: usize,
    /// How many values are queued, from `head` on (wrapping).
    len: usize,
    /// The capacity less one (a mask of the index bits), kept: derived from the buffer's length
    /// at every access, it measured more instructions.
    mask: usize,
}

impl<T: Copy> Ring<T> {
    /// An empty ring; nothing is allocated until the first push.
    pub const fn new() -> Self {
        Ring {
            buf: Vec::new(),
            head: 0,
            len: 0,
            mask: 0,
        }
    }

    /// How many values are queued.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer index of the `i`th value from the front (`i` at most the capacity).
    #[inline(always)]
    fn at(&self, i: usize) -> usize {
        (self.head + i) & self.mask
    }

    /// The value at buffer index `i & mask`.
    #[inline(always)]
    fn slot(&self, i: usize) -> &T {
        let j = i & self.mask;
        debug_assert!(j < self.buf.len(), "a ring's index past its buffer");
        // SAFETY: called only while the buffer is not empty (a value is queued, or a push has
        // just grown it), and then its length is `mask + 1`: `j <= mask` is in bounds.
        unsafe { self.buf.get_unchecked(j) }
    }

    /// [`Self::slot`], to change.
    #[inline(always)]
    fn slot_mut(&mut self, i: usize) -> &mut T {
        let j = i & self.mask;
        debug_assert!(j < self.buf.len(), "a ring's index past its buffer");
        // SAFETY: as in `slot`.
        unsafe { self.buf.get_unchecked_mut(j) }
    }

    /// Doubles the capacity (to 4 from none), keeping the order; `fill` fills the new slots.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, fill: T) {
        let cap = (self.buf.len() * 2).max(4);
        let mut buf = Vec::with_capacity(cap);
        buf.extend(self.iter().copied());
        buf.resize(cap, fill);
        self.buf = buf;
        self.head = 0;
        self.mask = cap - 1;
    }

    /// Queues `v` at the back.
    #[inline(always)]
    pub fn push_back(&mut self, v: T) {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        *self.slot_mut(self.head + self.len) = v;
        self.len += 1;
    }

    /// Queues `v` at the front.
    #[inline]
    pub fn push_front(&mut self, v: T) {
        if self.len == self.buf.len() {
            self.grow(v);
        }
        self.head = self.at(self.mask);
        *self.slot_mut(self.head) = v;
        self.len += 1;
    }

    /// Takes the front value.
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = *self.slot(self.head);
        self.head = self.at(1);
        self.len -= 1;
        Some(v)
    }

    /// The front value.
    #[inline(always)]
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The `i`th value from the front.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i < self.len {
            Some(self.slot(self.head + i))
        } else {
            None
        }
    }

    /// The `i`th value from the front, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            Some(self.slot_mut(self.head + i))
        } else {
            None
        }
    }

    /// Takes the `i`th value from the front out, moving the shorter side of the rest one place
    /// (the others keep their order).
    pub fn remove(&mut self, i: usize) -> Option<T> {
        let v = *self.get(i)?;
        if i < self.len / 2 {
            for j in (0..i).rev() {
                let (from, to) = (self.at(j), self.at(j + 1));
                self.buf[to] = self.buf[from];
            }
            self.head = self.at(1);
        } else {
            for j in i..self.len - 1 {
                let (from, to) = (self.at(j + 1), self.at(j));
                self.buf[to] = self.buf[from];
            }
        }
        self.len -= 1;
        Some(v)
    }

    /// Puts `v` in as the `i`th value from the front (`i` at most the length), moving the rest
    /// behind it one place back.
    ///
    /// # Panics
    /// When `i` is past the length, as `VecDeque::insert` does.
    pub fn insert(&mut self, i: usize, v: T) {
        assert!(i <= self.len, "insert at {i} past a length of {}", self.len);
        self.push_back(v);
        for j in (i..self.len - 1).rev() {
            let (from, to) = (self.at(j), self.at(j + 1));
            self.buf[to] = self.buf[from];
        }
        let at = self.at(i);
        self.buf[at] = v;
    }

    /// Empties it, keeping the buffer.
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Keeps only the values `keep` accepts, in their order.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = 0;
        for i in 0..self.len {
            let v = self.buf[self.at(i)];
            if keep(&v) {
                let to = self.at(kept);
                self.buf[to] = v;
                kept += 1;
            }
        }
        self.len = kept;
    }

    /// Moves every value of `other` to its back, in order, leaving `other` empty.
    pub fn append(&mut self, other: &mut Ring<T>) {
        self.extend(other.iter().copied());
        other.clear();
    }

    /// Takes every value out, front first, leaving it empty (and without its buffer).
    pub fn take_all(&mut self) -> IntoIter<T> {
        std::mem::take(self).into_iter()
    }

    /// The values, front first.
    #[inline]
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator + Clone + '_ {
        (0..self.len).map(move |i| &self.buf[self.at(i)])
    }
}

impl<T: Copy> Default for Ring<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy> Extend<T> for Ring<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for v in iter {
            self.push_back(v);
        }
    }
}

impl<T: Copy> FromIterator<T> for Ring<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut r = Ring::new();
        r.extend(iter);
        r
    }
}

impl<T: Copy> IntoIterator for Ring<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter(self)
    }
}

/// The values of a [`Ring`], taken front first ([`Ring::into_iter`], [`Ring::take_all`]).
pub struct IntoIter<T: Copy>(Ring<T>);

impl<T: Copy> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.0.pop_front()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.0.len, Some(self.0.len))
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Copy + PartialEq> PartialEq for Ring<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<T: Copy + Eq> Eq for Ring<T> {}

impl<T: Copy> std::ops::Index<usize> for Ring<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(v) => v,
            None => panic!("index {i} past a length of {}", self.len),
        }
    }
}

impl<T: Copy> std::ops::IndexMut<usize> for Ring<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        let len = self.len;
        match self.get_mut(i) {
            Some(v) => v,
            None => panic!("index {i} past a length of {len}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[derive(Clone, Debug)]
    enum Op {
        PushBack(u8),
        PushFront(u8),
        PopFront,
        Remove(usize),
        Insert(usize, u8),
        Retain(u8),
        Clear,
        Set(usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::PushBack),
            2 => any::<u8>().prop_map(Op::PushFront),
            3 => Just(Op::PopFront),
            1 => (0usize..40).prop_map(Op::Remove),
            1 => (0usize..40, any::<u8>()).prop_map(|(i, v)| Op::Insert(i, v)),
            1 => any::<u8>().prop_map(Op::Retain),
            1 => (0usize..40, any::<u8>()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Any sequence of operations leaves it holding what a `VecDeque` given the same
        /// operations holds, and each operation answers as the `VecDeque`'s does.
        #[test]
        fn behaves_as_a_vecdeque(ops in proptest::collection::vec(op(), 0..200)) {
            let (mut r, mut d) = (Ring::new(), VecDeque::new());
            for o in ops {
                match o {
                    Op::PushBack(v) => { r.push_back(v); d.push_back(v); }
                    Op::PushFront(v) => { r.push_front(v); d.push_front(v); }
                    Op::PopFront => prop_assert_eq!(r.pop_front(), d.pop_front()),
                    Op::Remove(i) => prop_assert_eq!(r.remove(i), d.remove(i)),
                    Op::Insert(i, v) => {
                        let i = i.min(d.len());
                        r.insert(i, v);
                        d.insert(i, v);
                    }
                    Op::Retain(m) => { r.retain(|v| v % 3 != m % 3); d.retain(|v| v % 3 != m % 3); }
                    Op::Set(i, v) => {
                        if let Some(x) = r.get_mut(i) { *x = v; }
                        if let Some(x) = d.get_mut(i) { *x = v; }
                    }
                    Op::Clear => { r.clear(); d.clear(); }
                }
                prop_assert_eq!(r.len(), d.len());
                prop_assert_eq!(r.front(), d.front());
                prop_assert!(r.iter().eq(d.iter()));
                prop_assert!(r.iter().rev().eq(d.iter().rev()));
                prop_assert!(r.buf.is_empty() || r.buf.len().is_power_of_two());
                // The kept mask is the one the buffer's length gives (0 before the first push).
                prop_assert_eq!(r.mask, r.buf.len().saturating_sub(1));
                prop_assert!(r.head < r.buf.len().max(1));
            }
            prop_assert!(r.clone().into_iter().eq(d.iter().copied()));
            let mut other: Ring<u8> = (0..5).collect();
            r.append(&mut other);
            d.extend(0..5);
            prop_assert!(other.is_empty());
            prop_assert!(r.take_all().eq(d.drain(..)));
            prop_assert!(r.is_empty());
        }
    }

    #[test]
    fn index_past_the_length_panics_with_both_numbers() {
        let r: Ring<u32> = [1, 2].into_iter().collect();
        assert_eq!(r[1], 2);
        let e = std::panic::catch_unwind(|| r[2]).unwrap_err();
        assert_eq!(
            e.downcast_ref::<String>().unwrap(),
            "index 2 past a length of 2"
        );
    }
}
