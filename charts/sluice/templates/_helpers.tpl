{{/*
Object names are fixed, as in config/: the CRD and the ClusterRoles are
cluster-wide, so one release per cluster.
*/}}

{{/* The selector labels of a component (manager or router), as in config/. */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* Helm's labels, for metadata only (never selectors). */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The labels of a component's objects: (list $ "manager"). */}}
{{- define "sluice.componentLabels" -}}
{{ include "sluice.selectorLabels" (index . 1) }}
{{ include "sluice.labels" (index . 0) }}
{{- end }}

{{/* An image reference: (list $ .Values.manager.image). */}}
{{- define "sluice.image" -}}
{{- $image := index . 1 -}}
{{ $image.repository }}:{{ $image.tag | default (index . 0).Chart.AppVersion }}
{{- end }}

{{/* The port number of a listen address such as ":8080". */}}
{{- define "sluice.port" -}}
{{ splitList ":" . | last | int }}
{{- end }}

{{- define "sluice.apiKeysSecret" -}}
{{ .Values.router.apiKeys.existingSecret | default "sluice-router-api-keys" }}
{{- end }}

{{- define "sluice.adminTokenSecret" -}}
{{ .Values.router.adminToken.existingSecret | default "sluice-router-admin-token" }}
{{- end }}

{{/*
Whether the render can ask a cluster: Helm's lookup answers only under helm
install and upgrade (and --dry-run=server); under helm template, client dry
runs and tools that render with them (Argo CD among them) it finds nothing.
Namespace kube-system exists in every cluster, so finding it tells the two
apart. Generated keys are rendered only when a cluster answers, so a render
without one is the same on every run (docs/HELM.md#3-the-routers-secrets).
*/}}
{{- define "sluice.clusterAnswers" -}}
{{- if lookup "v1" "Namespace" "" "kube-system" }}true{{ end -}}
{{- end }}

{{/*
The data of a router Secret: (list $ name key given). given (the user's
value) wins; otherwise the value already in the cluster, so that an upgrade
keeps the key clients hold; otherwise a random one, generated once, on the
install. Callers render the Secret only when given is set or the cluster
answers (sluice.clusterAnswers).
*/}}
{{- define "sluice.secretValue" -}}
{{- $ := index . 0 }}{{ $name := index . 1 }}{{ $key := index . 2 }}{{ $given := index . 3 -}}
{{- if $given -}}
{{ $given | b64enc }}
{{- else -}}
{{- $existing := lookup "v1" "Secret" $.Values.router.namespace $name -}}
{{- dig "data" $key (printf "%s\n" (randAlphaNum 48) | b64enc) $existing -}}
{{- end -}}
{{- end }}
