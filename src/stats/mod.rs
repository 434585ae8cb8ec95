//! Per-trigger counters, always on and off the fire path's critical
//! cost. Fires are *derived* from the version counter, so a fire bumps no
//! counter. Everything else is written by the one worker holding the RUNNING
//! bit, or by the timer. Both write with Relaxed stores to trigger-local
//! fields.

use crate::request::{Kind, Word};
use crate::state::{Snapshot, VERSION_MASK};
use crate::sync::{
    Ordering::{Acquire, Relaxed, Release},
    StatU32 as AtomicU32, StatU64 as AtomicU64,
};
use std::time::Duration;

/// "No value" for the version-tagged fields.
const NONE: u32 = u32::MAX;

/// The counters of one trigger. `repr(C)` fixes their order, with the
/// timer's `due_*` pair first. The core puts that pair in its hot cache line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Counters {
    /// The deadline of the run last marked due, and for which version. The
    /// timer marks it, or a zero-delay re-arm does. The version is `NONE`
    /// once the worker consumed it. The loom models see these two, since
    /// they are loom atomics under `--cfg loom`, as is the last start and
    /// span pair. The timer
    /// hands them to the worker through `Request::expire`'s Release.
    /// `loom_dispatch`'s lateness model checks that edge.
    due_at_us: crate::sync::AtomicU64,
    due_version: crate::sync::AtomicU32,
    /// The holder of RUNNING writes the fields from here on. This one sits
    /// beside `due_version`, with no padding, since a run's start reads both.
    last_version: AtomicU32,
    /// What the `metrics` counters were last told, on the worker side.
    #[cfg(feature = "metrics")]
    reported_fires: AtomicU64,
    #[cfg(feature = "metrics")]
    reported_coalesced: AtomicU64,
    /// The last start and span are read as a pair, as
    /// [`start_span_and_counts`](Self::start_span_and_counts)
    /// explains. Both are loom atomics under `--cfg loom`, unlike the other
    /// statistics, so that a model sees the pair's orderings. That model is `loom_dispatch`'s
    /// snapshot racing a run's start.
    last_start_us: crate::sync::AtomicU64,
    /// How long the last iteration ran, as [`encode_span`] packs it. While
    /// one is in flight, it is the gap from the end of the one before to
    /// this one's start, with `IN_FLIGHT` set. So the last end is kept in 32
    /// bits rather than 64. It is `BUSY` while a start writes the pair.
    last_span: crate::sync::AtomicU32,
    /// The iterations so far, less their carries: their low 32 bits. The
    /// carries, in the rare counters, count the rest. A 64-bit count here
    /// would cost every trigger 8 bytes, with the padding it brings. A
    /// snapshot reads the count and its carries with the last start and
    /// span, as [`start_span_and_counts`](Self::start_span_and_counts)
    /// explains. A loom atomic under `--cfg loom`, as the pair is, so that
    /// the pair's model sees a count carried as its start goes.
    iterations: crate::sync::AtomicU32,
    /// The fires served so far, that is the starts of a version newer than
    /// the last start's, less their carries, as `iterations` is. A start
    /// writes it beside `iterations`, and a snapshot reads it with them. A
    /// loom atomic under `--cfg loom`, as `iterations` is.
    served_fires: crate::sync::AtomicU32,
    /// The last timed run's lateness in the low 16 bits and the largest in
    /// the high 16, each as [`encode_lateness`] packs it. One word rather
    /// than two 32-bit ones saves every trigger 4 bytes, with the padding
    /// an odd word count would bring.
    lateness: AtomicU32,
}

/// Set in `Counters::last_span` while an iteration is in flight.
const IN_FLIGHT: u32 = 1 << 31;
/// `Counters::last_span` with no span known, as before any iteration ended.
const NO_SPAN: u32 = !IN_FLIGHT;
/// `Counters::last_span` while a start writes the pair. `encode_span` never
/// gives it, since its unit field is the unused fourth.
const BUSY: u32 = IN_FLIGHT | (3 << SPAN.value_bits);
/// The iterations and the fires served, as a snapshot reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    iterations: u64,
    served: u64,
}

/// How many times a reader tries for a pair, spinning, before it yields
/// between tries to the start it waits for.
const PAIR_TRIES: usize = 4;

