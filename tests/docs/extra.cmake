# Every command README.md shows runs (readme_commands.py says how): the README cannot rot.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME docs.readme_commands
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/readme_commands.py ${PROJECT_SOURCE_DIR}/README.md
                 ${CMAKE_BINARY_DIR})
set_tests_properties(docs.readme_commands PROPERTIES TIMEOUT 1200 LABELS "docs" DEPENDS "")
