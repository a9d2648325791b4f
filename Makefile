# Two commands do all set-up on a fresh machine with Rust installed:
#   make run    build everything and serve on 127.0.0.1:8080 (demo merchant + test key printed)
#   make test   build everything (components included) and run every test
SHELL := /bin/bash
CARGO ?= cargo
WASM_TARGET := wasm32-wasip2
COMPONENTS := collect simulator
TEST_COMPONENTS := hostile
COMPONENT_OUT := target/$(WASM_TARGET)/components
DATA_DIR ?= ./data

.PHONY: all run test components test-components toolchain lint fmt bench clean

all: components
	$(CARGO) build -p mmc-host

# rustup does not add a target to an already-installed toolchain by itself.
toolchain:
	@rustup target list --installed 2>/dev/null | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

components: toolchain
	$(CARGO) build --profile components --target $(WASM_TARGET) $(addprefix -p ,$(COMPONENTS))
	@mkdir -p target/components
	@for c in $(COMPONENTS); do cp $(COMPONENT_OUT)/$$c.wasm target/components/$$c.wasm; done

test-components: toolchain
	$(CARGO) build --profile components --target $(WASM_TARGET) $(addprefix -p ,$(TEST_COMPONENTS))
	@mkdir -p target/test-components
	@for c in $(TEST_COMPONENTS); do cp $(COMPONENT_OUT)/$$c.wasm target/test-components/$$c.wasm; done

run: components
	$(CARGO) build --release -p mmc-host
	./target/release/mmc serve --demo --data-dir $(DATA_DIR) --components-dir target/components

test: components test-components
	$(CARGO) test --workspace --exclude collect --exclude simulator --exclude hostile

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench: components
	./bench/run.sh

clean:
	$(CARGO) clean
