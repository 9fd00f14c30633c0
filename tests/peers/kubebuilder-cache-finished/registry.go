package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The external registration of stage 4: with --registry-url a Ready Cache
// is registered with PUT {url}/caches/{namespace}/{name} and removed with
// DELETE on the same URL before its finalizer goes, the protocol of the
// guest's registry.rs. Failures return an error, which controller-runtime
// retries with its backoff.
const conditionRegistered = "Registered"

func (r *CacheReconciler) registryEntry(cache *Cache) string {
	return fmt.Sprintf("%s/caches/%s/%s", strings.TrimRight(r.RegistryURL, "/"), cache.Namespace, cache.Name)
}

// register puts a Ready Cache in the registry unless status shows it there
// at its address.
func (r *CacheReconciler) register(ctx context.Context, cache *Cache, status *CacheStatus) (*event, error) {
	address := fmt.Sprintf("%s.%s.svc:%d", cache.Name, cache.Namespace, cache.Spec.port())
	message := "registered as " + address
	if c := meta.FindStatusCondition(status.Conditions, conditionRegistered); c != nil &&
		c.Status == metav1.ConditionTrue && c.Message == message {
		return nil, nil
	}
	body, _ := json.Marshal(map[string]string{"namespace": cache.Namespace, "name": cache.Name, "address": address})
	url := r.registryEntry(cache)
	if err := send(ctx, http.MethodPut, url, body); err != nil {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: conditionRegistered, Status: metav1.ConditionFalse, Reason: "RegistryUnavailable",
			Message: fmt.Sprintf("registering at %s failed: %v", url, err), ObservedGeneration: cache.Generation,
		})
		e := warning("RegistryUnavailable", err.Error())
		return &e, err
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: conditionRegistered, Status: metav1.ConditionTrue, Reason: "Registered",
		Message: message, ObservedGeneration: cache.Generation,
	})
	e := normal("Registered", fmt.Sprintf("%s at %s", message, url))
	return &e, nil
}

// deregister removes a Cache that may be in the registry; a 404 counts as
// removed.
func (r *CacheReconciler) deregister(ctx context.Context, cache *Cache) (*event, error) {
	c := meta.FindStatusCondition(cache.Status.Conditions, conditionRegistered)
	if c == nil || c.Reason == "Deregistered" {
		return nil, nil
	}
	url := r.registryEntry(cache)
	if err := send(ctx, http.MethodDelete, url, nil); err != nil {
		return nil, fmt.Errorf("deleting %s failed: %w; the Cache stays until it succeeds", url, err)
	}
	e := normal("Deregistered", fmt.Sprintf("removed Cache %s from its registry", cache.Name))
	return &e, nil
}

func send(ctx context.Context, method, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 || (method == http.MethodDelete && resp.StatusCode == http.StatusNotFound) {
		return nil
	}
	return fmt.Errorf("the registry answered %d", resp.StatusCode)
}
