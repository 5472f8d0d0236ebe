// libonnx's shape inference in a child process (see onnx_inference.h for why).
#include "frontend/onnx_inference.h"

#include "support/diagnostics.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

// A sanitizer runtime's death callback (libFuzzer sets one that saves the current input as a
// crash): a child that dies in libonnx must not run it. Weak: absent without sanitizers.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace aicf {

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The child's answer: exit code 0 with the serialized GraphProto on the pipe, 3 with an
// exception's message, 4 when it cannot write.
constexpr int kThrew = 3, kWriteFailed = 4;

bool writeAll(int fd, const std::string &bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// In the child: default handlers for the fatal signals (a fuzzer's or a host program's own
// would treat the child's crash as theirs), no core files, no output, a memory limit (not under
// AddressSanitizer, whose shadow memory is a large reservation), then the inference.
[[noreturn]] void runChild(const onnx::ModelProto &model, int fd) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP})
    std::signal(sig, SIG_DFL);
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback(nullptr);
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  if (!kSanitized) {
    // 8 GiB beyond what the process maps already: inference propagates only small shape values.
    long pages = 0;
    if (FILE *f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1)
        pages = 0;
      std::fclose(f);
    }
    rlim_t limit =
        static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t(8) << 30);
    rlimit as{limit, limit};
    setrlimit(RLIMIT_AS, &as);
  }
  int devnull = ::open("/dev/null", O_WRONLY);
  if (devnull >= 0) {
    ::dup2(devnull, STDOUT_FILENO);
    ::dup2(devnull, STDERR_FILENO);
  }
  try {
    onnx::ModelProto copy = model;
    onnx::ShapeInferenceOptions options(false, 0, true);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
    onnx::GraphProto out;
    *out.mutable_value_info() = copy.graph().value_info();
    *out.mutable_output() = copy.graph().output();
    std::string bytes;
    if (!out.SerializeToString(&bytes) || !writeAll(fd, bytes))
      ::_exit(kWriteFailed);
    ::_exit(0);
  } catch (const std::exception &e) {
    writeAll(fd, e.what());
    ::_exit(kThrew);
  } catch (...) {
    ::_exit(kThrew);
  }
}

} // namespace

IsolatedInference inferShapesIsolated(const onnx::ModelProto &model, int timeoutSeconds) {
  IsolatedInference result;
  // The schema registry's statics are built here, not in a child forked while another thread
  // might hold their initialisation lock.
  (void)onnx::OpSchemaRegistry::Instance();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.failure = cat("pipe: ", std::strerror(errno));
    return result;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    result.failure = cat("fork: ", std::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    ::close(fds[0]);
    runChild(model, fds[1]);
  }
  ::close(fds[1]);

  // Read until the child closes its end (it exits), or until the deadline.
  std::string bytes;
  bool timedOut = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      break;
    if (r == 0)
      continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timedOut)
    ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timedOut) {
    result.failure = cat("timed out after ", timeoutSeconds, " s");
  } else if (WIFSIGNALED(status)) {
    result.failure = cat("crashed (signal ", WTERMSIG(status), ")");
  } else if (!WIFEXITED(status)) {
    result.failure = "stopped abnormally";
  } else if (WEXITSTATUS(status) == kThrew) {
    result.failure = cat("threw: ", bytes);
  } else if (WEXITSTATUS(status) != 0) {
    result.failure = cat("exited with code ", WEXITSTATUS(status));
  } else {
    onnx::GraphProto g;
    if (g.ParseFromString(bytes))
      result.inferred = std::move(g);
    else
      result.failure = "gave an unreadable answer";
  }
  return result;
}

} // namespace aicf
