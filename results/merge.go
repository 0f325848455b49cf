package results

import (
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockcheck/lockcheck/internal/buildinfo"
)

// IndexFile is the store index a merge writes beside its comparison (lockcheck
// serve draws the same page live).
const IndexFile = "index.html"

// part is one comparison folder a merge reads, and its place in the matrix.
type part struct {
	dir       string
	c         *Comparison
	index, of int // its --shard I/N; 1/1 when it ran the whole matrix
}

// FindMergeable lists the comparison folders, the soak directories and
// the sweep folders in each source: such a folder itself, or a store (a
// --out folder) holding them. A source that holds none is an error.
func FindMergeable(sources []string) (comparisons, soaks, sweeps []string, err error) {
	kind := func(d string) string {
		for _, k := range []string{CompareResults, SoakFile, SweepResults} {
			if _, err := os.Stat(filepath.Join(d, k)); err == nil {
				return k
			}
		}
		return ""
	}
	add := func(d, k string) {
		switch k {
		case CompareResults:
			comparisons = append(comparisons, d)
		case SweepResults:
			sweeps = append(sweeps, d)
		default:
			soaks = append(soaks, d)
		}
	}
	for _, src := range sources {
		if k := kind(src); k != "" {
			add(src, k)
			continue
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return nil, nil, nil, err
		}
		found := 0
		for _, e := range entries {
			d := filepath.Join(src, e.Name())
			if k := kind(d); e.IsDir() && k != "" {
				add(d, k)
				found++
			}
		}
		if found == 0 {
			return nil, nil, nil, fmt.Errorf("%s holds no comparison, soak or sweep (no %s, %s or %s in it or its folders): pass a folder lockcheck compare, soak or sweep --out wrote, or a comparison, soak or sweep folder in it", src, CompareResults, SoakFile, SweepResults)
		}
	}
	return comparisons, soaks, sweeps, nil
}

