//! `wasmop new <name> --lang rust|ts|python|go`: a guest project to start from,
//! as `kubebuilder create api` or `spin new` make one.
//!
//! The project has a kind and its CRD (`crd.yaml`), a sample object, a
//! reconcile that owns one ConfigMap and reports a `Ready` condition, a unit
//! test, two cases for `wasmop test` (`cases/`), the WIT, and a README with
//! the commands that build, test, run the cases, render and run it. It builds with one command and renders with `wasmop render`
//! as generated.
//!
//! The TypeScript, Python and Go projects carry their SDK (and, but for
//! Go, whose build is `wasmop build`, its build script) as `guests/sdk-ts`,
//! `guests/sdk-py` and `guests/sdk-go` have it, so they build anywhere; the Rust project depends on the Rust SDK by path (`--sdk`,
//! default: the SDK of the source tree this binary was built from).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

/// A guest project's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with the Rust SDK (`wasmop-guest`).
    Rust,
    /// TypeScript, made a component by componentize-js.
    Ts,
    /// Python, made a component by componentize-py.
    Python,
    /// Go, made a component by `wasmop build`.
    Go,
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Project {
    /// The project's and the guest's name: a DNS label.
    pub name: String,
    /// The language.
    pub lang: Lang,
    /// The primary kind (default: the name in CamelCase).
    pub kind: Option<String>,
    /// The kind's API group.
    pub group: String,
    /// The Rust SDK's directory (Rust only).
    pub sdk: Option<PathBuf>,
}

/// The WIT every guest targets.
const WIT: &str = include_str!("../../../wit/operator@0.1.0/operator.wit");

/// One file of a project: its path and its text. In a template the
/// `{{placeholders}}` are filled; a copied file (the WIT, an SDK and its
/// build script) is written as it is.
type Template = (&'static str, &'static str);

const COMMON: &[Template] = &[
    ("crd.yaml", include_str!("templates/common/crd.yaml")),
    ("sample.yaml", include_str!("templates/common/sample.yaml")),
    ("README.md", include_str!("templates/common/README.md")),
    (
        "cases/sample.yaml",
        include_str!("templates/common/cases/sample.yaml"),
    ),
];

const COMMON_COPIED: &[Template] = &[("wit/operator.wit", WIT)];

const RUST: &[Template] = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
    (
        ".cargo/config.toml",
        include_str!("templates/rust/.cargo/config.toml"),
    ),
    (
        "rust-toolchain.toml",
        include_str!("templates/rust/rust-toolchain.toml"),
    ),
    ("src/lib.rs", include_str!("templates/rust/src/lib.rs")),
    (".gitignore", "/target\n"),
];

const TS: &[Template] = &[
    ("package.json", include_str!("templates/ts/package.json")),
    ("tsconfig.json", include_str!("templates/ts/tsconfig.json")),
    ("src/index.ts", include_str!("templates/ts/src/index.ts")),
    ("src/guest.ts", include_str!("templates/ts/src/guest.ts")),
    (
        "src/guest.test.ts",
        include_str!("templates/ts/src/guest.test.ts"),
    ),
    (".gitignore", "/node_modules/\n/generated/\n*.wasm\n"),
];

/// The TypeScript SDK's build script (`guests/sdk-ts/build.mjs`).
pub const TS_BUILD_SCRIPT: &str = include_str!("../../../guests/sdk-ts/build.mjs");
/// The Python SDK's build script (`guests/sdk-py/build.py`).
pub const PY_BUILD_SCRIPT: &str = include_str!("../../../guests/sdk-py/build.py");
/// The tools the Python SDK pins (`guests/sdk-py/requirements.txt`).
pub const PY_REQUIREMENTS: &str = include_str!("../../../guests/sdk-py/requirements.txt");

