# The choices a build tree was configured with survive `pip install .`.
#
# pyproject.toml points scikit-build-core at build/, the tree scripts/build.sh configures, so that pip
# compiles only the native module. But scikit-build-core deletes that tree's CMakeCache.txt whenever it
# runs from another isolated environment than last time, which is every `pip install .` with build
# isolation: -DCPDIT_UNITY=ON, the compiler launchers and the compilers would fall back to their
# defaults, and the whole engine would compile again with other flags. So every configure records them
# in build/cpdit-options.cmake, and a configure by scikit-build-core (SKBUILD set) takes them back
# before project() looks for compilers. A value given on the command line wins: only entries the cache
# lacks are set.
set(CPDIT_SAVED_OPTIONS ${CMAKE_BINARY_DIR}/cpdit-options.cmake)
if(DEFINED SKBUILD AND EXISTS ${CPDIT_SAVED_OPTIONS})
  include(${CPDIT_SAVED_OPTIONS})
endif()

function(cpdit_save_build_options)
  get_cmake_property(names CACHE_VARIABLES)
  set(lines "# Written by each configure of this tree; read back by pip install's (python/build_options.cmake).\n")
  foreach(name IN LISTS names)
    if(name MATCHES "^(CPDIT_.*|CMAKE_(C|CXX)_COMPILER(_LAUNCHER)?)$")
      get_property(type CACHE ${name} PROPERTY TYPE)
      if(type STREQUAL "UNINITIALIZED")  # given as -DNAME=value, without a type
        set(type STRING)
      endif()
      string(APPEND lines "set(${name} [==[$CACHE{${name}}]==] CACHE ${type} \"\")\n")
    endif()
  endforeach()
  file(WRITE ${CPDIT_SAVED_OPTIONS} "${lines}")
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL cpdit_save_build_options)
