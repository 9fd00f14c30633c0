//! What a guest is built from: a digest of its inputs, kept beside the
//! component as `<name>.inputs`, so a build whose inputs have not changed is
//! skipped. Cargo's own freshness check cannot do this for the
//! cache-operator's flavors: a cdylib's file name carries no hash of its
//! features, so each flavor's build overwrites the last one's output and
//! Cargo rebuilds every flavor every time.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

/// What a build or its tests leave in a source tree: installed tools,
/// generated bindings, caches, Cargo's output.
pub const NOT_INPUTS: &[&str] = &[
    "node_modules",
    "generated",
    ".tools",
    "__pycache__",
    ".pytest_cache",
    "target",
];

/// Adds every file under `dir` to `hash`: its path relative to `root` and
/// its bytes, each followed by a NUL byte, in path order, leaving out
/// [`NOT_INPUTS`].
pub fn hash_tree(hash: &mut Sha256, root: &Path, dir: &Path) -> Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap_or_default();
        if NOT_INPUTS.iter().any(|skip| name == *skip) {
            continue;
        }
        if path.is_dir() {
            hash_tree(hash, root, &path)?;
        } else {
            hash_file(hash, root, &path)?;
        }
    }
    Ok(())
}

/// Adds one file to `hash` as [`hash_tree`] does.
pub fn hash_file(hash: &mut Sha256, root: &Path, path: &Path) -> Result<()> {
    let relative = path.strip_prefix(root).unwrap_or(path);
    hash.update(relative.as_os_str().as_encoded_bytes());
    hash.update([0]);
    hash.update(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?);
    hash.update([0]);
    Ok(())
}

/// What `command` prints, trimmed: a tool's version, part of what a build
/// is made from.
pub fn tool_version(command: &mut Command) -> Result<String> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .with_context(|| format!("running {shown}: is it on PATH?"))?;
    anyhow::ensure!(output.status.success(), "{shown} failed");
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The record that a component was built from inputs with a given digest.
pub struct Stamp {
    path: PathBuf,
    digest: String,
}

impl Stamp {
    /// `None` when `out` exists and was built from inputs with `digest`;
    /// else the stamp to [`Stamp::write`] once `out` is built again. The old
    /// stamp is removed first, so a build that fails half-way does not
    /// leave `out` looking current.
    pub fn stale(out: &Path, digest: String) -> Option<Self> {
        let path = out.with_extension("inputs");
        if out.is_file() && std::fs::read_to_string(&path).is_ok_and(|kept| kept == digest) {
            return None;
        }
        let _ = std::fs::remove_file(&path);
        Some(Self { path, digest })
    }

    /// Records that the component is now built from these inputs.
    pub fn write(self) -> Result<()> {
        std::fs::write(&self.path, self.digest)
            .with_context(|| format!("could not write {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(root: &Path) -> String {
        let mut hash = Sha256::new();
        hash_tree(&mut hash, root, root).unwrap();
        format!("{:x}", hash.finalize())
    }

    #[test]
    fn a_tree_digest_follows_sources_and_ignores_what_builds_leave() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/index.ts"), "export const a = 1;").unwrap();
        std::fs::write(root.join("package.json"), "{}").unwrap();
        let first = digest(root);
        assert_eq!(digest(root), first, "the same tree, the same digest");

        for left in NOT_INPUTS {
            std::fs::create_dir_all(root.join("src").join(left)).unwrap();
            std::fs::write(root.join("src").join(left).join("x"), "built").unwrap();
        }
        assert_eq!(digest(root), first, "{NOT_INPUTS:?} are not inputs");

        std::fs::write(root.join("src/index.ts"), "export const a = 2;").unwrap();
        let edited = digest(root);
        assert_ne!(edited, first, "an edited source");

        std::fs::rename(root.join("src/index.ts"), root.join("src/main.ts")).unwrap();
        assert_ne!(digest(root), edited, "a renamed source");

        std::fs::write(root.join("src/more.ts"), "").unwrap();
        let added = digest(root);
        std::fs::remove_file(root.join("src/more.ts")).unwrap();
        assert_ne!(added, digest(root), "an added empty file");
    }

    #[test]
    fn a_current_stamp_skips_the_build_and_a_changed_digest_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("guest.wasm");
        assert!(
            Stamp::stale(&out, "a".into()).is_some(),
            "nothing built yet"
        );
        std::fs::write(&out, "wasm").unwrap();
        Stamp::stale(&out, "a".into()).unwrap().write().unwrap();
        assert!(
            Stamp::stale(&out, "a".into()).is_none(),
            "built from these inputs"
        );
        assert!(Stamp::stale(&out, "b".into()).is_some(), "inputs changed");
        assert!(
            Stamp::stale(&out, "a".into()).is_some(),
            "a stale check removes the stamp until the next build writes it"
        );
    }
}
