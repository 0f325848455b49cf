package checker

import (
	"errors"
	"io"
	"os"

	"github.com/lockcheck/lockcheck/history"
)

// CheckFile checks the history file at path as Check does, reading it one
// event at a time: the events themselves are never held in memory, only
// what the checks keep of them. The history is refused exactly as
// history.ReadFile refuses it, with a *history.ParseError naming path.
func CheckFile(path string, resource []history.ResourceEntry, opts Options) (*Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := CheckStream(f, resource, opts)
	if pe := (*history.ParseError)(nil); errors.As(err, &pe) {
		pe.File = path
	}
	return r, err
}

// CheckStream is CheckFile for a history read from r.
func CheckStream(r io.Reader, resource []history.ResourceEntry, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	var (
		hd history.Header
		s  *scanner
	)
	truncated, err := history.Stream(r, func(h history.Header) error {
		hd, s = h, newScanner(h, opts.ClockAllowance)
		return nil
	}, func(e *history.Event) error {
		s.event(e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return checkScanned(hd, truncated, s.finish(), resource, opts), nil
}
