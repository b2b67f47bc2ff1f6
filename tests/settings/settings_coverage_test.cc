// Every setting has a test that observes its effect (issue 28, docs/testing.md "Settings end to
// end"): each option of dslaunch, dslaunch-agent and dslaunch-worker, and each train.json key the
// runtime reads, is named in tests/settings/settings.txt with the test case that sets it at the
// outermost layer (the command line, the environment, the file) and checks what it does where it
// acts. This test holds that table against the parsers' own lists, so that a new option or key
// without such a test fails the suite, and against the test cases the suite has, so that a row
// cannot name a test that does not exist or never mentions the setting.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/spawn.h"
#include "launcher/cli/cli.h"
#include "runtime/config/train_config.h"

namespace dslaunch {
namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = DSLAUNCH_SOURCE_DIR;
const fs::path kBinDir = DSLAUNCH_BIN_DIR;
const fs::path kTestDir = kBinDir.parent_path() / "tests";
const fs::path kTable = kSourceDir / "tests/settings/settings.txt";
const fs::path kUntested = kSourceDir / "tests/settings/untested.txt";

// The row of the table that covers every recognised-but-unimplemented train.json key at once: its
// test walks the parser's table of them (runtime/config/unimplemented_keys.h).
constexpr char kUnimplementedRow[] = "train.json (recognised, not implemented)";

struct Row {
  std::string setting;    // "dslaunch --watchdog_timeout", "train.json $.gradient_clipping", ...
  std::string test_case;  // a doctest TEST_CASE name
  int line = 0;
};

// `path`'s rows: "SETTING<tab>TEST CASE", or with `with_test` false "SETTING" alone (a reason may
// follow a tab).
std::vector<Row> ReadTable(const fs::path& path = kTable, bool with_test = true) {
  Result<std::string> text = ReadFile(path.string());
  REQUIRE_MESSAGE(text.ok(), text.status().message());
  std::vector<Row> rows;
  std::istringstream in(*text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    INFO(path.string() << ":" << n << ": " << line);
    if (!with_test) {
      rows.push_back({line.substr(0, tab), "", n});
      continue;
    }
    REQUIRE_MESSAGE(tab != std::string::npos, "expected SETTING<tab>TEST CASE");
    rows.push_back({line.substr(0, tab), line.substr(line.find_first_not_of('\t', tab)), n});
  }
  return rows;
}

std::string Output(const std::vector<std::string>& argv) {
  SpawnOptions options;
  options.argv = argv;
  Result<ProgramOutput> out = RunAndReadOutput(options, std::chrono::seconds(60), 16 << 20, false);
  REQUIRE_MESSAGE(out.ok(), out.status().message());
  return out->output;
}

// A setting, and the words of which its test's file must hold one: an option's spellings, a
// key's name in quotes.
using Settings = std::map<std::string, std::vector<std::string>>;

void AddOption(Settings& settings, const std::string& program, const std::vector<std::string>& spellings) {
  std::vector<std::string> words;
  for (const std::string& s : spellings) {
    words.push_back(s);
    std::string dashed = s;
    std::replace(dashed.begin() + 2, dashed.end(), '_', '-');
    words.push_back(dashed);
  }
  settings[program + " " + spellings.front()] = words;
}

// The long options a CLI11 --help lists: "  -x,--name TEXT ..." or "  --name ...".
std::vector<std::string> HelpOptions(const std::string& help) {
  std::vector<std::string> names;
  static const std::regex kOption(R"(^\s+(?:-\w,\s*)?(--[a-z][a-z0-9_-]*))");
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kOption) && m[1] != "--help" && m[1] != "--version") names.push_back(m[1]);
  }
  return names;
}

// The subcommands a CLI11 --help lists under "SUBCOMMANDS:" (or "Subcommands:").
std::vector<std::string> HelpSubcommands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help);
  std::string line;
  bool in_list = false;
  static const std::regex kName(R"(^\s+([a-z][a-z0-9-]*)\s)");
  while (std::getline(in, line)) {
    std::string upper = line;
    std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
    if (upper.starts_with("SUBCOMMANDS")) {
      in_list = true;
      continue;
    }
    std::smatch m;
    if (in_list && std::regex_search(line, m, kName)) names.push_back(m[1]);
  }
  return names;
}

Settings CommandLineSettings() {
  Settings settings;
  for (const std::vector<std::string>& spellings : launcher::OptionSpellings()) {
    if (spellings.front() == "--help" || spellings.front() == "--version") continue;
    AddOption(settings, "dslaunch", spellings);
  }
  for (const std::string& name : HelpOptions(Output({(kBinDir / "dslaunch-agent").string(), "--help"}))) {
    AddOption(settings, "dslaunch-agent", {name});
  }
  const std::string worker = (kBinDir / "dslaunch-worker").string();
  const std::vector<std::string> subcommands = HelpSubcommands(Output({worker, "--help"}));
  CHECK(subcommands.size() >= 4);
  for (const std::string& sub : subcommands) {
    for (const std::string& name : HelpOptions(Output({worker, sub, "--help"}))) {
      AddOption(settings, "dslaunch-worker " + sub, {name});
    }
  }
  return settings;
}

