// Package testtier marks the long live tests that `go test -short` (make
// short, the fast tier) skips: runs of lockcheck against real servers that
// repeat what a smoke run per backend already shows on every change. The
// whole suite (make test, the README's command) runs them.
package testtier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Long skips t under -short, saying which command runs it.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skipf("long live test, skipped under -short: make test runs it, or alone: go test -count=1 -run '^%s$' %s", strings.SplitN(t.Name(), "/", 2)[0], packageDir())
	}
}

// packageDir is the test's package as go test names it (./internal/cli):
// a test binary runs in its package's folder, below the module's go.mod.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for root := wd; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "."
		}
		root = parent
	}
}
