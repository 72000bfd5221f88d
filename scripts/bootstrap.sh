#!/usr/bin/env bash
# Installs what specd needs on Debian 12, for one purpose at a time. Idempotent: packages
# already present are skipped, npm tools are installed only when missing.
#   bootstrap.sh demo     build specd and run scripts/demo.sh (make demo): compilers, libraries,
#                         curl and python3 (the demo's request and tables)
#   bootstrap.sh [test]   everything make test uses (the default): the demo's packages, the oracles
#                         the tests compare against (numpy, jinja2, promtool, chromium) and the
#                         aarch64 cross compiler with qemu-user for the emulated kernel suite
#   bootstrap.sh train    retrain the bundled models (make train, tools/train/README.md): PyTorch
#                         and the Python documentation the corpus is made of
# test and train also install Node.js and the npm tools of tools/package.json (the tests'
# tokenizer oracle and tokenizer files, the OpenAI client, Vega for `specd ab report --html`;
# train encodes its corpus with them). A demo build has no HTML A/B reports (the build says so).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-test}"
case "$what" in
  demo | test | train) ;;
  *)
    echo "usage: bootstrap.sh [demo|test|train] (got '$what')" >&2
    exit 2
    ;;
esac

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-dev libboost-filesystem-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libcli11-dev libpcre2-dev libicu-dev
  libopenmpi-dev openmpi-bin curl python3
)
case "$what" in
  test)
    # clang, clang-format and clang-tidy (lint.format, make lint, the fuzz preset), the tests'
    # oracles (python3-jsonschema: the structured-output schema suite), and the kernel suite
    # built for aarch64 and run under emulation (tests/kernels/aarch64).
    packages+=(clang clang-format clang-tidy lld libclang-rt-14-dev python3-numpy python3-jinja2 python3-jsonschema
      prometheus chromium g++-aarch64-linux-gnu qemu-user)
    ;;
  train)
    # OpenBLAS: PyTorch's matrix products go through libblas.so.3, which without it is the
    # reference BLAS (tools/train/eagle3.py ran 17 s per step on it, about 1.5 s on OpenBLAS).
    packages+=(python3-numpy python3-torch python3-doc libopenblas0-pthread)
    ;;
esac
# Node.js: keep an existing install (nodesource's nodejs bundles npm and conflicts with
# Debian's npm package); otherwise take Debian's (about 500 packages: not for the demo).
if [ "$what" != demo ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
  packages+=(nodejs npm)
fi

sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap ($what): installing ${#missing[@]} Debian packages (a minute or two on a fresh machine): ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "bootstrap: system packages present"
fi

# npm tools used by the tests (tokenizer oracle, OpenAI client) and by `specd ab report --html`
# (Vega and Vega-Lite, inlined into the page at build time). Installed into tools/, git-ignored,
# from tools/package.json; configure after this so the build finds Vega.
if [ "$what" != demo ] && [ -f "$here/tools/package.json" ]; then
  if [ ! -d "$here/tools/node_modules" ] || [ "$here/tools/package.json" -nt "$here/tools/node_modules/.stamp" ]; then
    (cd "$here/tools" && npm install --no-audit --no-fund --loglevel=error && touch node_modules/.stamp)
  else
    echo "bootstrap: npm tools present"
  fi
fi
