package cacheoperator

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/cache-operator/api/v1alpha1"
	wasmop "wasmop.dev/sdk"
)

// Registering each Cache with an external registry, and removing it
// there before the finalizer goes (the Rust guest's registry.rs), over
// wasi:http: the kubebuilder chapter's "clean up external resources in
// the finalizer".
//
// With the setting registryUrl (and the host granting that origin in the
// guest's allowedOutboundHosts), a Ready Cache is registered once with
// PUT {registryUrl}/caches/{namespace}/{name} and body {"namespace",
// "name", "address"}; the condition Registered records it. A failure that
// may have stored something (no answer, a timeout, a 5xx) is
// RegistryUnavailable; one that cannot have (a 4xx, the host refusing the
// request) is RegistrationRefused, unless the Cache was registered before.
// Retries wait as long as the registry has been failing (2 s, 4 s, 8 s …
// at most 5 min), kept in the condition's transition time, so the guest
// stays stateless. On deletion a Cache that may be in the registry is
// removed with DELETE before the answer finalizes, a 404 counting as
// removed; while that fails the Cache stays, reason CleanupBlocked.
const (
	Registered          = "Registered"
	RegistryUnavailable = "RegistryUnavailable"
	CleanupBlocked      = "CleanupBlocked"
	Deregistered        = "Deregistered"
	RegistrationRefused = "RegistrationRefused"
	MinRetrySeconds     = 2
	MaxRetrySeconds     = 300
)

// registry is the registry of one Cache.
type registry struct {
	url, name, namespace string
	port                 int32
	generation           int64
}

func registryOf(settings Settings, cache *v1alpha1.Cache, spec cacheSpec) *registry {
	if settings.RegistryURL == "" {
		return nil
	}
	namespace := cache.ObjectMeta.Namespace
	if namespace == "" {
		namespace = "default"
	}
	return &registry{
		url:        fmt.Sprintf("%s/caches/%s/%s", strings.TrimRight(settings.RegistryURL, "/"), namespace, cache.ObjectMeta.Name),
		name:       cache.ObjectMeta.Name,
		namespace:  namespace,
		port:       spec.Port,
		generation: cache.ObjectMeta.Generation,
	}
}

// address is where clients reach the Cache: its Service.
func (r *registry) address() string {
	return fmt.Sprintf("%s.%s.svc:%d", r.name, r.namespace, r.port)
}

func (r *registry) set(conditions *[]wasmop.Condition, status wasmop.ConditionStatus, reason, message, now string) bool {
	return wasmop.SetStatusCondition(conditions, wasmop.Condition{
		Type: Registered, Status: status, Reason: reason, Message: message, ObservedGeneration: r.generation,
	}, now)
}

// register registers a Ready Cache unless status shows it registered at
// its address: an Event for a change and, after a failure, the wait
// before the next try.
func (r *registry) register(status *v1alpha1.CacheStatus, now string) (*event, time.Duration) {
	message := "registered as " + r.address()
	if current := wasmop.FindStatusCondition(status.Conditions, Registered); current != nil &&
		current.Status == wasmop.ConditionTrue && current.Message == message {
		return nil, 0
	}
	body, _ := jsonOf(map[string]string{"namespace": r.namespace, "name": r.name, "address": r.address()})
	response, err := wasmop.Send("PUT", r.url, []byte(strings.TrimSpace(string(body))))
	if err != nil {
		var httpError *wasmop.HTTPError
		definite := errors.As(err, &httpError) && httpError.Kind != wasmop.HTTPFailed
		return r.unavailable(&status.Conditions, err.Error(), definite, now)
	}
	if response.IsSuccess() {
		r.set(&status.Conditions, wasmop.ConditionTrue, Registered, message, now)
		e := normal(Registered, message+" at "+r.url)
		return &e, 0
	}
	return r.unavailable(&status.Conditions, fmt.Sprintf("the registry answered %d", response.Status), response.Status < 500, now)
}

func (r *registry) unavailable(conditions *[]wasmop.Condition, failure string, definite bool, now string) (*event, time.Duration) {
	message := fmt.Sprintf("registering at %s failed: %s", r.url, failure)
	reason := RegistryUnavailable
	if definite && !mayBeRegistered(*conditions) {
		reason = RegistrationRefused
	}
	var e *event
	if r.set(conditions, wasmop.ConditionFalse, reason, message, now) {
		w := warning(reason, message)
		e = &w
	}
	return e, retryAfter(*conditions, now)
}

// deregistration is what removing a Cache from its registry came to.
type deregistration struct {
	notRegistered, removed bool
	status                 v1alpha1.CacheStatus
	event                  *event
	retry                  time.Duration
}

// deregister removes the Cache from the registry if it may be there.
func (r *registry) deregister(previous *v1alpha1.CacheStatus, now string) deregistration {
	if previous == nil || !mayBeRegistered(previous.Conditions) {
		return deregistration{notRegistered: true}
	}
	status := *previous
	status.Conditions = append([]wasmop.Condition(nil), previous.Conditions...)
	registered := wasmop.IsStatusConditionTrue(status.Conditions, Registered)
	var failure string
	response, err := wasmop.Send("DELETE", r.url, nil)
	switch {
	case err != nil:
		failure = err.Error()
	case response.IsSuccess() || response.Status == 404:
		r.set(&status.Conditions, wasmop.ConditionFalse, Deregistered, "removed from "+r.url, now)
		return deregistration{removed: true, status: status}
	default:
		failure = fmt.Sprintf("the registry answered %d", response.Status)
	}
	message := fmt.Sprintf("deleting %s failed: %s; the Cache stays until it succeeds", r.url, failure)
	state := wasmop.ConditionUnknown
	if registered {
		state = wasmop.ConditionTrue
	}
	outcome := deregistration{status: status}
	if r.set(&outcome.status.Conditions, state, CleanupBlocked, message, now) {
		w := warning(CleanupBlocked, message)
		outcome.event = &w
	}
	outcome.retry = retryAfter(outcome.status.Conditions, now)
	return outcome
}

func mayBeRegistered(conditions []wasmop.Condition) bool {
	c := wasmop.FindStatusCondition(conditions, Registered)
	return c != nil && c.Reason != Deregistered && c.Reason != RegistrationRefused
}

// retryAfter is as long as the registry has been failing, within bounds.
func retryAfter(conditions []wasmop.Condition, now string) time.Duration {
	since := int64(0)
	if c := wasmop.FindStatusCondition(conditions, Registered); c != nil {
		at, errAt := wasmop.ParseRFC3339(c.LastTransitionTime)
		current, errNow := wasmop.ParseRFC3339(now)
		if errAt == nil && errNow == nil {
			since = current - at
		}
	}
	return time.Duration(max(MinRetrySeconds, min(max(since, 0), MaxRetrySeconds))) * time.Second
}