const TS_COPIED: &[Template] = &[
    ("build.mjs", TS_BUILD_SCRIPT),
    (
        "sdk/index.ts",
        include_str!("../../../guests/sdk-ts/src/index.ts"),
    ),
    (
        "sdk/admission.ts",
        include_str!("../../../guests/sdk-ts/src/admission.ts"),
    ),
    (
        "sdk/conversion.ts",
        include_str!("../../../guests/sdk-ts/src/conversion.ts"),
    ),
    (
        "sdk/http.ts",
        include_str!("../../../guests/sdk-ts/src/http.ts"),
    ),
];

const PYTHON: &[Template] = &[
    ("app.py", include_str!("templates/python/app.py")),
    ("guest.py", include_str!("templates/python/guest.py")),
    (
        "tests/test_guest.py",
        include_str!("templates/python/tests/test_guest.py"),
    ),
    (
        ".gitignore",
        "/.tools/\n__pycache__/\n.pytest_cache/\n*.wasm\n",
    ),
];

const PYTHON_COPIED: &[Template] = &[
    ("build.py", PY_BUILD_SCRIPT),
    ("requirements.txt", PY_REQUIREMENTS),
    (
        "wasmop_sdk/__init__.py",
        include_str!("../../../guests/sdk-py/wasmop_sdk/__init__.py"),
    ),
    (
        "wasmop_sdk/admission.py",
        include_str!("../../../guests/sdk-py/wasmop_sdk/admission.py"),
    ),
    (
        "wasmop_sdk/conversion.py",
        include_str!("../../../guests/sdk-py/wasmop_sdk/conversion.py"),
    ),
    (
        "wasmop_sdk/http.py",
        include_str!("../../../guests/sdk-py/wasmop_sdk/http.py"),
    ),
];

const GO: &[Template] = &[
    ("go.mod", include_str!("templates/go/go.mod")),
    ("guest.go", include_str!("templates/go/guest.go")),
    ("guest_test.go", include_str!("templates/go/guest_test.go")),
    (".gitignore", "/generated/\n*.wasm\n"),
];

/// The Go SDK, every file but its tests.
const GO_COPIED: &[Template] = &[
    (
        "sdk/admission.go",
        include_str!("../../../guests/sdk-go/admission.go"),
    ),
    (
        "sdk/condition.go",
        include_str!("../../../guests/sdk-go/condition.go"),
    ),
    (
        "sdk/contract.go",
        include_str!("../../../guests/sdk-go/contract.go"),
    ),
    (
        "sdk/conversion.go",
        include_str!("../../../guests/sdk-go/conversion.go"),
    ),
    ("sdk/doc.go", include_str!("../../../guests/sdk-go/doc.go")),
    (
        "sdk/errors.go",
        include_str!("../../../guests/sdk-go/errors.go"),
    ),
    (
        "sdk/export.go",
        include_str!("../../../guests/sdk-go/export.go"),
    ),
    (
        "sdk/exports_wasip1.go",
        include_str!("../../../guests/sdk-go/exports_wasip1.go"),
    ),
    (
        "sdk/gc_wasip1.go",
        include_str!("../../../guests/sdk-go/gc_wasip1.go"),
    ),
    ("sdk/go.mod", include_str!("../../../guests/sdk-go/go.mod")),
    (
        "sdk/hash.go",
        include_str!("../../../guests/sdk-go/hash.go"),
    ),
    (
        "sdk/http.go",
        include_str!("../../../guests/sdk-go/http.go"),
    ),
    (
        "sdk/http_native.go",
        include_str!("../../../guests/sdk-go/http_native.go"),
    ),
    (
        "sdk/http_wasip1.go",
        include_str!("../../../guests/sdk-go/http_wasip1.go"),
    ),
    (
        "sdk/kinds.go",
        include_str!("../../../guests/sdk-go/kinds.go"),
    ),
    ("sdk/log.go", include_str!("../../../guests/sdk-go/log.go")),
    (
        "sdk/log_native.go",
        include_str!("../../../guests/sdk-go/log_native.go"),
    ),
    (
        "sdk/log_wasip1.go",
        include_str!("../../../guests/sdk-go/log_wasip1.go"),
    ),
    (
        "sdk/object.go",
        include_str!("../../../guests/sdk-go/object.go"),
    ),
    (
        "sdk/prepare.go",
        include_str!("../../../guests/sdk-go/prepare.go"),
    ),
    (
        "sdk/request.go",
        include_str!("../../../guests/sdk-go/request.go"),
    ),
    (
        "sdk/response.go",
        include_str!("../../../guests/sdk-go/response.go"),
    ),
    (
        "sdk/trap_native.go",
        include_str!("../../../guests/sdk-go/trap_native.go"),
    ),
    (
        "sdk/trap_wasm.go",
        include_str!("../../../guests/sdk-go/trap_wasm.go"),
    ),
    (
        "sdk/trap_wasm.s",
        include_str!("../../../guests/sdk-go/trap_wasm.s"),
    ),
];

