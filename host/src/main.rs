//! The `wasmop` binary: see [`wasmop_host::cli`].

fn main() -> std::process::ExitCode {
    wasmop_host::cli::main()
}
