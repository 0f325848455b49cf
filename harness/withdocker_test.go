package harness_test

// The docker runtime registers from a package of its own, which imports
// this one; linked into this test binary, it is the runtime the package's
// docker tests run.
import _ "github.com/lockcheck/lockcheck/harness/container/withdocker"
