// The AVX-512 F/BW/VL/DQ + VNNI (Cascade Lake, Cooper Lake) level: isa_avx512_level.hpp compiled with
// this level's flags (kernels/CMakeLists.txt).
#define SPECD_AVX512_TABLE kAvx512VnniKernels
#define SPECD_AVX512_ISA CpuIsa::kAvx512Vnni
#include "isa_avx512_level.hpp"
