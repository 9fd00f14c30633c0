module wasmop.dev/sdk

go 1.25
