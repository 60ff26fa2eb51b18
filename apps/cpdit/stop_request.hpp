#pragma once
// Stopping a generation between denoising steps. A signal handler (the Python package's, for Ctrl-C)
// calls request_stop(); every rank checks after each step (Progress::step) and throws, and the rank
// engines carry that failure to the other ranks, so the whole run ends at the next step, on every rank.
namespace cpdit::app {

void request_stop();  // async-signal-safe
void clear_stop_request();
bool stop_requested();
// Throws cpdit::Error("generation interrupted") when a stop was requested.
void throw_if_stop_requested();

}  // namespace cpdit::app
