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

// A member's command line is etcd's own: it names every peer and its own
// addresses, listening where the runtime says and advertising where others
// reach it.
func TestNodeArgsNameEveryPeer(t *testing.T) {
	all := []backends.Endpoint{
		{Name: "etcd-0", Ports: []int{2000, 2001}, Dir: "/run/etcd-0"},
		{Name: "etcd-1", Host: "172.28.0.3", Bind: "0.0.0.0", Ports: []int{2379, 2380}, Dir: "/run/etcd-1"},
	}
	spec := Node("etcd-1", "/bin/lockcheck", DefaultTiming)
	assert.Equal(t, 2, spec.Ports)
	assert.Equal(t, []string{MemberEnv + "=1"}, spec.Env)
	assert.Equal(t, "etcd", spec.Image.Kind)
	assert.Equal(t, []string{
		"--name", "etcd-1",
		"--data-dir", "/run/etcd-1/data",
		"--listen-client-urls", "http://0.0.0.0:2379",
		"--advertise-client-urls", "http://172.28.0.3:2379",
		"--listen-peer-urls", "http://0.0.0.0:2380",
		"--initial-advertise-peer-urls", "http://172.28.0.3:2380",
		"--initial-cluster", "etcd-0=http://127.0.0.1:2001,etcd-1=http://172.28.0.3:2380",
		"--initial-cluster-token", "lockcheck",
		"--initial-cluster-state", "new",
		"--heartbeat-interval", "100",
		"--election-timeout", "600",
		"--log-outputs", "etcd.log",
	}, spec.Args(all[1], all))
}

func TestRunMemberRefusesABadCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no name", []string{"--data-dir", "/tmp"}, "--name, --data-dir"},
		{"unknown flag", []string{"--bogus"}, "bogus"},
		{"bad url", []string{"--name", "a", "--data-dir", "/tmp/x", "--listen-client-urls", "nohost",
			"--listen-peer-urls", "http://127.0.0.1:1", "--initial-cluster", "a=http://127.0.0.1:1"}, "want a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runMember(tt.args)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
