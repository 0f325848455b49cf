package container

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/lockcheck/lockcheck/backends"
	"github.com/lockcheck/lockcheck/harness/faketime"
)

// labelSource is the digest of everything an image was built from: an
// image whose label matches is up to date and is not built again.
const labelSource = "org.lockcheck.source"

// binDir is where an image keeps its programs.
const binDir = "/usr/local/bin"

// ImageRecipe is an image made with no registry and no base image: the
// files of the host that a program needs, imported into the engine as one
// layer.
type ImageRecipe struct {
	Tag string
	// Programs are host executables copied to /usr/local/bin under the
	// given name, with every library ldd lists at its own path.
	Programs map[string]string
	// Libraries are further host files (preloaded libraries), copied with
	// their own dependencies.
	Libraries []string
	// Links are symlinks in /usr/local/bin, or at an absolute name:
	// name -> target.
	Links map[string]string
	// Trees are host directories copied in whole (backends.Tree).
	Trees []string
	// Files are files written in with the given content, by path inside.
	Files map[string]string
	// Entrypoint is the image's default command.
	Entrypoint string
}

// Recipe is how the image a backend declares is made under tag from this
// machine's files: program gives the executable chosen for a program's
// name (--redis-server), self is the lockcheck executable.
func Recipe(img *backends.Image, tag string, program func(name string) string, self string) (ImageRecipe, error) {
	r := ImageRecipe{Tag: tag, Programs: map[string]string{}, Links: img.Links, Files: img.Files, Entrypoint: img.Entrypoint}
	for _, p := range img.Programs {
		path, err := exec.LookPath(program(p.Name))
		if err != nil {
			return ImageRecipe{}, p.NotFound(program(p.Name), err)
		}
		r.Programs[p.Name] = path
	}
	if img.Self != "" {
		r.Programs[img.Self] = self
	}
	for _, t := range img.Trees {
		if st, err := os.Stat(t.Path); err != nil || !st.IsDir() {
			return ImageRecipe{}, fmt.Errorf("the %s image holds %s, which is not a directory here: run scripts/setup (apt-get install %s)", img.Kind, t.Path, t.Package)
		}
		r.Trees = append(r.Trees, t.Path)
	}
	if img.FakeClock {
		for _, lib := range faketime.Libs {
			if _, err := os.Stat(lib); err != nil {
				return ImageRecipe{}, fmt.Errorf("the %s image needs %s for clock faults: %s", img.Kind, lib, faketime.InstallFix)
			}
		}
		r.Libraries = faketime.Libs
	}
	return r, nil
}

// file is one file of an image: its path inside and where it comes from,
// or, for a symlink, what it points at.
type file struct{ inside, host, link string }

// files lists what goes into the image, sorted by path.
func (r ImageRecipe) files() ([]file, error) {
	seen := map[string]bool{}
	var out []file
	add := func(f file) {
		if !seen[f.inside] {
			seen[f.inside] = true
			out = append(out, f)
		}
	}
	var needs []string
	for name, host := range r.Programs {
		add(file{inside: path.Join(binDir, name), host: host})
		needs = append(needs, host)
	}
	for _, lib := range r.Libraries {
		add(file{inside: lib, host: lib})
		needs = append(needs, lib)
	}
	for _, tree := range r.Trees {
		got, err := r.tree(tree)
		if err != nil {
			return nil, err
		}
		for _, f := range got {
			add(f)
			if f.link == "" && isELF(f.host) {
				needs = append(needs, f.host)
			}
		}
	}
	for _, bin := range needs {
		libs, err := sharedLibraries(bin)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			add(file{inside: lib, host: lib})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].inside < out[j].inside })
	return out, nil
}

// tree lists the files of a tree: the symlinks on the way to it, then what
// is in it (see backends.Tree).
func (r ImageRecipe) tree(root string) ([]file, error) {
	var out []file
	// Resolve root one component at a time, keeping each symlink met.
	real := "/"
	for _, part := range strings.Split(strings.Trim(filepath.Clean(root), "/"), "/") {
		next := filepath.Join(real, part)
		for hops := 0; ; hops++ {
			target, err := os.Readlink(next)
			if err != nil {
				break // not a symlink
			}
			if hops > 40 {
				return nil, fmt.Errorf("%s: too many symlinks", root)
			}
			out = append(out, file{inside: next, link: target})
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(next), target)
			}
			next = filepath.Clean(target)
		}
		real = next
	}
	err := filepath.WalkDir(real, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			resolved, err := filepath.EvalSymlinks(path)
			if err != nil {
				return nil // dangling here: nothing to copy
			}
			if r.inTrees(resolved) {
				out = append(out, file{inside: path, link: target})
			} else if st, err := os.Stat(resolved); err == nil && st.Mode().IsRegular() {
				out = append(out, file{inside: path, host: resolved})
			}
		case d.Type().IsRegular():
			out = append(out, file{inside: path, host: path})
		}
		return nil
	})
	return out, err
}

// inTrees reports whether path, with no symlink in it, lies in one of the
// recipe's trees.
func (r ImageRecipe) inTrees(path string) bool {
	for _, t := range r.Trees {
		if real, err := filepath.EvalSymlinks(t); err == nil && (path == real || strings.HasPrefix(path, real+"/")) {
			return true
		}
	}
	return false
}

// isELF reports whether path is an executable or a shared object.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "\x7fELF"
}

