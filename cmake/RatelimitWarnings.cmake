# Warnings for the project's own targets (tests, examples, benchmarks); never imposed on users.
function(ratelimit_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow)
  if(RATELIMIT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
    # GCC 12 at -O3 reports libstdc++'s own `"literal" + std::string&&` as overlapping memcpy (GCC bug
    # 105329, a false positive): keep it a warning, never an error.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE -Wno-error=restrict)
    endif()
  endif()
endfunction()
