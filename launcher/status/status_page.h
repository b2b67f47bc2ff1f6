// StatusPage: what --status_port starts in the launcher (docs/observability.md): the status
// server on a thread of its own with a fresh token for the job, and the state file `dslaunch
// status` finds it and its token by (job_state_file.h), removed again when the page goes. Owned by
// the launcher's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "common/status.h"
#include "launcher/status/job_board.h"
#include "launcher/status/status_server.h"

namespace dslaunch::launcher {

struct StatusPageOptions {
  StatusServerOptions server;  // its access.token and access.token_file are set by Start()
  std::string job_id;
  std::string log_dir;   // the job's log directory on every node, for the record
  std::string temp_dir;  // $TMPDIR or /tmp: where the record goes (JobStateDir)
  uid_t uid = 0;
  int64_t pid = 0;       // the launcher's
  int64_t now_ms = 0;
};

class StatusPage {
 public:
  // Makes the job's token (GenerateSecret), starts the server and prints "dslaunch: status page
  // at URL?token=TOKEN" to `console` (the one place the token is printed; and a warning when it
  // listens beyond loopback), then writes the record with the token; a record that cannot be
  // written is a warning on `console`, not an error (the page works with the printed URL;
  // `dslaunch status` will not find it). Errors: the server's (StatusServer::Start).
  static Result<std::unique_ptr<StatusPage>> Start(const StatusPageOptions& options,
                                                   std::shared_ptr<const JobBoard> board, std::ostream& console);
  ~StatusPage();  // removes the record, then stops the server

  const std::string& url() const { return url_; }  // without the token

 private:
  StatusPage() = default;
  std::unique_ptr<StatusServer> server_;
  std::string url_;
  std::string state_dir_;  // empty: no record written
  std::string job_id_;
};

// The view the board holds before the launcher's first report: the job, starting at `now_ms`.
JobView StartingView(const std::string& job_id, std::vector<std::string> command, int64_t now_ms);

}  // namespace dslaunch::launcher
