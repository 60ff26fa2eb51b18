# The FLUX and Wan CLI tests run the cpdit binary: building test_models builds it.
add_dependencies(test_models cpdit_app)
