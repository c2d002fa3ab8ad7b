# leasehold: build, test and the local AWS stack.
#
# `make test` is the one command for the full suite: it installs and starts the
# local AWS stack (LocalStack serving SQS and moto serving DynamoDB, both on
# 127.0.0.1, see localstack/README.md), then vets and runs every test with the
# race detector.
# Targets marked `## ` are listed by `make help`.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO    ?= go
STACK := scripts/stack.sh

# Runs its arguments with the SDKs pointed at the local stack. Integration
# tests fail (instead of skipping) when LEASEHOLD_REQUIRE_STACK=1.
# LEASEHOLD_TEST_TIMESCALE stretches every bound a test waits within (never
# what it checks), so a loaded machine makes a run slower, not red.
#
# It drops the stack's named table and queues (LEASEHOLD_TABLE and each
# LEASEHOLD_*_QUEUE_URL / *_DLQ_URL) that `stack.sh env` also prints: tests
# make their own, and a test's `leasehold run` that inherited
# LEASEHOLD_INTAKE_QUEUE_URL would serve the shared intake queue. The two
# tests that use the named ones (the README's and the `leasehold init`
# project's) point a fresh shell at them, as a reader does.
TEST_TIMESCALE ?= 3
WITH_STACK = eval "$$($(STACK) env)" && \
  for v in $${!LEASEHOLD_@}; do case $$v in LEASEHOLD_TABLE|LEASEHOLD_*_QUEUE_URL|LEASEHOLD_*_DLQ_URL) unset $$v;; esac; done && \
  export LEASEHOLD_REQUIRE_STACK=1 LEASEHOLD_TEST_TIMESCALE=$(TEST_TIMESCALE) &&

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^## / {print substr($$0, 4)} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

## ---- local AWS stack (installs into the git-ignored .stack/) ----

.PHONY: stack-install stack-up stack-down stack-status
stack-install: ## install pinned LocalStack (.stack/localstack-venv) and moto with the template tools (.stack/py-venv); no-op when current
	@$(STACK) install

stack-up: ## start LocalStack (SQS, 127.0.0.1:4566) and moto (DynamoDB, :4567) and create the resources
	@$(STACK) up

stack-down: ## stop the local stack
	@$(STACK) down

stack-status: ## show whether the local stack is installed and running
	@$(STACK) status

## ---- deployment template (tools install into the git-ignored .stack/py-venv, shared with moto) ----

.PHONY: check-template
check-template: ## sam validate --lint, cfn-lint, checkov and an offline sam build of template.yaml
	@scripts/template-tools.sh check

## ---- Go ----

.PHONY: test chromium unit vet bench build
# The bulk tests (thousands of tasks) flood the single local emulator; they
# run afterwards, on their own, so that the timing-sensitive tests (renewal,
# cancellation within one renewal period) never share the emulator with them.
LOAD_TESTS := TestBulkEnqueue5000ThenListAll|TestClientEnqueueManyThousands|TestEnqueueThousands
LOAD_PKGS  := . ./cmd/leasehold ./internal/dispatch
# Tests marked t.Parallel that run at once in a package. Most stack tests
# wait on the emulators rather than use the CPU: at 4 instead of the 2 cores'
# default the root package took 150 s instead of 236 s on a loaded machine,
# with no failure.
TEST_PARALLEL ?= 4

# Every step always runs, so a failure in one never hides another's result;
# the target fails if any did, and says which. The steps: finding (or
# installing) Chromium for the browser test, whose own failure under
# LEASEHOLD_REQUIRE_STACK=1 then says what is missing; all tests but the
# bulk ones; the bulk tests on their own (thousands of tasks flood the
# emulators); the allocation ceilings and the simulation's throughput ratios
# (TestThroughputSimRatio, docs/performance.md), both without the race
# detector; the chaos test at CI size (CHAOS_CI_TASKS, workers killed and
# paused behind a faulty network, docs/chaos.md); staticcheck and govulncheck
# (make lint); each fuzz target for FUZZTIME (make fuzz-short).
CHAOS_CI_TASKS ?= 200
CHAOS_CI_FLOW_TASKS ?= 100
# Tests that hold an allocation count: under -race they check the rest and
# leave the count to this step, run without the race detector (it adds its
# own allocations, and drops sync.Pool items at random).
ALLOC_TESTS = ^(TestProcessInlineAllocs|TestScanTakesEncodedTokens)$$
ALLOC_PKGS = ./internal/lifecycle ./internal/token
# Scale tests: a map of 100,000 children in memory. The race detector makes
# it 85 s instead of 12 (its paths run under the detector at 10,000), so it
# runs on its own without it, in make test and make bench.
SCALE_TESTS = ^TestEnvMapHundredThousand$$
SCALE_PKGS = ./leaseholdtest

