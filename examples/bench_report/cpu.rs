//! CPU time of the whole process (user + system, every thread, live or
//! exited), from `/proc/self/stat` (10 ms resolution), and context switches
//! of its live threads, from `/proc/self/task/*/status`.

use std::time::Duration;

/// User + system CPU time consumed so far, if `/proc` is available.
pub fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10)) // USER_HZ = 100
}

/// Voluntary + involuntary context switches of every live thread (a thread
/// that exits takes its count with it: compare windows without exits).
pub fn context_switches() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(status) = std::fs::read_to_string(task.ok()?.path().join("status")) else {
            continue; // the thread just exited
        };
        total += status
            .lines()
            .filter(|line| line.contains("ctxt_switches:"))
            .filter_map(|line| line.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    Some(total)
}
