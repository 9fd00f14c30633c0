//! `wasmop new <name> --lang rust|ts|python`: a guest project to start from,
//! as `kubebuilder create api` or `spin new` make one.
//!
//! The project has a kind and its CRD (`crd.yaml`), a sample object, a
//! reconcile that owns one ConfigMap and reports a `Ready` condition, a unit
//! test, two cases for `wasmop test` (`cases/`), the WIT, and a README with
//! the commands that build, test, run the cases, render and run it. It builds with one command and renders with `wasmop render`
//! as generated.
//!
//! The TypeScript and Python projects carry their SDK (and its build
//! script) as `guests/sdk-ts` and `guests/sdk-py` have it, so they build
//! anywhere; the Rust project depends on the Rust SDK by path (`--sdk`,
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

const TS_COPIED: &[Template] = &[
    (
        "build.mjs",
        include_str!("../../../guests/sdk-ts/build.mjs"),
    ),
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
    ("build.py", include_str!("../../../guests/sdk-py/build.py")),
    (
        "requirements.txt",
        include_str!("../../../guests/sdk-py/requirements.txt"),
    ),
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
        }
    }

    fn copied(self) -> &'static [Template] {
        match self {
            Self::Rust => &[],
            Self::Ts => TS_COPIED,
            Self::Python => PYTHON_COPIED,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Ts => "TypeScript",
            Self::Python => "Python",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Ts => "ts",
            Self::Python => "python",
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
        }
    }

    /// The command that runs its unit tests.
    pub fn test_command(&self) -> String {
        match self.lang {
            Lang::Rust => "cargo test".into(),
            Lang::Ts => "npm test".into(),
            Lang::Python => "python3 build.py test . tests".into(),
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
            Lang::Ts | Lang::Python => format!("{}.wasm", self.name),
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
        };
        let imports_note = match self.lang {
            Lang::Python => {
                " (and the WASI interfaces componentize-py imports, which the host links granting nothing but clocks and randomness)"
            }
            Lang::Rust | Lang::Ts => "",
        };
        let mut values = vec![
            ("{{name}}", self.name.clone()),
            ("{{Kind}}", kind.clone()),
            ("{{group}}", self.group.clone()),
            ("{{plural}}", format!("{singular}s")),
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
            Lang::Python => {}
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
        for lang in [Lang::Rust, Lang::Ts, Lang::Python] {
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
