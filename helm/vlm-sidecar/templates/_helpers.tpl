{{/*
Expand the name of the chart.
*/}}
{{- define "vlm-sidecar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name.
We truncate at 63 chars because some Kubernetes name fields are limited to this (by the DNS naming spec).
If release name contains chart name it will be used as a full name.
*/}}
{{- define "vlm-sidecar.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "vlm-sidecar.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels
*/}}
{{- define "vlm-sidecar.labels" -}}
helm.sh/chart: {{ include "vlm-sidecar.chart" . }}
{{ include "vlm-sidecar.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels
*/}}
{{- define "vlm-sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vlm-sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Create the name of the service account to use
*/}}
{{- define "vlm-sidecar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vlm-sidecar.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The sidecar image reference.
*/}}
{{- define "vlm-sidecar.sidecarImage" -}}
{{- printf "%s:%s" .Values.sidecar.image.repository (.Values.sidecar.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
One value as an environment string: lists are comma-joined (SIDECAR_REMOTE_IMAGE_ALLOWED_DOMAINS),
numbers go through toJson so that 1003520 never renders as 1.00352e+06.
*/}}
{{- define "vlm-sidecar.envValue" -}}
{{- if kindIs "slice" . }}{{ join "," . }}
{{- else if kindIs "string" . }}{{ . }}
{{- else }}{{ toJson . }}
{{- end }}
{{- end }}

{{/*
Every SIDECAR_* variable, as YAML mapping lines. `sidecar.config.<name>` becomes SIDECAR_<NAME>;
the rest is derived from the values vLLM is given too, so engine and sidecar cannot disagree.
*/}}
{{- define "vlm-sidecar.sidecarEnv" -}}
{{- $env := dict }}
{{- range $name, $value := .Values.sidecar.config }}
{{- if not (kindIs "invalid" $value) }}
{{- $_ := set $env (printf "SIDECAR_%s" (upper $name)) (include "vlm-sidecar.envValue" $value) }}
{{- end }}
{{- end }}
{{- $_ := set $env "SIDECAR_UPSTREAM_URL" (printf "http://127.0.0.1:%d" (int .Values.vllm.port)) }}
{{- $_ := set $env "SIDECAR_PORT" (toString (int .Values.sidecar.port)) }}
{{- $_ := set $env "SIDECAR_METRICS_PORT" (toString (int .Values.sidecar.metricsPort)) }}
{{- $_ := set $env "SIDECAR_MODEL" .Values.model.path }}
{{- $_ := set $env "SIDECAR_TENSOR_PARALLEL_SIZE" (toString (int .Values.vllm.tensorParallelSize)) }}
{{- $_ := set $env "SIDECAR_PIPELINE_PARALLEL_SIZE" (toString (int .Values.vllm.pipelineParallelSize)) }}
{{- $_ := set $env "SIDECAR_DATA_PARALLEL_SIZE" (toString (int .Values.vllm.dataParallelSize)) }}
{{- with .Values.vllm.pipelineLayerPartition }}
{{- $_ := set $env "SIDECAR_PIPELINE_LAYER_PARTITION" . }}
{{- end }}
{{- $_ := set $env "SIDECAR_KV_CACHE_DTYPE" .Values.vllm.kvCacheDtype }}
{{- $_ := set $env "SIDECAR_MAMBA_CACHE_DTYPE" .Values.vllm.mambaCacheDtype }}
{{- $_ := set $env "SIDECAR_MAMBA_SSM_CACHE_DTYPE" .Values.vllm.mambaSsmCacheDtype }}
{{- $_ := set $env "SIDECAR_PREFIX_CACHING" (toString .Values.vllm.prefixCaching) }}
{{- $_ := set $env "SIDECAR_GDN_PREFILL_BACKEND" .Values.vllm.gdnPrefillBackend }}
{{- with .Values.vllm.blockSize }}
{{- $_ := set $env "SIDECAR_BLOCK_SIZE_TOKENS" (toString (int .)) }}
{{- end }}
{{- with .Values.images.maxPixels }}
{{- $_ := set $env "SIDECAR_MAX_PIXELS" (toString (int64 .)) }}
{{- end }}
{{- with .Values.images.minPixels }}
{{- $_ := set $env "SIDECAR_MIN_PIXELS" (toString (int64 .)) }}
{{- end }}
{{- with .Values.vllm.mmProcessorKwargs }}
{{- $_ := set $env "SIDECAR_MM_PROCESSOR_KWARGS" (toJson .) }}
{{- end }}
{{- with .Values.images.maxPerRequest }}
{{- $_ := set $env "SIDECAR_MAX_IMAGES_PER_REQUEST" (toString (int .)) }}
{{- end }}
{{- if .Values.tracing.enabled }}
{{- range $name, $value := include "vlm-sidecar.otelEnv" (list . .Values.tracing.serviceName) | fromYaml }}
{{- $_ := set $env $name $value }}
{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
The traces endpoint both containers export to: `tracing.endpoint` plus the OTLP/HTTP path.
*/}}
{{- define "vlm-sidecar.tracesEndpoint" -}}
{{- if not .Values.tracing.endpoint }}
{{- fail "tracing.enabled needs tracing.endpoint (the collector's OTLP/HTTP URL, e.g. http://otel-collector:4318)" }}
{{- end }}
{{- printf "%s/v1/traces" (trimSuffix "/" .Values.tracing.endpoint) }}
{{- end }}

