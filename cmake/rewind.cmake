# Project-wide compile settings and the helper that turns a source folder into a module library.

# -ffp-contract=off: the reference kernels, the fast kernels and the replay of recurrent records must round
# exactly as written; silent FMA contraction would make results depend on which file a loop lives in.
set(REWIND_COMMON_FLAGS -Wall -Wextra -Wshadow -ffp-contract=off -fno-math-errno)
if(REWIND_WERROR)
  list(APPEND REWIND_COMMON_FLAGS -Werror)
endif()
if(REWIND_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Files named *_avx2.cpp hold the AVX2/FMA/F16C paths; only they get those instructions, and dispatch.cpp
# calls them after checking the CPU at run time, so the binary still runs on a plain x86-64. The same holds for
# *_avxvnni.cpp (AVX2 + AVX-VNNI) and *_avx512vnni.cpp (AVX2 + AVX-512 F/BW/VL/VNNI; the compiler's own
# vectorising is kept to 256-bit registers, zmm slowing the clock of some Xeons, and only the k-quant panels
# use zmm, written by hand, where two runs of 32 values per instruction paid on Zen 4);
# *_vnni_emulated.cpp is plain AVX2.
set(REWIND_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(REWIND_AVXVNNI_FLAGS ${REWIND_AVX2_FLAGS} -mavxvnni)
set(REWIND_AVX512VNNI_FLAGS ${REWIND_AVX2_FLAGS} -mavx512f -mavx512bw -mavx512vl -mavx512vnni
    -mprefer-vector-width=256)
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag("-mmove-max=256 -mstore-max=256" REWIND_HAVE_MOVE_MAX)  # GCC 12+: inline copies too
if(REWIND_HAVE_MOVE_MAX)
  list(APPEND REWIND_AVX512VNNI_FLAGS -mmove-max=256 -mstore-max=256)
endif()

# A module exports one include root of its own, build/include_roots/<target>/, holding only a link to its folder
# (model -> src/model; kernels/ref -> src/kernels/ref) and links to the public headers it implements (API, paths
# under include/). A file then finds the headers of its module and of the modules it links, and nothing else:
# an include that goes upwards fails to compile ("file not found") even where it would happen to link.
function(rewind_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;PRIVATE_DEPS;API" ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/include_roots/${name})
  file(REMOVE_RECURSE ${root})  # so a folder or header no longer exported does not stay visible
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  foreach(link ${folder} ${ARG_API})
    get_filename_component(parent ${root}/${link} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
  endforeach()
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${root}/${folder} SYMBOLIC)
  foreach(header ${ARG_API})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/${header} ${root}/${header} SYMBOLIC)
  endforeach()

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT sources)  # a module with headers only
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${root})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${root})
  target_compile_options(${name} PRIVATE ${REWIND_COMMON_FLAGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  # Private: linked, but their headers are not in the include roots of the modules that use this one.
  target_link_libraries(${name} PRIVATE ${ARG_PRIVATE_DEPS})
  foreach(src ${sources})
    if(src MATCHES "_(avx2|vnni_emulated)\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${REWIND_AVX2_FLAGS}")
    elseif(src MATCHES "_avxvnni\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${REWIND_AVXVNNI_FLAGS}")
    elseif(src MATCHES "_avx512vnni\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${REWIND_AVX512VNNI_FLAGS}")
    endif()
  endforeach()
endfunction()
