package container

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/backends"
)

// A tree comes in whole at its own path: the symlinks on the way to it and
// in it stay symlinks, a symlink to a file outside every tree becomes a
// copy of the file, and a dangling one is left out.
func TestTreeKeepsSymlinksAndCopiesWhatLiesOutside(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "jvm", "java-17")
	require.NoError(t, os.MkdirAll(filepath.Join(real, "lib"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(real, "lib", "modules"), []byte("classes"), 0o644))
	require.NoError(t, os.Symlink("java-17", filepath.Join(root, "jvm", "default")))
	outside := filepath.Join(root, "etc", "net.properties")
	require.NoError(t, os.MkdirAll(filepath.Dir(outside), 0o755))
	require.NoError(t, os.WriteFile(outside, []byte("x=1"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(real, "lib", "net.properties")))
	require.NoError(t, os.Symlink("modules", filepath.Join(real, "lib", "modules.link")))
	require.NoError(t, os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(real, "lib", "dangling")))

	img := &backends.Image{Kind: "test", Trees: []backends.Tree{{Path: filepath.Join(root, "jvm", "default", "lib"), Package: "test"}}}
	r, err := Recipe(img, "lockcheck/test:x", func(name string) string { return name }, "")
	require.NoError(t, err)
	files, err := r.tree(r.Trees[0])
	require.NoError(t, err)
	assert.ElementsMatch(t, []file{
		{inside: filepath.Join(root, "jvm", "default"), link: "java-17"},
		{inside: filepath.Join(real, "lib", "modules"), host: filepath.Join(real, "lib", "modules")},
		{inside: filepath.Join(real, "lib", "modules.link"), link: "modules"},
		{inside: filepath.Join(real, "lib", "net.properties"), host: outside},
	}, files)

	img.Trees[0].Path = filepath.Join(root, "missing")
	_, err = Recipe(img, "lockcheck/test:x", func(name string) string { return name }, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install test")
}
