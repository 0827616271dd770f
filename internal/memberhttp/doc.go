// Package memberhttp reads a member's side endpoints — its Prometheus
// metrics and its OpenAI model list — with a time bound and a size bound,
// for the pressure cache and the readiness probes.
//
// It owns the HTTP mechanics only: what the body means belongs to its
// callers. Its errors never carry a URL, an address or a body, and it never
// follows redirects, uses a proxy or retries.
package memberhttp
