#include "specd/kernels/cpu_isa.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#if SPECD_ARM_ISA_LEVELS
#include <sys/auxv.h>
#endif

#include "isa_kernels.hpp"
#include "specd/error.hpp"

namespace specd::kernels {
namespace {

const cpu::IsaKernels& table_of(CpuIsa isa) {
  switch (isa) {
#if SPECD_X86_ISA_LEVELS
    case CpuIsa::kAvx512Bf16:
      return cpu::kAvx512Bf16Kernels;
    case CpuIsa::kAvx512Vbmi:
      return cpu::kAvx512VbmiKernels;
    case CpuIsa::kAvx512Vnni:
      return cpu::kAvx512VnniKernels;
    case CpuIsa::kAvx512:
      return cpu::kAvx512Kernels;
    case CpuIsa::kAvx2:
      return cpu::kAvx2Kernels;
#else
    case CpuIsa::kAvx512Bf16:
    case CpuIsa::kAvx512Vbmi:
    case CpuIsa::kAvx512Vnni:
    case CpuIsa::kAvx512:
    case CpuIsa::kAvx2:
      break;
#endif
#if SPECD_ARM_ISA_LEVELS
    case CpuIsa::kNeonDotprod:
      return cpu::kNeonDotprodKernels;
    case CpuIsa::kNeon:
      return cpu::kNeonKernels;
#else
    case CpuIsa::kNeonDotprod:
    case CpuIsa::kNeon:
      break;
#endif
    case CpuIsa::kScalar:
      break;
  }
  return cpu::kScalarKernels;
}

// Whether this CPU (and the OS, which must save the vector state) can run `isa`.
bool cpu_runs(CpuIsa isa) noexcept {
#if SPECD_X86_ISA_LEVELS
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the vector state (XGETBV).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
  const bool vbmi = vnni && __builtin_cpu_supports("avx512vbmi");
  const bool bf16 = vbmi && __builtin_cpu_supports("avx512bf16");
  switch (isa) {
    case CpuIsa::kAvx512Bf16:
      return bf16;
    case CpuIsa::kAvx512Vbmi:
      return vbmi;
    case CpuIsa::kAvx512Vnni:
      return vnni;
    case CpuIsa::kAvx512:
      return avx512;
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kNeon:
    case CpuIsa::kNeonDotprod:
      return false;
  }
  return false;
#elif SPECD_ARM_ISA_LEVELS
  // Advanced SIMD is part of every AArch64 CPU; the dot product is a HWCAP bit.
  switch (isa) {
    case CpuIsa::kScalar:
    case CpuIsa::kNeon:
      return true;
    case CpuIsa::kNeonDotprod:
      return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    default:
      return false;
  }
#else
  return isa == CpuIsa::kScalar;
#endif
}

CpuIsa detect() noexcept {
  CpuIsa best = CpuIsa::kScalar;
  for (CpuIsa isa : kAllCpuIsas)
    if (cpu_runs(isa)) best = isa;
  return best;
}

std::atomic<const cpu::IsaKernels*> g_active{nullptr};
std::once_flag g_init;

void check_supported(CpuIsa isa, const std::string& source) {
  if (!cpu_runs(isa)) {
    throw Error(ErrorCode::kUnsupported, source + " asks for the " + std::string(cpu_isa_name(isa)) +
                                             " kernels, but this CPU supports at most " +
                                             std::string(cpu_isa_name(detected_cpu_isa())));
  }
}

void init_from_env() {
  CpuIsa isa = detected_cpu_isa();
  if (const char* env = std::getenv("SPECD_CPU_ISA"); env != nullptr && *env != '\0') {
    isa = parse_cpu_isa(env);
    check_supported(isa, "SPECD_CPU_ISA=" + std::string(env));
  }
  g_active.store(&table_of(isa));
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Vnni:
      return "avx512_vnni";
    case CpuIsa::kAvx512Vbmi:
      return "avx512_vbmi";
    case CpuIsa::kAvx512Bf16:
      return "avx512_bf16";
    case CpuIsa::kNeon:
      return "neon";
    case CpuIsa::kNeonDotprod:
      return "neon_dotprod";
  }
  return "unknown";
}

CpuIsa parse_cpu_isa(std::string_view text) {
  std::string names;
  for (CpuIsa isa : kAllCpuIsas) {
    if (text == cpu_isa_name(isa)) return isa;
    names += (names.empty() ? "" : ", ") + std::string(cpu_isa_name(isa));
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown CPU instruction-set level '" + std::string(text) + "' (expected one of " + names + ")");
}

CpuIsa detected_cpu_isa() noexcept {
  static const CpuIsa isa = detect();
  return isa;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : kAllCpuIsas)
    if (cpu_runs(isa)) out.push_back(isa);
  return out;
}

CpuIsa active_cpu_isa() {
  return cpu::active_kernels().isa;
}

void set_cpu_isa(CpuIsa isa) {
  check_supported(isa, "set_cpu_isa");
  std::call_once(g_init, [] {});  // an explicit choice wins over SPECD_CPU_ISA
  g_active.store(&table_of(isa));
}

namespace cpu {
const IsaKernels& active_kernels() {
  std::call_once(g_init, init_from_env);
  return *g_active.load(std::memory_order_relaxed);
}

int64_t act_row_bytes(DType w, int64_t k) {
  switch (w) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return k * 4;  // F32, or bf16-rounded F32 / bf16 pairs
    case DType::kQ8_0:
    case DType::kQ4_0:
      return std::max(q8_act_bytes(k), q8_g16_act_bytes(k));
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ3_K:
    case DType::kQ2_K:
      return q8k_act_bytes(k);
  }
  return 0;
}
}  // namespace cpu

}  // namespace specd::kernels
