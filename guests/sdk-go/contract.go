package wasmop

// The contract's records, as plain Go values. The bindings `wasmop build`
// generates convert the WIT's types to and from these, field for field, in
// one place; a guest rarely sees them, since [Request], [Response] and
// [Review] wrap them.

// KindRef names a Kubernetes kind; Group is "" for the core group ("" for
// ConfigMap, "apps" for Deployment).
type KindRef struct {
	// Group is the API group, empty for the core group.
	Group string
	// Version is the version inside the group, e.g. "v1" or "v1alpha1".
	Version string
	// Kind is the kind, e.g. "Deployment".
	Kind string
}

// ChildKind is a kind the guest may create as a child of its parent.
type ChildKind struct {
	// Kind is the child's kind.
	Kind KindRef
	// ClusterScoped is true when the kind is cluster-scoped; the host
	// checks it against the API server's discovery.
	ClusterScoped bool
}

// RelatedByTag says how objects of a related kind map to parents.
type RelatedByTag uint8

const (
	// RelatedByNameAt: the object whose name the parent gives at a JSON
	// pointer, in the parent's namespace.
	RelatedByNameAt RelatedByTag = iota
	// RelatedBySelectorAt: the objects of the parent's namespace whose
	// labels match the selector the parent gives at a JSON pointer.
	RelatedBySelectorAt
	// RelatedByNamespace: every object of the kind in the parent's
	// namespace.
	RelatedByNamespace
)

// RelatedBy is how objects of a related kind map to the parents that read
// them: [ByNameAt], [BySelectorAt] or [InNamespace].
type RelatedBy struct {
	// Tag says which mapping this is.
	Tag RelatedByTag
	// Pointer is the JSON pointer into the parent (RFC 6901) of
	// RelatedByNameAt and RelatedBySelectorAt.
	Pointer string
}

// ByNameAt maps to each parent the object it names at pointer, e.g.
// "/spec/auth/secretRef/name".
func ByNameAt(pointer string) RelatedBy {
	return RelatedBy{Tag: RelatedByNameAt, Pointer: pointer}
}

// BySelectorAt maps to each parent the objects the label selector at
// pointer selects.
func BySelectorAt(pointer string) RelatedBy {
	return RelatedBy{Tag: RelatedBySelectorAt, Pointer: pointer}
}

// InNamespace maps to each parent every object of the kind in its
// namespace.
func InNamespace() RelatedBy {
	return RelatedBy{Tag: RelatedByNamespace}
}

// RelatedKind is a kind the guest reads but never writes.
type RelatedKind struct {
	// Kind is the related kind; it must be namespaced.
	Kind KindRef
	// By is how its objects map to parents.
	By RelatedBy
	// MetadataOnly asks the host to send only apiVersion, kind and
	// metadata.
	MetadataOnly bool
}

// Description is what a guest manages: its primary kind, the kinds of its
// children, a finalizer and the kinds it reads. Build one with [For].
type Description struct {
	// Primary is the parent kind the guest reconciles (a custom resource).
	Primary KindRef
	// Children are the kinds the guest may return as desired children.
	Children []ChildKind
	// Finalizer, when not empty, is added by the host to every parent; the
	// guest is then called with Deleting set until it answers finalized.
	Finalizer string
	// Related are the kinds the guest reads beside its children.
	Related []RelatedKind
}

// ObservedObject is an object the host sends: a child it observes for the
// parent or a related object, with the fields that identify it read out.
type ObservedObject struct {
	// APIVersion is the object's apiVersion, e.g. "apps/v1".
	APIVersion string
	// Kind is the object's kind, e.g. "Deployment".
	Kind string
	// Name is the object's metadata.name.
	Name string
	// Object is the whole object as JSON text.
	Object string
}

// ReconcileRequest is one reconcile's input as the host sends it; see
// [Request] for the parsed view.
type ReconcileRequest struct {
	// Parent is the parent object as JSON text.
	Parent string
	// Observed are the children the host observes for the parent.
	Observed []ObservedObject
	// Deleting is true once the parent has a deletionTimestamp (guests
	// with a finalizer only).
	Deleting bool
	// Now is the host's time in whole seconds since the Unix epoch.
	Now uint64
	// Settings is the guest-list entry's settings as JSON text; nil when
	// the entry has none.
	Settings *string
	// Related are the objects of the related kinds that map to the parent.
	Related []ObservedObject
}

