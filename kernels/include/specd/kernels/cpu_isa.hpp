// Instruction-set levels of the CPU kernels, picked at run time.
//
//   avx512: AVX-512 F/BW/VL/DQ with VBMI, VNNI and BF16 (Zen 4 and later, Sapphire Rapids and later)
//   avx2:   AVX2 + FMA + F16C (Haswell and later, Zen 1-3)
//   scalar: portable C++ (any x86-64 or other CPU); also the reference of the others
//
// The best level the CPU supports is used unless SPECD_CPU_ISA=scalar|avx2|avx512 (read once,
// at first use) or set_cpu_isa() asks for a lower one. Asking for a level the CPU lacks is an
// error, never an illegal instruction.
#pragma once

#include <string_view>
#include <vector>

namespace specd::kernels {

enum class CpuIsa { kScalar, kAvx2, kAvx512 };

std::string_view cpu_isa_name(CpuIsa isa) noexcept;
// "scalar" / "avx2" / "avx512"; throws specd::Error(kInvalidArgument) naming the text.
CpuIsa parse_cpu_isa(std::string_view text);

// The best level this CPU supports.
CpuIsa detected_cpu_isa() noexcept;
// Every level this CPU can run, lowest first (always includes kScalar).
std::vector<CpuIsa> supported_cpu_isas();
// The level the kernels use now.
CpuIsa active_cpu_isa();
// Switches the kernels to `isa`. Throws specd::Error(kUnsupported) naming the level and the
// CPU's best one when the CPU cannot run it. Not thread-safe with running kernels: call it
// between forwards (tests, start-up).
void set_cpu_isa(CpuIsa isa);

}  // namespace specd::kernels
