//! The Rust targets the guests are built for, installed by the project.
//!
//! `rust-toolchain.toml` lists them, but rustup adds a toolchain's targets
//! only when it installs that toolchain: where the pinned toolchain is
//! already present (a machine image that links it to stable, say), the
//! targets are missing and the first guest build fails with "can't find
//! crate for std". So every task that builds guests calls [`ensure_targets`]
//! first: it asks rustup which targets the active toolchain has and adds the
//! missing ones, printing a line for each. Idempotent: when all are
//! installed it prints one line and runs one `rustup` query.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The `targets` of `rust-toolchain.toml` in the workspace root.
pub fn pinned_targets(root: &Path) -> Result<Vec<String>> {
    let path = root.join("rust-toolchain.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let doc: toml::Table = text
        .parse()
        .with_context(|| format!("parsing {}", path.display()))?;
    Ok(doc
        .get("toolchain")
        .and_then(|t| t.get("targets"))
        .and_then(|t| t.as_array())
        .map(|targets| {
            targets
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

/// Adds the targets of `rust-toolchain.toml` the active toolchain lacks.
pub fn ensure_targets(root: &Path) -> Result<()> {
    ensure(root, &pinned_targets(root)?)
}

/// Adds `target` if the active toolchain lacks it (the image's musl target,
/// which only `cargo xtask image` needs).
pub fn ensure_target(root: &Path, target: &str) -> Result<()> {
    ensure(root, &[target.to_owned()])
}

fn ensure(root: &Path, wanted: &[String]) -> Result<()> {
    let installed = rustup(root, &["target", "list", "--installed"])?;
    let installed: Vec<&str> = installed.lines().map(str::trim).collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|t| !installed.contains(&t.as_str()))
        .collect();
    if missing.is_empty() {
        eprintln!("--> rust targets installed: {}", wanted.join(", "));
        return Ok(());
    }
    for target in missing {
        eprintln!("--> installing the rust target {target}");
        rustup(root, &["target", "add", target])
            .with_context(|| format!("installing the rust target {target}"))?;
    }
    Ok(())
}

/// Runs `rustup <args>` in `root` (so the pinned toolchain is the active
/// one) and returns its stdout.
fn rustup(root: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("rustup")
        .args(args)
        .current_dir(root)
        // Inside `cargo xtask`, cargo's toolchain variable would win over
        // rust-toolchain.toml; rustup should resolve it from the file.
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .context("running rustup (is it on PATH?)")?;
    if !output.status.success() {
        bail!(
            "`rustup {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_targets_are_the_guests_targets() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let targets = pinned_targets(&root).unwrap();
        assert!(targets.iter().any(|t| t == "wasm32-unknown-unknown"));
        assert!(targets.iter().any(|t| t == "wasm32-wasip2"));
    }
}
