//go:build !wasip1

package cacheoperator

// inComponent is false natively: unit tests set registryUrl without a
// build that sends requests.
const inComponent = false
