package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api/bounds"
)

// Bounds of the ReplicaTier API, defined in api/bounds. The CRD markers below
// repeat these numbers (markers cannot reference constants); a test checks
// the generated CRD against them.
const (
	// MaxMembers is the largest replica tier.
	MaxMembers = bounds.MaxMembers
	// MaxAliases bounds the caller-facing names of one tier.
	MaxAliases = bounds.MaxAliases
	// MinConcurrency is the lower bound of every concurrency ceiling.
	MinConcurrency = bounds.MinConcurrency
	// MaxConcurrency is the upper bound of every concurrency ceiling.
	MaxConcurrency = bounds.MaxConcurrency
	// MaxQueueRequests is the upper bound of spec.queue.maxRequests and of
	// spec.queue.maxRequestsPerTenant.
	MaxQueueRequests = bounds.MaxQueueRequests
	// MinQueueWait is the lower bound of spec.queue.maxWait.
	MinQueueWait = bounds.MinQueueWaitMillis * time.Millisecond
	// MaxQueueWait is the upper bound of spec.queue.maxWait.
	MaxQueueWait = bounds.MaxQueueWaitMillis * time.Millisecond
	// MaxQueueOldestWaitSeconds is the upper bound of
	// status.queue.oldestWaitSeconds: no request waits longer than the
	// longest maxWait.
	MaxQueueOldestWaitSeconds = bounds.MaxQueueWaitMillis / 1000
)

// Strategy selects how the router picks a member of a replica tier. It is
// bounds.Strategy, the one strategy type the admission owner runs too; the
// Enum marker on ReplicaTierSpec.Strategy lists bounds.Strategies (a test
// reads the generated CRD).
type Strategy = bounds.Strategy

const (
	// StrategyRoundRobin rotates over the eligible members. It is what a
	// replica tier without a strategy does.
	StrategyRoundRobin = bounds.StrategyRoundRobin
	// StrategyCapacity picks the least-loaded eligible member by router
	// reservations, then by fresh engine pressure, then by rotation.
	StrategyCapacity = bounds.StrategyCapacity
)

// UpstreamModel selects the model name the router sends to a member in the
// request body's top-level "model" member.
// +kubebuilder:validation:Enum=ServedModel;Alias
type UpstreamModel string

const (
	// UpstreamModelServedModel replaces the caller's alias with the tier's
	// servedModel, the one name every member serves. It is what a tier
	// without upstreamModel does.
	UpstreamModelServedModel UpstreamModel = "ServedModel"
	// UpstreamModelAlias forwards the alias the caller sent, for engines that
	// serve every alias as an extra served model name.
	UpstreamModelAlias UpstreamModel = "Alias"
)

// MemberLocality selects which hosts a tier's member endpoints may name.
// +kubebuilder:validation:Enum=SameHost;Any
type MemberLocality string

const (
	// MemberLocalitySameHost requires every member endpoint's host to be
	// loopback (localhost, 127.0.0.0/8, ::1) or an address of the node the
	// router runs on: a tier's scheduling assumes its members are replicas
	// on one host. It is what a tier without memberLocality does.
	MemberLocalitySameHost MemberLocality = "SameHost"
	// MemberLocalityAny accepts any endpoint host, for deliberate setups
	// whose members run on another machine.
	MemberLocalityAny MemberLocality = "Any"
)

// Engine names the metrics dialect of a member's inference engine.
// +kubebuilder:validation:Enum=vllm;sglang;llamacpp;tgi;trtllm-serve;triton-tensorrt-llm
type Engine string

// The engines whose metrics the router can read.
const (
	// EngineVLLM reads vLLM's metrics.
	EngineVLLM Engine = "vllm"
	// EngineSGLang reads SGLang's metrics.
	EngineSGLang Engine = "sglang"
	// EngineLlamaCPP reads llama.cpp server's metrics.
	EngineLlamaCPP Engine = "llamacpp"
	// EngineTGI reads Text Generation Inference's metrics.
	EngineTGI Engine = "tgi"
	// EngineTRTLLMServe reads TensorRT-LLM's trtllm-serve metrics.
	EngineTRTLLMServe Engine = "trtllm-serve"
	// EngineTritonTRTLLM reads the Triton TensorRT-LLM backend's metrics.
	EngineTritonTRTLLM Engine = "triton-tensorrt-llm"
)

