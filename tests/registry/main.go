// The CNCF distribution registry as its cmd/registry builds it, with only
// what the tests use: in-memory and filesystem storage and htpasswd
// authentication. The cloud storage drivers (S3, GCS, Azure) and their
// SDKs are left out, which halves the packages a cold build compiles.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
