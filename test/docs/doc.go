// Package docs holds the tests that keep the repository's documentation
// whole: every relative link in README.md and docs/*.md names a file that
// exists, every #anchor names a heading of its file under GitHub's slug
// rules, every "FILE.md §N" pointer names a numbered section that exists,
// every docs/FILE.md#anchor cited in Go source resolves, every test a page
// names is declared in Go, every file in docs/ is in README's documentation
// list and every path in README's layout table exists.
//
// The package has no code of its own, only tests. They read files and never
// write, never reach the network, and never judge what a page says, only
// that its pointers lead somewhere.
package docs