{{/*
The standard OTEL_* variables for one container, as a YAML mapping; called with (root, service name).
*/}}
{{- define "vlm-sidecar.otelEnv" -}}
{{- $root := index . 0 }}
{{- $t := $root.Values.tracing }}
{{- $env := dict "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" (include "vlm-sidecar.tracesEndpoint" $root) "OTEL_SERVICE_NAME" (index . 1) "OTEL_TRACES_SAMPLER" $t.sampler }}
{{- with $t.samplerArg }}
{{- $_ := set $env "OTEL_TRACES_SAMPLER_ARG" . }}
{{- end }}
{{- $attributes := list }}
{{- range $key, $value := $t.resourceAttributes }}
{{- $attributes = append $attributes (printf "%s=%v" $key $value) }}
{{- end }}
{{- with $attributes }}
{{- $_ := set $env "OTEL_RESOURCE_ATTRIBUTES" (join "," .) }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
vLLM's environment: `vllm.env`, the layer partition the sidecar is told too, and the OTEL_*
variables when vLLM exports traces.
*/}}
{{- define "vlm-sidecar.vllmEnv" -}}
{{- $env := concat (.Values.vllm.env | default list) list }}
{{- with .Values.vllm.pipelineLayerPartition }}
{{- $env = append $env (dict "name" "VLLM_PP_LAYER_PARTITION" "value" .) }}
{{- end }}
{{- if and .Values.tracing.enabled .Values.tracing.vllm }}
{{- $otel := include "vlm-sidecar.otelEnv" (list . .Values.tracing.vllmServiceName) | fromYaml }}
{{- /* vLLM's exporter speaks gRPC unless told otherwise; the endpoint is its flag. */}}
{{- $_ := set $otel "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" "http/protobuf" }}
{{- $_ := unset $otel "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" }}
{{- range $name := keys $otel | sortAlpha }}
{{- $env = append $env (dict "name" $name "value" (get $otel $name)) }}
{{- end }}
{{- end }}
{{- with $env }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
vLLM's flags. Those that change the sidecar's prediction come from the same values as the
sidecar's variables (see vlm-sidecar.sidecarEnv).
*/}}
{{- define "vlm-sidecar.vllmArgs" -}}
{{- $v := .Values.vllm }}
{{- if not (hasPrefix (printf "%s/" (trimSuffix "/" .Values.model.mountPath)) .Values.model.path) }}
{{- fail (printf "model.path %q must lie under model.mountPath %q" .Values.model.path .Values.model.mountPath) }}
{{- end -}}
- --model={{ .Values.model.path }}
- --served-model-name={{ .Values.model.servedModelName }}
- --host=127.0.0.1
- --port={{ int $v.port }}
- --tensor-parallel-size={{ int $v.tensorParallelSize }}
{{- if gt (int $v.pipelineParallelSize) 1 }}
- --pipeline-parallel-size={{ int $v.pipelineParallelSize }}
{{- end }}
{{- if gt (int $v.dataParallelSize) 1 }}
- --data-parallel-size={{ int $v.dataParallelSize }}
{{- end }}
- --kv-cache-dtype={{ $v.kvCacheDtype }}
{{- if ne $v.mambaCacheDtype "auto" }}
- --mamba-cache-dtype={{ $v.mambaCacheDtype }}
{{- end }}
{{- if ne $v.mambaSsmCacheDtype "auto" }}
- --mamba-ssm-cache-dtype={{ $v.mambaSsmCacheDtype }}
{{- end }}
{{- if not $v.prefixCaching }}
- --no-enable-prefix-caching
{{- end }}
{{- if ne $v.gdnPrefillBackend "auto" }}
- --gdn-prefill-backend={{ $v.gdnPrefillBackend }}
{{- end }}
{{- with $v.blockSize }}
- --block-size={{ int . }}
{{- end }}
{{- with $v.maxModelLen }}
- --max-model-len={{ int . }}
{{- end }}
{{- with $v.gpuMemoryUtilization }}
- --gpu-memory-utilization={{ . }}
{{- end }}
{{- $kwargs := deepCopy ($v.mmProcessorKwargs | default dict) }}
{{- with .Values.images.maxPixels }}
{{- $_ := set $kwargs "max_pixels" (int64 .) }}
{{- end }}
{{- with .Values.images.minPixels }}
{{- $_ := set $kwargs "min_pixels" (int64 .) }}
{{- end }}
{{- if $kwargs }}
- {{ printf "--mm-processor-kwargs=%s" (toJson $kwargs) | quote }}
{{- end }}
{{- $limits := deepCopy ($v.limitMmPerPrompt | default dict) }}
{{- with .Values.images.maxPerRequest }}
{{- $_ := set $limits "image" (int .) }}
{{- end }}
{{- if $limits }}
- {{ printf "--limit-mm-per-prompt=%s" (toJson $limits) | quote }}
{{- end }}
{{- if and .Values.tracing.enabled .Values.tracing.vllm }}
- --otlp-traces-endpoint={{ include "vlm-sidecar.tracesEndpoint" . }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
vLLM's /health from inside its own container (it binds loopback, so kubelet cannot reach it).
*/}}
{{- define "vlm-sidecar.vllmHealthCommand" -}}
exec:
  command:
    - python3
    - -c
    - {{ printf "import urllib.request; urllib.request.urlopen('http://127.0.0.1:%d/health', timeout=4)" (int .Values.vllm.port) | quote }}
{{- end }}

