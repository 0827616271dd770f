// Package docs holds the test that keeps the repository's documentation
// whole: every relative link and anchor in README.md and docs/ resolves,
// every doc is listed in README, every path of README's layout table
// exists, and every docs/ citation in the Go code points at a heading that
// exists. It has no code of its own; it must never change a file.
package docs
