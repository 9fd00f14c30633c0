package wasmop

import "encoding/json"

// ConditionStatus is "True", "False" or "Unknown".
type ConditionStatus string

const (
	// ConditionTrue: the condition holds.
	ConditionTrue ConditionStatus = "True"
	// ConditionFalse: the condition does not hold.
	ConditionFalse ConditionStatus = "False"
	// ConditionUnknown: cannot tell.
	ConditionUnknown ConditionStatus = "Unknown"
)

// ConditionOf is ConditionTrue when holds, else ConditionFalse.
func ConditionOf(holds bool) ConditionStatus {
	if holds {
		return ConditionTrue
	}
	return ConditionFalse
}

// Condition is a metav1.Condition, with its JSON names.
type Condition struct {
	// Type is e.g. "Available".
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status"`
	// ObservedGeneration is the parent's generation the condition was set
	// for (left out when 0).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when Status last changed ("2024-05-01T12:00:00Z").
	LastTransitionTime string `json:"lastTransitionTime"`
	// Reason is CamelCase, for machines.
	Reason string `json:"reason"`
	// Message is for people.
	Message string `json:"message"`
}

// SetStatusCondition sets condition in *conditions, adding it if no
// condition of its type is there, and says whether anything changed, as
// meta.SetStatusCondition of k8s.io/apimachinery does. LastTransitionTime
// becomes now (the request's [Request.Now]) only when the condition is
// new or its status changes: a condition whose status holds keeps its
// time, so a converged parent gets the status it already has and the host
// writes nothing. Reason, message and observedGeneration are always
// brought up to date.
func SetStatusCondition(conditions *[]Condition, condition Condition, now string) bool {
	existing := FindStatusCondition(*conditions, condition.Type)
	if existing == nil {
		condition.LastTransitionTime = now
		*conditions = append(*conditions, condition)
		return true
	}
	changed := false
	if existing.Status != condition.Status {
		existing.Status = condition.Status
		existing.LastTransitionTime = now
		changed = true
	}
	if existing.Reason != condition.Reason {
		existing.Reason = condition.Reason
		changed = true
	}
	if existing.Message != condition.Message {
		existing.Message = condition.Message
		changed = true
	}
	if existing.ObservedGeneration != condition.ObservedGeneration {
		existing.ObservedGeneration = condition.ObservedGeneration
		changed = true
	}
	return changed
}

// FindStatusCondition is the condition of type conditionType, or nil.
func FindStatusCondition(conditions []Condition, conditionType string) *Condition {
	for i := range conditions {
		if conditions[i].Type == conditionType {
			return &conditions[i]
		}
	}
	return nil
}

// IsStatusConditionTrue says whether the condition of type conditionType
// is there with status True.
func IsStatusConditionTrue(conditions []Condition, conditionType string) bool {
	found := FindStatusCondition(conditions, conditionType)
	return found != nil && found.Status == ConditionTrue
}

// RemoveStatusCondition removes the condition of type conditionType and
// says whether there was one.
func RemoveStatusCondition(conditions *[]Condition, conditionType string) bool {
	for i := range *conditions {
		if (*conditions)[i].Type == conditionType {
			*conditions = append((*conditions)[:i], (*conditions)[i+1:]...)
			return true
		}
	}
	return false
}

// ConditionsOf are the conditions of a parent's status (an [Object]),
// decoded; those that do not decode are left out.
func ConditionsOf(status Object) []Condition {
	list, _ := status["conditions"].([]any)
	out := make([]Condition, 0, len(list))
	for _, item := range list {
		text, err := json.Marshal(item)
		if err != nil {
			continue
		}
		var condition Condition
		if json.Unmarshal(text, &condition) == nil {
			out = append(out, condition)
		}
	}
	return out
}
