# What `cmake --install` (make install PREFIX=...) puts in place, and the .deb of `make package`
# (docs/install.md):
#   bin/polymargin
#   share/man/man1/polymargin.1.gz, share/bash-completion/completions/polymargin: generated at build
#     time from the built program's --help by scripts/cli_docs.py (never written by hand)
#   the Python package, in the site directory of the interpreter it was built for
#   include/polymargin/{engine,io,driver}/*.h, lib/libpolymargin_{engine,io,driver}.a and
#     lib/cmake/polymargin: find_package(polymargin) and the target polymargin::polymargin

# --- The man page and the bash completion, from the options the program prints.
find_package(Python3 COMPONENTS Interpreter QUIET)
set(POLYMARGIN_CLI_DOCS ${PROJECT_BINARY_DIR}/cli_docs)
if(Python3_Interpreter_FOUND)
  add_custom_command(
    OUTPUT ${POLYMARGIN_CLI_DOCS}/polymargin.1.gz ${POLYMARGIN_CLI_DOCS}/polymargin.bash
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/cli_docs.py
            $<TARGET_FILE:polymargin> ${POLYMARGIN_CLI_DOCS}
    DEPENDS polymargin ${PROJECT_SOURCE_DIR}/scripts/cli_docs.py
    COMMENT "Man page and bash completion from polymargin --help" VERBATIM)
  add_custom_target(polymargin_cli_docs ALL
    DEPENDS ${POLYMARGIN_CLI_DOCS}/polymargin.1.gz ${POLYMARGIN_CLI_DOCS}/polymargin.bash)
  install(FILES ${POLYMARGIN_CLI_DOCS}/polymargin.1.gz
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
  install(FILES ${POLYMARGIN_CLI_DOCS}/polymargin.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME polymargin
          COMPONENT runtime)
else()
  message(STATUS "No man page or bash completion: needs python3 to generate them")
endif()

install(TARGETS polymargin RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# --- The Python package. Its directory under the prefix is chosen at install time, so that the
# same tree installs right both to /usr (the .deb: Debian's lib/python3/dist-packages) and to
# another prefix (lib/python3.X/dist-packages, which Debian's python3 searches under /usr/local).
# POLYMARGIN_PYTHON_INSTALL_DIR (relative to the prefix, or absolute) overrides both.
if(POLYMARGIN_PYTHON_BUILT)
  set(POLYMARGIN_PYTHON_INSTALL_DIR "" CACHE STRING
      "Where the Python package goes (empty: the interpreter's site directory under the prefix)")
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c [[
import sys, sysconfig
empty = {'base': '', 'platbase': '', 'installed_base': '', 'installed_platbase': ''}
site = lambda scheme: sysconfig.get_path('platlib', scheme, empty).lstrip('/')
if 'deb_system' in sysconfig.get_scheme_names():  # Debian's interpreter
    print(site('deb_system') + ';lib/python%d.%d/dist-packages' % sys.version_info[:2], end='')
else:
    print(site('posix_prefix') + ';' + site('posix_prefix'), end='')
]]
    OUTPUT_VARIABLE _pm_python_sites RESULT_VARIABLE _pm_python_result)
  if(NOT _pm_python_result EQUAL 0)
    message(FATAL_ERROR "cannot ask ${Python_EXECUTABLE} for its site directory")
  endif()
  list(GET _pm_python_sites 0 POLYMARGIN_PYTHON_SITE_USR)
  list(GET _pm_python_sites 1 POLYMARGIN_PYTHON_SITE_OTHER)
  install(CODE "
    set(_pm_dir \"${POLYMARGIN_PYTHON_INSTALL_DIR}\")
    if(NOT _pm_dir)
      if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
        set(_pm_dir \"${POLYMARGIN_PYTHON_SITE_USR}\")
      else()
        set(_pm_dir \"${POLYMARGIN_PYTHON_SITE_OTHER}\")
      endif()
    endif()
    if(NOT IS_ABSOLUTE \"\${_pm_dir}\")
      set(_pm_dir \"\${CMAKE_INSTALL_PREFIX}/\${_pm_dir}\")
    endif()
    file(INSTALL DESTINATION \"\${_pm_dir}/polymargin\" TYPE FILE FILES ${PYTHON_SOURCES})
    file(INSTALL DESTINATION \"\${_pm_dir}/polymargin\" TYPE MODULE
         FILES \"$<TARGET_FILE:polymargin_python>\")
  " COMPONENT python)
endif()

# --- The C++ library: headers, archives and the CMake package.
set_target_properties(pm_engine PROPERTIES OUTPUT_NAME polymargin_engine EXPORT_NAME engine)
set_target_properties(pm_io PROPERTIES OUTPUT_NAME polymargin_io EXPORT_NAME io)
set_target_properties(pm_driver PROPERTIES OUTPUT_NAME polymargin_driver EXPORT_NAME driver)
# polymargin::polymargin: the whole library (driver/train.h's driver::train and all below it).
add_library(polymargin_library INTERFACE)
target_link_libraries(polymargin_library INTERFACE pm_driver pm_io pm_engine)
set_target_properties(polymargin_library PROPERTIES EXPORT_NAME polymargin)
add_library(polymargin::polymargin ALIAS polymargin_library)

set(POLYMARGIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/polymargin)
install(TARGETS pm_engine pm_io pm_driver polymargin_library EXPORT polymarginTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/engine ${PROJECT_SOURCE_DIR}/io ${PROJECT_SOURCE_DIR}/driver
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/polymargin COMPONENT dev
        FILES_MATCHING PATTERN "*.h")
install(EXPORT polymarginTargets NAMESPACE polymargin:: DESTINATION ${POLYMARGIN_CMAKE_DIR}
        COMPONENT dev)
include(CMakePackageConfigHelpers)
set(POLYMARGIN_WITH_MPI OFF)
if(MPI_CXX_FOUND)
  set(POLYMARGIN_WITH_MPI ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/polymarginConfig.cmake.in
  ${PROJECT_BINARY_DIR}/polymarginConfig.cmake INSTALL_DESTINATION ${POLYMARGIN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/polymarginConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/polymarginConfig.cmake
              ${PROJECT_BINARY_DIR}/polymarginConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/polymarginLibraries.cmake
        DESTINATION ${POLYMARGIN_CMAKE_DIR} COMPONENT dev)

# --- make package: a .deb (CPack). Its Depends are the Debian packages of the shared libraries
# the binary and the Python module link (dpkg-shlibdeps: libtbb12, libzstd1, libboost-*, libmpi,
# ...), and the Python stack the package imports; the C++ library's -dev packages are suggested.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME polymargin)
set(CPACK_PACKAGE_VENDOR polymargin)
set(CPACK_PACKAGE_CONTACT "polymargin developers <polymargin@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "out-of-core streaming trainer for large-margin classifiers (LDM, SVM, CPM, ...)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)  # what CPACK_SET_DESTDIR installs to
# The install runs with the prefix /usr under a staging DESTDIR, so that the Python package's
# directory is chosen for /usr (above).
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(_pm_depends "")
if(POLYMARGIN_PYTHON_BUILT)
  set(_pm_py "${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}")
  math(EXPR _pm_py_next "${Python_VERSION_MINOR} + 1")
  set(_pm_depends "python3 (>= ${_pm_py}), python3 (<< ${Python_VERSION_MAJOR}.${_pm_py_next}), "
                  "python3-numpy, python3-scipy, python3-sklearn")
  string(CONCAT _pm_depends ${_pm_depends})
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_pm_depends}")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "libtbb-dev, libzstd-dev, libxxhash-dev, libfast-float-dev, nlohmann-json3-dev, libeigen3-dev, zlib1g-dev, libbz2-dev, libopenmpi-dev")
include(CPack)
