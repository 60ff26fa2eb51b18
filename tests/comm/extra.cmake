# test_comm_mpi runs the contract checks outside gtest, so that mpirun can launch it; fault runs
# must end non-zero with the failing rank's message, and TIMEOUT turns a hang into a failure.
add_executable(test_comm_mpi ${CMAKE_CURRENT_LIST_DIR}/mpi/main.cpp ${CMAKE_CURRENT_LIST_DIR}/checks.cpp
               ${CMAKE_CURRENT_LIST_DIR}/checks_p2p.cpp ${CMAKE_CURRENT_LIST_DIR}/checks_collectives.cpp
               ${CMAKE_CURRENT_LIST_DIR}/checks_groups.cpp ${CMAKE_CURRENT_LIST_DIR}/checks_tensor.cpp)
target_link_libraries(test_comm_mpi PRIVATE cpdit)

set(COMM_FAULT_EXPECT "rank 1 fails on purpose mid-collective")
add_test(NAME comm_local_fault_exits_nonzero
         COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:test_comm_mpi>|--fault|--ranks|4"
                 "-DEXPECT=${COMM_FAULT_EXPECT}" -P ${CMAKE_CURRENT_LIST_DIR}/expect_failure.cmake)
set_tests_properties(comm_local_fault_exits_nonzero PROPERTIES TIMEOUT 120 LABELS "unit;comm")

if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  set(COMM_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CPDIT_COMM_TIMEOUT_S=60)
  foreach(np 3 4)
    add_test(NAME comm_mpi_contract_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe $<TARGET_FILE:test_comm_mpi>)
    set_tests_properties(comm_mpi_contract_np${np} PROPERTIES TIMEOUT 300 ENVIRONMENT "${COMM_MPI_ENV}"
                         LABELS "mpi;comm")
  endforeach()
  add_test(NAME comm_mpi_dropped_send_keeps_its_buffer
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:test_comm_mpi> --dropped-send)
  set_tests_properties(comm_mpi_dropped_send_keeps_its_buffer PROPERTIES TIMEOUT 120 ENVIRONMENT "${COMM_MPI_ENV}"
                       LABELS "mpi;comm")
  add_test(NAME comm_mpi_fault_ends_job
           COMMAND ${CMAKE_COMMAND}
                   "-DCOMMAND=${MPIEXEC_EXECUTABLE}|${MPIEXEC_NUMPROC_FLAG}|4|--oversubscribe|$<TARGET_FILE:test_comm_mpi>|--fault"
                   "-DEXPECT=${COMM_FAULT_EXPECT}" -P ${CMAKE_CURRENT_LIST_DIR}/expect_failure.cmake)
  set_tests_properties(comm_mpi_fault_ends_job PROPERTIES TIMEOUT 120 ENVIRONMENT "${COMM_MPI_ENV}"
                       LABELS "mpi;comm")
endif()
