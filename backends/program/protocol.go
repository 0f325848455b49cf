package program

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Version is the version of the client protocol (docs/clients.md) this
// package speaks: init carries it.
const Version = 1

// Message types of the protocol.
const (
	TypeInit         = "init"
	TypeAcquire      = "acquire"
	TypeRelease      = "release"
	TypeExtend       = "extend"
	TypeInspect      = "inspect"
	TypeError        = "error"
	TypeFailpoint    = "failpoint"
	TypeFailpointOK  = "failpoint_ok"
	TypeRenewed      = "renewed"
	TypeLost         = "lost"
	replySuffix      = "_ok"
	maxLine          = 1 << 20 // a longer stdout line breaks RuleJSON
	lineInViolations = 120     // how much of a bad line a violation quotes
)

// Error codes of the protocol (Maelstrom's where one exists). Every code
// not listed as definite is indefinite.
const (
	CodeTimeout      = 0
	CodeNotSupported = 10
	CodeUnavailable  = 11
	CodeMalformed    = 12
	CodeCrash        = 13
	CodeAbort        = 14
	CodeLockHeld     = 40
	// CodeNotSent is lockcheck's own: the client refused the request
	// itself and sent nothing to the service (not connected).
	CodeNotSent = 41
)

// Definite says whether an error code means the operation certainly did
// not take effect.
func Definite(code int) bool {
	switch code {
	case CodeNotSupported, CodeUnavailable, CodeMalformed, CodeAbort, CodeLockHeld, CodeNotSent:
		return true
	}
	return false
}

// The rules a client can break, as a violation names them (docs/clients.md
// lists them with what lockcheck does on each).
const (
	RuleStart  = "the command starts"
	RuleInit   = "init is answered by init_ok within the init timeout"
	RuleJSON   = "every stdout line is one JSON object (at most 1 MiB)"
	RuleType   = "type is a message of the protocol"
	RuleReply  = "a reply answers the one request outstanding (in_reply_to = its msg_id)"
	RuleField  = "a message carries its required fields with their types"
	RuleExit   = "the client runs until its stdin closes"
	RuleEOF    = "the client exits 0 within 1 s of its stdin closing"
	RuleStderr = "stderr stays a log (lockcheck keeps its first and last MiB)"
	RuleTime   = "a request is answered within timeout_ms"
	RuleUTF8   = "every stdout line is valid UTF-8"
	RuleRange  = "every number is within its field's range"
	RuleAimed  = "failpoint is sent only for a name init aimed at"
)

// Violation is a client breaking a rule of the protocol: one line naming
// the slot, the line (cut) and the rule.
type Violation struct {
	Slot string
	Line string // the offending line, cut; empty when no line is at fault
	Rule string
	// Detail says what exactly was wrong.
	Detail string
}

func (v *Violation) Error() string { return v.What() + " (rule: " + v.Rule + "; docs/clients.md)" }

// What is the violation without its rule: the slot, what was wrong, the
// line.
func (v *Violation) What() string { return "client " + v.Slot + ": " + v.Said() }

// Said is what was wrong and the line, without the slot: a history event
// names its client already.
func (v *Violation) Said() string {
	if v.Line == "" {
		return v.Detail
	}
	return fmt.Sprintf("%s in line %q", v.Detail, v.Line)
}

// cut shortens a line for a violation.
func cut(line string) string {
	if len(line) <= lineInViolations {
		return line
	}
	return line[:lineInViolations] + "…"
}

// NodeAddr is one node lockcheck started, as init names it.
type NodeAddr struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
}

// initMsg is lockcheck's first message.
type initMsg struct {
	Type       string            `json:"type"`
	MsgID      int64             `json:"msg_id"`
	Protocol   int               `json:"protocol"`
	Client     string            `json:"client"`
	Process    int               `json:"process"`
	Backend    string            `json:"backend"`
	Topology   string            `json:"topology"`
	Addrs      []string          `json:"addrs"`
	Nodes      []NodeAddr        `json:"nodes"`
	KeyPrefix  string            `json:"key_prefix"`
	TTLms      int64             `json:"ttl_ms"`
	TimeoutMs  int64             `json:"timeout_ms"`
	Failpoints []string          `json:"failpoints"`
	Settings   map[string]string `json:"settings"`
}

