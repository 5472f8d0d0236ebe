// Running a tool (the host C++ compiler, nvcc) without a shell and capturing what it prints.
#pragma once

#include <string>
#include <vector>

namespace aicf {

// Runs argv[0] (searched in PATH; no shell) with argv; returns its exit status and appends its
// combined stdout and stderr to `output`. UserError if it cannot be started.
int runCapture(const std::vector<std::string> &argv, std::string &output);

// Runs argv like runCapture and returns its output; a non-zero exit is a UserError
// "WHAT failed (exit N): COMMAND LINE\nOUTPUT" (the compilers' failures name what ran).
std::string runOrThrow(const std::vector<std::string> &argv, const std::string &what);

} // namespace aicf
