#include "launcher/status/status_command.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/exit_codes.h"
#include "common/job_id.h"
#include "launcher/status/job_board.h"
#include "launcher/status/job_state_file.h"
#include "launcher/status/job_view_json.h"
#include "launcher/status/rank_log_files.h"
#include "launcher/status/status_client.h"

namespace dslaunch::launcher {
namespace {

constexpr char kStatusUsage[] =
    "usage: dslaunch status [JOB_ID]\n"
    "  Prints the ranks of a running job started with --status_port: with no JOB_ID, of the only one\n"
    "  running, or lists them. (docs/observability.md, \"dslaunch status and logs\")\n";
constexpr char kLogsUsage[] =
    "usage: dslaunch logs [--lines N] [--log_dir DIR] JOB_ID RANK\n"
    "  Prints a rank's output: of a running job with --status_port, what its launcher keeps (every\n"
    "  rank, any node); of a finished one, its log files on this machine (DIR: the job's --log_dir).\n";

Result<int64_t> Whole(const std::string& what, const std::string& text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    return InvalidArgumentError(what + " '" + text + "': expected a whole number >= 0");
  }
  return v;
}

std::string Duration(int64_t ms) {
  if (ms < 0) ms = 0;
  const int64_t s = ms / 1000;
  std::ostringstream o;
  if (s >= 3600) o << s / 3600 << "h";
  if (s >= 60) o << (s % 3600) / 60 << "m";
  o << s % 60 << "s";
  return o.str();
}

std::string Fixed(double v, int digits) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(digits);
  o << v;
  return o.str();
}

// Columns padded to their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += row[i] + std::string(width[i] - row[i].size() + 2, ' ');
    out += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  }
  return out;
}

// The live records of this user's launchers (stale ones, of a killed launcher, skipped).
Result<std::vector<JobStateRecord>> RunningJobs(const StatusEdges& edges) {
  DSLAUNCH_ASSIGN_OR_RETURN(auto all, ReadJobStates(JobStateDir(edges.temp_dir, edges.uid)));
  std::vector<JobStateRecord> live;
  for (auto& r : all) {
    if (edges.alive(r.pid)) live.push_back(std::move(r));
  }
  return live;
}

std::optional<JobStateRecord> Find(const std::vector<JobStateRecord>& jobs, const std::string& id) {
  for (const auto& r : jobs) {
    if (r.job_id == id) return r;
  }
  return std::nullopt;
}

std::string NoSuchJob(const std::string& id, const StatusEdges& edges) {
  return "no running job '" + id + "' with a status page in " + JobStateDir(edges.temp_dir, edges.uid) +
         " (a job is found there only while its launcher runs with --status_port, as the same user and TMPDIR)";
}

int Fail(std::ostream& err, const std::string& message, int code = 1) {
  err << "dslaunch: " << message << "\n";
  return code;
}

int ShowStatus(const StatusCommand& c, const StatusEdges& edges, std::ostream& out, std::ostream& err) {
  auto jobs = RunningJobs(edges);
  if (!jobs.ok()) return Fail(err, jobs.status().message());
  std::optional<JobStateRecord> job;
  if (c.job_id) {
    job = Find(*jobs, *c.job_id);
    if (!job) return Fail(err, NoSuchJob(*c.job_id, edges));
  } else if (jobs->empty()) {
    return Fail(err, "no running job with a status page in " + JobStateDir(edges.temp_dir, edges.uid) +
                         ": start one with --status_port PORT (0: any free port)");
  } else if (jobs->size() > 1) {
    std::vector<std::vector<std::string>> rows = {{"JOB_ID", "PID", "URL"}};
    for (const auto& r : *jobs) rows.push_back({r.job_id, std::to_string(r.pid), r.url});
    out << Table(rows) << "(" << jobs->size() << " running jobs: dslaunch status JOB_ID shows one)\n";
    return 0;
  } else {
    job = jobs->front();
  }
  auto reply = HttpGet(job->url, job->token, "/api/job");
  if (!reply.ok()) return Fail(err, "job " + job->job_id + ": " + reply.status().message());
  if (reply->status != 200) return Fail(err, "job " + job->job_id + ": " + job->url + "api/job answered " + std::to_string(reply->status) + ": " + reply->body);
  auto view = ParseJobViewJson(reply->body);
  if (!view.ok()) return Fail(err, job->url + "api/job: " + view.status().message());
  out << FormatStatusTable(*view) << "page: " << job->url << "\n";
  return 0;
}

