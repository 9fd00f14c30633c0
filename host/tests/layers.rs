//! The modules of `host/src` form layers: each imports only modules of the
//! layers below its own, so no two modules import each other and nothing
//! imports upward. So do the files of `controller/`, `runtime/`, `source/`
//! and `telemetry/` among themselves. The layers are the tables in
//! ARCHITECTURE.md's "Layers"; this test reads them, so the map and the
//! tree cannot part.
//!
//! An import is any path `crate::<module>` in a module's code (comments are
//! left out): a `use`, a path in an expression, a type. Inside a folder, an
//! import of a sibling is `crate::<folder>::<module>`, or `super::<module>`
//! in a file directly in the folder (`super::super::<module>` one level
//! further down).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layered places: the top of `host/src` and the folders with tables
/// of their own, each as ARCHITECTURE.md heads its table.
const PLACES: &[(&str, &str)] = &[
    ("", "Layers"),
    ("controller", "Layers of `controller/`"),
    ("runtime", "Layers of `runtime/`"),
    ("source", "Layers of `source/`"),
    ("telemetry", "Layers of `telemetry/`"),
];

/// Files of a place that are not modules of its layers: the crate's roots,
/// and a folder's own `mod.rs`, which declares and re-exports its modules.
const ROOTS: &[&str] = &["lib", "main", "mod"];

/// The layers of the table headed `heading` (a `##` or `###` heading in
/// ARCHITECTURE.md), lowest first: each row is `| layer | `module`, … |`,
/// the top layer first.
fn layers(heading: &str) -> Vec<(String, Vec<String>)> {
    let map = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    let text = std::fs::read_to_string(&map).unwrap();
    let section = text
        .split("\n#")
        .map(|s| s.trim_start_matches('#').trim_start())
        .find(|s| s.starts_with(&format!("{heading}\n")))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section headed {heading:?}"));
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
    assert!(layers.len() > 1, "no layers under {heading:?}: {section}");
    let mut seen = BTreeSet::new();
    for module in layers.iter().flat_map(|(_, modules)| modules) {
        assert!(
            seen.insert(module),
            "{module} is in two layers of {heading:?}"
        );
    }
    layers.reverse();
    layers
}

/// The files of `dir`, with their path relative to it.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), text));
            }
        }
    }
    out
}

/// The name that follows `prefix` at the start of `rest`, if one does.
fn name_after<'a>(rest: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = rest.strip_prefix(prefix)?;
    let end = rest
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The modules of `place` (a folder of `host/src`, or `""` for its top)
/// each module of it imports.
fn imports(place: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let dir = src.join(place);
    let crate_path = if place.is_empty() {
        "crate::".to_owned()
    } else {
        format!("crate::{place}::")
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (relative, text) in files(&dir) {
        let depth = relative.components().count();
        let first = relative.components().next().unwrap();
        let module = Path::new(first.as_os_str())
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // Inside a folder, `super::` names a sibling only from a file
        // directly in it, `super::super::` only from one a level further.
        let sibling = match depth {
            _ if place.is_empty() => None,
            1 => Some("super::"),
            2 => Some("super::super::"),
            _ => None,
        };
        let used = graph.entry(module.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                let Some(name) = name_after(&code[at..], &crate_path) else {
                    continue;
                };
                assert!(
                    !name.is_empty() || !code[at + crate_path.len()..].starts_with('{'),
                    "{place}/{}: `{}`: name the module, not a group (`{crate_path}{{..}}`), so this test sees it",
                    relative.display(),
                    line.trim()
                );
                if !name.is_empty() && name != module {
                    used.insert(name.to_owned());
                }
            }
            let Some(sibling) = sibling else { continue };
            for (at, _) in code.match_indices(sibling) {
                // `super::super::x` also matches `super::` at `super::x`.
                if sibling == "super::" && code[..at].ends_with("super::") {
                    continue;
                }
                let Some(name) = name_after(&code[at..], sibling) else {
                    continue;
                };
                if !name.is_empty() && name != module && name != "super" {
                    used.insert(name.to_owned());
                }
            }
        }
    }
    graph
}

/// Whether each module of `place` imports only the layers below its own.
fn layered(place: &str, heading: &str) -> Vec<String> {
    let graph = imports(place);
    let layers = layers(heading);
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, (_, modules))| modules.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let mut wrong = Vec::new();
    let shown = |m: &str| {
        if place.is_empty() {
            m.to_owned()
        } else {
            format!("{place}/{m}")
        }
    };
    for (module, used) in &graph {
        if ROOTS.contains(&module.as_str()) {
            continue;
        }
        let Some(&layer) = layer_of.get(module.as_str()) else {
            wrong.push(format!(
                "host/src/{} is in no layer: add it to the table {heading:?} of ARCHITECTURE.md",
                shown(module)
            ));
            continue;
        };
        for dependency in used {
            match layer_of.get(dependency.as_str()) {
                Some(&below) if below < layer => {}
                Some(&other) => wrong.push(format!(
                    "{} ({}) imports {} ({}), which is not below it",
                    shown(module),
                    layers[layer].0,
                    shown(dependency),
                    layers[other].0
                )),
                // Only the top knows every module; inside a folder an
                // unknown name is an item of the folder's own mod.rs.
                None if place.is_empty() => wrong.push(format!(
                    "{module} imports {dependency}, which is in no layer"
                )),
                None => {}
            }
        }
    }
    for module in layers.iter().flat_map(|(_, modules)| modules) {
        if !graph.contains_key(module) {
            wrong.push(format!(
                "{heading:?} names {}, which is not in host/src",
                shown(module)
            ));
        }
    }
    wrong
}

#[test]
fn every_module_imports_only_the_layers_below_its_own() {
    let wrong = layered("", "Layers");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn inside_each_layered_folder_every_file_imports_only_the_layers_below_its_own() {
    let wrong: Vec<String> = PLACES
        .iter()
        .filter(|(place, _)| !place.is_empty())
        .flat_map(|(place, heading)| layered(place, heading))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
