//! Lowering the CPU priority of the calling thread, so that background work (flushes, merges,
//! feed ingestion) yields the cores to queries when both want them (RocksDB lowers its
//! compaction threads for the same reason). Linux applies a nice value and the idle scheduling
//! class per thread; elsewhere this does nothing.

/// Highest nice value Linux accepts: the lowest priority.
pub const NICE_MAX: i32 = 19;

/// Raises the calling thread's nice value to `nice` (0 to [`NICE_MAX`]) and moves it to the
/// idle scheduling class; a thread already at that nice value or above is left as it is, so
/// this never raises a priority. Raising a nice value needs no privilege; a failure is logged,
/// never fatal, because the thread still does its work at the priority it has.
pub fn lower_current_thread(nice: i32) {
    assert!(
        (0..=NICE_MAX).contains(&nice),
        "nice value {nice} outside 0..={NICE_MAX}"
    );
    if nice <= current_thread_nice() {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take no pointers and only read their arguments.
        let outcome = unsafe {
            let thread_id = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, thread_id as libc::id_t, nice)
        };
        if outcome != 0 {
            tracing::warn!(
                "cannot lower this thread's priority to nice {nice}: {}",
                std::io::Error::last_os_error()
            );
        }
        // A nice value sets a thread's share of the cores, not how soon a query that wakes
        // gets one: Linux's scheduler let a nice-10 feed thread finish a slice of 2-5 ms
        // while a query woken on that core waited. SCHED_IDLE threads are preempted as soon
        // as any other thread wants their core, and run at full speed when none does.
        let idle = libc::sched_param { sched_priority: 0 };
        // SAFETY: the pointer is to a live sched_param; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) } != 0 {
            tracing::warn!(
                "cannot move this thread to the idle scheduling class: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The calling thread's nice value (Linux; 0 elsewhere).
pub fn current_thread_nice() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as above. getpriority may return -1 legitimately, so errno is cleared first
        // and tells a failure (then read as 0) from a nice value of -1.
        unsafe {
            *libc::__errno_location() = 0;
            let thread_id = libc::gettid();
            let nice = libc::getpriority(libc::PRIO_PROCESS, thread_id as libc::id_t);
            if nice == -1 && *libc::__errno_location() != 0 {
                0
            } else {
                nice
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The nice values of this process's threads whose name starts with `prefix` (Linux, from
/// `/proc/self/task`; empty elsewhere). For diagnostics and tests.
pub fn nice_of_threads_named(prefix: &str) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            if !name.trim_end().starts_with(prefix) {
                return None;
            }
            // stat: "tid (comm) state ..."; nice is the 19th field, the 17th after the comm.
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let after_comm = &stat[stat.rfind(')')? + 1..];
            after_comm.split_whitespace().nth(16)?.parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn only_the_calling_thread_is_lowered() {
        let before = current_thread_nice();
        let lowered = std::thread::spawn(|| {
            lower_current_thread(7);
            current_thread_nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, 7.max(before));
        assert_eq!(current_thread_nice(), before);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn threads_are_found_by_name() {
        let (ready, wait) = std::sync::mpsc::channel();
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("prio-probe".into())
            .spawn(move || {
                lower_current_thread(NICE_MAX);
                ready.send(()).unwrap();
                let _ = hold.recv();
            })
            .unwrap();
        wait.recv().unwrap();
        assert_eq!(nice_of_threads_named("prio-probe"), vec![NICE_MAX]);
        release.send(()).unwrap();
        thread.join().unwrap();
    }
}
