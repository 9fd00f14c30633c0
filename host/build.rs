//! Puts the Go helper packages that `wit-bindgen-go` generates bindings
//! against (`go.bytecodealliance.org/pkg/wit/{async,runtime,types}`) into the
//! binary, for `wasmop build` to write beside a Go guest's bindings.
//!
//! The crate carries their source (`src/pkg/` of its package) but does not
//! expose it, and the Go module proxy does not serve that module; so this
//! script finds the crate's directory with `cargo metadata` (the lock file
//! as it is) and writes `go_pkg.rs` into `OUT_DIR`: one
//! `(path, text)` per file, each `include_str!`'d from the crate.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages of the module the generated bindings import.
const PACKAGES: &[&str] = &["wit/async", "wit/runtime", "wit/types"];

fn main() {
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let cargo = std::env::var_os("CARGO").expect("cargo sets CARGO");
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    // The lock file as it is; only this platform's packages, which the
    // build has (or fetches as any build would).
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            &target,
        ])
        .current_dir(&manifest_dir)
        .output()
        .expect("running cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "wit-bindgen-go")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("wit-bindgen-go is a dependency of this crate");
    let pkg = Path::new(manifest)
        .parent()
        .expect("a manifest has a directory")
        .join("src/pkg");
    let mut files = Vec::new();
    for file in ["LICENSE", "README.md"] {
        files.push((file.to_owned(), pkg.join(file)));
    }
    for package in PACKAGES {
        let dir = pkg.join(package);
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "go" || e == "s"))
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().expect("a file name").to_string_lossy();
            files.push((format!("{package}/{name}"), path));
        }
    }
    let mut out = String::from(
        "/// The files of `go.bytecodealliance.org/pkg` the bindings import.\npub(crate) const FILES: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &files {
        println!("cargo::rerun-if-changed={}", path.display());
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    let target =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("go_pkg.rs");
    std::fs::write(&target, out).expect("writing go_pkg.rs");
    println!("cargo::rerun-if-changed=build.rs");
    // Another version of the crate is another directory.
    println!("cargo::rerun-if-changed=../Cargo.lock");
}
