{{/* The name in the app.kubernetes.io/name label of every component,
     <name>-<component>: nameOverride, else the chart's name. */}}
{{- define "xila-guard.name" -}}
{{- .Values.nameOverride | default .Chart.Name -}}
{{- end }}

{{/* The prefix of every object's name, <fullname>-<component>:
     fullnameOverride, else the name. Never the release's name: the
     cluster-scoped objects (ClusterRoles, admission policies, webhook
     configurations) exist once per cluster whatever the release is called,
     and the admission policies name the service accounts they trust by it. */}}
{{- define "xila-guard.fullname" -}}
{{- .Values.fullnameOverride | default (include "xila-guard.name" .) -}}
{{- end }}

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

{{/* The image of a component: include "xila-guard.image" (list . "core").
     <registry>/<component>:<tag>, unless image.components.<component>
     names another repository, tag or digest. */}}
{{- define "xila-guard.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $own := get ($root.Values.image.components | default dict) $name | default dict -}}
{{- $repo := get $own "repository" | default (printf "%s/%s" $root.Values.image.registry $name) -}}
{{- if get $own "digest" -}}
{{- printf "%s@%s" $repo (get $own "digest") -}}
{{- else -}}
{{- printf "%s:%s" $repo (get $own "tag" | default (include "xila-guard.tag" $root)) -}}
{{- end -}}
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

{{/* A list of strings as the elements of a CEL list literal: 'a', 'b'
     (the webhook configurations' match conditions, which take no
     parameter). */}}
{{- define "xila-guard.policy.strings" -}}
{{- $out := list -}}
{{- range . -}}
{{- if or (contains "'" .) (contains "\\" .) -}}
{{- fail (printf "%q: quotes and backslashes are not allowed in names the webhook's match conditions match" .) -}}
{{- end -}}
{{- $out = append $out (printf "'%s'" .) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end }}

{{/* The namespace of a service account named <ns>:<name> or
     system:serviceaccount:<ns>:<name>; "" for any other user name. */}}
{{- define "xila-guard.accountNamespace" -}}
{{- $parts := splitList ":" (trimPrefix "system:serviceaccount:" .) -}}
{{- if and (eq (len $parts) 2) (or (hasPrefix "system:serviceaccount:" .) (not (hasPrefix "system:" .))) -}}
{{- index $parts 0 -}}
{{- end -}}
{{- end }}

{{/* The reserved namespaces, as a YAML list: the release namespace,
     trustBoundaries.reservedNamespaces and the namespace of every service
     account the release trusts by name. */}}
{{- define "xila-guard.reservedNamespaces" -}}
{{- $tb := .Values.trustBoundaries -}}
{{- $out := concat (list .Release.Namespace) $tb.reservedNamespaces -}}
{{- $accounts := concat .Values.webhook.trustedServiceAccounts $tb.evidenceLabellers.users $tb.poolAdmins.users $tb.administrators.users -}}
{{- range (include "xila-guard.integrations" . | fromYamlArray) -}}
{{- $accounts = concat $accounts (get . "binderServiceAccounts" | default list) -}}
{{- end -}}
{{- if .Values.gpuDevicePolicies.enabled -}}
{{- $out = append $out .Values.gpuDevicePolicies.kubevirt.namespace -}}
{{- $accounts = concat $accounts .Values.gpuDevicePolicies.platformCallers.users -}}
{{- end -}}
{{- range $accounts -}}
{{- with include "xila-guard.accountNamespace" . -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- toYaml ($out | uniq | sortAlpha) -}}
{{- end }}

{{/* The administrators' user names, with KubeVirt's virt-operator when the
     GPU device policies trust KubeVirt's controller by name. */}}
{{- define "xila-guard.administratorUsers" -}}
{{- $users := .Values.trustBoundaries.administrators.users -}}
{{- if .Values.gpuDevicePolicies.enabled -}}
{{- $users = append $users (printf "system:serviceaccount:%s:kubevirt-operator" .Values.gpuDevicePolicies.kubevirt.namespace) -}}
{{- end -}}
{{- toYaml $users -}}
{{- end }}

{{/* The labels every pod gets besides its own (pods.labels), under a
     pod template's labels. The selector labels cannot be set there. */}}
{{- define "xila-guard.podLabels" -}}
{{- range $k, $v := .Values.pods.labels }}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/instance") }}
{{- fail (printf "pods.labels cannot set %s: the chart's selectors use it" $k) }}
{{- end }}
{{ $k }}: {{ $v | quote }}
{{- end }}
{{- end }}

{{/* A pod template's annotations: pods.annotations, and those given. */}}
{{- define "xila-guard.podAnnotations" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 | default dict -}}
{{- $all := merge (deepCopy $own) $root.Values.pods.annotations -}}
{{- with $all }}
annotations:
  {{- range $k, $v := . }}
  {{ $k }}: {{ $v | quote }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The pod spec fields every pod gets: pods.imagePullSecrets, and
     pods.priorityClassName unless the pod has a class of its own:
     include "xila-guard.podSpec" (list . $ownPriorityClass) */}}
{{- define "xila-guard.podSpec" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- with $root.Values.pods.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with ($own | default $root.Values.pods.priorityClassName) }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{/* Tenant namespaces for the GPU device policies: those carrying the
tenant label, as everywhere else in the product. */}}
{{- define "xila-guard.gpu.tenantNamespaces" -}}
matchExpressions:
- key: guard.xila.us/tenant
  operator: Exists
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: [{{ .Release.Namespace }}, kube-system]
{{- end }}

