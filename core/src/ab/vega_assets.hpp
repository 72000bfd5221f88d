// Vega and Vega-Lite (npm packages `vega` and `vega-lite`, BSD-3-Clause, University of
// Washington Interactive Data Lab), compiled into specd so that `specd ab report --html` writes
// a page that works offline. The minified UMD builds are embedded at build time from
// tools/node_modules (installed by scripts/bootstrap.sh from tools/package.json); a build
// configured without them has none, and the HTML report is refused.
#pragma once

#include <string_view>

namespace specd::ab {

struct VegaAssets {
  std::string_view vega;       // build/vega.min.js
  std::string_view vega_lite;  // build/vega-lite.min.js
  std::string_view vega_version;
  std::string_view vega_lite_version;
};

// nullptr when this build has no Vega.
const VegaAssets* vega_assets();

}  // namespace specd::ab