// MergeComparisons merges the comparison folders dirs (the shards of one
// matrix, run on several machines) into a new comparison folder under out:
// every cell in the matrix's order, each cell's run directory copied in,
// compare.json, compare.html and junit.xml over them all, and the store's
// index.html. The shards must share their seed and time limit, and no cell
// may come twice.
func MergeComparisons(out string, dirs []string, commandLine []string, now time.Time) (string, *Comparison, error) {
	var parts []part
	for _, d := range dirs {
		c, err := ReadComparison(d)
		if err != nil {
			return "", nil, err
		}
		p := part{dir: d, c: c, index: 1, of: 1}
		if s := shardOf(c.CommandLine); s != "" {
			if _, err := fmt.Sscanf(s, "%d/%d", &p.index, &p.of); err != nil {
				return "", nil, fmt.Errorf("%s: --shard %q in its command line: %w", d, s, err)
			}
		}
		if len(parts) > 0 && (c.Seed != parts[0].c.Seed || c.TimeLimitMs != parts[0].c.TimeLimitMs) {
			return "", nil, fmt.Errorf("%s ran with seed %d and a %d ms time limit, %s with seed %d and %d ms: the shards of one matrix share --seed and --time-limit",
				d, c.Seed, c.TimeLimitMs, parts[0].dir, parts[0].c.Seed, parts[0].c.TimeLimitMs)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "", nil, fmt.Errorf("nothing to merge")
	}
	dir, err := NewCompareDir(out, now)
	if err != nil {
		return "", nil, err
	}
	merged := &Comparison{CommandLine: commandLine, TimeLimitMs: parts[0].c.TimeLimitMs, Seed: parts[0].c.Seed}
	type placed struct {
		at   int
		cell Cell
	}
	var cells []placed
	seen := map[string]string{}
	var labels []string
	var builds []buildinfo.Info
	for pi, p := range parts {
		merged.Started = earliest(merged.Started, p.c.Started)
		merged.Finished = max(merged.Finished, p.c.Finished)
		merged.Interrupted = merged.Interrupted || p.c.Interrupted
		label := fmt.Sprintf("s%dof%d", p.index, p.of)
		if p.of == 1 {
			label = "part" + strconv.Itoa(pi+1)
		}
		labels, builds = append(labels, label), append(builds, p.c.Lockcheck)
		for i, c := range p.c.Cells {
			key := c.Backend + "/" + c.Variant + " " + c.Workload + " " + FaultsName(c.Nemesis)
			if other, dup := seen[key]; dup {
				return "", nil, fmt.Errorf("cell %s is in both %s and %s: merge the shards of one matrix, each once", key, other, p.dir)
			}
			seen[key] = p.dir
			if c.Dir, err = copyRunDir(p.dir, c.Dir, dir, label); err != nil {
				return "", nil, err
			}
			// Cell i of shard I/N is cell i*N + I-1 of the matrix.
			cells = append(cells, placed{at: i*p.of + p.index - 1, cell: c})
		}
	}
	slices.SortStableFunc(cells, func(a, b placed) int { return cmp.Compare(a.at, b.at) })
	for _, c := range cells {
		merged.Cells = append(merged.Cells, c.cell)
	}
	merged.Builds = groupBuilds(labels, builds)
	if err := WriteComparison(dir, merged); err != nil {
		return "", nil, err
	}
	return dir, merged, writeStoreIndex(out)
}

// copyRunDir copies a cell's run directory rel, in the folder from, into
// the merged folder to, under a name that starts with label (the part it
// came from); it returns that name, "" for a cell with no directory.
func copyRunDir(from, rel, to, label string) (string, error) {
	if rel == "" {
		return "", nil
	}
	name := label + "-" + strings.ReplaceAll(rel, "/", "-")
	return name, copyTree(filepath.Join(from, filepath.FromSlash(rel)), filepath.Join(to, name))
}

// writeStoreIndex rewrites the store's index.html.
func writeStoreIndex(out string) error {
	entries, err := ScanStore(out)
	if err != nil {
		return err
	}
	return writeFileAtomic(out, IndexFile, func(w io.Writer) error { return WriteIndex(w, out, entries) })
}

// MergeSweeps merges the sweep folders dirs (the shards of one sweep) into
// a new sweep folder under out: every run in the grid's order, each run
// directory copied in, and sweep.json, sweep.html and junit.xml over them
// all. The shards must share their seeds, time limit and grid, and no run
// may come twice.
func MergeSweeps(out string, dirs []string, commandLine []string, now time.Time) (string, *Sweep, error) {
	var sweeps []*Sweep
	for _, d := range dirs {
		s, err := ReadSweep(d)
		if err != nil {
			return "", nil, err
		}
		if len(sweeps) > 0 {
			f := sweeps[0]
			if s.Seed != f.Seed || s.Seeds != f.Seeds || s.TimeLimitMs != f.TimeLimitMs || s.Grid != f.Grid {
				return "", nil, fmt.Errorf("%s ran seeds %d+%d, %d ms, a grid of %d runs; %s seeds %d+%d, %d ms, %d runs: the shards of one sweep share --seed, --seeds, --time-limit and the grid",
					d, s.Seed, s.Seeds, s.TimeLimitMs, s.Grid, dirs[0], f.Seed, f.Seeds, f.TimeLimitMs, f.Grid)
			}
		}
		sweeps = append(sweeps, s)
	}
	if len(sweeps) == 0 {
		return "", nil, fmt.Errorf("nothing to merge")
	}
	dir, err := NewSweepDir(out, now)
	if err != nil {
		return "", nil, err
	}
	f := sweeps[0]
	merged := &Sweep{CommandLine: commandLine, TimeLimitMs: f.TimeLimitMs, Seed: f.Seed, Seeds: f.Seeds, Grid: f.Grid}
	seen := map[int]string{}
	var labels []string
	var builds []buildinfo.Info
	for i, s := range sweeps {
		merged.Started = earliest(merged.Started, s.Started)
		merged.Finished = max(merged.Finished, s.Finished)
		merged.Interrupted = merged.Interrupted || s.Interrupted
		label := "part" + strconv.Itoa(i+1)
		if sh := shardOf(s.CommandLine); sh != "" {
			label = "s" + strings.ReplaceAll(sh, "/", "of")
		}
		labels, builds = append(labels, label), append(builds, s.Lockcheck)
		for _, r := range s.Runs {
			if other, dup := seen[r.At]; dup {
				return "", nil, fmt.Errorf("run %d of the grid (%s seed %d) is in both %s and %s: merge the shards of one sweep, each once", r.At, r.CellKey(), r.Seed, other, dirs[i])
			}
			seen[r.At] = dirs[i]
			if r.Dir, err = copyRunDir(dirs[i], r.Dir, dir, label); err != nil {
				return "", nil, err
			}
			merged.Runs = append(merged.Runs, r)
		}
	}
	slices.SortStableFunc(merged.Runs, func(a, b SweepRun) int { return cmp.Compare(a.At, b.At) })
	merged.Builds = groupBuilds(labels, builds)
	if err := WriteSweep(dir, merged); err != nil {
		return "", nil, err
	}
	return dir, merged, writeStoreIndex(out)
}

// shardOf finds --shard's value in a command line, "" when there is none.
func shardOf(line []string) string {
	for i, a := range line {
		if v, ok := strings.CutPrefix(a, "--shard="); ok {
			return v
		}
		if a == "--shard" && i+1 < len(line) {
			return line[i+1]
		}
	}
	return ""
}

// earliest of two RFC 3339 times, either of which may be empty.
func earliest(a, b string) string {
	if a == "" || (b != "" && b < a) {
		return b
	}
	return a
}

// copyTree copies the folder from to to, files and folders (symlinks as
// links); sockets and other special files a server left are not copied.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, dst)
		case !d.Type().IsRegular():
			return nil
		}
		return copyFile(path, dst)
	})
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
