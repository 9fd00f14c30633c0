//! Rust, TypeScript and Python guests: each built by its own toolchain, as
//! the project `wasmop new` makes says in its README, the component then
//! copied (Rust) or written (TypeScript, Python) to the output path.
//!
//! - Rust: `cargo build --release --target wasm32-unknown-unknown`, the
//!   crate's `.wasm` from the target directory `cargo metadata` names;
//! - TypeScript: `node build.mjs component src/index.ts --out <out>`, the
//!   TypeScript SDK's build script the project carries;
//! - Python: `python3 build.py component . --out <out>`, the Python SDK's.

use std::path::Path;
use std::process::Command;

use super::{Built, Error, Lang, Options, Result, run};

/// Builds the `lang` guest in `dir` into `out`.
pub(super) fn build(lang: Lang, dir: &Path, out: &Path, options: &Options) -> Result<Built> {
    let mut steps = Vec::new();
    let world = match lang {
        Lang::Rust => {
            if options.http {
                return Err(Error::Project(
                    "--http is for Go, TypeScript and Python guests: a Rust guest imports wasi:http through the SDK's feature `http`".into(),
                ));
            }
            let built = rust_artifact(dir)?;
            run(
                Command::new(cargo())
                    .args(["build", "--release", "--target", "wasm32-unknown-unknown"])
                    .current_dir(dir),
                "cargo build",
                &mut steps,
            )?;
            std::fs::copy(&built, out).map_err(Error::io("copying", &built))?;
            "as its crate declares".to_owned()
        }
        Lang::TypeScript | Lang::Python => {
            let (program, script, entry): (&str, &str, &[&str]) = match lang {
                Lang::TypeScript => ("node", "build.mjs", &["src/index.ts"]),
                _ => ("python3", "build.py", &["."]),
            };
            if !dir.join(script).is_file() {
                return Err(Error::Project(format!(
                    "{} has no {script}: a guest `wasmop new --lang {}` makes carries its SDK's build script",
                    dir.display(),
                    if lang == Lang::TypeScript {
                        "ts"
                    } else {
                        "python"
                    }
                )));
            }
            let mut command = Command::new(program);
            command
                .arg(script)
                .arg("component")
                .args(entry)
                .arg("--out")
                .arg(out)
                .current_dir(dir);
            if options.http {
                command.arg("--http");
            }
            if let Some(wit) = &options.wasi_wit {
                command.arg("--wasi-wit").arg(wit);
            }
            if let Some(wit) = &options.wit {
                command.arg("--wit").arg(wit);
            }
            run(&mut command, script, &mut steps)?;
            "from the entry's exports".to_owned()
        }
        Lang::Go => unreachable!("Go guests are built by build::go"),
    };
    Ok(Built {
        lang,
        out: out.to_owned(),
        bytes: 0,
        world,
        steps,
    })
}

/// The cargo that runs this (under `cargo run`), else the one on PATH.
fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// Where `cargo build --release --target wasm32-unknown-unknown` leaves
/// the crate in `dir`: its target directory and library name, from
/// `cargo metadata`.
fn rust_artifact(dir: &Path) -> Result<std::path::PathBuf> {
    let mut command = Command::new(cargo());
    command
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(dir);
    let output = command.output().map_err(|e| Error::Command {
        command: "cargo metadata".into(),
        status: e.to_string(),
        detail: String::new(),
    })?;
    if !output.status.success() {
        return Err(Error::Command {
            command: "cargo metadata".into(),
            status: output.status.to_string(),
            detail: format!(": {}", String::from_utf8_lossy(&output.stderr).trim()),
        });
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| Error::Project(format!("cargo metadata printed no JSON: {e}")))?;
    let manifest = dir.join("Cargo.toml");
    let package = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["manifest_path"].as_str().map(Path::new) == Some(manifest.as_path()))
        .ok_or_else(|| {
            Error::Project(format!("{} is not a crate's manifest", manifest.display()))
        })?;
    let name = package["name"]
        .as_str()
        .unwrap_or_default()
        .replace('-', "_");
    let target = metadata["target_directory"].as_str().unwrap_or("target");
    Ok(Path::new(target)
        .join("wasm32-unknown-unknown/release")
        .join(format!("{name}.wasm")))
}
