package cli

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// A run that stops at its first anomaly ends long before its time limit,
// healed and not interrupted, and its verdict and counts are those of
// lockcheck check of its directory.
func TestStopOnAnomaly(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	inv, res, dir := runLockcheck(t, "--workload", "unfenced", "--nemesis", "pause-holder", "--ttl", "500ms",
		"--time-limit", "60s", "--stop-on-anomaly")
	assert.Equal(t, exitInvalid, inv.code, inv.stdout)
	require.NotNil(t, res.FirstAnomalyMs, "a run with an anomaly says when the first came")
	assert.False(t, res.Interrupted, "stopping at an anomaly ends the run as its time limit does")
	h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
	require.NoError(t, err)
	last := h.Events[len(h.Events)-1]
	assert.Equal(t, history.NemRunEnd, last.F)
	assert.Less(t, time.Duration(last.Time-h.Events[0].Time), 60*time.Second, "the run stopped before its time limit")

	res2 := assertCheckAgrees(t, dir, res, exitInvalid)
	assert.Equal(t, res.FirstAnomalyMs, res2.FirstAnomalyMs)
	assert.Equal(t, checker.Invalid, res2.Valid)
}

func TestAnomalyLine(t *testing.T) {
	assert.Equal(t, "anomalies 0", anomalyLine(nil))
	assert.Equal(t, "anomalies: double_ownership 5, resource 2",
		anomalyLine([]checker.CheckAnomalies{{Key: "double_ownership", Count: 5}, {Key: "resource", Count: 2}}))
}
