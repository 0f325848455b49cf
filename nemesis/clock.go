package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockcheck/lockcheck/history"
)

func init() {
	register(Fault{Name: "clock-skew", Inject: ClockSkew, Needs: []Capability{CapClock},
		Params: []string{ParamSkew, ParamSkewNodes, ParamClockMode, ParamStrobePeriod},
		Help: "move the wall clock of --skew-nodes nodes (a minority) by --skew for --pause, " +
			"as one jump or, with --clock-mode strobe, back and forth every --strobe-period; the offset each node reports is recorded"})
}

// Params of the clock faults.
const (
	ParamSkew         = "skew"          // a Go duration, negative for a backward jump
	ParamSkewNodes    = "skew-nodes"    // how many nodes clock-skew moves
	ParamClockMode    = "clock-mode"    // "jump" or "strobe"
	ParamStrobePeriod = "strobe-period" // a Go duration: how long each strobe phase lasts
)

// Clock modes.
const (
	ClockJump   = "jump"
	ClockStrobe = "strobe"
)

// Defaults of the clock params: a jump large against any lease, as in the
// articles (an NTP step, an operator fixing a wrong clock).
const (
	DefaultSkew         = 20 * time.Second
	DefaultStrobePeriod = 50 * time.Millisecond
)

// WallClocks is a service whose nodes' wall clocks can be read (Redis TIME),
// so a clock fault records the offset a node really runs at, not only the
// one it asked for. The backend's handle (Targets.Service) offers it.
type WallClocks interface {
	WallClock(ctx context.Context, node string) (time.Time, error)
}

// HolderLister is offered by Targets that can name every client holding a
// lock right now, not just one.
type HolderLister interface {
	Holders() []Client
}

// ErrNoClock means no node of the service runs under a faked clock.
var ErrNoClock = errors.New("no node of this backend runs under a faked clock (clock faults need a backend such as redlock)")

// ClockConfig is the clock params of a run.
type ClockConfig struct {
	Skew   time.Duration // how far a clock moves
	Nodes  int           // how many nodes clock-skew moves
	Mode   string        // ClockJump or ClockStrobe
	Period time.Duration // of a strobe phase
}

// ClockSettings reads and checks the clock params; absent ones take their
// defaults.
func ClockSettings(params map[string]string) (ClockConfig, error) {
	s := ClockConfig{Skew: DefaultSkew, Nodes: 1, Mode: ClockJump, Period: DefaultStrobePeriod}
	if v := params[ParamSkew]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d == 0 {
			return s, fmt.Errorf("--%s %q: want a non-zero duration such as 20s or -20s", ParamSkew, v)
		}
		s.Skew = d
	}
	if v := params[ParamSkewNodes]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("--%s %q: want a whole number of at least 1", ParamSkewNodes, v)
		}
		s.Nodes = n
	}
	if v := params[ParamClockMode]; v != "" {
		if v != ClockJump && v != ClockStrobe {
			return s, fmt.Errorf("--%s %q: choose %s or %s", ParamClockMode, v, ClockJump, ClockStrobe)
		}
		s.Mode = v
	}
	if v := params[ParamStrobePeriod]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("--%s %q: want a positive duration such as 50ms", ParamStrobePeriod, v)
		}
		s.Period = d
	}
	return s, nil
}

// clockNodes are the nodes whose clocks can be moved.
func clockNodes(env *Env) []Clock {
	var out []Clock
	for _, t := range env.Targets.Nodes() {
		if c, ok := t.(Clock); ok {
			out = append(out, c)
		}
	}
	return out
}

