package program

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
)

// hostile opens testdata/hostile.py in mode, aiming init at failpoints,
// and collects the rules it is reported to break.
func hostile(t *testing.T, mode string, failpoints []string) (*Lock, *brokeRules) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skip("no " + python)
	}
	l, err := Open(Options{
		Client:  backends.Client{TTL: 300 * time.Millisecond, Timeout: 500 * time.Millisecond},
		Command: []string{python, filepath.Join("testdata", "hostile.py"), mode}, Slot: "c0",
		Failpoints: failpoints, InitTimeout: 5 * time.Second, LogPath: filepath.Join(t.TempDir(), "c0.log"),
	})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	b := &brokeRules{}
	l.Reports(b.add)
	return l, b
}

type brokeRules struct {
	mu      sync.Mutex
	rules   []string
	details []string
	lost    []string
}

func (b *brokeRules) add(r backends.Report) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case r.Rule != "":
		b.rules, b.details = append(b.rules, r.Rule), append(b.details, r.Why)
	case r.Lost:
		b.lost = append(b.lost, r.Token)
	}
}

func (b *brokeRules) get() ([]string, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.rules...), append([]string(nil), b.details...)
}

// Every break of a hostile program is reported with its rule, also one
// that comes after a reply was taken (a duplicate reply) or that a
// decoder would have hidden (a wrong type, a number out of range, bytes
// that are not UTF-8); a good program is reported for nothing.
func TestHostileProgramsAreReported(t *testing.T) {
	cases := []struct {
		mode, rule, detail string
	}{
		{"dupreply", RuleReply, "no request outstanding"},
		{"deleted1", RuleJSON, "deleted"},
		{"wrongtype", RuleReply, "release answered by extend_ok"},
		{"fpflood", RuleAimed, `failpoint "before-renew"`},
		{"ttlmax", RuleRange, "ttl_ms 9223372036854775807 is out of its range 0..86400000"},
		{"ttl584y", RuleRange, "ttl_ms 18446744074210 is out of its range"},
		{"badutf8", RuleUTF8, "not valid UTF-8"},
		{"surrogate", RuleUTF8, "lone surrogate"},
		{"good", "", ""},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			l, b := hostile(t, c.mode, nil)
			for i := range 3 {
				g, err := l.Acquire(bg, "k")
				if err == nil {
					_, err = l.Release(bg, "k", g)
				}
				if c.rule == "" {
					require.NoError(t, err, "cycle %d", i)
				}
			}
			if c.rule == "" {
				time.Sleep(100 * time.Millisecond)
				rules, _ := b.get()
				assert.Empty(t, rules)
				return
			}
			require.Eventually(t, func() bool { r, _ := b.get(); return len(r) > 0 }, 3*time.Second, 10*time.Millisecond)
			rules, details := b.get()
			assert.Equal(t, c.rule, rules[0], "details: %v", details)
			assert.Contains(t, details[0], c.detail)
		})
	}
}

// A program that floods failpoint messages init aimed at, and never
// answers, is timed out by its request's own timeout: the messages give
// its timer nothing back (they used to reset it, so it never ran out).
func TestFailpointFloodTimesOut(t *testing.T) {
	l, b := hostile(t, "fpflood", []string{"before-renew"})
	start := time.Now()
	_, err := l.Acquire(bg, "k")
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no reply to acquire within 500ms")
	assert.Less(t, took, 2*time.Second, "timed out after %s", took)
	rules, _ := b.get()
	assert.Empty(t, rules, "aimed failpoints break nothing")
}

// A lost sent in the same write as the acquire_ok it names counts: the
// grant's Lost channel is closed, so the client skips its write
// (docs/clients.md). It used to be registered only after Acquire
// returned, and a lost read before that was dropped.
func TestLostInTheSameWriteAsTheGrant(t *testing.T) {
	l, b := hostile(t, "lostwithgrant", nil)
	for range 5 {
		g, err := l.Acquire(bg, "k")
		require.NoError(t, err)
		select {
		case <-g.Lost:
		case <-time.After(2 * time.Second):
			t.Fatal("the grant's Lost channel was not closed by the lost that came with it")
		}
		_, err = l.Release(bg, "k", g)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.lost) == 5 }, 2*time.Second, 10*time.Millisecond)
}

// parse checks every line as bytes, every string for what the decoder
// changed, and every integer against its range, naming the field.
func TestParseChecksFields(t *testing.T) {
	cases := []struct {
		name, line, rule, detail string
	}{
		{"a good grant", `{"type":"acquire_ok","in_reply_to":2,"token":"t1","ttl_ms":86400000,"fence":0}`, "", ""},
		{"a surrogate pair", `{"type":"acquire_ok","in_reply_to":2,"token":"t\ud83d\ude00","ttl_ms":500}`, "", ""},
		{"U+FFFD sent as such", `{"type":"acquire_ok","in_reply_to":2,"token":"t\ufffd","ttl_ms":500}`, "", ""},
		{"a lone surrogate", `{"type":"acquire_ok","in_reply_to":2,"token":"t\udc80","ttl_ms":500}`, RuleUTF8, "lone surrogate"},
		{"a byte that is not UTF-8", "{\"type\":\"lost\",\"key\":\"k\",\"token\":\"t\xff\"}", RuleUTF8, "not valid UTF-8"},
		{"a lease of a day and a ms", `{"type":"acquire_ok","in_reply_to":2,"token":"t","ttl_ms":86400001}`, RuleRange, "ttl_ms 86400001 is out of its range 0..86400000"},
		{"a lease that overflows", `{"type":"renewed","key":"k","token":"t","ttl_ms":9223372036854775807}`, RuleRange, "ttl_ms 9223372036854775807"},
		{"a negative lease", `{"type":"extend_ok","in_reply_to":2,"extended":true,"ttl_ms":-1}`, RuleRange, "ttl_ms -1"},
		{"a negative fence", `{"type":"acquire_ok","in_reply_to":2,"token":"t","ttl_ms":5,"fence":-3}`, RuleRange, "fence -3"},
		{"sent_ns 0", `{"type":"renewed","key":"k","token":"t","sent_ns":0}`, RuleRange, "sent_ns 0"},
		{"a code past three digits", `{"type":"error","in_reply_to":2,"code":1000}`, RuleRange, "code 1000"},
		{"in_reply_to 0", `{"type":"error","in_reply_to":0,"code":40}`, RuleRange, "in_reply_to 0"},
		{"an integer past int64", `{"type":"acquire_ok","in_reply_to":2,"token":"t","ttl_ms":18446744073709551616}`, RuleJSON, "ttl_ms"},
		{"deleted as 1", `{"type":"release_ok","in_reply_to":2,"deleted":1}`, RuleJSON, "deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, v := parse("c0", c.line)
			if c.rule == "" {
				assert.Nil(t, v)
				return
			}
			require.NotNil(t, v)
			assert.Equal(t, c.rule, v.Rule)
			assert.Contains(t, v.Detail, c.detail)
		})
	}
}
