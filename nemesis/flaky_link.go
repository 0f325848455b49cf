package nemesis

import (
	"context"
	"fmt"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "flaky-link", Inject: FlakyLink, Needs: []Capability{CapShape},
		Params: []string{ParamResetShare},
		Help:   "reset --reset-share of the connections on the links of one target, open and new, for --pause: the Sentinel master's or the etcd leader's links, else one client's links to every node"})
}

// FlakyLink resets a share of the connections on every link of one
// target, those open and each new one, for env.Pause: a reply lost with
// its connection leaves an operation's outcome unknown. It lands when the
// links stayed flaky for the whole pause.
func FlakyLink(ctx context.Context, env *Env) (Landing, error) {
	share := env.Settings.Links.Reset
	return shapeLinks(ctx, env, LinkRule{Reset: share}, history.NemFlakyLink, history.NemFlakyLinkEnd,
		fmt.Sprintf("%.0f%% of connections reset", share*100))
}
