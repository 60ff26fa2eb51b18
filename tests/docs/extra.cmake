# Every command README.md and docs/*.md show runs (readme_commands.py says how): the pages cannot rot.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
file(GLOB DOC_PAGES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
add_test(NAME docs.readme_commands
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/readme_commands.py ${PROJECT_SOURCE_DIR}/README.md
                 ${DOC_PAGES} ${CMAKE_BINARY_DIR})
set_tests_properties(docs.readme_commands PROPERTIES TIMEOUT 1200 LABELS "docs" DEPENDS "")
