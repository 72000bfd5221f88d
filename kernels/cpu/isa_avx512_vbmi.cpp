// The AVX-512 F/BW/VL/DQ + VNNI + VBMI (Ice Lake) level: isa_avx512_level.hpp compiled with
// this level's flags (kernels/CMakeLists.txt).
#define SPECD_AVX512_TABLE kAvx512VbmiKernels
#define SPECD_AVX512_ISA CpuIsa::kAvx512Vbmi
#include "isa_avx512_level.hpp"
