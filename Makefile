# Berth: two commands do all the set-up on a fresh machine.
#   make dev   builds berth and runs a dev agent (server + client) with
#              the hostpath CSI plugin; make demo runs the volume walk-through
#   make test  vets and tests everything (root runs the mount tests too)

GO      ?= go
BIN     ?= $(CURDIR)/.bin
BERTH   := $(BIN)/berth
PKGS    := ./...

.PHONY: all build browser dev demo test vet lint fmt-check tidy-check peers bench bench-ui bench-table fuzz sim chaos clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BERTH) ./cmd/berth

dev: build
	$(BERTH) agent -dev

# demo runs the README's CSI walk-through against a fresh dev agent and
# fails if any step does (as root: the hostpath plugin bind-mounts).
demo:
	./scripts/demo

# peers builds the independent CSI plugins the tests run against
# (csi-test mock-driver), pinned in tools/.
peers:
	BIN=$(BIN) ./scripts/build-peers.sh

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# tidy-check fails early, with the fix, when a go.mod is out of date
# (compat/ needs it whenever the server gains a dependency).
tidy-check:
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are out of date: run 'go mod tidy'"; exit 1; }
	@cd compat && $(GO) mod tidy -diff >/dev/null || { echo "compat/go.mod is out of date: run 'cd compat && go mod tidy'"; exit 1; }

lint: fmt-check vet tidy-check

# browser installs headless Chromium from Debian's packages for the UI's
# browser tests (chromedp), when it is missing and we are root; apt-get
# update runs only if the install fails without it. Without Chromium those
# tests skip and say so. The package is pinned to the machine's Debian
# release, not to one build: Debian's security archive keeps only the
# newest Chromium, so an exact version would stop installing at its next
# security update, and chromedp speaks the DevTools protocol every recent
# Chromium serves (tested with 148.0.7778.167-1~deb12u1 from bookworm-security).
CHROMIUM_PKG ?= chromium
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $(CHROMIUM_PKG) for the UI's browser tests"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(CHROMIUM_PKG) >/dev/null 2>&1 || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(CHROMIUM_PKG); }; \
	else echo "browser: no chromium and not root with apt-get: the UI's browser tests will skip (install the $(CHROMIUM_PKG) package)"; fi

# Browser tests save screenshots under BERTH_TEST_ARTIFACTS.
BERTH_TEST_ARTIFACTS ?= $(BIN)/artifacts
test: lint peers browser
	BERTH_TEST_ARTIFACTS=$(BERTH_TEST_ARTIFACTS) $(GO) test -race -count=1 -timeout 30m $(PKGS)
	$(GO) test -tags simbugs -count=1 -run '^TestSimFinds' ./testutil/sim/
	cd compat && $(GO) test -race -count=1 ./...
	$(MAKE) fuzz

# sim runs the fault-schedule simulator (testutil/sim): SCHEDULES seeded
# schedules from SEED_BASE, or SEED=<n> to replay one, or SEEDS=<n>,<m>,...
# to replay a list at once (each violating one shrunk; a run shrinks its first
# SHRINK_MAX=3, SHRINK_BUDGET=16 runs each, and lists the rest); first it checks
# that it still finds every armed known bug. Its last line is
# "sim: <N> schedules, <V> violations, <S> s"; it fails on any violation.
SCHEDULES ?= 10000
SEED_BASE ?= 1
SEED      ?=
SEEDS     ?=
# SIM_PARALLEL one-server and SIM_PARALLEL3 three-server schedules run at
# once (a schedule is mostly waiting; three servers' elections flap when
# too many compete for the cores).
SIM_PARALLEL  ?= 24
SIM_PARALLEL3 ?= 6
sim:
	@mkdir -p $(BIN)
	$(GO) test -tags simbugs -count=1 -run '^TestSimFinds' ./testutil/sim/
	@SCHEDULES=$(SCHEDULES) SEED_BASE=$(SEED_BASE) SEED=$(SEED) SEEDS="$(SEEDS)" SIM_PARALLEL=$(SIM_PARALLEL) SIM_PARALLEL3=$(SIM_PARALLEL3) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestSim$$' ./testutil/sim/ >$(BIN)/sim.log 2>&1; rc=$$?; \
	grep -v -e '^=== ' -e '^ *--- PASS' -e '^sim: ' -e '^PASS$$' -e '^ok ' $(BIN)/sim.log | tail -n 300; \
	[ $$rc -eq 0 ] || echo "failed (exit $$rc); full log in $(BIN)/sim.log"; \
	grep '^sim: ' $(BIN)/sim.log | tail -n 1 | grep . || echo "sim: 0 schedules, 1 violations, 0 s"; exit $$rc

# chaos runs the simulator's slower companion (e2e/chaos_test.go, as
# root): CHAOS_SCHEDULES seeded fault schedules against real agents, Raft
# on disk, real mounts; CHAOS_SEED=<n> fixes the first seed (replay one
# with CHAOS_SCHEDULES=1). make test runs 2 of them.
CHAOS_SCHEDULES ?= 20
CHAOS_SEED      ?=
chaos: peers
	CHAOS_SCHEDULES=$(CHAOS_SCHEDULES) CHAOS_SEED=$(CHAOS_SEED) $(GO) test -count=1 -timeout 60m -v -run '^TestE2E_Chaos$$' ./e2e/

# fuzz runs each fuzz target briefly (make test does); FUZZTIME=5m by hand.
# The default is a count, not a duration: with a duration, Go 1.26's fuzz
# coordinator can report a bare "context deadline exceeded" failure when the
# deadline fires while a worker is mid-input (golang/go#75804, fixed in Go
# 1.27); a count has no deadline to race, so CI fails only on a real input.
FUZZTIME ?= 20000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseJob$$' -fuzztime $(FUZZTIME) ./jobspec/
	$(GO) test -run '^$$' -fuzz '^FuzzParseVolume$$' -fuzztime $(FUZZTIME) ./jobspec/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeJobRegistration$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzVolumeDecodersLikeEncodingJSON$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzWriteBodies$$' -fuzztime $(FUZZTIME) ./command/agent/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./command/agent/
	$(GO) test -run '^$$' -fuzz '^FuzzRPCCodec$$' -fuzztime $(FUZZTIME) ./nomad/msgpack/
	$(GO) test -run '^$$' -fuzz '^FuzzFSMApply$$' -fuzztime $(FUZZTIME) ./nomad/

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./nomad/ ./plugins/csi/...

# bench-ui loads the UI's 1,000-volume list in headless Chromium and
# reports first contentful paint and full render (fcp-ms, rendered-ms).
bench-ui: browser
	$(GO) test -run '^$$' -bench '^BenchmarkVolumeList1000$$' -benchtime 20x ./command/agent/ui/

# bench-table runs berth's CSI latency table (cmd/berth-bench): one agent
# with Raft on disk, the hostpath plugin, registers, lists, claims and
# stops, next to floors measured in the same run; three whole runs, each
# figure their median, judged against issue 20's goals. Needs root.
bench-table: build
	$(GO) run ./cmd/berth-bench -berth $(BERTH) -runs 3

clean:
	rm -rf $(BIN)
