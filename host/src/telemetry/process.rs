//! The process metrics every Prometheus client exports, read from /proc:
//! resident memory, CPU seconds, open file descriptors; and the tokio
//! runtime's live tasks, `wasmop_runtime_tasks` (what `go_goroutines` is to
//! a Go operator: the figure that shows a task leak).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Encodes `process_resident_memory_bytes`, `process_cpu_seconds_total` and
/// `process_open_fds` on each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What /proc says about this process: resident bytes, CPU seconds, fds.
pub fn sample() -> Option<(u64, f64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: utime is the 14th field, stime the 15th, rss the 24th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // /proc/self/stat counts CPU time in clock ticks (`USER_HZ`).
    #[allow(clippy::cast_precision_loss)]
    let per_second = rustix::param::clock_ticks_per_second() as f64;
    let cpu = (ticks(11)? + ticks(12)?) / per_second;
    let pages: u64 = fields.get(21)?.parse().ok()?;
    let rss = pages * page_size();
    let fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some((rss, cpu, fds))
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some((rss, cpu, fds)) = sample() else {
            return Ok(());
        };
        let rss = ConstGauge::new(rss as i64);
        rss.encode(encoder.encode_descriptor(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            None,
            rss.metric_type(),
        )?)?;
        let cpu = ConstCounter::new(cpu);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            cpu.metric_type(),
        )?)?;
        let fds = ConstGauge::new(fds as i64);
        fds.encode(encoder.encode_descriptor(
            "process_open_fds",
            "Number of open file descriptors.",
            None,
            fds.metric_type(),
        )?)?;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let tasks = ConstGauge::new(runtime.metrics().num_alive_tasks() as i64);
            tasks.encode(encoder.encode_descriptor(
                "wasmop_runtime_tasks",
                "Tasks alive in the host's tokio runtime.",
                None,
                tasks.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn proc_gives_memory_cpu_and_descriptors() {
        let (rss, cpu, fds) = super::sample().unwrap();
        assert!(rss > 1 << 20, "{rss}");
        assert!(cpu >= 0.0);
        assert!(fds >= 3, "{fds}");
    }
}