test: stack-up check-template ## template checks, then vet + all tests with -race, chaos, lint and short fuzzing against the local stack
	@$(WITH_STACK) $(GO) vet ./... && \
	  failed=""; \
	  step() { local name=$$1 start=$$SECONDS; shift; echo "== $$name"; \
	    if "$$@"; then echo "== $$name: passed in $$((SECONDS - start))s"; else echo "== $$name: FAILED after $$((SECONDS - start))s"; failed="$$failed, $$name"; fi; }; \
	  step "chromium for the browser test (scripts/chromium.sh)" scripts/chromium.sh; \
	  step "go test (all but the bulk tests)" $(GO) test -race -count=1 -parallel $(TEST_PARALLEL) -timeout 15m -skip '^($(LOAD_TESTS))$$' ./...; \
	  step "go test (bulk tests, on their own)" $(GO) test -race -count=1 -timeout 10m -run '^($(LOAD_TESTS))$$' $(LOAD_PKGS); \
	  step "allocation ceilings (without the race detector, which allocates on its own)" $(GO) test -count=1 -run '$(ALLOC_TESTS)' $(ALLOC_PKGS); \
	  step "scale (a map of 100,000 children in memory, without the race detector)" $(GO) test -count=1 -run '$(SCALE_TESTS)' $(SCALE_PKGS); \
	  step "throughput ratios (the emulator-free simulation, without the race detector)" $(GO) test -count=1 -run '^TestThroughputSimRatio$$' .; \
	  step "chaos test ($(CHAOS_CI_TASKS) tasks, then flow control with $(CHAOS_CI_FLOW_TASKS))" env LEASEHOLD_CHAOS=1 LEASEHOLD_CHAOS_TASKS=$(CHAOS_CI_TASKS) \
	    LEASEHOLD_CHAOS_FLOW_TASKS=$(CHAOS_CI_FLOW_TASKS) LEASEHOLD_CHAOS_DIR=$(CURDIR)/.stack/chaos \
	    $(GO) test -race -count=1 -timeout 15m -run '^(TestChaos|TestChaosFlowControl)$$' ./internal/chaos; \
	  step "lint (staticcheck, govulncheck)" scripts/lint.sh; \
	  step "fuzz-short" $(MAKE) --no-print-directory fuzz-short; \
	  if [ -n "$$failed" ]; then echo "== make test: FAILED: $${failed#, }"; exit 1; fi; \
	  echo "== make test: every step passed"

chromium: ## find Chromium for the browser test (internal/cli/ui), installing it with apt-get when missing (make test does it as its first step)
	@scripts/chromium.sh

unit: ## tests that need no stack (-short); integration tests skip
	$(GO) test -race -short -count=1 ./...

vet: ## go vet
	$(GO) vet ./...

# make bench: the Go micro-benchmarks, then the cost harness on the local
# stack (internal/bench), which counts calls and write units per task and
# per workflow and rewrites the generated part of docs/performance.md. BENCH_TASKS per path.
BENCH_TASKS ?= 100
# Runs of each workflow shape (a 3-step and a 4-step chain, a 10-child
# fan-out/fan-in, a callback), priced next to Step Functions and durable
# functions.
BENCH_WORKFLOWS ?= 10
# Children of the map shape (workflow.Map, 50 at a time).
BENCH_MAP_CHILDREN ?= 1000
# Tasks per throughput run (bare SQS, naive idempotent and leasehold
# consumers, interleaved A B C, B C A, C A B); 0 skips the comparison.
BENCH_THROUGHPUT ?= 200
bench: stack-up ## micro-benchmarks, then calls, write units and cost per task on the local stack into docs/performance.md
	@mkdir -p .stack/bench
	$(GO) test -run '^$$' -bench . -benchmem ./internal/lifecycle ./internal/lease/... ./internal/eventsource > .stack/bench/micro.txt && cat .stack/bench/micro.txt
	$(GO) test -run '^$$' -bench '^BenchmarkThroughputSim$$' -benchtime 1x . | tee -a .stack/bench/micro.txt
	$(GO) test -run '^$$' -bench '^BenchmarkThroughputSimLambda$$' -benchtime 1x . | tee -a .stack/bench/micro.txt
	$(GO) test -run '^$$' -bench '^BenchmarkColdStart$$' -benchtime 200x ./functions/worker | tee -a .stack/bench/micro.txt
	@$(GO) test -count=1 -v -run '$(SCALE_TESTS)' $(SCALE_PKGS) > .stack/bench/scale.txt; rc=$$?; \
	  grep -E 'map of|^(ok|FAIL|--- )' .stack/bench/scale.txt | tee -a .stack/bench/micro.txt; exit $$rc
	@$(WITH_STACK) LEASEHOLD_BENCH_OUT=$(CURDIR)/docs/performance.md LEASEHOLD_BENCH_CHART=$(CURDIR)/docs/performance.png LEASEHOLD_BENCH_MICRO=$(CURDIR)/.stack/bench/micro.txt \
	  LEASEHOLD_BENCH_TASKS=$(BENCH_TASKS) LEASEHOLD_BENCH_WORKFLOWS=$(BENCH_WORKFLOWS) LEASEHOLD_BENCH_MAP_CHILDREN=$(BENCH_MAP_CHILDREN) LEASEHOLD_BENCH_THROUGHPUT=$(BENCH_THROUGHPUT) $(GO) test -count=1 -timeout 15m -run '^TestCost$$' -v ./internal/bench

