// Package buildinfo says which lockcheck is running: its module version,
// the VCS revision it was built from and whether that tree was modified,
// and the Go that built it, all from the binary's own build information.
// results.json, compare.json, soak.json and the report carry it, so that a
// verdict that changed between two nights can be told from a lockcheck
// that changed.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// Module is lockcheck's module path.
const Module = "github.com/lockcheck/lockcheck"

// Unknown stands for what a build did not record: `go run` and `go test`
// stamp no VCS information, and a build outside a checkout has none.
const Unknown = "unknown"

// Info is one build of lockcheck, as results.json's "lockcheck" key.
type Info struct {
	// Version is the module version: a release (v1.2.3), a pseudo-version
	// of the commit a checkout was built from, "(devel)", or "unknown".
	Version string `json:"version"`
	// Revision is the VCS revision (the full commit hash), or "unknown".
	Revision string `json:"revision"`
	// Modified says whether the checkout had uncommitted changes; null
	// when the build recorded no VCS information.
	Modified *bool `json:"modified"`
	// Go is the Go version that built it.
	Go string `json:"go"`
}

// stampedRevision and stampedModified are set by `make build`
// (-ldflags -X) from git, for a build whose VCS the go command does not read:
// a git worktree (its .git is a file), or GOFLAGS=-buildvcs=false. The
// build's own VCS settings win when it has them.
var stampedRevision, stampedModified string

// Current is the running binary's build.
var Current = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	return From(bi, ok)
})

// From reads a build's information. lockcheck is the main module of its
// own command and a dependency of a user's own main (lockcheck.Main): then
// the version is the dependency's, and the VCS settings, which describe
// the user's checkout, are not lockcheck's.
func From(bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: Unknown, Revision: Unknown, Go: runtime.Version()}
	if !ok || bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	mod := &bi.Main
	if mod.Path != Module {
		mod = nil
		for _, d := range bi.Deps {
			if d.Path == Module {
				mod = d
				if d.Replace != nil {
					mod = d.Replace
				}
			}
		}
		if mod == nil {
			return info
		}
		if mod.Version != "" {
			info.Version = mod.Version
		}
		return info
	}
	if mod.Version != "" {
		info.Version = mod.Version
	}
	revision, dirty := stampedRevision, stampedModified
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value
		}
	}
	if revision != "" {
		info.Revision = revision
	}
	if m, err := strconv.ParseBool(dirty); err == nil && revision != "" {
		info.Modified = &m
	}
	return info
}

// Known says whether the build recorded its revision.
func (i Info) Known() bool { return i.Revision != Unknown && i.Revision != "" }

// Same says whether two builds are the same lockcheck: one version, one
// revision, both clean or both modified. Two builds that recorded no
// revision are taken as the same only if their versions agree and neither
// is a development build, since nothing else tells them apart.
func (i Info) Same(o Info) bool {
	if i.Version != o.Version || i.Revision != o.Revision || modified(i) != modified(o) {
		return false
	}
	return i.Known() || !strings.Contains(i.Version, "devel")
}

func modified(i Info) string {
	if i.Modified == nil {
		return Unknown
	}
	return strconv.FormatBool(*i.Modified)
}

// Short names a build in one phrase: "v1.2.0", "revision 94feef2d1234
// (modified)", "(devel), revision unknown".
func (i Info) Short() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	s := i.Version
	if i.Known() {
		if strings.HasPrefix(i.Version, "v0.0.0-") || i.Version == "(devel)" || i.Version == Unknown {
			s = "revision " + rev
		} else {
			s += ", revision " + rev
		}
	} else {
		s += ", revision unknown"
	}
	if i.Modified != nil && *i.Modified {
		s += " (modified)"
	}
	return s
}

// String is what `lockcheck version` prints, a line a field.
func (i Info) String() string {
	return fmt.Sprintf("lockcheck %s\nrevision: %s\nmodified: %s\ngo: %s\n", i.Version, i.Revision, modified(i), i.Go)
}
