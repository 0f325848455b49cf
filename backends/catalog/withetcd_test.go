package catalog_test

// The etcd backend registers from a package of its own; linked into this
// test binary, it is in the registry the package's tests walk.
import _ "github.com/lockcheck/lockcheck/backends/catalog/withetcd"