/// A figure in at most 32 bits: a unit of three, picked by the two bits
/// above `value_bits`, and a count of it in the bits below. Each figure is
/// counted in the finest unit whose count fits.
struct Packing {
    units: [u64; 3],
    value_bits: u32,
}

impl Packing {
    /// `value`, rounded `up` or down to its unit. `None` if even the
    /// coarsest unit cannot count it.
    fn encode(&self, value: u64, up: bool) -> Option<u32> {
        let top = (1u64 << self.value_bits) - 1;
        self.units.iter().enumerate().find_map(|(unit, &size)| {
            let count = if up {
                value.div_ceil(size)
            } else {
                value / size
            };
            (count <= top).then(|| ((unit as u32) << self.value_bits) | count as u32)
        })
    }

    /// See [`encode`](Self::encode). `None` for the fourth unit, which it
    /// never gives. Bits above the unit are ignored.
    fn decode(&self, encoded: u32) -> Option<u64> {
        let size = self
            .units
            .get(((encoded >> self.value_bits) & 3) as usize)?;
        Some(u64::from(encoded & ((1 << self.value_bits) - 1)) * size)
    }
}

/// A span of microseconds in 31 bits, rounded down. Bits 29 and 30 pick the
/// unit, and the low 29 bits count them. The unit is microseconds below
/// about 8.9 minutes, milliseconds below about 6.2 days, and seconds after.
/// A span past about 17 years reads as that.
const SPAN: Packing = Packing {
    units: [1, 1_000, 1_000_000],
    value_bits: 29,
};

/// See [`SPAN`].
fn encode_span(us: u64) -> u32 {
    let most = (2 << SPAN.value_bits) | ((1 << SPAN.value_bits) - 1);
    SPAN.encode(us, false).unwrap_or(most)
}

/// See [`encode_span`]. The `IN_FLIGHT` bit is ignored. `None` is `NO_SPAN`
/// or `BUSY`, whose unit field `encode_span` never gives.
fn decode_span(encoded: u32) -> Option<u64> {
    SPAN.decode(encoded)
}

/// The end a start and a span give, if the span knows one.
fn end_of(start_us: u64, span: u32) -> Option<u64> {
    let length = decode_span(span)?;
    Some(if span & IN_FLIGHT == 0 {
        start_us.saturating_add(length)
    } else {
        start_us.saturating_sub(length)
    })
}

/// A delay of nanoseconds in 32 bits, rounded **up** so a resumed run is
/// never early, as guarantee G15 requires. The top two bits pick the unit,
/// and the low 30 bits count them. The unit is microseconds below about
/// 17.9 minutes, milliseconds below about 12.4 days, and seconds up to
/// about 34 years.
const DELAY: Packing = Packing {
    units: [1_000, 1_000_000, 1_000_000_000],
    value_bits: 30,
};

/// See [`DELAY`]. `NONE`, all ones, is no delay. Its unit field is the
/// fourth, which an encoding never gives. A longer delay encodes as `NONE`
/// too, since shortening it would make the resumed run early. Such a
/// trigger resumes idle, as one that returned `None`.
fn encode_delay(delay: Duration) -> u32 {
    // In 64 bits, with no 128-bit division, since every run's end encodes its
    // delay. A delay past 584 years saturates, and encodes as `NONE` either way.
    let nanos = delay
        .as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(u64::from(delay.subsec_nanos())))
        .unwrap_or(u64::MAX);
    DELAY.encode(nanos, true).unwrap_or(NONE)
}

/// See [`encode_delay`].
fn decode_delay(encoded: u32) -> Option<Duration> {
    DELAY.decode(encoded).map(Duration::from_nanos)
}

/// The delay the last iteration returned, in 32 bits as [`encode_delay`]
/// packs it. It is what `resume` re-arms. The holder of RUNNING writes it.
/// Relaxed: `resume` reads it after an Acquire RMW of the state word that
/// read the iteration's Release `exit`. It is a loom atomic under
/// `--cfg loom`, unlike the other statistics, so that a model sees that
/// edge. That model is `loom_pause`'s resume during an iteration.
#[derive(Debug)]
pub(crate) struct LastDelay(crate::sync::AtomicU32);

