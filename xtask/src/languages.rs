//! Guests written in TypeScript, Python and Go: their pinned toolchains and
//! their builds.
//!
//! Go guests are built by `wasmop build` (the `wasmop` binary of this
//! workspace, built once before the first Go guest that is not current),
//! with the Go on PATH; Go's build cache keeps what it compiled.
//!
//! The toolchains are installed on first use into the user's cache, never
//! globally, each keyed by the files that pin it:
//! - TypeScript: `guests/sdk-ts/package.json` and its `package-lock.json`
//!   (componentize-js, jco, esbuild, typescript), installed with `npm ci`
//!   into `~/.cache/wasmop/node-tools/<key>/node_modules`;
//! - Python: `guests/sdk-py/requirements.txt` (componentize-py, pytest),
//!   installed with `pip install --target` into
//!   `~/.cache/wasmop/python-tools/<key>`, so neither comes from the machine.
//!
//! Each SDK's build script (`guests/sdk-ts/build.mjs`,
//! `guests/sdk-py/build.py`) finds them through `WASMOP_NODE_TOOLS` and
//! `WASMOP_PYTHON_TOOLS`, which [`Toolchains::env`] sets, with
//! `WASMOP_WASI_WIT`: the WASI 0.2 WIT that the pinned jco ships, which a
//! Python guest built with `--http` imports `wasi:http` from.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::inputs::{Stamp, hash_tree, tool_version};
use crate::process::run;

/// The language a scripted guest is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// TypeScript, made a component by componentize-js.
    TypeScript,
    /// Python, made a component by componentize-py.
    Python,
    /// Go, made a component by `wasmop build`.
    Go,
}

/// A guest built by its language's SDK build script.
pub struct ScriptedGuest {
    /// The file name under `target/guests/`, without `.wasm`.
    pub name: &'static str,
    /// Its language.
    pub lang: Lang,
    /// Its directory, relative to the workspace root.
    pub dir: &'static str,
    /// The entry module: a TypeScript file, or a Python module name.
    pub entry: &'static str,
    /// Its unit tests, relative to `dir`.
    pub tests: &'static [&'static str],
    /// Built with `--http`: the component imports `wasi:http`.
    pub http: bool,
}

/// Every scripted guest. The names are an interface contract, as the Rust
/// guests' are.
pub const GUESTS: &[ScriptedGuest] = &[
    ScriptedGuest {
        name: "cache-operator-ts",
        lang: Lang::TypeScript,
        dir: "guests/cache-operator-ts",
        entry: "src/index.ts",
        tests: &["src/cache.test.ts", "src/webhooks.test.ts"],
        http: false,
    },
    ScriptedGuest {
        name: "cache-operator-py",
        lang: Lang::Python,
        dir: "guests/cache-operator-py",
        entry: "app",
        tests: &["tests"],
        http: false,
    },
    // The same guests built with outbound HTTP, for their `registryUrl`
    // (as the Rust `cache-operator-registry`); their tests run above.
    ScriptedGuest {
        name: "cache-operator-ts-registry",
        lang: Lang::TypeScript,
        dir: "guests/cache-operator-ts",
        entry: "src/index.ts",
        tests: &[],
        http: true,
    },
    ScriptedGuest {
        name: "cache-operator-py-registry",
        lang: Lang::Python,
        dir: "guests/cache-operator-py",
        entry: "app",
        tests: &[],
        http: true,
    },
    // Test guests whose `admit` and `convert` misbehave past the SDKs'
    // checks, as the Rust `hostile` guest's do.
    ScriptedGuest {
        name: "hostile-ts",
        lang: Lang::TypeScript,
        dir: "guests/hostile-ts",
        entry: "src/index.ts",
        tests: &[],
        http: false,
    },
    ScriptedGuest {
        name: "hostile-py",
        lang: Lang::Python,
        dir: "guests/hostile-py",
        entry: "app",
        tests: &[],
        http: false,
    },
    // The Cache operator in Go, and its build with outbound HTTP.
    ScriptedGuest {
        name: "cache-operator-go",
        lang: Lang::Go,
        dir: "guests/cache-operator-go",
        entry: ".",
        tests: &["./..."],
        http: false,
    },
    ScriptedGuest {
        name: "cache-operator-go-registry",
        lang: Lang::Go,
        dir: "guests/cache-operator-go",
        entry: ".",
        tests: &[],
        http: true,
    },
    // The hostile guest's attacks that are Go's own: its heap, goroutines
    // and panics.
    ScriptedGuest {
        name: "hostile-go",
        lang: Lang::Go,
        dir: "guests/hostile-go",
        entry: ".",
        tests: &[],
        http: false,
    },
];

