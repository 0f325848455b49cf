package sentinel

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/backends"
)

func TestSettingsValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Settings)
		want   string // empty: valid
	}{
		{"defaults", func(*Settings) {}, ""},
		{"min-replicas on both replicas", func(s *Settings) { s.MinReplicasToWrite = 2 }, ""},
		{"no down-after", func(s *Settings) { s.DownAfter = 0 }, "--down-after 0s"},
		{"down-after below a millisecond", func(s *Settings) { s.DownAfter = 1500 * time.Microsecond }, "whole number of milliseconds"},
		{"no failover timeout", func(s *Settings) { s.FailoverTimeout = -time.Second }, "--failover-timeout"},
		{"more replicas than there are", func(s *Settings) { s.MinReplicasToWrite = 3 }, "the topology has 2 replicas"},
		{"lag below a second", func(s *Settings) { s.MinReplicasMaxLag = 500 * time.Millisecond }, "whole seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSettings()
			tt.change(&s)
			err := s.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestSettingsRoundTripThroughParams(t *testing.T) {
	s := Settings{DownAfter: 1500 * time.Millisecond, FailoverTimeout: 4 * time.Second, MinReplicasToWrite: 1, MinReplicasMaxLag: 2 * time.Second}
	assert.Equal(t, s, SettingsFrom(s.Params()))
	assert.Equal(t, DefaultSettings(), SettingsFrom(nil), "missing params keep the defaults")
}

func testEndpoints() []backends.Endpoint {
	var all []backends.Endpoint
	for i := 0; i < dataNodes; i++ {
		all = append(all, backends.Endpoint{Name: DataName(i), Ports: []int{7000 + i}, Dir: "/run/" + DataName(i)})
	}
	for i := 0; i < sentinelNodes; i++ {
		all = append(all, backends.Endpoint{Name: SentinelName(i), Ports: []int{7100 + i}, Dir: "/run/" + SentinelName(i)})
	}
	return all
}

// Each sentinel starts knowing the master, both replicas and the other two
// sentinels by their fixed IDs, so none has to discover the others before
// a failover can be agreed on.
func TestSentinelConfigNamesTheWholeTopology(t *testing.T) {
	all := testEndpoints()
	conf := sentinelConfig(all[3], all, DefaultSettings())
	for _, line := range []string{
		"port 7100",
		"bind 127.0.0.1",
		"dir /run/sentinel-0",
		"sentinel myid " + sentinelID("sentinel-0"),
		"sentinel monitor lockcheck 127.0.0.1 7000 2",
		"sentinel down-after-milliseconds lockcheck 1000",
		"sentinel failover-timeout lockcheck 3000",
		"sentinel known-replica lockcheck 127.0.0.1 7001",
		"sentinel known-replica lockcheck 127.0.0.1 7002",
		"sentinel known-sentinel lockcheck 127.0.0.1 7101 " + sentinelID("sentinel-1"),
		"sentinel known-sentinel lockcheck 127.0.0.1 7102 " + sentinelID("sentinel-2"),
	} {
		assert.Contains(t, strings.Split(conf, "\n"), line)
	}
	assert.NotContains(t, conf, "known-sentinel lockcheck 127.0.0.1 7100", "a sentinel does not list itself")
	assert.Len(t, sentinelID("sentinel-0"), 40)
	assert.NotEqual(t, sentinelID("sentinel-0"), sentinelID("sentinel-1"))
}

func TestReplicasFollowRedis0(t *testing.T) {
	all := testEndpoints()
	s := DefaultSettings()
	s.MinReplicasToWrite = 1
	specs := Nodes("redis-server", "redis-sentinel", s)
	assert.Len(t, specs, dataNodes+sentinelNodes)
	master := strings.Join(specs[0].Args(all[0], all), " ")
	replica := strings.Join(specs[1].Args(all[1], all), " ")
	assert.NotContains(t, master, "--replicaof")
	assert.Contains(t, replica, "--replicaof 127.0.0.1 7000")
	for _, args := range []string{master, replica} {
		assert.Contains(t, args, "--min-replicas-to-write 1 --min-replicas-max-lag 10", "any data node may become master")
		assert.Contains(t, args, "--bind 127.0.0.1")
	}
	assert.Equal(t, []string{"127.0.0.1:7100", "127.0.0.1:7101", "127.0.0.1:7102"}, SentinelAddrs(all), "clients ask the sentinels")
}

func TestParseSwitch(t *testing.T) {
	tests := []struct {
		payload  string
		from, to string
		ok       bool
	}{
		{"lockcheck 127.0.0.1 7000 127.0.0.1 7001", "127.0.0.1:7000", "127.0.0.1:7001", true},
		{"othermaster 127.0.0.1 7000 127.0.0.1 7001", "", "", false},
		{"lockcheck 127.0.0.1 7000", "", "", false},
	}
	for _, tt := range tests {
		from, to, ok := parseSwitch(tt.payload)
		assert.Equal(t, tt.ok, ok, tt.payload)
		assert.Equal(t, tt.from, from)
		assert.Equal(t, tt.to, to)
	}
}