impl LastDelay {
    pub(crate) fn new() -> Self {
        Self(crate::sync::AtomicU32::new(NONE))
    }

    /// The iteration that just ended returned `next`.
    pub(crate) fn returned(&self, next: Option<Duration>) {
        let encoded = next.map_or(NONE, encode_delay);
        // Most tasks return the same delay every time, and then need no store.
        if self.0.load(Relaxed) != encoded {
            self.0.store(encoded, Relaxed);
        }
    }

    /// The delay the last iteration returned.
    pub(crate) fn get(&self) -> Option<Duration> {
        decode_delay(self.0.load(Relaxed))
    }
}

/// The counters most triggers never move, kept apart from [`Counters`].
/// They count suspends, pauses and resumes, panics and version wraps. The
/// core allocates their block on first use. An absent block reads as all
/// zero, with start version 0.
#[derive(Debug)]
pub(crate) struct RareCounters {
    /// Times the 30-bit version wrapped to 0, written on the fire side.
    wraps: AtomicU32,
    /// The version the last `suspend` installed. It is a loom atomic under
    /// `--cfg loom`, unlike the other statistics. A pause reads it after its
    /// Acquire install replaced the suspend's IDLE word, an edge of guarantee
    /// G6. `loom_pause`'s suspend-against-pause models check that edge.
    suspend_version: crate::sync::AtomicU32,
    /// Advances that are not fires, such as a suspend, a pause or a resume,
    /// plus the version the trigger started at. Fires are the advances less
    /// these.
    suspends: AtomicU64,
    /// Saturates at `u32::MAX`. A trigger panicking a thousand times a
    /// second would need seven weeks to get there.
    panics: AtomicU32,
    /// Times `Counters::iterations` wrapped to 0. The holder of RUNNING
    /// writes it, inside the write of a start's pair. A loom atomic under
    /// `--cfg loom`, as the pair is.
    iteration_carries: crate::sync::AtomicU32,
    /// Times `Counters::served_fires` wrapped to 0, kept as
    /// `iteration_carries` is.
    served_carries: crate::sync::AtomicU32,
}

// Relaxed, as every statistic. The comment on `impl Counters` says why.
impl RareCounters {
    pub(crate) fn new(start_version: u32) -> Self {
        Self {
            wraps: AtomicU32::new(0),
            suspend_version: crate::sync::AtomicU32::new(NONE),
            suspends: AtomicU64::new(u64::from(start_version)),
            panics: AtomicU32::new(0),
            iteration_carries: crate::sync::AtomicU32::new(0),
            served_carries: crate::sync::AtomicU32::new(0),
        }
    }

    /// The version wrapped to 0, seen on the fire side.
    pub(crate) fn wrapped(&self) {
        self.wraps.fetch_add(1, Relaxed);
    }

    /// A resume's advance, which is not a fire and is not counted as one.
    pub(crate) fn not_a_fire(&self) {
        self.suspends.fetch_add(1, Relaxed);
    }

    /// A suspend installed `version`.
    pub(crate) fn suspended(&self, version: u32) {
        self.suspends.fetch_add(1, Relaxed);
        self.suspend_version.store(version, Relaxed);
    }

    /// Whether the IDLE request of `version` is a suspend's, with nothing
    /// fired since.
    pub(crate) fn is_suspend(&self, version: u32) -> bool {
        self.suspend_version.load(Relaxed) == version
    }

    /// Whether a suspend or a pause advanced past `version`. It did if the
    /// last one recorded is newer.
    pub(crate) fn suspended_since(&self, version: u32) -> bool {
        crate::request::is_newer(self.suspend_version.load(Relaxed), version)
    }

    /// A resume left a suspended trigger idle at `version`, so it is still
    /// suspended. `not_a_fire` counted the advance itself.
    pub(crate) fn still_suspended(&self, version: u32) {
        self.suspend_version.store(version, Relaxed);
    }

    /// An iteration panicked. The holder of RUNNING is the only writer, so a
    /// load and a store do.
    pub(crate) fn panicked(&self) {
        let panics = self.panics.load(Relaxed);
        self.panics.store(panics.saturating_add(1), Relaxed);
    }
}

