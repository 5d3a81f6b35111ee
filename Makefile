# The Caddy Model Gateway. `make run` starts it with Caddyfile.example;
# `make test` installs what the tests need and runs them all.
GO       ?= go
BIN      := bin/caddy
RACE_BIN := bin/caddy-race
# integration tests run a second time against the -race build: the ones
# that drive concurrency through billing, reloads and shutdown
RACE_TESTS ?= TestDialectsMatrix|TestDatabaseLockedMidLoad|TestReloadChangesDatabaseUnderLoad|TestSIGTERMWithStreamsInFlight|TestRateLimitsHoldExactly|TestDisconnect|TestRealtimeSession|TestRealtimeQuotaRunsOut
FUZZTIME ?= 3s
# one fuzzing worker: make test fuzzes beside two test runs, whose timing
# tests want a core
FUZZPARALLEL ?= 1
# the real Claude Code and Codex CLI, for TestRealClients
CLIENTS  := bin/clients

export CGO_ENABLED := 1

.PHONY: build run test test-deps clients test-clients lint unit race race-fuzz test-postgres fuzz bench bench-store bench-usage clean

build:
	$(GO) build -o $(BIN) ./cmd/caddy

run: build
	$(BIN) run --config Caddyfile.example --adapter caddyfile

# Everything CI runs: formatting, vet, every test (integration tests start
# the real binary), and a short fuzz run of every fuzz target. The three
# long runs (every test on SQLite, the -race run, every integration test
# on PostgreSQL) go side by side: their gateways, upstreams and databases
# are their own, and they wait on processes and sockets more than they
# use the CPU; each run's output is shown whole when it ends. The fuzz
# targets run in the -race run's slot once it is done (it ends minutes
# before the other two), not before all three, where they held everything
# up for two minutes or more.
test: test-deps lint build
	@$(MAKE) --no-print-directory -j3 --output-sync=target unit race-fuzz test-postgres

race-fuzz: race
	@$(MAKE) --no-print-directory fuzz

# gcc for go-sqlite3; Debian's chromium for the console's browser tests;
# Debian's postgresql for the PostgreSQL store's tests, which start a
# throwaway cluster of their own (initdb is not on PATH: Debian keeps it in
# /usr/lib/postgresql/<version>/bin); the real Claude Code and Codex CLI
# (make clients)
test-deps: clients
	@command -v gcc >/dev/null || (apt-get update && apt-get install -y gcc libc6-dev)
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || (apt-get update && apt-get install -y postgresql)

