// See process.h: posix_spawnp with stdout and stderr on one pipe, read to the end, then waitpid.
#include "support/process.h"

#include "support/diagnostics.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace aicf {

int runCapture(const std::vector<std::string> &argv, std::string &output) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw UserError(cat("cannot create a pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw UserError(cat("cannot run ", argv[0], ": ", std::strerror(rc)));
  }
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0)
      output.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw UserError(cat("waiting for ", argv[0], ": ", std::strerror(errno)));
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string runOrThrow(const std::vector<std::string> &argv, const std::string &what) {
  std::string output;
  int rc = runCapture(argv, output);
  if (rc != 0) {
    std::string cmd;
    for (const std::string &a : argv)
      cmd += (cmd.empty() ? "" : " ") + a;
    throw UserError(cat(what, " failed (exit ", rc, "): ", cmd, "\n", output));
  }
  return output;
}

} // namespace aicf
