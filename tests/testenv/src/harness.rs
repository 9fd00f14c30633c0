//! A test harness for `harness = false` test binaries that share one control
//! plane.
//!
//! Starting a control plane takes seconds, so a test binary starts one
//! [`TestEnv`] and runs all its tests against it, each in a namespace of its
//! own ([`TestEnv::create_namespace`]). [`libtest_mimic`] gives the usual
//! `cargo test` interface: name filters, `--exact`, `--skip`, `--list`,
//! `--test-threads`, panics reported as failures, and the closing
//! `test result: ok. N passed; 0 failed` line.
//!
//! If the control plane cannot start, every test fails with the reason;
//! with `WASMOP_SKIP_CLUSTER_TESTS=1` they are reported as ignored instead,
//! with a loud line on stderr saying why.
//!
//! A test that cannot share the control plane or the machine with the others
//! ([`Test::alone`]: it points a cluster-wide object at itself, or it times
//! a failover the machine's load would stretch) runs after them, by itself.

use std::process::ExitCode;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::TestEnv;

/// Set to `1` to report the tests as ignored instead of failed when the
/// control plane cannot start (e.g. on a machine without Go).
pub const SKIP_ENV: &str = "WASMOP_SKIP_CLUSTER_TESTS";

/// How long one test may run before it fails; generous, because the slowest
/// tests wait for controllers (a Deployment's Pods, garbage collection).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

type Body = Box<dyn FnOnce(Arc<TestEnv>) -> BoxFuture<'static, anyhow::Result<()>> + Send>;

/// One test: a name that reads as a sentence and an async body that gets the
/// shared control plane.
pub struct Test {
    name: String,
    timeout: Duration,
    alone: bool,
    body: Body,
}

impl Test {
    /// A test named `name` (e.g. `deleted_owner_takes_its_config_maps_with_it`)
    /// that runs `body`; it passes when `body` returns `Ok` within
    /// [`DEFAULT_TIMEOUT`].
    pub fn new<F, Fut>(name: impl Into<String>, body: F) -> Self
    where
        F: FnOnce(Arc<TestEnv>) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Self {
            name: name.into(),
            timeout: DEFAULT_TIMEOUT,
            alone: false,
            body: Box::new(move |env| Box::pin(body(env))),
        }
    }

    /// Replaces the [`DEFAULT_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs this test by itself, after every test that is not alone: for a
    /// test that points a cluster-wide object at itself (another test would
    /// find it so) or that times what the machine's load stretches (a
    /// failover, a handover). Each one waits for the tests running before it
    /// to end, and no test starts while it runs.
    pub fn alone(mut self) -> Self {
        self.alone = true;
        self
    }

    /// The test as part of `module`: named `<module>::<name>`, so one name
    /// filter selects a module's tests in a binary of several.
    pub fn in_module(mut self, module: &str) -> Self {
        self.name = format!("{module}::{}", self.name);
        self
    }

    /// The test's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A test's time limit, in seconds or as a `Duration`.
#[doc(hidden)]
pub struct Timeout(pub Duration);

impl From<u64> for Timeout {
    fn from(seconds: u64) -> Self {
        Self(Duration::from_secs(seconds))
    }
}

impl From<Duration> for Timeout {
    fn from(timeout: Duration) -> Self {
        Self(timeout)
    }
}

