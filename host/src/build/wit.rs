//! The contract's WIT a guest is built against, and the worlds a build
//! chooses from: the guest's own `wit/operator.wit` when it has one (what
//! `wasmop new` writes), else the contract this `wasmop` was built with;
//! with `--http`, beside it the WASI 0.2 WIT that `wasi:http` comes from.

use std::path::{Path, PathBuf};

use wit_parser::{Resolve, WorldId};

use super::{Error, Result};

/// The contract this `wasmop` was built with, for guests without a WIT.
const CONTRACT_WIT: &str = include_str!("../../../wit/operator@0.1.0/operator.wit");

/// The `wasi:http` version an `--http` guest imports: WASI 0.2, every
/// version of which the host serves. The TypeScript and Python SDKs import
/// the same.
pub(super) const WASI_VERSION: &str = "0.2.12";

/// The WASI packages `wasi:http` needs, as folders of the WASI WIT.
const WASI_PACKAGES: &[&str] = &[
    "wasi-io",
    "wasi-clocks",
    "wasi-random",
    "wasi-cli",
    "wasi-filesystem",
    "wasi-sockets",
    "wasi-http",
];

/// What a guest exports beside `operator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Exports {
    /// `admission`.
    pub admission: bool,
    /// `conversion`.
    pub conversion: bool,
}

impl Exports {
    /// Every export: what the bindings are generated for.
    pub const ALL: Self = Self {
        admission: true,
        conversion: true,
    };

    /// The contract's world with these exports.
    pub fn world(self) -> &'static str {
        match (self.admission, self.conversion) {
            (false, false) => "operator-guest",
            (true, false) => "admission-guest",
            (false, true) => "conversion-guest",
            (true, true) => "webhook-guest",
        }
    }
}

/// The contract resolved, with the WASI WIT when the guest imports
/// `wasi:http`.
pub(super) struct Contract {
    /// Every package.
    pub resolve: Resolve,
    /// The package whose worlds a build picks: the contract's, or with
    /// `wasi:http` one that adds it to each.
    package: wit_parser::PackageId,
    /// The contract's package name, e.g. `wasmop:operator@0.1.0`.
    pub name: String,
}

impl Contract {
    /// The contract's text for the guest in `dir` (from `wit`, else its
    /// `wit/`, else the contract `wasmop` carries) and where it came from,
    /// checked to be `expected` (the SDK's pin) before anything is built.
    pub fn source(dir: &Path, wit: Option<&Path>, expected: &str) -> Result<(String, PathBuf)> {
        let own = wit.unwrap_or(&dir.join("wit")).join("operator.wit");
        let (text, path) = if own.is_file() || wit.is_some() {
            (
                std::fs::read_to_string(&own).map_err(Error::io("reading", &own))?,
                own,
            )
        } else {
            (
                CONTRACT_WIT.to_owned(),
                PathBuf::from("(the contract wasmop was built with)"),
            )
        };
        let found = package_line(&text).unwrap_or("(no package line)");
        if found != expected {
            return Err(Error::Contract {
                path,
                found: found.to_owned(),
                expected: expected.to_owned(),
            });
        }
        Ok((text, path))
    }

