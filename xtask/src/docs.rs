//! `cargo xtask docs-test`: every shell block of the README and of docs/
//! that a user is meant to run, run in order against a local control plane.
//!
//! A document's ```sh blocks run one after another, each with `bash -e`,
//! from the repository's root, with `KUBECONFIG` pointing at a control
//! plane started for that document (one per document, so documents do not
//! see each other's objects) and `target/debug` first on `PATH` (so
//! `wasmop` is the build under test). The line right before a block may
//! say how it runs:
//! - `<!-- docs-test: skip: <why> -->`: not run (a real cluster, a remote
//!   registry, an interactive terminal); the reason is required;
//! - `<!-- docs-test: background: <text> -->`: started in the background,
//!   and the next block runs once its output shows `<text>`; it is stopped
//!   when the document ends.
//!
//! Blocks in other fences (```text, ```yaml, ```console) are not commands.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use wasmop_testenv::TestEnv;

/// How long one block may run, and a background block may take to show
/// its text.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(900);

/// How a block runs.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Run,
    Skip(String),
    Background(String),
}

/// One ```sh block of a document.
#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    mode: Mode,
    script: String,
}

/// The shell blocks of `text`, in order.
fn blocks(text: &str) -> Result<Vec<Block>> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    let mut previous = "";
    while let Some((i, line)) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            let indent = line.len() - trimmed.len();
            let mut script = String::new();
            let mut closed = false;
            for (_, body) in lines.by_ref() {
                if body.trim_start().starts_with("```") {
                    closed = true;
                    break;
                }
                script.push_str(body.get(indent..).unwrap_or(body.trim_start()));
                script.push('\n');
            }
            if !closed {
                bail!("line {}: a code block is never closed", i + 1);
            }
            if lang.trim() == "sh" {
                out.push(Block {
                    line: i + 1,
                    mode: mode(previous).with_context(|| format!("line {}", i + 1))?,
                    script,
                });
            }
            previous = "";
            continue;
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    Ok(out)
}

/// The mode a marker line gives the block after it.
fn mode(marker: &str) -> Result<Mode> {
    let Some(rest) = marker
        .trim()
        .strip_prefix("<!-- docs-test:")
        .and_then(|r| r.strip_suffix("-->"))
    else {
        return Ok(Mode::Run);
    };
    let rest = rest.trim();
    if let Some(why) = rest.strip_prefix("skip:") {
        let why = why.trim();
        if why.is_empty() {
            bail!("a skipped block must say why");
        }
        return Ok(Mode::Skip(why.to_owned()));
    }
    if let Some(text) = rest.strip_prefix("background:") {
        return Ok(Mode::Background(text.trim().to_owned()));
    }
    bail!("unknown docs-test mark {marker:?}")
}

/// The documents whose blocks run: the README, then docs/ in name order.
fn documents(root: &Path) -> Result<Vec<PathBuf>> {
    let mut docs = vec![root.join("README.md")];
    let mut rest: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    rest.sort();
    docs.extend(rest);
    Ok(docs)
}

/// Runs every document's blocks, with the TypeScript and Python
/// toolchains the project pins (a new guest project builds with them).
pub fn run() -> Result<()> {
    let root = crate::guests::workspace_root();
    crate::guests::build_all()?;
    let toolchains = crate::languages::Toolchains::ensure(&root)?;
    let tools: Vec<(String, std::ffi::OsString)> = toolchains
        .env()
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
        .collect();
    crate::process::run(&mut crate::process::cargo(&[
        "build",
        "-p",
        "wasmop-host",
        "--bin",
        "wasmop",
    ]))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut ran = 0;
    let mut skipped = 0;
    for doc in documents(&root)? {
        let shown = doc
            .strip_prefix(&root)
            .unwrap_or(&doc)
            .display()
            .to_string();
        let text = std::fs::read_to_string(&doc).with_context(|| format!("reading {shown}"))?;
        let blocks = blocks(&text).with_context(|| shown.clone())?;
        if blocks
            .iter()
            .all(|b| !matches!(b.mode, Mode::Run | Mode::Background(_)))
        {
            skipped += blocks.len();
            continue;
        }
        eprintln!("--> {shown}: {} shell blocks", blocks.len());
        let env = runtime.block_on(TestEnv::start())?;
        let result = run_document(&root, &shown, &blocks, &env, &tools);
        drop(env);
        let (r, s) = result?;
        ran += r;
        skipped += s;
    }
    eprintln!("--> docs: {ran} blocks ran, {skipped} skipped (each says why)");
    Ok(())
}

