module {{group}}/{{name}}

go 1.25

require wasmop.dev/sdk v0.0.0

// The Go SDK, carried by the project (wasmop new wrote it into sdk/).
replace wasmop.dev/sdk => ./sdk
