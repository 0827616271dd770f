package reqbody

import "errors"

// The sentinel errors of the package; check them with errors.Is.
var (
	// ErrTooLarge is returned by Read for a body above its limit,
	// announced or read.
	ErrTooLarge = errors.New("reqbody: request body too large")
	// ErrBudget is returned by Read, NewBuffer and Buffer.Grow when the
	// budget (--max-buffered-body-bytes) cannot hold the buffer.
	ErrBudget = errors.New("reqbody: request body budget exhausted")
)