/// The TypeScript SDK's pinned toolchain, which a TypeScript project pins too.
const TS_SDK_PACKAGE: &str = include_str!("../../../guests/sdk-ts/package.json");

/// Where this binary's source tree keeps the Rust SDK, when it still does.
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guests/sdk");

impl Lang {
    fn templates(self) -> &'static [Template] {
        match self {
            Self::Rust => RUST,
            Self::Ts => TS,
            Self::Python => PYTHON,
            Self::Go => GO,
        }
    }

    fn copied(self) -> &'static [Template] {
        match self {
            Self::Rust => &[],
            Self::Ts => TS_COPIED,
            Self::Python => PYTHON_COPIED,
            Self::Go => GO_COPIED,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Ts => "TypeScript",
            Self::Python => "Python",
            Self::Go => "Go",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Ts => "ts",
            Self::Python => "python",
            Self::Go => "go",
        }
    }
}

impl Project {
    /// The command that builds the project, run in its directory.
    pub fn build_command(&self) -> String {
        match self.lang {
            Lang::Rust => "cargo build --release --target wasm32-unknown-unknown".into(),
            Lang::Ts => "npm run build".into(),
            Lang::Python => format!("python3 build.py component . --out {}.wasm", self.name),
            Lang::Go => format!("wasmop build -o {}.wasm", self.name),
        }
    }

    /// The command that runs its unit tests.
    pub fn test_command(&self) -> String {
        match self.lang {
            Lang::Rust => "cargo test".into(),
            Lang::Ts => "npm test".into(),
            Lang::Python => "python3 build.py test . tests".into(),
            Lang::Go => "go test ./...".into(),
        }
    }

    /// The command that runs its cases (`cases/`) against the component.
    pub fn cases_command(&self) -> String {
        format!("wasmop test --guest {} cases", self.wasm())
    }

    /// The component the build makes, relative to the project.
    pub fn wasm(&self) -> String {
        match self.lang {
            Lang::Rust => format!(
                "target/wasm32-unknown-unknown/release/{}.wasm",
                self.name.replace('-', "_")
            ),
            Lang::Ts | Lang::Python | Lang::Go => format!("{}.wasm", self.name),
        }
    }

    fn kind(&self) -> String {
        self.kind.clone().unwrap_or_else(|| {
            self.name
                .split('-')
                .map(|part| {
                    let mut chars = part.chars();
                    chars
                        .next()
                        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                        .unwrap_or_default()
                })
                .collect()
        })
    }

