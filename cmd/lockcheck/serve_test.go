package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeBadInputIsOneLineAndExitTwo(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	store := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"port in use", []string{"serve", store, "--addr", busy.Addr().String()}, busy.Addr().String() + " is already in use; stop what listens there or pick another port with --addr 127.0.0.1:PORT"},
		{"not loopback", []string{"serve", store, "--addr", "0.0.0.0:8080"}, "serve binds loopback addresses only"},
		{"a host name", []string{"serve", store, "--addr", "example.com:8080"}, "serve binds loopback addresses only"},
		{"no port", []string{"serve", store, "--addr", "127.0.0.1"}, "want HOST:PORT"},
		{"no store", []string{"serve", store + "/missing"}, "is not a folder of runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := lockcheck(tc.args...)
			assert.Equal(t, exitUnknown, inv.code)
			assert.Contains(t, inv.stderr, tc.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(inv.stderr), "\n")+1, "one line: %q", inv.stderr)
		})
	}
}

func TestServeServesTheIndexUntilStopped(t *testing.T) {
	store := t.TempDir()
	ctx, stop := context.WithCancel(context.Background())
	out, w := io.Pipe()
	root := newRootCmd()
	root.SetArgs([]string{"serve", store, "--addr", "127.0.0.1:0"})
	root.SetOut(w)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); w.Close() }()

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	go io.Copy(io.Discard, out) //nolint:errcheck // drains the rest
	url := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/`).FindString(line)
	require.NotEmpty(t, url, line)

	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "No runs yet.")

	stop()
	select {
	case err := <-done:
		assert.NoError(t, err, "a stopped server is a clean exit")
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	_, err = http.Get(url)
	assert.Error(t, err, "nothing listens any more")
}

// serve answers only requests addressed to a loopback name or address, so
// a page that rebinds a name of its own to 127.0.0.1 reads nothing.
func TestServeRefusesForeignHosts(t *testing.T) {
	handler := loopbackHostOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "the store") //nolint:errcheck // a test handler
	}))
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"localhost", true},
		{"localhost:8080", true},
		{"LOCALHOST:8080", true},
		{"127.0.0.1", true},
		{"127.0.0.1:8080", true},
		{"127.1.2.3:9000", true},
		{"[::1]", true},
		{"[::1]:8080", true},
		{"attacker.example:8080", false},
		{"attacker.example", false},
		{"localhost.attacker.example", false},
		{"10.0.0.1:8080", false},
		{"[::ffff:10.0.0.1]:8080", false},
		{"", false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Host = tc.host
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			if tc.ok {
				assert.Equal(t, http.StatusOK, rec.Code)
				assert.Equal(t, "the store", rec.Body.String())
			} else {
				assert.Equal(t, http.StatusMisdirectedRequest, rec.Code)
				assert.NotContains(t, rec.Body.String(), "the store")
			}
		})
	}
}
