// NCCL for CUDA ranks (CUDA builds where NCCL was found: SPECD_WITH_NCCL). One CUDA device per
// rank. Collectives take device pointers and are enqueued on the stream set with set_stream
// (default: the legacy default stream); they return before the data is ready.
//
// all_reduce_sum keeps the Communicator contract (rank-ordered, batch invariant): an NCCL
// all-gather of every rank's data followed by one kernel that sums the parts in rank order
// (ncclAllReduce picks ring or tree by message size, and with it the order of the sum).
#pragma once

#include <memory>

#include "dist/communicator.hpp"

namespace specd::dist {

// Collective over `bootstrap` (its ranks become this communicator's): rank 0 creates the NCCL
// id and broadcasts it over `bootstrap`; each rank binds CUDA device `device`. `bootstrap` must
// outlive the result (abort() goes through it). Throws specd::Error naming the CUDA or NCCL call
// that failed, e.g. on a machine without a GPU.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);

}  // namespace specd::dist
