# Every header of the Redis backend declares its names inside the inline namespace of <ratelimit/redis/abi.hpp>
# (include/ratelimit/redis/README.md "TLS"): a declaration outside it would have one name for the builds with and
# without RATELIMIT_TLS. Each `namespace ratelimit::redis {` must be followed by `inline namespace
# RATELIMIT_REDIS_ABI_NAMESPACE {`, and no header opens a namespace nested in ratelimit::redis in one line
# (ratelimit::redis::detail). Script mode: cmake -DINCLUDE_DIR=<source>/include -P check_redis_abi_namespace.cmake;
# fails naming the files.
file(GLOB_RECURSE headers "${INCLUDE_DIR}/ratelimit/redis/*.hpp")
set(bad "")
foreach(header IN LISTS headers)
  file(READ "${header}" text)
  string(REGEX MATCHALL "\nnamespace ratelimit::redis[^\n]*\n[^\n]*" opened "${text}")
  foreach(opening IN LISTS opened)
    if(NOT opening STREQUAL "\nnamespace ratelimit::redis {\ninline namespace RATELIMIT_REDIS_ABI_NAMESPACE {")
      string(REPLACE "\n" " " opening "${opening}")
      string(REPLACE ";" " " opening "${opening}")
      list(APPEND bad "${header}:${opening}")
    endif()
  endforeach()
endforeach()
if(bad)
  list(JOIN bad "\n  " bad)
  message(FATAL_ERROR "open `namespace ratelimit::redis {` then `inline namespace RATELIMIT_REDIS_ABI_NAMESPACE {` "
                      "(ratelimit/redis/abi.hpp):\n  ${bad}")
endif()
