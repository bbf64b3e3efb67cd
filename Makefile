# Barn — lab recipes and the development gate. `make help` lists the targets.
SHELL := /bin/bash
MODULES := lib barn-inventory barn-plan barn-node barn-net barn-repo barn-state testscripts
TOOLS := barn-inventory barn-plan barn-node barn-net barn-repo barn-state
GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X barn.dev/lib/tool.Version=$(VERSION)

.PHONY: help build test check fmt vet clean deps ci image e2e

help: ## List the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## Build every tool into bin/
	@mkdir -p bin
	@for t in $(TOOLS); do $(GO) build -ldflags '$(LDFLAGS)' -o bin/$$t ./$$t || exit 1; done

test: ## Run unit tests, fuzz seeds and the testscript suites of every module
	@for m in $(MODULES); do (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

fmt: ## Check formatting (gofmt)
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: ## Run go vet on every module
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

check: fmt vet test ## gofmt, vet and the tests

clean: ## Remove bin/
	rm -rf bin

deps: ## Install the host packages the suites need (root on Debian)
	@scripts/install-deps.sh

image: build ## Build (or reuse) the local Debian 12 guest image repository; prints its path
	@scripts/build-image.sh

e2e: build ## Run the real-lab suite (root, QEMU under TCG, the local image, a private netns)
	@repo=$$(scripts/build-image.sh) && cd testscripts && BARN_TEST_REPO=$$repo $(GO) test -count=1 -timeout 60m -run TestLab -v .

ci: deps build check e2e ## The test command: install prerequisites, build, run every suite
