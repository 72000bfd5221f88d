# specd_add_plugin(<name> SOURCES <file>... [CUDA_SOURCES <file>...] [LIBS <lib>...]
#                  [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds a specd plugin: a MODULE library linked against specd::sdk only, with hidden
# visibility and a version script so that it exports nothing but specd_plugin_entry_v<major>.
# Used in-tree and, installed with the SDK, by third parties after find_package(specd_sdk).
# CUDA_SOURCES are compiled only when the CUDA language is enabled in the calling project;
# the plugin then records the CUDA runtime major it was built for.

function(specd_add_plugin name)
  cmake_parse_arguments(P "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;CUDA_SOURCES;LIBS" ${ARGN})
  set(_sources ${P_SOURCES})
  get_property(_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(_with_cuda OFF)
  if(P_CUDA_SOURCES AND "CUDA" IN_LIST _languages)
    list(APPEND _sources ${P_CUDA_SOURCES})
    set(_with_cuda ON)
  endif()
  add_library(${name} MODULE ${_sources})
  target_link_libraries(${name} PRIVATE specd::sdk ${P_LIBS})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY})
  elseif(DEFINED SPECD_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${SPECD_PLUGIN_OUTPUT_DIR})
  endif()
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${name} PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_FUNCTION_LIST_DIR}/specd_plugin.map" "LINKER:--no-undefined")
  endif()
  if(_with_cuda)
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(${name} PRIVATE CUDA::cudart_static)
    string(REGEX MATCH "^[0-9]+" _cuda_major "${CUDAToolkit_VERSION}")
    target_compile_definitions(${name} PRIVATE SPECD_PLUGIN_WITH_CUDA=1
                               SPECD_PLUGIN_CUDA_RUNTIME_MAJOR=${_cuda_major})
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  endif()
  if(DEFINED SPECD_PLUGIN_INSTALL_DIR AND NOT P_NO_INSTALL)
    install(TARGETS ${name} LIBRARY DESTINATION ${SPECD_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
