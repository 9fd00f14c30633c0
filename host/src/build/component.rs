//! The last step of a Go build: a core module made a component.
//!
//! The module is built with every export of the contract; the exports the
//! guest does not implement are removed here ([`rename_exports`]), so the
//! host finds exactly what the guest serves (it registers webhooks for a
//! guest that exports `admission` or `conversion`). Then `wit-component`
//! embeds the world, adapts the module's WASI preview 1 imports with the
//! reactor adapter of the host's own wasmtime version (which the host
//! links, granting nothing), and encodes the component: the world's
//! imports that the module does not use are not imported.

use wasm_encoder_build::{ExportKind, ExportSection, Module, RawSection};
use wasmparser::{ExternalKind, Parser, Payload};
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::{Resolve, WorldId};

use super::{Error, Result};

/// `module` with each export named as `rename` says: a new name (the same
/// to keep it), or none to remove it.
pub(super) fn rename_exports(
    module: &[u8],
    rename: impl Fn(&str) -> Option<&str>,
) -> Result<Vec<u8>> {
    let fail =
        |e: wasmparser::BinaryReaderError| Error::Component(format!("reading the module: {e}"));
    let mut out = Module::new();
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(fail)?;
        if let Payload::ExportSection(reader) = &payload {
            let mut exports = ExportSection::new();
            for export in reader.clone() {
                let export = export.map_err(fail)?;
                let Some(name) = rename(export.name) else {
                    continue;
                };
                let kind = match export.kind {
                    ExternalKind::Func | ExternalKind::FuncExact => ExportKind::Func,
                    ExternalKind::Table => ExportKind::Table,
                    ExternalKind::Memory => ExportKind::Memory,
                    ExternalKind::Global => ExportKind::Global,
                    ExternalKind::Tag => ExportKind::Tag,
                };
                exports.export(name, kind, export.index);
            }
            out.section(&exports);
        } else if let Some((id, range)) = payload.as_section() {
            let range = usize::try_from(range.start).unwrap_or(usize::MAX)
                ..usize::try_from(range.end).unwrap_or(usize::MAX);
            let data = module.get(range).ok_or_else(|| {
                Error::Component("a section reaches past the module's end".into())
            })?;
            out.section(&RawSection { id, data });
        }
    }
    Ok(out.finish())
}

/// `module` as a component of `world`, its WASI preview 1 imports adapted.
pub(super) fn encode(mut module: Vec<u8>, resolve: &Resolve, world: WorldId) -> Result<Vec<u8>> {
    wit_component::embed_component_metadata(
        &mut module,
        resolve,
        world,
        StringEncoding::UTF8,
        false,
    )
    .map_err(|e| Error::Component(format!("{e:#}")))?;
    ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| {
            encoder.adapter(
                "wasi_snapshot_preview1",
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| Error::Component(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renaming_keeps_every_other_section_and_export() {
        let mut module = Module::new();
        let mut types = wasm_encoder_build::TypeSection::new();
        types.ty().function([], []);
        module.section(&types);
        let mut functions = wasm_encoder_build::FunctionSection::new();
        functions.function(0);
        functions.function(0);
        module.section(&functions);
        let mut exports = ExportSection::new();
        exports.export("keep", ExportKind::Func, 0);
        exports.export("drop", ExportKind::Func, 1);
        exports.export("old", ExportKind::Func, 1);
        module.section(&exports);
        let mut code = wasm_encoder_build::CodeSection::new();
        for _ in 0..2 {
            let mut body = wasm_encoder_build::Function::new([]);
            body.instructions().end();
            code.function(&body);
        }
        module.section(&code);
        let stripped = rename_exports(&module.finish(), |name| match name {
            "drop" => None,
            "old" => Some("new"),
            other => Some(other),
        })
        .unwrap();
        wasmparser::validate(&stripped).unwrap();
        let names: Vec<String> = Parser::new(0)
            .parse_all(&stripped)
            .filter_map(|p| match p.unwrap() {
                Payload::ExportSection(reader) => Some(
                    reader
                        .into_iter()
                        .map(|e| e.unwrap().name.to_owned())
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(names, ["keep", "new"]);
    }
}
