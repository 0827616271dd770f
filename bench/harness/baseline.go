//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// baselineRouter is the router built from the -baseline revision, which
// the overhead and streams scenarios measure beside the work tree's in the
// same run.
type baselineRouter struct {
	// revision is -baseline as given; commit its abbreviated commit.
	revision, commit string
	// bin is the built binary.
	bin string
}

// label names the baseline in rows and headings: sluice@COMMIT.
func (b *baselineRouter) label() string { return "sluice@" + b.commit }

// baselineMeta names the baseline in the results.
type baselineMeta struct {
	// Revision is -baseline as given.
	Revision string `json:"revision"`
	// Commit is the abbreviated commit it resolved to.
	Commit string `json:"commit"`
}

// toolStep is one command of a build: the program, its arguments, the
// directory it runs in and the name of its log.
type toolStep struct {
	name, dir, bin string
	args           []string
}

// baselineSteps are the commands that build the router of commit (a full
// commit id of the repository repo) into bin: the commit's tree is
// archived into src (an empty directory outside the repository, so the
// build sees neither the work tree nor its VCS state) and built there with
// the same command as the work tree's router (buildBinaries).
func baselineSteps(repo, commit, src, bin string) []toolStep {
	tarFile := filepath.Join(src, "tree.tar")
	return []toolStep{
		{name: "baseline-archive", dir: repo, bin: "git", args: []string{"archive", "--format=tar", "-o", tarFile, commit}},
		{name: "baseline-extract", dir: src, bin: "tar", args: []string{"-xf", tarFile}},
		{name: "baseline-build", dir: src, bin: "go", args: []string{"build", "-o", bin, "./cmd/router"}},
	}
}

// buildBaseline resolves -baseline to a commit and builds that commit's
// router into the bin directory under -work, as router-COMMIT; the source
// tree is removed afterwards.
func buildBaseline(env *runEnv) (*baselineRouter, error) {
	sup, rev := env.sup, env.opts.baseline
	full, err := sup.runToolIn(sup.ctx, env.opts.repo, "baseline-rev-parse", "git", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("-baseline %q is not a commit of %s: %w", rev, env.opts.repo, err)
	}
	full = strings.TrimSpace(full)
	short, err := sup.runToolIn(sup.ctx, env.opts.repo, "baseline-rev-parse-short", "git", "rev-parse", "--short", full)
	if err != nil {
		return nil, err
	}
	b := &baselineRouter{revision: rev, commit: strings.TrimSpace(short)}
	bin, err := filepath.Abs(filepath.Join(env.opts.work, "bin"))
	if err != nil {
		return nil, err
	}
	b.bin = filepath.Join(bin, "router-"+b.commit)
	src, err := os.MkdirTemp("", "sluice-baseline-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(src) }()
	env.progress("baseline %s (%s): building its router into %s", rev, b.commit, b.bin)
	for _, st := range baselineSteps(env.opts.repo, full, src, b.bin) {
		if _, err := sup.runToolIn(sup.ctx, st.dir, st.name, st.bin, st.args...); err != nil {
			return nil, fmt.Errorf("baseline %s: %w", rev, err)
		}
	}
	return b, nil
}
