# Installs this build to a fresh prefix and builds the consumers with a plain compiler line, the flags from
# `pkg-config --cflags --libs` (README.md "Using it from pkg-config"), then runs them. Script mode (cmake -P):
#   RATELIMIT_BINARY_DIR, CONSUMER_SOURCE_DIR, WORK_DIR (wiped first), EXPECTED_VERSION, CXX_COMPILER,
#   CXX_FLAGS, CONFIG, PKG_CONFIG (the program), WITH_REDIS (ON: ratelimit-redis.pc too), WITH_TLS
cmake_minimum_required(VERSION 3.20)

function(step what)
  message(STATUS "package test (pkg-config): ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test (pkg-config): ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(config_arg "")
if(CONFIG)
  set(config_arg --config "${CONFIG}")
endif()
step("install" "${CMAKE_COMMAND}" --install "${RATELIMIT_BINARY_DIR}" --prefix "${prefix}" ${config_arg})
# This prefix first (hiredis and OpenSSL from the system's pkg-config path); --cflags below must name it.
set(ENV{PKG_CONFIG_PATH} "${prefix}/share/pkgconfig")

execute_process(COMMAND "${PKG_CONFIG}" --modversion ratelimit OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT version STREQUAL EXPECTED_VERSION)
  message(FATAL_ERROR "pkg-config --modversion ratelimit: '${version}' (${rc}), expected ${EXPECTED_VERSION}")
endif()
execute_process(COMMAND "${PKG_CONFIG}" --cflags ratelimit OUTPUT_VARIABLE cflags OUTPUT_STRIP_TRAILING_WHITESPACE)
# Literal searches: the prefix is a path, and build directories such as build/g++-Release hold regex characters.
string(FIND "${cflags}" "-I${prefix}/share/pkgconfig/../../include" relative_at)
string(FIND "${cflags}" "-I${prefix}/include" absolute_at)
if(relative_at EQUAL -1 AND absolute_at EQUAL -1)
  message(FATAL_ERROR "pkg-config --cflags ratelimit does not name the installed headers: ${cflags}")
endif()

# The plain compiler line a Make user writes, run by the shell.
set(line "'${CXX_COMPILER}' -std=c++20 ${CXX_FLAGS} -Wall -Wextra -Werror -DEXPECTED_VERSION='\"${EXPECTED_VERSION}\"'")
step("build the core consumer"
     sh -c "${line} '${CONSUMER_SOURCE_DIR}/main.cpp' -o '${WORK_DIR}/consumer' $('${PKG_CONFIG}' --cflags --libs ratelimit)")
step("run the core consumer" "${WORK_DIR}/consumer")

if(WITH_REDIS)
  execute_process(COMMAND "${PKG_CONFIG}" --cflags ratelimit-redis OUTPUT_VARIABLE redis_cflags RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags ratelimit-redis failed")
  endif()
  string(FIND "${redis_cflags}" "-DRATELIMIT_TLS=1" tls_at)
  if(WITH_TLS AND tls_at EQUAL -1)
    message(FATAL_ERROR "built with TLS, but ratelimit-redis.pc's Cflags lack -DRATELIMIT_TLS=1: ${redis_cflags}")
  elseif(NOT WITH_TLS AND NOT tls_at EQUAL -1)
    message(FATAL_ERROR "built without TLS, but ratelimit-redis.pc's Cflags have -DRATELIMIT_TLS=1")
  endif()
  set(expected_tls 0)
  if(WITH_TLS)
    set(expected_tls 1)
  endif()
  step("build the Redis consumer"
       sh -c "${line} -DEXPECTED_TLS=${expected_tls} '${CONSUMER_SOURCE_DIR}/redis_main.cpp' -o '${WORK_DIR}/consumer_redis' $('${PKG_CONFIG}' --cflags --libs ratelimit-redis)")
  step("run the Redis consumer" "${WORK_DIR}/consumer_redis")
  # The same program separately compiled (README.md "Compile cost"): the macro in every unit, and the limiters and
  # the engine in one unit of the user's that includes <ratelimit/redis/src.hpp>.
  file(WRITE "${WORK_DIR}/redis_src.cpp" "#include <ratelimit/redis/src.hpp>\n")
  step("build the separately compiled Redis consumer"
       sh -c "${line} -DRATELIMIT_SEPARATE_COMPILATION -DEXPECTED_TLS=${expected_tls} '${CONSUMER_SOURCE_DIR}/redis_main.cpp' '${WORK_DIR}/redis_src.cpp' -o '${WORK_DIR}/consumer_redis_separate' $('${PKG_CONFIG}' --cflags --libs ratelimit-redis)")
  step("run the separately compiled Redis consumer" "${WORK_DIR}/consumer_redis_separate")
endif()
