package source

import "errors"

// The sentinel errors of the package. Errors that carry detail wrap one of
// these with %w; check them with errors.Is.
var (
	// ErrInvalidOptions is returned by NewFiles and NewKube for options that
	// cannot work: no directory, no lister-watcher or no node name.
	ErrInvalidOptions = errors.New("source: invalid options")
	// ErrDirectory is returned by Files.Run when the first scan cannot read
	// the manifest directory.
	ErrDirectory = errors.New("source: manifest directory unreadable")
	// ErrInvalidManifest wraps every reason a manifest file is rejected:
	// unreadable, too large, not YAML, not a ReplicaTier, or invalid.
	ErrInvalidManifest = errors.New("source: invalid manifest")
	// ErrTooManyFiles reports a directory holding more than MaxFiles
	// manifest files.
	ErrTooManyFiles = errors.New("source: too many manifest files")
)
