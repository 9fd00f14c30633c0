//! The Go bindings of the contract, written into the guest's `generated/`
//! folder (not committed: `wasmop build` writes it anew each time):
//!
//! - `wit_exports.go` and one package per interface, from `wit-bindgen-go`
//!   for the world with every export (and `wasi:http` with `--http`);
//! - the bodies of the exported functions (`glue/`), which convert the
//!   contract's values to the SDK's and call the SDK's `Serve*`;
//! - `pkg/`, the helper module `go.bytecodealliance.org/pkg` the bindings
//!   import, from the source `wit-bindgen-go` carries (`build.rs`);
//! - `go.mod` (module `wit_component`, the bindings' own import path) and
//!   `go.work`, which puts the bindings, `pkg/` and the guest's module in
//!   one workspace, so the guest's `go.mod` names none of them.

use std::path::Path;

use wit_bindgen_core::Files;
use wit_parser::WorldId;

use crate::build::wit::Contract;
use crate::build::{Error, Result};

mod pkg {
    include!(concat!(env!("OUT_DIR"), "/go_pkg.rs"));
}

/// The exports' bodies, per interface package.
const GLUE: &[(&str, &str)] = &[
    (
        "export_wasmop_operator_operator/glue.go",
        include_str!("glue/operator.go"),
    ),
    (
        "export_wasmop_operator_admission/glue.go",
        include_str!("glue/admission.go"),
    ),
    (
        "export_wasmop_operator_conversion/glue.go",
        include_str!("glue/conversion.go"),
    ),
];

/// The main package's imports: the guest's package, and with `--http`
/// the sender over `wasi:http`.
const MAIN: &str = include_str!("glue/main.go.tmpl");

/// The start of the adapter, added to the helper's `runtime` package.
const START: &str = include_str!("glue/start.go");

/// The sender the SDK's `Send` uses in a build with `--http`.
const HTTP: &str = include_str!("glue/http.go");

/// The oldest Go the bindings build with: `//go:wasmexport` and
/// `-buildmode=c-shared` for `wasip1` came in 1.24, and the bindings'
/// helper module asks for 1.25.
pub(super) const MIN_GO: (u32, u32) = (1, 25);

/// Writes the bindings of `world` for the guest module `guest` into `out`
/// (emptied first), for a workspace built with Go `go_version`.
pub(super) fn write(
    contract: &Contract,
    world: WorldId,
    guest: &str,
    http: bool,
    go_version: &str,
    out: &Path,
) -> Result<()> {
    let mut resolve = contract.resolve.clone();
    let mut files = Files::default();
    let options = wit_bindgen_go::Opts {
        format: wit_bindgen_go::Format::False,
        quiet: true,
        ..wit_bindgen_go::Opts::default()
    };
    options
        .build()
        .generate(&mut resolve, world, &mut files)
        .map_err(|e| Error::Bindings(format!("{e:#}")))?;
    let mut written: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(name, _)| *name != "go.mod")
        .map(|(name, bytes)| (name.to_owned(), bytes.to_vec()))
        .collect();
    for (name, text) in GLUE {
        written.push(((*name).to_owned(), text.as_bytes().to_vec()));
    }
    let main = MAIN
        .replace("{{guest}}", guest)
        .replace(
            "{{http}}",
            if http {
                ", and the sender over wasi:http"
            } else {
                ""
            },
        )
        .replace(
            "{{http_import}}",
            if http {
                "\n\t_ \"wit_component/wasmop_http\""
            } else {
                ""
            },
        );
    written.push(("wasmop_main.go".into(), main.into_bytes()));
    if http {
        written.push(("wasmop_http/glue.go".into(), HTTP.as_bytes().to_vec()));
    }
    written.push((
        "go.mod".into(),
        format!(
            "// Written by `wasmop build`; DO NOT EDIT.\nmodule wit_component\n\ngo {}.{}\n",
            MIN_GO.0, MIN_GO.1
        )
        .into_bytes(),
    ));
    written.push((
        "go.work".into(),
        format!(
            "// Written by `wasmop build`: the bindings, their helper module and the guest.\ngo {go_version}\n\nuse (\n\t.\n\t./pkg\n\t..\n)\n"
        )
        .into_bytes(),
    ));
    written.push((
        "pkg/go.mod".into(),
        format!(
            "// Written by `wasmop build` for the files beside it, from wit-bindgen-go's copy.\nmodule go.bytecodealliance.org/pkg\n\ngo {}.{}\n",
            MIN_GO.0, MIN_GO.1
        )
        .into_bytes(),
    ));
    for (name, text) in pkg::FILES {
        written.push((format!("pkg/{name}"), text.as_bytes().to_vec()));
    }
    written.push((
        "pkg/wit/runtime/wasmop_start.go".into(),
        START.as_bytes().to_vec(),
    ));
    written.push((
        ".gitignore".into(),
        b"# Written by `wasmop build` each time it builds.\n*\n".to_vec(),
    ));
    for (name, bytes) in written {
        let path = out.join(&name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
        }
        std::fs::write(&path, bytes).map_err(Error::io("writing", &path))?;
    }
    Ok(())
}
