//! The async triggers a Tokio user hand-rolls today: a task per trigger
//! looping over `select!` on a `Sleep` and a wake-up source.
//!
//! * [`AsyncLoop`]: a command channel (`mpsc(1)`, `try_send`, so fires
//!   coalesce), drained after each run so that a burst costs one run. It
//!   has the bug the pattern invites: a fire that arrives *during* a run is
//!   drained with the rest and lost (`tests/async_peer.rs` shows it).
//! * [`NotifyLoop`]: a `Notify` for "run now" (its stored permit keeps a
//!   fire during a run) and another for "the deadline changed".
//!
//! Used by the benchmark report's async scenario and that test.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// "Never", for the loop's sleep when nothing is armed.
const FAR: Duration = Duration::from_secs(86_400 * 365);

enum Command {
    Now,
    After(Duration),
    Suspend,
}

/// One hand-rolled async trigger; dropping it ends its task.
pub struct AsyncLoop {
    commands: mpsc::Sender<Command>,
}

impl AsyncLoop {
    /// Spawns the loop on `runtime`.
    pub fn spawn<F, Fut>(runtime: &tokio::runtime::Handle, mut task: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Option<Duration>> + Send + 'static,
    {
        let (commands, mut inbox) = mpsc::channel(1);
        runtime.spawn(async move {
            let sleep = tokio::time::sleep(FAR);
            tokio::pin!(sleep);
            loop {
                let run = tokio::select! {
                    () = &mut sleep => true,
                    command = inbox.recv() => match command {
                        None => break,
                        Some(Command::Now) => true,
                        Some(Command::After(delay)) => {
                            sleep.as_mut().reset(Instant::now() + delay);
                            false
                        }
                        Some(Command::Suspend) => {
                            sleep.as_mut().reset(Instant::now() + FAR);
                            false
                        }
                    },
                };
                if run {
                    let next = task().await;
                    // Coalesce the burst that came meanwhile: drain it.
                    while inbox.try_recv().is_ok() {}
                    sleep.as_mut().reset(Instant::now() + next.unwrap_or(FAR));
                }
            }
        });
        Self { commands }
    }

    /// Run now (dropped if a command is already pending: coalesced).
    pub fn fire(&self) {
        let _ = self.commands.try_send(Command::Now);
    }

    /// Run after `delay`.
    pub async fn fire_after(&self, delay: Duration) {
        let _ = self.commands.send(Command::After(delay)).await;
    }

    /// Stop the armed run.
    pub async fn suspend(&self) {
        let _ = self.commands.send(Command::Suspend).await;
    }
}

/// The `Notify`-based hand-rolled loop; dropping it ends its task.
pub struct NotifyLoop {
    now: std::sync::Arc<tokio::sync::Notify>,
    rearm: std::sync::Arc<tokio::sync::Notify>,
    deadline: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NotifyLoop {
    /// Spawns the loop on `runtime`.
    pub fn spawn<F, Fut>(runtime: &tokio::runtime::Handle, mut task: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Option<Duration>> + Send + 'static,
    {
        let now = std::sync::Arc::new(tokio::sync::Notify::new());
        let rearm = std::sync::Arc::new(tokio::sync::Notify::new());
        let deadline = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
        let (n, r, d) = (now.clone(), rearm.clone(), deadline.clone());
        let task = runtime.spawn(async move {
            let sleep = tokio::time::sleep(FAR);
            tokio::pin!(sleep);
            loop {
                let run = tokio::select! {
                    () = &mut sleep => true,
                    () = n.notified() => true,
                    () = r.notified() => {
                        let at = d.lock().unwrap().take();
                        sleep.as_mut().reset(at.unwrap_or_else(|| Instant::now() + FAR));
                        false
                    }
                };
                if run {
                    let next = task().await;
                    sleep.as_mut().reset(Instant::now() + next.unwrap_or(FAR));
                }
            }
        });
        Self {
            now,
            rearm,
            deadline,
            task,
        }
    }

    /// Run now (a stored permit coalesces a burst).
    pub fn fire(&self) {
        self.now.notify_one();
    }

    /// Run after `delay`.
    pub fn fire_after(&self, delay: Duration) {
        *self.deadline.lock().unwrap() = Some(Instant::now() + delay);
        self.rearm.notify_one();
    }
}

impl Drop for NotifyLoop {
    fn drop(&mut self) {
        self.task.abort();
    }
}
