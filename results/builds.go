package results

import (
	"fmt"
	"strings"

	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// groupBuilds groups labelled parts (the shards of a merge) by the build of
// lockcheck that made them, in their order; nil when they all came from one.
func groupBuilds(labels []string, builds []buildinfo.Info) []PartsBuild {
	var groups []PartsBuild
next:
	for i, b := range builds {
		for g := range groups {
			if groups[g].Lockcheck.Same(b) {
				groups[g].Parts = append(groups[g].Parts, labels[i])
				continue next
			}
		}
		groups = append(groups, PartsBuild{Lockcheck: b, Parts: []string{labels[i]}})
	}
	if len(groups) <= 1 {
		return nil
	}
	return groups
}

// BuildsNote says in one line that the parts a merge combined came from
// different builds of lockcheck, or from builds that cannot be told apart
// (none recorded its revision); "" when they came from one. what names the
// parts ("comparisons", "soaks").
func BuildsNote(what string, groups []PartsBuild) string {
	if len(groups) == 0 {
		return ""
	}
	var each []string
	for _, g := range groups {
		each = append(each, fmt.Sprintf("%s from %s", strings.Join(g.Parts, ", "), g.Lockcheck.Short()))
	}
	known := 0
	for _, g := range groups {
		if g.Lockcheck.Known() {
			known++
		}
	}
	if known == 0 {
		return fmt.Sprintf("the merged %s came from builds of lockcheck that recorded no revision (go run, go test, or a build without VCS information), so whether they are one lockcheck is unknown: %s; build with make build to record it",
			what, strings.Join(each, "; "))
	}
	return fmt.Sprintf("the merged %s came from different builds of lockcheck, so a verdict that differs between them may be lockcheck's change, not the lock's: %s",
		what, strings.Join(each, "; "))
}

// SoakBuilds groups merged soaks by the build that ran them, each named by
// its backend and workload; nil when they all came from one.
func SoakBuilds(soaks []*Soak) []PartsBuild {
	labels := make([]string, len(soaks))
	builds := make([]buildinfo.Info, len(soaks))
	for i, s := range soaks {
		labels[i] = s.Backend + "/" + s.Variant + " " + s.Workload
		builds[i] = s.Lockcheck
	}
	return groupBuilds(labels, builds)
}
