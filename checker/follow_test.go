package checker

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFollowerReadsWhatIsWritten follows a history written in pieces, cut
// mid-line, and finds the anomalies the check of the whole history finds,
// reading each line once; linearizability only once its segment is cut,
// which a history this short never is before its end.
func TestFollowerReadsWhatIsWritten(t *testing.T) {
	tests := []struct {
		name      string
		b         *builder
		anomalies []CheckAnomalies
	}{
		{"unfenced paused holder", pausedHolder("unfenced").Acquire(2, 400, 401, -1).Release(2, 410, 411), []CheckAnomalies{{Key: "double_ownership", Count: 1}, {Key: "resource", Count: 2}}},
		{"fenced paused holder", pausedHolder("fenced").Acquire(2, 400, 401, 3).Release(2, 410, 411), nil},
	}
	// The histories are a few hundred milliseconds long: settle each point
	// of rest as soon as the scan reads past it (c2's grant, after c0's
	// release).
	slack := settleSlack
	t.Cleanup(func() { settleSlack = slack })
	settleSlack = 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.b.Build(t)
			text := tt.b.JSONL(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "history.jsonl")
			require.NoError(t, os.WriteFile(path, nil, 0o644))
			f, err := NewFollower(path, filepath.Join(dir, "resource.jsonl"), Options{})
			require.NoError(t, err)
			defer f.Close()
			w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			defer w.Close()
			for _, piece := range [][]byte{text[:len(text)/3], text[len(text)/3 : 2*len(text)/3], text[2*len(text)/3:]} {
				_, err := w.Write(piece)
				require.NoError(t, err)
				require.NoError(t, f.Read())
			}
			assert.Equal(t, tt.anomalies, f.Anomalies(h.Header.Config.Fenced()))
			for _, a := range f.Anomalies(h.Header.Config.Fenced()) {
				assert.Contains(t, AnomaliesByCheck(Check(h, nil, Options{}), h.Header.Config.Fenced()), a, "what the whole history shows")
			}
			assert.Equal(t, len(h.Events), f.s.events, "each event read once")
		})
	}
}