/// The largest lateness the statistics keep, in microseconds. It is about
/// 71.6 minutes.
const LATENESS_MAX: u32 = u32::MAX - 1;

/// `lateness`'s half with no lateness known. [`encode_lateness`] never
/// gives it.
const NO_LATENESS: u16 = u16::MAX;
/// The fraction bits of an encoded lateness.
const FRACTION_BITS: u32 = 11;

/// A lateness of at most [`LATENESS_MAX`] microseconds in 16 bits, like a
/// float rounded down. Below 2^11 microseconds it is the count itself.
/// Above, the top 5 bits hold one more than the number of low bits dropped,
/// and the low 11 bits are the kept ones below the leading one. So it is
/// exact below 4,096 microseconds, and above that within 1/2,048 of its
/// value. The exponent stays below 22, so the result is never
/// [`NO_LATENESS`].
fn encode_lateness(us: u32) -> u16 {
    let top = (1 << FRACTION_BITS) - 1;
    if us <= top {
        return us as u16;
    }
    let shift = u32::BITS - us.leading_zeros() - (FRACTION_BITS + 1);
    let fraction = (us >> shift) & top;
    (((shift + 1) << FRACTION_BITS) | fraction) as u16
}

/// See [`encode_lateness`]. `None` is [`NO_LATENESS`].
fn decode_lateness(encoded: u16) -> Option<u32> {
    if encoded == NO_LATENESS {
        return None;
    }
    let exponent = u32::from(encoded) >> FRACTION_BITS;
    let fraction = u32::from(encoded) & ((1 << FRACTION_BITS) - 1);
    Some(match exponent {
        0 => fraction,
        _ => ((1 << FRACTION_BITS) | fraction) << (exponent - 1),
    })
}

// Every access below is Relaxed, since these are statistics. Each field has
// one writer at a time, and readers only want a recent value. The firer
// writes `wraps` and `suspends`. The timer writes `due_*` before its Release
// expire. An ending iteration that re-arms with zero delay writes them
// instead, before its Release install. The RUNNING holder writes the rest.
// There is one overlap. A `fire_after` between a zero-delay re-arm's `exit`
// and its mark, found due by the timer at once, may see its lateness
// measured from the re-arm's mark. The re-arm's own run is then stale. The
// `due_*` pair is handed from timer to worker by the expire → take_due
// Release/Acquire edge on the request word.
impl Counters {
    pub(crate) fn new(start_version: u32) -> Self {
        Self {
            #[cfg(feature = "metrics")]
            reported_fires: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            reported_coalesced: AtomicU64::new(0),
            due_at_us: crate::sync::AtomicU64::new(0),
            due_version: crate::sync::AtomicU32::new(NONE),
            iterations: crate::sync::AtomicU32::new(0),
            served_fires: crate::sync::AtomicU32::new(0),
            last_version: AtomicU32::new(start_version),
            last_start_us: crate::sync::AtomicU64::new(u64::MAX),
            last_span: crate::sync::AtomicU32::new(NO_SPAN),
            lateness: AtomicU32::new((u32::from(NO_LATENESS) << 16) | u32::from(NO_LATENESS)),
        }
    }

    /// Fires so far, derived from the version counter. They are the advances
    /// to `version` that were not a suspend, pause or resume, less the start
    /// version. `version` is the state word's now, and wraps are counted.
    /// `rare` holds the trigger's rare counters, if it has any.
    fn fires(version: u32, rare: Option<&RareCounters>) -> u64 {
        let Some(rare) = rare else {
            return u64::from(version);
        };
        let advances = u64::from(rare.wraps.load(Relaxed)) * (u64::from(VERSION_MASK) + 1)
            + u64::from(version);
        advances.saturating_sub(rare.suspends.load(Relaxed))
    }

    /// See `Core::preset_iterations`.
    #[cfg(loom)]
    pub(crate) fn preset_iterations(&self, low: u32) {
        self.iterations.store(low, Relaxed);
    }

    /// The version of the last iteration that started, or the start version
    /// before any.
    pub(crate) fn last_started_version(&self) -> u32 {
        self.last_version.load(Relaxed)
    }

    /// Whether an iteration ever started.
    pub(crate) fn ran(&self) -> bool {
        self.last_start_us().is_some()
    }

