package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// ResourceEntry is one line of resource.jsonl, the protected resource's own
// serial log of every write it accepted or refused. It is ground truth: a
// write whose client timed out still appears here if it landed.
type ResourceEntry struct {
	Seq      int64   `json:"seq"`
	Time     int64   `json:"time"` // CLOCK_MONOTONIC ns when the write was applied or refused
	Key      string  `json:"key"`
	Process  Process `json:"process"`
	Req      string  `json:"req"`
	Fence    *int64  `json:"fence,omitempty"`
	Read     int64   `json:"read"`  // the value the client computed its write from
	Value    int64   `json:"value"` // the value it asked to write
	Prev     int64   `json:"prev"`  // the value the resource held before
	Accepted bool    `json:"accepted"`
	Reason   string  `json:"reason,omitempty"` // why a write was refused
}

// ReadResourceLog reads resource.jsonl. A line cut off by a killed run ends
// the log without an error.
func ReadResourceLog(path string) ([]ResourceEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// An existing log, even an empty one, is ground truth: a write absent
	// from it never happened.
	out := []ResourceEntry{}
	br := bufio.NewReaderSize(f, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return out, err
		}
		complete := err == nil
		if b = bytes.TrimSpace(b); len(b) > 0 {
			var e ResourceEntry
			if jerr := json.Unmarshal(b, &e); jerr != nil {
				if !complete {
					return out, nil // the write the run was killed in, or the disk filled up in
				}
				return out, &ParseError{Line: line, Err: jerr}
			}
			out = append(out, e)
		}
		if !complete {
			return out, nil
		}
	}
}
