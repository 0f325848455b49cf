package etcd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
)

// The live tests of this backend (a real cluster, its faults, whole runs)
// are in harness/etcd_test.go and cmd/lockcheck/e2e_etcd_test.go: they need
// the harness to start member processes.

func TestSessionTTLRoundsUpToWholeSeconds(t *testing.T) {
	tests := []struct {
		ttl, want time.Duration
	}{
		{100 * time.Millisecond, time.Second},
		{500 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Millisecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{2 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, SessionTTL(tt.ttl), "ttl %s", tt.ttl)
	}
}

func TestMinTTLFollowsTheElectionTimeout(t *testing.T) {
	tests := []struct {
		name   string
		timing Timing
		want   time.Duration
	}{
		{"etcd's defaults", Timing{100 * time.Millisecond, time.Second}, 2 * time.Second},
		{"lockcheck's defaults", DefaultTiming, time.Second},
		{"fast", Timing{50 * time.Millisecond, 500 * time.Millisecond}, time.Second},
		{"slow", Timing{200 * time.Millisecond, 3 * time.Second}, 5 * time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.timing.MinTTL(), tt.name)
	}
}

func TestTimingFromParams(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		want    Timing
		wantErr string
	}{
		{"none", nil, DefaultTiming, ""},
		{"both", map[string]string{ParamHeartbeat: "50ms", ParamElection: "500ms"}, Timing{50 * time.Millisecond, 500 * time.Millisecond}, ""},
		{"not a duration", map[string]string{ParamHeartbeat: "fast"}, DefaultTiming, "--etcd-heartbeat"},
		{"below a millisecond", map[string]string{ParamHeartbeat: "100us"}, DefaultTiming, "whole number of milliseconds"},
		{"election too short", map[string]string{ParamElection: "300ms"}, DefaultTiming, "at least 5 times"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TimingFrom(tt.params)
			assert.Equal(t, tt.want, got)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// A member's command line names every peer, on loopback, and its own ports.
func TestNodeArgsNameEveryPeer(t *testing.T) {
	all := []backends.Endpoint{
		{Name: "etcd-0", Ports: []int{2000, 2001}, Dir: "/run/etcd-0"},
		{Name: "etcd-1", Ports: []int{2010, 2011}, Dir: "/run/etcd-1"},
	}
	spec := Node("etcd-1", "/bin/lockcheck", DefaultTiming)
	assert.Equal(t, 2, spec.Ports)
	assert.Equal(t, []string{MemberEnv + "=1"}, spec.Env)
	assert.Equal(t, []string{
		memberCommand,
		"--name", "etcd-1",
		"--dir", "/run/etcd-1",
		"--client-port", "2010",
		"--peer-port", "2011",
		"--initial-cluster", "etcd-0=http://127.0.0.1:2001,etcd-1=http://127.0.0.1:2011",
		"--heartbeat", "100ms",
		"--election", "600ms",
	}, spec.Args(all[1], all))
}

func TestRunMemberRefusesABadCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"not a member", []string{"run"}, `not "etcd-member"`},
		{"no name", []string{memberCommand, "--dir", "/tmp"}, "--name, --dir"},
		{"unknown flag", []string{memberCommand, "--bogus"}, "bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runMember(tt.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
