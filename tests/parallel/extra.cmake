# Context parallelism under Open MPI: the parity subset with 4 processes, and the command line on
# the attention fixtures (masked case included) launched by mpirun, checked with `cpdit diff`
# against the outside-truth out / lse.
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  add_executable(test_parallel_mpi ${CMAKE_CURRENT_LIST_DIR}/mpi/parity_main.cpp
                                   ${CMAKE_CURRENT_LIST_DIR}/cp_case.cpp)
  target_link_libraries(test_parallel_mpi PRIVATE cpdit)
  target_include_directories(test_parallel_mpi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  set(CP_MPIRUN ${MPIEXEC_EXECUTABLE} -np 4 --oversubscribe --allow-run-as-root)
  add_test(NAME parallel.mpi.parity COMMAND ${CP_MPIRUN} $<TARGET_FILE:test_parallel_mpi>)

  set(cp_fixture ${CPDIT_TEST_DATA}/fixtures/attention/attention_b2_s100_h4_d32_keymask.safetensors)
  set(cp_result ${CMAKE_CURRENT_BINARY_DIR}/parallel_mpi_cli_keymask.safetensors)
  set(cp_cpdit $<TARGET_FILE:cpdit_app>)
  list(JOIN CP_MPIRUN " " cp_mpirun)
  add_test(NAME parallel.mpi.cli_keymask
           COMMAND sh -c "${cp_mpirun} ${cp_cpdit} attention --inputs ${cp_fixture} --output ${cp_result} \
--ring 2 --ulysses 2 && ${cp_cpdit} diff ${cp_fixture} ${cp_result} --tolerance 2e-5")
  set_tests_properties(parallel.mpi.parity parallel.mpi.cli_keymask
                       PROPERTIES TIMEOUT 300 LABELS "mpi;parallel")
endif()
