package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// maxListedProblems bounds the rejected manifests and tiers one
// --strict-manifests error lists: each WARN line already names them all,
// and a directory of 256 broken files would otherwise make an error of
// 256 KiB.
const maxListedProblems = 16

// errStrictManifests is returned by run when --strict-manifests is set and
// the first configuration rejects a manifest or a tier of this node.
var errStrictManifests = errors.New("--strict-manifests: the configuration is not fully valid")

// configReport logs what each applied snapshot put in force
// (docs/OPERATIONS.md#router-logs-and-profiles): one INFO line with the
// counts at the first load and at every reload, one WARN for each rejection
// the previous snapshot did not already report (the router logs the
// configurations it refuses itself, the same way), and a WARN when every
// tier read names another node. The logs name files, tiers, nodes and
// field paths, never endpoints or field values.
type configReport struct {
	logger *slog.Logger
	node   string
	files  bool // the files source: the files and other nodes' tiers are counted.

	mu       sync.Mutex
	loaded   bool            // a snapshot was reported before.
	logged   map[string]bool // the WARN lines the last snapshot logged or would have, by what they say.
	problems []string        // the last snapshot's rejections, for --strict-manifests.
}

// newConfigReport returns the report of a router on node; files is set
// for the files source.
func newConfigReport(logger *slog.Logger, node string, files bool) *configReport {
	return &configReport{logger: logger, node: node, files: files, logged: map[string]bool{}}
}

// report logs the summary of s, which the router applied as applied.
func (c *configReport) report(s source.Snapshot, applied tiers.ApplyResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := "tier configuration reloaded"
	if !c.loaded {
		msg = "tier configuration loaded"
	}
	c.loaded = true
	attrs := []any{"node", c.node}
	if c.files {
		attrs = append(attrs, "files", s.Files, "files_rejected", len(s.Errors))
	}
	attrs = append(attrs, "tiers_served", applied.Served, "tiers_rejected", len(s.Rejected)+len(applied.Refused))
	if c.files {
		attrs = append(attrs, "tiers_other_node", s.OtherNodes.Tiers)
	}
	c.logger.Info(msg, attrs...)

	// warn logs a WARN line unless the previous snapshot logged the same.
	logged := map[string]bool{}
	warn := func(msg string, args ...any) {
		key := fmt.Sprintf("%s %#v", msg, args)
		logged[key] = true
		if !c.logged[key] {
			c.logger.Warn(msg, args...)
		}
	}
	c.problems = c.problems[:0]
	for _, e := range s.Errors {
		c.problems = append(c.problems, "file "+e.File+": "+e.Message)
		switch {
		case e.File == ".":
			warn("manifest directory not read; the tiers read before keep their configuration", "error", e.Message)
		case e.KeepsLastGood:
			warn("manifest rejected; its tiers keep their last good configuration", "file", e.File, "error", e.Message)
		default:
			warn("manifest rejected; none of its tiers is served", "file", e.File, "error", e.Message)
		}
	}
	for _, r := range s.Rejected {
		c.problems = append(c.problems, "tier "+r.Tier.Key+": "+string(r.Reason)+": "+r.Message)
		warn("tier not served", "tier", r.Tier.Key, "reason", string(r.Reason), "detail", r.Message)
	}
	for _, r := range applied.Refused {
		c.problems = append(c.problems, "tier "+r.Key+": "+r.Message)
	}
	if len(s.Tiers)+len(s.Rejected) == 0 && s.OtherNodes.Tiers > 0 {
		warn("every tier read names another node: this router serves none (check --node-name)",
			"node", c.node, "tiers_other_node", s.OtherNodes.Tiers, "manifest_nodes", s.OtherNodes.Nodes)
	}
	c.logged = logged
}

// strictError returns an error wrapping errStrictManifests that lists the
// last snapshot's rejected manifests and tiers, or nil when there are none.
func (c *configReport) strictError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) == 0 {
		return nil
	}
	listed := c.problems[:min(len(c.problems), maxListedProblems)]
	more := ""
	if n := len(c.problems) - len(listed); n > 0 {
		more = fmt.Sprintf("; and %d more", n)
	}
	return fmt.Errorf("%w: %d rejected: %s%s", errStrictManifests, len(c.problems), strings.Join(listed, "; "), more)
}
