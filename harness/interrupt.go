package harness

import (
	"context"
	"errors"
	"strings"

	"github.com/lockcheck/lockcheck/backends"
)

// StartInterrupted is what Run returns when its context ended (Ctrl-C)
// while it was starting the lock service: the run never began, and that
// is all there is to say. Whatever failed because of the interruption (a
// server that could not answer in time, a Docker request cut off) is not
// the story and is not reported.
type StartInterrupted struct {
	What string // the node, nodes or topology being started
}

func (e *StartInterrupted) Error() string { return "interrupted while starting " + e.What }

// interrupted turns err into StartInterrupted when ctx ended: a start-up
// step that failed after Ctrl-C failed because of it. One that already
// names the node it was starting is kept.
func interrupted(ctx context.Context, err error, what string) error {
	var si *StartInterrupted
	switch {
	case errors.As(err, &si):
		return si
	case err != nil && ctx.Err() != nil:
		return &StartInterrupted{What: what}
	}
	return err
}

// nodeNames names the nodes a topology starts, for StartInterrupted.
func nodeNames(specs []backends.NodeSpec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}
