//! The contract's version, read from the package line of the newest WIT
//! folder (`wit/operator@<version>/operator.wit`): every name that carries
//! the version is made from it here, once.

use std::path::Path;

fn main() {
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    println!("cargo::rerun-if-changed={}", wit.display());
    let newest = std::fs::read_dir(&wit)
        .expect("the wit folder")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let version = name.strip_prefix("operator@")?.to_owned();
            let parts: Vec<u64> = version
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            Some((parts, name))
        })
        .max()
        .expect("a folder wit/operator@<version>");
    let file = wit.join(&newest.1).join("operator.wit");
    println!("cargo::rerun-if-changed={}", file.display());
    let text = std::fs::read_to_string(&file).expect("the contract's WIT");
    let package = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("package ")?.strip_suffix(';'))
        .expect("a `package <name>@<version>;` line")
        .trim()
        .to_owned();
    let (name, version) = package.split_once('@').expect("a versioned package");
    assert_eq!(
        newest.1,
        format!("operator@{version}"),
        "{} declares {package}",
        file.display()
    );
    let (namespace, _) = name.split_once(':').expect("a namespaced package");
    let interface = |i: &str| format!("{namespace}:operator/{i}@{version}");
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("contract.rs");
    std::fs::write(
        out,
        format!(
            "/// The WIT package these types render.\n\
             pub const WIT_PACKAGE: &str = {package:?};\n\
             /// The contract's version.\n\
             pub const VERSION: &str = {version:?};\n\
             /// The folder of `wit/` that holds it.\n\
             pub const WIT_FOLDER: &str = {folder:?};\n\
             /// The interface a guest exports, as its component names it.\n\
             pub const OPERATOR_INTERFACE: &str = {operator:?};\n\
             /// The optional admission interface, as a component names it.\n\
             pub const ADMISSION_INTERFACE: &str = {admission:?};\n\
             /// The optional conversion interface, as a component names it.\n\
             pub const CONVERSION_INTERFACE: &str = {conversion:?};\n\
             /// The `log` import, as a component names it.\n\
             pub const LOG_INTERFACE: &str = {log:?};\n\
             /// The shared `types`, as a component names them.\n\
             pub const TYPES_INTERFACE: &str = {types:?};\n",
            folder = newest.1,
            operator = interface("operator"),
            admission = interface("admission"),
            conversion = interface("conversion"),
            log = interface("log"),
            types = interface("types"),
        ),
    )
    .expect("writing contract.rs");
}
