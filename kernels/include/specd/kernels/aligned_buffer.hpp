// Large, 2 MiB-aligned, owned memory for weights and benchmark buffers, with transparent
// huge pages requested (MADV_HUGEPAGE): streaming reads of gigabytes are TLB-bound on 4 KiB
// pages, notably inside virtual machines.
#pragma once

#include <cstddef>
#include <memory>

namespace specd::kernels {

struct AlignedFree {
  void operator()(void* p) const noexcept;
};
using AlignedBuffer = std::unique_ptr<std::byte[], AlignedFree>;

// Throws std::bad_alloc when the memory cannot be had. The contents are uninitialized.
AlignedBuffer allocate_aligned(size_t bytes);

}  // namespace specd::kernels
