# The installed package. `cmake --install build/release --prefix P` puts in P:
#   bin/lnorm                                 the command (budgets.toml built in)
#   include/lnorm/plugin.h                    the plugin C ABI
#   include/lnorm/{problem,op,half,format,reference,metrics}.hpp, lib/liblnorm_{reference,problem}.a
#                                             the exact reference and the error metrics
#   lib/cmake/lnorm/lnormConfig.cmake (+ Version, Targets, lnormTest.cmake)
# so a project can find_package(lnorm) and use lnorm::lnorm (the executable), lnorm::plugin_api,
# lnorm::reference and lnorm_add_accuracy_test().
include(CMakePackageConfigHelpers)

set(LNORM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/lnorm)

set_target_properties(lnorm_reference PROPERTIES EXPORT_NAME reference)
set_target_properties(lnorm_problem PROPERTIES EXPORT_NAME problem)
set_target_properties(lnorm_plugin_api PROPERTIES EXPORT_NAME plugin_api)
install(TARGETS lnorm EXPORT lnormTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS lnorm_reference lnorm_problem lnorm_plugin_api EXPORT lnormTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES
  ${PROJECT_SOURCE_DIR}/kernels/include/lnorm/plugin.h
  ${PROJECT_SOURCE_DIR}/kernels/include/lnorm/problem.hpp
  ${PROJECT_SOURCE_DIR}/kernels/include/lnorm/op.hpp
  ${PROJECT_SOURCE_DIR}/kernels/include/lnorm/half.hpp
  ${PROJECT_SOURCE_DIR}/kernels/include/lnorm/quant.hpp
  ${PROJECT_SOURCE_DIR}/reference/include/lnorm/format.hpp
  ${PROJECT_SOURCE_DIR}/reference/include/lnorm/reference.hpp
  ${PROJECT_SOURCE_DIR}/reference/include/lnorm/metrics.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lnorm)
install(EXPORT lnormTargets NAMESPACE lnorm:: DESTINATION ${LNORM_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/lnormConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/lnormConfig.cmake INSTALL_DESTINATION ${LNORM_INSTALL_CMAKEDIR})
# SameMinorVersion: 0.x releases may change the plugin ABI between minors (plugin.h's version says so).
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/lnormConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/lnormConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/lnormConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/lnormTest.cmake
  ${CMAKE_CURRENT_LIST_DIR}/lnormExpectFailure.cmake
  DESTINATION ${LNORM_INSTALL_CMAKEDIR})