    fn check(&self) -> Result<()> {
        let name = &self.name;
        ensure!(
            !name.is_empty()
                && name.len() <= 63
                && name.starts_with(|c: char| c.is_ascii_lowercase())
                && !name.ends_with('-')
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "the name {name:?} is not a DNS label (lowercase letters, digits and '-', starting with a letter, at most 63 characters)"
        );
        let kind = self.kind();
        ensure!(
            kind.starts_with(|c: char| c.is_ascii_uppercase())
                && kind.chars().all(|c| c.is_ascii_alphanumeric()),
            "the kind {kind:?} is not CamelCase (a capital letter, then letters and digits): pass --kind"
        );
        let group = &self.group;
        ensure!(
            group.contains('.')
                && group.len() <= 253
                && group.split('.').all(|label| !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')),
            "the group {group:?} is not an API group (a lowercase DNS name with a dot, e.g. example.com)"
        );
        Ok(())
    }

    fn sdk(&self) -> Result<PathBuf> {
        let given = self.sdk.clone();
        let path = given
            .clone()
            .unwrap_or_else(|| PathBuf::from(BUILT_FROM_SDK));
        match path.join("Cargo.toml").is_file() {
            true => path
                .canonicalize()
                .with_context(|| format!("resolving {}", path.display())),
            false if given.is_some() => bail!(
                "{} holds no Cargo.toml: --sdk must name the Rust SDK's directory (guests/sdk of a wasmop checkout)",
                path.display()
            ),
            false => bail!(
                "this wasmop was not built from a source tree that still has its Rust SDK ({}): pass --sdk <wasmop checkout>/guests/sdk",
                path.display()
            ),
        }
    }

    fn placeholders(&self) -> Result<Vec<(&'static str, String)>> {
        let kind = self.kind();
        let singular = kind.to_ascii_lowercase();
        let files = match self.lang {
            Lang::Rust => {
                "- `src/lib.rs`: the reconcile and its unit test; `Cargo.toml` depends on the Rust SDK by path."
            }
            Lang::Ts => {
                "- `src/guest.ts`: the reconcile; `src/guest.test.ts`: its unit test; `src/index.ts`: the exports.\n- `sdk/index.ts`: the TypeScript SDK; `build.mjs`: its build (types from the WIT, tsc, esbuild, componentize-js), which runs `npm install` first when `node_modules` is missing."
            }
            Lang::Python => {
                "- `guest.py`: the reconcile; `tests/test_guest.py`: its unit test; `app.py`: the exports.\n- `wasmop_sdk/`: the Python SDK; `build.py`: its build (componentize-py, installed into `.tools/` on first use)."
            }
            Lang::Go => {
                "- `guest.go`: the reconcile, registered with `wasmop.Export` in `init`; `guest_test.go`: its unit test, which runs natively.\n- `sdk/`: the Go SDK (`wasmop.dev/sdk`, which `go.mod` replaces with it). `wasmop build` generates the contract's bindings into `generated/` (not committed), builds with `GOOS=wasip1 GOARCH=wasm`, runs the Go runtime's start-up once and keeps it in the module, and makes the component; it needs Go 1.25 or later and nothing else."
            }
        };
        let imports_note = match self.lang {
            Lang::Python => {
                " (and the WASI interfaces componentize-py imports, which the host links granting nothing but clocks and randomness)"
            }
            Lang::Go => {
                " (and the WASI interfaces the Go runtime reaches through the preview 1 adapter, which the host links granting nothing but clocks and randomness)"
            }
            Lang::Rust | Lang::Ts => "",
        };
        let mut values = vec![
            ("{{name}}", self.name.clone()),
            ("{{Kind}}", kind.clone()),
            ("{{group}}", self.group.clone()),
            ("{{plural}}", format!("{singular}s")),
            ("{{package}}", self.name.replace('-', "")),
            ("{{singular}}", singular),
            ("{{lang}}", self.lang.flag().to_owned()),
            ("{{Language}}", self.lang.title().to_owned()),
            ("{{build}}", self.build_command()),
            ("{{test}}", self.test_command()),
            ("{{cases}}", self.cases_command()),
            ("{{wasm}}", self.wasm()),
            ("{{imports_note}}", imports_note.to_owned()),
            ("{{files}}", files.to_owned()),
        ];
        match self.lang {
            Lang::Rust => values.push(("{{sdk}}", self.sdk()?.display().to_string())),
            Lang::Ts => {
                let package: serde_json::Value = serde_json::from_str(TS_SDK_PACKAGE)
                    .context("the TypeScript SDK's package.json")?;
                values.push((
                    "{{devDependencies}}",
                    serde_json::to_string_pretty(&package["devDependencies"])?
                        .replace('\n', "\n  "),
                ));
            }
            Lang::Python | Lang::Go => {}
        }
        Ok(values)
    }
}

/// Writes `project` into `dir` (which must not exist or be empty) and
/// returns the files written, relative to it.
pub fn generate(project: &Project, dir: &Path) -> Result<Vec<PathBuf>> {
    project.check()?;
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        ensure!(
            entries.next().is_none(),
            "{} exists and is not empty: wasmop new writes only into a new or empty directory",
            dir.display()
        );
    }
    let values = project.placeholders()?;
    let mut written = Vec::new();
    let templates = COMMON
        .iter()
        .chain(project.lang.templates())
        .map(|(path, template)| {
            let mut text = (*template).to_owned();
            for (placeholder, value) in &values {
                text = text.replace(placeholder, value);
            }
            (*path, text)
        });
    let copied = COMMON_COPIED
        .iter()
        .chain(project.lang.copied())
        .map(|(path, text)| (*path, (*text).to_owned()));
    for (path, text) in templates.chain(copied) {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, text).with_context(|| format!("writing {}", target.display()))?;
        written.push(PathBuf::from(path));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(name: &str, lang: Lang) -> Project {
        Project {
            name: name.into(),
            lang,
            kind: None,
            group: "example.com".into(),
            sdk: None,
        }
    }

