// Written by `wasmop build` beside the bindings it generates from the
// contract; DO NOT EDIT. The `conversion` export.

package export_wasmop_operator_conversion

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	wasmop "wasmop.dev/sdk"
)

func Convert(objects []string, desiredAPIVersion string) witTypes.Result[[]string, string] {
	converted, err := wasmop.ServeConvert(objects, desiredAPIVersion)
	if err != nil {
		return witTypes.Err[[]string](err.Error())
	}
	return witTypes.Ok[[]string, string](converted)
}
