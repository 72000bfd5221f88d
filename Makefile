# The two entry points of the README. Both run the idempotent bootstrap first, so each works
# on its own on a fresh Debian 12 machine, and each installs only what it uses.
#   make demo   install the build deps, build specd and its plugins, run scripts/demo.sh
#   make test   install the test deps too, build everything, run the whole test suite
#   make train  install PyTorch and the corpus, retrain the bundled models (tools/train)
PRESET ?= release
BUILD  := build/$(PRESET)
JOBS   ?= $(shell nproc)

.PHONY: bootstrap configure build build-runtime demo test train lint clean

BOOTSTRAP ?= test
bootstrap:
	bash scripts/bootstrap.sh $(BOOTSTRAP)

configure: bootstrap
	cmake --preset $(PRESET)

build: configure
	@echo "build: everything (about 400 steps: 10-12 minutes on 2 cores the first time, ccache after)"
	cmake --build $(BUILD) -j $(JOBS)

build-runtime: configure
	@echo "build: specd, its plugins and tools (about 200 steps: 4-5 minutes on 2 cores the first time)"
	cmake --build $(BUILD) -j $(JOBS) --target runtime

# The bundled default: configs/default.yaml on the models trained by tools/train (models/specd-py
# with its MTP heads, models/specd-py-draft; card: models/README.md). scripts/demo.sh completes a
# code prompt plain and with each proposer, prints speedups and acceptance, then serves one curl request.
demo: BOOTSTRAP := demo
demo: build-runtime
	bash scripts/demo.sh $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

# Retrains models/ (hours on 2 cores; stage times in models/README.md), then rewrites the model card.
train: BOOTSTRAP := train
train: build-runtime
	nice -n 19 /usr/bin/python3 tools/train/train.py
	nice -n 19 /usr/bin/python3 tools/train/eagle3.py --steps 2000 --regenerate 3000 --docs 0
	/usr/bin/python3 tools/train/model_card.py

# clang-format on every source file (also part of `make test`) and clang-tidy on core/ (slow:
# about 10 s per file per core); scripts/lint.sh.
lint: configure
	bash scripts/lint.sh $(BUILD)

clean:
	rm -rf $(BUILD)
