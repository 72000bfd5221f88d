#include "specd/kernels/aligned_buffer.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace specd::kernels {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

void AlignedFree::operator()(void* p) const noexcept {
  std::free(p);
}

AlignedBuffer allocate_aligned(size_t bytes) {
  const size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // a hint; failure is harmless
#endif
  return AlignedBuffer(static_cast<std::byte*>(p));
}

}  // namespace specd::kernels
