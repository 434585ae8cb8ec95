//! Scenario 3, timer lateness: 2,000 triggers armed at pseudo-random delays
//! in [5 ms, 500 ms]; each run records `start − deadline` (µs) and whether
//! it started early.

use crate::peers::{Fire, Peer};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const TRIGGERS: usize = 2_000;

/// The lateness samples of one peer, sorted (µs), and the early runs.
#[derive(Debug, Clone, Default)]
pub struct Lateness {
    /// `start − deadline` of every on-time run, µs, ascending.
    pub samples_us: Vec<f64>,
    /// Runs that started before their deadline (must be 0).
    pub early: u32,
    /// Runs that never happened within the wait (must be 0).
    pub missing: usize,
}

impl Lateness {
    /// Pools the samples of several runs.
    pub fn pool(runs: impl IntoIterator<Item = Lateness>) -> Lateness {
        let mut pooled = Lateness::default();
        for run in runs {
            pooled.samples_us.extend(run.samples_us);
            pooled.early += run.early;
            pooled.missing += run.missing;
        }
        pooled.samples_us.sort_by(f64::total_cmp);
        pooled
    }

    /// The `q`-quantile (0 ≤ q ≤ 1), µs.
    pub fn quantile(&self, q: f64) -> f64 {
        match self.samples_us.len() {
            0 => f64::NAN,
            n => self.samples_us[((n - 1) as f64 * q).round() as usize],
        }
    }
}

/// The same delays for every peer: xorshift64 from a fixed seed.
fn delays() -> Vec<Duration> {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    (0..TRIGGERS)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            Duration::from_micros(5_000 + seed % 495_001)
        })
        .collect()
}

/// Arms the 2,000 triggers on a fresh `P` (two workers) and collects.
pub fn measure<P: Peer>() -> Lateness {
    let peer = P::start(2);
    let samples = Arc::new(Mutex::new(Vec::with_capacity(TRIGGERS)));
    let early = Arc::new(AtomicU32::new(0));
    let mut armed = Vec::with_capacity(TRIGGERS);
    let triggers: Vec<_> = delays()
        .into_iter()
        .map(|delay| {
            let deadline = Arc::new(Mutex::new(None::<Instant>));
            armed.push((deadline.clone(), delay));
            let (samples, early) = (samples.clone(), early.clone());
            peer.bind(move || {
                let now = Instant::now();
                let deadline = deadline.lock().unwrap().expect("armed");
                match now.checked_duration_since(deadline) {
                    Some(late) => samples.lock().unwrap().push(late.as_secs_f64() * 1e6),
                    None => {
                        early.fetch_add(1, Relaxed);
                    }
                }
                None
            })
        })
        .collect();
    for (trigger, (deadline, delay)) in triggers.iter().zip(&armed) {
        // The deadline is taken before the call: a peer that reads its clock
        // later can only be later, never appear early.
        let at = Instant::now() + *delay;
        *deadline.lock().unwrap() = Some(at);
        trigger.fire_after(*delay);
    }
    let give_up = Instant::now() + Duration::from_secs(3);
    let done = || samples.lock().unwrap().len() + early.load(Relaxed) as usize >= TRIGGERS;
    while !done() && Instant::now() < give_up {
        thread::sleep(Duration::from_millis(10));
    }
    drop(triggers);
    drop(peer);
    let mut samples_us = std::mem::take(&mut *samples.lock().unwrap());
    samples_us.sort_by(f64::total_cmp);
    let early = early.load(Relaxed);
    Lateness {
        missing: TRIGGERS - samples_us.len() - early as usize,
        samples_us,
        early,
    }
}
