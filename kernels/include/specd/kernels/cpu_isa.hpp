// Instruction-set levels of the CPU kernels, picked at run time by CPU feature, not by
// generation. Each level is the one before it plus features:
//
//   avx512_bf16  + BF16 (vdpbf16ps)          Zen 4 and later, Sapphire Rapids and later
//   avx512_vbmi  + VBMI (byte permutes)      Ice Lake, Tiger Lake, Rocket Lake
//   avx512_vnni  + VNNI (vpdpbusd)           Cascade Lake, Cooper Lake
//   avx512       AVX-512 F/BW/VL/DQ          Skylake-SP (Xeon Scalable 1st gen)
//   avx2         AVX2 + FMA + F16C           Haswell and later, Zen 1-3
//   neon_dotprod + SDOT (ARMv8.2 dotprod)    Graviton 2+, Neoverse N1/V1+, Apple M1+ (aarch64)
//   neon         AArch64 Advanced SIMD       any aarch64 CPU
//   scalar       portable C++ (any CPU); also the reference of the others
//
// The best level the CPU supports is used unless SPECD_CPU_ISA=<level> (read once, at first use)
// or set_cpu_isa() asks for another one it supports. Asking for a level the CPU lacks is an
// error naming the level and the CPU's best one, never an illegal instruction.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specd::kernels {

enum class CpuIsa { kScalar, kAvx2, kAvx512, kAvx512Vnni, kAvx512Vbmi, kAvx512Bf16, kNeon, kNeonDotprod };

// Every level, lowest first (a CPU runs the x86 ones or the ARM ones).
inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::kScalar,     CpuIsa::kNeon,      CpuIsa::kNeonDotprod,
                                         CpuIsa::kAvx2,       CpuIsa::kAvx512,    CpuIsa::kAvx512Vnni,
                                         CpuIsa::kAvx512Vbmi, CpuIsa::kAvx512Bf16};

std::string_view cpu_isa_name(CpuIsa isa) noexcept;
// A level's name ("avx512_vnni"); throws specd::Error(kInvalidArgument) naming the text.
CpuIsa parse_cpu_isa(std::string_view text);

// The best level this CPU supports.
CpuIsa detected_cpu_isa() noexcept;
// The CPU's model name as the OS reports it ("AMD EPYC 9R14"; /proc/cpuinfo), or "unknown".
std::string cpu_model_name();
// Every level this CPU can run, lowest first (always includes kScalar).
std::vector<CpuIsa> supported_cpu_isas();
// The level the kernels use now.
CpuIsa active_cpu_isa();
// Switches the kernels to `isa`. Throws specd::Error(kUnsupported) naming the level and the
// CPU's best one when the CPU cannot run it. Not thread-safe with running kernels: call it
// between forwards (tests, start-up).
void set_cpu_isa(CpuIsa isa);

}  // namespace specd::kernels
