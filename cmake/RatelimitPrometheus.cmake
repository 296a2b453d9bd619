# ratelimit::prometheus: a prometheus-cpp collector of the layers' and limiters' counters
# (include/ratelimit/http/prometheus.hpp). Defined only when prometheus-cpp is found (Debian:
# prometheus-cpp-dev), so no other target depends on it.
find_package(prometheus-cpp CONFIG QUIET COMPONENTS core)
if(prometheus-cpp_FOUND AND TARGET prometheus-cpp::core)
  add_library(ratelimit_prometheus INTERFACE)
  add_library(ratelimit::prometheus ALIAS ratelimit_prometheus)
  set_target_properties(ratelimit_prometheus PROPERTIES EXPORT_NAME prometheus)
  target_link_libraries(ratelimit_prometheus INTERFACE ratelimit::ratelimit prometheus-cpp::core)
  set(RATELIMIT_HAVE_PROMETHEUS ON)
  if(RATELIMIT_INSTALL)
    install(TARGETS ratelimit_prometheus EXPORT ratelimitPrometheusTargets)
    install(EXPORT ratelimitPrometheusTargets NAMESPACE ratelimit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratelimit)
  endif()
else()
  message(STATUS "ratelimit: prometheus-cpp not found, ratelimit::prometheus is not defined (apt-get install prometheus-cpp-dev)")
  set(RATELIMIT_HAVE_PROMETHEUS OFF)
endif()
