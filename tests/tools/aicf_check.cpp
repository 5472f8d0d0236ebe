// aicf-check: the golden-test runner, a tiny lit + FileCheck (docs/contributing.md: MLIR-style
// tests).
//
//   aicf-check FILE --bin-dir DIR --testdata DIR [--check-prefix CHECK]
//
// FILE holds its own test in comments:
//   // RUN: %aicf-opt %s --passes=dce              run; its stdout+stderr is what gets checked
//   // RUN: not %aicf-opt %s | check-prefix=ERR    `not`: must exit non-zero (but not crash);
//   // RUN: exit 2 %aicfc bad.onnx                 `exit N`: must exit with exactly N
//                                                  `| check-prefix=P`: checked by P lines
//   // CHECK: text        the next occurrence, at or after the previous match
//   // CHECK-NEXT: text   on the line right after the previous match
//   // CHECK-SAME: text   on the same line, after the previous match
//   // CHECK-EMPTY:       the line after the previous match is empty
//   // CHECK-NOT: text    absent between the previous match and the next one (or the end)
//   // CHECK-LABEL: text  like CHECK (labels do not partition the output here)
//   // GOLDEN: path       the whole output equals this file (relative to FILE's folder);
//                         AICF_UPDATE_GOLDENS=1 rewrites it instead. P-GOLDEN for prefix P.
// A RUN line ending in '\' continues on the next RUN line. Substitutions: %s (FILE),
// %aicf-opt, %aicf-diff, %aicfc, %aicf-run (tools in --bin-dir), %testdata. Matching is by
// substring, with runs of whitespace collapsed to one space and ends trimmed, on both sides. Exit 0
// when every RUN line passes, 1 otherwise (with the failing CHECK, its file:line and the output
// around the place it was looked for).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct RunLine {
  int line;
  std::string command;
  std::string prefix;
};

enum class Kind { Plain, Next, Same, Empty, Not, Label };

struct Check {
  Kind kind;
  std::string directive; // "CHECK-NEXT"
  std::string pattern;   // whitespace-collapsed
  int line;
};