// Engines returns every engine, in the order of Engine's Enum marker; it is
// what Validate accepts. The router's pressure adapters (internal/pressure)
// are the source of these dialects, and a test there ties this list, the
// marker and the generated CRD to them. The slice is new and owned by the
// caller.
func Engines() []Engine {
	return []Engine{EngineVLLM, EngineSGLang, EngineLlamaCPP, EngineTGI, EngineTRTLLMServe, EngineTritonTRTLLM}
}

// SeriesSelector selects the samples of one Prometheus metric, as an instant
// vector selector with equality matchers does: a metric name, optionally
// followed by up to four matchers, name{label="value",...}. A label value is
// printable ASCII without a double quote or backslash. The grammar is
// bounds.SeriesSelectorPattern.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[ !#-\[\]-~]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[ !#-\[\]-~]*"){0,3}\})?$')`,message=`must be a Prometheus metric name with at most 4 label matchers, as name or name{label="value",...}`
type SeriesSelector string

// QuiesceReason is a short machine-readable reason for quiescing a member,
// such as "driver-upgrade".
// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]{0,62}$`
// +kubebuilder:validation:MaxLength=63
type QuiesceReason string

// ReplicaTierSpec declares the members of one tier on one node and the
// operator's admission intent for them.
// +kubebuilder:validation:XValidation:rule="!has(self.strategy) || size(self.members) > 1",message="strategy must not be set on a direct tier (one member)"
// +kubebuilder:validation:XValidation:rule="!has(self.strategy) || self.strategy != 'Capacity' || self.members.all(m, has(m.maxConcurrency))",message="every member needs maxConcurrency when strategy is Capacity"
// +kubebuilder:validation:XValidation:rule="!has(self.quiesce) || !has(self.quiesce.members) || self.quiesce.members.all(k, self.members.exists(m, m.id == k))",message="quiesce.members keys must be member ids"
// +kubebuilder:validation:XValidation:rule="!has(self.quiesce) || !has(self.quiesce.members) || size(self.quiesce.members) == 0 || size(self.members) > 1",message="quiesce.members must be empty on a direct tier (one member): quiesce the tier instead"
type ReplicaTierSpec struct {
	// NodeName is the node whose router owns this tier. The router lists
	// tiers with a field selector on it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`

	// Aliases are the model names callers send that route to this tier. Each
	// alias may belong to only one tier per node.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`
	Aliases []string `json:"aliases"`

	// ServedModel is the exact model id every member must list on its
	// /v1/models endpoint to count as ready.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ServedModel string `json:"servedModel"`

	// UpstreamModel selects the model name sent to members: ServedModel
	// replaces the value of the request body's top-level "model" with
	// servedModel and changes nothing else; Alias forwards the body as the
	// caller sent it. Absent means ServedModel.
	// +optional
	UpstreamModel UpstreamModel `json:"upstreamModel,omitempty"`

	// MemberLocality selects which hosts member endpoints may name:
	// SameHost requires each endpoint's host to be loopback or an address
	// of the router's node, and the router refuses to apply a tier that
	// breaks it; Any accepts every host. Absent means SameHost.
	// +optional
	MemberLocality MemberLocality `json:"memberLocality,omitempty"`

	// Strategy selects how a replica tier picks a member. Absent means
	// RoundRobin; it must be absent on a direct tier (one member).
	// +kubebuilder:validation:Enum=RoundRobin;Capacity
	// +optional
	Strategy Strategy `json:"strategy,omitempty"`

	// MaxConcurrency is the aggregate ceiling of requests in flight across
	// the tier. Absent means the sum of the member ceilings. It is never
	// multiplied by the member count.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`

	// Members are the replicas of the tier: one member makes a direct tier,
	// two to sixteen a replica tier.
	// +required
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Members []Member `json:"members"`

	// Upstream holds the timeouts of the router's connections to members.
	// +optional
	Upstream *UpstreamSpec `json:"upstream,omitempty"`

	// Quiesce is the operator's intent to stop admitting new requests to the
	// tier or to some members. In-flight requests always finish.
	// +optional
	Quiesce *QuiesceSpec `json:"quiesce,omitempty"`

	// Queue lets a request the tier cannot admit at once wait, for a bounded
	// time, until a member can take it (docs/ADMISSION-QUEUE.md). Absent
	// means no queue: such a request is refused at once with 503 and
	// Retry-After.
	// +optional
	Queue *QueueSpec `json:"queue,omitempty"`
}

