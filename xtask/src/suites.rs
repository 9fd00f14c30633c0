//! The workspace's tests, their binaries run side by side.
//!
//! `cargo test` runs one test binary after another. Most of this
//! workspace's test time is waiting (on a control plane's controllers, a
//! lease, a Deployment's progress deadline), so [`run`] builds the binaries
//! with `cargo test --no-run` and runs up to [`parallel`] of them at once,
//! each as Cargo would (in its package's directory, with the same
//! arguments), the slowest first. A binary's output is printed whole when it
//! ends, so outputs never interleave. The cluster suites are one binary
//! ([`CLUSTER`]) whose tests share one control plane: it runs
//! [`cluster_threads`] of its tests at once.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cargo_metadata::Message;

use crate::process::cargo;

/// How many test binaries run at once: `$WASMOP_TEST_JOBS`, else 2, one per
/// core: the binaries are CPU-bound, so a third adds no throughput, and it
/// starves the fault suite's restarted control plane past its timeouts.
pub fn parallel() -> Result<usize> {
    positive("WASMOP_TEST_JOBS", 2)
}

/// The positive number in the environment variable `var`, else `default`.
fn positive(var: &str, default: usize) -> Result<usize> {
    match std::env::var(var) {
        Ok(n) => n
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("{var}={n:?}: expected a positive number")),
        Err(_) => Ok(default),
    }
}

/// The cluster suites' test binary (`host/tests/cluster`), one module per
/// area (`sandbox::`, `cache_operator::rust::`), all on one control plane.
pub const CLUSTER: &str = "cluster";

/// How many of [`CLUSTER`]'s tests run at once: `$WASMOP_CLUSTER_THREADS`,
/// else 4. Its tests mostly wait on controllers, leases and deadlines, so
/// more of them than the 2 cores run at once; the wall times of the whole
/// binary on 2 cores are in docs/benchmarks.md (more threads make the
/// machine the bottleneck, and the timed tests run alone anyway).
pub fn cluster_threads() -> Result<usize> {
    positive("WASMOP_CLUSTER_THREADS", 4)
}

/// The test binaries that take longest, started first so the run does not
/// end waiting on one of them alone.
const SLOWEST_FIRST: &[&str] = &[CLUSTER, "faults", "new"];

/// The binaries that each drive a control plane of their own with many
/// hosts (the cluster suites, the fault suite): never run beside each
/// other, the others beside them. Side by side they took 1,046 s and
/// 1,229 s on 2 cores (fresh run, 2026-12-08), alone 606 s and 412 s.
const APART: &[&str] = &[CLUSTER, "faults"];

/// Whether `suite` is one of [`APART`] (a filtered rerun is short and
/// runs anywhere).
fn apart(suite: &Suite) -> bool {
    !suite.rerun && APART.contains(&suite.name.as_str())
}

/// The first of `waiting` that may start beside `running`: not one of
/// [`APART`] while another of them runs.
fn next_startable<'a>(
    waiting: impl IntoIterator<Item = &'a Suite>,
    running: &[&Suite],
) -> Option<usize> {
    let apart_running = running.iter().any(|r| apart(r));
    waiting
        .into_iter()
        .position(|suite| !(apart_running && apart(suite)))
}

/// One test binary to run.
pub struct Suite {
    /// What the output calls it: `<package> <target>`, and what differs.
    pub label: String,
    /// The target's name (`faults`, `cache_operator`, the crate for unit tests).
    pub name: String,
    /// The target's kind: `test` for an integration test, `lib`, `bin`…
    kind: String,
    executable: PathBuf,
    dir: PathBuf,
    args: Vec<String>,
    env: Vec<(String, OsString)>,
    /// Whether this is a binary run again with more arguments.
    rerun: bool,
}

impl Suite {
    /// Whether this is an integration test (a file of a package's `tests/`).
    pub fn is_integration(&self) -> bool {
        self.kind == "test"
    }

    /// This binary run with `envs` in its environment too.
    pub fn with_env(mut self, envs: &[(String, OsString)]) -> Self {
        self.env.extend(envs.iter().cloned());
        self
    }

    /// The same binary run again with more arguments and environment.
    pub fn with(&self, label: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self {
            label: format!("{} ({label})", self.label),
            name: self.name.clone(),
            kind: self.kind.clone(),
            executable: self.executable.clone(),
            dir: self.dir.clone(),
            rerun: true,
            args: self
                .args
                .iter()
                .cloned()
                .chain(args.iter().map(|a| (*a).to_owned()))
                .collect(),
            env: self
                .env
                .iter()
                .cloned()
                .chain(
                    env.iter()
                        .map(|(k, v)| ((*k).to_owned(), OsString::from(v))),
                )
                .collect(),
        }
    }
}

