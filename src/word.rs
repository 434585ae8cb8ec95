//! The one compare-exchange loop behind every conditional transition of the trigger's
//! two words.
//!
//! The state word is an `AtomicU32` in `state.rs`. The request word is an `AtomicU64` in
//! `request/mod.rs`. Tokio's task state likewise has its single `fetch_update_action`.
//!
//! A transition is a function from the word it read to a [`Step`]. The step either
//! leaves the word and returns an outcome, or stores a new word with the success ordering
//! that transition needs. [`update`] runs the transition until its compare-exchange
//! succeeds. So every mutation of either word is one RMW in that word's single
//! modification order.

use crate::sync::{AtomicU32, AtomicU64, Backoff, Ordering};

/// What one attempt of a transition does with the word `W` it read.
pub(crate) enum Step<W, T> {
    /// Leave the word as it is and return the outcome.
    Keep(T),
    /// Write this word with this success ordering, then return the outcome.
    Store(W, Ordering, T),
}

/// An atomic word the loop can drive.
pub(crate) trait AtomicWord {
    /// The plain value it holds.
    type Raw: Copy;

    /// A Relaxed load, only the first guess of the loop.
    fn load_relaxed(&self) -> Self::Raw;

    /// One weak compare-exchange, Relaxed on failure.
    ///
    /// A failure only feeds the next attempt.
    fn cas_weak(
        &self,
        current: Self::Raw,
        new: Self::Raw,
        success: Ordering,
    ) -> Result<Self::Raw, Self::Raw>;
}

macro_rules! atomic_word {
    ($atomic:ty, $raw:ty) => {
        impl AtomicWord for $atomic {
            type Raw = $raw;

            #[inline]
            fn load_relaxed(&self) -> $raw {
                // Relaxed: a guess, checked by the compare-exchange.
                self.load(Ordering::Relaxed)
            }

            #[inline]
            fn cas_weak(&self, current: $raw, new: $raw, success: Ordering) -> Result<$raw, $raw> {
                // Failure Relaxed: the value found only feeds the next try.
                self.compare_exchange_weak(current, new, success, Ordering::Relaxed)
            }
        }
    };
}

atomic_word!(AtomicU32, u32);
atomic_word!(AtomicU64, u64);

/// The single compare-exchange loop.
///
/// `step` maps the word it read to a [`Step`]. When another thread changed the word, the
/// attempt fails. The loop then backs off and runs `step` again on the value it found.
#[inline]
pub(crate) fn update<A: AtomicWord, T>(
    word: &A,
    mut step: impl FnMut(A::Raw) -> Step<A::Raw, T>,
) -> T {
    let backoff = Backoff::new();
    let mut current = word.load_relaxed();
    loop {
        let (new, success, outcome) = match step(current) {
            Step::Keep(outcome) => return outcome,
            Step::Store(new, success, outcome) => (new, success, outcome),
        };
        match word.cas_weak(current, new, success) {
            Ok(_) => return outcome,
            Err(actual) => {
                current = actual;
                backoff.spin();
            }
        }
    }
}
