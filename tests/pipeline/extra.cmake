# The command-line tests (generate, encode-prompt) run the cpdit binary: building test_pipeline builds it.
add_dependencies(test_pipeline cpdit_app)

# `cpdit generate` under mpirun (ranks as processes) must give the latents of the same run on local
# ranks (threads).
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  add_test(NAME generate_mpi_matches_local
           COMMAND ${CMAKE_COMMAND} -DCPDIT=$<TARGET_FILE:cpdit_app> -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/generate_mpi -P ${CMAKE_CURRENT_LIST_DIR}/generate_mpi.cmake)
  set_tests_properties(generate_mpi_matches_local PROPERTIES TIMEOUT 300 LABELS "mpi;pipeline"
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;CPDIT_COMM_TIMEOUT_S=120")
endif()
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  add_test(NAME generate_mpi_default_threads
           COMMAND ${CMAKE_COMMAND} -DCPDIT=$<TARGET_FILE:cpdit_app> -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                   -DWORK=${CMAKE_CURRENT_BINARY_DIR}/generate_mpi_threads -P ${CMAKE_CURRENT_LIST_DIR}/generate_mpi_threads.cmake)
  set_tests_properties(generate_mpi_default_threads PROPERTIES TIMEOUT 300 LABELS "mpi;pipeline"
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;CPDIT_COMM_TIMEOUT_S=120")
endif()
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  add_test(NAME pipeline_parity_mpi
           COMMAND ${CMAKE_COMMAND} -DCPDIT=$<TARGET_FILE:cpdit_app> -DMPIEXEC=${MPIEXEC_EXECUTABLE}
                   -DDATA=${CPDIT_TEST_DATA} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/pipeline_parity_mpi
                   -P ${CMAKE_CURRENT_LIST_DIR}/pipeline_parity_mpi.cmake)
  set_tests_properties(pipeline_parity_mpi PROPERTIES TIMEOUT 300 LABELS "mpi;pipeline"
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;CPDIT_COMM_TIMEOUT_S=120")
endif()