// ClockSkew moves the wall clocks of a random minority of the nodes by the
// skew for env.Pause, then puts them back. A forward jump expires at once
// every key the node holds (Redis expiry reads the wall clock); a backward
// jump keeps keys past their TTL. Putting a forward-jumped clock back is
// itself a backward jump for the keys set meanwhile. It lands when every
// picked node's clock moved for the whole pause (and, where the node can
// be asked, reads back moved).
func ClockSkew(ctx context.Context, env *Env) (Landing, error) {
	s := env.Settings.Clock
	nodes := clockNodes(env)
	if len(nodes) == 0 {
		return Landing{}, ErrNoClock
	}
	if minority := (len(nodes) - 1) / 2; s.Nodes > minority {
		return Landing{}, fmt.Errorf("--%s %d: at most %d of %d nodes is a minority", ParamSkewNodes, s.Nodes, minority, len(nodes))
	}
	picked := make([]Clock, 0, s.Nodes)
	for _, i := range env.Rand.Perm(len(nodes))[:s.Nodes] {
		picked = append(picked, nodes[i])
	}
	// Whatever happens, the clocks go back.
	defer func() {
		for _, n := range picked {
			resetClock(ctx, env, n)
		}
	}()
	began := time.Now()
	if s.Mode == ClockJump {
		for _, n := range picked {
			offset, err := jumpClock(ctx, env, n, s.Skew)
			if err != nil {
				return Landing{}, err
			}
			if offset != nil && !near(time.Duration(*offset)*time.Millisecond, s.Skew) {
				return missed("%s's clock was set %s but reads %dms off", n.Name(), signed(s.Skew), *offset), nil
			}
		}
		sleepCtx(ctx, env.Pause)
	} else if err := strobe(ctx, env, picked, s); err != nil {
		return Landing{}, err
	}
	if held := time.Since(began); held+5*time.Millisecond < env.Pause {
		if l, ok := cutShort(env, fmt.Sprintf("%d clock(s) moved %s", len(picked), signed(s.Skew)), held, env.Pause); ok {
			return l, nil
		}
		return missed("the clocks were moved %s of the %s asked: the run ended first", held.Round(time.Millisecond), env.Pause), nil
	}
	return landed("%d clock(s) moved %s for %s", len(picked), signed(s.Skew), env.Pause), nil
}

// near says whether a clock offset read back from a node matches the one
// set, within what reading it over the network blurs: half the offset.
func near(read, set time.Duration) bool {
	return (read - set).Abs() < set.Abs()/2
}

// strobe flips the clocks between the skew and the real time every period
// for env.Pause: each flip forward expires the keys set since the last one,
// each flip back stretches the keys set meanwhile by the skew.
func strobe(ctx context.Context, env *Env, nodes []Clock, s ClockConfig) error {
	detail := fmt.Sprintf("strobe %s every %s", signed(s.Skew), s.Period)
	for _, n := range nodes {
		if err := n.SetClock(s.Skew); err != nil {
			return err
		}
		env.Record(history.NemClockJump, history.Value{Target: n.Name(), PID: n.PID(), Detail: detail, DurationMs: env.Pause.Milliseconds()})
	}
	end := time.Now().Add(env.Pause)
	skewed := true
	for time.Now().Before(end) && ctx.Err() == nil {
		sleepCtx(ctx, min(s.Period, time.Until(end)))
		skewed = !skewed
		offset := time.Duration(0)
		if skewed {
			offset = s.Skew
		}
		for _, n := range nodes {
			if err := n.SetClock(offset); err != nil {
				return err
			}
		}
	}
	return nil
}

// jumpClock moves n's clock to offset and records the jump with the offset
// the node reports, which it returns (nil when the node cannot be asked).
func jumpClock(ctx context.Context, env *Env, n Clock, offset time.Duration) (*int64, error) {
	if err := n.SetClock(offset); err != nil {
		return nil, err
	}
	read := readOffset(ctx, env, n.Name())
	env.Record(history.NemClockJump, history.Value{
		Target: n.Name(), PID: n.PID(), Detail: signed(offset), DurationMs: env.Pause.Milliseconds(),
		OffsetMs: read,
	})
	return read, nil
}

// resetClock puts n's clock back, even when the run is ending, and records
// it when it was moved.
func resetClock(ctx context.Context, env *Env, n Clock) {
	if n.Clock() == 0 {
		return
	}
	if err := n.SetClock(0); err != nil {
		// The harness resets every clock at teardown as well.
		env.Record(history.NemClockReset, history.Value{Target: n.Name(), Detail: "reset failed: " + err.Error()})
		return
	}
	env.Record(history.NemClockReset, history.Value{Target: n.Name(), PID: n.PID(), Detail: "reset",
		OffsetMs: readOffset(context.WithoutCancel(ctx), env, n.Name())})
}

// readOffset asks the node for its wall clock and returns its offset from
// the host's, in milliseconds, or nil when the service cannot tell.
func readOffset(ctx context.Context, env *Env, node string) *int64 {
	clocks, ok := env.Targets.Service().(WallClocks)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	before := time.Now()
	t, err := clocks.WallClock(ctx, node)
	if err != nil {
		return nil
	}
	after := time.Now()
	// The node read its clock somewhere within the call; the middle is the
	// best guess.
	mid := before.Add(after.Sub(before) / 2)
	return history.Int64(t.Sub(mid).Milliseconds())
}

// signed formats an offset with its sign: "+20s", "-1.5s".
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
