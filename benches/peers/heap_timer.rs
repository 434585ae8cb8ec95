//! The hand-rolled baseline: a `Mutex<BinaryHeap>` + `Condvar` timer thread
//! that runs the tasks itself. Each request pushes a (deadline, id,
//! generation) entry; an entry whose generation is stale is skipped when it
//! pops, so a superseded request holds its memory until its old deadline.

use super::{Fire, Peer};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

type Body = Box<dyn FnMut() -> Option<Duration> + Send>;

/// The timer thread and its shared heap.
pub struct HeapTimer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// One trigger: an index into the timer's slots.
#[derive(Clone)]
pub struct HeapTrigger {
    shared: Arc<Shared>,
    id: usize,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    slots: Vec<Slot>,
    shutdown: bool,
}

struct Slot {
    /// Bumped by every request; only an entry carrying it may run.
    generation: u64,
    /// Taken out while the timer thread runs it.
    body: Option<Body>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Supersedes `id`'s request; with `at`, pushes the new entry and wakes
    /// the timer if it now comes first.
    fn request(&self, id: usize, at: Option<Instant>) {
        let mut state = self.lock();
        let slot = &mut state.slots[id];
        slot.generation += 1;
        let generation = slot.generation;
        if let Some(at) = at {
            let first = match state.heap.peek() {
                Some(Reverse((top, ..))) => at < *top,
                None => true,
            };
            state.heap.push(Reverse((at, id, generation)));
            drop(state);
            if first {
                self.wake.notify_one();
            }
        }
    }

    /// The timer thread: pop due entries, skip stale ones, run live ones.
    fn run(&self) {
        let mut state = self.lock();
        loop {
            if state.shutdown {
                return;
            }
            let now = Instant::now();
            let Some(&Reverse((at, id, generation))) = state.heap.peek() else {
                state = self.wake.wait(state).unwrap();
                continue;
            };
            if at > now {
                state = self.wake.wait_timeout(state, at - now).unwrap().0;
                continue;
            }
            state.heap.pop();
            if state.slots[id].generation != generation {
                continue; // superseded
            }
            let mut body = state.slots[id].body.take().expect("body");
            drop(state);
            let next = body();
            state = self.lock();
            let slot = &mut state.slots[id];
            slot.body = Some(body);
            if let Some(delay) = next {
                if slot.generation == generation {
                    slot.generation += 1;
                    let generation = slot.generation;
                    state
                        .heap
                        .push(Reverse((Instant::now() + delay, id, generation)));
                }
            }
        }
    }
}

impl Drop for HeapTimer {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Peer for HeapTimer {
    const NAME: &'static str = "Mutex<BinaryHeap> + Condvar";
    type Trigger = HeapTrigger;

    fn start(_workers: usize) -> Self {
        let shared = Arc::new(Shared::default());
        let timer = shared.clone();
        let thread = thread::Builder::new()
            .name("heap-timer".into())
            .spawn(move || timer.run())
            .expect("spawn");
        Self {
            shared,
            thread: Some(thread),
        }
    }

    fn bind<F>(&self, task: F) -> HeapTrigger
    where
        F: FnMut() -> Option<Duration> + Send + 'static,
    {
        let mut state = self.shared.lock();
        state.slots.push(Slot {
            generation: 0,
            body: Some(Box::new(task)),
        });
        HeapTrigger {
            shared: self.shared.clone(),
            id: state.slots.len() - 1,
        }
    }
}

impl Fire for HeapTrigger {
    fn fire(&self) {
        self.shared.request(self.id, Some(Instant::now()));
    }

    fn fire_after(&self, delay: Duration) {
        self.shared.request(self.id, Some(Instant::now() + delay));
    }

    fn suspend(&self) {
        self.shared.request(self.id, None);
    }
}
