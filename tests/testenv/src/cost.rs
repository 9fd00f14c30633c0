//! What a process costs so far, from /proc: the benches' figures.

/// Memory and CPU time of one process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    /// Resident memory now (KiB).
    pub rss_kib: u64,
    /// Peak resident memory (KiB).
    pub peak_kib: u64,
    /// User and system CPU time so far (seconds).
    pub cpu_seconds: f64,
}

/// The cost of the process `pid` so far (zeroes once it is gone).
pub fn cost(pid: u32) -> Cost {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 12th and 13th of them.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    let hz = rustix::param::clock_ticks_per_second() as f64;
    Cost {
        rss_kib: field("VmRSS:"),
        peak_kib: field("VmHWM:"),
        cpu_seconds: ticks / hz,
    }
}
