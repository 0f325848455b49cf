package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestQuorumIsAStrictMajority(t *testing.T) {
	tests := []struct{ nodes, quorum int }{
		{1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}, {7, 4},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.quorum, Quorum(tt.nodes), "%d nodes", tt.nodes)
	}
}

func TestValidityArithmetic(t *testing.T) {
	tests := []struct {
		name     string
		ttl      time.Duration
		elapsed  time.Duration
		factor   float64
		drift    time.Duration
		validity time.Duration
		noneLeft bool
	}{
		{name: "redis.io defaults", ttl: 500 * time.Millisecond, elapsed: 10 * time.Millisecond, factor: 0.01,
			drift: 7 * time.Millisecond, validity: 483 * time.Millisecond},
		{name: "a 10 s lock", ttl: 10 * time.Second, elapsed: 100 * time.Millisecond, factor: 0.01,
			drift: 102 * time.Millisecond, validity: 9798 * time.Millisecond},
		{name: "an instant round keeps all but the drift", ttl: time.Second, factor: 0.01,
			drift: 12 * time.Millisecond, validity: 988 * time.Millisecond},
		{name: "a larger drift factor", ttl: time.Second, elapsed: 50 * time.Millisecond, factor: 0.1,
			drift: 102 * time.Millisecond, validity: 848 * time.Millisecond},
		{name: "a round that ate the whole TTL", ttl: 500 * time.Millisecond, elapsed: 493 * time.Millisecond, factor: 0.01,
			drift: 7 * time.Millisecond, validity: 0, noneLeft: true},
		{name: "a round longer than the TTL", ttl: 500 * time.Millisecond, elapsed: 600 * time.Millisecond, factor: 0.01,
			drift: 7 * time.Millisecond, validity: -107 * time.Millisecond, noneLeft: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.drift, Drift(tt.ttl, tt.factor))
			v := Validity(tt.ttl, tt.elapsed, tt.factor)
			assert.Equal(t, tt.validity, v)
			assert.Equal(t, !tt.noneLeft, Won(5, 5, v), "even all five nodes win nothing without validity")
		})
	}
}

func TestMajorityRule(t *testing.T) {
	const someValidity = time.Millisecond
	tests := []struct {
		name     string
		granted  int
		nodes    int
		validity time.Duration
		won      bool
	}{
		{"all five", 5, 5, someValidity, true},
		{"a bare majority of five", 3, 5, someValidity, true},
		{"two of five", 2, 5, someValidity, false},
		{"none", 0, 5, someValidity, false},
		{"three of four", 3, 4, someValidity, true},
		{"half of four is no majority", 2, 4, someValidity, false},
		{"a majority too late", 3, 5, 0, false},
		{"a majority past the TTL", 5, 5, -time.Millisecond, false},
		{"one of one", 1, 1, someValidity, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.won, Won(tt.granted, tt.nodes, tt.validity))
		})
	}
}

func TestParamsOverrideDefaults(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		want    Options
		wantErr string
	}{
		{name: "none", params: nil, want: Options{}},
		{name: "all", params: map[string]string{ParamNodeTimeout: "20ms", ParamDriftFactor: "0.05", ParamTries: "3", ParamRetryDelay: "15ms"},
			want: Options{NodeTimeout: 20 * time.Millisecond, DriftFactor: 0.05, Tries: 3, RetryDelay: 15 * time.Millisecond}},
		{name: "bad timeout", params: map[string]string{ParamNodeTimeout: "soon"}, wantErr: "--redlock-node-timeout"},
		{name: "drift of one TTL", params: map[string]string{ParamDriftFactor: "1"}, wantErr: "--redlock-drift-factor"},
		{name: "no tries", params: map[string]string{ParamTries: "0"}, wantErr: "--redlock-tries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseParams(tt.params, Options{})
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