// EventType is the type of an Event: [EventNormal] or [EventWarning].
type EventType uint8

const (
	// EventNormal: something expected happened.
	EventNormal EventType = iota
	// EventWarning: something a person should look at.
	EventWarning
)

// Event is an Event the host records on the parent.
type Event struct {
	// Type is Normal or Warning.
	Type EventType
	// Reason is CamelCase, at most 128 characters, e.g. "ScaledUp".
	Reason string
	// Message is for people; the host keeps its first 1024 bytes.
	Message string
}

// ObjectRef names an observed child by the fields that identify it.
type ObjectRef struct {
	// APIVersion is the child's apiVersion.
	APIVersion string
	// Kind is the child's kind.
	Kind string
	// Name is the child's metadata.name.
	Name string
}

// ReconcileResponse is one reconcile's answer in the contract's shape; a
// guest builds it with [Response].
type ReconcileResponse struct {
	// Children are the desired children as JSON text.
	Children []string
	// Status is the desired status as JSON text; nil leaves it alone.
	Status *string
	// RequeueAfterSeconds asks to be called again after that long.
	RequeueAfterSeconds *uint32
	// Finalized says, on the deletion path, that cleanup is complete.
	Finalized bool
	// Events are recorded on the parent.
	Events []Event
	// Keep are observed children to leave exactly as they are.
	Keep []ObjectRef
}

// Operation is what an admission request does to the object.
type Operation uint8

const (
	// OperationCreate: the object is being created.
	OperationCreate Operation = iota
	// OperationUpdate: the object is being changed.
	OperationUpdate
	// OperationDelete: the object is being deleted.
	OperationDelete
	// OperationConnect: a connect request (exec, proxy) to the object.
	OperationConnect
)

// String is the operation as the API server names it: "CREATE", …
func (o Operation) String() string {
	switch o {
	case OperationCreate:
		return "CREATE"
	case OperationUpdate:
		return "UPDATE"
	case OperationDelete:
		return "DELETE"
	default:
		return "CONNECT"
	}
}

// AdmissionReview is one admission request as the host sends it; see
// [Review] for the parsed view.
type AdmissionReview struct {
	// Operation is what the request does.
	Operation Operation
	// Object is the object as it would be stored, as JSON text; nil for a
	// delete.
	Object *string
	// OldObject is the object before the request (updates and deletes).
	OldObject *string
	// SubResource is the subresource ("status", "scale"), "" for the
	// object itself.
	SubResource string
	// DryRun is true when nothing will be stored.
	DryRun bool
	// Username is who made the request.
	Username string
	// Groups are the groups that user is in.
	Groups []string
	// Mutating is true in the defaulting call (the patch is applied),
	// false in the validating one.
	Mutating bool
	// Settings is the guest-list entry's settings as JSON text, or nil.
	Settings *string
}

// AdmissionResponse is the verdict on one admission request; build one
// with [Allow], [Deny] or [Patch.Allow].
type AdmissionResponse struct {
	// Allowed admits the request.
	Allowed bool
	// Message says why a request is denied.
	Message string
	// Code is the HTTP status of a denial (400–599); nil for 403.
	Code *uint16
	// Patch is a JSON Patch (RFC 6902) as JSON text, mutating calls only.
	Patch *string
	// Warnings are shown to the user.
	Warnings []string
}

// ErrorKind says whether a failed reconcile is worth retrying.
type ErrorKind uint8

const (
	// ErrorRetryable: a transient failure; the host retries with backoff.
	ErrorRetryable ErrorKind = iota
	// ErrorPermanent: the input can never succeed as it is; the host
	// reports it and waits for the parent or a child to change.
	ErrorPermanent
)

// String is "retryable" or "permanent".
func (k ErrorKind) String() string {
	if k == ErrorPermanent {
		return "permanent"
	}
	return "retryable"
}
