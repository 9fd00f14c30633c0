// Package k8s holds, in appsv1 and corev1, the fields of k8s.io/api's
// types this guest writes and reads, with the same Go and JSON names, so
// that deploymentForCache reads as the seeds' desiredDeployment does.
//
// k8s.io/api itself builds too, but its types and their dependencies
// (apimachinery, protobuf, the scheme) make a 16 MB module where this one
// is 4 MB, take several times as long for the host to compile, and
// write fields this guest never sets ("status": {}, "creationTimestamp":
// null, "resources": {}), so its children would not be those of the Rust,
// TypeScript and Python guests, field for field.
package k8s
