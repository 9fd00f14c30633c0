//go:build wasip1

package wasmop

const unavailable = "this guest was built without --http"
