# Imported targets for the libraries that ship no CMake package of their own on Debian (zstd,
# xxHash, fast_float): the build links them by these names, and the installed polymarginConfig.cmake
# includes this file so that find_package(polymargin) finds them the same way. Sets
# polymargin_LIBRARIES_MISSING to what it could not find.
set(polymargin_LIBRARIES_MISSING "")

# polymargin::NAME from HEADER and, unless it is "", the library LIBRARY (Debian: PACKAGE).
macro(_polymargin_import name header library package)
  string(TOUPPER ${name} _pm_var)
  if(NOT TARGET polymargin::${name})
    find_path(${_pm_var}_INCLUDE_DIR ${header})
    if(NOT "${library}" STREQUAL "")
      find_library(${_pm_var}_LIBRARY ${library})
    endif()
    if(NOT ${_pm_var}_INCLUDE_DIR OR (NOT "${library}" STREQUAL "" AND NOT ${_pm_var}_LIBRARY))
      list(APPEND polymargin_LIBRARIES_MISSING "${name} (${package})")
    elseif("${library}" STREQUAL "")
      add_library(polymargin::${name} INTERFACE IMPORTED)
    else()
      add_library(polymargin::${name} UNKNOWN IMPORTED)
      set_target_properties(polymargin::${name} PROPERTIES
                            IMPORTED_LOCATION "${${_pm_var}_LIBRARY}")
    endif()
    if(TARGET polymargin::${name})
      set_target_properties(polymargin::${name} PROPERTIES
                            INTERFACE_INCLUDE_DIRECTORIES "${${_pm_var}_INCLUDE_DIR}")
    endif()
  endif()
endmacro()

_polymargin_import(zstd zstd.h zstd libzstd-dev)
_polymargin_import(xxhash xxhash.h xxhash libxxhash-dev)
_polymargin_import(fast_float fast_float/fast_float.h "" libfast-float-dev)
