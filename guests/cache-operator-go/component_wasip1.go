//go:build wasip1

package cacheoperator

// inComponent is true in the component.
const inComponent = true
