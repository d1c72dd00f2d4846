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
{{- $list := .Values.managedNamespaces | default (list .Release.Namespace) -}}
{{- $principal := include "argocd-agent-addon.principalNamespace" . -}}
{{- if and (or .Values.principal.install .Values.defaults.create) (not (has $principal $list)) -}}
{{- $list = append $list $principal -}}
{{- end -}}
{{- join "," $list -}}
{{- end -}}

{{/*
The namespace of the principal the chart runs (principal.install) and of the chart's default
GitOpsCluster: principal.namespace, else the release namespace. The principal belongs beside the
hub's Argo CD, whose redis and Applications it uses; the manager manages its Secrets there.
*/}}
{{- define "argocd-agent-addon.principalNamespace" -}}
{{- .Values.principal.namespace | default .Release.Namespace -}}
{{- end -}}

{{/*
The principal's agent authentication: the agent name is the cluster name in the subject of the
client certificates this project's signer issues (OCM's default CustomSigner subject).
*/}}
{{- define "argocd-agent-addon.principalAuth" -}}
{{- printf "mtls:subject:^CN=system:open-cluster-management:cluster:([^:]+):addon:%s:agent:%s-agent(?:,|$)" .Values.addon.name .Values.addon.name -}}
{{- end -}}

{{/*
A Go duration of the schema's form (e.g. 1m30s, 500ms) in seconds, as a float.
*/}}
{{- define "argocd-agent-addon.durationSeconds" -}}
{{- $unit := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" . -}}
{{- $total = addf $total (mulf (float64 $number) (get $unit (trimPrefix $number .))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}
