// Written by `wasmop build` beside the bindings it generates from the
// contract; DO NOT EDIT. The `admission` export.

package export_wasmop_operator_admission

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

func Admit(review wit.AdmissionReview) wit.AdmissionResponse {
	response := wasmop.ServeAdmit(wasmop.AdmissionReview{
		Operation:   wasmop.Operation(review.Operation),
		Object:      option(review.Object),
		OldObject:   option(review.OldObject),
		SubResource: review.SubResource,
		DryRun:      review.DryRun,
		Username:    review.Username,
		Groups:      review.Groups,
		Mutating:    review.Mutating,
		Settings:    option(review.Settings),
	})
	code := witTypes.None[uint16]()
	if response.Code != nil {
		code = witTypes.Some(*response.Code)
	}
	patch := witTypes.None[string]()
	if response.Patch != nil {
		patch = witTypes.Some(*response.Patch)
	}
	warnings := response.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	return wit.AdmissionResponse{
		Allowed:  response.Allowed,
		Message:  response.Message,
		Code:     code,
		Patch:    patch,
		Warnings: warnings,
	}
}
