module wasmop.dev/hostile-go

go 1.26

require wasmop.dev/sdk v0.0.0

replace wasmop.dev/sdk => ../sdk-go
