//! Scenario 4, fire storm: a task whose iteration spins for 1 ms; two
//! threads call `fire()` as fast as they can; iterations/s, fires/s per
//! thread, heap growth and overlapping iterations (must be 0).

use crate::alloc::{heap, settled_heap};
use crate::peers::{Fire, Peer};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A firer stops early if the heap grew by this much (a peer that keeps one
/// entry per fire could otherwise exhaust memory).
const HEAP_CAP: isize = 1 << 30;

/// What one storm measured.
#[derive(Debug, Clone, Copy)]
pub struct Storm {
    /// Task iterations per second.
    pub iterations_per_s: f64,
    /// `fire()` calls per second, per firing thread.
    pub fires_per_s_per_thread: f64,
    /// Heap bytes grown between the start and the end of the storm.
    pub heap_growth: isize,
    /// Iterations that started while another was running.
    pub overlaps: u64,
    /// Whether the heap cap cut the storm short.
    pub capped: bool,
    /// CPU the peer's own threads (not the firers, not the measuring
    /// thread) used per iteration, in µs: the task's 1 ms spin plus what
    /// the runtime spends around it.
    pub worker_cpu_per_iteration_us: f64,
}

/// Runs the storm for `length` on a fresh `P` (two workers).
pub fn measure<P: Peer>(length: Duration) -> Storm {
    let peer = P::start(2);
    let (runs, overlaps, running) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU32::new(0)),
    );
    let (r, o, busy) = (runs.clone(), overlaps.clone(), running.clone());
    let trigger = peer.bind(move || {
        if busy.fetch_add(1, Relaxed) != 0 {
            o.fetch_add(1, Relaxed);
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1) {
            std::hint::spin_loop();
        }
        busy.fetch_sub(1, Relaxed);
        r.fetch_add(1, Relaxed);
        None
    });
    let (stop, capped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let before = settled_heap();
    let process_cpu = crate::cpu::cpu_time();
    let own_cpu = thread_cpu();
    let start = Instant::now();
    let firers: Vec<_> = (0..2)
        .map(|_| {
            let (trigger, stop, capped) = (trigger.clone(), stop.clone(), capped.clone());
            thread::spawn(move || {
                let mut fires = 0u64;
                while !stop.load(Relaxed) {
                    trigger.fire();
                    fires += 1;
                    if fires % 4096 == 0 && heap() - before > HEAP_CAP {
                        capped.store(true, Relaxed);
                        stop.store(true, Relaxed);
                    }
                }
                (fires, thread_cpu())
            })
        })
        .collect();
    while start.elapsed() < length && !stop.load(Relaxed) {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Relaxed);
    let ended: Vec<(u64, Duration)> = firers.into_iter().map(|f| f.join().unwrap()).collect();
    let secs = start.elapsed().as_secs_f64();
    let iterations = runs.load(Relaxed);
    let fires: u64 = ended.iter().map(|&(fires, _)| fires).sum();
    let firers_cpu: Duration = ended.iter().map(|&(_, cpu)| cpu).sum();
    let process_cpu = crate::cpu::cpu_time()
        .zip(process_cpu)
        .map_or(Duration::ZERO, |(end, start)| end.saturating_sub(start));
    let workers_cpu = process_cpu
        .saturating_sub(firers_cpu)
        .saturating_sub(thread_cpu().saturating_sub(own_cpu));
    let heap_growth = heap() - before;
    trigger.suspend();
    drop(trigger);
    drop(peer);
    Storm {
        iterations_per_s: iterations as f64 / secs,
        fires_per_s_per_thread: fires as f64 / secs / 2.0,
        heap_growth,
        overlaps: overlaps.load(Relaxed),
        capped: capped.load(Relaxed),
        worker_cpu_per_iteration_us: workers_cpu.as_secs_f64() * 1e6 / iterations.max(1) as f64,
    }
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the whole call, and
    // `clock_gettime` writes only through that pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The least iterations/s of all rounds.
pub fn least(rounds: &[Storm]) -> f64 {
    rounds
        .iter()
        .map(|s| s.iterations_per_s)
        .fold(f64::INFINITY, f64::min)
}

/// The median round by iterations/s and by fires/s; the largest heap
/// growth and every overlap of all rounds.
pub fn median(rounds: &[Storm]) -> Storm {
    let middle = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    Storm {
        iterations_per_s: middle(rounds.iter().map(|s| s.iterations_per_s).collect()),
        fires_per_s_per_thread: middle(rounds.iter().map(|s| s.fires_per_s_per_thread).collect()),
        heap_growth: rounds.iter().map(|s| s.heap_growth).max().unwrap_or(0),
        overlaps: rounds.iter().map(|s| s.overlaps).sum(),
        capped: rounds.iter().any(|s| s.capped),
        worker_cpu_per_iteration_us: middle(
            rounds
                .iter()
                .map(|s| s.worker_cpu_per_iteration_us)
                .collect(),
        ),
    }
}
