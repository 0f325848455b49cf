package backends

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/lockcheck/lockcheck/history"
)

// Each change of leader is recorded once: the new leader with its reign and
// the one it replaced as a follower; a failed question records nothing.
func TestWatchLeaderRecordsEachChange(t *testing.T) {
	answers := []struct {
		name, reign string
		err         error
	}{
		{"n1", "term 2", nil},
		{"n1", "term 2", nil},
		{"", "", errors.New("no quorum")},
		{"n2", "term 3", nil},
		{"n2", "term 4", nil},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	i := 0
	var got []string
	err := WatchLeader(ctx, time.Millisecond, func(context.Context) (string, string, error) {
		a := answers[i]
		if i++; i == len(answers) {
			cancel()
		}
		return a.name, a.reign, a.err
	}, func(verb string, v history.Value) { got = append(got, verb+" "+v.Target+" "+v.Detail) })
	assert.NoError(t, err)
	assert.Equal(t, []string{
		"role n1 leader (term 2)",
		"role n1 follower",
		"role n2 leader (term 3)",
		"role n2 leader (term 4)",
	}, got)
}
