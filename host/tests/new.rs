//! `wasmop new <name> --lang rust|ts|python|go`: each project, as generated,
//! builds with the one command its README gives, passes its unit test and
//! its two `wasmop test` cases, and renders its sample with `wasmop render`
//! into the ConfigMap it owns.
//!
//! The TypeScript and Python builds take their pinned toolchains from
//! `WASMOP_NODE_TOOLS` and `WASMOP_PYTHON_TOOLS`, which `cargo xtask test`
//! sets after installing them; without them the test fails and says so
//! rather than downloading anything. The Rust build keeps its target
//! directory in `target/scaffold`, so a second run is incremental.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn wasmop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
}

/// Runs `command`, failing with its output unless it succeeds.
fn run(what: &str, command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn tools(var: &str) -> PathBuf {
    let dir = std::env::var_os(var).unwrap_or_else(|| {
        panic!("{var} is not set: run this test through `cargo xtask test`, which installs the pinned toolchain and sets it")
    });
    PathBuf::from(dir)
}

/// A new empty directory for a project.
fn project_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmop-new-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `wasmop new`, then the README's build and test commands (split on
/// spaces; none has quotes), then a render of `sample.yaml`.
fn generate_build_test_render(
    name: &str,
    lang: &str,
    env: &[(&str, PathBuf)],
    wasm: impl Fn(&Path) -> PathBuf,
) {
    let dir = project_dir(name);
    let created = run(
        "wasmop new",
        wasmop()
            .args(["new", name, "--lang", lang, "--dir"])
            .arg(&dir),
    );
    assert!(created.contains("README.md"), "{created}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    // The README's first two shell blocks: build, then test.
    let blocks: Vec<&str> = readme
        .split("```sh\n")
        .skip(1)
        .map(|block| block.split("\n```").next().unwrap().trim())
        .collect();
    for (what, line) in [("build", blocks[0]), ("unit test", blocks[1])] {
        let mut words = line.split(' ');
        // `wasmop` is the one this test runs, not one on PATH.
        let mut command = match words.next().unwrap() {
            "wasmop" => wasmop(),
            program => Command::new(program),
        };
        command.args(words).current_dir(&dir);
        for (var, value) in env {
            command.env(var, value);
        }
        run(&format!("{lang} {what}: {line}"), &mut command);
    }
    let module = wasm(&dir);
    assert!(module.is_file(), "the build made no {}", module.display());
    // The README's third block runs the scaffolded cases; the module is
    // where this test's build put it.
    assert!(
        blocks[2].starts_with("wasmop test --guest ") && blocks[2].ends_with(" cases"),
        "{}",
        blocks[2]
    );
    let cases = run(
        "wasmop test",
        wasmop()
            .args(["test", "--guest"])
            .arg(&module)
            .arg("cases")
            .current_dir(&dir),
    );
    assert_eq!(
        cases.matches("\nok ").count() + usize::from(cases.starts_with("ok ")),
        2,
        "{cases}"
    );
    assert!(
        cases.contains("test result: ok. 2 passed; 0 failed"),
        "{cases}"
    );
    let rendered = run(
        "wasmop render",
        wasmop()
            .args(["render", "-o", "json", "--guest"])
            .arg(&module)
            .arg("--parent")
            .arg(dir.join("sample.yaml")),
    );
    let rendered: Value = serde_json::from_str(&rendered).unwrap();
    let child = &rendered["children"][0];
    assert_eq!(child["kind"], "ConfigMap", "{rendered:#}");
    assert_eq!(child["metadata"]["name"], "sample-data", "{rendered:#}");
    assert_eq!(child["data"]["greeting"], "hello", "{rendered:#}");
    assert_eq!(rendered["status"]["conditions"][0]["type"], "Ready");
    assert_eq!(rendered["status"]["conditions"][0]["status"], "True");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_new_typescript_guest_builds_tests_and_renders_as_generated() {
    let tools = tools("WASMOP_NODE_TOOLS");
    generate_build_test_render("ts-guest", "ts", &[("WASMOP_NODE_TOOLS", tools)], |dir| {
        dir.join("ts-guest.wasm")
    });
}

#[test]
fn a_new_python_guest_builds_tests_and_renders_as_generated() {
    let tools = tools("WASMOP_PYTHON_TOOLS");
    generate_build_test_render(
        "py-guest",
        "python",
        &[("WASMOP_PYTHON_TOOLS", tools)],
        |dir| dir.join("py-guest.wasm"),
    );
}

/// A Go project builds with `wasmop build` and Go alone: the bindings are
/// generated from the contract, nothing is installed.
#[test]
fn a_new_go_guest_builds_tests_and_renders_as_generated() {
    generate_build_test_render("go-guest", "go", &[], |dir| dir.join("go-guest.wasm"));
}

#[test]
fn a_new_rust_guest_builds_tests_and_renders_as_generated() {
    let target = support::workspace().join("target/scaffold");
    generate_build_test_render(
        "rs-guest",
        "rust",
        &[("CARGO_TARGET_DIR", target.clone())],
        |_| target.join("wasm32-unknown-unknown/release/rs_guest.wasm"),
    );
}

#[test]
fn a_project_is_refused_in_a_directory_that_is_not_empty_and_for_a_bad_name() {
    let dir = project_dir("taken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep.txt"), "mine").unwrap();
    let out = wasmop()
        .args(["new", "taken", "--lang", "ts", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
        "mine"
    );
    let out = wasmop()
        .args(["new", "Bad_Name", "--lang", "python", "--dir"])
        .arg(dir.join("x"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("DNS label"));
    assert!(
        !dir.join("x").exists(),
        "nothing is written for a refused name"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