struct Options {
  std::string file, binDir, testdata, prefix = "CHECK";
};

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string collapse(const std::string &s) {
  std::string out;
  bool space = false;
  for (char c : trim(s)) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      space = true;
      continue;
    }
    if (space)
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::vector<std::string> splitLines(const std::string &text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

std::string shellQuote(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool isPrefixChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// The directive of a comment line: "// CHECK-NEXT: foo" -> ("CHECK-NEXT", "foo").
bool parseDirective(const std::string &line, std::string &name, std::string &rest) {
  std::string t = trim(line);
  if (t.rfind("//", 0) != 0)
    return false;
  size_t i = 2;
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t'))
    ++i;
  size_t start = i;
  while (i < t.size() && isPrefixChar(t[i]))
    ++i;
  if (i == start || i >= t.size() || t[i] != ':')
    return false;
  name = t.substr(start, i - start);
  rest = t.substr(i + 1);
  return true;
}

class Runner {
public:
  explicit Runner(Options o) : o_(std::move(o)) {}

  int run() {
    std::ifstream f(o_.file, std::ios::binary);
    if (!f) {
      std::cerr << "error: cannot open " << o_.file << "\n";
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    fileLines_ = splitLines(ss.str());
    if (!collectRunLines())
      return 1;
    if (runs_.empty()) {
      std::cerr << o_.file << ": error: no '// RUN:' line\n";
      return 1;
    }
    bool ok = true;
    int checks = 0;
    for (const RunLine &r : runs_) {
      std::vector<Check> cs;
      std::vector<std::pair<int, std::string>> goldens;
      if (!collectChecks(r.prefix, cs, goldens))
        return 1;
      checks += static_cast<int>(cs.size() + goldens.size());
      ok = runOne(r, cs, goldens) && ok;
    }
    if (ok)
      std::cout << "aicf-check: " << o_.file << ": " << runs_.size() << " RUN line(s), " << checks
                << " check(s) passed\n";
    return ok ? 0 : 1;
  }

private:
  bool collectRunLines() {
    bool continuing = false;
    for (size_t i = 0; i < fileLines_.size(); ++i) {
      std::string name, rest;
      if (!parseDirective(fileLines_[i], name, rest) || name != "RUN")
        continue;
      std::string cmd = trim(rest);
      bool more = !cmd.empty() && cmd.back() == '\\';
      if (more)
        cmd = trim(cmd.substr(0, cmd.size() - 1));
      if (continuing)
        runs_.back().command += " " + cmd;
      else
        runs_.push_back({static_cast<int>(i + 1), cmd, o_.prefix});
      continuing = more;
    }
    if (continuing) {
      std::cerr << o_.file << ": error: the last RUN line ends in '\\'\n";
      return false;
    }
    for (RunLine &r : runs_) { // "... | check-prefix=FOO"
      size_t bar = r.command.rfind('|');
      if (bar == std::string::npos)
        continue;
      std::string tail = trim(r.command.substr(bar + 1));
      if (tail.rfind("check-prefix=", 0) != 0)
        continue;
      r.prefix = tail.substr(std::string("check-prefix=").size());
      r.command = trim(r.command.substr(0, bar));
      if (r.prefix.empty()) {
        std::cerr << o_.file << ":" << r.line << ": error: empty check-prefix\n";
        return false;
      }
    }
    return true;
  }

  bool collectChecks(const std::string &prefix, std::vector<Check> &checks,
                     std::vector<std::pair<int, std::string>> &goldens) {
    static const std::pair<const char *, Kind> suffixes[] = {
        {"", Kind::Plain},       {"-NEXT", Kind::Next}, {"-SAME", Kind::Same},
        {"-EMPTY", Kind::Empty}, {"-NOT", Kind::Not},   {"-LABEL", Kind::Label}};
    std::string goldenName = prefix == o_.prefix ? "GOLDEN" : prefix + "-GOLDEN";
    for (size_t i = 0; i < fileLines_.size(); ++i) {
      std::string name, rest;
      int line = static_cast<int>(i + 1);
      if (!parseDirective(fileLines_[i], name, rest))
        continue;
      if (name == goldenName || name == prefix + "-GOLDEN") {
        goldens.push_back({line, trim(rest)});
        continue;
      }
      if (name.rfind(prefix, 0) != 0)
        continue;
      bool known = false;
      for (const auto &[suffix, kind] : suffixes)
        if (name == prefix + suffix) {
          known = true;
          std::string pattern = collapse(rest);
          if (pattern.empty() && kind != Kind::Empty) {
            std::cerr << o_.file << ":" << line << ": error: empty " << name << " pattern\n";
            return false;
          }
          if (checks.empty() && (kind == Kind::Next || kind == Kind::Same || kind == Kind::Empty)) {
            std::cerr << o_.file << ":" << line << ": error: " << name
                      << " without a previous CHECK line\n";
            return false;
          }
          checks.push_back({kind, name, pattern, line});
        }
      if (!known && name.size() > prefix.size() && name[prefix.size()] == '-') {
        std::cerr << o_.file << ":" << line << ": error: unknown directive " << name << "\n";
        return false;
      }
    }
    return true;
  }

  // %t: a scratch path for this test file (its parent exists; removed when the run ends).
  std::string tempDir() const {
    static const fs::path dir = [] {
      fs::path d = fs::temp_directory_path() / ("aicf_check_" + std::to_string(::getpid()));
      fs::create_directories(d);
      std::atexit([] {
        std::error_code ec;
        fs::remove_all(fs::temp_directory_path() / ("aicf_check_" + std::to_string(::getpid())),
                       ec);
      });
      return d;
    }();
    return (dir / "t").string();
  }

  std::string substitute(const std::string &cmd) const {
    const std::pair<std::string, std::string> subs[] = {
        {"%aicf-opt", shellQuote((fs::path(o_.binDir) / "aicf-opt").string())},
        {"%aicf-diff", shellQuote((fs::path(o_.binDir) / "aicf-diff").string())},
        {"%aicf-run", shellQuote((fs::path(o_.binDir) / "aicf-run").string())},
        {"%aicfc", shellQuote((fs::path(o_.binDir) / "aicfc").string())},
        {"%testdata", shellQuote(o_.testdata)},
        {"%s", shellQuote(o_.file)},
        {"%t", shellQuote(tempDir())}, // after %testdata: first match wins
    };
    std::string out;
    for (size_t i = 0; i < cmd.size();) {
      bool replaced = false;
      if (cmd[i] == '%')
        for (const auto &[from, to] : subs)
          if (cmd.compare(i, from.size(), from) == 0) {
            out += to;
            i += from.size();
            replaced = true;
            break;
          }
      if (!replaced)
        out += cmd[i++];
    }
    return out;
  }

  bool runOne(const RunLine &r, const std::vector<Check> &checks,
              const std::vector<std::pair<int, std::string>> &goldens) {
    std::string cmd = r.command;
    bool expectFailure = false;
    int expectCode = -1; // `exit N`: exactly N
    if (cmd.rfind("not ", 0) == 0) {
      expectFailure = true;
      cmd = trim(cmd.substr(4));
    } else if (cmd.rfind("exit ", 0) == 0) {
      size_t end = cmd.find(' ', 5);
      std::string num = cmd.substr(5, end == std::string::npos ? std::string::npos : end - 5);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos ||
          num.size() > 3) {
        std::cerr << o_.file << ":" << r.line << ": error: `exit N` needs a number, got '" << num
                  << "'\n";
        return false;
      }
      expectCode = std::stoi(num);
      cmd = trim(cmd.substr(end == std::string::npos ? cmd.size() : end));
    }
    std::string shell = "{ " + substitute(cmd) + " ; } 2>&1";
    std::fflush(nullptr);
    FILE *p = popen(shell.c_str(), "r");
    if (!p) {
      std::cerr << o_.file << ":" << r.line << ": error: cannot run: " << shell << "\n";
      return false;
    }
    std::string output;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
      output.append(buf, n);
    int status = pclose(p);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    runCmd_ = shell;
    runLine_ = r.line;

    bool statusOk = expectCode >= 0 ? code == expectCode
                    : expectFailure ? (code != 0 && code < 128)
                                    : code == 0;
    if (!statusOk) {
      std::string expected = expectCode >= 0
                                 ? "was expected to exit with " + std::to_string(expectCode)
                             : expectFailure ? std::string("was expected to fail (exit 1..127)")
                                             : std::string("failed");
      std::cerr << o_.file << ":" << r.line << ": error: RUN " << expected << " but exited with "
                << code << (code >= 128 ? " (crash or signal)" : "") << "\n  " << shell
                << "\n--- output ---\n"
                << output << "--- end ---\n";
      return false;
    }
    output_ = splitLines(output);
    lines_.clear();
    for (const std::string &l : output_)
      lines_.push_back(collapse(l));
    bool ok = matchChecks(checks);
    for (const auto &[line, path] : goldens)
      ok = compareGolden(line, path, output) && ok;
    return ok;
  }

  // ---- CHECK matching --------------------------------------------------------------------------

  // First occurrence of `pat` at or after (line, col) before (endLine, endCol); -1 if none.
  int find(const std::string &pat, int line, size_t col, int endLine, size_t endCol,
           size_t &foundCol) const {
    for (int l = line; l < static_cast<int>(lines_.size()) && l <= endLine; ++l) {
      size_t from = l == line ? col : 0;
      size_t pos = lines_[l].find(pat, from);
      if (pos == std::string::npos)
        continue;
      if (l == endLine && pos + pat.size() > endCol)
        return -1;
      foundCol = pos;
      return l;
    }
    return -1;
  }

  bool matchChecks(const std::vector<Check> &checks) {
    int line = 0, prevLine = -1;
    size_t col = 0;
    std::vector<const Check *> nots;
    const int end = static_cast<int>(lines_.size());
    auto checkNots = [&](int toLine, size_t toCol) {
      for (const Check *n : nots) {
        size_t c;
        int l = find(n->pattern, line, col, toLine, toCol, c);
        if (l >= 0) {
          fail(*n, "excluded string found in output", l);
          return false;
        }
      }
      nots.clear();
      return true;
    };
    for (const Check &c : checks) {
      if (c.kind == Kind::Not) {
        nots.push_back(&c);
        continue;
      }
      int found = -1;
      size_t foundCol = 0;
      switch (c.kind) {
      case Kind::Plain:
      case Kind::Label: found = find(c.pattern, line, col, end, std::string::npos, foundCol); break;
      case Kind::Next:
        if (prevLine + 1 < end) {
          size_t pos = lines_[prevLine + 1].find(c.pattern);
          if (pos != std::string::npos) {
            found = prevLine + 1;
            foundCol = pos;
          }
        }
        break;
      case Kind::Same:
        if (prevLine >= 0) {
          size_t pos = lines_[prevLine].find(c.pattern, col);
          if (pos != std::string::npos) {
            found = prevLine;
            foundCol = pos;
          }
        }
        break;
      case Kind::Empty:
        if (prevLine + 1 < end && lines_[prevLine + 1].empty()) {
          found = prevLine + 1;
          foundCol = 0;
        }
        break;
      case Kind::Not: break;
      }
      if (found < 0) {
        int near = c.kind == Kind::Same                               ? std::max(prevLine, 0)
                   : (c.kind == Kind::Plain || c.kind == Kind::Label) ? line
                                                                      : prevLine + 1;
        fail(c, "expected string not found in output", near);
        return false;
      }
      if (!checkNots(found, foundCol))
        return false;
      prevLine = line = found;
      col = foundCol + c.pattern.size();
    }
    return checkNots(end, 0);
  }

  void fail(const Check &c, const char *what, int nearLine) const {
    std::cerr << o_.file << ":" << c.line << ": error: " << c.directive << ": " << what << "\n"
              << "  " << trim(fileLines_[static_cast<size_t>(c.line - 1)]) << "\n"
              << "  RUN (line " << runLine_ << "): " << runCmd_ << "\n";
    if (output_.empty()) {
      std::cerr << "  (the output is empty)\n";
      return;
    }
    int from = std::max(0, nearLine - 5);
    int to = std::min(static_cast<int>(output_.size()), nearLine + 15);
    std::cerr << "output lines " << from + 1 << "-" << to << " of " << output_.size()
              << " ('>' marks where the search " << (c.kind == Kind::Not ? "found it" : "began")
              << "):\n";
    for (int l = from; l < to; ++l)
      std::cerr << (l == nearLine ? "> " : "  ") << l + 1 << ": " << output_[l] << "\n";
  }

  bool compareGolden(int line, const std::string &rel, const std::string &output) const {
    fs::path path = fs::path(o_.file).parent_path() / rel;
    const char *update = std::getenv("AICF_UPDATE_GOLDENS");
    if (update && std::string(update) == "1") {
      if (path.has_parent_path())
        fs::create_directories(path.parent_path());
      std::ofstream f(path, std::ios::binary);
      if (!f || !(f << output) || !f.flush()) {
        std::cerr << o_.file << ":" << line << ": error: cannot write golden " << path << "\n";
        return false;
      }
      std::cout << "aicf-check: updated " << path.string() << "\n";
      return true;
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      std::cerr << o_.file << ":" << line << ": error: golden file " << path.string()
                << " is missing (AICF_UPDATE_GOLDENS=1 creates it)\n";
      return false;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    std::string want = ss.str();
    if (want == output)
      return true;
    std::vector<std::string> a = splitLines(want), b = splitLines(output);
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k])
      ++k;
    std::cerr << o_.file << ":" << line << ": error: output differs from golden " << path.string()
              << " at line " << k + 1 << "\n"
              << "  expected: " << (k < a.size() ? a[k] : "<end of file>") << "\n"
              << "  actual:   " << (k < b.size() ? b[k] : "<end of output>") << "\n"
              << "  RUN (line " << runLine_ << "): " << runCmd_ << "\n"
              << "  (rerun with AICF_UPDATE_GOLDENS=1 to accept the new output, then review the "
                 "diff)\n";
    return false;
  }

  Options o_;
  std::vector<std::string> fileLines_;
  std::vector<RunLine> runs_;
  std::vector<std::string> output_; // raw output lines of the current RUN
  std::vector<std::string> lines_;  // the same, whitespace-collapsed
  std::string runCmd_;
  int runLine_ = 0;
};

int usage() {
  std::cerr << "usage: aicf-check FILE --bin-dir DIR --testdata DIR [--check-prefix PREFIX]\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string &flag, std::string &out) {
      if (a == flag && i + 1 < argc) {
        out = argv[++i];
        return true;
      }
      if (a.rfind(flag + "=", 0) == 0) {
        out = a.substr(flag.size() + 1);
        return true;
      }
      return false;
    };
    if (value("--bin-dir", o.binDir) || value("--testdata", o.testdata) ||
        value("--check-prefix", o.prefix))
      continue;
    if (a.rfind("-", 0) == 0 || !o.file.empty())
      return usage();
    o.file = a;
  }
  if (o.file.empty() || o.binDir.empty())
    return usage();
  try {
    return Runner(o).run();
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
