// Written by `wasmop build` beside the bindings it generates from the
// contract; DO NOT EDIT. The `operator` exports: the contract's values
// converted to the SDK's, field for field, and back.

package export_wasmop_operator_operator

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	wasmop "wasmop.dev/sdk"
	wit "wit_component/wasmop_operator_types"
)

func option(value witTypes.Option[string]) *string {
	if value.IsNone() {
		return nil
	}
	text := value.Some()
	return &text
}

func observed(list []wit.ObservedObject) []wasmop.ObservedObject {
	out := make([]wasmop.ObservedObject, len(list))
	for i, o := range list {
		out[i] = wasmop.ObservedObject{APIVersion: o.ApiVersion, Kind: o.Kind, Name: o.Name, Object: o.Object}
	}
	return out
}

func kindRef(k wasmop.KindRef) wit.KindRef {
	return wit.KindRef{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func Describe(settings witTypes.Option[string]) witTypes.Result[wit.Description, string] {
	description, err := wasmop.ServeDescribe(option(settings))
	if err != nil {
		return witTypes.Err[wit.Description](err.Error())
	}
	children := make([]wit.ChildKind, len(description.Children))
	for i, c := range description.Children {
		children[i] = wit.ChildKind{Kind: kindRef(c.Kind), ClusterScoped: c.ClusterScoped}
	}
	related := make([]wit.RelatedKind, len(description.Related))
	for i, r := range description.Related {
		by := wit.MakeRelatedByNamespace()
		switch r.By.Tag {
		case wasmop.RelatedByNameAt:
			by = wit.MakeRelatedByNameAt(r.By.Pointer)
		case wasmop.RelatedBySelectorAt:
			by = wit.MakeRelatedBySelectorAt(r.By.Pointer)
		}
		related[i] = wit.RelatedKind{Kind: kindRef(r.Kind), By: by, MetadataOnly: r.MetadataOnly}
	}
	finalizer := witTypes.None[string]()
	if description.Finalizer != "" {
		finalizer = witTypes.Some(description.Finalizer)
	}
	return witTypes.Ok[wit.Description, string](wit.Description{
		Primary:   kindRef(description.Primary),
		Children:  children,
		Finalizer: finalizer,
		Related:   related,
	})
}

func Reconcile(request wit.ReconcileRequest) witTypes.Result[wit.ReconcileResponse, wit.ReconcileError] {
	response, failure := wasmop.ServeReconcile(wasmop.ReconcileRequest{
		Parent:   request.Parent,
		Observed: observed(request.Observed),
		Deleting: request.Deleting,
		Now:      request.Now,
		Settings: option(request.Settings),
		Related:  observed(request.Related),
	})
	if failure != nil {
		kind := wit.ErrorKind_Retryable
		if failure.Kind == wasmop.ErrorPermanent {
			kind = wit.ErrorKind_Permanent
		}
		return witTypes.Err[wit.ReconcileResponse](wit.ReconcileError{Kind: kind, Message: failure.Message})
	}
	status := witTypes.None[string]()
	if response.Status != nil {
		status = witTypes.Some(*response.Status)
	}
	requeue := witTypes.None[uint32]()
	if response.RequeueAfterSeconds != nil {
		requeue = witTypes.Some(*response.RequeueAfterSeconds)
	}
	events := make([]wit.Event, len(response.Events))
	for i, e := range response.Events {
		eventType := wit.EventType_Normal
		if e.Type == wasmop.EventWarning {
			eventType = wit.EventType_Warning
		}
		events[i] = wit.Event{EventType: eventType, Reason: e.Reason, Message: e.Message}
	}
	keep := make([]wit.ObjectRef, len(response.Keep))
	for i, k := range response.Keep {
		keep[i] = wit.ObjectRef{ApiVersion: k.APIVersion, Kind: k.Kind, Name: k.Name}
	}
	return witTypes.Ok[wit.ReconcileResponse, wit.ReconcileError](wit.ReconcileResponse{
		Children:            response.Children,
		Status:              status,
		RequeueAfterSeconds: requeue,
		Finalized:           response.Finalized,
		Events:              events,
		Keep:                keep,
	})
}