    /// The run of `version` was due at `due_at_us`. Either the timer found it
    /// due, or an iteration re-armed with zero delay.
    pub(crate) fn marked_due(&self, version: u32, due_at_us: u64) {
        self.due_at_us.store(due_at_us, Relaxed);
        self.due_version.store(version, Relaxed);
    }

    /// Whether the last run marked due is `version`'s and has not started.
    /// The shutdown scan asks, to tell a fresh claim of a periodic run from
    /// what an ended iteration leaves. See `Core::claim_unstarted`.
    /// Relaxed: the scan's Acquire close orders it.
    pub(crate) fn is_marked_due(&self, version: u32) -> bool {
        self.due_version.load(Relaxed) == version
    }

    /// On the worker side, an iteration of `version` starts at `now_us`. The
    /// worker holding RUNNING is these fields' only writer, so a load and a
    /// store do what an RMW would, cheaper. `rare` gives the trigger's rare
    /// counters, made on first use, for the iterations' carry. Returns this
    /// run's lateness in microseconds, saturating, if it was a timed run.
    pub(crate) fn started<'a>(
        &self,
        version: u32,
        now_us: u64,
        rare: impl FnOnce() -> &'a RareCounters,
    ) -> Option<u32> {
        let serves = self.last_version.load(Relaxed) != version;
        if serves {
            self.last_version.store(version, Relaxed);
        }
        // The last end, which the new start overwrites, is kept as the gap
        // to it. This worker wrote both fields last, so Relaxed loads read
        // them.
        let end = end_of(
            self.last_start_us.load(Relaxed),
            self.last_span.load(Relaxed),
        );
        let gap = end.map_or(NO_SPAN, |end| encode_span(now_us.saturating_sub(end)));
        // A seqlock's write, with the span as its sequence. `BUSY` and the
        // Release fence come before the start, and the Release store of the
        // span after it. See `start_span_and_counts` for the reader's half.
        self.last_span.store(BUSY, Relaxed);
        crate::sync::fence(Release);
        self.last_start_us.store(now_us, Relaxed);
        // The counts go up inside the pair's write, so a snapshot reads them
        // with the start they go with. Their carries go up there too. Once in
        // 2^32 runs, that makes the rare counters if the trigger has none.
        // Both may carry in the same start, so the rare counters are asked
        // for once.
        let (mut make, mut made) = (Some(rare), None);
        let mut carry = |carries: fn(&RareCounters) -> &crate::sync::AtomicU32| {
            if let Some(make) = make.take() {
                made = Some(make());
            }
            if let Some(rare) = made {
                let carries = carries(rare);
                carries.store(carries.load(Relaxed).wrapping_add(1), Relaxed);
            }
        };
        if bump(&self.iterations) {
            carry(|rare| &rare.iteration_carries);
        }
        if serves && bump(&self.served_fires) {
            carry(|rare| &rare.served_carries);
        }
        self.last_span.store(IN_FLIGHT | gap, Release);
        if self.due_version.swap(NONE, Relaxed) == version {
            let late = now_us.saturating_sub(self.due_at_us.load(Relaxed));
            let late = u32::try_from(late).map_or(LATENESS_MAX, |us| us.min(LATENESS_MAX));
            let encoded = encode_lateness(late);
            let max = (self.lateness.load(Relaxed) >> 16) as u16;
            // Rounding down keeps the order, so the larger code is the larger lateness.
            let max = if max == NO_LATENESS {
                encoded
            } else {
                max.max(encoded)
            };
            self.lateness
                .store((u32::from(max) << 16) | u32::from(encoded), Relaxed);
            return Some(late);
        }
        None
    }

    /// On the worker side, the iteration ended at `now_us`. A panic is
    /// counted in [`RareCounters`], not here. Returns how long it ran, in
    /// microseconds.
    pub(crate) fn ended(&self, now_us: u64) -> u64 {
        let ran = now_us.saturating_sub(self.last_start_us.load(Relaxed));
        // Release: a reader that reads this span reads the start it counts
        // from. See `start_span_and_counts`.
        self.last_span.store(encode_span(ran), Release);
        ran
    }

    /// Fires and coalesced fires since the last call, for the `metrics`
    /// counters, which only go up. The worker calls it at the end of an
    /// iteration. `version` is the state word's now. `pending` tells whether
    /// a request newer than this iteration's still waits for its run.
    ///
    /// A fire still waiting for its run is not coalesced yet. It is one of
    /// the fires not served, so it is taken off. Counted as coalesced at
    /// once, it would be counted again when its run, serving it, brings the
    /// difference back down. So counted, fires less served less pending only
    /// grows. A fire into a pending request adds one, and so does a suspend
    /// that drops one. A fire that makes one pending leaves it, and so does
    /// the run serving it. Both totals are reported as the largest value
    /// seen. The version and the rare counters are read apart, so a
    /// concurrent fire may tear a reading. Reporting the largest value keeps
    /// a torn reading from making a later one count twice.
    #[cfg(feature = "metrics")]
    pub(crate) fn fires_since_reported(
        &self,
        version: u32,
        rare: Option<&RareCounters>,
        pending: bool,
    ) -> (u64, u64) {
        let fires = Self::fires(version, rare);
        // The holder of RUNNING writes the counts, so it reads them whole.
        let coalesced = fires
            .saturating_sub(self.counts(rare).served)
            .saturating_sub(u64::from(pending));
        // The holder of RUNNING is the only writer, so a load and a store do.
        let raise = |reported: &AtomicU64, now: u64| {
            let before = reported.load(Relaxed);
            if now > before {
                reported.store(now, Relaxed);
            }
            now.saturating_sub(before)
        };
        (
            raise(&self.reported_fires, fires),
            raise(&self.reported_coalesced, coalesced),
        )
    }

    /// When the last iteration started, in microseconds, if one has.
    pub(crate) fn last_start_us(&self) -> Option<u64> {
        let start = self.last_start_us.load(Relaxed);
        (start != u64::MAX).then_some(start)
    }

    /// How long the last finished iteration ran, in microseconds. It is 0
    /// while one is in flight, and `None` if none has finished. The timer
    /// role holder takes it as its estimate of a due run.
    pub(crate) fn last_run_us(&self) -> Option<u64> {
        // Relaxed: one field, read for an estimate. A start in progress reads
        // as no run, which only makes the estimate unknown.
        let span = self.last_span.load(Relaxed);
        let ran = decode_span(span)?;
        Some(if span & IN_FLIGHT == 0 { ran } else { 0 })
    }

    /// The last start, the span that goes with it, and the counts so far,
    /// read as one. The counts are the iterations and the fires served.
    /// `rare` gives the trigger's rare counters, if it has any.
    ///
    /// It is a seqlock's read, with the span as the sequence. The span is
    /// read before and after the start and the counts. A start writes those
    /// after `BUSY` and its Release fence, and so the rare counters for a
    /// carry. If the first reads saw any of those writes, the Acquire fence
    /// after them makes the span's second read see `BUSY` or a later span.
    ///
    /// That later span may equal the first, since a start and its end can
    /// leave the span as the run before did. So the span's second read is
    /// Acquire, and the start and the counts are read once more. They are
    /// then at least as new as the span read, so a start between the reads
    /// shows as a change. That is also why the span's first read may be
    /// Relaxed. The first reads are kept only if the later ones, which the
    /// Acquire orders, found the same. The counts alone would not do: the
    /// first reads of the start and the counts are unordered, so a count
    /// may be a new start's while the start is the old one.
    ///
    /// A start writes them in a few stores and takes no lock. A carry
    /// allocates, once in 2^32 runs. So a reader that finds a start
    /// under way tries again until it is done. It spins at first. Then it
    /// yields, since a preempted writer needs the processor back.
    fn start_span_and_counts<'a>(
        &self,
        rare: impl Fn() -> Option<&'a RareCounters>,
    ) -> (u64, u32, Counts) {
        let mut tries = 0;
        loop {
            let span = self.last_span.load(Relaxed);
            if span != BUSY {
                let start = self.last_start_us.load(Relaxed);
                let counts = self.counts(rare());
                crate::sync::fence(Acquire);
                if self.last_span.load(Acquire) == span
                    && self.last_start_us.load(Relaxed) == start
                    && self.counts(rare()) == counts
                {
                    return (start, span, counts);
                }
            }
            tries += 1;
            if tries < PAIR_TRIES {
                std::hint::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    /// The counts so far, each its carries and its low 32 bits, read apart.
    fn counts(&self, rare: Option<&RareCounters>) -> Counts {
        let whole = |count: &crate::sync::AtomicU32, carries: fn(&RareCounters) -> u32| {
            let carries = rare.map_or(0, carries);
            (u64::from(carries) << 32) | u64::from(count.load(Relaxed))
        };
        Counts {
            iterations: whole(&self.iterations, |rare| {
                rare.iteration_carries.load(Relaxed)
            }),
            served: whole(&self.served_fires, |rare| rare.served_carries.load(Relaxed)),
        }
    }

    /// A snapshot, given the state and request words read just before.
    /// `rare` gives the trigger's rare counters, if it has any.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn snapshot<'a>(
        &self,
        rare: impl Fn() -> Option<&'a RareCounters>,
        name: Option<&str>,
        state: Snapshot,
        request: Word,
        now_us: u64,
        stuck: bool,
        closed: bool,
    ) -> TriggerStats {
        let fires = Self::fires(state.version(), rare());
        let micros = |value: u64| (value != u64::MAX).then(|| Duration::from_micros(value));
        let (start, span, Counts { iterations, served }) = self.start_span_and_counts(&rare);
        let (last_start, last_end) = (
            micros(start),
            end_of(start, span).map(Duration::from_micros),
        );
        let rare = rare();
        let lateness_word = self.lateness.load(Relaxed);
        TriggerStats {
            name: name.map(str::to_owned),
            fires,
            coalesced_fires: fires.saturating_sub(served),
            iterations,
            panics: rare.map_or(0, |rare| u64::from(rare.panics.load(Relaxed))),
            last_start,
            last_end,
            last_lateness: lateness(lateness_word as u16),
            max_lateness: lateness((lateness_word >> 16) as u16),
            state: Self::state(rare, state, request, now_us, closed),
            paused: matches!(
                request.kind(),
                Kind::Paused | Kind::Closed { paused: true, .. }
            ),
            version: state.version(),
            stuck: stuck && state.is_running(),
        }
    }

    fn state(
        rare: Option<&RareCounters>,
        state: Snapshot,
        request: Word,
        now_us: u64,
        closed: bool,
    ) -> TriggerState {
        if closed && !state.is_running() {
            return TriggerState::ShutDown;
        }
        if state.is_running() {
            // A follow-up is pending once a due run found it busy and set
            // RESERVED, or while one is queued for a worker as DUE.
            return if state.is_reserved() || request.kind() == Kind::Due {
                TriggerState::RunningWithRerun
            } else {
                TriggerState::Running
            };
        }
        match request.kind() {
            Kind::At { .. } => TriggerState::Armed(Duration::from_micros(
                request.kind().deadline(now_us).unwrap_or(u64::MAX),
            )),
            Kind::Due => TriggerState::Due,
            // Claimed by a worker that is about to enter, or left by the
            // iteration that just ended. It is not running either way.
            Kind::Taken => TriggerState::Idle,
            Kind::Idle
                if rare.is_some_and(|rare| {
                    request.version() == rare.suspend_version.load(Relaxed)
                }) =>
            {
                TriggerState::Suspended
            }
            Kind::Idle => TriggerState::Idle,
            Kind::Paused => TriggerState::Paused,
            Kind::Resuming => TriggerState::Idle,
            // Closed by the shutdown scan, which set `closed` first.
            Kind::Closed { .. } => TriggerState::ShutDown,
        }
    }
}

/// A lateness half as a duration, if known.
fn lateness(encoded: u16) -> Option<Duration> {
    decode_lateness(encoded).map(|us| Duration::from_micros(u64::from(us)))
}

/// Adds one to a count whose only writer is the caller, as in `started`,
/// and returns whether it wrapped to 0.
#[inline]
fn bump(count: &crate::sync::AtomicU32) -> bool {
    let before = count.load(Relaxed);
    count.store(before.wrapping_add(1), Relaxed);
    before == u32::MAX
}

mod report;
pub use report::{SchedulerStats, TriggerState, TriggerStats};

#[cfg(all(test, not(loom)))]
mod tests;
