#include "launcher/slurm/hostlist.h"

#include <charconv>
#include <cstdint>

namespace dslaunch::launcher {
namespace {

// The most digits a number in a range may have: 18 fit an int64 without overflow.
constexpr size_t kMaxRangeDigits = 18;

Status Bad(std::string_view expression, size_t at, const std::string& what) {
  return InvalidArgumentError("hostlist '" + std::string(expression) + "' at offset " + std::to_string(at) + ": " +
                              what);
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The members of one bracket group's text "1,3-5,07-09", zero-padded.
Result<std::vector<std::string>> ExpandGroup(std::string_view expression, size_t at, std::string_view group) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = group.find(',', start);
    const std::string_view item = group.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t dash = item.find('-');
    const std::string_view low = item.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : item.substr(dash + 1);
    if (!AllDigits(low) || !AllDigits(high) || low.size() > kMaxRangeDigits || high.size() > kMaxRangeDigits) {
      return Bad(expression, at + start, "'" + std::string(item) + "' is not a number or a range N-M");
    }
    int64_t lo = 0, hi = 0;
    std::from_chars(low.data(), low.data() + low.size(), lo);
    std::from_chars(high.data(), high.data() + high.size(), hi);
    if (lo > hi) return Bad(expression, at + start, "range '" + std::string(item) + "' runs backwards");
    if (static_cast<uint64_t>(hi - lo) >= kMaxHostlistHosts) {
      return Bad(expression, at + start, "range '" + std::string(item) + "' names more than " +
                                             std::to_string(kMaxHostlistHosts) + " hosts");
    }
    for (int64_t v = lo; v <= hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// Expands one host "prefix[g1]mid[g2]" into `out`.
Status ExpandHost(std::string_view expression, size_t at, std::string_view host, std::vector<std::string>& out) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < host.size()) {
    const size_t open = host.find('[', i);
    const size_t stray = host.find(']', i);
    if (stray != std::string_view::npos && (open == std::string_view::npos || stray < open)) {
      return Bad(expression, at + stray, "']' without '['");
    }
    if (open == std::string_view::npos) {
      if (names.size() > 1 || host.find('[') != std::string_view::npos) {
        return Bad(expression, at + i, "text '" + std::string(host.substr(i)) + "' after the last bracket group");
      }
      for (auto& n : names) n += host.substr(i);
      break;
    }
    const size_t close = host.find(']', open);
    if (close == std::string_view::npos) return Bad(expression, at + open, "'[' is not closed");
    const std::string_view text = host.substr(i, open - i);
    DSLAUNCH_ASSIGN_OR_RETURN(std::vector<std::string> members,
                              ExpandGroup(expression, at + open + 1, host.substr(open + 1, close - open - 1)));
    if (names.size() * members.size() > kMaxHostlistHosts) {
      return Bad(expression, at, "names more than " + std::to_string(kMaxHostlistHosts) + " hosts");
    }
    std::vector<std::string> next;
    next.reserve(names.size() * members.size());
    for (const auto& n : names) {
      for (const auto& m : members) next.push_back(n + std::string(text) + m);
    }
    names = std::move(next);
    i = close + 1;
  }
  if (out.size() + names.size() > kMaxHostlistHosts) {
    return Bad(expression, at, "names more than " + std::to_string(kMaxHostlistHosts) + " hosts");
  }
  for (auto& n : names) out.push_back(std::move(n));
  return Status::Ok();
}

bool IsSeparator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expression) {
  std::vector<std::string> hosts;
  size_t i = 0;
  while (i < expression.size()) {
    if (IsSeparator(expression[i])) {
      ++i;
      continue;
    }
    // A host runs to the next separator outside brackets.
    size_t end = i;
    int depth = 0;
    while (end < expression.size() && (depth > 0 || !IsSeparator(expression[end]))) {
      if (expression[end] == '[') ++depth;
      if (expression[end] == ']') --depth;
      if (depth > 1) return Bad(expression, end, "'[' inside a bracket group");
      if (depth < 0) return Bad(expression, end, "']' without '['");
      ++end;
    }
    if (depth != 0) return Bad(expression, expression.rfind('['), "'[' is not closed");
    DSLAUNCH_RETURN_IF_ERROR(ExpandHost(expression, i, expression.substr(i, end - i), hosts));
    i = end;
  }
  return hosts;
}

Result<std::vector<int>> ExpandTasksPerNode(std::string_view spec) {
  std::vector<int> counts;
  auto bad = [&](std::string_view item) {
    return InvalidArgumentError("SLURM_TASKS_PER_NODE '" + std::string(spec) + "': '" + std::string(item) +
                                "' is not COUNT or COUNT(xREPEAT)");
  };
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = spec.find(',', start);
    const std::string_view item = spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const size_t paren = item.find('(');
    const std::string_view count_text = item.substr(0, paren);
    int count = 0, repeat = 1;
    if (!AllDigits(count_text) || count_text.size() > 9) return bad(item);
    std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (paren != std::string_view::npos) {
      const std::string_view rest = item.substr(paren);  // "(xK)"
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')') return bad(item);
      const std::string_view k = rest.substr(2, rest.size() - 3);
      if (!AllDigits(k) || k.size() > 9) return bad(item);
      std::from_chars(k.data(), k.data() + k.size(), repeat);
    }
    if (count < 1 || repeat < 1) return bad(item);
    if (counts.size() + static_cast<size_t>(repeat) > kMaxHostlistHosts) {
      return InvalidArgumentError("SLURM_TASKS_PER_NODE '" + std::string(spec) + "' names more than " +
                                  std::to_string(kMaxHostlistHosts) + " nodes");
    }
    counts.insert(counts.end(), static_cast<size_t>(repeat), count);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return counts;
}

}  // namespace dslaunch::launcher
