//! The standard `process_*` metrics (the names and meanings every Prometheus
//! client library exports), read from `/proc/self`: CPU time, memory, file
//! descriptors, start time. Parsing is pure ([`parse`], tested on captured
//! text); [`read`] only reads the files. On a system without `/proc` the
//! families are left out.
//!
//! Clock ticks and the page size come from the auxiliary vector
//! (`/proc/self/auxv`, `AT_CLKTCK` and `AT_PAGESZ`), which is where the C
//! library's `sysconf` reads them too; no unsafe call is needed.

use super::metrics::{FamilyDoc, Kind};
use std::fmt::Write as _;

/// `AT_PAGESZ` in the auxiliary vector (`<elf.h>`).
const AT_PAGESZ: u64 = 6;
/// `AT_CLKTCK`.
const AT_CLKTCK: u64 = 17;

/// One reading of the process.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub start_time_seconds: f64,
    pub open_fds: u64,
    /// None when the limit is "unlimited".
    pub max_fds: Option<u64>,
}

/// The raw texts [`parse`] reads.
#[derive(Clone, Debug, Default)]
pub struct ProcFiles {
    /// `/proc/self/stat`.
    pub stat: String,
    /// `/proc/stat` (for `btime`).
    pub system_stat: String,
    /// `/proc/self/limits`.
    pub limits: String,
    /// `/proc/self/auxv`.
    pub auxv: Vec<u8>,
    /// Entries in `/proc/self/fd`.
    pub open_fds: u64,
}

fn auxv_value(auxv: &[u8], key: u64) -> Option<u64> {
    auxv.chunks_exact(16).find_map(|pair| {
        let (k, v) = pair.split_at(8);
        let k = u64::from_ne_bytes(k.try_into().ok()?);
        let v = u64::from_ne_bytes(v.try_into().ok()?);
        (k == key).then_some(v)
    })
}

/// The reading in `files`, or why it cannot be read.
pub fn parse(files: &ProcFiles) -> Result<ProcessStats, String> {
    let ticks = auxv_value(&files.auxv, AT_CLKTCK)
        .filter(|&t| t > 0)
        .ok_or("no AT_CLKTCK in /proc/self/auxv")? as f64;
    let page = auxv_value(&files.auxv, AT_PAGESZ)
        .filter(|&p| p > 0)
        .ok_or("no AT_PAGESZ in /proc/self/auxv")?;
    // proc(5): the command name (field 2) is in parentheses and may itself
    // hold spaces and parentheses; the fields after the last ')' start
    // with field 3 (state).
    let after = files
        .stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or("/proc/self/stat has no command name")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or_else(|| format!("/proc/self/stat: field {n} is missing or not a number"))
    };
    let (utime, stime) = (field(14)?, field(15)?);
    let (starttime, vsize, rss) = (field(22)?, field(23)?, field(24)?);
    let btime = files
        .system_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or("/proc/stat has no btime")?;
    let max_fds = files
        .limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .ok_or("/proc/self/limits has no \"Max open files\"")?;
    Ok(ProcessStats {
        cpu_seconds: (utime + stime) as f64 / ticks,
        resident_memory_bytes: rss.saturating_mul(page),
        virtual_memory_bytes: vsize,
        start_time_seconds: btime as f64 + starttime as f64 / ticks,
        open_fds: files.open_fds,
        max_fds: max_fds.parse::<u64>().ok(),
    })
}

/// Reads this process's files.
pub fn read() -> Result<ProcessStats, String> {
    let text = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let files = ProcFiles {
        stat: text("/proc/self/stat")?,
        system_stat: text("/proc/stat")?,
        limits: text("/proc/self/limits")?,
        auxv: std::fs::read("/proc/self/auxv").map_err(|e| format!("/proc/self/auxv: {e}"))?,
        // The directory's own handle, open while it is read, is one of the
        // entries: not counted.
        open_fds: std::fs::read_dir("/proc/self/fd")
            .map_err(|e| format!("/proc/self/fd: {e}"))?
            .count()
            .saturating_sub(1) as u64,
    };
    parse(&files)
}

/// The process families, in the order `/metrics` writes them: the help
/// text the Prometheus client libraries use, and what the reference page
/// adds.
pub const FAMILIES: [FamilyDoc; 6] = [
    FamilyDoc {
        name: "process_cpu_seconds_total",
        kind: Kind::Counter,
        labels: &[],
        help: "Total user and system CPU time spent in seconds.",
        doc: "",
    },
    FamilyDoc {
        name: "process_resident_memory_bytes",
        kind: Kind::Gauge,
        labels: &[],
        help: "Resident memory size in bytes.",
        doc: "",
    },
    FamilyDoc {
        name: "process_virtual_memory_bytes",
        kind: Kind::Gauge,
        labels: &[],
        help: "Virtual memory size in bytes.",
        doc: "",
    },
    FamilyDoc {
        name: "process_start_time_seconds",
        kind: Kind::Gauge,
        labels: &[],
        help: "Start time of the process since unix epoch in seconds.",
        doc: "",
    },
    FamilyDoc {
        name: "process_open_fds",
        kind: Kind::Gauge,
        labels: &[],
        help: "Number of open file descriptors.",
        doc: "",
    },
    FamilyDoc {
        name: "process_max_fds",
        kind: Kind::Gauge,
        labels: &[],
        help: "Maximum number of open file descriptors.",
        doc: "The open-file limit (`RLIMIT_NOFILE`); left out when unlimited.",
    },
];