fn run_document(
    root: &Path,
    doc: &str,
    blocks: &[Block],
    env: &TestEnv,
    tools: &[(String, std::ffi::OsString)],
) -> Result<(usize, usize)> {
    let kubeconfig = env.kubeconfig_path();
    let path = format!(
        "{}:{}",
        crate::guests::target_dir().join("debug").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut background: Vec<Child> = Vec::new();
    let result = (|| {
        let (mut ran, mut skipped) = (0, 0);
        for block in blocks {
            let log = env
                .temp_dir()
                .join(format!("docs-block-{}.log", block.line));
            let command = || {
                let file = std::fs::File::create(&log)?;
                let mut command = Command::new("bash");
                command
                    .args(["-e", "-o", "pipefail", "-c", &block.script])
                    .current_dir(root)
                    .env("KUBECONFIG", kubeconfig)
                    .env("PATH", &path)
                    .envs(tools.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::null())
                    .stdout(file.try_clone()?)
                    .stderr(file);
                anyhow::Ok(command)
            };
            match &block.mode {
                Mode::Skip(why) => {
                    eprintln!("    {doc}:{} skipped: {why}", block.line);
                    skipped += 1;
                }
                Mode::Run => {
                    eprintln!("    {doc}:{} runs", block.line);
                    let mut child = command()?.spawn()?;
                    let status = wait(&mut child, BLOCK_TIMEOUT)?;
                    if !status.is_some_and(|s| s.success()) {
                        bail!(
                            "{doc}:{}: the block failed ({}):\n{}\n--- its output:\n{}",
                            block.line,
                            status.map_or("timed out".to_owned(), |s| s.to_string()),
                            block.script.trim_end(),
                            tail(&log)
                        );
                    }
                    ran += 1;
                }
                Mode::Background(ready) => {
                    eprintln!("    {doc}:{} starts in the background", block.line);
                    let mut child = command()?.process_group(0).spawn()?;
                    let started = Instant::now();
                    while !std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .contains(ready)
                    {
                        if let Some(status) = child.try_wait()? {
                            bail!(
                                "{doc}:{}: the background block exited ({status}) before it showed {ready:?}:\n{}",
                                block.line,
                                tail(&log)
                            );
                        }
                        if started.elapsed() > BLOCK_TIMEOUT {
                            let _ = child.kill();
                            bail!(
                                "{doc}:{}: the background block never showed {ready:?}:\n{}",
                                block.line,
                                tail(&log)
                            );
                        }
                        std::thread::sleep(Duration::from_millis(200));
                    }
                    background.push(child);
                    ran += 1;
                }
            }
        }
        Ok((ran, skipped))
    })();
    for mut child in background {
        // The whole process group: `cargo run` and what it started. A
        // system call, not `kill -TERM -<pgid>`: procps-ng 4.0.2's kill
        // reads that argument's first digit as the target, so a group id
        // starting with 1 became `kill(-1)`, every process of the user.
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_child(&child),
            rustix::process::Signal::TERM,
        );
        let _ = wait(&mut child, Duration::from_secs(30));
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

use std::os::unix::process::CommandExt as _;

fn wait(child: &mut Child, timeout: Duration) -> Result<Option<std::process::ExitStatus>> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_found_with_their_marks_and_other_fences_are_not_commands() {
        let text = "intro\n\n```sh\necho one\n```\n\n<!-- docs-test: skip: needs a real cluster -->\n```sh\nkubectl --context prod get nodes\n```\n<!-- docs-test: background: ready -->\n\n```sh\nwasmop run\n```\n```yaml\na: b\n```\n  ```sh\n  echo indented\n  ```\n";
        let found = blocks(text).unwrap();
        assert_eq!(found.len(), 4);
        assert_eq!(found[0].mode, Mode::Run);
        assert_eq!(found[0].script, "echo one\n");
        assert_eq!(found[1].mode, Mode::Skip("needs a real cluster".into()));
        assert_eq!(found[2].mode, Mode::Background("ready".into()));
        assert_eq!(found[3].script, "echo indented\n");
    }

    #[test]
    fn a_skip_without_a_reason_and_an_unknown_mark_are_refused() {
        assert!(blocks("<!-- docs-test: skip: -->\n```sh\nx\n```\n").is_err());
        assert!(blocks("<!-- docs-test: sometimes -->\n```sh\nx\n```\n").is_err());
        assert!(blocks("```sh\nnever closed\n").is_err());
    }
}
