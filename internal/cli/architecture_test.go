package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/architecture.md's table of commands names every command the root
// registers and every subcommand of theirs, so the map cannot fall behind
// the command line again.
func TestArchitectureNamesEveryCommand(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	text := string(doc)
	section := text[strings.Index(text, "\n## Commands\n"):]
	var walk func(prefix string, cmd *cobra.Command)
	walk = func(prefix string, cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			name := strings.TrimSpace(prefix + " " + sub.Name())
			if prefix == "" {
				assert.Contains(t, section, "| `"+sub.Name()+"`", "docs/architecture.md's commands do not name %q: add a row", name)
			} else {
				assert.Contains(t, section, "`"+sub.Name()+"`", "docs/architecture.md's commands do not name %q: add it to its parent's row", name)
			}
			walk(name, sub)
		}
	}
	walk("", newRootCmd())
}
