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
		return checkFile(path, sliceSource(resource), opts, settle, nil, nil)
	})
}

// CheckFiles is CheckFile with the resource log read from resourcePath as
// the scan goes ("" or a missing file: the run has none). Result.Truncated
// says whether each file's last line was cut off.
func CheckFiles(historyPath, resourcePath string, opts Options) (*Result, error) {
	return CheckFilesAt(historyPath, resourcePath, opts, nil, nil)
}

// CheckFilesAt is CheckFiles that also shows header the history's header
// and visit every event it reads, once, in order, with the offset of its
// line in the history file: what else is read from a history (the
// report's excerpt) is read in the same pass. The event is valid until
// visit returns.
func CheckFilesAt(historyPath, resourcePath string, opts Options, header func(history.Header), visit func(e *history.Event, offset int64)) (*Result, error) {
	opts = opts.withDefaults()
	var resourceTruncated bool
	r, err := checkSettling(func(settle bool) (*Result, bool, error) {
		source, stop, err := resourceFile(resourcePath, &resourceTruncated)
		if err != nil {
			return nil, false, err
		}
		defer stop()
		// The first scan reads the whole history, settling or not: a
		// second (one that went back past a settled stretch) shows visit
		// nothing new.
		r, reordered, err := checkFile(historyPath, source, opts, settle, header, visit)
		header, visit = nil, nil
		return r, reordered, err
	})
	if r != nil {
		r.Truncated.Resource = resourceTruncated
	}
	return r, err
}

// checkFile checks the history at path with the resource log source,
// showing header and visit (when not nil) the header and each event with
// its offset; it also says
// whether the history went back past a settled stretch.
func checkFile(path string, source resourceSource, opts Options, settle bool, header func(history.Header), visit func(*history.Event, int64)) (*Result, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	r, reordered, err := checkStream(f, source, opts, settle, header, visit)
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
		if readErr == nil && *truncated {
			return nil, errLogCut
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
	res, _, err := checkStream(r, sliceSource(resource), opts, false, nil, nil)
	return res, err
}

// checkStream checks the history read from r, showing header and visit
// (when not nil) its header and each event with the offset of its line.
func checkStream(r io.Reader, source resourceSource, opts Options, settle bool, header func(history.Header), visit func(*history.Event, int64)) (*Result, bool, error) {
	var s *scanner
	truncated, err := history.StreamAt(r, func(h history.Header) error {
		if header != nil {
			header(h)
		}
		s = newScanner(h, opts, source)
		if !settle {
			s.settleAt = 0
		}
		return nil
	}, func(e *history.Event, offset int64) error {
		if visit != nil {
			visit(e, offset)
		}
		s.event(e)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return s.concluded(truncated)
}
