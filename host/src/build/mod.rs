//! `wasmop build [<dir>] [-o <out.wasm>]`: from a guest's folder to a
//! component in one command, with the language's own toolchain and nothing
//! installed by hand.
//!
//! The folder's files say its language: `go.mod` is a Go guest, which this
//! module builds itself ([`go`]: bindings generated from the contract's
//! WIT, `go build` for `wasip1`, the Go runtime's start-up run once and
//! kept in the module, the core module wrapped into a component); a
//! `Cargo.toml`, a `package.json` or a `build.py` is a Rust, TypeScript or
//! Python guest, built by the commands `wasmop new` writes into its README
//! ([`scripted`]).

mod component;
pub mod go;
pub mod metacontroller;
mod preinit;
mod scripted;
mod wit;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a guest was not built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The folder has none of the files that say a guest's language.
    #[error(
        "{0} holds no guest project: no go.mod, Cargo.toml, package.json or build.py (`wasmop new` makes one)"
    )]
    NoProject(PathBuf),
    /// A tool the build runs is not installed.
    #[error("{tool} is not on PATH: {hint}")]
    MissingTool {
        /// The program.
        tool: &'static str,
        /// What to install.
        hint: &'static str,
    },
    /// A command of the build failed; its output was shown as it ran.
    #[error("`{command}` failed ({status}){detail}")]
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// What it printed, when it was captured.
        detail: String,
    },
    /// The WIT is not the contract the SDK is written for.
    #[error(
        "{path} is the contract {found}, but this SDK is written for {expected}: build with the SDK of that contract version, or against the WIT this SDK came with"
    )]
    Contract {
        /// The WIT file.
        path: PathBuf,
        /// Its package.
        found: String,
        /// The SDK's.
        expected: String,
    },
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The project is not one this build can make a guest of.
    #[error("{0}")]
    Project(String),
    /// The WIT does not resolve into the worlds a guest targets.
    #[error("the WIT: {0}")]
    Wit(String),
    /// The bindings could not be generated.
    #[error("generating the Go bindings: {0}")]
    Bindings(String),
    /// The module's start-up failed or could not be kept.
    #[error("running the guest's start-up: {0}")]
    Preinit(String),
    /// The core module could not be made a component.
    #[error("making the component: {0}")]
    Component(String),
}

impl Error {
    fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_owned();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }
}

/// A guest's language, as its folder shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// `go.mod`: built here.
    Go,
    /// `Cargo.toml`: `cargo build --release --target wasm32-unknown-unknown`.
    Rust,
    /// `package.json`: `npm run build`.
    TypeScript,
    /// `build.py`: `python3 build.py component`.
    Python,
}

impl Lang {
    /// The language of the guest in `dir`.
    pub fn of(dir: &Path) -> Result<Self> {
        [
            ("go.mod", Self::Go),
            ("Cargo.toml", Self::Rust),
            ("package.json", Self::TypeScript),
            ("build.py", Self::Python),
        ]
        .into_iter()
        .find(|(file, _)| dir.join(file).is_file())
        .map(|(_, lang)| lang)
        .ok_or_else(|| Error::NoProject(dir.to_owned()))
    }
}

/// What to build.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The guest's folder.
    pub dir: PathBuf,
    /// The component to write (default: `<folder name>.wasm` in the folder).
    pub out: Option<PathBuf>,
    /// Import `wasi:http/outgoing-handler` (outbound HTTP).
    pub http: bool,
    /// The WASI 0.2 WIT that `http` imports from: a folder of `wasi-http`,
    /// `wasi-io`, … each with its `package.wit` (default:
    /// `$WASMOP_WASI_WIT`).
    pub wasi_wit: Option<PathBuf>,
    /// The folder of the contract's `operator.wit` (default: the guest's
    /// `wit/`, else the contract this `wasmop` was built with).
    pub wit: Option<PathBuf>,
}

/// A guest built.
#[derive(Clone, Debug)]
pub struct Built {
    /// The language it is written in.
    pub lang: Lang,
    /// The component written.
    pub out: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// What it exports and imports, for people: the world.
    pub world: String,
    /// How long each step took.
    pub steps: Vec<(&'static str, Duration)>,
}

/// Builds the guest `options` names.
pub fn build(options: &Options) -> Result<Built> {
    let dir = options
        .dir
        .canonicalize()
        .map_err(Error::io("reading", &options.dir))?;
    let lang = Lang::of(&dir)?;
    let out = match &options.out {
        Some(out) => std::path::absolute(out).map_err(Error::io("resolving", out))?,
        None => dir.join(format!(
            "{}.wasm",
            dir.file_name()
                .map_or("guest".into(), |n| n.to_string_lossy())
        )),
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    }
    let mut built = match lang {
        Lang::Go => go::build(&dir, &out, options)?,
        Lang::Rust | Lang::TypeScript | Lang::Python => scripted::build(lang, &dir, &out, options)?,
    };
    built.bytes = std::fs::metadata(&out)
        .map_err(Error::io("reading", &out))?
        .len();
    Ok(built)
}

/// Runs `command` with its output shown, timed into `steps` as `step`.
fn run(
    command: &mut Command,
    step: &'static str,
    steps: &mut Vec<(&'static str, Duration)>,
) -> Result<()> {
    let shown = show(command);
    eprintln!("    $ {shown}");
    let started = Instant::now();
    let status = command.status().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Command {
            command: shown.clone(),
            status: "not found".into(),
            detail: String::new(),
        },
        _ => Error::Command {
            command: shown.clone(),
            status: e.to_string(),
            detail: String::new(),
        },
    })?;
    steps.push((step, started.elapsed()));
    if !status.success() {
        return Err(Error::Command {
            command: shown,
            status: status.to_string(),
            detail: ": its output is above".into(),
        });
    }
    Ok(())
}

/// `command` as a line to show: the program and its arguments, with the
/// environment it sets in front.
fn show(command: &Command) -> String {
    let mut parts: Vec<String> = command
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    parts.push(command.get_program().to_string_lossy().into_owned());
    parts.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}
