package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcheck/lockcheck/results"
)

func newServeCmd() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve [DIR]",
		Short: "Browse stored runs and comparisons in a web browser",
		Long: `serve serves the store DIR (store by default) over HTTP on the loopback
interface: an index of every run and comparison (time, backend, workload,
faults, verdict), colour-coded and filterable, each linking to its report,
and every file of the store as it is. Stop it with Ctrl-C.

It binds loopback addresses only: it serves histories and logs without any
authentication. To look from another machine, tunnel the port (ssh -L).
It answers only requests addressed to localhost or a loopback address (so
a web page cannot reach it through a name of its own pointed at 127.0.0.1),
and serves nothing outside DIR, through symlinks neither.`,
		Example: `  lockcheck serve
  lockcheck serve /var/lib/lockcheck/store --addr 127.0.0.1:9000`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store := "store"
			if len(args) == 1 {
				store = args[0]
			}
			return serve(cmd, store, addr)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "loopback address and port to listen on")
	return cmd
}

// loopbackHostOnly answers only requests addressed to a loopback name or
// address (localhost, 127.0.0.0/8, [::1], with or without a port). A web
// page the user visits can point a name of its own at 127.0.0.1 (DNS
// rebinding) and read the store through it; its requests carry that name
// as their Host, and are refused.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLoopbackHost(r.Host) {
			http.Error(w, "lockcheck serve answers only requests to localhost or a loopback address", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports whether a Host header names a loopback name or
// address.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}

func serve(cmd *cobra.Command, store, addr string) error {
	if fi, err := os.Stat(store); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a folder of runs; pass the folder lockcheck run --out wrote (store by default)", store)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, such as 127.0.0.1:8080", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--addr %s: serve binds loopback addresses only (127.0.0.1, ::1, localhost); reach it from elsewhere through an SSH tunnel", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s is already in use; stop what listens there or pick another port with --addr 127.0.0.1:PORT", addr)
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	handler, err := results.StoreHandler(store)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: loopbackHostOnly(handler), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.OutOrStdout(), "lockcheck serve: %s on http://%s/ (Ctrl-C stops)\n", store, ln.Addr())

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}
