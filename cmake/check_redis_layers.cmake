# The Redis backend's floors (include/ratelimit/redis/README.md "Layout"): a header includes headers of its own floor
# or lower, never one above it.
#   0 vocabulary  abi.hpp address.hpp options.hpp stats.hpp (plain data and its checks)
#   1 engine      engine/*.hpp (connections, pipelines, routes, script calls): outside redis/ only error.hpp,
#                 clock.hpp and ratelimit/detail/*.hpp, so it knows no policy, decision or key
#   2 support     detail/*.hpp, denial_cache.hpp, fallback.hpp, failure_report.hpp
#   3 limiters    redis_limiter.hpp, impl/redis_limiter.hpp, leased_limiter.hpp, concurrency_limiter.hpp, src.hpp
#   4 umbrella    ratelimit/redis.hpp
# Script mode: cmake -DINCLUDE_DIR=<source>/include -P check_redis_layers.cmake; fails naming each include that
# points up.
function(rl_redis_floor path out)
  if(path MATCHES "^ratelimit/redis/(abi|address|options|stats)\\.hpp$")
    set(${out} 0 PARENT_SCOPE)
  elseif(path MATCHES "^ratelimit/redis/engine/")
    set(${out} 1 PARENT_SCOPE)
  elseif(path MATCHES "^ratelimit/redis/(detail/|denial_cache|fallback|failure_report)")
    set(${out} 2 PARENT_SCOPE)
  elseif(path MATCHES "^ratelimit/redis/")
    set(${out} 3 PARENT_SCOPE)
  elseif(path STREQUAL "ratelimit/redis.hpp")
    set(${out} 4 PARENT_SCOPE)
  else()
    set(${out} -1 PARENT_SCOPE)  # outside the Redis backend
  endif()
endfunction()

file(GLOB_RECURSE headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/ratelimit/redis/*.hpp")
set(bad "")
foreach(header IN LISTS headers)
  rl_redis_floor("${header}" floor)
  file(STRINGS "${INCLUDE_DIR}/${header}" lines REGEX "^#include [\"<]ratelimit/")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include [\"<]([^\">]+)[\">].*" "\\1" target "${line}")
    rl_redis_floor("${target}" to)
    if(to GREATER floor)
      list(APPEND bad "${header} (floor ${floor}) includes ${target} (floor ${to})")
    elseif(floor EQUAL 1 AND to EQUAL -1 AND NOT target MATCHES "^ratelimit/(error|clock)\\.hpp$|^ratelimit/detail/")
      list(APPEND bad "${header} (engine) includes ${target}, which is neither the error nor the clock contract")
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " bad)
  message(FATAL_ERROR "an include points up (include/ratelimit/redis/README.md \"Layout\"):\n  ${bad}")
endif()
