# lnorm_add_accuracy_test: a plugin's kernels under `lnorm verify`, as one CTest test.
#
#   lnorm_add_accuracy_test(NAME name PLUGIN target-or-path
#                           [KERNEL k ...]        full names, e.g. demo:two_pass (default: every kernel of the plugin)
#                           [DTYPE d ...]         f32, f64, f16, bf16 (default: every dtype the kernel takes)
#                           [OP o ...]            layernorm, rmsnorm (default: every op the kernel implements)
#                           [DIR fwd|bwd]         bwd: the backward of the ops (plugin ABI 4 kernels; default fwd)
#                           [BUDGETS file]        a budgets.toml with ["plugin:kernel".f32] sections (default: the
#                                                 built-in one, whose [default.*] sections hold plugin kernels)
#                           [QUICK]               24 cases per property instead of 160
#                           [SEED s] [CASES n]
#                           [EXPECT_FAILURE property ...])
#
# The test passes when every property holds. With EXPECT_FAILURE it passes only when verify fails and
# each property named failed: a planted bug that must stay caught. The run's JSON lands in
# ${CMAKE_CURRENT_BINARY_DIR}/<name>.verify.json.
set(_LNORM_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})

function(lnorm_add_accuracy_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "QUICK" "NAME;PLUGIN;BUDGETS;SEED;CASES;DIR" "KERNEL;DTYPE;OP;EXPECT_FAILURE")
  if(NOT arg_NAME OR NOT arg_PLUGIN)
    message(FATAL_ERROR "lnorm_add_accuracy_test: NAME and PLUGIN are required")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lnorm_add_accuracy_test(${arg_NAME}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(TARGET ${arg_PLUGIN})
    set(plugin $<TARGET_FILE:${arg_PLUGIN}>)
  else()
    get_filename_component(plugin ${arg_PLUGIN} ABSOLUTE)
  endif()
  set(json ${CMAKE_CURRENT_BINARY_DIR}/${arg_NAME}.verify.json)
  set(args verify --plugin ${plugin} --json ${json})
  if(arg_KERNEL)
    foreach(k IN LISTS arg_KERNEL)
      list(APPEND args --kernel ${k})
    endforeach()
  else()
    list(APPEND args --kernel plugins)
  endif()
  foreach(d IN LISTS arg_DTYPE)
    list(APPEND args --dtype ${d})
  endforeach()
  foreach(o IN LISTS arg_OP)
    list(APPEND args --op ${o})
  endforeach()
  if(arg_DIR)
    list(APPEND args --dir ${arg_DIR})
  endif()
  if(arg_BUDGETS)
    get_filename_component(budgets ${arg_BUDGETS} ABSOLUTE)
    list(APPEND args --budgets ${budgets})
  endif()
  if(arg_QUICK)
    list(APPEND args --quick)
  endif()
  if(arg_SEED)
    list(APPEND args --seed ${arg_SEED})
  endif()
  if(arg_CASES)
    list(APPEND args --cases ${arg_CASES})
  endif()
  if(arg_EXPECT_FAILURE)
    # Lists cross the command line joined by '|' (add_test would split them at ';').
    string(REPLACE ";" "|" joined_args "${args}")
    string(REPLACE ";" "|" joined_props "${arg_EXPECT_FAILURE}")
    add_test(NAME ${arg_NAME} COMMAND ${CMAKE_COMMAND} -DLNORM_EXE=$<TARGET_FILE:lnorm::lnorm>
      "-DLNORM_ARGS=${joined_args}" "-DLNORM_JSON=${json}" "-DLNORM_EXPECT=${joined_props}"
      -P ${_LNORM_TEST_DIR}/lnormExpectFailure.cmake)
  else()
    add_test(NAME ${arg_NAME} COMMAND lnorm::lnorm ${args})
  endif()
  set_tests_properties(${arg_NAME} PROPERTIES LABELS lnorm_accuracy)
endfunction()
