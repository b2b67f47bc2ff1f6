// `dslaunch --help` as text: usage lines, then the options under their group headings (in the
// order given), each option's names in a left column and its description wrapped beside it, then
// a footer. Every line fits kHelpWidth columns (a word longer than a line is the one exception).
// Pure: cli.cc turns its CLI11 options into HelpEntry values.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dslaunch::launcher {

// The widest --help line: a terminal of 100 columns, torchrun's and DeepSpeed's help fit in it too.
inline constexpr size_t kHelpWidth = 100;

struct HelpEntry {
  std::string group;  // heading; entries of one group need not be adjacent
  std::string names;  // "-H, --hostfile FILE"
  std::string text;   // one paragraph, wrapped here
};

struct HelpPage {
  std::vector<std::string> usage;  // "dslaunch [OPTIONS] PROGRAM [ARGS...]", one per form
  std::string description;         // paragraphs separated by "\n", each wrapped
  std::vector<HelpEntry> entries;  // groups appear in the order of their first entry
  std::string footer;              // printed as it is (its lines must fit already)
};

// `text`'s words in lines of at most `width` columns (a longer word on a line of its own).
std::vector<std::string> WrapWords(std::string_view text, size_t width);

std::string FormatHelp(const HelpPage& page, size_t width = kHelpWidth);

}  // namespace dslaunch::launcher
