package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/bounds"
	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// Bounds of the Files source.
const (
	// DefaultPollInterval is how often Files rereads its directory when
	// FilesOptions.Interval is zero: an edit is applied within two seconds,
	// and rereading a few small files costs nothing at that pace.
	DefaultPollInterval = 2 * time.Second
	// MinPollInterval and MaxPollInterval bound FilesOptions.Interval: below
	// 100 ms the rereads cost CPU for nothing, above a minute an operator
	// waits too long for a quiesce to take effect.
	MinPollInterval = 100 * time.Millisecond
	// MaxPollInterval is the upper bound of FilesOptions.Interval.
	MaxPollInterval = time.Minute
	// MaxFiles bounds the manifest files read from the directory; more are
	// reported as a directory error and ignored.
	MaxFiles = 256
	// MaxMembers bounds the members of all tiers of one router
	// (docs/CONFIGURATION.md#1-router-flags):
	// the readiness probes and the pressure cache are sized for it. Files
	// whose tiers would exceed it, in file name order, are ignored and
	// reported.
	MaxMembers = bounds.MaxNodeMembers
	// MaxTiers bounds the tiers of one router; every tier has at least one
	// member, so it follows from MaxMembers.
	MaxTiers = MaxMembers
	// MaxReportedNodes bounds the node names Snapshot.OtherNodes lists: the
	// router logs them, and one or two are enough to see a mistyped
	// --node-name, while a directory shared by a whole cluster could name
	// hundreds.
	MaxReportedNodes = 8
)

// manifestExtensions are the file name extensions Files reads.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// FilesOptions configures a Files source.
type FilesOptions struct {
	// Dir is the directory holding the manifests. Files named *.yaml, *.yml
	// or *.json are read; names starting with "." (such as a ConfigMap
	// volume's ..data) and subdirectories are skipped. Required.
	Dir string
	// NodeName is this router's node; tiers of other nodes are ignored.
	// Required.
	NodeName string
	// Clock drives the polling ticker. Its zero value (nil) is the real
	// clock.
	Clock clock.WithTicker
	// Interval is the polling period. Zero means DefaultPollInterval; other
	// values are clamped to MinPollInterval..MaxPollInterval.
	Interval time.Duration
	// Scanned, when set, is called on Run's goroutine after every periodic
	// scan (not the first), with whether the scan published a Snapshot; a
	// publishing scan calls it after publish returned. A caller that steps
	// Clock waits on it to know the scan a tick triggered is done. Nil
	// means no call.
	Scanned func(published bool)
}

// Files is the files source: it polls a directory of ReplicaTier manifests
// and publishes a Snapshot whenever a file's content changes. Create it with
// NewFiles and start it with Run; it is not safe to Run twice.
type Files struct {
	dir      string
	node     string
	clock    clock.WithTicker
	interval time.Duration

	// State of the polling goroutine, touched only by Run.
	files  map[string]*fileState
	dirErr string

	// scanned is FilesOptions.Scanned; nil calls nothing.
	scanned func(published bool)
}

// fileState is what Files remembers of one file.
type fileState struct {
	data       []byte                 // content of the last read; nil when unreadable
	tiers      []v1alpha1.ReplicaTier // last good tiers of this node
	otherNodes []string               // node names of the last good content's other tiers
	good       bool                   // some content was valid: tiers and otherNodes hold it
	err        string                 // current error; empty when the content is valid
}

// NewFiles returns a Files source for opts. It returns an error wrapping
// ErrInvalidOptions when Dir or NodeName is empty. It reads nothing yet.
func NewFiles(opts FilesOptions) (*Files, error) {
	if opts.Dir == "" || opts.NodeName == "" {
		return nil, fmt.Errorf("%w: a directory and a node name are required", ErrInvalidOptions)
	}
	f := &Files{
		dir:      opts.Dir,
		node:     opts.NodeName,
		clock:    opts.Clock,
		interval: opts.Interval,
		scanned:  opts.Scanned,
		files:    map[string]*fileState{},
	}
	if f.clock == nil {
		f.clock = clock.RealClock{}
	}
	if f.interval == 0 {
		f.interval = DefaultPollInterval
	}
	f.interval = min(max(f.interval, MinPollInterval), MaxPollInterval)
	return f, nil
}

// Run scans the directory, publishes the first Snapshot and then rescans on
// every tick of the polling interval, publishing a new Snapshot whenever
// any file was added, removed or changed. publish is called from Run's
// goroutine, one call at a time; it must not block for long.
//
// Run returns an error wrapping ErrDirectory, publishing nothing, when the
// first scan cannot read the directory; later failures keep the last good
// tiers and are reported in Snapshot.Errors. It returns nil when ctx ends.
func (f *Files) Run(ctx context.Context, publish func(Snapshot)) error {
	ticker := f.clock.NewTicker(f.interval)
	defer ticker.Stop()
	if _, err := f.scan(); err != nil {
		return fmt.Errorf("%w: %w", ErrDirectory, err)
	}
	publish(f.snapshot())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
		changed, _ := f.scan()
		if changed {
			publish(f.snapshot())
		}
		if f.scanned != nil {
			f.scanned(changed)
		}
	}
}

