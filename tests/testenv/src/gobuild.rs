//! Building binaries from a Go module of ours (`tests/controlplane`,
//! `tests/registry`), once, into a cache directory.
//!
//! The directory is `${XDG_CACHE_HOME:-$HOME/.cache}/wasmop/<name>/<key>`
//! ([`crate::cache::ensure_dir`]),
//! where the key covers go.mod, go.sum, `go version` and the build flags. A
//! build goes to a temporary directory that is renamed into place, and a lock
//! file keeps two processes from building at once.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A Go module of ours and the binaries built from it.
pub(crate) struct GoBuild {
    /// Cache subdirectory and the prefix of progress lines.
    pub(crate) name: &'static str,
    /// The module directory.
    pub(crate) module: PathBuf,
    /// The Go packages to build.
    pub(crate) packages: &'static [&'static str],
    /// The file names the build must leave in the output directory.
    pub(crate) outputs: &'static [&'static str],
    /// Files Go names after their package directory, and their names.
    pub(crate) renames: &'static [(&'static str, &'static str)],
    /// `-ldflags`.
    pub(crate) ldflags: String,
    /// `-tags`, when not empty.
    pub(crate) tags: &'static str,
    /// Measured on this project's 2-core machines: a cold build (empty Go
    /// build cache, modules already downloaded), printed so that whoever
    /// waits knows how long.
    pub(crate) cold_build_minutes: &'static str,
}

impl GoBuild {
    /// The cache directory holding every output, built first if any is
    /// missing.
    pub(crate) fn ensure(&self) -> Result<PathBuf> {
        let name = self.name;
        let module = self
            .module
            .canonicalize()
            .with_context(|| format!("Go module {name} not found at {}", self.module.display()))?;
        let go_version = go_version(name)?;
        let key = self.cache_key(&module, &go_version)?;
        let complete = |dir: &Path| self.outputs.iter().all(|o| dir.join(o).is_file());
        crate::cache::ensure_dir(name, &key, complete, |staging| {
            self.build(&module, staging, &go_version)
        })
    }

    /// The `go build` flags (everything but the output directory and the
    /// packages); part of the cache key. Every build strips DWARF at link
    /// time (`-s -w`), so the compiler is told not to make it: a cold build
    /// of the registry takes 13 % less CPU.
    fn flags(&self) -> Vec<&str> {
        let mut flags = vec![
            "build",
            "-v",
            "-trimpath",
            "-gcflags=all=-dwarf=false",
            "-ldflags",
            &self.ldflags,
        ];
        if !self.tags.is_empty() {
            flags.extend(["-tags", self.tags]);
        }
        flags
    }

    /// sha256 of go.mod, go.sum, the module's own `.go` files (a module of
    /// ours, like a peer, has some), the Go version and the build flags
    /// (first 16 hex digits: enough to tell builds apart, short enough to
    /// read).
    fn cache_key(&self, module: &Path, go_version: &str) -> Result<String> {
        let mut sources: Vec<String> = fs::read_dir(module)
            .with_context(|| format!("reading {}", module.display()))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".go"))
            .collect();
        sources.sort();
        let files: Vec<&str> = ["go.mod", "go.sum"]
            .into_iter()
            .chain(sources.iter().map(String::as_str))
            .collect();
        crate::cache::key_of(
            module,
            &files,
            &[
                go_version,
                "\0",
                "CGO_ENABLED=0 ",
                &self.flags().join(" "),
                &self.packages.join(" "),
            ],
        )
    }

    /// Runs `go build` into `out`, reporting progress, then applies the
    /// renames.
    fn build(&self, module: &Path, out: &Path, go_version: &str) -> Result<()> {
        let name = self.name;
        eprintln!(
            "{name}: building {} from {} with {go_version} (a cold build takes ~{} minutes on 2 cores; cached afterwards)",
            self.outputs.join(", "),
            module.display(),
            self.cold_build_minutes,
        );
        let started = Instant::now();
        let mut out_arg = out.as_os_str().to_owned();
        out_arg.push("/");
        let mut child = Command::new("go")
            .args(self.flags())
            .arg("-o")
            .arg(out_arg)
            .args(self.packages)
            .current_dir(module)
            .env("CGO_ENABLED", "0")
            .stdin(Stdio::null())
            // Our stdout may be a contract (`cargo xtask testenv` prints one
            // line there), so go's goes to stderr.
            .stdout(Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?))
            .stderr(Stdio::piped())
            .spawn()
            .context("starting `go build`")?;

        // `go build -v` prints one package path per line (thousands of them),
        // so they are summarised every 15 s; anything else (errors,
        // downloads) is shown as it comes.
        let log_path = out.join("build.log");
        let mut log = File::create(&log_path)?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut compiled = 0usize;
        let mut last_report = Instant::now();
        let mut tail: Vec<String> = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let line = line?;
            writeln!(log, "{line}")?;
            if line.contains(' ') {
                eprintln!("{name}: {line}");
                tail.push(line);
                if tail.len() > 40 {
                    tail.remove(0);
                }
            } else {
                compiled += 1;
            }
            if last_report.elapsed() >= Duration::from_secs(15) {
                eprintln!(
                    "{name}: compiled {compiled} packages so far ({})",
                    minutes(started.elapsed())
                );
                last_report = Instant::now();
            }
        }
        let status = child.wait()?;
        if !status.success() {
            bail!(
                "`go build` of {name} failed ({status}) after {}; last messages:\n{}",
                minutes(started.elapsed()),
                tail.join("\n")
            );
        }
        fs::remove_file(&log_path)?;
        for (go_name, wanted) in self.renames {
            let built = out.join(go_name);
            if built.is_file() {
                fs::rename(&built, out.join(wanted))?;
            }
        }
        for output in self.outputs {
            if !out.join(output).is_file() {
                bail!(
                    "`go build` succeeded but {} is missing",
                    out.join(output).display()
                );
            }
        }
        eprintln!(
            "{name}: go build finished in {} ({compiled} packages compiled, the rest from Go's build cache)",
            minutes(started.elapsed())
        );
        Ok(())
    }
}

/// The file a `TEST_ASSET_*` variable names instead of a build, if it is
/// set; an error when it names no file.
pub(crate) fn prebuilt(variable: &str) -> Result<Option<PathBuf>> {
    let Some(path) = std::env::var_os(variable).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        bail!("{variable}={} does not name a file", path.display());
    }
    Ok(Some(path))
}

fn go_version(name: &str) -> Result<String> {
    let output = Command::new("go").arg("version").output().with_context(|| {
        format!("running `go version`: the Go toolchain (go 1.26 or newer) must be on PATH to build {name}")
    })?;
    if !output.status.success() {
        bail!(
            "`go version` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn minutes(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    format!("{}m{:02}s", secs / 60, secs % 60)
}
