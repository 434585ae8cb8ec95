//! The refresher's hot-path read beside its peers: `Reader::read` against
//! `arc-swap`'s guard, `RwLock<Arc<T>>` and `tokio::sync::watch`'s
//! `borrow`, each read dereferenced to one field, with 1 and 2 reader
//! threads, with no writer and with a writer every millisecond.
//!
//! Each round runs every system once, in an order that rotates from round
//! to round; the figure is the median of the rounds' nanoseconds per read.
//!
//! ```text
//! cargo bench --bench read --features tokio [-- --rounds 5 --millis 300]
//! ```

use arc_swap::ArcSwap;
use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{Refresh, Scheduler};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// The value read: a configuration of a few fields.
struct Config {
    limit: u64,
    _name: String,
    _flags: [u64; 4],
}

fn config(limit: u64) -> Config {
    Config {
        limit,
        _name: String::from("service"),
        _flags: [limit; 4],
    }
}

/// One system under test: a reader thread's read (each thread gets its
/// own, as a service's threads would keep their handles), and a writer's
/// step.
trait System: Send + Sync {
    fn name(&self) -> &'static str;
    fn reader(&self) -> Box<dyn FnMut() -> u64 + Send + '_>;
    fn write(&self, limit: u64);
}

struct Ours {
    config: Refresh<Config, String>,
    next: Arc<AtomicU64>,
}

impl System for Ours {
    fn name(&self) -> &'static str {
        "Reader::read"
    }

    fn reader(&self) -> Box<dyn FnMut() -> u64 + Send + '_> {
        let mut reader = self.config.reader();
        Box::new(move || reader.read().map_or(0, |c| c.limit))
    }

    fn write(&self, limit: u64) {
        self.next.store(limit, Relaxed);
        let _ = self.config.refresh_now();
    }
}

struct Swap(ArcSwap<Config>);

impl System for Swap {
    fn name(&self) -> &'static str {
        "arc-swap guard"
    }

    fn reader(&self) -> Box<dyn FnMut() -> u64 + Send + '_> {
        Box::new(|| self.0.load().limit)
    }

    fn write(&self, limit: u64) {
        self.0.store(Arc::new(config(limit)));
    }
}

struct Locked(RwLock<Arc<Config>>);

impl System for Locked {
    fn name(&self) -> &'static str {
        "RwLock<Arc<T>>"
    }

    fn reader(&self) -> Box<dyn FnMut() -> u64 + Send + '_> {
        Box::new(|| self.0.read().unwrap().limit)
    }

    fn write(&self, limit: u64) {
        *self.0.write().unwrap() = Arc::new(config(limit));
    }
}

struct Watch {
    sender: tokio::sync::watch::Sender<Arc<Config>>,
    receiver: tokio::sync::watch::Receiver<Arc<Config>>,
}

impl System for Watch {
    fn name(&self) -> &'static str {
        "watch::borrow"
    }

    fn reader(&self) -> Box<dyn FnMut() -> u64 + Send + '_> {
        let receiver = self.receiver.clone();
        Box::new(move || receiver.borrow().limit)
    }

    fn write(&self, limit: u64) {
        self.sender.send_replace(Arc::new(config(limit)));
    }
}

/// Nanoseconds per read over `millis`, with `readers` threads and, if
/// `writing`, a writer every millisecond.
fn measure(system: &dyn System, readers: usize, writing: bool, millis: u64) -> f64 {
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let elapsed = thread::scope(|scope| {
        for _ in 0..readers {
            let mut read = system.reader();
            let (stop, reads) = (&stop, &reads);
            scope.spawn(move || {
                let mut count = 0_u64;
                let mut sum = 0_u64;
                while !stop.load(Relaxed) {
                    for _ in 0..1_000 {
                        sum = sum.wrapping_add(black_box(read()));
                    }
                    count += 1_000;
                }
                black_box(sum);
                reads.fetch_add(count, Relaxed);
            });
        }
        if writing {
            scope.spawn(|| {
                let mut limit = 0;
                while !stop.load(Relaxed) {
                    limit += 1;
                    system.write(limit);
                    thread::sleep(Duration::from_millis(1));
                }
            });
        }
        let start = Instant::now();
        thread::sleep(Duration::from_millis(millis));
        stop.store(true, Relaxed);
        start.elapsed()
    });
    // Every reader ran for the whole window: reads per thread-second.
    elapsed.as_nanos() as f64 * readers as f64 / reads.load(Relaxed) as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = arg("--rounds", 5) as usize;
    let millis = arg("--millis", 300);
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let next = Arc::new(AtomicU64::new(0));
    let n = Arc::clone(&next);
    let ours = Ours {
        config: Refresh::builder(&scheduler)
            .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
            .every(Duration::MAX)
            .bind(move || Ok(config(n.load(Relaxed)))),
        next,
    };
    ours.config
        .refresh_and_wait(Duration::from_secs(10))
        .unwrap();
    let (sender, receiver) = tokio::sync::watch::channel(Arc::new(config(0)));
    let systems: Vec<Box<dyn System>> = vec![
        Box::new(ours),
        Box::new(Swap(ArcSwap::from_pointee(config(0)))),
        Box::new(Locked(RwLock::new(Arc::new(config(0))))),
        Box::new(Watch { sender, receiver }),
    ];
    println!(
        "ns per read, median of {rounds} rounds of {millis} ms, systems alternated; \
         ratio = ours / the best peer"
    );
    let mut one_reader = [0.0; 2];
    for writing in [false, true] {
        for readers in [1, 2] {
            let mut results = vec![Vec::new(); systems.len()];
            for round in 0..rounds {
                for k in 0..systems.len() {
                    let i = (k + round) % systems.len();
                    results[i].push(measure(&*systems[i], readers, writing, millis));
                }
            }
            let medians: Vec<f64> = results.into_iter().map(median).collect();
            let best_peer = medians[1..].iter().copied().fold(f64::INFINITY, f64::min);
            let writer = if writing {
                "writer every 1 ms"
            } else {
                "no writer"
            };
            print!("{readers} reader(s), {writer}:");
            for (system, ns) in systems.iter().zip(&medians) {
                print!("  {} {ns:.2}", system.name());
            }
            let scaling = if readers == 1 {
                one_reader[usize::from(writing)] = medians[0];
                String::new()
            } else {
                format!(
                    "  (2 readers / 1: {:.2})",
                    medians[0] / one_reader[usize::from(writing)]
                )
            };
            println!("  ratio {:.2}{scaling}", medians[0] / best_peer);
        }
    }
    scheduler.shutdown();
}
