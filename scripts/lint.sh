#!/usr/bin/env bash
# `make lint`: the house style, checked.
#   1. clang-format (.clang-format) on every tracked C++/CUDA file: nothing to reformat. The test
#      suite runs this part too (ctest -R lint.format).
#   2. clang-tidy (.clang-tidy: bugprone, performance, naming, modernize-use-nullptr/override) on
#      every source file under core/, with the build's compile database. About 10 s per file on
#      one core, so it is not part of `make test`; run it before merging changes to core/.
# Usage: scripts/lint.sh BUILD_DIR [--format-only] [FILE...]   (files: limit clang-tidy to them)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:?usage: scripts/lint.sh BUILD_DIR [--format-only] [FILE...]}"
shift
format_only=0
if [ "${1:-}" = "--format-only" ]; then format_only=1; shift; fi

# The tracked sources (every source under the project's folders when this is not a git checkout).
list_sources() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files "$@"
  else
    find core kernels plugins sdk tests tools -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' \
      -o -name '*.cuh' \) -not -path '*/node_modules/*' | sort
  fi
}
mapfile -t sources < <(list_sources '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh' | grep -v '^tests/data/')
bad=()
for f in "${sources[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "lint: ${#bad[@]} file(s) are not formatted (run: clang-format -i FILE):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "lint: clang-format: ${#sources[@]} files formatted"
[ "$format_only" = 1 ] && exit 0

if [ ! -f "$build/compile_commands.json" ]; then
  echo "lint: $build/compile_commands.json is missing (configure with a preset: cmake --preset release)" >&2
  exit 2
fi
if [ "$#" -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(list_sources 'core/*.cpp' | grep '^core/.*\.cpp$')
fi
jobs="$(nproc)"
log="$(mktemp)"
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} clang-tidy -p "$build" --quiet {} >"$log" 2>/dev/null || true
findings="$(grep -cE '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log" || true)"
if [ "$findings" != 0 ]; then
  grep -E -A3 '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log"
  echo "lint: clang-tidy: $findings finding(s) in ${#files[@]} files"
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "lint: clang-tidy: ${#files[@]} files, no findings"
