# Shared by the mpirun refusal scripts: a refused run printed the one-line error matching `pattern`
# once from each of its `ranks` processes (stderr in `err`) and did not write `output`.
function(expect_every_rank_refused err pattern ranks output)
  string(REGEX MATCHALL "${pattern}" lines "${err}")
  list(LENGTH lines count)
  if(NOT count EQUAL ranks)
    message(FATAL_ERROR "expected \"${pattern}\" once from each of the ${ranks} ranks, got ${count}:\n${err}")
  endif()
  if(EXISTS ${output})
    message(FATAL_ERROR "a refused run wrote ${output}")
  endif()
endfunction()
