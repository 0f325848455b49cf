package scenario

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// lineIndex records the line of every field: top-level ones ("ttl"),
// timeline steps ("timeline[2]") and their fields ("timeline[2].target"),
// and nested ones ("expect.counts"); a key of counts, which holds dots
// itself, is "expect.counts[resource.lost_updates]".
func lineIndex(doc *yaml.Node) map[string]int {
	lines := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i]
				p := key.Value
				switch {
				case path == "expect.counts":
					p = path + "[" + key.Value + "]"
				case path != "":
					p = path + "." + key.Value
				}
				lines[p] = key.Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for j, item := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, j)
				lines[p] = item.Line
				walk(item, p)
			}
		}
	}
	if len(doc.Content) > 0 {
		walk(doc.Content[0], "")
	}
	return lines
}

// yamlLine finds the "line N: " a YAML error starts with.
var yamlLine = regexp.MustCompile(`^line (\d+): `)

// yamlError turns a YAML error into one line per problem that names the
// field on its line: "line 7: clients: expected a whole number, got
// \"many\"".
func yamlError(err error, lines map[string]int) string {
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for i, m := range msgs {
		m = strings.ReplaceAll(m, "\n ", "")
		m = typeMismatch.ReplaceAllStringFunc(m, func(x string) string {
			g := typeMismatch.FindStringSubmatch(x)
			got := yamlKinds[g[1]]
			if g[2] != "" || got == "" {
				got = strconv.Quote(g[2])
			}
			want, ok := goTypes[g[3]]
			if !ok {
				want = g[3]
			}
			return "expected " + want + ", got " + got
		})
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			if field := fieldAt(lines, g[1]); field != "" && !strings.Contains(m, "field "+field) {
				m = g[0] + field + ": " + m[len(g[0]):]
			}
		}
		msgs[i] = m
	}
	return strings.Join(msgs, "; ")
}

// typeMismatch is yaml's "cannot unmarshal !!str `many` into int".
var typeMismatch = regexp.MustCompile("cannot unmarshal (!!\\w+)(?: `([^`]*)`)? into ([\\w.\\[\\]*]+)")

// yamlKinds and goTypes say yaml's and Go's type names in words.
var (
	yamlKinds = map[string]string{"!!seq": "a list", "!!map": "a mapping"}
	goTypes   = map[string]string{
		"int": "a whole number", "bool": "true or false", "string": "a text",
		"[]string":          "a list such as [resource, fencing]",
		"map[string]string": "a mapping",
		"[]scenario.Step":   "a list of steps, each with at, do and target",
		"scenario.Step":     "a step with at, do and target",
		"scenario.When":     "a mapping such as {client: c0, reaches: before-write}",
		"scenario.Expect":   "a mapping with verdict, fail, hold and counts",
	}
)

// fieldAt names the field whose key is on line, from lineIndex: the
// outermost one, since a flow collection ("fail: [a, b]") puts its items
// on the same line.
func fieldAt(lines map[string]int, line string) string {
	n, _ := strconv.Atoi(line)
	best := ""
	for field, l := range lines {
		if l == n && !strings.HasSuffix(field, "]") && (best == "" || len(field) < len(best)) {
			best = field
		}
	}
	return lastPart(best)
}
