# specd_add_verifier(<name>): builds plugins/verifiers/<name>/ as the plugin
# specd_verifier_<name> from <name>.cpp (CPU reference and dispatch) and <name>_cuda.cu (the
# kernel, compiled whenever the CUDA language is enabled), with this folder's shared headers.
#
# Floating point: CPU and CUDA must draw the same tokens for the same uniforms, so neither
# compiler may contract a*b+c into an FMA (verify_common.hpp also uses the non-contracting
# intrinsics on the device; the flags make it hold for any arithmetic added later).
# -fno-trapping-math only lets GCC if-convert and vectorize the branch-free entropy loop (we
# never read FP exception flags); it changes no result, unlike -ffast-math, which stays off.

function(specd_add_verifier name)
  set(target specd_verifier_${name})
  specd_add_plugin(${target} SOURCES ${name}.cpp CUDA_SOURCES ${name}_cuda.cu)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>
    $<$<COMPILE_LANGUAGE:CXX>:-fno-trapping-math>
    $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(SPECD_WERROR)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
  endif()
endfunction()
