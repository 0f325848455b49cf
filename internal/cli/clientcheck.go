package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/backends/program"
	"github.com/lockcheck/lockcheck/backends/redis"
	"github.com/lockcheck/lockcheck/backends/sentinel"
	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/workloads"
)

func newClientCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Work with lock client programs (docs/clients.md)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newClientCheckCmd())
	return cmd
}

func newClientCheckCmd() *cobra.Command {
	var (
		c           clientFlags
		ttl, timout time.Duration
		out         string
		programs    = catalog.Programs{}
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that a lock client program speaks the client protocol before trusting a verdict on it",
		Long: `client check starts the --topology's servers and runs the --client program
through the protocol (docs/clients.md): the handshake, a grant, a certain
refusal while another client holds the lock, a release that deletes, the lease
it claims (inside it, with the holder stopped, a second client's acquire is
refused; on --topology redis and sentinel each grant, extend and renewal is held to the
key's PTTL too; renewed's sent_ns is CLOCK_MONOTONIC), a release after the
lease ran out, an unknown outcome when it does not answer in time
(it is stopped, killed and started again), a failpoint round trip (when it
declares failpoints) and a clean exit on EOF of its stdin. Each rule broken is
one line naming the message and the rule.

The programs' stderr goes to logs/client-c0.log, ... and the servers' data and
logs to nodes/, in --out's directory, or in a temporary one that is removed
when the client conforms.

Ctrl-C ends the check at once, killing the programs.

Exit codes: 0 the client conforms, 1 it broke a rule, 2 the check could not be
done (or was interrupted).`,
		Example: `  lockcheck client check --client 'python3 my_lock.py' --topology redis
  lockcheck client check --client 'python3 my_lock.py' --topology zookeeper --ttl 1s --out check-logs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.command == "" {
				return fmt.Errorf("--client: give the program to check, such as --client 'python3 my_lock.py'")
			}
			b, err := clientTarget(c.command, c.name, c.topology, c.initTimeout)
			if err != nil {
				return err
			}
			return clientCheck(cmd, b, ttl, timout, out, programs)
		},
	}
	fl := cmd.Flags()
	addClientFlags(fl, &c)
	fl.DurationVar(&ttl, "ttl", 300*time.Millisecond, "the lease the client is told to ask for; the check waits it out once")
	fl.DurationVar(&timout, "op-timeout", time.Second, "how long an operation may take; the check stops the client once for this long")
	fl.StringVar(&out, "out", "", "a new or empty directory for the check's logs (the programs' stderr in logs/, the servers' in nodes/), kept whatever the outcome (default: a temporary directory, removed when the client conforms)")
	programFlags(fl, programs)
	return cmd
}

// clientCheckRequest is the run client check asks for: the lock client
// program b's servers, for one client; what it leaves zero is the run's
// default (harness.NewPlan).
func clientCheckRequest(b catalog.Backend, ttl, timeout time.Duration, programs catalog.Programs) harness.Config {
	return harness.Config{
		Run: history.RunConfig{
			Backend: b.Name, Variant: catalog.ClientVariant, FenceSource: workloads.FenceNone, Clients: 1,
		},
		Target: b, Programs: programs, TTL: ttl, Limit: time.Second, OpTimeout: timeout, Retry: time.Millisecond, Think: "0s",
		Logger: slog.Default(),
	}
}

// clientCheck runs the conformance check of the lock client program b,
// with its logs in out ("": a temporary directory).
func clientCheck(cmd *cobra.Command, b catalog.Backend, ttl, timeout time.Duration, out string, programs catalog.Programs) error {
	dir, err := clientCheckDir(out)
	if err != nil {
		return err
	}
	cfg, err := harness.NewPlan(clientCheckRequest(b, ttl, timeout, programs))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec, teardown, err := harness.ClientService(ctx, cfg, dir)
	defer teardown()
	if err != nil {
		return err
	}
	prefix := "lockcheck-check:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	lease, closeLease, err := serviceLease(b.Topology(), spec.Addrs, timeout)
	if err != nil {
		return err
	}
	defer closeLease()
	check := program.Conformance{
		Lease: lease,
		Keys:  [4]string{prefix + "grant", prefix + "expiry", prefix + "timeout", prefix + "failpoint"},
		TTL:   ttl, Timeout: timeout, UntilRelease: b.LeasesUntilRelease,
		Open: func(slot string, failpoints []string, fp backends.Failpoint) (*program.Lock, error) {
			s := spec
			o := *s.Program
			o.Slot, o.KeyPrefix, o.Failpoints = slot, prefix, failpoints
			o.LogPath = filepath.Join(dir, "logs", "client-"+slot+".log")
			s.Program = &o
			return catalog.OpenProgram(s, fp)
		},
	}
	fails := check.Check(ctx)
	if ctx.Err() != nil {
		return fmt.Errorf("client check of %s interrupted: the program is not checked (its stderr is in %s)", b.Name, filepath.Join(dir, "logs"))
	}
	w := cmd.OutOrStdout()
	for _, f := range fails {
		fmt.Fprintf(w, "client check: %s\n", f)
	}
	if len(fails) > 0 {
		fmt.Fprintf(w, "client check: %s does not conform to protocol %d: %d rule(s) broken; its stderr is in %s\n", b.Name, program.Version, len(fails), filepath.Join(dir, "logs"))
		return exitError{code: exitInvalid}
	}
	kept := ""
	if out == "" {
		os.RemoveAll(dir)
	} else {
		kept = "; its stderr is in " + filepath.Join(dir, "logs")
	}
	fmt.Fprintf(w, "client check: %s conforms to protocol %d%s\n", b.Name, program.Version, kept)
	return nil
}

// serviceLease is how client check reads a lock key's lease on the
// service, where the topology lets it: the key's value and PTTL on the one
// Redis server, or on the master the sentinels name. Elsewhere it is nil:
// a second client's refusal alone judges the leases a program claims.
func serviceLease(topology string, addrs []string, timeout time.Duration) (func(context.Context, string) (program.ServiceLease, error), func(), error) {
	var (
		rdb *redis.Lock
		err error
	)
	opts := redis.Options{Client: backends.Client{Timeout: timeout}}
	switch {
	case topology == "redis" && len(addrs) == 1:
		opts.Addr = addrs[0]
		rdb, err = redis.New(opts)
	case topology == "sentinel" && len(addrs) > 0:
		rdb, err = sentinel.New(opts, addrs)
	default:
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	read := func(ctx context.Context, key string) (program.ServiceLease, error) {
		held, value, left, err := rdb.Lease(ctx, key)
		return program.ServiceLease{Held: held, Holder: value, Left: left}, err
	}
	return read, func() { rdb.Close() }, nil
}

// clientCheckDir is the directory of a check's logs and servers: out, which
// must be new or empty (a server's data left there by an earlier check
// would be read again), or a temporary one when out is "".
func clientCheckDir(out string) (string, error) {
	if out == "" {
		return os.MkdirTemp("", "lockcheck-client-check-")
	}
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return out, os.MkdirAll(out, 0o755)
	case err != nil:
		return "", fmt.Errorf("--out %s: %w", out, err)
	case len(entries) > 0:
		return "", fmt.Errorf("--out %s: the directory is not empty; give a new or empty one (the check writes its servers' data there)", out)
	}
	return out, nil
}
