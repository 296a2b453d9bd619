# Configures, builds and runs tests/package/consumer against ratelimit; fails on the first step that fails.
# Script mode (cmake -P); the variables come from tests/package/CMakeLists.txt:
#   MODE                 find_package: install RATELIMIT_BINARY_DIR to WORK_DIR/prefix, consume that
#                        add_subdirectory: consume RATELIMIT_SOURCE_DIR directly
#   CONSUMER_SOURCE_DIR, RATELIMIT_SOURCE_DIR, RATELIMIT_BINARY_DIR, WORK_DIR (wiped first)
#   EXPECTED_VERSION, GENERATOR, MAKE_PROGRAM,
#   CXX_COMPILER, CXX_FLAGS, CONFIG (the build's configuration; the consumer uses the same)
#   WITH_HTTP            ON when the build has ratelimit::http: the consumer's http program is built and run
#   WITH_TLS, WITH_ASIO  ON when the build has TLS (OpenSSL) and ratelimit::asio
#   WITH_REDIS           1 when the build has ratelimit::redis: the consumer's separately compiled Redis program
#                        (ratelimit::redis_compiled) is built and run
cmake_minimum_required(VERSION 3.20)

function(step what)
  message(STATUS "package test (${MODE}): ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc COMMAND_ECHO STDOUT)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test (${MODE}): ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(config_arg "")
if(CONFIG)
  set(config_arg --config "${CONFIG}")
endif()
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCONSUMER_MODE=${MODE}" "-DEXPECTED_VERSION=${EXPECTED_VERSION}"
  "-DCONSUMER_HTTP=${WITH_HTTP}" "-DCONSUMER_REDIS=${WITH_REDIS}" "-DCONSUMER_TLS=${WITH_TLS}")
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()

if(MODE STREQUAL "find_package")
  step("install" "${CMAKE_COMMAND}" --install "${RATELIMIT_BINARY_DIR}" --prefix "${prefix}" ${config_arg})
  # Exactly one package config, in a directory find_package searches, with its version and targets
  # files; and nothing but headers, package files and the licence is installed (no tests, examples
  # or build leftovers).
  file(GLOB_RECURSE configs RELATIVE "${prefix}" "${prefix}/*/ratelimitConfig.cmake")
  list(LENGTH configs n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "package test: expected one installed ratelimitConfig.cmake, found: ${configs}")
  endif()
  get_filename_component(cmakedir "${configs}" DIRECTORY)
  if(NOT cmakedir MATCHES "^(lib[^/]*|lib/[^/]+|share)/cmake/ratelimit$")
    message(FATAL_ERROR "package test: package files in ${cmakedir}, where find_package does not look")
  endif()
  set(expected include/ratelimit/ratelimit.hpp include/ratelimit/version.hpp
      ${cmakedir}/ratelimitConfigVersion.cmake ${cmakedir}/ratelimitTargets.cmake share/doc/ratelimit/LICENSE)
  if(WITH_HTTP)
    list(APPEND expected include/ratelimit/http/problem.hpp ${cmakedir}/ratelimitHttpTargets.cmake)
  endif()
  foreach(f IN LISTS expected)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "package test: ${f} was not installed")
    endif()
  endforeach()
  file(GLOB_RECURSE installed RELATIVE "${prefix}" "${prefix}/*")
  foreach(f IN LISTS installed)
    if(NOT f MATCHES "^(include/ratelimit/|${cmakedir}/|share/doc/ratelimit/|share/pkgconfig/ratelimit(-redis)?\\.pc$)")
      message(FATAL_ERROR "package test: unexpected installed file ${f}")
    endif()
  endforeach()
  # A missing component is named: configuring a project that requires an unknown one fails and says which.
  set(missing_dir "${WORK_DIR}/missing_component")
  file(WRITE "${missing_dir}/CMakeLists.txt" "cmake_minimum_required(VERSION 3.20)\nproject(missing CXX)\n"
       "find_package(ratelimit REQUIRED COMPONENTS redis nosuch)\n")
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${missing_dir}" -B "${missing_dir}/build" -G "${GENERATOR}"
                          "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}"
                          -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "missing components: [^\n]*nosuch \\(no such component")
    message(FATAL_ERROR "package test: a missing component is not named (${rc}):\n${out}${err}")
  endif()
  # A component whose dependency is missing is reported missing, never found and then unusable: with OpenSSL
  # hidden, a TLS build's redis and asio components are both missing (not a generation error on OpenSSL::SSL).
  if(WITH_TLS AND WITH_ASIO)
    foreach(component IN ITEMS redis asio)
      set(no_ssl_dir "${WORK_DIR}/no_openssl_${component}")
      file(WRITE "${no_ssl_dir}/CMakeLists.txt" "cmake_minimum_required(VERSION 3.20)\nproject(no_ssl CXX)\n"
           "find_package(ratelimit REQUIRED COMPONENTS ${component})\n"
           "file(WRITE \"\${CMAKE_BINARY_DIR}/main.cpp\" \"int main() { return 0; }\\n\")\n"
           "add_executable(no_ssl \"\${CMAKE_BINARY_DIR}/main.cpp\")\n"
           "target_link_libraries(no_ssl PRIVATE ratelimit::${component})\n")
      execute_process(COMMAND "${CMAKE_COMMAND}" -S "${no_ssl_dir}" -B "${no_ssl_dir}/build" -G "${GENERATOR}"
                              "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}"
                              -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON
                      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "missing components: ${component} \\(not installed, or its dependency")
        message(FATAL_ERROR "package test: without OpenSSL, COMPONENTS ${component} is not reported missing "
                            "(${rc}):\n${out}${err}")
      endif()
    endforeach()
  endif()
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${prefix}" "-DRATELIMIT_PREFIX=${prefix}")
  # The consumer must find the installed copy, not a build tree from CMake's user package registry.
  list(APPEND configure_args -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args "-DRATELIMIT_SOURCE_DIR=${RATELIMIT_SOURCE_DIR}")
else()
  message(FATAL_ERROR "package test: unknown MODE '${MODE}'")
endif()

step("configure consumer" "${CMAKE_COMMAND}" ${configure_args})
step("build consumer" "${CMAKE_COMMAND}" --build "${build}" ${config_arg})
if(CONFIG AND EXISTS "${build}/${CONFIG}/consumer")
  set(exe "${build}/${CONFIG}/consumer")  # multi-config generators
else()
  set(exe "${build}/consumer")
endif()
step("run consumer" "${exe}")
if(WITH_HTTP)
  step("run consumer_http" "${exe}_http")
endif()
if(WITH_REDIS)
  step("run consumer_redis_separate" "${exe}_redis_separate")
endif()
