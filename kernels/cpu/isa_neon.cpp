// The ARM NEON level (any AArch64 CPU): isa_neon_level.hpp compiled without the dot-product
// extension (kernels/CMakeLists.txt).
#define SPECD_NEON_TABLE kNeonKernels
#define SPECD_NEON_ISA CpuIsa::kNeon
#include "isa_neon_level.hpp"
