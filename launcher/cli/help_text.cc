#include "launcher/cli/help_text.h"

#include <sstream>

namespace dslaunch::launcher {
namespace {

// The column the descriptions start at: wide enough for "-H, --hostfile FILE" and most names; a
// longer one gets its description on the next line, as argparse does.
constexpr size_t kNamesColumn = 32;
constexpr size_t kIndent = 2;

}  // namespace

std::vector<std::string> WrapWords(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t at = 0;
  while (at < text.size()) {
    const size_t start = text.find_first_not_of(' ', at);
    if (start == std::string_view::npos) break;
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
    at = end;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string FormatHelp(const HelpPage& page, size_t width) {
  std::ostringstream out;
  for (size_t i = 0; i < page.usage.size(); ++i) out << (i == 0 ? "Usage: " : "       ") << page.usage[i] << "\n";
  std::istringstream paragraphs(page.description);
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    out << "\n";
    for (const std::string& line : WrapWords(paragraph, width)) out << line << "\n";
  }
  std::vector<std::string> groups;
  for (const HelpEntry& e : page.entries) {
    bool seen = false;
    for (const std::string& g : groups) seen = seen || g == e.group;
    if (!seen) groups.push_back(e.group);
  }
  const size_t text_width = width - kNamesColumn;
  for (const std::string& group : groups) {
    out << "\n" << group << ":\n";
    for (const HelpEntry& e : page.entries) {
      if (e.group != group) continue;
      std::string first = std::string(kIndent, ' ') + e.names;
      std::vector<std::string> lines = WrapWords(e.text, text_width);
      if (first.size() + 2 > kNamesColumn && !lines.empty()) {
        out << first << "\n";
        first.clear();
      }
      if (lines.empty()) {
        out << first << "\n";
        continue;
      }
      for (size_t i = 0; i < lines.size(); ++i) {
        const std::string& lead = i == 0 ? first : std::string();
        out << lead << std::string(kNamesColumn - lead.size(), ' ') << lines[i] << "\n";
      }
    }
  }
  if (!page.footer.empty()) out << "\n" << page.footer;
  return out.str();
}

}  // namespace dslaunch::launcher