build: ## compile every package
	$(GO) build ./...

## ---- chaos ----

# TestChaos (internal/chaos, docs/chaos.md): CHAOS_TASKS tasks through four
# worker processes that are killed and paused, behind a proxy that delays and
# resets their AWS calls; fails unless every task succeeded exactly once and
# every bad message is on the DLQ. Then TestChaosFlowControl: CHAOS_FLOW_TASKS
# tasks under a rate limit and a kind's concurrency limit, the queue paused
# and resumed. Evidence and logs stay in .stack/chaos/.
CHAOS_TASKS ?= 1000
CHAOS_FLOW_TASKS ?= 500

.PHONY: chaos
chaos: stack-up ## chaos test: CHAOS_TASKS (1000) tasks, workers killed and paused, network faults; nothing may be lost; then flow control (CHAOS_FLOW_TASKS)
	@$(WITH_STACK) LEASEHOLD_CHAOS=1 LEASEHOLD_CHAOS_TASKS=$(CHAOS_TASKS) LEASEHOLD_CHAOS_FLOW_TASKS=$(CHAOS_FLOW_TASKS) LEASEHOLD_CHAOS_DIR=$(CURDIR)/.stack/chaos \
	  $(GO) test -race -count=1 -v -timeout 75m -run '^(TestChaos|TestChaosFlowControl)$$' ./internal/chaos

## ---- static checks and fuzzing (also run by `make test`) ----

.PHONY: lint staticcheck govulncheck fuzz-short
lint: ## staticcheck + govulncheck, pinned, via the Go module proxy only (scripts/lint.sh)
	@scripts/lint.sh

staticcheck: ## staticcheck only
	@scripts/lint.sh staticcheck

govulncheck: ## govulncheck only, against a local copy of the Go vulnerability database
	@scripts/lint.sh govulncheck

# Each fuzz target runs on its own (go test -fuzz takes one target per
# package and invocation) for FUZZTIME; failures are saved under the
# package's testdata/fuzz and then replay in every plain `go test`.
# FUZZTIME is a count of inputs, not a duration: with a duration, Go 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# its clock runs out while a starved worker is mid-input (golang/go#75804,
# fixed in Go 1.27). A count has no clock to race; on a loaded machine it
# only takes longer.
FUZZTIME ?= 50000x
FUZZ_TARGETS := \
	FuzzDecodeSubmission:./internal/token \
	FuzzDecode:./internal/token \
	FuzzDecodeListCursor:. \
	FuzzDecodeDynamoCursor:./internal/lease \
	FuzzParseLine:./internal/cli \
	FuzzParse:./internal/schedule

fuzz-short: ## run every fuzz target for FUZZTIME (default 50000 inputs) each
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $${t%%:*} ($${t#*:}, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) "$${t#*:}" || exit 1; \
	done

## ---- demo ----

# The worker and the dispatcher run in one process through the off-Lambda
# runner; the demo sends example tasks with SQS SendMessage, shows their
# progress and exits 0 only if each ended as it should. Their JSON logs go
# to .stack/demo.log.
.PHONY: demo
demo: stack-up ## end-to-end demo on the local stack: example tasks, live progress, summary table
	@eval "$$($(STACK) env)" && $(GO) run ./cmd/leasehold-demo -log .stack/demo.log
