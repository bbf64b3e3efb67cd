# Barn — lab recipes and the development gate. `make help` lists the targets.
SHELL := /bin/bash
MODULES := lib barn-inventory barn-plan barn-node barn-net barn-repo barn-state testscripts
TOOLS := barn-inventory barn-plan barn-node barn-net barn-repo barn-state
GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X barn.dev/lib/tool.Version=$(VERSION)

.PHONY: help build test test-units test-ansible check fmt vet clean cross deps ci ci-tests image e2e e2e-arm64 e2e-next e2e-hut bench golden-update race race-pass

help: ## List the targets
	@grep -hE '^[a-z][a-z0-9-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## Build every tool into bin/
	@mkdir -p bin
	@for t in $(TOOLS); do $(GO) build -ldflags '$(LDFLAGS)' -o bin/$$t ./$$t || exit 1; done

# The Ansible suites (lib/inventory: the cross-check of every real inventory
# and the differential suite of generated ones, against ansible-core run in
# process; lib/guest: the connection export read and run by real ansible,
# ansible-inventory and ansible-playbook, and as root live against decoy sshds in a network
# namespace, TestAnsibleExportDecoyNetns, ~2.5 min) are required here: a missing Ansible fails instead of skipping.
# They run verbosely on their own so their agreement and refusal counts
# show in the output.
export BARN_REQUIRE_ANSIBLE ?= 1
ANSIBLE_SUITES := ^(TestAnsible|FuzzAnsible)

# Every test pass runs under scripts/test-guard.sh: it fails when a test
# leaves anything in /tmp or changes the work tree. Goldens are compared
# inside the one pass (BARN_UPDATE=1 rewrites them instead), so a stale
# golden fails the pass and no second pass is needed to find it.
GUARD := scripts/test-guard.sh
# One `go test` over every module's packages (go.work): the packages of all
# modules share the cores instead of waiting module by module.
PKGS := $(foreach m,$(MODULES),./$(m)/...)
# A package binary's limit: go test's default 10 min is what barn-node/cli
# alone takes on a loaded 2-core machine; a slow machine is not a failure.
TEST_TIMEOUT ?= 30m

test: ## Run unit tests, fuzz seeds and the testscript suites of every module
	@$(GUARD) $(MAKE) -s --no-print-directory -j2 -O test-units test-ansible

# `test` without the guard, in two parts that run side by side. SKIP_RACED=1
# (what `make ci` sets) leaves out the packages `race` runs whole under the
# race detector, and barn-node's TestScripts and TestUpstream_* (its
# documented Barn 1.x behaviours), which `race` runs under it too: the
# same tests, proving more, need not run twice. The rest of
# barn-node/cli then runs in its own go test beside the others.
# WITH_E2E=1 (also `make ci`'s) leaves TestUninstall to `e2e`, which runs
# beside this pass.
RACED := barn.dev/lib/(state|lifecycle|imagecache|qmp|vm)|barn.dev/barn-plan/cli
UNIT_SKIP = $(ANSIBLE_SUITES)$(if $(WITH_E2E),|^TestUninstall$$)
test-units:
	@if [ -z "$(SKIP_RACED)" ]; then exec $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '$(UNIT_SKIP)' $(PKGS); fi; \
		pkgs=$$($(GO) list $(PKGS) | grep -vxE '$(RACED)|barn.dev/barn-node/cli'); \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '$(UNIT_SKIP)' $$pkgs & a=$$!; \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '$(UNIT_SKIP)|^TestScripts$$|^TestUpstream_' ./barn-node/cli & b=$$!; \
		rc=0; wait $$a || rc=1; wait $$b || rc=1; exit $$rc
test-ansible:
	@set -o pipefail; cd lib && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v -run '$(ANSIBLE_SUITES)' ./inventory ./guest \
		| grep -vE '^=== (RUN|PAUSE|CONT|NAME)'

# The concurrency suites under the race detector: locks and the event log,
# batched lifecycle operations, parallel pulls, QMP and VM supervision, the
# planner's parallel audits, and barn-node's scripts (concurrent starts,
# crash recovery, the upstream behaviours: whole recreate under the
# destruction lock, --jobs) on the fake QEMU. About five minutes on two cores.
race: ## Run the concurrency suites under the race detector
	@$(GUARD) $(MAKE) -s --no-print-directory race-pass

race-pass:
	@cd lib && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./state ./lifecycle ./imagecache ./qmp ./vm
	@cd barn-plan && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./cli
	@cd barn-node && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run '^(TestScripts|TestUpstream_.*)$$' ./cli

# `make ci`'s test passes at once, the two guarded ones and the real-lab
# suite (output grouped per pass): much of all three is waiting on sshd,
# fake QEMUs, booting guests and child processes, which leaves the cores
# room for the others. No suite shares a host-wide object with another:
# each lab and the uninstall suite have their own namespace, barn-net run
# directory and bridge helper (testscripts/lab_test.go labNamespace), and
# /etc/qemu, which their namespaces mount over, is counted in e2e's one
# process.
ci-tests:
	@$(MAKE) --no-print-directory -j3 -O test race e2e SKIP_RACED=1 WITH_E2E=1

fmt: ## Check formatting (gofmt)
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# One go vet over every module's packages (go.work), not one per module:
# the packages share one package load and the cores.
vet: ## Run go vet on every module
	@$(GO) vet $(PKGS)

