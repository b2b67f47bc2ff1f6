#include "launcher/plan/shell_quote.h"

#include <algorithm>
#include <string_view>

namespace dslaunch::launcher {
namespace {

bool IsSafeChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
}

}  // namespace

std::string ShellQuote(std::string_view word) {
  if (!word.empty() && word.front() != '=' && std::all_of(word.begin(), word.end(), IsSafeChar)) {
    return std::string(word);
  }
  std::string quoted;
  quoted.reserve(word.size() + 2);
  quoted += '\'';
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";  // close the quote, an escaped quote, reopen
    } else {
      quoted += c;
    }
  }
  quoted += '\'';
  return quoted;
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& w : words) {
    if (!joined.empty()) joined += ' ';
    joined += ShellQuote(w);
  }
  return joined;
}

}  // namespace dslaunch::launcher