/// The SDKs' own unit tests: (language, tests in its [`sdk_dir`]).
const SDK_TESTS: &[(Lang, &[&str])] = &[
    (
        Lang::TypeScript,
        &[
            "src/index.test.ts",
            "src/admission.test.ts",
            "src/conversion.test.ts",
            "src/http.test.ts",
            "src/metacontroller.test.ts",
        ],
    ),
    (Lang::Python, &["tests"]),
    (Lang::Go, &["./..."]),
];

/// The installed toolchains.
pub struct Toolchains {
    node: PathBuf,
    python: PathBuf,
    wasi_wit: PathBuf,
    /// The `wasmop` binary that builds Go guests, once built.
    wasmop: std::cell::OnceCell<PathBuf>,
}

impl Toolchains {
    /// Installs both toolchains if missing (progress on stderr).
    pub fn ensure(root: &Path) -> Result<Self> {
        let node = node_tools(root)?;
        Ok(Self {
            wasi_wit: node.join(WASI_WIT),
            node,
            python: python_tools(root)?,
            wasmop: std::cell::OnceCell::new(),
        })
    }

    /// The variables the SDKs' build scripts read.
    pub fn env(&self) -> [(&'static str, &Path); 3] {
        [
            ("WASMOP_NODE_TOOLS", &self.node),
            ("WASMOP_PYTHON_TOOLS", &self.python),
            ("WASMOP_WASI_WIT", &self.wasi_wit),
        ]
    }

    /// `node build.mjs` or `python3 build.py` of `lang`'s SDK, run in `dir`.
    fn script(&self, root: &Path, lang: Lang, dir: &Path) -> Command {
        let mut command = match lang {
            Lang::TypeScript => {
                let mut c = Command::new("node");
                c.arg(root.join(sdk_dir(lang)).join("build.mjs"));
                c
            }
            Lang::Python => {
                let mut c = Command::new("python3");
                c.arg(root.join(sdk_dir(lang)).join("build.py"));
                c
            }
            Lang::Go => Command::new("go"),
        };
        command.current_dir(dir).envs(self.env());
        command
    }

    /// Builds `guest` into `out`, unless `out` was built from the inputs it
    /// has now ([`Toolchains::inputs_digest`], kept beside it as
    /// `<name>.inputs`). Returns whether it built.
    pub fn build(&self, root: &Path, guest: &ScriptedGuest, out: &Path) -> Result<bool> {
        let digest = self.inputs_digest(root, guest)?;
        let Some(stamp) = Stamp::stale(out, digest) else {
            return Ok(false);
        };
        let dir = root.join(guest.dir);
        if guest.lang == Lang::Go {
            let mut command = Command::new(self.wasmop(root)?);
            command
                .arg("build")
                .arg(&dir)
                .arg("-o")
                .arg(out)
                .envs(self.env());
            if guest.http {
                command.arg("--http");
            }
            run(&mut command).with_context(|| format!("building guest {}", guest.name))?;
            stamp.write()?;
            return Ok(true);
        }
        let mut command = self.script(root, guest.lang, &dir);
        match guest.lang {
            Lang::TypeScript => command.args(["component", guest.entry, "--out"]).arg(out),
            Lang::Python => command
                .args(["component", ".", "--module", guest.entry, "--out"])
                .arg(out),
            Lang::Go => unreachable!("built above"),
        };
        if guest.http {
            command.arg("--http");
        }
        run(&mut command).with_context(|| format!("building guest {}", guest.name))?;
        stamp.write()?;
        Ok(true)
    }

    /// What a build of `guest` is made from: the sha256 of every file under
    /// its directory, its SDK's and `wit/` ([`hash_tree`]) and of both
    /// toolchains' directories,
    /// whose names are the keys of what they hold.
    fn inputs_digest(&self, root: &Path, guest: &ScriptedGuest) -> Result<String> {
        let mut hash = Sha256::new();
        for dir in [guest.dir, sdk_dir(guest.lang), "wit"] {
            hash_tree(&mut hash, root, &root.join(dir))?;
        }
        if guest.lang == Lang::Go {
            // What `wasmop build` makes of them: its code, the crates it
            // generates and componentizes with, the Go that compiles them.
            hash_tree(&mut hash, root, &root.join("host/src/build"))?;
            for file in ["host/build.rs", "Cargo.lock"] {
                crate::inputs::hash_file(&mut hash, root, &root.join(file))?;
            }
            hash.update(tool_version(Command::new("go").arg("version"))?);
            hash.update([u8::from(guest.http)]);
        }
        for (_, tools) in self.env() {
            hash.update(tools.as_os_str().as_encoded_bytes());
            hash.update([0]);
        }
        Ok(format!("{:x}", hash.finalize()))
    }

    /// Runs the unit tests of the SDKs and of every scripted guest.
    pub fn test_all(&self, root: &Path) -> Result<()> {
        let suites = SDK_TESTS
            .iter()
            .map(|(lang, tests)| (*lang, sdk_dir(*lang), *tests))
            .chain(GUESTS.iter().map(|g| (g.lang, g.dir, g.tests)))
            .filter(|(_, _, tests)| !tests.is_empty());
        for (lang, dir, tests) in suites {
            let mut command = self.script(root, lang, &root.join(dir));
            command.arg("test");
            if lang == Lang::Python {
                command.arg(".");
            }
            if lang == Lang::Go {
                // The guest's logic natively, without the bindings.
                command.env_remove("GOOS").env_remove("GOARCH");
            }
            command.args(tests);
            run(&mut command).with_context(|| format!("unit tests of {dir}"))?;
        }
        Ok(())
    }
}

/// The WASI 0.2 WIT in the TypeScript toolchain's jco (pinned by
/// `guests/sdk-ts/package-lock.json`): one directory per package.
const WASI_WIT: &str = "node_modules/@bytecodealliance/jco/lib/wit/builtin/0.2.12";

/// The SDK directory of `lang`, relative to the workspace root.
fn sdk_dir(lang: Lang) -> &'static str {
    match lang {
        Lang::TypeScript => "guests/sdk-ts",
        Lang::Python => "guests/sdk-py",
        Lang::Go => "guests/sdk-go",
    }
}

