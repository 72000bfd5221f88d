# Installs specd into a fresh prefix, builds the embedding example against it with clang++ (a
# different compiler than the library's g++), and runs it.
# Inputs: BUILD_DIR, PREFIX, EXAMPLE_SRC, EXAMPLE_BUILD, FIXTURE, SPECD, MODEL.
file(REMOVE_RECURSE ${PREFIX} ${EXAMPLE_BUILD})
find_program(CLANGXX NAMES clang++ clang++-14 clang++-15 clang++-16 REQUIRED)

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
foreach(f include/specd/engine.hpp include/specd/config.hpp include/specd/serving_engine.hpp
          include/specd/tokenizer.hpp lib/libspecd.so lib/cmake/specd/specdConfig.cmake)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
# Every installed header compiles on its own: none reaches for a private one (core/src).
file(GLOB headers RELATIVE ${PREFIX}/include ${PREFIX}/include/specd/*.hpp)
foreach(h IN LISTS headers)
  run("compile ${h} alone" ${CLANGXX} -std=c++20 -fsyntax-only -I${PREFIX}/include -x c++ ${PREFIX}/include/${h})
endforeach()

run("configure example" ${CMAKE_COMMAND} -S ${EXAMPLE_SRC} -B ${EXAMPLE_BUILD} -G Ninja
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_PREFIX_PATH=${PREFIX})
run("build example" ${CMAKE_COMMAND} --build ${EXAMPLE_BUILD})

run("fixture" ${FIXTURE} --preset tiny --seed 3 --out ${MODEL})
set(prompt "The quick brown fox jumps over the lazy dog. The quick brown fox")
run("embed" ${EXAMPLE_BUILD}/embed ${MODEL} "${prompt}" 24)
set(embedded "${out}")
set(embed_err "${err}")
run("specd generate" ${SPECD} --log-level warn generate --model ${MODEL} --prompt "${prompt}" --max-tokens 24
    --temperature 0)
# generate ends its text with a newline; the example prints the bare text.
string(REGEX REPLACE "\n$" "" generated "${out}")
if(NOT embedded STREQUAL generated)
  message(FATAL_ERROR "the embedded engine's text differs from specd generate's:\n[${embedded}]\nvs\n[${generated}]")
endif()
if(NOT embed_err MATCHES "24 tokens \\(length\\), [0-9]+ of [0-9]+ drafts accepted; specd [0-9.]+, proposer ngram")
  message(FATAL_ERROR "the example did not report a speculative run:\n${embed_err}")
endif()
message(STATUS "embedded engine: [${embedded}]\n${embed_err}")
