// Package {{package}} is the {{name}} guest: for every {{Kind}} a ConfigMap
// <name>-data holding spec.data, and a Ready condition.
package {{package}}

import wasmop "wasmop.dev/sdk"

// {{Kind}} is the kind this guest reconciles ({{group}}/v1alpha1).
type {{Kind}} struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata"`
	Spec            {{Kind}}Spec      `json:"spec"`
	Status          *{{Kind}}Status   `json:"status,omitempty"`
}

// {{Kind}}Spec is what the user asks for.
type {{Kind}}Spec struct {
	// Data is what the ConfigMap <name>-data holds.
	Data map[string]string `json:"data,omitempty"`
}

// {{Kind}}Status is what the guest reports.
type {{Kind}}Status struct {
	Phase      string             `json:"phase,omitempty"`
	Conditions []wasmop.Condition `json:"conditions,omitempty"`
}

// ConfigMap is the part of core/v1 ConfigMap this guest writes.
type ConfigMap struct {
	wasmop.TypeMeta `json:",inline"`
	ObjectMeta      wasmop.ObjectMeta `json:"metadata"`
	Data            map[string]string `json:"data,omitempty"`
}

// Reconciler reconciles {{Kind}}s.
type Reconciler struct{}

// Describe says what the guest manages: {{Kind}}s, and the ConfigMaps it
// owns.
func (Reconciler) Describe(wasmop.Settings) (wasmop.Description, error) {
	return wasmop.For(wasmop.KindRef{Group: "{{group}}", Version: "v1alpha1", Kind: "{{Kind}}"}).
		Owns(wasmop.KindConfigMap).
		Complete(), nil
}

// Reconcile answers one {{Kind}} with its ConfigMap and a Ready status.
func (Reconciler) Reconcile(req *wasmop.Request) (*wasmop.Response, error) {
	var parent {{Kind}}
	if err := req.DecodeParent(&parent); err != nil {
		return nil, err
	}
	name := parent.ObjectMeta.Name
	if name == "" {
		return nil, wasmop.Permanent("the {{Kind}} has no metadata.name")
	}
	var conditions []wasmop.Condition
	if parent.Status != nil {
		conditions = parent.Status.Conditions
	}
	wasmop.SetStatusCondition(&conditions, wasmop.Condition{
		Type:               "Ready",
		Status:             wasmop.ConditionTrue,
		Reason:             "ConfigMapApplied",
		Message:            "ConfigMap " + name + "-data holds spec.data",
		ObservedGeneration: parent.ObjectMeta.Generation,
	}, req.Now())
	configMap := ConfigMap{
		TypeMeta: wasmop.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: wasmop.ObjectMeta{
			Name:   name + "-data",
			Labels: map[string]string{"app.kubernetes.io/name": "{{name}}"},
		},
		Data: parent.Spec.Data,
	}
	return wasmop.NewResponse().
		Child(configMap).
		Status({{Kind}}Status{Phase: "Ready", Conditions: conditions}), nil
}

// init registers the guest: `wasmop build` makes the component export
// what the registered value implements. Init functions run once, while
// `wasmop build` pre-initialises the module, so Prepare builds the JSON
// tables of the types each reconcile decodes and encodes there.
func init() {
	wasmop.Export(Reconciler{})
	wasmop.Prepare({{Kind}}{}, ConfigMap{})
}
