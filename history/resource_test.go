package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResourceLogToleratesACutLastLine: a run killed mid-write, or whose
// disk filled up, leaves half a line at the end; a bad line before the end
// is still an error.
func TestResourceLogToleratesACutLastLine(t *testing.T) {
	const good = `{"seq":1,"time":5,"key":"k","process":0,"req":"0-1","read":0,"value":1,"prev":0,"accepted":true}` + "\n"
	tests := []struct {
		name    string
		content string
		entries int
		err     string
	}{
		{"whole", good + good, 2, ""},
		{"cut last line", good + good[:30], 1, ""},
		{"last line whole without newline", good + strings.TrimSuffix(good, "\n"), 2, ""},
		{"bad line in the middle", good + "not json\n" + good, 1, "history line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resource.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))
			entries, err := ReadResourceLog(path)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
			} else {
				require.NoError(t, err)
			}
			assert.Len(t, entries, tt.entries)
		})
	}
}
