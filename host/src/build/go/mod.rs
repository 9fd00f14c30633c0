//! A Go guest, built with mainline Go and nothing else:
//!
//! 1. the guest's module: its path from `go.mod`, a Go package at its
//!    root (which registers the guest with `wasmop.Export` in an init
//!    function), and the SDK it requires (`wasmop.dev/sdk`), whose
//!    contract pin (`const Contract`) the WIT must match;
//! 2. the bindings of the contract's world with every export (and with
//!    `--http` `wasi:http`), written into `generated/` ([`bindings`]);
//! 3. `go build -buildmode=c-shared` for `GOOS=wasip1 GOARCH=wasm`, with
//!    `-ldflags=-checklinkname=0` (the bindings' helper module links to
//!    the runtime's allocator, which Go 1.23 and later refuse to link to
//!    without it) and `-trimpath`;
//! 4. the runtime's start-up run once and kept in the module
//!    ([`super::preinit`]), which also tells what the registered value
//!    implements;
//! 5. the exports it does not implement removed, the adapter's start
//!    exported as `_initialize` (`glue/start.go` says why), and the module
//!    made a component of the matching world ([`super::component`]).
//!
//! Go's own build cache keeps the compiled packages, so a second build
//! compiles only what changed.

mod bindings;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::wit::{Contract, Exports};
use super::{Built, Error, Lang, Options, Result, component, preinit, run};

/// The SDK's module path, which a Go guest requires.
pub const SDK_MODULE: &str = "wasmop.dev/sdk";

/// The folder of the guest the build writes into (and the guest's
/// `.gitignore` need not name: it holds its own).
pub const GENERATED: &str = "generated";

/// Builds the Go guest in `dir` into `out`.
pub(super) fn build(dir: &Path, out: &Path, options: &Options) -> Result<Built> {
    let mut steps = Vec::new();
    let started = Instant::now();
    let go_version = go_version()?;
    let module = module_path(dir)?;
    let pin = sdk_pin(dir)?;
    let (wit, wit_path) = Contract::source(dir, options.wit.as_deref(), &pin)?;
    steps.push(("the module and its SDK (go list)", started.elapsed()));

    let started = Instant::now();
    let generated = dir.join(GENERATED);
    if generated.exists() {
        std::fs::remove_dir_all(&generated).map_err(Error::io("removing", &generated))?;
    }
    std::fs::create_dir_all(&generated).map_err(Error::io("creating", &generated))?;
    let wasi_wit = options
        .wasi_wit
        .clone()
        .or_else(|| std::env::var_os("WASMOP_WASI_WIT").map(Into::into));
    let staging = generated.join("wit");
    let http = match (&wasi_wit, options.http) {
        (Some(wasi), true) => Some((wasi.as_path(), staging.as_path())),
        (None, true) => {
            return Err(Error::Project(
                "--http needs the WASI 0.2 WIT: pass --wasi-wit <dir> or set WASMOP_WASI_WIT (a folder of wasi-http, wasi-io, … each with its package.wit)".into(),
            ));
        }
        (_, false) => None,
    };
    let contract = Contract::load(&wit, &wit_path, http)?;
    let world = contract.world(Exports::ALL)?;
    bindings::write(
        &contract,
        world,
        &module,
        options.http,
        &go_version,
        &generated,
    )?;
    steps.push(("bindings", started.elapsed()));

    let core = generated.join("guest.core.wasm");
    run(
        Command::new("go")
            .args([
                "build",
                "-buildmode=c-shared",
                "-trimpath",
                "-ldflags=-checklinkname=0",
                "-o",
            ])
            .arg(&core)
            .arg(".")
            .current_dir(&generated)
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("CGO_ENABLED", "0")
            .env("GOWORK", generated.join("go.work"))
            .env("GOFLAGS", "-buildvcs=false"),
        "go build",
        &mut steps,
    )?;
    let core = std::fs::read(&core).map_err(Error::io("reading", &core))?;

    let started = Instant::now();
    let started_up = preinit::run(&core)?;
    steps.push(("start-up, run once", started.elapsed()));
    if started_up.exports & 1 == 0 {
        return Err(Error::Project(format!(
            "the package {module} never called wasmop.Export: register the guest from an init function of its root package (func init() {{ wasmop.Export(&MyReconciler{{}}) }})"
        )));
    }
    let exports = Exports {
        admission: started_up.exports & 2 != 0,
        conversion: started_up.exports & 4 != 0,
    };

    let started = Instant::now();
    let stripped = component::rename_exports(&started_up.module, |name| match name {
        preinit::EXPORTS_PROBE | preinit::REALLOC_BY_SBRK => None,
        // The component calls `_initialize` as it is instantiated.
        preinit::START_ADAPTER => Some("_initialize"),
        _ if !exports.admission && name.contains("wasmop:operator/admission@") => None,
        _ if !exports.conversion && name.contains("wasmop:operator/conversion@") => None,
        _ => Some(name),
    })?;
    let bytes = component::encode(stripped, &contract.resolve, contract.world(exports)?)?;
    std::fs::write(out, &bytes).map_err(Error::io("writing", out))?;
    steps.push(("component", started.elapsed()));
    Ok(Built {
        lang: Lang::Go,
        out: out.to_owned(),
        bytes: 0,
        world: format!(
            "{}/{}{}",
            contract.name,
            exports.world(),
            if options.http { " with wasi:http" } else { "" }
        ),
        steps,
    })
}

