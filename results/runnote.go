package results

import "github.com/lockcheck/lockcheck/checker"

// runNote says, in one sentence, that a run did not finish as asked: it
// was interrupted, or its history has no end. The summary, junit.xml, the
// report, the index and compare all show it, so that no reader of any of
// them mistakes a cut-short run for a finished one. It is "" for a run
// that finished.
func runNote(interrupted, incomplete bool, by string) string {
	switch {
	case interrupted && by != "":
		return "This run was interrupted before its time limit (" + by + "): the verdict covers only what was recorded."
	case interrupted:
		return "This run was interrupted before its time limit: the verdict covers only what was recorded."
	case incomplete:
		return "This run is incomplete: its history ends without a run-end event (its recorder was killed or could not write); the verdict covers only what was recorded."
	}
	return ""
}

// resultNote is runNote of a check's result.
func resultNote(res *checker.Result) string {
	return runNote(res.Interrupted, res.Incomplete, res.InterruptedBy)
}
