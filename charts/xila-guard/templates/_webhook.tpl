{{/*
Helpers of the admission webhook, its TLS and its configurations.
*/}}

{{/* The enabled orchestrator integrations, as a YAML list. */}}
{{- define "xila-guard.integrations" -}}
{{- $out := list -}}
{{- $names := dict -}}
{{- /* Profiles by name come first: the integration entry of
       profiles/<name>.yaml, the copy the chart carries of the repository's
       profiles/ (hack/update-codegen.sh). */ -}}
{{- $all := list -}}
{{- $known := list -}}
{{- range $path, $_ := .Files.Glob "profiles/*.yaml" -}}
{{- $known = append $known (base $path | trimSuffix ".yaml") -}}
{{- end -}}
{{- range $i, $name := .Values.orchestratorProfiles | default list -}}
{{- $f := $.Files.Get (printf "profiles/%s.yaml" $name) -}}
{{- if or (not $f) (not (has $name $known)) -}}
{{- fail (printf "orchestratorProfiles[%d]: unknown profile %q; the chart ships %s" $i $name (join ", " ($known | sortAlpha))) -}}
{{- end -}}
{{- $all = append $all (get (fromYaml $f) "integration") -}}
{{- end -}}
{{- $all = concat $all (.Values.orchestratorIntegrations | default list) -}}
{{- range $i, $in := $all -}}
{{- if not (kindIs "map" $in) -}}
{{- fail (printf "orchestratorIntegrations[%d]: want an object" $i) -}}
{{- end -}}
{{- $name := get $in "name" | toString -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$" $name) -}}
{{- fail (printf "orchestratorIntegrations[%d].name %q: want a DNS label of at most 40 characters" $i $name) -}}
{{- end -}}
{{- if hasKey $names $name -}}
{{- fail (printf "orchestratorIntegrations: name %q appears twice" $name) -}}
{{- end -}}
{{- $_ := set $names $name true -}}
{{- if not (get $in "schedulerName") -}}
{{- fail (printf "orchestratorIntegrations %q: schedulerName is required" $name) -}}
{{- end -}}
{{- if not (get $in "workloadSelector") -}}
{{- fail (printf "orchestratorIntegrations %q: workloadSelector is required; an empty selector would select every pod" $name) -}}
{{- end -}}
{{- if hasKey $in "tenantResources" -}}
{{- $_ := include "xila-guard.tenantResources.check" (list $name (get $in "tenantResources")) -}}
{{- end -}}
{{- if dig "enabled" true $in -}}
{{- $out = append $out $in -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end }}

{{/* The binders whose bindings get the bound-evidence record, as a YAML
     list: those of every enabled integration that enforces its bindings
     (bindEnforcement Enforce). */}}
{{- define "xila-guard.webhook.recordBinders" -}}
{{- $out := list -}}
{{- range (include "xila-guard.integrations" . | fromYamlArray) -}}
{{- if ne (get . "bindEnforcement" | default "Enforce") "Report" -}}
{{- $out = concat $out (get . "binderServiceAccounts" | default list) -}}
{{- end -}}
{{- end -}}
{{- toYaml ($out | uniq) -}}
{{- end }}

{{/* "true" when the webhook runs: webhook.enabled, or an enabled integration. */}}
{{- define "xila-guard.webhook.enabled" -}}
{{- if or .Values.webhook.enabled (include "xila-guard.integrations" . | fromYamlArray) -}}
true
{{- end -}}
{{- end }}

{{/* The webhook's Service, and the DNS names its certificate covers. */}}
{{- define "xila-guard.webhook.service" -}}
{{ include "xila-guard.fullname" . }}-webhook
{{- end }}

{{- define "xila-guard.webhook.dnsNames" -}}
{{- $svc := include "xila-guard.webhook.service" . -}}
{{- $ns := .Release.Namespace -}}
{{- toYaml (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- end }}

{{/* The name of the Secret holding the serving certificate. */}}
{{- define "xila-guard.webhook.tlsSecret" -}}
{{- if eq .Values.webhook.tls.mode "secret" -}}
{{- required "webhook.tls.secretName is required with webhook.tls.mode=secret" .Values.webhook.tls.secretName -}}
{{- else -}}
{{- include "xila-guard.fullname" . }}-webhook-tls
{{- end -}}
{{- end }}

{{/*
The serving certificate of mode generate: the one in the release's Secret
when it exists and still covers the Service (so upgrades keep it), else a
new CA and certificate. Computed once per render and kept in .Values, so
the Secret and every webhook configuration agree. A dict with ca, cert and
key, as PEM.
*/}}
{{- define "xila-guard.webhook.generatedTLS" -}}
{{- $tls := .Values.webhook.tls -}}
{{- if not (hasKey $tls "_generated") -}}
{{- $secretName := include "xila-guard.webhook.tlsSecret" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName -}}
{{- $data := dig "data" dict ($existing | default dict) -}}
{{- $state := dict -}}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") -}}
{{- $state = dict "ca" (index $data "ca.crt" | b64dec) "cert" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) -}}
{{- else -}}
{{- $dns := include "xila-guard.webhook.dnsNames" . | fromYamlArray -}}
{{- /* ECDSA P-256: the API server's webhook client keeps 25 idle
     connections per webhook and opens a new one, with a full handshake,
     for every call beyond them; an RSA-2048 signature costs that
     handshake several times an ECDSA one (docs/benchmarks/webhook.md). */ -}}
{{- $ca := genCAWithKey "xila-guard-webhook-ca" (int $tls.validityDays) (genPrivateKey "ecdsa") -}}
{{- $cert := genSignedCertWithKey (index $dns 2) nil $dns (int $tls.validityDays) $ca (genPrivateKey "ecdsa") -}}
{{- $state = dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- $_ := set $tls "_generated" $state -}}
{{- end -}}
{{- toYaml $tls._generated -}}
{{- end }}

{{/* The annotations of every webhook configuration (cert-manager's CA injection). */}}
{{- define "xila-guard.webhook.configAnnotations" -}}
{{- if eq .Values.webhook.tls.mode "certManager" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s-webhook" .Release.Namespace (include "xila-guard.fullname" .) }}
{{- end -}}
{{- end }}

{{/*
The clientConfig of a webhook: include "xila-guard.webhook.clientConfig" (list . "/validate-pods")
*/}}
{{- define "xila-guard.webhook.clientConfig" -}}
{{- $root := index . 0 -}}
{{- $mode := $root.Values.webhook.tls.mode -}}
service:
  name: {{ include "xila-guard.webhook.service" $root }}
  namespace: {{ $root.Release.Namespace }}
  path: {{ index . 1 }}
  port: 443
{{- if eq $mode "secret" }}
caBundle: {{ required "webhook.tls.caBundle is required with webhook.tls.mode=secret" $root.Values.webhook.tls.caBundle | b64enc }}
{{- else if eq $mode "generate" }}
caBundle: {{ (include "xila-guard.webhook.generatedTLS" $root | fromYaml).ca | b64enc }}
{{- end }}
{{- end }}

{{/*
The namespaces no webhook ever sees: the release's own, the system ones and
webhook.exemptNamespaces.
*/}}
{{- define "xila-guard.webhook.namespaceSelector" -}}
{{- $root := . -}}
{{- $tenant := "" -}}
{{- if kindIs "slice" . -}}
{{- $root = index . 0 -}}
{{- $tenant = index . 1 -}}
{{- end -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  {{- range (concat (list $root.Release.Namespace "kube-system" "kube-public" "kube-node-lease") $root.Values.webhook.exemptNamespaces | uniq) }}
  - {{ . }}
  {{- end }}
{{- with $tenant }}
- key: guard.xila.us/tenant
  operator: {{ . }}
{{- end }}
{{- end }}

{{/* A CEL expression, true for a pod the webhook must see outside a
     tenant's namespaces: created with spec.nodeName or a required node
     affinity on metadata.name, or getting ephemeral containers. */}}
{{- define "xila-guard.webhook.namesNode" -}}
(has(request.subResource) && request.subResource == 'ephemeralcontainers') || (request.operation == 'CREATE' && ((has(object.spec.nodeName) && object.spec.nodeName != '') || object.spec.?affinity.?nodeAffinity.?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([]).exists(t, t.?matchFields.orValue([]).exists(f, f.key == 'metadata.name'))))
{{- end }}

{{/* The rule set of a pod webhook: every container list, at create and update. */}}
{{- define "xila-guard.webhook.podRules" -}}
- apiGroups: [""]
  apiVersions: [v1]
  operations: [CREATE, UPDATE]
  resources: [pods, pods/ephemeralcontainers]
  scope: Namespaced
{{- end }}

{{/* Settings every fail-closed webhook of the chart shares:
     include "xila-guard.webhook.common" (list . "<configuration name>") */}}
{{- define "xila-guard.webhook.common" -}}
{{- $root := index . 0 -}}
admissionReviewVersions: [v1]
sideEffects: None
failurePolicy: {{ include "xila-guard.webhook.failurePolicy" . }}
matchPolicy: Equivalent
timeoutSeconds: {{ $root.Values.webhook.timeoutSeconds }}
{{- end }}

{{/* The failurePolicy of a fail-closed ValidatingWebhookConfiguration:
     Fail once it is armed (every webhook of the live configuration is Fail,
     or webhook.armAfterReady is off); Ignore for one the release is about
     to create, which the hook Job arms once a replica answers
     (templates/webhook-arm.yaml). Without a cluster (helm template) lookup
     finds nothing: Ignore, armed by the hook. */}}
{{- define "xila-guard.webhook.failurePolicy" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $armed := not $root.Values.webhook.armAfterReady -}}
{{- with lookup "admissionregistration.k8s.io/v1" "ValidatingWebhookConfiguration" "" $name -}}
{{- $armed = true -}}
{{- range (get . "webhooks" | default list) -}}
{{- if ne (get . "failurePolicy" | default "") "Fail" -}}
{{- $armed = false -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- ternary "Fail" "Ignore" $armed -}}
{{- end }}

{{/* The names of the fail-closed ValidatingWebhookConfigurations the
     release renders, one per line: what the hook Job arms. */}}
{{- define "xila-guard.webhook.armed" -}}
{{- if .Values.webhook.enabled }}
{{ include "xila-guard.fullname" . }}-pods
{{ include "xila-guard.fullname" . }}-bindings
{{ include "xila-guard.fullname" . }}-nodes
{{- if .Values.confidential.vmMigrations }}
{{ include "xila-guard.fullname" . }}-migrations
{{- end }}
{{- if .Values.webhook.devices }}
{{ include "xila-guard.fullname" . }}-devices
{{- end }}
{{- end }}
{{- range (include "xila-guard.integrations" . | fromYamlArray) }}
{{ printf "%s-integration-%s" (include "xila-guard.fullname" $) .name }}
{{- end }}
{{- end }}

{{/* A CEL expression, true when an update of a node changes or removes the
     pool label it had, or changes or removes a pool taint it had: exactly
     what the webhook judges, so that every other update of a pool node
     (heartbeats, cordons, other taints) never reaches it. */}}
{{- define "xila-guard.webhook.poolChange" -}}
{{- $k := printf "'%s'" . -}}
(has(oldObject.metadata.labels) && {{ $k }} in oldObject.metadata.labels && (!has(object.metadata.labels) || !({{ $k }} in object.metadata.labels) || object.metadata.labels[{{ $k }}] != oldObject.metadata.labels[{{ $k }}])) || (has(oldObject.spec.taints) && oldObject.spec.taints.exists(t, t.key == {{ $k }} && (!has(object.spec.taints) || !object.spec.taints.exists(n, n.key == t.key && n.effect == t.effect && (has(n.value) ? n.value : '') == (has(t.value) ? t.value : '')))))
{{- end }}

{{/* A metav1.LabelSelector as the string form labels.Parse reads:
     matchLabels as k=v, matchExpressions as "k in (a,b)", "k notin (a)",
     "k" and "!k". */}}
{{- define "xila-guard.selectorString" -}}
{{- $out := list -}}
{{- range $k, $v := (get . "matchLabels" | default dict) -}}
{{- $out = append $out (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- range (get . "matchExpressions" | default list) -}}
{{- $op := .operator -}}
{{- if eq $op "In" -}}
{{- $out = append $out (printf "%s in (%s)" .key (join "," .values)) -}}
{{- else if eq $op "NotIn" -}}
{{- $out = append $out (printf "%s notin (%s)" .key (join "," .values)) -}}
{{- else if eq $op "Exists" -}}
{{- $out = append $out .key -}}
{{- else if eq $op "DoesNotExist" -}}
{{- $out = append $out (printf "!%s" .key) -}}
{{- else -}}
{{- fail (printf "workloadSelector: operator %q of key %s: want In, NotIn, Exists or DoesNotExist" $op .key) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}
