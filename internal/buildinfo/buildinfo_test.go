package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFrom(t *testing.T) {
	yes, no := true, false
	rev := "94feef2104822442a7149c12aa143fc6ad0f2ddf"
	tests := []struct {
		name  string
		bi    *debug.BuildInfo
		want  Info
		short string
	}{
		{"no build information", nil,
			Info{Version: Unknown, Revision: Unknown, Go: "go1.26.8"}, "unknown, revision unknown"},
		{"go build of a modified checkout", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Path: Module, Version: "v0.0.0-20261202010109-94feef210482+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: "v0.0.0-20261202010109-94feef210482+dirty", Revision: rev, Modified: &yes, Go: "go1.26.8"}, "revision 94feef210482 (modified)"},
		{"a release", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Path: Module, Version: "v1.2.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "v1.2.0", Revision: rev, Modified: &no, Go: "go1.26.8"}, "v1.2.0, revision 94feef210482"},
		{"go run or go test: no VCS information", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: Module, Version: "(devel)"}},
			Info{Version: "(devel)", Revision: Unknown, Go: "go1.26.8"}, "(devel), revision unknown"},
		{"a user's own main: lockcheck is a dependency, the VCS settings are not its", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Path: "example.com/mylock", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: "github.com/other/lib", Version: "v1.0.0"}, {Path: Module, Version: "v1.3.0"}},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "v1.3.0", Revision: Unknown, Go: "go1.26.8"}, "v1.3.0, revision unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := From(tt.bi, tt.bi != nil)
			if tt.bi == nil {
				got.Go = "go1.26.8"
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.short, got.Short())
		})
	}
}

func TestSame(t *testing.T) {
	yes, no := true, false
	a := Info{Version: "v0.0.0-x", Revision: "aaa", Modified: &no, Go: "go1.26.8"}
	b := Info{Version: "v0.0.0-y", Revision: "bbb", Modified: &no, Go: "go1.26.8"}
	dirty := a
	dirty.Modified = &yes
	devel := Info{Version: "(devel)", Revision: Unknown, Go: "go1.26.8"}
	assert.True(t, a.Same(a))
	assert.False(t, a.Same(b), "two revisions")
	assert.False(t, a.Same(dirty), "the same revision, one of them modified")
	assert.False(t, devel.Same(devel), "two builds that recorded nothing cannot be told to be the same")
	assert.True(t, Info{Version: "v1.2.0", Revision: Unknown}.Same(Info{Version: "v1.2.0", Revision: Unknown}), "one release")
}

func TestString(t *testing.T) {
	no := false
	assert.Equal(t, "lockcheck v1.2.0\nrevision: abc\nmodified: false\ngo: go1.26.8\n",
		Info{Version: "v1.2.0", Revision: "abc", Modified: &no, Go: "go1.26.8"}.String())
	assert.Equal(t, "lockcheck (devel)\nrevision: unknown\nmodified: unknown\ngo: go1.26.8\n",
		Info{Version: "(devel)", Revision: Unknown, Go: "go1.26.8"}.String())
}
