package harness

import "github.com/lockcheck/lockcheck/nemesis"

// Holders implements nemesis.HolderLister: every client that holds a lock
// right now, so a fault can wait for a second holder while it holds the
// first (Kleppmann's Redlock case).
func (f *fleet) Holders() []nemesis.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []nemesis.Client
	for _, w := range f.slots {
		if w != nil && w.holds() {
			out = append(out, w)
		}
	}
	return out
}

// Refusals implements nemesis.RefusalCounter: how many acquires the service
// refused to write at all so far.
func (f *fleet) Refusals() int64 { return f.refusals.Load() }
