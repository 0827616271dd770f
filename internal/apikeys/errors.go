package apikeys

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrInvalidKeys is returned by Parse and Load for a key file without
	// keys, with too many keys, with a line that is too long or whose
	// attributes are unknown, repeated or invalid, or whose lines disagree
	// on a key's or a tenant's attributes; a Watch reports it for a read
	// it could not use.
	ErrInvalidKeys = errors.New("apikeys: invalid key file")
	// ErrWatch is returned by Watch.Run for a watch that cannot run: no
	// Keys, or an interval out of bounds.
	ErrWatch = errors.New("apikeys: key watch misconfigured")
)
