// Package resource is the protected resource of lockcheck's workloads:
// what a client does to it (Resource), and the default one, an in-memory
// store of one counter per key (Store) that keeps a serial log of every
// write it accepted or refused. That log is the ground truth the resource
// check reads. The harness serves the store on loopback (Server) and each
// worker process reaches it over HTTP (Client); in one process the store
// itself is the Resource.
package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"

	"github.com/lockcheck/lockcheck/history"
)

// Memory is the in-memory resource's name in --resource and results: the
// default.
const Memory = "memory"

// Resource is the protected resource as a client uses it. Every error
// leaves the outcome of the request unknown.
type Resource interface {
	// Read reads a key's value on behalf of a fence holder.
	Read(ctx context.Context, r ReadRequest) (ReadReply, error)
	// Write writes a value computed from a read, holding a fence; the
	// resource may refuse it.
	Write(ctx context.Context, r WriteRequest) (WriteReply, error)
	// NextFence draws the next number of a key's strictly increasing
	// sequence.
	NextFence(ctx context.Context, r FenceRequest) (FenceReply, error)
}

var (
	_ Resource = (*Store)(nil)
	_ Resource = (*Client)(nil)
)

// Store is the in-memory resource. In fenced mode it refuses a write whose
// fence is stale.
type Store struct {
	fenced bool

	mu   sync.Mutex
	keys map[string]*cell
	seq  int64
	log  *json.Encoder
	err  error
	// failed is closed at the first write to the log that fails.
	failed chan struct{}
}

// NewStore returns an empty store that logs every write to log, one
// history.ResourceEntry per line.
func NewStore(log io.Writer, fenced bool) *Store {
	return &Store{fenced: fenced, keys: map[string]*cell{}, log: json.NewEncoder(log), failed: make(chan struct{})}
}

// Err is the first error writing the log, if any.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Failed is closed when a write to the log failed; Err says why.
func (s *Store) Failed() <-chan struct{} { return s.failed }

// errNotLogged answers a write the log could not record: it was not
// applied, since a write absent from the log never happened.
var errNotLogged = errors.New("the resource could not log the write, so it did not apply it")

// Server serves a Store on loopback to the worker processes.
type Server struct {
	*Store
	file io.WriteCloser
	ln   net.Listener
	srv  *http.Server
}

// cell is one key's state. In fenced mode a write is refused when its fence
// is at or below the highest fence already written, or below the highest
// fence a read has shown: a client whose read carried a newer fence is about
// to write, and a stale writer must not slip in between that read and write.
type cell struct {
	value          int64
	highestWritten *int64
	highestRead    *int64
	// lastFence is the last number of the key's fence sequence handed out.
	lastFence int64
}

// ReadRequest reads a key's value on behalf of a fence holder.
type ReadRequest struct {
	Key   string `json:"key"`
	Fence *int64 `json:"fence,omitempty"`
}

// ReadReply is the value read.
type ReadReply struct {
	Value int64 `json:"value"`
}

// WriteRequest writes Value, computed from Read, holding Fence.
type WriteRequest struct {
	Key     string          `json:"key"`
	Process history.Process `json:"process"`
	Req     string          `json:"req"`
	Fence   *int64          `json:"fence,omitempty"`
	Read    int64           `json:"read"`
	Value   int64           `json:"value"`
}

// FenceRequest asks for the next fence of a key's sequence.
type FenceRequest struct {
	Key string `json:"key"`
}

// FenceReply is the fence handed out: above every fence handed out before
// for the key.
type FenceReply struct {
	Fence int64 `json:"fence"`
}

// WriteReply says whether the write landed and what it replaced.
type WriteReply struct {
	Accepted bool   `json:"accepted"`
	Prev     int64  `json:"prev"`
	Reason   string `json:"reason,omitempty"`
}

// Start serves the resource on a free loopback port, logging to logPath.
func Start(logPath string, fenced bool) (*Server, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return Serve(f, fenced)
}

// Serve serves the resource on a free loopback port, logging to log, which
// it closes on Close. Tests pass a log that fails, as a full disk does.
func Serve(log io.WriteCloser, fenced bool) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("resource: %w", err)
	}
	s := &Server{Store: NewStore(log, fenced), file: log, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /read", handle(s.Read))
	mux.HandleFunc("POST /write", handle(s.Write))
	mux.HandleFunc("POST /next-fence", handle(s.NextFence))
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed on Close
	return s, nil
}

