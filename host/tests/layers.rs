//! The modules of `host/src` form layers: each imports only modules of the
//! layers below its own, so no two modules import each other and nothing
//! imports upward. The layers are the table in ARCHITECTURE.md's "Layers";
//! this test reads it, so the map and the tree cannot part.
//!
//! An import is any path `crate::<module>` in a module's code (comments are
//! left out): a `use`, a path in an expression, a type.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers of ARCHITECTURE.md's "Layers" table, lowest first: each row
/// is `| layer | `module`, `module` |`, the top layer first.
fn layers() -> Vec<(String, Vec<String>)> {
    let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    let text = std::fs::read_to_string(&map).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Layers\n"))
        .expect("ARCHITECTURE.md has a section \"## Layers\"");
    let mut layers: Vec<(String, Vec<String>)> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| layer ") && !l.starts_with("| ---"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let modules = cells[1]
                .split(',')
                .map(|m| m.trim().trim_matches('`').to_owned())
                .collect();
            (cells[0].to_owned(), modules)
        })
        .collect();
    assert!(layers.len() > 1, "no layers in ARCHITECTURE.md: {section}");
    let mut seen = BTreeSet::new();
    for module in layers.iter().flat_map(|(_, modules)| modules) {
        assert!(
            seen.insert(module),
            "{module} is in two layers of ARCHITECTURE.md"
        );
    }
    layers.reverse();
    layers
}

/// Files at the top of `host/src` that are not modules of the tree.
const ROOTS: &[&str] = &["lib", "main"];

/// The module of `host/src` each top-level module imports.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let first = relative.components().next().unwrap();
            let module = Path::new(first.as_os_str())
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let used = graph.entry(module.clone()).or_default();
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or_default();
                for (at, _) in code.match_indices("crate::") {
                    let rest = &code[at + "crate::".len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    assert!(
                        !name.is_empty(),
                        "{}: `{}`: name the module, not a group (`crate::{{..}}`), so this test sees it",
                        relative.display(),
                        line.trim()
                    );
                    if name != module {
                        used.insert(name);
                    }
                }
            }
        }
    }
    graph
}

#[test]
fn every_module_imports_only_the_layers_below_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    let layers = layers();
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, (_, modules))| modules.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let mut wrong = Vec::new();
    for (module, used) in &graph {
        if ROOTS.contains(&module.as_str()) {
            continue;
        }
        let Some(&layer) = layer_of.get(module.as_str()) else {
            wrong.push(format!(
                "host/src/{module} is in no layer: add it to the Layers table of ARCHITECTURE.md"
            ));
            continue;
        };
        for dependency in used {
            match layer_of.get(dependency.as_str()) {
                Some(&below) if below < layer => {}
                Some(&other) => wrong.push(format!(
                    "{module} ({}) imports {dependency} ({}), which is not below it",
                    layers[layer].0, layers[other].0
                )),
                None => wrong.push(format!(
                    "{module} imports {dependency}, which is in no layer"
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_module_of_the_table_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = imports(&src);
    let missing: Vec<String> = layers()
        .into_iter()
        .flat_map(|(_, modules)| modules)
        .filter(|m| !graph.contains_key(m))
        .collect();
    assert!(missing.is_empty(), "not in host/src: {missing:?}");
}