/// Builds every test binary of the workspace (as `cargo test --workspace`
/// would build them), without running them; each runs with no more
/// environment than xtask's until [`Suite::with_env`]. [`CLUSTER`] is to
/// run [`cluster_threads`] tests at once.
pub fn build() -> Result<Vec<Suite>> {
    let threads = cluster_threads()?.to_string();
    let mut command = cargo(&[
        "test",
        "--workspace",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    command.stdout(Stdio::piped());
    eprintln!("    $ cargo test --workspace --no-run");
    let mut child = command.spawn().context("starting cargo test --no-run")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let mut suites = Vec::new();
    for message in Message::parse_stream(BufReader::new(stdout)) {
        let Message::CompilerArtifact(artifact) = message? else {
            continue;
        };
        let Some(executable) = artifact.executable.filter(|_| artifact.profile.test) else {
            continue;
        };
        let dir = artifact
            .manifest_path
            .parent()
            .context("a manifest path without a directory")?
            .as_std_path()
            .to_owned();
        let kind = artifact
            .target
            .kind
            .first()
            .map(|k| k.to_string())
            .unwrap_or_default();
        let package = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let args = if kind == "test" && artifact.target.name == CLUSTER {
            vec!["--test-threads".to_owned(), threads.clone()]
        } else {
            Vec::new()
        };
        suites.push(Suite {
            label: format!("{package}: {kind} {}", artifact.target.name),
            name: artifact.target.name.clone(),
            kind,
            executable: executable.into_std_path_buf(),
            dir,
            args,
            env: Vec::new(),
            rerun: false,
        });
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo test --workspace --no-run failed ({status})");
    }
    Ok(suites)
}

/// Runs `suites`, up to `parallel` at once, the [`SLOWEST_FIRST`] first,
/// the [`APART`] ones one after the other.
/// Every suite runs even after one fails; the error names each that failed.
pub fn run(mut suites: Vec<Suite>, parallel: usize, logs: &Path) -> Result<()> {
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    // A binary run again (`Suite::with`) is a filtered rerun: after the
    // slowest, not beside its own first run.
    suites.sort_by_key(|s| {
        SLOWEST_FIRST
            .iter()
            .position(|n| *n == s.name)
            .filter(|_| !s.rerun)
            .unwrap_or(SLOWEST_FIRST.len())
    });
    let total = suites.len();
    eprintln!("    {total} test binaries, {parallel} at a time");
    let started = Instant::now();
    let mut waiting: VecDeque<(usize, Suite)> = suites.into_iter().enumerate().collect();
    let mut running: Vec<Running> = Vec::new();
    let mut failed = Vec::new();
    while !waiting.is_empty() || !running.is_empty() {
        while running.len() < parallel {
            let now: Vec<&Suite> = running.iter().map(|r| &r.suite).collect();
            let Some(next) = next_startable(waiting.iter().map(|(_, s)| s), &now) else {
                break;
            };
            let (i, suite) = waiting.remove(next).expect("a waiting suite");
            running.push(Running::start(suite, &logs.join(format!("{i}.log")))?);
        }
        std::thread::sleep(Duration::from_millis(100));
        let mut i = 0;
        while i < running.len() {
            match running[i].child.try_wait()? {
                None => i += 1,
                Some(status) => {
                    let done = running.swap_remove(i);
                    let output = std::fs::read_to_string(&done.log).unwrap_or_default();
                    eprint!("{output}");
                    let took = done.started.elapsed().as_secs_f64();
                    if status.success() {
                        eprintln!("--> {}: ok ({took:.1}s)", done.suite.label);
                    } else {
                        eprintln!("--> {}: FAILED ({status}, {took:.1}s)", done.suite.label);
                        failed.push(done.suite.label);
                    }
                }
            }
        }
    }
    eprintln!(
        "--> {total} test binaries in {:.1}s, {} failed",
        started.elapsed().as_secs_f64(),
        failed.len()
    );
    if !failed.is_empty() {
        bail!("failed: {}", failed.join("; "));
    }
    Ok(())
}

struct Running {
    suite: Suite,
    child: Child,
    log: PathBuf,
    started: Instant,
}

impl Running {
    fn start(suite: Suite, log: &Path) -> Result<Self> {
        eprintln!("--> {}: started", suite.label);
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&suite.executable)
            .args(&suite.args)
            .envs(suite.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&suite.dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", suite.executable.display()))?;
        Ok(Self {
            suite,
            child,
            log: log.to_owned(),
            started: Instant::now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(name: &str, rerun: bool) -> Suite {
        Suite {
            label: name.to_owned(),
            name: name.to_owned(),
            kind: "test".to_owned(),
            executable: PathBuf::new(),
            dir: PathBuf::new(),
            args: Vec::new(),
            env: Vec::new(),
            rerun,
        }
    }

    #[test]
    fn the_cluster_and_fault_suites_never_start_beside_each_other() {
        let cluster = suite(CLUSTER, false);
        let faults = suite("faults", false);
        let new = suite("new", false);
        let rerun = suite(CLUSTER, true);
        let waiting = [&faults, &new, &rerun];
        assert_eq!(next_startable(waiting, &[]), Some(0));
        assert_eq!(next_startable(waiting, &[&cluster]), Some(1));
        assert_eq!(next_startable([&faults, &rerun], &[&cluster]), Some(1));
        assert_eq!(next_startable([&faults], &[&cluster]), None);
        assert_eq!(next_startable([&cluster], &[&new]), Some(0));
    }
}
