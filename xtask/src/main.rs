//! `cargo xtask <task>`: every routine task of wasmop has one name.
//!
//! This file only parses the command line and dispatches; each task lives in
//! its own module.

mod controlplane;
mod demo;
mod docs;
mod guests;
mod image;
mod inputs;
mod languages;
mod pipeline;
mod process;
mod suites;
mod toolchain;

use clap::{Parser, Subcommand};

/// wasmop's routine tasks.
#[derive(Parser)]
#[command(name = "cargo xtask", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Find or build the Kubernetes control-plane binaries (etcd,
    /// kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and
    /// print their directory.
    Controlplane,
    /// Start a control plane for manual use. Once it is ready, prints one
    /// line `export KUBECONFIG=<path>` on stdout; runs until SIGINT or
    /// SIGTERM, then removes everything it started.
    Testenv,
    /// Build the guest components (wasm32-unknown-unknown and wasm32-wasip2).
    BuildGuests,
    /// Build what the tests need (control-plane binaries, guests), check
    /// formatting and lints, and run every test of the workspace. Arguments
    /// are passed on to `cargo test --workspace`.
    Test {
        /// Passed to `cargo test --workspace`, e.g. `-- --nocapture`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the demo.
    Demo {
        /// Passed to the demo.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the host's benchmarks: all, or the one named first
    /// (`reconcile`, `swap`, `failover`, `soak`, `scale`, `admission`, `rollout`, `fairness`, `shards`, `metacontroller`), e.g. `cargo xtask bench failover`.
    Bench {
        /// A bench name, then arguments passed to `cargo bench -p wasmop-host`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build the host's container image as an OCI archive, without a
    /// container daemon: target/image/wasmop-<version>.oci.tar.
    Image,
    /// Run every shell block of the README and of docs/ that a user is
    /// meant to run, in order, against a local control plane.
    DocsTest,
    /// Lint the workspace and every guest: cargo clippy -D warnings.
    Lint,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Controlplane => controlplane::print_binaries(),
        Task::Testenv => controlplane::run_testenv(),
        Task::BuildGuests => guests::build_all(),
        Task::Test { args } => pipeline::test(&args),
        Task::Demo { args } => demo::run(args),
        Task::Bench { args } => pipeline::bench(&args),
        Task::Image => image::build().map(drop),
        Task::DocsTest => docs::run(),
        Task::Lint => pipeline::lint(),
    }
}
