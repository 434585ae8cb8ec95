//! `tokio` time: one driver task per trigger, commands through a
//! `tokio::sync::watch` channel (latest wins), the deadline a `Sleep` moved
//! with `Sleep::reset`, the body run inline in the driver task.

use super::{Fire, Peer};
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

/// What the driver task should do next (the watch channel holds the latest).
#[derive(Clone, Copy, Debug)]
enum Command {
    Idle,
    Now,
    At(Instant),
}

/// A multi-thread tokio runtime with `workers` worker threads.
pub struct TokioWatch {
    /// The runtime; dropping it stops every driver task.
    pub runtime: Runtime,
}

/// One trigger: the sending side of its driver's command channel.
#[derive(Clone)]
pub struct TokioTrigger {
    commands: watch::Sender<Command>,
}

impl Peer for TokioWatch {
    const NAME: &'static str = "tokio (watch + Sleep::reset)";
    type Trigger = TokioTrigger;

    fn start(workers: usize) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_time()
            .build()
            .expect("runtime");
        Self { runtime }
    }

    fn bind<F>(&self, task: F) -> TokioTrigger
    where
        F: FnMut() -> Option<Duration> + Send + 'static,
    {
        let (commands, receiver) = watch::channel(Command::Idle);
        self.runtime.spawn(drive(receiver, task));
        TokioTrigger { commands }
    }
}

/// The driver: wait for a command or the deadline, whichever comes first;
/// runs never overlap because one task runs them all.
async fn drive<F>(mut commands: watch::Receiver<Command>, mut task: F)
where
    F: FnMut() -> Option<Duration> + Send + 'static,
{
    let sleep = sleep_until(Instant::now() + Duration::from_secs(86_400 * 365));
    tokio::pin!(sleep);
    let mut armed = false;
    loop {
        let run_now = tokio::select! {
            changed = commands.changed() => {
                if changed.is_err() {
                    return; // every handle dropped
                }
                let command = *commands.borrow_and_update();
                match command {
                    Command::Idle => armed = false,
                    Command::At(deadline) => {
                        sleep.as_mut().reset(deadline);
                        armed = true;
                    }
                    Command::Now => {}
                }
                matches!(command, Command::Now)
            }
            () = &mut sleep, if armed => true,
        };
        if run_now {
            armed = false;
            if let Some(delay) = task() {
                sleep.as_mut().reset(Instant::now() + delay);
                armed = true;
            }
        }
    }
}

impl Fire for TokioTrigger {
    fn fire(&self) {
        self.commands.send_replace(Command::Now);
    }

    fn fire_after(&self, delay: Duration) {
        self.commands
            .send_replace(Command::At(Instant::now() + delay));
    }

    fn suspend(&self) {
        self.commands.send_replace(Command::Idle);
    }
}
