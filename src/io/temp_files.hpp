#pragma once
// The temp files of writes in progress, removed if the process is interrupted (SIGINT, SIGTERM)
// between creating one and renaming it into place. The handler runs the previous disposition
// afterwards (the default: the process ends by that signal; Python's: KeyboardInterrupt).
#include <string>

namespace cpdit::io {

// Registers `path` for removal on interruption; returns a slot for forget_temp_file, or -1 when
// every slot is taken (the file is then only removed by the usual unwind).
int remember_temp_file(const std::string& path);
void forget_temp_file(int slot);

}  // namespace cpdit::io
