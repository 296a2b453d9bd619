# docs.examples_whole: extract_examples.cmake takes all of an example a reader sees, or refuses it. An indented
# Markdown code block (what a doc comment's example renders as) goes on across a blank `///` line; the generator
# must not silently drop the lines after it from the compiled example.
#   cmake -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch dir> -P tests/docs/examples_catches.cmake
cmake_minimum_required(VERSION 3.20)
set(dropped "")

# A fixture header whose example holds `first_line();` then, after `gap`, `second_line();`.
function(expect_whole case gap)
  set(dir "${WORK_DIR}/${case}")
  file(REMOVE_RECURSE "${dir}")
  file(WRITE "${dir}/include/x.hpp" "/// A thing.\n/// Example:\n///   first_line();\n${gap}second_line();\ninline int thing() { return 1; }\n")
  execute_process(COMMAND "${CMAKE_COMMAND}" -DROOT=${dir} -DOUT=${dir}/out.cpp -DHEADERS=x.hpp
                          -P "${SOURCE_DIR}/tests/docs/extract_examples.cmake"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    file(READ "${dir}/out.cpp" out)
    if(NOT out MATCHES "second_line")
      message("${case}: second_line(); is shown in the example but not compiled, and the generator said nothing")
      set(dropped "${dropped};${case}" PARENT_SCOPE)
    endif()
  endif()
endfunction()

expect_whole(blank_comment_line "///\n///   ")

if(NOT dropped STREQUAL "")
  message(FATAL_ERROR "extract_examples.cmake dropped example lines silently:${dropped}")
endif()
