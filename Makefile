# leasehold: build, test and the local AWS stack.
#
# `make test` is the one command for the full suite: it installs and starts the
# local AWS stack (one moto server on 127.0.0.1 serving DynamoDB and SQS, see
# localstack/README.md), then vets and runs every test with the race detector.
# Targets marked `## ` are listed by `make help`.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO    ?= go
STACK := scripts/stack.sh

# Runs its arguments with the SDKs pointed at the local stack. Integration
# tests fail (instead of skipping) when LEASEHOLD_REQUIRE_STACK=1.
WITH_STACK = eval "$$($(STACK) env)" && export LEASEHOLD_REQUIRE_STACK=1 &&

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^## / {print substr($$0, 4)} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

## ---- local AWS stack (installs into the git-ignored .stack/) ----

.PHONY: stack-install stack-up stack-down stack-status
stack-install: ## install the pinned moto into .stack/venv (no-op when current)
	@$(STACK) install

stack-up: ## start the local stack on 127.0.0.1:4566 (LEASEHOLD_STACK_PORT) and create the resources
	@$(STACK) up

stack-down: ## stop the local stack
	@$(STACK) down

stack-status: ## show whether the local stack is installed and running
	@$(STACK) status

## ---- deployment template (tools install into the git-ignored .stack/tools-venv) ----

.PHONY: check-template
check-template: ## sam validate --lint, cfn-lint, checkov and an offline sam build of template.yaml
	@scripts/template-tools.sh check

## ---- Go ----

.PHONY: test unit vet bench build
# The bulk tests (thousands of tasks) flood the single local emulator; they
# run afterwards, on their own, so that the timing-sensitive tests (renewal,
# cancellation within one renewal period) never share the emulator with them.
LOAD_TESTS := TestBulkEnqueue5000ThenListAll|TestClientEnqueueManyThousands|TestEnqueueThousands
LOAD_PKGS  := . ./cmd/leasehold ./internal/dispatch

test: stack-up check-template ## template checks, then vet + all tests with -race against the local stack
	@$(WITH_STACK) $(GO) vet ./... && \
	  $(GO) test -race -count=1 -timeout 15m -skip '^($(LOAD_TESTS))$$' ./... && \
	  $(GO) test -race -count=1 -timeout 10m -run '^($(LOAD_TESTS))$$' $(LOAD_PKGS)

unit: ## tests that need no stack (-short); integration tests skip
	$(GO) test -race -short -count=1 ./...

vet: ## go vet
	$(GO) vet ./...

bench: ## benchmarks (those that need the stack skip unless it is configured)
	$(GO) test -run '^$$' -bench . -benchmem ./...

build: ## compile every package
	$(GO) build ./...

## ---- static checks and fuzzing (not part of `make test`) ----

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
FUZZTIME ?= 5s
FUZZ_TARGETS := \
	FuzzDecodeSubmission:./internal/token \
	FuzzDecode:./internal/token \
	FuzzDecodeListCursor:. \
	FuzzDecodeDynamoCursor:./internal/lease \
	FuzzParseLine:./internal/cli

fuzz-short: ## run every fuzz target for FUZZTIME (default 5s) each
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