/// The Go on PATH, as the `go` line of a `go.work` writes it ("1.26.8"),
/// checked to be [`bindings::MIN_GO`] or later.
fn go_version() -> Result<String> {
    let output = Command::new("go")
        .args(["env", "GOVERSION"])
        .output()
        .map_err(|_| Error::MissingTool {
            tool: "go",
            hint: "install Go 1.25 or later (https://go.dev/dl)",
        })?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let number = version.strip_prefix("go").unwrap_or(&version);
    let mut parts = number
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if !output.status.success() || (major, minor) < bindings::MIN_GO {
        return Err(Error::Project(format!(
            "Go {}.{} or later builds guests; `go env GOVERSION` says {version:?}",
            bindings::MIN_GO.0,
            bindings::MIN_GO.1
        )));
    }
    // A release candidate ("1.27rc1") is written as its release.
    Ok(number
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()
        .unwrap_or(number)
        .to_owned())
}

/// The module path of the guest's `go.mod`, checked to have a Go package
/// at its root.
fn module_path(dir: &Path) -> Result<String> {
    let go_mod = dir.join("go.mod");
    let text = std::fs::read_to_string(&go_mod).map_err(Error::io("reading", &go_mod))?;
    let module = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .map(|m| m.trim().trim_matches('"').to_owned())
        .ok_or_else(|| Error::Project(format!("{} has no module line", go_mod.display())))?;
    let has_package = std::fs::read_dir(dir)
        .map_err(Error::io("reading", dir))?
        .filter_map(|e| e.ok())
        .any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".go") && !name.ends_with("_test.go")
        });
    if !has_package {
        return Err(Error::Project(format!(
            "{} has no Go package at its root: the guest's root package registers it with wasmop.Export",
            dir.display()
        )));
    }
    Ok(module)
}

/// The contract the guest's SDK is written for: its `const Contract`,
/// read from the SDK's folder as `go list` finds it for the guest.
fn sdk_pin(dir: &Path) -> Result<String> {
    let output = Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", SDK_MODULE])
        .current_dir(dir)
        .env("GOFLAGS", "-buildvcs=false")
        .env_remove("GOWORK")
        .output()
        .map_err(|_| Error::MissingTool {
            tool: "go",
            hint: "install Go 1.25 or later (https://go.dev/dl)",
        })?;
    let sdk = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || sdk.is_empty() {
        return Err(Error::Project(format!(
            "the guest's go.mod does not require the SDK {SDK_MODULE} (`go list -m {SDK_MODULE}`: {})",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let sdk = Path::new(&sdk);
    for entry in std::fs::read_dir(sdk).map_err(Error::io("reading", sdk))? {
        let path = entry.map_err(Error::io("reading", sdk))?.path();
        if path.extension().is_none_or(|e| e != "go") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(Error::io("reading", &path))?;
        if let Some(pin) = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("const Contract = ")
                .map(|v| v.trim().trim_matches('"').to_owned())
        }) {
            return Ok(pin);
        }
    }
    Err(Error::Project(format!(
        "the SDK in {} declares no `const Contract`: it is not the wasmop Go SDK",
        sdk.display()
    )))
}
