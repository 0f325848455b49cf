package checker

import (
	"errors"
	"io"
	"iter"
	"os"

	"github.com/lockcheck/lockcheck/history"
)

// CheckFile checks the history file at path as Check does, reading it one
// event at a time and settling what it read as it goes (settle.go): memory
// follows the number of clients and keys, not the length of the history.
// The history is refused exactly as history.ReadFile refuses it, with a
// *history.ParseError naming path.
func CheckFile(path string, resource []history.ResourceEntry, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	return checkSettling(func(settle bool) (*Result, bool, error) {
		return checkFile(path, sliceSource(resource), opts, settle)
	})
}

// CheckFiles is CheckFile with the resource log read from resourcePath as
// the scan goes ("" or a missing file: the run has none). Result.Truncated
// says whether each file's last line was cut off.
func CheckFiles(historyPath, resourcePath string, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	var resourceTruncated bool
	r, err := checkSettling(func(settle bool) (*Result, bool, error) {
		source, stop, err := resourceFile(resourcePath, &resourceTruncated)
		if err != nil {
			return nil, false, err
		}
		defer stop()
		return checkFile(historyPath, source, opts, settle)
	})
	if r != nil {
		r.Truncated.Resource = resourceTruncated
	}
	return r, err
}

// checkFile checks the history at path with the resource log source; it
// also says whether the history went back past a settled stretch.
func checkFile(path string, source resourceSource, opts Options, settle bool) (*Result, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	r, reordered, err := checkStream(f, source, opts, settle)
	if pe := (*history.ParseError)(nil); errors.As(err, &pe) {
		pe.File = path
	}
	return r, reordered, err
}

// resourceFile streams the resource log at path as a source; a missing
// file (or "") is a run with no resource log. stop ends the reading; after
// the last entry *truncated says whether the last line was cut off.
func resourceFile(path string, truncated *bool) (resourceSource, func(), error) {
	if path == "" {
		return nil, func() {}, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var readErr error
	next, stop := iter.Pull(func(yield func(*history.ResourceEntry) bool) {
		*truncated, readErr = history.StreamResource(f, func(e *history.ResourceEntry) error {
			if !yield(e) {
				return errStopped
			}
			return nil
		})
	})
	source := func() (*history.ResourceEntry, error) {
		if e, ok := next(); ok {
			return e, nil
		}
		if pe := (*history.ParseError)(nil); errors.As(readErr, &pe) {
			pe.File = path
		}
		return nil, readErr
	}
	return source, func() { stop(); f.Close() }, nil
}

// errStopped ends a resource log's reading that nobody needs any more.
var errStopped = errors.New("stopped")

// CheckStream is CheckFile for a history read from r. A reader cannot be
// read twice, so it settles nothing before the end: its memory follows the
// length of the history.
func CheckStream(r io.Reader, resource []history.ResourceEntry, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	res, _, err := checkStream(r, sliceSource(resource), opts, false)
	return res, err
}

// checkStream checks the history read from r.
func checkStream(r io.Reader, source resourceSource, opts Options, settle bool) (*Result, bool, error) {
	var s *scanner
	truncated, err := history.Stream(r, func(h history.Header) error {
		s = newScanner(h, opts, source)
		if !settle {
			s.settleAt = 0
		}
		return nil
	}, func(e *history.Event) error {
		s.event(e)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return s.concluded(truncated)
}
