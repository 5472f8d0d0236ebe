// Running a tool (the host C++ compiler, nvcc) without a shell and capturing what it prints.
#pragma once

#include <string>
#include <vector>

namespace aicf {

// Runs argv[0] (searched in PATH; no shell) with argv; returns its exit status and appends its
// combined stdout and stderr to `output`. UserError if it cannot be started.
int runCapture(const std::vector<std::string> &argv, std::string &output);

} // namespace aicf