int LogsOfFinishedJob(const StatusCommand& c, const StatusEdges& edges, std::ostream& out, std::ostream& err) {
  const std::string dir = (c.log_dir.empty() ? UserRuntimeBase(edges.temp_dir, edges.uid) : c.log_dir) + "/" + *c.job_id;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Fail(err, "job '" + *c.job_id + "' is not running (no status page found) and has no log directory " + dir +
                         " on this machine; if it ran with --log_dir DIR, give the same --log_dir DIR");
  }
  const std::vector<std::string> files = RankLogFiles(dir, c.rank);
  if (files.empty()) {
    return Fail(err, "no log of rank " + std::to_string(c.rank) + " in " + dir +
                         ": a rank that ran on another node has its log in the same directory there (e.g. ssh HOST "
                         "cat " + dir + "/rank" + std::to_string(c.rank) + ".stdout.log)");
  }
  // Every file read (and checked) before anything is printed: a refused file prints nothing.
  std::vector<LogTail> tails;
  for (const std::string& f : files) {
    auto tail = ReadLogTail(f, c.lines);
    if (!tail.ok() && tail.status().code() == StatusCode::kNotFound) {
      tails.emplace_back();  // a rank that never wrote to the stream: nothing to show
      continue;
    }
    if (!tail.ok()) return Fail(err, "job " + *c.job_id + " rank " + std::to_string(c.rank) + ": " + tail.status().message());
    tails.push_back(std::move(*tail));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (tails[i].cut) {
      err << "dslaunch: " << files[i] << " holds " << tails[i].file_bytes << " bytes: only the lines of its last "
          << (kMaxLogReadBytes >> 20) << " MiB are shown\n";
    }
    out << "==> " << files[i] << " <==\n" << tails[i].text;
  }
  return 0;
}

int ShowLogs(const StatusCommand& c, const StatusEdges& edges, std::ostream& out, std::ostream& err) {
  auto jobs = RunningJobs(edges);
  if (!jobs.ok()) return Fail(err, jobs.status().message());
  std::optional<JobStateRecord> job = Find(*jobs, *c.job_id);
  if (!job) return LogsOfFinishedJob(c, edges, out, err);
  const size_t lines = c.lines == 0 ? kLogTailLines : std::min(c.lines, kLogTailLines);
  auto reply = HttpGet(job->url, job->token, "/api/logs?rank=" + std::to_string(c.rank) + "&lines=" + std::to_string(lines));
  if (!reply.ok()) return Fail(err, "job " + job->job_id + ": " + reply.status().message());
  if (reply->status != 200) return Fail(err, "job " + job->job_id + ": " + reply->body.substr(0, reply->body.find('\n')));
  err << "dslaunch: rank " << c.rank << " of running job " << job->job_id << ": its last " << lines
      << " lines as the launcher keeps them (stdout and stderr); the whole log is in " << job->log_dir
      << " on the rank's node\n";
  out << reply->body;
  return 0;
}

}  // namespace

bool IsStatusSubcommand(const std::vector<std::string>& argv) {
  return argv.size() > 1 && (argv[1] == "status" || argv[1] == "logs");
}

