package program

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitCommand(t *testing.T) {
	good := []struct {
		in   string
		want []string
	}{
		{"python3 my_lock.py", []string{"python3", "my_lock.py"}},
		{"  python3   -u  lock.py  ", []string{"python3", "-u", "lock.py"}},
		{`"/opt/my tools/lock" --name 'a b'`, []string{"/opt/my tools/lock", "--name", "a b"}},
		{`perl -e 'print "$x\n"'`, []string{"perl", "-e", `print "$x\n"`}},
		{`a\ b "c\"d" "e\f" ''`, []string{"a b", `c"d`, `e\f`, ""}},
		{`sh -c "exec x 2>/dev/null"`, []string{"sh", "-c", "exec x 2>/dev/null"}},
	}
	for _, c := range good {
		got, err := SplitCommand(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
		back, err := SplitCommand(JoinCommand(got))
		require.NoError(t, err)
		assert.Equal(t, c.want, back, "JoinCommand(%q) reads back", got)
	}
	for _, bad := range []string{`python3 'lock.py`, `python3 "lock.py`, `python3 lock.py\`} {
		_, err := SplitCommand(bad)
		assert.Error(t, err, bad)
	}
}