// scan rereads the directory and every manifest file, updating the state of
// each changed file. It reports whether anything visible changed, and the
// directory's read error, if any.
func (f *Files) scan() (bool, error) {
	names, err := f.list()
	if err != nil {
		msg := "the directory cannot be read"
		if errors.Is(err, ErrTooManyFiles) {
			msg = fmt.Sprintf("the directory holds more than %d manifest files", MaxFiles)
		}
		changed := f.dirErr != msg
		f.dirErr = msg
		return changed, err
	}
	changed := f.dirErr != ""
	f.dirErr = ""
	for name := range f.files {
		if !slices.Contains(names, name) {
			delete(f.files, name)
			changed = true
		}
	}
	for _, name := range names {
		data, readErr := readBounded(filepath.Join(f.dir, name))
		st := f.files[name]
		if st == nil {
			st = &fileState{}
			f.files[name] = st
		} else if readErr == nil && st.data != nil && bytes.Equal(st.data, data) {
			continue
		}
		before := st.err
		st.data = data
		if readErr != nil {
			st.err = message(readErr)
			changed = changed || st.err != before
			continue
		}
		m, parseErr := parseManifest(data, f.node)
		if parseErr != nil {
			st.err = message(parseErr)
			changed = changed || st.err != before
			continue
		}
		st.tiers, st.otherNodes, st.good, st.err = m.tiers, m.otherNodes, true, ""
		changed = true
	}
	return changed, nil
}

// list returns the sorted names of the manifest files in the directory.
func (f *Files) list() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !slices.Contains(manifestExtensions, filepath.Ext(name)) {
			continue
		}
		if info, err := os.Stat(filepath.Join(f.dir, name)); err == nil && info.IsDir() {
			continue
		}
		names = append(names, name)
	}
	if len(names) > MaxFiles {
		return nil, ErrTooManyFiles
	}
	return names, nil // os.ReadDir sorts by name.
}

// readBounded reads a regular file of at most MaxFileBytes, reading one byte
// more to tell a file of exactly the bound from a larger one. It opens
// without blocking and checks the type of what it opened (a symbolic link,
// such as a ConfigMap volume's, counts as its target): a FIFO or a device
// named *.yaml would otherwise block the scan, and with it reloads and
// shutdown, or never end. Errors wrap ErrInvalidManifest and never quote the
// path.
func readBounded(path string) ([]byte, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) //nolint:gosec // The operator names the directory; reading its manifests is the point.
	if err != nil {
		return nil, fmt.Errorf("%w: the file cannot be opened", ErrInvalidManifest)
	}
	defer func() { _ = fh.Close() }()
	info, err := fh.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: the file cannot be read", ErrInvalidManifest)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%w: not a regular file (%s)", ErrInvalidManifest, fileKind(info.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: the file cannot be read", ErrInvalidManifest)
	case len(data) > MaxFileBytes:
		return nil, fmt.Errorf("%w: the file exceeds %d bytes", ErrInvalidManifest, MaxFileBytes)
	}
	return data, nil
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	default:
		return "an irregular file"
	}
}

// snapshot builds the Snapshot of the current state.
func (f *Files) snapshot() Snapshot {
	names := make([]string, 0, len(f.files))
	for name := range f.files {
		names = append(names, name)
	}
	slices.Sort(names)
	files := make([]fileTiers, 0, len(names))
	var errs []FileError
	others := map[string]bool{}
	skipped := 0
	total := 0
	for _, name := range names {
		st := f.files[name]
		for _, node := range st.otherNodes {
			others[node] = true
		}
		skipped += len(st.otherNodes)
		if st.err != "" {
			errs = append(errs, FileError{File: name, Message: st.err, KeepsLastGood: st.good})
		}
		n := 0
		for i := range st.tiers {
			n += len(st.tiers[i].Spec.Members)
		}
		if total+n > MaxMembers {
			errs = append(errs, FileError{File: name, Message: fmt.Sprintf("ignored: the router serves at most %d members", MaxMembers)})
			continue
		}
		total += n
		files = append(files, fileTiers{name: name, tiers: st.tiers})
	}
	if f.dirErr != "" {
		errs = append(errs, FileError{File: ".", Message: f.dirErr, KeepsLastGood: true})
	}
	s := build(files, errs)
	s.Files = len(names)
	s.OtherNodes = OtherNodes{Tiers: skipped, Nodes: slices.Sorted(maps.Keys(others))}
	if len(s.OtherNodes.Nodes) > MaxReportedNodes {
		s.OtherNodes.Nodes = s.OtherNodes.Nodes[:MaxReportedNodes]
	}
	return s
}
