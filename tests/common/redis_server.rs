//! A real `redis-server` on 127.0.0.1, on a free port, in its own
//! temporary directory, without persistence; killed and reaped when
//! dropped (also when a test fails). Shared by `tests/redis_end_to_end.rs`
//! and the Redis examples.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a starting server may take to answer `PING`.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A running `redis-server` owned by the test.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free loopback port.
    pub fn start() -> Result<Self, String> {
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("circulation-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("temp dir {dir:?}: {e}"))?;
        let mut server = Self {
            child: None,
            port,
            dir,
        };
        server.spawn()?;
        Ok(server)
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server abruptly (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: there is no persistence).
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--protected-mode", "yes"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let client = redis::Client::open(self.url()).map_err(|e| e.to_string())?;
        let started = Instant::now();
        loop {
            let pong = client
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
            if pong.is_ok() {
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!("redis-server exited at start: {status}"));
            }
            if started.elapsed() > READY_WITHIN {
                self.kill();
                return Err(format!(
                    "redis-server did not answer within {READY_WITHIN:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes the config's `version` field (`HSET config version N`).
pub fn set_version(con: &mut redis::Connection, version: u64) {
    redis::cmd("HSET")
        .arg("config")
        .arg("version")
        .arg(version)
        .query::<()>(con)
        .expect("HSET config version");
}

/// A port free on 127.0.0.1 now (the OS picks it).
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}
