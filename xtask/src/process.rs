//! Running the commands a task is made of, loudly.

use std::ffi::OsString;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

/// A `cargo` command: the cargo that runs this xtask (`$CARGO`), so the
/// pinned toolchain is used throughout.
pub fn cargo(args: &[&str]) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(cargo);
    command.args(args);
    command
}

/// One numbered step of a task, printed as `==> [n/total] title` before it
/// runs and with its duration after.
pub struct Steps {
    total: usize,
    done: usize,
}

impl Steps {
    /// A task of `total` steps.
    pub fn new(total: usize) -> Self {
        Self { total, done: 0 }
    }

    /// Runs `body` as the next step; its error names the step.
    pub fn run<T>(&mut self, title: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
        self.done += 1;
        let step = format!("[{}/{}] {title}", self.done, self.total);
        eprintln!("==> {step}");
        let started = Instant::now();
        let value = body().with_context(|| format!("step {step} failed"))?;
        eprintln!("==> {step}: ok ({:.1}s)", started.elapsed().as_secs_f64());
        Ok(value)
    }
}

/// Runs `command` with inherited stdio and fails unless it exits with 0.
pub fn run(command: &mut Command) -> Result<()> {
    let shown = show(command);
    eprintln!("    $ {shown}");
    let status = command
        .status()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

fn show(command: &Command) -> String {
    let mut shown = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        shown.push(' ');
        shown.push_str(&arg.to_string_lossy());
    }
    shown
}