// Member is one replica of the tier's model.
type Member struct {
	// ID names the member in status, metrics, logs and quiesce intent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`
	ID string `json:"id"`

	// Endpoint is the member's base URL: http or https, host localhost or an
	// IP literal, no path, user info, query or fragment.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="endpoint must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || self.matches('^https?://([^/@]*@)?(localhost|((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])[.]){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])|\\\\[[0-9A-Fa-f:.]+\\\\])(:[0-9]{1,5})?([/?#].*)?$')",message="endpoint host must be localhost or an IP literal"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.contains('?') && !self.contains('#')",message="endpoint must not contain user info, a query or a fragment"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getEscapedPath() in ['', '/']",message="endpoint must not have a path"
	Endpoint string `json:"endpoint"`

	// MaxConcurrency is the ceiling of requests in flight to this member. It
	// is enforced in every strategy and required for Capacity.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`

	// Metrics says how to read the member's engine pressure. Absent means the
	// member's pressure is always unknown.
	// +optional
	Metrics *MetricsSpec `json:"metrics,omitempty"`
}

// MetricsSpec locates a member's Prometheus metrics and names the series
// that carry its pressure: an engine's (engine), the member's own (series),
// or both, a named series replacing the engine's for its signal.
// +kubebuilder:validation:XValidation:rule="has(self.engine) || has(self.series)",message="metrics must name an engine or series"
type MetricsSpec struct {
	// Engine is the metrics dialect of the member's engine. Absent means
	// only the named series are read.
	// +optional
	Engine Engine `json:"engine,omitempty"`

	// Path is the metrics path on the member's endpoint.
	// +optional
	// +kubebuilder:default="/metrics"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/[A-Za-z0-9._~/-]*$`
	Path string `json:"path,omitempty"`

	// Series names the member's own pressure series, for an engine in no
	// dialect or a series its dialect does not read.
	// +optional
	Series *SeriesSpec `json:"series,omitempty"`
}

// SeriesSpec names, per pressure signal, the series a member's engine
// reports it in. A named signal replaces the engine's series for that
// signal; a signal named neither here nor by an engine is not read. Several
// samples selected for one signal are combined as the engines' are: counts
// summed, KV usage the largest (docs/PRESSURE.md#engine-adapters).
// +kubebuilder:validation:XValidation:rule="has(self.running) || has(self.waiting) || has(self.kvUsage)",message="series must name running, waiting or kvUsage"
type SeriesSpec struct {
	// Running selects the number of requests the engine is running.
	// +optional
	Running SeriesSelector `json:"running,omitempty"`

	// Waiting selects the number of requests waiting in the engine's queue.
	// +optional
	Waiting SeriesSelector `json:"waiting,omitempty"`

	// KVUsage selects the engine's KV cache usage, a fraction from 0 to 1.
	// +optional
	KVUsage SeriesSelector `json:"kvUsage,omitempty"`
}

