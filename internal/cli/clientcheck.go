package cli

import (
	"context"
	"fmt"
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
		programs    = catalog.Programs{}
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that a lock client program speaks the client protocol before trusting a verdict on it",
		Long: `client check starts the --topology's servers and runs the --client program
through the protocol (docs/clients.md): the handshake, a grant, a certain
refusal while another client holds the lock, a release that deletes, a release
after the lease ran out, an unknown outcome when it does not answer in time
(it is stopped, killed and started again), a failpoint round trip (when it
declares failpoints) and a clean exit on EOF of its stdin. Each rule broken is
one line naming the message and the rule.

Exit codes: 0 the client conforms, 1 it broke a rule, 2 the check could not be
done.`,
		Example: `  lockcheck client check --client 'python3 my_lock.py' --topology redis`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.command == "" {
				return fmt.Errorf("--client: give the program to check, such as --client 'python3 my_lock.py'")
			}
			b, err := clientTarget(c.command, c.name, c.topology, c.initTimeout)
			if err != nil {
				return err
			}
			return clientCheck(cmd, b, ttl, timout, programs)
		},
	}
	fl := cmd.Flags()
	addClientFlags(fl, &c)
	fl.DurationVar(&ttl, "ttl", 300*time.Millisecond, "the lease the client is told to ask for; the check waits it out once")
	fl.DurationVar(&timout, "op-timeout", time.Second, "how long an operation may take; the check stops the client once for this long")
	programFlags(fl, programs)
	return cmd
}

// clientCheck runs the conformance check of the lock client program b.
func clientCheck(cmd *cobra.Command, b catalog.Backend, ttl, timeout time.Duration, programs catalog.Programs) error {
	dir, err := os.MkdirTemp("", "lockcheck-client-check-")
	if err != nil {
		return err
	}
	cfg := harness.Config{
		Run: history.RunConfig{
			Backend: b.Name, Variant: catalog.ClientVariant, Workload: workloads.Unfenced, FenceSource: workloads.FenceNone,
			Clients: 1, Keys: 1, Params: map[string]string{},
		},
		Target: b, Programs: programs, TTL: ttl, Limit: time.Second, OpTimeout: timeout, Retry: time.Millisecond, Think: "0s",
		Logger: slog.Default(),
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec, teardown, err := harness.ClientService(ctx, cfg, dir)
	defer teardown()
	if err != nil {
		return err
	}
	prefix := "lockcheck-check:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	check := program.Conformance{
		Keys: [4]string{prefix + "grant", prefix + "expiry", prefix + "timeout", prefix + "failpoint"},
		TTL:  ttl, Timeout: timeout, UntilRelease: b.LeasesUntilRelease,
		Open: func(slot string, failpoints []string, fp backends.Failpoint) (*program.Lock, error) {
			s := spec
			o := *s.Program
			o.Slot, o.KeyPrefix, o.Failpoints = slot, prefix, failpoints
			o.LogPath = filepath.Join(dir, "logs", "client-"+slot+".log")
			s.Program = &o
			return catalog.OpenProgram(s, fp)
		},
	}
	fails := check.Check()
	out := cmd.OutOrStdout()
	for _, f := range fails {
		fmt.Fprintf(out, "client check: %s\n", f)
	}
	if len(fails) > 0 {
		fmt.Fprintf(out, "client check: %s does not conform to protocol %d: %d rule(s) broken; its stderr is in %s\n", b.Name, program.Version, len(fails), filepath.Join(dir, "logs"))
		return exitError{code: exitInvalid}
	}
	os.RemoveAll(dir)
	fmt.Fprintf(out, "client check: %s conforms to protocol %d\n", b.Name, program.Version)
	return nil
}
