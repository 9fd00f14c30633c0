//! Starting the control-plane processes so that none can outlive us.
//!
//! Three layers make sure no etcd or kube-apiserver is left behind:
//! 1. [`crate::TestEnv`]'s `Drop` (which also runs while a panic unwinds)
//!    kills and reaps every child;
//! 2. each child asks the kernel for SIGKILL when its parent dies
//!    (`PR_SET_PDEATHSIG`), which covers a test binary that is killed, calls
//!    `process::exit`, or aborts;
//! 3. each child runs in its own process group, so a Ctrl-C in the terminal
//!    reaches only our process, which then shuts the children down in order
//!    instead of them dying half-way through their own signal handling.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits,
//! not the process. Tokio's blocking-pool threads and libtest's test threads
//! come and go, so children are forked by one dedicated [`Spawner`] thread
//! that lives exactly as long as the control plane.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// A thread that forks every child of one control plane; see the module docs
/// for why.
pub(crate) struct Spawner {
    requests: Option<mpsc::Sender<SpawnRequest>>,
    thread: Option<JoinHandle<()>>,
}

impl Spawner {
    pub(crate) fn new() -> Result<Self> {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        let thread = std::thread::Builder::new()
            .name("testenv-spawner".to_owned())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn());
                }
            })
            .context("starting the process-spawner thread")?;
        Ok(Self {
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Starts `program` with `args` as component `name`, its stdout and stderr
    /// appended to `log`.
    pub(crate) fn spawn(
        &self,
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Component> {
        let output = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .process_group(0);
        die_with_parent(&mut command);

        let (reply, response) = mpsc::channel();
        self.requests
            .as_ref()
            .context("the spawner has shut down")?
            .send((command, reply))
            .map_err(|_| anyhow!("the spawner thread has stopped"))?;
        let child = response
            .recv()
            .map_err(|_| anyhow!("the spawner thread has stopped"))?
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        Ok(Component {
            name,
            program: program.to_owned(),
            args: args.to_vec(),
            child,
            log,
            exit: None,
        })
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.requests.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Makes the child receive SIGKILL when the thread that forked it exits.
#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe operations are allowed. It makes two raw system calls
    // (prctl, getppid) through rustix, which neither allocate nor take locks,
    // and builds an io::Error from a raw errno, which does not allocate.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent may have died between fork and prctl; then the
            // signal will never come, so do not start at all.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::SRCH.raw_os_error(),
                ));
            }
            Ok(())
        });
    }
}

/// One running control-plane process.
pub(crate) struct Component {
    /// Short name: `etcd`, `kube-apiserver`, ...
    pub(crate) name: &'static str,
    /// The command line it was started with, to start it again.
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    child: Child,
    /// Where its stdout and stderr go.
    pub(crate) log: PathBuf,
    exit: Option<ExitStatus>,
}

impl Component {
    /// `Some(status)` once the process has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills (SIGKILL) and reaps the process. The control plane holds no
    /// state worth a graceful shutdown: etcd's data dir is deleted next.
    pub(crate) fn kill(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            self.exit = self.child.wait().ok();
        }
    }

    /// Whether every thread of the process is stopped. A SIGSTOP stops the
    /// whole process only once the thread the kernel picked for it handles
    /// it; until then (milliseconds, on busy cores) the other threads run
    /// and may still answer.
    pub(crate) fn stopped(&self) -> bool {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid())) else {
            return false;
        };
        tasks.filter_map(Result::ok).all(|task| {
            std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                // The state is the first field after the command's closing
                // parenthesis: `T` stopped by a signal.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .is_some_and(|state| state == "T")
            })
        })
    }

    /// Sends `signal` to the process (for SIGSTOP and SIGCONT).
    pub(crate) fn signal(&mut self, signal: rustix::process::Signal) -> Result<()> {
        if let Some(status) = self.exited() {
            anyhow::bail!("{} has exited ({status})", self.name);
        }
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32)
            .context("the child has no pid")?;
        rustix::process::kill_process(pid, signal)
            .with_context(|| format!("sending {signal:?} to {}", self.name))
    }

    /// The last `lines` lines of its log, each prefixed with the component name.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let mut tail = VecDeque::with_capacity(lines);
        if let Ok(file) = File::open(&self.log) {
            for line in BufReader::new(file).lines().map_while(Result::ok) {
                if tail.len() == lines {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
        let mut out = String::new();
        for line in tail {
            out.push_str(self.name);
            out.push_str(" | ");
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

/// Whether a component's log says the port we picked for it was taken
/// (another process bound it between our check and the component's bind).
pub(crate) fn log_mentions_port_clash(log: &Path) -> bool {
    fs::read_to_string(log).is_ok_and(|text| text.contains("address already in use"))
}
