{{/*
Labels of every object's metadata: those of deploy/kustomization.yaml, the
component's name, and Helm's.
*/}}
{{- define "groundcloud.labels" -}}
app.kubernetes.io/part-of: groundcloud
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
An image reference from {repository, tag}; the tag defaults to appVersion.
Call with (list .Values.x.image .Chart).
*/}}
{{- define "groundcloud.image" -}}
{{- $image := index . 0 -}}
{{- $chart := index . 1 -}}
{{- printf "%s:%s" $image.repository (default $chart.AppVersion $image.tag) -}}
{{- end }}

{{/*
The host the kubelet probes the agent's /healthz on: loopback when the agent
listens on every address.
*/}}
{{- define "groundcloud.agentProbeHost" -}}
{{- if has .Values.agent.metrics.address (list "0.0.0.0" "::" "") -}}
127.0.0.1
{{- else -}}
{{ .Values.agent.metrics.address }}
{{- end -}}
{{- end }}

{{/*
The agent's --metrics-bind-address: host:port, IPv6 in brackets.
*/}}
{{- define "groundcloud.agentMetricsAddress" -}}
{{- $a := .Values.agent.metrics.address -}}
{{- if contains ":" $a -}}
[{{ $a }}]:{{ .Values.agent.metrics.port }}
{{- else -}}
{{ $a }}:{{ .Values.agent.metrics.port }}
{{- end -}}
{{- end }}
