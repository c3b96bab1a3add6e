{{/*
The scheduler's KubeSchedulerConfiguration: the profile of
components/scheduler/config/config.yaml, with this release's leader
election lock and client limits. The evaluator is set by environment.
*/}}
{{- define "xila-guard.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: {{ .Values.enforcement.scheduler.qps }}
  burst: {{ .Values.enforcement.scheduler.burst }}
leaderElection:
  leaderElect: true
  resourceName: {{ include "xila-guard.fullname" . }}-scheduler
  resourceNamespace: {{ .Release.Namespace }}
profiles:
- schedulerName: xila-guard-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: XilaGuardEnforcement
    preFilter:
      enabled:
      - name: XilaGuardEnforcement
    filter:
      enabled:
      - name: XilaGuardEnforcement
      disabled:
      - name: TaintToleration
    bind:
      enabled:
      - name: XilaGuardEnforcement
{{- if .Values.confidential.enabled }}
  pluginConfig:
  - name: XilaGuardEnforcement
    args:
      attestationURL: {{ printf "http://%s-attest.%s.svc:%v" (include "xila-guard.fullname" .) .Release.Namespace .Values.confidential.controller.challengePort }}
      challengeTimeout: {{ .Values.enforcement.scheduler.challengeTimeout }}
{{- end }}
{{- end }}