// request is every other message lockcheck sends.
type request struct {
	Type      string `json:"type"`
	MsgID     int64  `json:"msg_id,omitempty"`
	InReplyTo int64  `json:"in_reply_to,omitempty"`
	Key       string `json:"key,omitempty"`
	Token     string `json:"token,omitempty"`
}

// Supports is what init_ok says the client does beyond acquire and release.
type Supports struct {
	Extend  bool `json:"extend"`
	Inspect bool `json:"inspect"`
	Fence   bool `json:"fence"`
}

// Declaration is what a client says of itself in init_ok.
type Declaration struct {
	Library    string   `json:"library"`
	Version    string   `json:"version"`
	Supports   Supports `json:"supports"`
	Failpoints []string `json:"failpoints,omitempty"`
}

// message is any line a client writes; which fields must be set depends on
// its type (check).
type message struct {
	Type      string    `json:"type"`
	MsgID     *int64    `json:"msg_id"`
	InReplyTo *int64    `json:"in_reply_to"`
	Library   *string   `json:"library"`
	Version   *string   `json:"version"`
	Supports  *Supports `json:"supports"`
	FPs       []string  `json:"failpoints"`
	Token     *string   `json:"token"`
	TTLms     *int64    `json:"ttl_ms"`
	Fence     *int64    `json:"fence"`
	Deleted   *bool     `json:"deleted"`
	Extended  *bool     `json:"extended"`
	State     *string   `json:"state"`
	Code      *int      `json:"code"`
	Text      string    `json:"text"`
	Key       *string   `json:"key"`
	Name      *string   `json:"name"`
	Why       string    `json:"why"`
	// SentNs is, in a renewed, when the library sent the renewal to the
	// service (CLOCK_MONOTONIC ns): where its extend can begin.
	SentNs *int64 `json:"sent_ns"`

	// lost is, in an acquire_ok, its grant's Lost channel (Lock.granted).
	lost chan struct{}
}

// required lists, per type a client sends, the fields it must carry.
var required = map[string][]string{
	TypeInit + replySuffix:    {"in_reply_to", "library", "version"},
	TypeAcquire + replySuffix: {"in_reply_to", "token"},
	TypeRelease + replySuffix: {"in_reply_to", "deleted"},
	TypeExtend + replySuffix:  {"in_reply_to", "extended"},
	TypeInspect + replySuffix: {"in_reply_to", "state"},
	TypeError:                 {"in_reply_to", "code"},
	TypeFailpoint:             {"msg_id", "name"},
	TypeRenewed:               {"key", "token"},
	TypeLost:                  {"key", "token"},
}

// MaxLeaseMs is the longest lease a client may report (ttl_ms of
// acquire_ok, extend_ok and renewed): a day. A test run is minutes long; a
// longer lease is a unit mistake (seconds sent as ms, ns as ms), and one
// much longer overflows a time.Duration.
const MaxLeaseMs = 24 * 60 * 60 * 1000

// maxCode bounds an error code: the protocol's are two digits, and a code
// past it is a garbled number, not a code.
const maxCode = 999

// fieldRange is the range of each integer field a client sends, both ends
// included (docs/clients.md lists them): a number outside it is a line
// that breaks RuleRange, never a value lockcheck takes as it comes.
var fieldRange = []struct {
	name     string
	get      func(message) *int64
	min, max int64
	what     string
}{
	{"msg_id", func(m message) *int64 { return m.MsgID }, 0, math.MaxInt64, "a non-negative integer"},
	{"in_reply_to", func(m message) *int64 { return m.InReplyTo }, 1, math.MaxInt64, "a msg_id of lockcheck's"},
	{"ttl_ms", func(m message) *int64 { return m.TTLms }, 0, MaxLeaseMs, "a lease of at most a day"},
	{"fence", func(m message) *int64 { return m.Fence }, 0, math.MaxInt64, "a non-negative integer"},
	{"sent_ns", func(m message) *int64 { return m.SentNs }, 1, math.MaxInt64, "a CLOCK_MONOTONIC time"},
	{"code", func(m message) *int64 {
		if m.Code == nil {
			return nil
		}
		c := int64(*m.Code)
		return &c
	}, 0, maxCode, "an error code"},
}

