#pragma once
// Everything of the comm layer in one include.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/comm/launch.hpp>
#include <cpdit/comm/local.hpp>
#include <cpdit/comm/mesh.hpp>
#include <cpdit/comm/mpi.hpp>
#include <cpdit/comm/tensor_ops.hpp>
