{{/* The chart's name (nameOverride wins), at most 63 characters. */}}
{{- define "promscaler.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of the namespaced objects: fullnameOverride, else the release name
when it already contains the chart name, else <release>-<name>.
*/}}
{{- define "promscaler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "promscaler.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "promscaler.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}

{{- define "promscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: the same keys as the prometheus-adapter chart's, so an
in-place helm upgrade keeps the Deployment's (immutable) selector. */}}
{{- define "promscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "promscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "promscaler.labels" -}}
helm.sh/chart: {{ include "promscaler.chart" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: metrics
app.kubernetes.io/part-of: {{ include "promscaler.name" . }}
{{ include "promscaler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations from customAnnotations (and any extra dict given). */}}
{{- define "promscaler.annotations" -}}
{{- $all := merge (dict) (.extra | default dict) (.root.Values.customAnnotations | default dict) -}}
{{- with $all -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "promscaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "promscaler.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* The serving certificate comes from a Secret (tls.enable or certManager). */}}
{{- define "promscaler.servingSecret" -}}
{{- if or .Values.tls.enable .Values.certManager.enabled }}true{{ end -}}
{{- end -}}

{{/*
Whether an API is registered: "true" or "". Call with (list $ "custom"),
(list $ "external") or (list $ "resource"). apiServices.<api> true or false
decides; "auto" follows the rules configured.
*/}}
{{- define "promscaler.serves" -}}
{{- $root := index . 0 -}}
{{- $api := index . 1 -}}
{{- $v := $root.Values -}}
{{- $choice := index ($v.apiServices | default dict) $api -}}
{{- if kindIs "bool" $choice -}}
{{- if $choice }}true{{ end -}}
{{- else if eq $api "custom" -}}
{{- if or $v.rules.default $v.rules.custom $v.rules.existing }}true{{ end -}}
{{- else if eq $api "external" -}}
{{- if and $v.rules.external (not $v.rules.existing) }}true{{ end -}}
{{- else if eq $api "resource" -}}
{{- if and $v.rules.resource (not $v.rules.existing) }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* The adapter's config.yaml, from rules.default, custom, external and resource. */}}
{{- define "promscaler.config" -}}
{{- $rules := list -}}
{{- if .Values.rules.default -}}
{{- $rules = concat $rules (.Files.Get "rules/default.yaml" | fromYaml).rules -}}
{{- end -}}
{{- with .Values.rules.custom -}}
{{- $rules = concat $rules (tpl (toYaml .) $ | fromYamlArray) -}}
{{- end -}}
{{- $cfg := dict -}}
{{- if $rules }}{{ $_ := set $cfg "rules" $rules }}{{ end -}}
{{- with .Values.rules.external }}{{ $_ := set $cfg "externalRules" . }}{{ end -}}
{{- with .Values.rules.resource }}{{ $_ := set $cfg "resourceRules" . }}{{ end -}}
{{- if $cfg }}{{ toYaml $cfg }}{{ else }}{}{{ end -}}
{{- end -}}

{{/* APIService spec fields shared by every API: where the adapter is and how
the aggregator trusts it. */}}
{{- define "promscaler.apiServiceSpec" -}}
service:
  name: {{ include "promscaler.fullname" . }}
  namespace: {{ include "promscaler.namespace" . }}
  port: {{ .Values.service.port }}
{{- if .Values.tls.enable }}
caBundle: {{ b64enc .Values.tls.ca }}
insecureSkipTLSVerify: false
{{- else if .Values.certManager.enabled }}
insecureSkipTLSVerify: false
{{- else }}
insecureSkipTLSVerify: true
{{- end }}
groupPriorityMinimum: 100
{{- end -}}

{{- define "promscaler.apiServiceAnnotations" -}}
{{- $extra := dict -}}
{{- if .Values.certManager.enabled -}}
{{- $_ := set $extra "cert-manager.io/inject-ca-from" (printf "%s/%s-root-cert" (include "promscaler.namespace" .) (include "promscaler.fullname" .)) -}}
{{- end -}}
{{- include "promscaler.annotations" (dict "root" . "extra" $extra) -}}
{{- end -}}
