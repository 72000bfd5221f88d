# The two entry points of the README. Both run the idempotent bootstrap first, so each works
# on its own on a fresh Debian 12 machine.
#   make demo   install deps, build, run the main job on the bundled default config
#   make test   install deps, build, run the whole test suite
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)

.PHONY: bootstrap configure build demo test lint clean

BOOTSTRAP ?= test
bootstrap:
	bash scripts/bootstrap.sh $(BOOTSTRAP)

configure: bootstrap
	cmake --preset $(PRESET)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The bundled default: configs/default.yaml on the models trained by tools/train (models/specd-py
# with its MTP heads, models/specd-py-draft; card: models/README.md). scripts/demo.sh completes a
# code prompt plain and with each proposer, prints speedups and acceptance, then serves one curl request.
demo: BOOTSTRAP := demo
demo: build
	bash scripts/demo.sh $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

# clang-format on every source file (also part of `make test`) and clang-tidy on core/ (slow:
# about 10 s per file per core); scripts/lint.sh.
lint: configure
	bash scripts/lint.sh $(BUILD)

clean:
	rm -rf $(BUILD)
