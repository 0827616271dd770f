// Package reqbody holds a request body on the router's front door: the
// buffers it is read into, charged to one budget for all requests
// (--max-buffered-body-bytes) before they are allocated and pooled when
// released, and its top-level "model" member, located and rewritten
// without allocating.
//
// The package must never log, never keep a body after its buffer is
// released, and never read more of a body than its limit and one byte.
package reqbody