// UpstreamSpec bounds the router's waits on a member.
type UpstreamSpec struct {
	// ResponseHeaderTimeout bounds the wait for a member's response headers.
	// +optional
	// +kubebuilder:default="120s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="responseHeaderTimeout must be between 1s and 1h"
	ResponseHeaderTimeout *metav1.Duration `json:"responseHeaderTimeout,omitempty"`

	// IdleTimeout bounds the gap between two reads of a member's response
	// body, streams included.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="idleTimeout must be between 1s and 1h"
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`
}

// QueueSpec is the admission queue of a tier. A request that arrives while
// every eligible member and the tier are at their ceilings waits in the
// queue, holding no member's capacity, and is admitted when a member can
// take it. A request that finds the queue (or its tenant's share of it)
// full is refused at once with 429 queue_full; one that waits longer than
// maxWait is refused with 503 queue_timeout. Both carry Retry-After.
// +kubebuilder:validation:XValidation:rule="!has(self.maxRequestsPerTenant) || !has(self.maxRequests) || self.maxRequestsPerTenant <= self.maxRequests",message="maxRequestsPerTenant must not exceed maxRequests"
type QueueSpec struct {
	// MaxRequests is the most requests that may wait in the tier at once,
	// all tenants together. A request that arrives when it is reached gets
	// 429 queue_full.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRequests int32 `json:"maxRequests,omitempty"`

	// MaxWait is the longest one request waits, from 10ms to 10m. A request
	// still waiting when it passes gets 503 queue_timeout.
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('10m')",message="maxWait must be between 10ms and 10m"
	MaxWait *metav1.Duration `json:"maxWait,omitempty"`

	// MaxRequestsPerTenant is the most requests of one tenant (an API key;
	// see docs/ADMISSION-QUEUE.md) that may wait in the tier at once, at
	// most maxRequests, so one tenant cannot fill the queue. A request beyond its tenant's share gets 429
	// queue_full. Absent means maxRequests.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRequestsPerTenant *int32 `json:"maxRequestsPerTenant,omitempty"`
}

// QuiesceSpec is the operator's admission intent. Quiesce stops new
// admissions; requests in flight finish.
type QuiesceSpec struct {
	// Tier quiesces the whole tier when it holds a non-empty reason.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-z0-9][a-z0-9-]{0,62})?$`
	Tier string `json:"tier,omitempty"`

	// Members maps a member id to the reason it is quiesced. Remove a key
	// (merge-patch it to null) to readmit that member.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Members map[string]QuiesceReason `json:"members,omitempty"`
}

// MemberPhase is a member's admission phase as the router applies it.
// +kubebuilder:validation:Enum=Admitting;Draining;Drained
type MemberPhase string

const (
	// MemberAdmitting takes new requests.
	MemberAdmitting MemberPhase = "Admitting"
	// MemberDraining is quiesced (itself or through the tier) with requests
	// still in flight.
	MemberDraining MemberPhase = "Draining"
	// MemberDrained is quiesced with no request in flight.
	MemberDrained MemberPhase = "Drained"
)

// ReplicaTierStatus is the observed state of a ReplicaTier. The manager owns
// observedGeneration, conditions and admission; the router on spec.nodeName
// owns members and router.
type ReplicaTierStatus struct {
	// ObservedGeneration is the generation the manager last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MemberCount is the number of members in the reconciled spec.
	// +optional
	MemberCount int32 `json:"memberCount,omitempty"`

	// Conditions are Accepted, Programmed and Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Admission is the validated quiesce intent the router applies.
	// +optional
	Admission *AdmissionStatus `json:"admission,omitempty"`

	// Members is each member's readiness and phase, written by the router.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	Members []MemberStatus `json:"members,omitempty"`

	// Router says which router applied which generation.
	// +optional
	Router *RouterStatus `json:"router,omitempty"`

	// Queue is the tier's admission queue as the router last reported it,
	// written by the router only and absent for a tier without spec.queue.
	// It is coarse on purpose: a change of its numbers alone is written at
	// most once per 10 seconds per tier (a change of a member's readiness or
	// phase is written at once and carries the queue along), so it may lag
	// the router by up to 10 seconds plus the write's own delay. The exact,
	// current numbers are the router's metrics and its capacity view
	// (docs/OPERATIONS.md).
	// +optional
	Queue *QueueStatus `json:"queue,omitempty"`
}