/// Builds a `Vec<`[`Test`]`>` from async functions
/// `async fn name(env: Arc<TestEnv>) -> anyhow::Result<()>`, each named after
/// its function; `name => 300` gives that test 300 seconds instead of
/// [`DEFAULT_TIMEOUT`], and `name => timeout` the `Duration` `timeout`;
/// `#[alone] name` runs it [alone](Test::alone).
///
/// ```no_run
/// use std::sync::Arc;
/// use wasmop_testenv::{TestEnv, harness};
///
/// async fn the_api_server_reports_its_version(env: Arc<TestEnv>) -> anyhow::Result<()> {
///     let version = env.client().apiserver_version().await?;
///     anyhow::ensure!(version.major == "1");
///     Ok(())
/// }
///
/// fn main() -> std::process::ExitCode {
///     harness::run(wasmop_testenv::tests![the_api_server_reports_its_version])
/// }
/// ```
#[macro_export]
macro_rules! tests {
    ($($(#[$mark:ident])* $test:ident $(=> $timeout:expr)?),* $(,)?) => {
        ::std::vec![$({
            let test = $crate::harness::Test::new(::std::stringify!($test), $test);
            $(let test = test.with_timeout($crate::harness::Timeout::from($timeout).0);)?
            $(let test = test.$mark();)*
            test
        }),*]
    };
}

/// Runs `tests` as a `cargo test` binary would: parses the command line,
/// starts one [`TestEnv`] if any selected test needs it, runs the tests
/// (in parallel, as `--test-threads` says; those [alone](Test::alone) after
/// the others, one at a time), stops the control plane and returns the exit
/// code for `main`.
///
/// The control plane is started on the calling thread, inside a tokio
/// multi-thread runtime that the tests share; it is stopped before this
/// returns, also when tests fail or panic.
pub fn run(tests: Vec<Test>) -> ExitCode {
    run_with(Arguments::from_args(), tests)
}

/// [`run`], one test at a time (unless `--test-threads` says otherwise):
/// for tests that fault the control plane they share.
pub fn run_in_sequence(tests: Vec<Test>) -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(1);
    run_with(args, tests)
}

fn run_with(args: Arguments, mut tests: Vec<Test>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("testenv: cannot build the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };

    let selected = tests.iter().filter(|test| {
        let probe = Trial::test(test.name.clone(), || Ok(()));
        !args.is_filtered_out(&probe) && !args.is_ignored(&probe)
    });
    let env: Option<Result<Arc<TestEnv>, String>> = if args.list || selected.count() == 0 {
        None
    } else {
        Some(
            runtime
                .block_on(TestEnv::start())
                .map(Arc::new)
                .map_err(|err| format!("{err:#}")),
        )
    };
    let skip = std::env::var_os(SKIP_ENV).is_some_and(|value| value == "1");
    if let Some(Err(reason)) = &env {
        announce_failed_start(reason, skip, tests.len());
    }

    let shared = Arc::new(env);
    // The test threads take tests in this order: those alone last (a stable
    // sort keeps the order of each part). While a test alone holds the
    // write side, no other runs; each other test holds the read side.
    tests.sort_by_key(|test| test.alone);
    let turns = Arc::new(RwLock::new(()));
    let trials = tests
        .into_iter()
        .map(|test| {
            let shared = Arc::clone(&shared);
            let turns = Arc::clone(&turns);
            let handle = runtime.handle().clone();
            let name = test.name.clone();
            Trial::ignorable_test(test.name, move || match &*shared {
                Some(Ok(env)) => {
                    // The whole control plane for a test alone, a share of
                    // it for the others, taken before the test's time
                    // starts. A test that panicked poisons the lock; the
                    // next runs all the same.
                    let (_alone, _shared);
                    if test.alone {
                        _alone = turns.write().unwrap_or_else(PoisonError::into_inner);
                    } else {
                        _shared = turns.read().unwrap_or_else(PoisonError::into_inner);
                    }
                    let body = (test.body)(Arc::clone(env));
                    let started = std::time::Instant::now();
                    // The timer must be made inside the runtime, hence the
                    // async block.
                    let outcome =
                        handle.block_on(async { tokio::time::timeout(test.timeout, body).await });
                    // What each test costs, for whoever orders or splits
                    // them (libtest-mimic prints no times).
                    eprintln!(
                        "testenv: {name} ran {:.1} s",
                        started.elapsed().as_secs_f64()
                    );
                    match outcome {
                        Ok(Ok(())) => Ok(Completion::Completed),
                        // The chain on one line, innermost cause last, and no
                        // backtrace (RUST_BACKTRACE=1 would bury the cause
                        // under hundreds of frames).
                        Ok(Err(err)) => Err(Failed::from(format!("{err:#}"))),
                        Err(_) => Err(Failed::from(format!("timed out after {:?}", test.timeout))),
                    }
                }
                Some(Err(_)) if skip => Ok(Completion::ignored_with(format!(
                    "control plane did not start, {SKIP_ENV}=1"
                ))),
                Some(Err(reason)) => Err(Failed::from(format!(
                    "the control plane did not start: {reason}"
                ))),
                None => Err(Failed::from(
                    "internal error: the control plane was not started for a selected test",
                )),
            })
        })
        .collect();

    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(Ok(env)) = &*shared {
        if conclusion.has_failed() {
            eprintln!(
                "testenv: some tests failed; the control plane's state:\n{}",
                env.diagnostics()
            );
        }
        env.shutdown();
    }
    drop(shared);
    drop(runtime);
    conclusion.exit_code()
}

fn announce_failed_start(reason: &str, skip: bool, count: usize) {
    let rule = "=".repeat(78);
    if skip {
        eprintln!(
            "{rule}\nSKIPPING {count} control-plane tests ({SKIP_ENV}=1): the Kubernetes control plane did not start:\n{reason}\n{rule}"
        );
    } else {
        eprintln!(
            "{rule}\nThe Kubernetes control plane did not start, so every test of this binary fails:\n{reason}\n\
             (Set {SKIP_ENV}=1 to report them as ignored instead.)\n{rule}"
        );
    }
}