// sharedLibraries lists the absolute paths of the libraries ldd says bin
// loads, the dynamic loader among them; none for a static binary.
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) || bytes.Contains(out, []byte("statically linked")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, strings.TrimSpace(string(out)))
	}
	return parseLdd(string(out)), nil
}

// parseLdd reads ldd's output: "libc.so.6 => /lib/.../libc.so.6 (0x...)",
// "/lib64/ld-linux-x86-64.so.2 (0x...)" and the kernel's vdso, which has no
// file.
func parseLdd(out string) []string {
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, path.Clean(f[0])) // $ORIGIN/../lib/libjli.so
		}
	}
	return libs
}

// digest sums the recipe: paths, contents and links.
func (r ImageRecipe) digest(files []file) (string, error) {
	h := sha256.New()
	for _, f := range files {
		if f.link != "" {
			fmt.Fprintf(h, "link %s %s\n", f.inside, f.link)
			continue
		}
		fmt.Fprintf(h, "file %s\n", f.inside)
		in, err := os.Open(f.host)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, in)
		in.Close()
		if err != nil {
			return "", err
		}
	}
	links, _ := json.Marshal(r.Links)
	fmt.Fprintf(h, "links %s\nentrypoint %s\n", links, r.Entrypoint)
	if len(r.Files) > 0 {
		written, _ := json.Marshal(r.Files) // sorted by path
		fmt.Fprintf(h, "files %s\n", written)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeRootfs writes the image's file system as a tar stream.
func (r ImageRecipe) writeRootfs(w io.Writer, files []file) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	mkdir := func(dir string, mode int64) error {
		var parents []string
		for d := dir; d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			m := int64(0o755)
			if parents[i] == dir {
				m = mode
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(parents[i], "/") + "/", Mode: m}); err != nil {
				return err
			}
		}
		return nil
	}
	// Servers write temporary files; the node directory is mounted.
	if err := mkdir("/tmp", 0o1777); err != nil {
		return err
	}
	if err := mkdir(binDir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := mkdir(path.Dir(f.inside), 0o755); err != nil {
			return err
		}
		if f.link != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(f.inside, "/"), Linkname: f.link, Mode: 0o777}); err != nil {
				return err
			}
			continue
		}
		in, err := os.Open(f.host) // follows symlinks: the image gets the file
		if err != nil {
			return err
		}
		st, err := in.Stat()
		if err != nil {
			in.Close()
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.inside, "/"), Mode: 0o755, Size: st.Size()}
		if err := tw.WriteHeader(hdr); err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(tw, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	for _, inside := range slices.Sorted(maps.Keys(r.Files)) {
		if err := mkdir(path.Dir(inside), 0o755); err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(inside, "/"), Mode: 0o644, Size: int64(len(r.Files[inside]))}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, r.Files[inside]); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(r.Links))
	for name := range r.Links {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		inside := name
		if !path.IsAbs(name) {
			inside = path.Join(binDir, name)
		}
		if err := mkdir(path.Dir(inside), 0o755); err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(inside, "/"), Linkname: r.Links[name], Mode: 0o777}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// BuildResult says what Build did.
type BuildResult struct {
	Tag    string
	Built  bool // false: an up-to-date image was there already
	Files  int
	Bytes  int64
	Digest string
}

// Build imports the recipe's image into the engine unless an image with
// its tag was built from the same files already (force builds anyway).
func Build(ctx context.Context, cli *testcontainers.DockerClient, r ImageRecipe, force bool) (BuildResult, error) {
	files, err := r.files()
	if err != nil {
		return BuildResult{}, err
	}
	sum, err := r.digest(files)
	if err != nil {
		return BuildResult{}, err
	}
	res := BuildResult{Tag: r.Tag, Files: len(files), Digest: sum[:12]}
	for _, f := range files {
		if st, err := os.Stat(f.host); err == nil && f.link == "" {
			res.Bytes += st.Size()
		}
	}
	previous := ""
	if img, err := cli.ImageInspect(ctx, r.Tag); err == nil {
		if !force && img.Config != nil && img.Config.Labels[labelSource] == sum {
			return res, nil
		}
		previous = img.ID
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(r.writeRootfs(pw, files)) }()
	entry, _ := json.Marshal([]string{filepath.Join(binDir, r.Entrypoint)})
	changes := []string{
		"ENV PATH=" + binDir,
		"LABEL " + labelSource + "=" + sum,
		"ENTRYPOINT " + string(entry),
	}
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, r.Tag, client.ImageImportOptions{Changes: changes, Message: "built by lockcheck images build"})
	if err != nil {
		pr.CloseWithError(err)
		return res, fmt.Errorf("importing %s: %v", r.Tag, oneLine(err))
	}
	defer rc.Close()
	// The engine reports progress as JSON messages, an error among them.
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return res, fmt.Errorf("importing %s: %v", r.Tag, err)
		}
		if msg.Error != "" {
			return res, fmt.Errorf("importing %s: %s", r.Tag, msg.Error)
		}
	}
	res.Built = true
	if img, err := cli.ImageInspect(ctx, r.Tag); err == nil && previous != "" && img.ID != previous {
		// The tag moved on: the old image is nobody's any more, unless a
		// container still uses it (then the engine keeps it).
		cli.ImageRemove(ctx, previous, client.ImageRemoveOptions{}) //nolint:errcheck // see above
	}
	return res, nil
}
