// libspecd.so (specd::engine): the whole engine comes from specd_core, linked in whole; this file
// holds what only the shared library adds.
#include "specd/engine.hpp"

namespace specd {

const char* library_version() noexcept {
  return SPECD_VERSION;
}

}  // namespace specd
