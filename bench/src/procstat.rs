//! What /proc says about a process: resident memory, CPU time, context
//! switches of all its threads.

use std::fs;

/// Clock ticks per second for /proc/PID/stat times (USER_HZ; 100 on every
/// Linux this runs on).
const TICKS_PER_SEC: f64 = 100.0;

/// VmRSS of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_field(&format!("/proc/{pid}/status"), "VmRSS:").unwrap_or(0)
}

/// RssAnon (heap, stacks) of `pid` in KiB; the rest of VmRSS is file
/// pages (the binary and libraries) and shared memory.
pub fn rss_anon_kib(pid: u32) -> u64 {
    status_field(&format!("/proc/{pid}/status"), "RssAnon:").unwrap_or(0)
}

/// VmHWM (peak RSS) of `pid` in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_field(&format!("/proc/{pid}/status"), "VmHWM:").unwrap_or(0)
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
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: fields start after the last ')'.
    let Some(rest) = text.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, utime field 14, stime field 15.
    let utime: f64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0.0);
    let stime: f64 = fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0.0);
    (utime + stime) / TICKS_PER_SEC
}

/// Voluntary + nonvoluntary context switches summed over every thread.
pub fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .map(|t| {
            let path = t.path().join("status").display().to_string();
            status_field(&path, "voluntary_ctxt_switches:").unwrap_or(0)
                + status_field(&path, "nonvoluntary_ctxt_switches:").unwrap_or(0)
        })
        .sum()
}

/// Number of threads.
pub fn threads(pid: u32) -> u64 {
    status_field(&format!("/proc/{pid}/status"), "Threads:").unwrap_or(0)
}