# Claude Code and Codex CLI from npm, pinned, once (about 640 MB in bin/clients)
clients:
	@command -v npm >/dev/null || (apt-get update && apt-get install -y nodejs npm)
	@test -x $(CLIENTS)/node_modules/.bin/codex -a -x $(CLIENTS)/node_modules/.bin/claude || \
	  (mkdir -p $(CLIENTS) && cd $(CLIENTS) && npm install --no-audit --no-fund @anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Test artifacts (the console's screenshots) land in bin/artifacts.
# TestRealClients runs when the clients are installed (make clients).
# The integration package, the longest by far, is named first: go test
# builds and starts packages in the order given, and with ./... it started
# some 40 s after the first package (measured with -run '^$').
# The -timeout of each integration run (45m) only stops a hang: the three
# runs take 10-13 minutes side by side on a 2-core machine, but twice that
# when the machine is slow (a fresh clone's CI on a day it was: SQLite's
# run was stopped at 20 minutes; run again, SQLite's and PostgreSQL's took
# 28 minutes each), and CI allows 90.
unit:
	@set -e; clients=; if [ -x $(CLIENTS)/node_modules/.bin/codex ]; then clients=GATEWAY_TEST_CLIENTS=$(CURDIR)/$(CLIENTS); fi; \
	  all=$$($(GO) list ./...); pkgs="./integration/ $$(echo "$$all" | grep -v '/integration$$' | tr '\n' ' ')"; \
	  echo "env GATEWAY_TEST_BINARY=$(CURDIR)/$(BIN) GATEWAY_TEST_ARTIFACTS=$(CURDIR)/bin/artifacts $$clients $(GO) test -count=1 -timeout 45m ./integration/ <every other package>"; \
	  env GATEWAY_TEST_BINARY=$(CURDIR)/$(BIN) GATEWAY_TEST_ARTIFACTS=$(CURDIR)/bin/artifacts $$clients $(GO) test -count=1 -timeout 45m $$pkgs

# Only the real clients against the gateway and fake upstreams of each family.
test-clients: clients build
	GATEWAY_TEST_BINARY=$(CURDIR)/$(BIN) GATEWAY_TEST_CLIENTS=$(CURDIR)/$(CLIENTS) $(GO) test -count=1 -run TestRealClients -v ./integration

# The gateway built with -race, and the tests that exercise it hardest run
# against it: the harness fails a test whose gateway printed DATA RACE.
race:
	$(GO) build -race -o $(RACE_BIN) ./cmd/caddy
	$(GO) test -race -count=1 ./billing/ ./keys/
	GATEWAY_TEST_BINARY=$(CURDIR)/$(RACE_BIN) $(GO) test -count=1 -timeout 45m -run '$(RACE_TESTS)' ./integration/

# The whole integration suite once more with every gateway on PostgreSQL
# (about 6 minutes on two cores; PG_TESTS=<regexp> for a part): the
# harness starts a throwaway cluster (internal/pgtest) and gives each
# SQLite database a PostgreSQL one; tests about SQLite itself skip, saying
# why (integration/sqliteonly_test.go). The several-instance tests run on
# PostgreSQL in every run. The browser tests' browser runs in the SQLite
# run only (Chromium was some 40 % of a run's CPU; the pages ask the same
# API on either database): here each ends where it would start one,
# GATEWAY_TEST_BROWSER=on runs them whole.
PG_TESTS ?= .
test-postgres: build
	GATEWAY_TEST_DB=postgres GATEWAY_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 45m -run '$(PG_TESTS)' ./integration/

# Each fuzz target gets FUZZTIME on top of its seed corpus (which plain
# `go test` already runs). Go's fuzz engine can end a short run with a bare
# "context deadline exceeded" when its deadline falls mid-step (seen on a
# loaded machine, no input failing): such a run, and only such, runs again. Longer runs by hand:
#   go test -run='^$$' -fuzz=FuzzDecodeRequest -fuzztime=5m ./adapters/anthropic
# The targets are found in each package's test files as `go list` selects
# them (build constraints applied), not with `go test -list`, which linked a
# test binary for each of the 60-odd packages one after another before the
# first target ran (3m49s here at load 8; go vet's tests check keeps every
# func Fuzz* a well-formed target).
fuzz:
	@set -e; pkgs=$$($(GO) list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...); \
	echo "$$pkgs" | while read pkg dir files; do \
	  [ -n "$$files" ] || continue; \
	  for f in $$(cd $$dir && sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$files); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) -parallel=$(FUZZPARALLEL) $$pkg </dev/null >/tmp/fuzz.log 2>&1 || \
	    if grep -q 'context deadline exceeded' /tmp/fuzz.log && ! grep -q 'Failing input' /tmp/fuzz.log; then \
	      echo "fuzz $$f: the engine's deadline ended a step, with no failing input: once more"; \
	      $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) -parallel=$(FUZZPARALLEL) $$pkg </dev/null >/tmp/fuzz.log 2>&1 || { cat /tmp/fuzz.log; exit 1; }; \
	    else cat /tmp/fuzz.log; exit 1; fi; \
	  done; \
	done

# Benchmarks against plain Caddy reverse_proxy in the same run; QUICK=1 for
# the everyday two-minute version. Where PostgreSQL's binaries are installed
# (make test-deps), a second gateway on a throwaway PostgreSQL runs beside
# the SQLite one (POSTGRES=0 leaves it out). See bench/README.md.
POSTGRES ?= 1
bench: build
	$(GO) run ./bench/cmd/bench -build=false -bin $(BIN) $(if $(QUICK),-quick,) $(if $(and $(filter-out 0,$(POSTGRES)),$(wildcard /usr/lib/postgresql/*/bin/initdb)),-postgres,)

# The usage table at 10,000 and 10,000,000 rows: pages and the spend chart
# (building the large table takes a few minutes).
bench-store:
	$(GO) test -run='^$$' -bench=UsageAtScale -benchtime=2000x ./store/sqlite

# The usage store at 50 million rows (issue 34): bench/usagegen makes the data
# set in USAGE_DSN (a SQLite file, or a PostgreSQL URL with USAGE_DRIVER=postgres)
# and times the console's and API's reads on it. Tens of minutes and tens of GB
# at 50 million rows; USAGE_ROWS=1000000 for a quick look. See bench/README.md.
USAGE_DRIVER ?= sqlite
USAGE_ROWS ?= 50000000
bench-usage:
	@test -n "$(USAGE_DSN)" || { echo "set USAGE_DSN (a SQLite file or a PostgreSQL URL)"; exit 2; }
	$(GO) run ./bench/cmd/usagegen -driver $(USAGE_DRIVER) -dsn '$(USAGE_DSN)' -rows $(USAGE_ROWS) -measure 20

clean:
	rm -rf bin