// The key's last name as a test writes it: quoted in a JSON text ("$.fp16.loss_scale_window" ->
// "\"loss_scale_window\""), or ending a JSON pointer ("/fp16/loss_scale_window\"").
std::vector<std::string> KeyWords(const std::string& path) {
  const std::string name = path.substr(path.rfind('.') + 1);
  return {"\"" + name + "\"", "/" + name + "\""};
}

Settings TrainJsonSettings(std::set<std::string>* unimplemented) {
  Settings settings;
  const fs::path dir = kSourceDir / "tests/settings/configs";
  size_t files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    Result<std::string> text = ReadFile(entry.path().string());
    REQUIRE(text.ok());
    auto loader = [](const std::string& path) { return ReadFile(path); };
    Result<runtime::ConfigKeys> keys = runtime::ConfigKeysRead(*text, entry.path().string(), 2, loader);
    INFO(entry.path().string());
    REQUIRE_MESSAGE(keys.ok(), keys.status().message());
    for (const std::string& path : keys->implemented) settings["train.json " + path] = KeyWords(path);
    unimplemented->insert(keys->unimplemented.begin(), keys->unimplemented.end());
  }
  CHECK(files >= 2);
  return settings;
}

// A train.json section ("train.json $.fp16") whose keys are settings of their own: its keys'
// tests cover it.
bool IsSection(const std::string& name, const Settings& settings) {
  if (!name.starts_with("train.json $")) return false;
  auto next = settings.upper_bound(name);
  return next != settings.end() && next->first.starts_with(name + ".");
}

struct TestCase {
  std::string name;
  fs::path file;
};

// Every test case of the suite's doctest programs, from their own lists.
std::vector<TestCase> SuiteTestCases() {
  std::vector<TestCase> cases;
  static const std::regex kCase(R"re(<TestCase name="([^"]*)" filename="([^"]*)")re");
  for (const fs::directory_entry& entry : fs::directory_iterator(kTestDir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !name.ends_with("_test") || ::access(entry.path().c_str(), X_OK) != 0) continue;
    const std::string list = Output({entry.path().string(), "--list-test-cases", "--reporters=xml", "--no-version"});
    for (auto it = std::sregex_iterator(list.begin(), list.end(), kCase); it != std::sregex_iterator(); ++it) {
      fs::path file = (*it)[2].str();
      if (file.is_relative()) file = kBinDir.parent_path() / file;
      std::string unescaped = (*it)[1].str();
      for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
               {"&quot;", "\""}, {"&apos;", "'"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}}) {
        for (size_t at = unescaped.find(entity); at != std::string::npos; at = unescaped.find(entity, at + 1)) {
          unescaped.replace(at, entity.size(), c);
        }
      }
      cases.push_back({unescaped, file});
    }
  }
  REQUIRE(cases.size() > 100);
  return cases;
}

TEST_CASE("every option and train.json key has a test of its effect, and every row names a real test that sets it") {
  std::set<std::string> unimplemented;
  Settings settings = CommandLineSettings();
  const size_t options = settings.size();
  settings.merge(TrainJsonSettings(&unimplemented));
  CHECK(options >= 70);
  CHECK(settings.size() - options >= 60);
  CHECK(unimplemented.size() >= 50);
  settings[kUnimplementedRow] = {"UnimplementedKeys"};

  const std::vector<Row> rows = ReadTable();
  const std::vector<TestCase> cases = SuiteTestCases();
  std::map<std::string, std::string> file_text;
  std::set<std::string> covered;
  for (const Row& row : rows) {
    INFO(kTable.string() << ":" << row.line << ": " << row.setting << " -> " << row.test_case);
    auto setting = settings.find(row.setting);
    CHECK_MESSAGE(setting != settings.end(), "no such setting: not an option of the program, or a key the parser "
                                             "does not read from tests/settings/configs/*.json");
    if (setting == settings.end()) continue;
    bool found = false, mentions = false;
    for (const TestCase& c : cases) {
      if (c.name != row.test_case) continue;
      found = true;
      auto [text, inserted] = file_text.try_emplace(c.file.string());
      if (inserted) {
        Result<std::string> read = ReadFile(c.file.string());
        if (read.ok()) text->second = std::move(*read);
      }
      for (const std::string& word : setting->second) mentions = mentions || text->second.find(word) != std::string::npos;
    }
    CHECK_MESSAGE(found, "no test case of that name in the suite's programs");
    CHECK_MESSAGE((!found || mentions), "the test's file never mentions the setting");
    if (found && mentions) covered.insert(row.setting);
  }
  // The settings still without such a test, each named once in untested.txt with its reason; one
  // that has a test must leave the list, so that it shrinks as tests come.
  std::set<std::string> untested;
  for (const Row& row : ReadTable(kUntested, false)) {
    INFO(kUntested.string() << ":" << row.line << ": " << row.setting);
    CHECK_MESSAGE(settings.count(row.setting) == 1, "no such setting");
    CHECK_MESSAGE(covered.count(row.setting) == 0, "it has a test in settings.txt now: remove it from this list");
    CHECK_MESSAGE(untested.insert(row.setting).second, "named twice");
  }
  std::string missing;
  for (const auto& [name, words] : settings) {
    if (covered.count(name) == 0 && untested.count(name) == 0 && !IsSection(name, settings)) missing += "\n  " + name;
  }
  CHECK_MESSAGE(missing.empty(), "settings without a test of their effect in " << kTable.string() << ":" << missing);
}

}  // namespace
}  // namespace dslaunch
