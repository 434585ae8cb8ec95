//! Keeps a stand-by off the napping holder's CPU while it waits.
//!
//! A stand-by helps only if its wake-up is not late together with the
//! holder's. On a virtual machine a late wake-up is a vCPU the host took
//! away, so the two must wait on different vCPUs. The kernel wakes a
//! thread onto its waker's CPU, so left alone they often share one.
//! docs/DESIGN.md measures it, under "The lateness tail on the AMD guest".
//!
//! The stand-by's own CPU set is narrowed only while it waits, and given
//! back whole when it wakes. Elsewhere than on Linux, and under loom or
//! Miri, it does nothing.

/// The CPU the calling thread runs on, if the platform tells.
pub(super) fn current_cpu() -> Option<usize> {
    #[cfg(all(target_os = "linux", not(loom), not(miri)))]
    {
        // SAFETY: `sched_getcpu` takes no argument and touches no memory of
        // ours. An error returns -1, which becomes `None`.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
    {
        None
    }
}

/// The calling thread kept off one CPU, until dropped.
pub(super) struct Apart {
    /// The CPU given back on drop.
    #[cfg(all(target_os = "linux", not(loom), not(miri)))]
    cpu: usize,
}

/// The calling thread's CPU set, if the kernel tells it.
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn own_set() -> Option<libc::cpu_set_t> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: an all-zero `cpu_set_t` is the empty set, a valid value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable `cpu_set_t` of `size` bytes, and 0 names
    // the calling thread.
    (unsafe { libc::sched_getaffinity(0, size, &mut set) } == 0).then_some(set)
}

/// Makes `set` the calling thread's CPU set. Returns whether it did.
#[cfg(all(target_os = "linux", not(loom), not(miri)))]
fn set_own(set: &libc::cpu_set_t) -> bool {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid `cpu_set_t` of `size` bytes. A failure leaves
    // the thread's set as it was.
    unsafe { libc::sched_setaffinity(0, size, set) == 0 }
}

impl Apart {
    /// Keeps the calling thread off `cpu`, if it may run there and elsewhere.
    pub(super) fn from(cpu: usize) -> Option<Self> {
        #[cfg(all(target_os = "linux", not(loom), not(miri)))]
        {
            if cpu >= libc::CPU_SETSIZE as usize {
                return None;
            }
            let mut away = own_set()?;
            // SAFETY: `cpu` is below `CPU_SETSIZE`, checked above.
            if !unsafe { libc::CPU_ISSET(cpu, &away) } {
                return None;
            }
            // SAFETY: as above.
            unsafe { libc::CPU_CLR(cpu, &mut away) };
            // SAFETY: `CPU_COUNT` reads a valid set.
            if unsafe { libc::CPU_COUNT(&away) } == 0 {
                return None;
            }
            set_own(&away).then_some(Self { cpu })
        }
        #[cfg(not(all(target_os = "linux", not(loom), not(miri))))]
        {
            let _ = cpu;
            None
        }
    }
}

impl Drop for Apart {
    /// Adds the CPU back to the set the thread has now. A change someone
    /// else made meanwhile, such as `taskset`, is kept.
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", not(loom), not(miri)))]
        if let Some(mut set) = own_set() {
            // SAFETY: `cpu` was below `CPU_SETSIZE` in `from`.
            unsafe { libc::CPU_SET(self.cpu, &mut set) };
            // A failure, as when a cpuset shrank meanwhile, leaves a set
            // that still lets the thread run.
            let _ = set_own(&set);
        }
    }
}

#[cfg(all(test, target_os = "linux", not(loom), not(miri)))]
mod tests {
    use super::*;

    /// The calling thread's CPU set, as a list of CPUs.
    fn allowed() -> Vec<usize> {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: an all-zero `cpu_set_t` is the empty set, a valid value.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a writable `cpu_set_t` of `size` bytes.
        assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut set) }, 0);
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: every index is below `CPU_SETSIZE`.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect()
    }

    #[test]
    fn a_stand_by_leaves_one_cpu_while_apart_and_gets_its_whole_set_back() {
        // A thread of its own, so the test harness's thread keeps its set
        // whatever happens here.
        std::thread::spawn(|| {
            let before = allowed();
            let cpu = current_cpu().expect("Linux tells the CPU");
            assert!(before.contains(&cpu));
            let apart = Apart::from(cpu);
            if before.len() == 1 {
                // Nowhere else to go, so the set stays whole.
                assert!(apart.is_none());
                assert_eq!(allowed(), before);
                return;
            }
            let apart = apart.expect("another CPU is allowed");
            let away: Vec<usize> = before.iter().copied().filter(|&c| c != cpu).collect();
            assert_eq!(allowed(), away);
            // The kernel moved the thread off `cpu` before the call returned.
            assert_ne!(current_cpu(), Some(cpu));
            drop(apart);
            assert_eq!(allowed(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_the_thread_may_not_run_on_keeps_the_set_as_it_is() {
        std::thread::spawn(|| {
            let before = allowed();
            let elsewhere = (0..libc::CPU_SETSIZE as usize)
                .find(|cpu| !before.contains(cpu))
                .expect("a set of fewer than CPU_SETSIZE CPUs");
            assert!(Apart::from(elsewhere).is_none());
            assert_eq!(allowed(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_out_of_range_keeps_the_set_whole() {
        std::thread::spawn(|| {
            let before = allowed();
            assert!(Apart::from(libc::CPU_SETSIZE as usize).is_none());
            assert_eq!(allowed(), before);
        })
        .join()
        .unwrap();
    }
}
