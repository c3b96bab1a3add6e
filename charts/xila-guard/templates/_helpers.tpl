{{/* Common labels of every object. */}}
{{- define "xila-guard.labels" -}}
app.kubernetes.io/part-of: xila-guard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ include "xila-guard.tag" . | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The image tag: image.tag, or the chart's appVersion. */}}
{{- define "xila-guard.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end }}

{{/* The image of a component: include "xila-guard.image" (list . "core") */}}
{{- define "xila-guard.image" -}}
{{- $root := index . 0 -}}
{{- printf "%s/%s:%s" $root.Values.image.registry (index . 1) (include "xila-guard.tag" $root) -}}
{{- end }}

{{/* The evaluator's in-cluster URL. */}}
{{- define "xila-guard.coreURL" -}}
{{- printf "http://xila-guard-core.%s.svc:8080" .Release.Namespace -}}
{{- end }}

{{/* The restricted security context every container runs with. */}}
{{- define "xila-guard.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The Go runtime's settings of a container, from a values "go" entry. */}}
{{- define "xila-guard.goEnv" -}}
env:
- name: GOGC
  value: {{ .gogc | quote }}
- name: GOMEMLIMIT
  value: {{ .memoryLimit | quote }}
{{- end }}
