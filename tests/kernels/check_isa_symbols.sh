#!/usr/bin/env bash
# The per-ISA kernel files are compiled with AVX2 / AVX-512 flags. If one of them defined an
# external or weak symbol (an inline function or template instantiated there), the linker
# could pick that copy for the whole program and run AVX-512 code on a CPU without it. Each
# such object may define exactly its kernel table and nothing else.
set -euo pipefail
status=0
for obj in "$@"; do
  case "$obj" in *isa_avx2.cpp.o|*isa_avx512*.cpp.o) ;; *) continue ;; esac
  extra=$(nm -C --defined-only --extern-only "$obj" | grep -v -E ' specd::kernels::cpu::kAvx(2|512|512Vnni|512Vbmi|512Bf16)Kernels$' || true)
  if [ -n "$extra" ]; then
    echo "FAIL: $obj defines symbols other than its kernel table:" >&2
    echo "$extra" >&2
    status=1
  else
    echo "ok: $obj"
  fi
done
exit $status
