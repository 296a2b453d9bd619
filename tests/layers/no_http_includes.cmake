# Fails when a header under include/ratelimit/layers/ (or the layers umbrella) includes anything under
# ratelimit/http/: composition knows nothing of HTTP. Run as: cmake -DROOT=<include dir> -P this file.
file(GLOB_RECURSE headers "${ROOT}/ratelimit/layers/*.hpp")
list(APPEND headers "${ROOT}/ratelimit/layers.hpp" "${ROOT}/ratelimit/quota_policy.hpp"
     "${ROOT}/ratelimit/most_restrictive.hpp")
foreach(h IN LISTS headers)
  file(STRINGS "${h}" hits REGEX "#include [<\"]ratelimit/http")
  if(hits)
    message(FATAL_ERROR "${h} includes HTTP: ${hits}")
  endif()
endforeach()
message(STATUS "no layers header includes ratelimit/http")
