# The checks a change must pass, in one place: .ci/run calls these targets.
#   make short   the fast tier: every package's own tests and one live smoke
#                run per backend (go test -short), a few minutes
#   make test    the whole suite, the README's test command
#   make lint    gofmt, go vet and staticcheck (pinned in go.mod as a tool)
#   make bench   every benchmark once (BENCH=regexp narrows, BENCHTIME=3x)
#   make build   bin/lockcheck, with the VCS revision lockcheck version prints
#   make examples  build, vet and test the example modules, as a user would
#   make race    the race detector on the packages that run goroutines

GO ?= go
BENCH ?= .
BENCHTIME ?= 1x
PKG := github.com/lockcheck/lockcheck

# The revision and modified flag, for builds whose VCS the go command does not
# read itself (a git worktree, or GOFLAGS=-buildvcs=false); empty outside git.
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED := $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true)
LDFLAGS := -X $(PKG)/internal/buildinfo.stampedRevision=$(REVISION) -X $(PKG)/internal/buildinfo.stampedModified=$(MODIFIED)

.PHONY: test short lint fmt vet staticcheck bench build examples race

test:
	$(GO) test -p 2 -count=1 -timeout 30m ./...

short:
	$(GO) test -short -count=1 -timeout 10m ./...

lint: fmt vet staticcheck

fmt:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt: these files are not formatted (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) tool staticcheck ./...

bench:
	$(GO) test -p 1 -count=1 -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -timeout 60m ./...

build:
	$(GO) build -buildvcs=auto -ldflags '$(LDFLAGS)' -o bin/lockcheck ./cmd/lockcheck

# Each Go example is a module of its own (a replace to this repository, or
# none), which ./... does not reach. examples/clients holds lock clients in
# other languages too: only the folders with a go.mod are Go modules.
examples:
	set -e; for gomod in $$(find examples -name go.mod | sort); do \
	  (cd "$$(dirname "$$gomod")" && $(GO) build -o "$$(mktemp -d)" ./... && $(GO) vet ./... && $(GO) test -p 1 -count=1 ./...); \
	done

# The race detector on the packages that run goroutines against containers,
# workers and faults. Of harness, the tests that drive the fleet and the
# nemesis together, and a segmented run (its clients parked and resumed at
# each boundary): the whole package under -race would add minutes to CI.
race:
	$(GO) test -race -count=1 ./nemesis ./workloads/... ./harness/container/...
	$(GO) test -race -count=1 -run 'TestPauseHolderStopsTheHolder|TestCancelledRunLeavesNothingBehind|TestPauseNodeStopsTheServer|TestPauseLeaderElectsANewLeader|TestFailoverPauseLeavesTwoMasters|TestSegmentedRunGoesOnAcrossBoundaries' ./harness
