#include "launcher/status/status_page.h"

#include "common/auth/secret.h"
#include "launcher/status/job_state_file.h"

namespace dslaunch::launcher {
namespace {

bool IsLoopback(const std::string& address) { return address.starts_with("127.") || address == "::1"; }

}  // namespace

Result<std::unique_ptr<StatusPage>> StatusPage::Start(const StatusPageOptions& options,
                                                      std::shared_ptr<const JobBoard> board, std::ostream& console) {
  const std::string dir = JobStateDir(options.temp_dir, options.uid);
  StatusServerOptions server_options = options.server;
  server_options.access.token = GenerateSecret();
  server_options.access.token_file = dir + "/" + options.job_id + ".json";
  DSLAUNCH_ASSIGN_OR_RETURN(std::unique_ptr<StatusServer> server, StatusServer::Start(server_options, std::move(board)));
  std::unique_ptr<StatusPage> page(new StatusPage());
  page->server_ = std::move(server);
  page->url_ = page->server_->Url();
  console << "dslaunch: status page at " << page->url_ << "?token=" << server_options.access.token << "\n";
  if (!IsLoopback(options.server.bind_address)) {
    console << "dslaunch: warning: --status_bind " << options.server.bind_address
            << " lets other machines reach the status page over plain HTTP: the token keeps them out, but anyone "
            << "who can see the traffic can read it and the pages (use an SSH tunnel to 127.0.0.1 where you can)\n";
  }
  const JobStateRecord record{options.job_id, page->url_,    options.pid,
                              options.log_dir, options.now_ms, server_options.access.token};
  if (Status s = WriteJobState(dir, record); !s.ok()) {
    console << "dslaunch: warning: dslaunch status will not find this job: " << s.message() << "\n";
  } else {
    page->state_dir_ = dir;
    page->job_id_ = options.job_id;
  }
  return page;
}

StatusPage::~StatusPage() {
  if (!state_dir_.empty()) RemoveJobState(state_dir_, job_id_);
}

JobView StartingView(const std::string& job_id, std::vector<std::string> command, int64_t now_ms) {
  JobView v;
  v.job_id = job_id;
  v.command = std::move(command);
  v.state = "starting";
  v.started_ms = v.now_ms = now_ms;
  return v;
}

}  // namespace dslaunch::launcher
