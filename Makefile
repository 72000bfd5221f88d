# The two entry points of the README. Both run the idempotent bootstrap first, so each works
# on its own on a fresh Debian 12 machine.
#   make demo   install deps, build, run the main job on the bundled default config
#   make test   install deps, build, run the whole test suite
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)

.PHONY: bootstrap configure build demo test clean

bootstrap:
	bash scripts/bootstrap.sh

configure: bootstrap
	cmake --preset $(PRESET)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/specd --version
	$(BUILD)/bin/specd plugins list
	$(BUILD)/bin/specd validate --config configs/default.yaml

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

clean:
	rm -rf $(BUILD)