    /// The contract `text` (from [`Contract::source`], at `path`); with
    /// `http` (the WASI WIT's folder and a folder to stage the packages
    /// in), beside it `wasi:http`.
    pub fn load(text: &str, path: &Path, http: Option<(&Path, &Path)>) -> Result<Self> {
        let found = package_line(text).unwrap_or("(no package line)");
        let mut resolve = Resolve::default();
        let Some((wasi, staging)) = http else {
            let package = resolve
                .push_str(path.to_string_lossy().as_ref(), text)
                .map_err(|e| Error::Wit(format!("{e:#}")))?;
            return Ok(Self {
                resolve,
                package,
                name: found.to_owned(),
            });
        };
        let http_package = wasi.join("wasi-http/package.wit");
        let version = format!("wasi:http@{WASI_VERSION}");
        match std::fs::read_to_string(&http_package) {
            Ok(text) if package_line(&text) == Some(version.as_str()) => {}
            Ok(_) => {
                return Err(Error::Wit(format!(
                    "{} is not {version}",
                    http_package.display()
                )));
            }
            Err(_) => {
                return Err(Error::Wit(format!(
                    "{} has no wasi-http/package.wit: --wasi-wit names a folder of the WASI {WASI_VERSION} packages (wasi-http, wasi-io, …)",
                    wasi.display()
                )));
            }
        }
        // One package with every world, its dependencies in `deps/`, in
        // which wit-parser finds their order itself.
        let deps = staging.join("deps");
        std::fs::create_dir_all(deps.join("wasmop-operator"))
            .map_err(Error::io("creating", &deps))?;
        std::fs::write(deps.join("wasmop-operator/operator.wit"), text)
            .map_err(Error::io("writing", &deps))?;
        for package in WASI_PACKAGES {
            let from = wasi.join(package);
            let to = deps.join(package);
            std::fs::create_dir_all(&to).map_err(Error::io("creating", &to))?;
            for entry in std::fs::read_dir(&from).map_err(Error::io("reading", &from))? {
                let entry = entry.map_err(Error::io("reading", &from))?;
                if entry.path().extension().is_some_and(|e| e == "wit") {
                    std::fs::copy(entry.path(), to.join(entry.file_name()))
                        .map_err(Error::io("copying", &entry.path()))?;
                }
            }
        }
        let (_, contract_version) = found.split_once('@').unwrap_or((found, ""));
        let mut worlds = String::from(
            "// Written by `wasmop build`: each of the contract's worlds, importing wasi:http.\npackage wasmop:guest-build;\n",
        );
        for exports in [
            Exports {
                admission: false,
                conversion: false,
            },
            Exports {
                admission: true,
                conversion: false,
            },
            Exports {
                admission: false,
                conversion: true,
            },
            Exports::ALL,
        ] {
            let world = exports.world();
            worlds.push_str(&format!(
                "\nworld {world} {{\n  include wasmop:operator/{world}@{contract_version};\n  import wasi:http/outgoing-handler@{WASI_VERSION};\n}}\n"
            ));
        }
        let root = staging.join("guest.wit");
        std::fs::write(&root, worlds).map_err(Error::io("writing", &root))?;
        let (package, _) = resolve
            .push_dir(staging)
            .map_err(|e| Error::Wit(format!("{e:#}")))?;
        Ok(Self {
            resolve,
            package,
            name: found.to_owned(),
        })
    }

    /// The world with `exports`.
    pub fn world(&self, exports: Exports) -> Result<WorldId> {
        self.resolve
            .select_world(&[self.package], Some(exports.world()))
            .map_err(|e| Error::Wit(format!("{e:#}")))
    }
}

/// The package a WIT file declares (`wasmop:operator@0.1.0`).
fn package_line(text: &str) -> Option<&str> {
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("package "))
        .map(|rest| rest.trim_end_matches(';').trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_line_is_read_past_comments() {
        assert_eq!(
            package_line("/// docs\npackage wasmop:operator@0.1.0;\n"),
            Some("wasmop:operator@0.1.0")
        );
        assert_eq!(package_line("interface x {}"), None);
    }

    #[test]
    fn a_guest_without_a_wit_is_built_against_the_contract_wasmop_carries() {
        let dir = tempfile::tempdir().unwrap();
        let (text, path) = Contract::source(dir.path(), None, "wasmop:operator@0.1.0").unwrap();
        let contract = Contract::load(&text, &path, None).unwrap();
        assert_eq!(contract.name, "wasmop:operator@0.1.0");
        for exports in [
            Exports::ALL,
            Exports {
                admission: false,
                conversion: false,
            },
        ] {
            let world = contract.world(exports).unwrap();
            assert_eq!(contract.resolve.worlds[world].name, exports.world());
        }
    }

    #[test]
    fn a_wit_of_another_contract_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("wit")).unwrap();
        std::fs::write(
            dir.path().join("wit/operator.wit"),
            CONTRACT_WIT.replace(
                "package wasmop:operator@0.1.0;",
                "package wasmop:operator@0.2.0;",
            ),
        )
        .unwrap();
        let Err(err) = Contract::source(dir.path(), None, "wasmop:operator@0.1.0") else {
            panic!("a 0.2.0 WIT loaded");
        };
        assert!(
            err.to_string().contains(
                "is the contract wasmop:operator@0.2.0, but this SDK is written for wasmop:operator@0.1.0"
            ),
            "{err}"
        );
    }
}