// parse reads one line of a client and checks it against RuleUTF8,
// RuleJSON, RuleType, RuleField and RuleRange.
func parse(slot, line string) (message, *Violation) {
	var m message
	// Before decoding: encoding/json turns invalid bytes into U+FFFD, and
	// lockcheck would then send back a token the program never sent.
	if !utf8.ValidString(line) {
		return m, &Violation{Slot: slot, Line: cut(strings.ToValidUTF8(line, "\ufffd")), Rule: RuleUTF8, Detail: "a line that is not valid UTF-8"}
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return m, &Violation{Slot: slot, Line: cut(line), Rule: RuleJSON, Detail: "not a JSON object of the protocol: " + err.Error()}
	}
	fields, ok := required[m.Type]
	if !ok {
		return m, &Violation{Slot: slot, Line: cut(line), Rule: RuleType, Detail: fmt.Sprintf("unknown message type %q", m.Type)}
	}
	for _, f := range fields {
		if !m.has(f) {
			return m, &Violation{Slot: slot, Line: cut(line), Rule: RuleField, Detail: fmt.Sprintf("%s without %s", m.Type, f)}
		}
	}
	for _, r := range fieldRange {
		if v := r.get(m); v != nil && (*v < r.min || *v > r.max) {
			return m, &Violation{Slot: slot, Line: cut(line), Rule: RuleRange,
				Detail: fmt.Sprintf("%s %d is out of its range %d..%d (%s)", r.name, *v, r.min, r.max, r.what)}
		}
	}
	if s, bad := m.replacedString(line); bad {
		return m, &Violation{Slot: slot, Line: cut(line), Rule: RuleUTF8, Detail: fmt.Sprintf("string %q holds an escape that is no UTF-16 (a lone surrogate)", s)}
	}
	return m, nil
}

// replacedString finds a string the decoder changed: a \u escape of a lone
// surrogate decodes to U+FFFD, which the line itself does not hold.
func (m message) replacedString(line string) (string, bool) {
	if !strings.Contains(strings.ToLower(line), `\ud`) {
		return "", false
	}
	if strings.ContainsRune(line, utf8.RuneError) || strings.Contains(strings.ToLower(line), `\ufffd`) {
		return "", false // the program sent U+FFFD itself: nothing to tell apart
	}
	for _, s := range []*string{m.Token, m.Key, m.Name, m.Library, m.Version, m.State} {
		if s != nil && strings.ContainsRune(*s, utf8.RuneError) {
			return *s, true
		}
	}
	for _, s := range []string{m.Text, m.Why} {
		if strings.ContainsRune(s, utf8.RuneError) {
			return s, true
		}
	}
	return "", false
}

func (m message) has(field string) bool {
	switch field {
	case "in_reply_to":
		return m.InReplyTo != nil
	case "msg_id":
		return m.MsgID != nil
	case "library":
		return m.Library != nil
	case "version":
		return m.Version != nil
	case "token":
		return m.Token != nil && *m.Token != ""
	case "deleted":
		return m.Deleted != nil
	case "extended":
		return m.Extended != nil
	case "state":
		return m.State != nil
	case "code":
		return m.Code != nil
	case "key":
		return m.Key != nil
	case "name":
		return m.Name != nil
	}
	return false
}

// isReply says whether the message answers a request.
func (m message) isReply() bool { return m.Type == TypeError || strings.HasSuffix(m.Type, replySuffix) }
