# Warnings for the project's own targets (tests, examples, benchmarks); never imposed on users.
function(ratelimit_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow)
  if(RATELIMIT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
