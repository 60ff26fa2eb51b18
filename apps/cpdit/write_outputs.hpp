#pragma once
// A run's outputs to the files the user named (generate's --out, --preview, --image, --frames-dir,
// --video), all of them or none (io::OutputBatch): generate writes there, the server (serve/) into its
// private spool, so a picture it serves is the file generate writes for the same settings, byte for byte.
#include "generate_batch.hpp"

#include <cpdit/pipeline/request.hpp>

namespace cpdit::app {

void write_outputs(const pipeline::Result& result, const Outputs& o);

}  // namespace cpdit::app
