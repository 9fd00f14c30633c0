//! `wasmop test` as its user meets it: one line per case, the first
//! difference as a path and both values, a summary, exit 1 on a failure;
//! a file or document that is not a case is a failure that names it and
//! the run goes on; `--update` writes the answers back and a second run
//! passes; `--settings` reaches the guest unless a case names its own; a
//! guest that traps shows its own stack under `wasmop test` and `render`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A folder of case files, removed when dropped.
struct Folder(PathBuf);

impl Folder {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("wasmop-cases-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `wasmop test --guest <the Rust cache-operator> <args>`: exit code and stdout.
fn wasmop_test(args: &[&Path]) -> (i32, String) {
    wasmop(
        &[
            "test".as_ref(),
            "--guest".as_ref(),
            &support::guest_module("cache-operator").unwrap(),
        ],
        args,
    )
}

/// `wasmop <first> <args>`: exit code and output.
fn wasmop(first: &[&Path], args: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(first)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

const PARENT: &str = "parent:
  apiVersion: apps.example.com/v1alpha1
  kind: Cache
  metadata: {name: demo, namespace: default, uid: u-1, generation: 1}
  spec: {image: \"redis:7.2\", replicas: 2}
";

#[test]
fn a_failing_case_shows_its_first_difference_and_the_run_goes_on() {
    let folder = Folder::new("fail");
    let file = folder.file(
        "a.yaml",
        &format!(
            "name: passes\n{PARENT}expect:\n  status: {{phase: Pending}}\n  children: [{{kind: Deployment, metadata: {{name: demo}}, spec: {{replicas: 2}}}}]\n\
             ---\nname: wrong phase\n{PARENT}expect:\n  status: {{phase: Ready}}\n\
             ---\nname: wrong replicas\n{PARENT}expect:\n  children: [{{kind: Deployment, metadata: {{name: demo}}, spec: {{replicas: 3}}}}]\n\
             ---\nname: a child that is not there\n{PARENT}expect:\n  children: [{{kind: Secret, metadata: {{name: demo}}}}]\n\
             ---\nname: a condition by type\n{PARENT}expect:\n  status: {{conditions: [{{type: Available, status: \"True\"}}]}}\n\
             ---\nname: an error where there is an answer\n{PARENT}expect:\n  error: {{kind: permanent}}\n\
             ---\nname: typo\nparnet: {{}}\n\
             ---\nname: two calls\n{PARENT}admission: {{operation: CREATE, object: {{}}}}\n\
             ---\nname: reconcile fields on an admission case\nadmission: {{operation: CREATE, object: {{apiVersion: apps.example.com/v1alpha1, kind: Cache, metadata: {{name: x}}, spec: {{image: \"redis:7.2\"}}}}}}\nexpect: {{children: []}}\n\
             ---\nname: last, and passes\n{PARENT}expect: {{requeueAfterSeconds: null}}\n"
        ),
    );
    let (code, out) = wasmop_test(&[&file]);
    assert_eq!(code, 1, "{out}");
    let shown = file.display();
    for line in [
        format!("ok   {shown}: passes"),
        format!(r#"FAIL {shown}: wrong phase: status.phase: expected "Ready", got "Pending""#),
        format!(
            "FAIL {shown}: wrong replicas: children[Deployment/demo].spec.replicas: expected 3, got 2"
        ),
        format!(
            "FAIL {shown}: a child that is not there: children[Secret/demo]: expected the child, got nothing (children: ["
        ),
        format!(
            r#"FAIL {shown}: a condition by type: status.conditions[type=Available].status: expected "True", got "False""#
        ),
        format!(
            "FAIL {shown}: an error where there is an answer: error: expected a permanent failure, got an answer"
        ),
        format!("FAIL {shown}: document 7: not a case: unknown field `parnet`"),
        format!(
            "FAIL {shown}: two calls: a case has exactly one of parent, admission and conversion"
        ),
        format!(
            "FAIL {shown}: reconcile fields on an admission case: expect.children is for reconcile cases"
        ),
        "test result: FAILED. 2 passed; 8 failed".to_owned(),
    ] {
        assert!(out.contains(&line), "no line {line:?} in:\n{out}");
    }
    assert!(
        out.contains(&format!("ok   {shown}: last, and passes")),
        "{out}"
    );
}

#[test]
fn a_file_that_is_not_yaml_or_a_missing_path_is_named() {
    let folder = Folder::new("bad");
    let bad = folder.file("bad.yaml", "name: [unclosed\n");
    let (code, out) = wasmop_test(&[&bad]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("FAIL {}: parsing", bad.display())),
        "{out}"
    );
    let (code, out) = wasmop_test(&[&folder.0.join("missing.yaml")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("missing.yaml: no such file or directory"),
        "{out}"
    );
    let empty = Folder::new("empty");
    let (code, out) = wasmop_test(&[&empty.0]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no .yaml or .yml case files"), "{out}");
}

#[test]
fn update_writes_the_answers_back_and_a_second_run_passes() {
    let folder = Folder::new("update");
    let file = folder.file(
        "a.yaml",
        &format!(
            "name: new\n{PARENT}---\nname: refused\nparent:\n  apiVersion: apps.example.com/v1alpha1\n  kind: Cache\n  metadata: {{name: demo, namespace: default, uid: u-1}}\n  spec: {{image: redis, replicas: 11}}\n\
             ---\nname: admitted\nadmission: {{operation: CREATE, object: {{apiVersion: apps.example.com/v1alpha1, kind: Cache, metadata: {{name: x, namespace: default}}, spec: {{image: \"redis:7.2\"}}}}}}\n"
        ),
    );
    let update = Path::new("--update");
    let (code, out) = wasmop_test(&[update, &file]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("test result: ok. 3 passed; 0 failed; 3 updated"),
        "{out}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    for part in [
        "noOtherChildren: true",
        "kind: Deployment",
        "kind: permanent",
        "spec.replicas must be between 1 and 10, got 11",
        "allowed: true",
        "maxmemory-policy: allkeys-lru",
    ] {
        assert!(text.contains(part), "no {part:?} in:\n{text}");
    }
    let (code, out) = wasmop_test(&[&file]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("test result: ok. 3 passed; 0 failed"), "{out}");
    // Nothing changed: nothing is written.
    let (_, out) = wasmop_test(&[update, &file]);
    assert!(out.contains("0 updated"), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

#[test]
fn settings_reach_the_guest_unless_a_case_names_its_own() {
    let folder = Folder::new("settings");
    let settings = folder.file("settings.yml.txt", "defaultImage: \"redis:7.4\"\n");
    let object = "{apiVersion: apps.example.com/v1alpha1, kind: Cache, metadata: {name: x, namespace: default}, spec: {config: {maxmemory-policy: noeviction}}}";
    let file = folder.file(
        "a.yaml",
        &format!(
            "name: from --settings\nadmission: {{operation: CREATE, object: {object}}}\nexpect: {{allowed: true, object: {{spec: {{image: \"redis:7.4\"}}}}}}\n\
             ---\nname: its own\nsettings: {{defaultImage: \"redis:7.0\"}}\nadmission: {{operation: CREATE, object: {object}}}\nexpect: {{allowed: true, object: {{spec: {{image: \"redis:7.0\"}}}}}}\n"
        ),
    );
    let (code, out) = wasmop_test(&[Path::new("--settings"), &settings, &file]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = wasmop_test(&[&file]);
    assert_eq!(
        code, 1,
        "without --settings the first case has no default image:\n{out}"
    );
    assert!(
        out.contains("FAIL") && out.contains("from --settings"),
        "{out}"
    );
}

#[test]
fn a_guest_that_traps_shows_its_own_stack_in_test_and_render() {
    let folder = Folder::new("trap");
    let parent = "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {name: p, namespace: default, uid: u-1}\nspec: {attack: panic}\n";
    let file = folder.file(
        "a.yaml",
        &format!("name: panics\nparent:\n  {}", parent.replace('\n', "\n  ")),
    );
    let module = support::guest_module("hostile-debug").unwrap();
    let (code, out) = wasmop(&["test".as_ref(), "--guest".as_ref(), &module], &[&file]);
    assert_eq!(code, 1, "{out}");
    let shown = file.display();
    assert!(
        out.contains(&format!(
            "FAIL {shown}: panics: error: expected an answer, got trap: guest trapped: panic"
        )),
        "{out}"
    );
    assert!(
        out.contains("\n    0: ") && out.contains("hostile_guest"),
        "{out}"
    );
    let parent_file = folder.file("parent.yaml", parent);
    let (code, out) = wasmop(
        &[
            "render".as_ref(),
            "--guest".as_ref(),
            &module,
            "--parent".as_ref(),
        ],
        &[&parent_file],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("guest stack (innermost first):\n  0: "),
        "{out}"
    );
    assert!(out.contains("guests/hostile/src/lib.rs:"), "{out}");
}