impl Toolchains {
    /// The `wasmop` binary of this workspace, built on first use
    /// (`cargo build -p wasmop-host --bin wasmop`, the build the tests
    /// use too).
    fn wasmop(&self, root: &Path) -> Result<&PathBuf> {
        if let Some(path) = self.wasmop.get() {
            return Ok(path);
        }
        run(
            crate::process::cargo(&["build", "-p", "wasmop-host", "--bin", "wasmop"])
                .current_dir(root),
        )
        .context("building wasmop, which builds the Go guests")?;
        let path = crate::guests::target_dir().join("debug/wasmop");
        Ok(self.wasmop.get_or_init(|| path))
    }
}

/// componentize-js and friends, as `guests/sdk-ts/package-lock.json` pins
/// them.
fn node_tools(root: &Path) -> Result<PathBuf> {
    let sdk = root.join(sdk_dir(Lang::TypeScript));
    let files = ["package.json", "package-lock.json"];
    let key = wasmop_testenv::cache::key_of(
        &sdk,
        &files,
        &[&tool_version(Command::new("node").arg("--version"))?],
    )?;
    let complete = |dir: &Path| {
        dir.join("node_modules/@bytecodealliance/componentize-js/package.json")
            .is_file()
    };
    wasmop_testenv::cache::ensure_dir("node-tools", &key, complete, |staging| {
        eprintln!(
            "node-tools: installing the TypeScript guests' toolchain (componentize-js, jco, esbuild, typescript) with npm ci; ~20 s"
        );
        for file in files {
            std::fs::copy(sdk.join(file), staging.join(file))
                .with_context(|| format!("copying {file}"))?;
        }
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
            .current_dir(staging))
        .context("npm ci (is Node.js 20 or newer with npm on PATH?)")
    })
}

/// componentize-py, as `guests/sdk-py/requirements.txt` pins it.
fn python_tools(root: &Path) -> Result<PathBuf> {
    let sdk = root.join(sdk_dir(Lang::Python));
    let key = wasmop_testenv::cache::key_of(
        &sdk,
        &["requirements.txt"],
        &[&tool_version(Command::new("python3").arg("--version"))?],
    )?;
    let complete = |dir: &Path| dir.join("componentize_py").is_dir() && dir.join("pytest").is_dir();
    wasmop_testenv::cache::ensure_dir("python-tools", &key, complete, |staging| {
        eprintln!(
            "python-tools: installing the Python guests' toolchain (componentize-py, pytest) with pip; ~10 s"
        );
        run(Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--root-user-action=ignore",
                "--target",
            ])
            .arg(staging)
            .arg("-r")
            .arg(sdk.join("requirements.txt")))
        .context("pip install (is Python 3.11 or newer with pip on PATH?)")
    })
}
