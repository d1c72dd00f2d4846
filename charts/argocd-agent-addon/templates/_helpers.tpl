{{- define "argocd-agent-addon.name" -}}argocd-agent-addon{{- end -}}

{{- define "argocd-agent-addon.fullname" -}}
{{- if contains "argocd-agent-addon" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-argocd-agent-addon" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "argocd-agent-addon.labels" -}}
app.kubernetes.io/name: {{ include "argocd-agent-addon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "argocd-agent-addon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argocd-agent-addon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "argocd-agent-addon.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The principal namespaces the manager may touch Secrets and Deployments in. */}}
{{- define "argocd-agent-addon.managedNamespaces" -}}
{{- if .Values.managedNamespaces -}}
{{- join "," .Values.managedNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
The principal's agent authentication: the agent name is the cluster name in the subject of the
client certificates this project's signer issues (OCM's default CustomSigner subject).
*/}}
{{- define "argocd-agent-addon.principalAuth" -}}
{{- printf "mtls:subject:^CN=system:open-cluster-management:cluster:([^:]+):addon:%s:agent:%s-agent(?:,|$)" .Values.addon.name .Values.addon.name -}}
{{- end -}}