/// The families in the text exposition format (0.0.4).
pub fn render(p: &ProcessStats) -> String {
    let mut out = String::with_capacity(1024);
    let values = [
        Some(format!("{}", p.cpu_seconds)),
        Some(p.resident_memory_bytes.to_string()),
        Some(p.virtual_memory_bytes.to_string()),
        Some(format!("{}", p.start_time_seconds)),
        Some(p.open_fds.to_string()),
        p.max_fds.map(|max| max.to_string()),
    ];
    for (family, value) in FAMILIES.iter().zip(values) {
        let Some(value) = value else { continue };
        let name = family.name;
        let _ = writeln!(out, "# HELP {name} {}", family.help);
        let _ = writeln!(out, "# TYPE {name} {}", family.kind.as_str());
        let _ = writeln!(out, "{name} {value}");
    }
    out
}

/// What `/metrics` appends: the families, or nothing when `/proc` cannot
/// be read (logged at debug level).
pub fn render_current() -> String {
    match read() {
        Ok(p) => render(&p),
        Err(e) => {
            tracing::debug!("process metrics unavailable: {e}");
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testlab::exposition;

    fn auxv(pairs: &[(u64, u64)]) -> Vec<u8> {
        pairs
            .iter()
            .flat_map(|(k, v)| k.to_ne_bytes().into_iter().chain(v.to_ne_bytes()))
            .collect()
    }

    /// Captured from a holdfast process, with a command name that has the
    /// characters that break a naive split.
    fn files() -> ProcFiles {
        ProcFiles {
            stat: "4242 (hold fast) (x)) S 1 4242 4242 0 -1 4194560 1500 0 0 0 250 125 0 0 20 0 5 0 1234500 52428800 2560 18446744073709551615 1 1 0 0 0 0 0 4096 17640 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n".into(),
            system_stat: "cpu  1 2 3 4\nbtime 1764576000\nprocesses 9\n".into(),
            limits: "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            1048576              1048576              files     \n".into(),
            auxv: auxv(&[(33, 7), (AT_PAGESZ, 4096), (AT_CLKTCK, 100), (0, 0)]),
            open_fds: 17,
        }
    }

    #[test]
    fn the_reading_comes_from_the_right_fields() {
        let p = parse(&files()).expect("parses");
        assert_eq!(
            p,
            ProcessStats {
                cpu_seconds: 3.75,
                resident_memory_bytes: 2560 * 4096,
                virtual_memory_bytes: 52_428_800,
                start_time_seconds: 1_764_576_000.0 + 12_345.0,
                open_fds: 17,
                max_fds: Some(1_048_576),
            }
        );
        let mut f = files();
        f.limits = f.limits.replace(
            "1048576              1048576",
            "unlimited            unlimited",
        );
        assert_eq!(parse(&f).expect("parses").max_fds, None);
        f.auxv = auxv(&[(AT_PAGESZ, 4096)]);
        assert_eq!(
            parse(&f),
            Err("no AT_CLKTCK in /proc/self/auxv".to_string())
        );
    }

    #[test]
    fn the_families_are_valid_exposition_with_the_standard_names() {
        let text = render(&parse(&files()).expect("parses"));
        let e = exposition::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
        assert_eq!(e.value("process_cpu_seconds_total", &[]), Some(3.75));
        assert_eq!(e.value("process_open_fds", &[]), Some(17.0));
        assert_eq!(e.value("process_max_fds", &[]), Some(1_048_576.0));
        assert_eq!(
            e.value("process_start_time_seconds", &[]),
            Some(1_764_588_345.0)
        );
    }

    #[test]
    fn this_process_reads_plausibly() {
        let p = read().expect("/proc/self is readable on Linux");
        assert!(p.resident_memory_bytes > 1 << 20, "{p:?}");
        assert!(p.virtual_memory_bytes >= p.resident_memory_bytes, "{p:?}");
        assert!(p.open_fds >= 3, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        assert!(
            p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 3600.0,
            "{p:?}"
        );
    }

    /// [`FAMILIES`] (the reference page's list) declares exactly the
    /// families rendered, in order, with their type and help.
    #[test]
    fn the_declared_families_are_the_rendered_ones() {
        let text = render(&parse(&files()).expect("parses"));
        let e = exposition::parse(&text).expect("valid");
        let emitted: Vec<(&str, &str, Option<&str>)> = e
            .families
            .iter()
            .map(|f| (f.name.as_str(), f.kind.as_str(), f.help.as_deref()))
            .collect();
        let declared: Vec<(&str, &str, Option<&str>)> = FAMILIES
            .iter()
            .map(|f| (f.name, f.kind.as_str(), Some(f.help)))
            .collect();
        assert_eq!(emitted, declared);
    }
}
