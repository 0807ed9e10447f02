{{/* Names, labels and the image reference every template uses (deploy.md §2). */}}

{{- define "pillar-csi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <fullname>: fullnameOverride, else the release name when it already contains the chart
name, else <release>-<chart>; at most 63 characters. */}}
{{- define "pillar-csi.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pillar-csi.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "pillar-csi.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pillar-csi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pillar-csi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The recommended labels every object carries. */}}
{{- define "pillar-csi.labels" -}}
helm.sh/chart: {{ include "pillar-csi.chart" . }}
{{ include "pillar-csi.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pillar-csi
{{- end -}}

{{/* Labels of one component's objects: (dict "ctx" $ "component" "controller"). */}}
{{- define "pillar-csi.componentLabels" -}}
{{ include "pillar-csi.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pillar-csi.componentSelector" -}}
{{ include "pillar-csi.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pillar-csi.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* ServiceAccount name of a component: (dict "ctx" $ "component" "node"). */}}
{{- define "pillar-csi.serviceAccountName" -}}
{{- $sa := index .ctx.Values.serviceAccount .component -}}
{{- if $sa.create -}}
{{- default (printf "%s-%s" (include "pillar-csi.fullname" .ctx) .component) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding a component's mTLS material: (dict "ctx" $ "component" "agent"). */}}
{{- define "pillar-csi.mtlsSecret" -}}
{{- if .ctx.Values.mtls.certManager.enabled -}}
{{- printf "%s-%s-mtls" (include "pillar-csi.fullname" .ctx) .component -}}
{{- else -}}
{{- (index .ctx.Values.mtls.secretRefs .component).secretName -}}
{{- end -}}
{{- end -}}

{{/* The name the controller expects in the agent certificate (empty: the dialled IP). */}}
{{- define "pillar-csi.mtlsServerName" -}}
{{- if .Values.mtls.serverName -}}
{{- .Values.mtls.serverName -}}
{{- else if .Values.mtls.certManager.enabled -}}
{{- printf "%s-agent.%s.svc" (include "pillar-csi.fullname" .) (include "pillar-csi.namespace" .) -}}
{{- end -}}
{{- end -}}

{{- define "pillar-csi.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end -}}
{{- end -}}

{{/* The Pod and container security settings of deploy.md §5. */}}
{{- define "pillar-csi.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "pillar-csi.privilegedContainer" -}}
privileged: true
runAsUser: 0
{{- end -}}
