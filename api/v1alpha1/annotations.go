package v1alpha1

// Annotations of a ReplicaTier that qualification reads and promotion
// writes (docs/QUALIFICATION.md). They are declarations by people: sluice
// checks what it can of them against the engines and records the rest in
// the qualification report, and never writes any of them.
const (
	// AnnotationEngine declares the members' inference engine, one of
	// Engines.
	AnnotationEngine = "qualify.sluice.dev/engine"
	// AnnotationEngineVersion declares the engine's version, as the engine
	// reports it (vLLM's GET /version).
	AnnotationEngineVersion = "qualify.sluice.dev/engine-version"
	// AnnotationEngineImage declares the engine's container image, by
	// digest (registry/name@sha256:...).
	AnnotationEngineImage = "qualify.sluice.dev/engine-image"
	// AnnotationRecipe declares, in free text, how the engines were started:
	// flags, parallelism, quantization.
	AnnotationRecipe = "qualify.sluice.dev/recipe"
	// AnnotationAccepted records a person's promotion of the tier after
	// reading a passing report of real evidence:
	// "<who>:<sha256 of report.json>:<date>". Only people set it.
	AnnotationAccepted = "qualify.sluice.dev/accepted"
)
