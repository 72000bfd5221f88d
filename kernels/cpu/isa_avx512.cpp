// The AVX-512 F/BW/VL/DQ (Skylake-SP): no VNNI, VBMI or BF16 level: isa_avx512_level.hpp compiled with
// this level's flags (kernels/CMakeLists.txt).
#define SPECD_AVX512_TABLE kAvx512Kernels
#define SPECD_AVX512_ISA CpuIsa::kAvx512
#include "isa_avx512_level.hpp"
