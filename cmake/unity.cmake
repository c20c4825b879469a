# Unity builds (option MET_UNITY, on by default): CMake compiles each target's sources in batches of
# 8 as one translation unit, so the headers every file includes (fmt, nlohmann-json, CLI11, toml++,
# doctest) are parsed once a batch instead of once a file. On CI's 2 cores (scripts/test.sh) the gcc
# build stage went from 597 to 406 s and the clang sanitizer build from 578 to 409 s. Turn it off
# (-DMET_UNITY=OFF) for quicker rebuilds of one edited file.
#
# The files below compile alone: batched with their neighbours they clash (names in anonymous
# namespaces that repeat across files of one target; gcc's -Wsubobject-linkage on an Impl holding a
# type of the file's anonymous namespace, which gcc reports only outside the main file). A new
# file that clashes fails the build the same way: add it here. Generated sources compile alone too,
# so a new interpreter image or build id does not recompile a batch.
function(met_unity_skip target)
  set(files ${ARGN})
  list(TRANSFORM files PREPEND ${PROJECT_SOURCE_DIR}/)
  set_source_files_properties(${files} TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

if(MET_UNITY)
  met_unity_skip(met_estimate src/estimate/cost.cpp)
  met_unity_skip(met_interp src/interp/cpu_backend.cpp src/interp/cuda_backend.cpp)
  met_unity_skip(met_serve src/serve/server.cpp src/serve/server_model.cpp src/serve/tool_calls.cpp)
  met_unity_skip(met_text src/text/tokenizer_pipeline.cpp)
  # The scheduler's ThreadSanitizer test (tests/CMakeLists.txt) compiles these files of the libraries
  # again and links the libraries after them: each must stay a member of its library's archive by
  # itself, or a batch pulled in for another symbol would bring a second copy of its definitions.
  # The test's own sources compile one at a time.
  if(TARGET met_scheduler_tsan_tests)
    get_target_property(tsan_text met_text SOURCES)
    list(FILTER tsan_text INCLUDE REGEX "^(tokenizer|unicode)")
    list(TRANSFORM tsan_text PREPEND src/text/)
    met_unity_skip(met_text ${tsan_text})
    met_unity_skip(met_serve src/serve/scheduler.cpp src/serve/metrics.cpp)
    met_unity_skip(met_interp src/interp/cpu_bodies.cpp)
    set_target_properties(met_scheduler_tsan_tests PROPERTIES UNITY_BUILD OFF)
  endif()
  if(MET_BUILD_TESTS)
    met_unity_skip(met_emit_tests tests/emit/packet_test.cpp tests/emit/verify_test.cpp)
    met_unity_skip(met_interp_tests tests/interp/cuda_backend_test.cpp tests/interp/moe_test.cpp tests/interp/nccl_test.cpp
                   tests/interp/session_test.cpp)
    met_unity_skip(met_model_tests tests/model/instantiate_test.cpp)
    met_unity_skip(met_planner_tests tests/planner/plan_test.cpp tests/planner/rules_test.cpp)
    met_unity_skip(met_report_tests tests/report/report_test.cpp)
    met_unity_skip(met_text_tests tests/text/jinja_test.cpp tests/text/tokenizer_test.cpp)
  endif()
endif()
