package catalog

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/backends/redlock"
)

func init() {
	redlockFlags.Bind = bindRedlockFlags
	Register(fiveMasters("redlock", "correct", func(o redlock.Options) (backends.Lock, error) { return redlock.New(o) }))
}

// redlockFlags are the client settings our Redlock client and redsync share.
// Its Bind is set in init: it applies to the backends that share the set.
var redlockFlags = &Flags{}

// fiveMasters is a backend over Redlock's five independent masters: our own
// Redlock client and redsync share the topology and the settings.
func fiveMasters(name, variant string, open func(redlock.Options) (backends.Lock, error)) Backend {
	return Backend{
		Name:     name,
		Variants: []string{variant},
		Nodes: func(p Programs, _ map[string]string) []backends.NodeSpec {
			return redlock.Nodes(p.Path(redis.Server.Name))
		},
		Service: func(all []backends.Endpoint) any { return redlock.NewService(all) },
		Open: func(s Spec, fp backends.Failpoint) (backends.Lock, error) {
			opts, err := redlockOptions(s, fp)
			if err != nil {
				return nil, err
			}
			return open(opts)
		},
		Fences:    EveryVariant, // INCR on a majority (which a wiped node forgets)
		Programs:  []backends.Program{redis.Server},
		Flags:     redlockFlags,
		Signature: []string{"clock-pause"},
		Diskless:  true,
	}
}

// redlockOptions reads a Redlock client's settings from a spec; redsync
// shares them.
func redlockOptions(s Spec, fp backends.Failpoint) (redlock.Options, error) {
	return redlock.ParseParams(s.Extra, redlock.Options{Client: s.Client(fp), Nodes: redlock.NamedNodes(s.Addrs)})
}

func bindRedlockFlags(fl *pflag.FlagSet) func(*Settings) error {
	nodeTimeout := fl.Duration(redlock.ParamNodeTimeout, 0, "redlock, redsync: time limit of each command on one node, small against the TTL (0: TTL/10); redsync's WithTimeoutFactor")
	drift := fl.Float64(redlock.ParamDriftFactor, redlock.DefaultDriftFactor, "redlock, redsync: clock drift allowance as a fraction of the TTL; validity = TTL − elapsed − TTL×factor (− 2 ms for redlock); redsync's WithDriftFactor")
	tries := fl.Int(redlock.ParamTries, 1, "redlock, redsync: rounds one acquire may play before it is refused (1: the client loop retries after --retry); redsync's WithTries")
	retryDelay := fl.Duration(redlock.ParamRetryDelay, 0, "redlock, redsync: pause between rounds when --redlock-tries is above 1 (redlock: a random pause up to it, 0: the node timeout; redsync: WithRetryDelay, 0: its own 50-250ms)")
	return func(s *Settings) error {
		if s.Program {
			// These are how lockcheck's own Redlock client and redsync
			// behave; a lock client program has its library's own.
			for _, name := range []string{redlock.ParamNodeTimeout, redlock.ParamDriftFactor, redlock.ParamTries, redlock.ParamRetryDelay} {
				if s.Changed(name) {
					return fmt.Errorf("--%s is a setting of lockcheck's own Redlock clients (redlock, redsync); a --client program uses its library's own: drop it, and set the library's option in the program", name)
				}
			}
			return nil
		}
		p := s.Params
		p[redlock.ParamNodeTimeout] = nodeTimeout.String()
		p[redlock.ParamDriftFactor] = strconv.FormatFloat(*drift, 'g', -1, 64)
		p[redlock.ParamTries] = strconv.Itoa(*tries)
		p[redlock.ParamRetryDelay] = retryDelay.String()
		if _, err := redlock.ParseParams(p, redlock.Options{}); err != nil {
			return err
		}
		if *nodeTimeout >= s.TTL {
			return fmt.Errorf("--%s %s: a node timeout must be small against the --ttl %s, or one slow node eats the whole validity", redlock.ParamNodeTimeout, nodeTimeout, s.TTL)
		}
		return nil
	}
}
