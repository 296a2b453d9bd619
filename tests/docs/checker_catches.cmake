# docs.checker_catches: cmake/check_docs.cmake fails on each broken link or citation below, one small fixture
# repository (outside git) per case. Prints the cases it let pass, and fails if there is one.
#   cmake -DSOURCE_DIR=<repository> -DWORK_DIR=<scratch dir> -P tests/docs/checker_catches.cmake
cmake_minimum_required(VERSION 3.20)
set(passed_unseen "")

# Writes a fixture: README.md with `readme`, and `name` holding `text` (when given); runs the checker in `mode`.
function(expect_caught case mode readme name text)
  set(dir "${WORK_DIR}/${case}")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${dir}/README.md" "# Title\n\n## Which policy when\n\n${readme}\n")
  if(NOT name STREQUAL "")
    get_filename_component(sub "${dir}/${name}" DIRECTORY)
    file(MAKE_DIRECTORY "${sub}")
    file(WRITE "${dir}/${name}" "${text}\n")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${dir} -DMODE=${mode}
                          -P "${SOURCE_DIR}/cmake/check_docs.cmake"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message("not caught: ${case} (${mode}): ${err}")
    set(passed_unseen "${passed_unseen};${case}" PARENT_SCOPE)
  endif()
endfunction()

# Links to files that do not exist (the first, a plain one, shows the fixture works).
expect_caught(inline_link links "See [the engine](missing.md)." "" "")
expect_caught(reference_link links "See [the engine][engine].\n\n[engine]: missing.md" "" "")
expect_caught(single_quoted_title links "See [the engine](missing.md 'The engine')." "" "")
expect_caught(html_link links "See <a href=\"missing.md\">the engine</a>." "" "")
# Citations of sections that do not exist, or the bare form, which the checker refuses (the quotes spelt ${q}, so
# that docs.citations does not read this file's own fixtures as citations).
set(q "\"")
expect_caught(bare_with_comma citations "Text." "bench/results/compare.md" "Which policy when (README, ${q}Nowhere${q}):")
expect_caught(empty_section citations "Text." "include/x.hpp" "// See README.md ${q}${q}.")
expect_caught(go_source citations "Text." "bench/x/rate_test.go" "// See README.md ${q}Nowhere${q}.")

if(NOT passed_unseen STREQUAL "")
  message(FATAL_ERROR "check_docs let these pass:${passed_unseen}")
endif()
