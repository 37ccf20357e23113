# provgate developer targets. `make test` is what CI runs (.ci/run).

GO       ?= go
GOBIN    := $(shell $(GO) env GOPATH)/bin
OPA_VERSION := 1.22.2
OPA      ?= $(GOBIN)/opa
STATICCHECK_VERSION := 0.8.2
STATICCHECK ?= $(GOBIN)/staticcheck
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 30s
ARGS     ?=

.PHONY: run build dist test tools lint-tools lint bench fuzz clean

## run: build, then serve on https://127.0.0.1:8092 only (RUN_LISTEN; `provgate serve` alone listens on
## every interface, :8092) with data in ./provgate-data; ARGS adds serve flags. Ctrl-C stops it with status 0:
## in the foreground of a terminal the server runs as its own job (set -m), so the interrupt reaches it
## alone and make reports its exit status instead of dying of the signal itself (ps's "+" marks the
## foreground; in the background, or without ps, it runs as before).
RUN_LISTEN ?= 127.0.0.1:8092
RUN_BIN    ?= bin/provgate
run: build
	@if [ -t 0 ] && ps -o stat= -p $$$$ 2>/dev/null | grep -q '+'; then set -m; fi; \
		$(RUN_BIN) serve --listen $(RUN_LISTEN) $(ARGS)

## build: build bin/provgate
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/provgate ./cmd/provgate

## dist: static release binaries (CGO_ENABLED=0) with the version stamped, one tarball per
## platform (the binary, LICENSE, README.md, the systemd unit, its environment file and the
## sample configuration file) and
## SHA256SUMS, in $(DIST); e.g. make dist VERSION=v1.2.3
DIST           ?= dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64
dist:
	@set -e; rm -rf "$(DIST)"; mkdir -p "$(DIST)"; \
	for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=provgate-$(VERSION)-$$os-$$arch; \
		echo "building $$name"; mkdir -p "$(DIST)/$$name"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' \
			-o "$(DIST)/$$name/provgate" ./cmd/provgate; \
		cp LICENSE README.md deploy/provgate.service deploy/provgate.env deploy/provgate.yaml "$(DIST)/$$name/"; \
		tar -C "$(DIST)" --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' \
			-czf "$(DIST)/$$name.tar.gz" "$$name"; \
		rm -rf "$(DIST)/$$name"; \
	done; \
	cd "$(DIST)" && sha256sum *.tar.gz > SHA256SUMS && cat SHA256SUMS

## tools: install the pinned opa CLI into $(GOBIN) through the Go toolchain
tools:
	@if ! "$(OPA)" version 2>/dev/null | grep -qx 'Version: $(OPA_VERSION)'; then \
		echo "installing opa v$(OPA_VERSION) into $(GOBIN)"; \
		$(GO) install github.com/open-policy-agent/opa@v$(OPA_VERSION); \
	fi

## lint-tools: install the pinned staticcheck into $(GOBIN) through the Go toolchain
lint-tools:
	@if ! "$(STATICCHECK)" -version 2>/dev/null | grep -q '($(STATICCHECK_VERSION))'; then \
		echo "installing staticcheck v$(STATICCHECK_VERSION) into $(GOBIN)"; \
		$(GO) install honnef.co/go/tools/cmd/staticcheck@v$(STATICCHECK_VERSION); \
	fi

## test: Go tests with the race detector, then the Rego test suites: the embedded ones against the
## embedded policy, each example extension's own with the embedded policy beside it (docs/policies.md)
## The race detector instruments every package but the SQLite engine, Go translated from C
## (modernc.org/...: its libc does its own memory management through unsafe pointers), which
## RACE_GCFLAGS compiles without race or checkptr instrumentation: under the race detector it was
## about a third of the CPU time of the SQLite end-to-end tests. The driver that calls it
## (github.com/glebarez/go-sqlite) and all the project's code stay instrumented.
RACE_GCFLAGS ?= modernc.org/...=-d=checkptr=0 -race=false
test: tools
	$(GO) test -race -gcflags='$(RACE_GCFLAGS)' -count=1 -timeout 40m ./...
	"$(OPA)" test policies/
	@for d in testdata/policy/extensions/*/; do \
		echo "opa test policies/ provgate_ext:$$d --run '^data\.provgate\.ext\.'"; \
		"$(OPA)" test policies/ "provgate_ext:$$d" --run '^data\.provgate\.ext\.' || exit 1; \
	done

## lint: formatting and static checks for Go (gofmt, vet, staticcheck) and Rego
lint: tools lint-tools
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; \
		if [ -n "$$out" ]; then echo "gofmt -l reports unformatted files:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	"$(STATICCHECK)" ./...
	@out="$$("$(OPA)" fmt --list policies testdata/policy)"; \
		if [ -n "$$out" ]; then echo "opa fmt --list reports unformatted files:"; echo "$$out"; exit 1; fi
	"$(OPA)" check --strict policies
	"$(OPA)" check --strict --schema policies/schema policies/ testdata/policy/extensions/

## bench: measure provgate against its own baseline (docs/benchmarks.md); PostgreSQL figures
## when PROVGATE_TEST_DATABASE is set; BENCHFLAGS adds flags, e.g. BENCHFLAGS='-leg 3s -rounds 7'
bench:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/provgate ./cmd/provgate
	$(GO) run ./cmd/provgate-bench -server bin/provgate -out docs/benchmarks.md $(BENCHFLAGS)

## fuzz: run each Go fuzz target for FUZZTIME (default 30s), one after the other (docs/reliability.md)
FUZZ_TARGETS := \
	./policies:FuzzCompileClaim \
	./policies/opa:FuzzClaimContains \
	./gateway/claims:FuzzDerive \
	./gateway/claims:FuzzPatchPointers \
	./gateway:FuzzHandlerKeys \
	./gateway/auth:FuzzAuthenticate \
	./backend:FuzzParseQuery \
	./backend/objects:FuzzPatch \
	./backend/render:FuzzRenderCaller \
	./backend/pools:FuzzParseBody \
	./backend/license:FuzzVerify
fuzz:
	@set -e; \
	for t in $(FUZZ_TARGETS); do \
		dir=$${t%%:*}; target=$${t##*:}; \
		echo "fuzzing $$target in $$dir for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$dir; \
	done

## clean: remove build output (not the data dir)
clean:
	rm -rf bin dist
