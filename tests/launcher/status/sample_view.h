// A JobView as a 2-node, 4-rank job looks after a few steps, with one failed rank, one straggler,
// a checkpoint and awkward host names: the renderers' tests start from it.
#pragma once

#include <cmath>

#include "launcher/status/job_view.h"

namespace dslaunch::testing {

inline launcher::JobView SampleView() {
  launcher::JobView v;
  v.job_id = "20261125-101500-abc123";
  v.command = {"dslaunch-worker", "train.json", "--lr", "3e-4"};
  v.state = "running";
  v.generation = 1;
  v.restarts = 1;
  v.started_ms = 1764065700000;
  v.now_ms = v.started_ms + 95500;
  v.nodes = {{0, "node-a", v.now_ms - 1200, true}, {1, "node \"b\"\\x", v.now_ms - 4000, true}};
  for (int r = 0; r < 4; ++r) {
    launcher::RankView rv;
    rv.rank = r;
    rv.local_rank = r % 2;
    rv.node_rank = r / 2;
    rv.host = v.nodes[r / 2].host;
    rv.pid = 4100 + r;
    rv.state = "running";
    rv.log_path = "/tmp/dslaunch-0/" + v.job_id + "/rank" + std::to_string(r) + ".gen1.stdout.log";
    rv.last_step = 40 + r;
    rv.step_ms = 198.5 + r;
    rv.loss = 2.5 - 0.01 * r;
    rv.tokens_per_s = 10240;
    rv.last_report_ms = v.now_ms - 300;
    v.ranks.push_back(rv);
  }
  v.ranks[1].state = "failed";
  v.ranks[1].exit_code = 1;
  v.ranks[1].exit_text = "exit 1";
  v.ranks[3].straggler = true;
  v.ranks[3].straggler_median_ms = 380;
  v.ranks[3].straggler_peers_median_ms = 150;
  v.ranks[3].straggler_since_step = 38;
  v.ranks[3].straggler_since_ms = v.started_ms + 90000;
  v.straggler_factor = 1.5;
  v.straggler_margin_ms = 20;
  v.straggler_window = 20;
  v.straggler_patience = 5;
  v.ranks[3].step_ms = 412;
  v.ranks[3].compute_ms = 380;
  v.ranks[0].compute_ms = 150;
  v.ranks[2].last_step = -1;  // never reported
  v.ranks[2].step_ms.reset();
  v.ranks[2].loss.reset();
  v.ranks[2].tokens_per_s.reset();
  for (int s = 1; s <= 40; ++s) {
    v.loss.push_back({s, 3.0 - 0.02 * s});
    v.tokens_per_s.push_back({s, 40000.0 + s});
    if (s % 10 == 0) v.val_loss.push_back({s, 3.1 - 0.02 * s});
  }
  v.stragglers_total = 1;
  v.checkpoint_saves_total = 2;
  v.checkpoint_save_seconds = 0.75;
  v.checkpoint_save_bytes = 123456789;
  v.store_bytes_sent_total = 987654;
  return v;
}

}  // namespace dslaunch::testing
