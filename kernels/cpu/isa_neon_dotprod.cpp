// The ARM NEON + dot-product (ARMv8.2 FEAT_DotProd: SDOT) level: isa_neon_level.hpp compiled
// with -march=armv8.2-a+dotprod (kernels/CMakeLists.txt).
#define SPECD_NEON_TABLE kNeonDotprodKernels
#define SPECD_NEON_ISA CpuIsa::kNeonDotprod
#include "isa_neon_level.hpp"
