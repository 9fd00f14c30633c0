package wasmop

import "strings"

// The well-known kinds guests most often own.
var (
	// KindConfigMap is core/v1 ConfigMap.
	KindConfigMap = KindRef{Version: "v1", Kind: "ConfigMap"}
	// KindSecret is core/v1 Secret.
	KindSecret = KindRef{Version: "v1", Kind: "Secret"}
	// KindService is core/v1 Service.
	KindService = KindRef{Version: "v1", Kind: "Service"}
	// KindDeployment is apps/v1 Deployment.
	KindDeployment = KindRef{Group: "apps", Version: "v1", Kind: "Deployment"}
	// KindStatefulSet is apps/v1 StatefulSet.
	KindStatefulSet = KindRef{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	// KindPodDisruptionBudget is policy/v1 PodDisruptionBudget.
	KindPodDisruptionBudget = KindRef{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}
)

// Kind is the kind an apiVersion ("apps/v1", "v1") and a kind name.
func Kind(apiVersion, kind string) KindRef {
	group, version := SplitAPIVersion(apiVersion)
	return KindRef{Group: group, Version: version, Kind: kind}
}

// APIVersion is "group/version", or "version" for the core group.
func (k KindRef) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// SplitAPIVersion is the group and version of an apiVersion ("apps/v1";
// "" for the core group's "v1").
func SplitAPIVersion(apiVersion string) (group, version string) {
	if g, v, ok := strings.Cut(apiVersion, "/"); ok {
		return g, v
	}
	return "", apiVersion
}

// Builder makes a [Description] the way controller-runtime's builder
// wires a controller: [For] the primary kind, then what it [Builder.Owns]
// and [Builder.Watches].
type Builder struct {
	description Description
}

// For starts the description of a guest that reconciles parents of kind
// primary (a custom resource).
func For(primary KindRef) *Builder {
	return &Builder{description: Description{Primary: primary}}
}

// Owns declares a namespaced kind the guest returns as children.
func (b *Builder) Owns(kind KindRef) *Builder {
	b.description.Children = append(b.description.Children, ChildKind{Kind: kind})
	return b
}

// OwnsClusterScoped declares a cluster-scoped kind the guest returns as
// children.
func (b *Builder) OwnsClusterScoped(kind KindRef) *Builder {
	b.description.Children = append(b.description.Children, ChildKind{Kind: kind, ClusterScoped: true})
	return b
}

// Watches declares a kind the guest reads but never writes: the host hands
// each reconcile the objects that map to its parent by by, and reconciles
// the parents an added, changed or deleted object maps to.
func (b *Builder) Watches(kind KindRef, by RelatedBy) *Builder {
	b.description.Related = append(b.description.Related, RelatedKind{Kind: kind, By: by})
	return b
}

// WatchesMetadata is [Builder.Watches] receiving only apiVersion, kind and
// metadata of each object.
func (b *Builder) WatchesMetadata(kind KindRef, by RelatedBy) *Builder {
	b.description.Related = append(b.description.Related, RelatedKind{Kind: kind, By: by, MetadataOnly: true})
	return b
}

// WithFinalizer names the finalizer the host adds to every parent, such as
// "apps.example.com/cleanup".
func (b *Builder) WithFinalizer(name string) *Builder {
	b.description.Finalizer = name
	return b
}

// Complete is the description.
func (b *Builder) Complete() Description {
	return b.description
}
