#include "ab/vega_assets.hpp"

// SPECD_VEGA_JS / SPECD_VEGA_LITE_JS: absolute paths of the minified builds, given by
// core/src/ab/CMakeLists.txt when it found them. The assembler's .incbin copies each file into
// .rodata at build time, followed by a NUL, between a begin and an end symbol.
#if defined(SPECD_VEGA_JS) && defined(SPECD_VEGA_LITE_JS)

#define SPECD_INCBIN(sym, file)     \
  __asm__(                          \
      ".section .rodata\n"          \
      ".global " #sym               \
      "_begin\n"                    \
      ".hidden " #sym               \
      "_begin\n"                    \
      ".balign 16\n" #sym           \
      "_begin:\n"                   \
      ".incbin \"" file             \
      "\"\n"                        \
      ".global " #sym               \
      "_end\n"                      \
      ".hidden " #sym "_end\n" #sym \
      "_end:\n"                     \
      ".byte 0\n"                   \
      ".previous\n")

SPECD_INCBIN(specd_vega_js, SPECD_VEGA_JS);
SPECD_INCBIN(specd_vega_lite_js, SPECD_VEGA_LITE_JS);

extern "C" {
extern const char specd_vega_js_begin[], specd_vega_js_end[];
extern const char specd_vega_lite_js_begin[], specd_vega_lite_js_end[];
}

namespace specd::ab {

const VegaAssets* vega_assets() {
  static const VegaAssets assets{
      {specd_vega_js_begin, static_cast<size_t>(specd_vega_js_end - specd_vega_js_begin)},
      {specd_vega_lite_js_begin, static_cast<size_t>(specd_vega_lite_js_end - specd_vega_lite_js_begin)},
      SPECD_VEGA_VERSION,
      SPECD_VEGA_LITE_VERSION};
  return &assets;
}

}  // namespace specd::ab

#else

namespace specd::ab {

const VegaAssets* vega_assets() {
  return nullptr;
}

}  // namespace specd::ab

#endif