# macOS is a supported host: its code must build and vet (both Mac CPUs).
# One go vet per CPU over every module, the two side by side.
cross: ## go vet every module for macOS (GOOS=darwin, amd64 and arm64)
	@pids=(); for a in amd64 arm64; do GOOS=darwin GOARCH=$$a $(GO) vet $(PKGS) & pids+=($$!); done; \
		rc=0; for p in $${pids[@]}; do wait $$p || rc=1; done; exit $$rc

golden-update: ## Rewrite every golden file from the current output (BARN_UPDATE=1); review with git diff
	@BARN_UPDATE=1 $(GO) test -count=1 -skip '$(ANSIBLE_SUITES)' $(PKGS) >/dev/null || true
	@git status --short

check: fmt vet test ## gofmt, vet and the tests

clean: ## Remove bin/
	rm -rf bin

deps: ## Install the host packages the suites need (root on Debian)
	@scripts/install-deps.sh

image: build ## Build (or reuse) the local Debian 12 guest image repository with its arm64 variant, and the host-under-test images (cached by recipe hash); prints their paths
	@scripts/build-image.sh --arm64
	@scripts/build-hostimage.sh

# The real-lab scripts (testdata/lab: lab_single, lab_lifecycle,
# lab_rehearse), both host-under-test guests (NetworkManager with
# firewalld; networkd, with the kernel's network faults) and the uninstall
# suite. -parallel 5: every lab script and both guests boot at once; they
# wait on guests far more than they compute.
e2e: build ## Run the real-lab suite, both host-under-test guests and the uninstall suite (root, QEMU under TCG, the local images, private netns)
	@repo=$$(scripts/build-image.sh --arm64) && hut=$$(scripts/build-hostimage.sh) && cd testscripts && \
		BARN_TEST_REPO=$$repo BARN_TEST_HUT=$$hut $(GO) test -count=1 -timeout 60m -parallel 5 -run '^(TestLab|TestUninstall|TestHostUnderTest|TestHostUnderTestNetworkd)$$' -v .

e2e-next: build ## Run real-QEMU hot-plug outside make ci: experimental (lib/vm TestRealQEMUHotplug; root, TCG)
	@cd lib && BARN_TEST_NEXT=1 $(GO) test -count=1 -run '^TestRealQEMUHotplug$$' -v ./vm

# The hosts under test (issue 23) alone: NetworkManager/firewalld and
# networkd in Debian 12 guests with systemd as PID 1, each its own go test,
# side by side (both are in `make e2e` too); BARN_TEST_HUT_PARTS picks parts.
e2e-hut: build ## Run barn-net against the real NetworkManager, firewalld and networkd in host-under-test guests (root; builds their images once)
	@hut=$$(scripts/build-hostimage.sh) && cd testscripts && \
		BARN_TEST_HUT=$$hut $(GO) test -count=1 -timeout 90m -run '^TestHostUnderTest(Networkd)?$$' -v .

e2e-arm64: build ## Run the 2-node arm64 lab (qemu-system-aarch64 under TCG; builds the arm64 d12 variant first, once: 2 h 12 min measured here)
	@repo=$$(scripts/build-image.sh --arm64) && cd testscripts && BARN_TEST_REPO=$$repo BARN_TEST_ARM64=1 $(GO) test -count=1 -timeout 60m -run '^TestArm64Lab$$' -v .

ci: deps build image fmt vet cross ci-tests ## The test command: install prerequisites, build the image, run every suite (concurrency suites also under -race)

# --- The demo lab and the workstation recipes --------------------------------
.PHONY: demo demo-down up plan status down uninstall

demo: ## Bring up the 3-node Pigsty demo lab in netns barn-demo (root; TCG without KVM)
	@scripts/demo.sh up

demo-down: ## Destroy the demo lab, its network and namespace (images stay cached)
	@scripts/demo.sh down

# Workstation recipes: a user's own inventory on the real host network (no
# namespace; KVM when present). The host network is a one-time, reversible
# `sudo bin/barn-net install`; the image catalog is `bin/barn-repo update`.
.PHONY: _inventory
_inventory:
	@test -n "$(INVENTORY)" || { echo "make: INVENTORY is not set; usage: make $(MAKECMDGOALS) INVENTORY=path/to/pigsty.yml" >&2; exit 2; }
	@test -f "$(INVENTORY)" || { echo "make: INVENTORY=$(INVENTORY): no such file" >&2; exit 2; }

up: _inventory build ## Create/start the lab of INVENTORY=path: resolve | plan | apply
	@set -o pipefail; bin/barn-inventory resolve -f "$(INVENTORY)" | bin/barn-plan | bin/barn-node apply --text

plan: _inventory build ## Show what `make up INVENTORY=path` would do (read-only)
	@set -o pipefail; bin/barn-inventory resolve -f "$(INVENTORY)" | bin/barn-plan --text

status: build ## Show the applied lab with a live audit (barn-node status)
	@bin/barn-node status --text

down: build ## Destroy the applied lab (asks; FORCE=1 skips; persistent disks are kept)
	@bin/barn-node destroy --text $(if $(FORCE),--force)

uninstall: build ## Leave the machine as before Barn (asks; PURGE=1 also deletes persistent disks and keys, IMAGES=1 the image cache)
	@scripts/uninstall.sh $(if $(PURGE),--purge) $(if $(IMAGES),--images) $(if $(FORCE),--yes)

bench: build ## Run every benchmark once and write docs/BENCHMARKS.md (BENCH_QUICK=1: 128 MiB hash; BENCH_LAB=0: no real lab)
	@scripts/bench.sh
