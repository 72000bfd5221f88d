// The AVX-512 F/BW/VL/DQ + VNNI + VBMI + BF16 (Zen 4, Sapphire Rapids) level: isa_avx512_level.hpp compiled with
// this level's flags (kernels/CMakeLists.txt).
#define SPECD_AVX512_TABLE kAvx512Bf16Kernels
#define SPECD_AVX512_ISA CpuIsa::kAvx512Bf16
#include "isa_avx512_level.hpp"