// QueueStatus is a tier's admission queue as the router reports it.
type QueueStatus struct {
	// MaxRequests is the queue's bound the router applies
	// (spec.queue.maxRequests of the generation in force).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRequests int32 `json:"maxRequests"`

	// Waiting is how many requests were waiting in the queue.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Waiting int32 `json:"waiting"`

	// OldestWaitSeconds is how long the longest-waiting request had
	// waited, rounded down to whole seconds; 0 when none waits.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=600
	OldestWaitSeconds int32 `json:"oldestWaitSeconds"`
}

// AdmissionStatus is the validated admission intent.
type AdmissionStatus struct {
	// Tier is the tier-wide intent.
	// +required
	Tier TierAdmission `json:"tier"`

	// Members lists exactly the quiesced members, sorted by id.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=16
	Members []MemberAdmission `json:"members,omitempty"`
}

// TierAdmission is the tier-wide admission intent.
type TierAdmission struct {
	// Quiesced is true when the tier admits no new request.
	// +required
	Quiesced bool `json:"quiesced"`

	// Reason is why the tier is quiesced.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason,omitempty"`
}

// MemberAdmission is one quiesced member.
type MemberAdmission struct {
	// ID is the member id.
	// +required
	// +kubebuilder:validation:MaxLength=32
	ID string `json:"id"`

	// Quiesced is true for every listed member.
	// +required
	Quiesced bool `json:"quiesced"`

	// Reason is why the member is quiesced.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason,omitempty"`
}

// MemberStatus is one member as the router sees it.
type MemberStatus struct {
	// ID is the member id.
	// +required
	// +kubebuilder:validation:MaxLength=32
	ID string `json:"id"`

	// Ready is true when the member's latest probe listed the served model.
	// +required
	Ready bool `json:"ready"`

	// Phase is the member's effective admission phase.
	// +required
	Phase MemberPhase `json:"phase"`
}

// RouterStatus identifies the router that applied the tier.
type RouterStatus struct {
	// Node is the router's node.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`

	// AppliedGeneration is the generation the router applies: the one whose
	// configuration is in force. Zero means the router applies none yet.
	// +required
	// +kubebuilder:validation:Minimum=0
	AppliedGeneration int64 `json:"appliedGeneration"`

	// ApplyError is set while the router cannot apply the latest generation
	// it received; it keeps applying AppliedGeneration meanwhile. It is
	// removed once a generation applies.
	// +optional
	ApplyError *ApplyError `json:"applyError,omitempty"`
}

// MaxApplyErrorMessageLength bounds ApplyError.Message, in bytes: enough for
// one error naming a member and a rule, and a bound the router can cut to.
const MaxApplyErrorMessageLength = 512

// ApplyError says which generation the router could not apply and why.
type ApplyError struct {
	// Generation is the generation the router could not apply.
	// +required
	// +kubebuilder:validation:Minimum=1
	Generation int64 `json:"generation"`

	// Message says why, naming members and rules but never endpoints or
	// other field values.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message"`
}

// ReplicaTier declares the identical replicas of one model on one node and
// how the node's router admits requests to them.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rt;rtier,categories=sluice
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.strategy`
// +kubebuilder:printcolumn:name="Members",type=integer,JSONPath=`.status.memberCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Quiesced",type=boolean,JSONPath=`.status.admission.tier.quiesced`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReplicaTier struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired tier.
	// +required
	Spec ReplicaTierSpec `json:"spec"`

	// status is the observed tier.
	// +optional
	Status ReplicaTierStatus `json:"status,omitempty"`
}

// ReplicaTierList is a list of ReplicaTiers.
// +kubebuilder:object:root=true
type ReplicaTierList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ReplicaTiers.
	Items []ReplicaTier `json:"items"`
}
