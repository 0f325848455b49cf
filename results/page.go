package results

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
)

//go:embed report.js
var reportScriptText string

// reportScript is the report's only script, inlined: a report is one file
// that opens anywhere, with no network.
var reportScript = template.JS(reportScriptText)

// contentPolicy is the Content-Security-Policy of a page whose only script
// is script: nothing is loaded from anywhere, and the browser runs no
// script but that one, by its hash. Should a string from a history ever slip
// past html/template's escaping, its markup still cannot run.
func contentPolicy(script string) string {
	p := "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
	if script == "" {
		return p + "; script-src 'none'"
	}
	sum := sha256.Sum256([]byte(script))
	return p + "; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}
