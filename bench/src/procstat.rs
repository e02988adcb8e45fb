//! What /proc says about a process: resident memory, CPU time, context
//! switches of all its threads.

use std::fs;

/// Clock ticks per second for /proc/PID/stat times (USER_HZ; 100 on every
/// Linux this runs on).
const TICKS_PER_SEC: f64 = 100.0;

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    required(pid, "VmRSS:")
}

/// RssAnon (heap, stacks) of `pid` in KiB; the rest of VmRSS is file
/// pages (the binary and libraries) and shared memory.
pub fn rss_anon_kib(pid: u32) -> u64 {
    required(pid, "RssAnon:")
}

/// VmHWM (peak RSS) of `pid` in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    required(pid, "VmHWM:")
}

/// A field of /proc/PID/status; a process that is gone, or a field that is
/// not there, fails the run instead of being measured as 0.
fn required(pid: u32, key: &str) -> u64 {
    let path = format!("/proc/{pid}/status");
    status_field(&path, key).unwrap_or_else(|| {
        panic!(
            "no {key} in {path}: {}",
            fs::read_to_string(&path).unwrap_or_else(|e| e.to_string())
        )
    })
}

fn status_field(path: &str, key: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    text.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// utime + stime of the whole thread group, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let path = format!("/proc/{pid}/stat");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // The command name may hold spaces: fields start after the last ')'.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("{path} has no ')': {text}"));
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime field 14, stime field 15.
    let field = |i: usize| -> f64 {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("{path}: no number in field {}: {text}", i + 3))
    };
    (field(11) + field(12)) / TICKS_PER_SEC
}

/// Voluntary + nonvoluntary context switches summed over every thread.
pub fn context_switches(pid: u32) -> u64 {
    let dir = format!("/proc/{pid}/task");
    let tasks = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
    tasks
        .flatten()
        // A thread that ended between the listing and the read took its
        // switches with it: 0 is right for it, and only for it.
        .filter_map(|t| {
            let path = t.path().join("status").display().to_string();
            Some(
                status_field(&path, "voluntary_ctxt_switches:")?
                    + status_field(&path, "nonvoluntary_ctxt_switches:")?,
            )
        })
        .sum()
}

/// Number of threads.
pub fn threads(pid: u32) -> u64 {
    required(pid, "Threads:")
}