Result<StatusCommand> ParseStatusCommand(const std::vector<std::string>& argv) {
  StatusCommand c;
  const bool logs = argv.size() > 1 && argv[1] == "logs";
  c.kind = logs ? StatusCommand::Kind::kLogs : StatusCommand::Kind::kStatus;
  const std::string usage = logs ? kLogsUsage : kStatusUsage;
  std::vector<std::string> words;
  for (size_t i = 2; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-h" || a == "--help") {
      c.print = usage;
      return c;
    }
    if (logs && (a == "--lines" || a == "--log_dir")) {
      if (i + 1 >= argv.size()) return InvalidArgumentError(a + " needs a value\n" + usage);
      const std::string& value = argv[++i];
      if (a == "--lines") {
        auto n = Whole("--lines", value);
        if (!n.ok()) return InvalidArgumentError(n.status().message() + "\n" + usage);
        c.lines = static_cast<size_t>(*n);
      } else {
        c.log_dir = value;
      }
    } else if (a.starts_with("-")) {
      return InvalidArgumentError("dslaunch " + argv[1] + ": unknown option '" + a + "'\n" + usage);
    } else {
      words.push_back(a);
    }
  }
  const size_t want = logs ? 2 : 1;
  if (words.size() > want || (logs && words.size() < want)) {
    return InvalidArgumentError("dslaunch " + argv[1] + ": expected " + (logs ? "JOB_ID RANK" : "at most JOB_ID") +
                                ", got " + std::to_string(words.size()) + " argument(s)\n" + usage);
  }
  if (!words.empty()) {
    if (Status valid = ValidateJobId(words[0]); !valid.ok()) return InvalidArgumentError(valid.message() + "\n" + usage);
    c.job_id = words[0];
  }
  if (logs) {
    auto rank = Whole("RANK", words[1]);
    if (!rank.ok() || *rank > std::numeric_limits<int>::max()) {
      return InvalidArgumentError("RANK '" + words[1] + "': expected a whole number >= 0\n" + usage);
    }
    c.rank = static_cast<int>(*rank);
  }
  return c;
}

std::string FormatStatusTable(const JobView& v) {
  std::ostringstream head;
  head << "job " << v.job_id << "  " << v.state;
  if (v.exit_code) head << " (exit " << *v.exit_code << ")";
  head << "  generation " << v.generation;
  if (v.restarts > 0) head << " (" << v.restarts << (v.restarts == 1 ? " restart)" : " restarts)");
  if (v.started_ms > 0) head << "  uptime " << Duration(v.now_ms - v.started_ms);
  head << "\n";
  std::string command;
  for (const std::string& w : v.command) command += (command.empty() ? "" : " ") + w;
  head << "command: " << command << "\n";
  if (!v.root_cause.empty()) head << "cause: " << v.root_cause << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "HOST", "PID", "STATE", "HEARTBEAT", "STEP", "STEP TIME", "LOSS", "TOKENS/S", "EXIT"}};
  for (const RankView& r : v.ranks) {
    std::string heartbeat;
    for (const NodeView& n : v.nodes) {
      if (n.node_rank == r.node_rank && n.last_heartbeat_ms > 0) heartbeat = Duration(v.now_ms - n.last_heartbeat_ms) + " ago";
    }
    rows.push_back({std::to_string(r.rank), r.host, r.pid > 0 ? std::to_string(r.pid) : "",
                    r.state + (r.straggler ? " (straggler)" : ""), heartbeat,
                    r.last_step >= 0 ? std::to_string(r.last_step) : "", r.step_ms ? Fixed(*r.step_ms, 1) + " ms" : "",
                    r.loss ? Fixed(*r.loss, 4) : "", r.tokens_per_s ? Fixed(*r.tokens_per_s, 0) : "", r.exit_text});
  }
  return head.str() + Table(rows);
}

int RunStatusCommand(const StatusCommand& c, const StatusEdges& edges, std::ostream& out, std::ostream& err) {
  if (c.print) {
    out << *c.print;
    return 0;
  }
  return c.kind == StatusCommand::Kind::kStatus ? ShowStatus(c, edges, out, err) : ShowLogs(c, edges, out, err);
}

}  // namespace dslaunch::launcher