    #[test]
    fn a_go_project_carries_every_file_of_the_go_sdk_but_its_tests() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/sdk-go");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| {
                (f.ends_with(".go") || f.ends_with(".s") || f == "go.mod")
                    && !f.ends_with("_test.go")
            })
            .map(|f| format!("sdk/{f}"))
            .collect();
        files.sort();
        let copied: Vec<&str> = GO_COPIED.iter().map(|(path, _)| *path).collect();
        assert_eq!(copied, files);
    }

    #[test]
    fn the_kind_is_the_name_in_camel_case_unless_given() {
        assert_eq!(project("web-cache", Lang::Ts).kind(), "WebCache");
        let mut p = project("x", Lang::Ts);
        p.kind = Some("Thing".into());
        assert_eq!(p.kind(), "Thing");
    }

    #[test]
    fn names_kinds_and_groups_are_checked() {
        assert!(project("Bad", Lang::Ts).check().is_err());
        assert!(project("-x", Lang::Ts).check().is_err());
        assert!(project("x-", Lang::Ts).check().is_err());
        let mut p = project("ok", Lang::Ts);
        p.group = "nodot".into();
        assert!(p.check().unwrap_err().to_string().contains("API group"));
        p.group = "example.com".into();
        p.kind = Some("lower".into());
        assert!(p.check().unwrap_err().to_string().contains("CamelCase"));
    }

    #[test]
    fn every_placeholder_is_filled_and_a_non_empty_directory_is_refused() {
        for lang in [Lang::Rust, Lang::Ts, Lang::Python, Lang::Go] {
            let dir = std::env::temp_dir().join(format!(
                "wasmop-new-unit-{}-{}",
                lang.flag(),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let files = generate(&project("web-cache", lang), &dir).unwrap();
            for (path, _) in COMMON.iter().chain(lang.templates()) {
                let text = std::fs::read_to_string(dir.join(path)).unwrap();
                assert!(
                    !text.contains("{{"),
                    "{}: {path} keeps a placeholder",
                    lang.flag()
                );
            }
            for (path, text) in COMMON_COPIED.iter().chain(lang.copied()) {
                assert_eq!(
                    &std::fs::read_to_string(dir.join(path)).unwrap(),
                    text,
                    "{}: {path} is not copied as it is",
                    lang.flag()
                );
            }
            assert_eq!(
                files.len(),
                COMMON.len() + COMMON_COPIED.len() + lang.templates().len() + lang.copied().len()
            );
            let again = generate(&project("web-cache", lang), &dir).unwrap_err();
            assert!(again.to_string().contains("not empty"), "{again}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
