#!/usr/bin/env bash
# Installs everything specd needs to build and test on Debian 12. Idempotent: packages
# already present are skipped, npm tools are installed only when missing.
#   bootstrap.sh [test]   everything make test uses (the default)
#   bootstrap.sh demo     without the test-only cross tools (make demo)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
what="${1:-test}"
case "$what" in
  demo | test) ;;
  *)
    echo "usage: bootstrap.sh [demo|test] (got '$what')" >&2
    exit 2
    ;;
esac

packages=(
  build-essential cmake ninja-build ccache pkg-config clang lld libclang-rt-14-dev
  libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-dev libboost-filesystem-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libcli11-dev libpcre2-dev libicu-dev
  libopenmpi-dev openmpi-bin
  python3-numpy python3-jinja2 python3-torch python3-doc prometheus curl
  chromium
)
# The kernel suite built for aarch64 and run under emulation (tests/kernels/aarch64): test only.
if [ "$what" = test ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user)
fi
# Node.js: keep an existing install (nodesource's nodejs bundles npm and conflicts with
# Debian's npm package); otherwise take Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "bootstrap: system packages present"
fi

# npm tools used by the tests (tokenizer oracle, OpenAI client) and by `specd ab report --html`
# (Vega and Vega-Lite, inlined into the page at build time). Installed into tools/, git-ignored,
# from tools/package.json; configure after this so the build finds Vega.
if [ -f "$here/tools/package.json" ]; then
  if [ ! -d "$here/tools/node_modules" ] || [ "$here/tools/package.json" -nt "$here/tools/node_modules/.stamp" ]; then
    (cd "$here/tools" && npm install --no-audit --no-fund --loglevel=error && touch node_modules/.stamp)
  else
    echo "bootstrap: npm tools present"
  fi
fi