{{/*
The GPU count per pod: every rank of the engine(s), spread over a LeaderWorkerSet group's pods.
*/}}
{{- define "vlm-sidecar.gpus" -}}
{{- $v := .Values.vllm }}
{{- $ranks := mul (int $v.tensorParallelSize) (int $v.pipelineParallelSize) (int $v.dataParallelSize) }}
{{- $pods := ternary (int .Values.leaderWorkerSet.size) 1 .Values.leaderWorkerSet.enabled }}
{{- if and (not $v.gpusPerPod) (ne (mod $ranks $pods) 0) }}
{{- fail (printf "%d GPUs (tensor x pipeline x data parallel) do not divide over leaderWorkerSet.size %d pods" $ranks $pods) }}
{{- end }}
{{- $v.gpusPerPod | default (div $ranks $pods) | int }}
{{- end }}

{{/*
vLLM's multi-node flags in a LeaderWorkerSet group (multiprocessing backend); `rank` is this
pod's node rank: 0 on the leader, the LWS worker index on a worker.
*/}}
{{- define "vlm-sidecar.vllmMultiNodeArgs" -}}
- --nnodes={{ int .root.Values.leaderWorkerSet.size }}
- --node-rank={{ .rank }}
- --master-addr=$(LWS_LEADER_ADDRESS)
- --master-port={{ int .root.Values.leaderWorkerSet.masterPort }}
{{- end }}

{{/*
Labels of the pods that take traffic: the Deployment's, or a LeaderWorkerSet's leaders.
*/}}
{{- define "vlm-sidecar.servingSelectorLabels" -}}
{{ include "vlm-sidecar.selectorLabels" . }}
{{- if .Values.leaderWorkerSet.enabled }}
app.kubernetes.io/component: leader
{{- end }}
{{- end }}

{{/*
What autoscalers scale: the Deployment, or the LeaderWorkerSet (it has a scale subresource).
*/}}
{{- define "vlm-sidecar.scaleTargetRef" -}}
{{- if .Values.leaderWorkerSet.enabled }}
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
{{- else }}
apiVersion: apps/v1
kind: Deployment
{{- end }}
name: {{ include "vlm-sidecar.fullname" . }}
{{- end }}

{{/*
True (non-empty) when the in-flight KV budget is on.
*/}}
{{- define "vlm-sidecar.kvBudgetOn" -}}
{{- $budget := toString (.Values.sidecar.config.kv_budget_bytes | default 0) }}
{{- if not (regexMatch "^\\s*0*(\\.0*)?\\s*[a-zA-Z]*\\s*$" $budget) }}true{{ end }}
{{- end }}

{{/*
The Prometheus label selector for this release's sidecar series.
*/}}
{{- define "vlm-sidecar.promSelector" -}}
{{- printf "namespace=%q,service=%q" .Release.Namespace (include "vlm-sidecar.fullname" .) }}
{{- end }}

{{/*
The model volume and vLLM's /dev/shm, as pod volumes (the LeaderWorkerSet's leader and workers).
*/}}
{{- define "vlm-sidecar.modelVolumes" -}}
- name: models
  {{- if .Values.model.volume }}
  {{- toYaml .Values.model.volume | nindent 2 }}
  {{- else }}
  persistentVolumeClaim:
    claimName: {{ .Values.model.claimName }}
    readOnly: true
  {{- end }}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ .Values.vllm.shmSizeLimit }}
{{- end }}

{{/*
Node selector, affinity and tolerations of the serving pods.
*/}}
{{- define "vlm-sidecar.placement" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
