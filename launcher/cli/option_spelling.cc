#include "launcher/cli/option_spelling.h"

#include <algorithm>

#include "common/text.h"

namespace dslaunch::launcher {
namespace {

std::string Respelled(std::string_view name, char from, char to) {
  std::string out(name);
  if (out.size() > 2 && out.compare(0, 2, "--") == 0) std::replace(out.begin() + 2, out.end(), from, to);
  return out;
}

bool HasAfterDashes(std::string_view name, char c) {
  return name.size() > 2 && name.substr(0, 2) == "--" && name.find(c, 2) != std::string_view::npos;
}

}  // namespace

std::string Underscored(std::string_view name) { return Respelled(name, '-', '_'); }
std::string Dashed(std::string_view name) { return Respelled(name, '_', '-'); }

std::string NearestOption(std::string_view unknown, const std::vector<std::string>& known) {
  const std::string wanted = Underscored(unknown);
  const std::string* best = nullptr;
  size_t best_distance = std::string::npos;
  for (const std::string& name : known) {
    const size_t d = EditDistance(wanted, Underscored(name));
    if (d < best_distance) {
      best_distance = d;
      best = &name;
    }
  }
  if (best == nullptr || best_distance > std::max<size_t>(2, unknown.size() / 3)) return "";
  if (HasAfterDashes(unknown, '_')) return Underscored(*best);
  if (HasAfterDashes(unknown, '-')) return Dashed(*best);
  return *best;
}

}  // namespace dslaunch::launcher
