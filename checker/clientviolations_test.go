package checker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/history"
)

// violation is a client-violation event of c1 at ms.
func violation(b *builder, ms float64, rule, detail string) *builder {
	return b.Add(ms, history.Nemesis, history.Info, history.NemClientViolation,
		&history.Value{Target: "c1", Rule: rule, Detail: detail})
}

// A client-violation event makes a verdict that would pass unknown, with
// the rule named in the reason and listed in the result; a safety failure
// still fails; a history without one is judged as before.
func TestClientViolationMakesTheVerdictUnknown(t *testing.T) {
	const end = 200
	const rule = "a reply answers the one request outstanding (in_reply_to = its msg_id)"
	tests := []struct {
		name    string
		b       func() *builder
		verdict Validity
		reason  []string
		count   int
	}{
		{
			name:    "no violation passes",
			b:       func() *builder { return chain(newBuilder("fenced"), 3).Nemesis(end, history.NemRunEnd, "", "", "") },
			verdict: Valid,
		},
		{
			name: "a duplicate reply is unknown",
			b: func() *builder {
				return violation(chain(newBuilder("fenced"), 3), 15, rule, "client c1: release_ok in reply to 3, which is no request outstanding").
					Nemesis(end, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			reason:  []string{"broke the client protocol 1 time", "first c1 at", "(rule: " + rule + ")", "release_ok in reply to 3"},
			count:   1,
		},
		{
			name: "every rule broken is named",
			b: func() *builder {
				b := violation(chain(newBuilder("fenced"), 3), 15, rule, "dup")
				b = violation(b, 16, rule, "dup again")
				return violation(b, 17, "every number is within its field's range", "ttl_ms 9223372036854775807").
					Nemesis(end, history.NemRunEnd, "", "", "")
			},
			verdict: Unknown,
			reason:  []string{"3 times", "also broken: every number is within its field's range;"},
			count:   3,
		},
		{
			name: "a violation in a hand-written history counts too",
			b: func() *builder {
				return violation(chain(newBuilder("fenced"), 3), 15, "", "something")
			},
			verdict: Unknown,
			reason:  []string{"(rule: unnamed)"},
			count:   1,
		},
		{
			name: "a safety failure with a violation is false",
			b: func() *builder {
				return violation(pausedHolder("unfenced"), 10, rule, "dup").Nemesis(end+200, history.NemRunEnd, "", "", "")
			},
			verdict: Invalid,
			reason:  []string{"(rule: " + rule + ")"},
			count:   1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := check(t, tt.b())
			assert.Equal(t, tt.verdict, r.Valid, r.Reason)
			require.Len(t, r.ClientViolations, tt.count)
			assert.Equal(t, tt.count, r.ClientViolationCount)
			for _, s := range tt.reason {
				assert.Contains(t, r.Reason, s)
			}
			if tt.count > 0 {
				v := r.ClientViolations[0]
				assert.Equal(t, "c1", v.Client)
				assert.Contains(t, v.Line(r.Span.Start), "(rule: ")
			}
		})
	}
}

// The summary's and the report's lines name the first breaks and count the
// rest; the list keeps the first maxEvidence and the count all of them.
func TestClientViolationLinesAreBounded(t *testing.T) {
	b := chain(newBuilder("fenced"), 3)
	for i := range maxEvidence + 5 {
		violation(b, 15+float64(i)/1000, "a rule", fmt.Sprintf("break %d", i))
	}
	r := check(t, b.Nemesis(2000, history.NemRunEnd, "", "", ""))
	assert.Equal(t, Unknown, r.Valid)
	assert.Len(t, r.ClientViolations, maxEvidence)
	assert.Equal(t, maxEvidence+5, r.ClientViolationCount)
	assert.Contains(t, r.Reason, fmt.Sprintf("broke the client protocol %d times", maxEvidence+5))
	lines := ClientViolationLines(r, r.Span.Start, 3)
	require.Len(t, lines, 4)
	assert.Contains(t, lines[0], "c1 at ")
	assert.Contains(t, lines[0], "break 0 (rule: a rule)")
	assert.Equal(t, fmt.Sprintf("%d more (results.json client_violations)", maxEvidence+2), lines[3])
	assert.Empty(t, ClientViolationLines(check(t, chain(newBuilder("fenced"), 3)), 0, 3))
}
