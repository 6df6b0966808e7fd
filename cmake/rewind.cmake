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
# *_avxvnni.cpp (AVX2 + AVX-VNNI) and *_avx512vnni.cpp (AVX2 + AVX-512 F/BW/VL/VNNI, kept to 256-bit
# registers: the compiler's own vectorising would otherwise use zmm, which slows the clock of some Xeons);
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

function(rewind_module name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(NOT sources)  # a module with headers only
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${name} PRIVATE ${REWIND_COMMON_FLAGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
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
