{{/* The guest list the host reads: <namespace>/<name>. */}}
{{- define "wasmop.guestList" -}}
{{ .Values.namespace }}/{{ .Values.guestsConfigMap | default "wasmop-guests" }}
{{- end -}}
