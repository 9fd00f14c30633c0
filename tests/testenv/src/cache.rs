//! Directories built once into the user's cache and reused: the Go builds
//! of the control plane and the registry, the guests' language toolchains.
//!
//! Each lives at `${XDG_CACHE_HOME:-$HOME/.cache}/wasmop/<name>/<key>`, where
//! the key covers everything its content depends on. It is filled in a
//! staging directory that is renamed into place, and a lock file keeps two
//! processes from filling it at once.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// The directory `<cache>/wasmop/<name>/<key>`, made by `fill` (given an
/// empty staging directory) unless `complete` says it already holds
/// everything.
pub fn ensure_dir(
    name: &str,
    key: &str,
    complete: impl Fn(&Path) -> bool,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let root = cache_root()?.join("wasmop").join(name);
    let dir = root.join(key);
    if complete(&dir) {
        return Ok(dir);
    }
    fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let lock_path = root.join(format!("{key}.lock"));
    let lock =
        File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        eprintln!(
            "{name}: another process is filling {}; waiting for it",
            dir.display()
        );
        lock.lock()
            .with_context(|| format!("waiting for {}", lock_path.display()))?;
    }
    // Someone else may have finished while we waited.
    if complete(&dir) {
        return Ok(dir);
    }
    // Holding the lock, nobody else is filling it: staging directories left
    // by an interrupted run can go.
    for entry in fs::read_dir(&root)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("{key}.tmp-"))
        {
            fs::remove_dir_all(entry.path())?;
        }
    }
    let staging = root.join(format!("{key}.tmp-{}", std::process::id()));
    fs::create_dir_all(&staging)?;
    if let Err(err) = fill(&staging) {
        let _ = fs::remove_dir_all(&staging);
        return Err(err);
    }
    if dir.exists() {
        // Incomplete (files deleted by hand?): replace it whole.
        fs::remove_dir_all(&dir)?;
    }
    fs::rename(&staging, &dir)
        .with_context(|| format!("moving {} to {}", staging.display(), dir.display()))?;
    eprintln!("{name}: ready in {}", dir.display());
    Ok(dir)
}

/// A directory's key: the first 16 hex digits of the sha256 of `files` in
/// `dir` (each followed by a NUL byte), then of `then` as it is (versions,
/// flags): enough to tell contents apart, short enough to read.
pub fn key_of(dir: &Path, files: &[&str], then: &[&str]) -> Result<String> {
    let mut hash = Sha256::new();
    for file in files {
        let path = dir.join(file);
        hash.update(fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
        hash.update([0]);
    }
    for part in then {
        hash.update(part.as_bytes());
    }
    Ok(hex::encode(&hash.finalize()[..8]))
}

fn cache_root() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .context("neither XDG_CACHE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache"))
}
