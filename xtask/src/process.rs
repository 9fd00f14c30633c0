//! Running the commands a task is made of, loudly.

use std::ffi::OsString;
use std::path::PathBuf;
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
/// runs and with its duration after; [`Steps::summary`] prints them all.
pub struct Steps {
    total: usize,
    done: usize,
    started: Instant,
    times: Vec<(String, f64)>,
}

impl Steps {
    /// A task of `total` steps.
    pub fn new(total: usize) -> Self {
        Self {
            total,
            done: 0,
            started: Instant::now(),
            times: Vec::new(),
        }
    }

    /// Runs `body` as the next step; its error names the step.
    pub fn run<T>(&mut self, title: &str, body: impl FnOnce() -> Result<T>) -> Result<T> {
        self.done += 1;
        let step = format!("[{}/{}] {title}", self.done, self.total);
        eprintln!("==> {step}");
        let started = Instant::now();
        let value = body().with_context(|| format!("step {step} failed"))?;
        let took = started.elapsed().as_secs_f64();
        eprintln!("==> {step}: ok ({took:.1}s)");
        let short = title.split(':').next().unwrap_or(title);
        self.times
            .push((format!("[{}/{}] {short}", self.done, self.total), took));
        Ok(value)
    }

    /// Each step's time and the whole task's, one line each.
    pub fn summary(&self) {
        eprintln!("==> step times:");
        for (step, took) in &self.times {
            eprintln!("    {took:>8.1}s  {step}");
        }
        eprintln!("    {:>8.1}s  in all", self.started.elapsed().as_secs_f64());
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

/// Commands run one after another on a thread of their own, at the lowest
/// CPU priority, their output in a log file: work the task needs before it
/// ends but nothing waits on meanwhile (on Linux a thread's nice value is
/// its own, and the processes it starts inherit it).
pub struct Background {
    title: String,
    log: PathBuf,
    thread: std::thread::JoinHandle<Result<f64>>,
}

impl Background {
    /// Starts `commands` (each with what it is, for its error) in order,
    /// their output appended to `log`; the first that fails ends the run.
    pub fn start(title: &str, log: PathBuf, commands: Vec<(String, Command)>) -> Result<Self> {
        if let Some(parent) = log.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        eprintln!(
            "    started in the background (nice 19): {title}; its output in {}",
            log.display()
        );
        let thread = std::thread::spawn(move || -> Result<f64> {
            let started = Instant::now();
            rustix::process::setpriority_process(None, 19)
                .context("lowering the background thread's priority")?;
            for (what, mut command) in commands {
                use std::io::Write as _;
                let mut out = out.try_clone()?;
                writeln!(out, "$ {}", show(&command))?;
                let status = command
                    .stdout(out.try_clone()?)
                    .stderr(out)
                    .stdin(std::process::Stdio::null())
                    .status()
                    .with_context(|| format!("could not start {what}"))?;
                if !status.success() {
                    bail!("{what} failed ({status})");
                }
            }
            Ok(started.elapsed().as_secs_f64())
        });
        Ok(Self {
            title: title.to_owned(),
            log,
            thread,
        })
    }

    /// Waits for the commands; on a failure, prints their log.
    pub fn wait(self) -> Result<()> {
        let started = Instant::now();
        let result = self
            .thread
            .join()
            .map_err(|_| anyhow::anyhow!("the background thread panicked"))?;
        match result {
            Ok(took) => {
                eprintln!(
                    "    {}: ok ({took:.1}s in the background, {:.1}s waited for)",
                    self.title,
                    started.elapsed().as_secs_f64()
                );
                Ok(())
            }
            Err(e) => {
                eprint!("{}", std::fs::read_to_string(&self.log).unwrap_or_default());
                Err(e.context(format!("{} (log: {})", self.title, self.log.display())))
            }
        }
    }
}
