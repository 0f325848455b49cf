package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/history"
	"github.com/lockcheck/lockcheck/internal/testtier"
	"github.com/lockcheck/lockcheck/results"
)

// The JVM reference client, examples/clients/curator: Apache Curator's
// InterProcessMutex on ZooKeeper, built by its build.sh. Its tests skip, with
// what to install, where Java or Debian's jars are missing.

// curatorJars are what the client and the docs' Java example are built
// from (Debian's libcurator-recipes-java and its dependencies,
// libslf4j-java, libjackson2-databind-java).
var curatorJars = []string{"curator-recipes", "curator-framework", "curator-client", "zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-simple", "jackson-databind"}

// needCurator skips the test, naming what to install, when the JDK or a
// jar is missing.
func needCurator(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"java", "javac", "jar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: the Curator client needs a JDK (scripts/setup installs openjdk-17-jdk-headless)", tool)
		}
	}
	for _, j := range curatorJars {
		if _, err := os.Stat("/usr/share/java/" + j + ".jar"); err != nil {
			t.Skipf("no /usr/share/java/%s.jar (scripts/setup installs libcurator-recipes-java, libslf4j-java and libjackson2-databind-java)", j)
		}
	}
}

var (
	curatorOnce sync.Once
	curatorCmd  string
	curatorErr  error
)

// curatorClient builds the client once (build.sh: the jar, its class-data
// archive, the launcher) and returns its launcher.
func curatorClient(t *testing.T) string {
	t.Helper()
	needCurator(t)
	curatorOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lockcheck-curator-")
		if err != nil {
			curatorErr = err
			return
		}
		out, err := exec.Command(filepath.Join(clientsDir, "curator", "build.sh"), dir).CombinedOutput()
		if err != nil {
			curatorErr = fmt.Errorf("build.sh: %v: %s", err, out)
			return
		}
		curatorCmd = filepath.Join(dir, "curator-lock")
	})
	require.NoError(t, curatorErr)
	return curatorCmd
}

// The Curator client conforms (with --out, its logs are where it says;
// --op-timeout 2s: ZooKeeper's Java client sleeps up to 1 s before it
// reconnects, docs/clients.md)
// and, five JVMs starting at once within the default init timeout, is
// clean without faults.
func TestCuratorClientConformsAndIsCleanWithoutFaults(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	bin := curatorClient(t)
	out := filepath.Join(t.TempDir(), "check")
	check := lockcheck("client", "check", "--client", bin, "--client-name", "curator", "--topology", "zookeeper", "--ttl", "1s", "--op-timeout", "2s", "--out", out)
	require.Equal(t, exitValid, check.code, "client check:\n%s%s", check.stdout, check.stderr)
	assert.FileExists(t, filepath.Join(out, "logs", "client-c0.log"), "--out keeps the programs' stderr")
	again := lockcheck("client", "check", "--client", bin, "--topology", "zookeeper", "--out", out)
	assert.Equal(t, exitUnknown, again.code, "a used --out directory is refused")
	assert.Contains(t, again.stderr, "not empty")

	inv, res, _ := runLockcheck(t, "--client", bin, "--client-name", "curator", "--topology", "zookeeper", "--nemesis", "none", "--ttl", "1s", "--time-limit", "3s")
	assert.Equal(t, exitValid, inv.code, inv.stdout)
	assert.Equal(t, checker.Valid, res.Valid, res.Reason)
	assert.Positive(t, res.Checks.Liveness.Grants)
	require.NotNil(t, res.Config.Client)
	assert.Equal(t, "Apache Curator InterProcessMutex", res.Config.Client.Library)
}

// Curator's lock lives as long as its ZooKeeper session: a holder paused
// past it loses the lock, the next client is granted it, and Curator says
// LOST only once the holder runs again. Fenced by the znode's sequence,
// the paused holder's write is refused.
func TestCuratorClientLearnsOfItsExpiredSessionLate(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	bin := curatorClient(t)
	args := []string{"--client", bin, "--client-name", "curator", "--topology", "zookeeper",
		"--nemesis", "pause-holder", "--ttl", "1s", "--pause", "2s", "--nemesis-interval", "1s", "--time-limit", "5s"}
	t.Run("unfenced", func(t *testing.T) {
		t.Parallel()
		inv, res, dir, landed := runFault(t, append(args, "--workload", "unfenced")...)
		if !landed {
			return
		}
		assert.Equal(t, exitInvalid, inv.code, inv.stdout)
		assert.GreaterOrEqual(t, res.Checks.DoubleOwnership.Windows, 1, res.Reason)
		assert.Zero(t, res.Checks.LeaseSafety.Violations, "ZooKeeper kept its promise: the session had expired")
		h, err := history.ReadFile(filepath.Join(dir, results.HistoryFile))
		require.NoError(t, err)
		for _, p := range heldPauses(h) {
			if p.lost == 0 {
				continue // the run ended before Curator reconnected
			}
			next, ok := nextGrant(h, p.token, p.pause)
			require.True(t, ok, "another client was granted the lock while %s was paused", p.target)
			assert.Greater(t, p.lost, next, "%s: Curator said LOST after the next grant", p.target)
		}
	})
	t.Run("fenced", func(t *testing.T) {
		t.Parallel()
		inv, res, _, landed := runFault(t, append(args, "--workload", "fenced")...)
		if !landed {
			return
		}
		assert.Equal(t, exitValid, inv.code, inv.stdout)
		assert.Zero(t, res.Checks.Resource.LostUpdates+res.Checks.Resource.StaleWritesAccepted, res.Reason)
		assert.Zero(t, res.Checks.Fencing.Regressions+res.Checks.Fencing.Duplicates, "the znodes' sequence rose")
	})
}

// The Java example of docs/clients.md conforms as written.
func TestDocsJavaClientConforms(t *testing.T) {
	testtier.Long(t)
	t.Parallel()
	needCurator(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "clients.md"))
	require.NoError(t, err)
	start := strings.Index(string(doc), "```java\n")
	require.Positive(t, start, "docs/clients.md has a Java example")
	start += len("```java\n")
	end := start + strings.Index(string(doc)[start:], "```")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "MyLock.java"), []byte(string(doc)[start:end]), 0o644))
	var cp []string
	for _, j := range curatorJars {
		cp = append(cp, "/usr/share/java/"+j+".jar")
	}
	classpath := strings.Join(cp, ":")
	out, err := exec.Command("javac", "-cp", classpath, "-d", dir, filepath.Join(dir, "MyLock.java")).CombinedOutput()
	require.NoError(t, err, "javac: %s", out)
	command := "java -XX:+DisplayVMOutputToStderr -Xlog:disable -Xlog:all=warning:stderr -cp " + dir + ":" + classpath + " MyLock"
	inv := lockcheck("client", "check", "--client", command, "--client-name", "docs-java", "--topology", "zookeeper", "--ttl", "1s", "--op-timeout", "2s")
	assert.Equal(t, exitValid, inv.code, "stdout:\n%s\nstderr:\n%s", inv.stdout, inv.stderr)
}
