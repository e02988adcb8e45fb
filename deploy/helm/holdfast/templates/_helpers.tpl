{{/*
Labels Helm adds to every object's metadata (never to selectors or pod
templates, so that the objects are otherwise those of deploy/).
*/}}
{{- define "holdfast.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end }}

{{/*
The ConfigMap's name suffix: kustomize's configMapGenerator hash of the
same content (sha256 of {"data", "kind", "name": ""} as JSON, the first
ten hex digits with 0 1 3 a e spelled g h k m t), so that a rack's objects
are named as its overlay's and a config change renames the ConfigMap and
rolls the DaemonSet.
*/}}
{{- define "holdfast.configHash" -}}
{{- $doc := dict "data" (dict "holdfast.toml" .config) "kind" "ConfigMap" "name" "" -}}
{{- $hex := $doc | toJson | sha256sum | trunc 10 -}}
{{- $hex | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{- end }}

{{- define "holdfast.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
