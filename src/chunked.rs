//! A vector that grows by fixed chunks instead of doubling. It holds the
//! timing wheel's entries, one per trigger. The registry's slots, which the
//! timer reads without the registry's lock, are in fixed tables of their
//! own, in `shutdown/slots.rs`.
//!
//! A doubling `Vec` of 100,000 entries has room for 131,072. That is almost
//! a third more memory than used, per trigger. Each growth also copies
//! every element while the timer role is held. For the wheel at that size,
//! one growth copies 2 MiB. Here at most one chunk is
//! unused. Growth past the first chunk allocates one chunk and copies
//! nothing. An index costs one more load, of the chunk's pointer from a
//! table that stays in cache. The first chunk grows by doubling up to its
//! full size. So a scheduler with a handful of triggers does not pay for a
//! thousand.

use std::ops::{Index, IndexMut};

/// A chunk holds 2^10 elements.
const CHUNK_SHIFT: u32 = 10;
const CHUNK: usize = 1 << CHUNK_SHIFT;
const MASK: usize = CHUNK - 1;

/// A vector of `T` in chunks of [`CHUNK`] elements. Elements past the
/// first chunk never move; callers keep indices, not references.
#[derive(Debug)]
pub(crate) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Chunked<T> {
    pub(crate) const fn new() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// The number of elements.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `value` at index `len()`.
    pub(crate) fn push(&mut self, value: T) {
        if self.len == 0 {
            // The first chunk doubles as a `Vec` does, up to `CHUNK`.
            self.chunks.push(Vec::new());
        } else if self.len & MASK == 0 {
            // Exactly one chunk's room, so a later chunk never reallocates.
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let last = self.chunks.len() - 1;
        self.chunks[last].push(value);
        self.len += 1;
    }

    /// The element at `index`, if there is one.
    #[inline]
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index >> CHUNK_SHIFT)?.get(index & MASK)
    }

    /// The elements in index order.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    /// The elements in index order, by value.
    pub(crate) fn into_values(self) -> impl Iterator<Item = T> {
        self.chunks.into_iter().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        &self.chunks[index >> CHUNK_SHIFT][index & MASK]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.chunks[index >> CHUNK_SHIFT][index & MASK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_like_a_vec_across_chunks_without_moving_elements() {
        let mut chunked = Chunked::new();
        let mut plain = Vec::new();
        let mut second = None;
        for i in 0..3 * CHUNK + 5 {
            chunked.push(i);
            plain.push(i);
            if i == 2 {
                // A small vector is small.
                assert!(chunked.chunks[0].capacity() < 8);
            }
            if i >= CHUNK {
                second.get_or_insert(&chunked[CHUNK] as *const usize);
                assert_eq!(second, Some(&chunked[CHUNK] as *const usize), "moved");
            }
        }
        assert_eq!(chunked.len(), plain.len());
        assert!(chunked.iter().eq(plain.iter()));
        for i in [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 7, 3 * CHUNK + 4] {
            assert_eq!(chunked[i], plain[i]);
            chunked[i] += 1;
            assert_eq!(chunked.get(i), Some(&(plain[i] + 1)));
            chunked[i] -= 1;
        }
        assert_eq!(chunked.get(plain.len()), None);
        assert_eq!(chunked.get(4 * CHUNK), None);
        // At most one chunk of room unused.
        let room: usize = chunked.chunks.iter().map(Vec::capacity).sum();
        assert!(room - chunked.len() < CHUNK);
    }
}