// Addr is the host:port clients reach the resource at.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving and closes the log. It returns the first log write
// error, if any.
func (s *Server) Close() error {
	s.srv.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cerr := s.file.Close(); s.err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		s.err = cerr
	}
	return s.err
}

// Rotate logs every later write to log instead of the log so far, which
// it closes: a soak's next segment. A failed log stays failed: Rotate then
// returns its error and closes log.
func (s *Server) Rotate(log io.WriteCloser) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		log.Close()
		return s.err
	}
	if err := s.file.Close(); err != nil {
		log.Close()
		s.err = err
		close(s.failed)
		return err
	}
	s.file, s.log = log, json.NewEncoder(log)
	return nil
}

// Heads is each key's value and highest written fence, in key order: what
// a soak's next segment starts from (history.SegmentHead).
func (s *Store) Heads() []history.KeyHead {
	s.mu.Lock()
	defer s.mu.Unlock()
	heads := make([]history.KeyHead, 0, len(s.keys))
	for _, key := range slices.Sorted(maps.Keys(s.keys)) {
		c := s.keys[key]
		h := history.KeyHead{Key: key, Value: history.Int64(c.value)}
		if c.highestWritten != nil {
			h.WrittenFence = history.Int64(*c.highestWritten)
		}
		heads = append(heads, h)
	}
	return heads
}

func (s *Store) cell(key string) *cell {
	c, ok := s.keys[key]
	if !ok {
		c = &cell{}
		s.keys[key] = c
	}
	return c
}

// Read returns a key's value and, in fenced mode, remembers the reader's fence.
func (s *Store) Read(_ context.Context, r ReadRequest) (ReadReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cell(r.Key)
	if s.fenced && r.Fence != nil && (c.highestRead == nil || *r.Fence > *c.highestRead) {
		c.highestRead = history.Int64(*r.Fence)
	}
	return ReadReply{Value: c.value}, nil
}

// NextFence hands out the next number of key's strictly increasing
// sequence: the database-sequence fence, which does not depend on the lock
// service keeping anything.
func (s *Store) NextFence(_ context.Context, r FenceRequest) (FenceReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cell(r.Key)
	c.lastFence++
	return FenceReply{Fence: c.lastFence}, nil
}

// Write logs a write as accepted or refused and then applies it. The log
// comes first: once it cannot be written, no write is applied any more
// (the client sees an error, an unknown outcome), so the log stays the
// whole truth of what the resource holds.
func (s *Store) Write(_ context.Context, r WriteRequest) (WriteReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return WriteReply{}, errNotLogged
	}
	c := s.cell(r.Key)
	reply := WriteReply{Accepted: true, Prev: c.value}
	if s.fenced {
		reply.Reason = c.refusal(r.Fence)
		reply.Accepted = reply.Reason == ""
	}
	s.seq++
	entry := history.ResourceEntry{
		Seq: s.seq, Time: history.Now(), Key: r.Key, Process: r.Process, Req: r.Req,
		Fence: r.Fence, Read: r.Read, Value: r.Value, Prev: reply.Prev,
		Accepted: reply.Accepted, Reason: reply.Reason,
	}
	if err := s.log.Encode(entry); err != nil {
		s.err = err
		close(s.failed)
		return WriteReply{}, errNotLogged
	}
	if reply.Accepted {
		c.value = r.Value
		if r.Fence != nil && (c.highestWritten == nil || *r.Fence > *c.highestWritten) {
			c.highestWritten = history.Int64(*r.Fence)
		}
	}
	return reply, nil
}

func (c *cell) refusal(fence *int64) string {
	switch {
	case fence == nil:
		return "no fence"
	case c.highestWritten != nil && *fence <= *c.highestWritten:
		return fmt.Sprintf("fence %d is not above the highest written fence %d", *fence, *c.highestWritten)
	case c.highestRead != nil && *fence < *c.highestRead:
		return fmt.Sprintf("fence %d is below fence %d already shown by a read", *fence, *c.highestRead)
	}
	return ""
}

// handle serves one kind of request of the store.
func handle[Req, Reply any](do func(context.Context, Req) (Reply, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reply, err := do(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, reply)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client sees a broken reply as an unknown outcome
}
