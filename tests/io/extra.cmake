# The Inspect tests run the cpdit binary: building test_io builds it too.
add_dependencies(test_io cpdit_app)
