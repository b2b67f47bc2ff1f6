#include "launcher/job/asio_job_loop.h"

#include "common/asio.h"

namespace dslaunch::launcher {
namespace {

class AsioTimer final : public JobTimer {
 public:
  explicit AsioTimer(asio::io_context& io) : timer_(io) {}

  void At(SteadyClock::time_point when, std::function<void()> fire) override {
    timer_.expires_at(when);
    Wait(std::move(fire));
  }
  void After(std::chrono::milliseconds delay, std::function<void()> fire) override {
    timer_.expires_after(delay);
    Wait(std::move(fire));
  }
  void Cancel() override { timer_.cancel(); }

 private:
  // Re-arming cancels the earlier wait: its handler sees operation_aborted and does not fire.
  void Wait(std::function<void()> fire) {
    timer_.async_wait([fire = std::move(fire)](boost::system::error_code ec) {
      if (!ec) fire();
    });
  }
  asio::steady_timer timer_;
};

}  // namespace

struct AsioJobLoop::State {
  explicit State(const std::vector<int>& signal_numbers) : signals(io) {
    for (int s : signal_numbers) signals.add(s);
  }
  asio::io_context io;
  asio::signal_set signals;
};

AsioJobLoop::AsioJobLoop(const std::vector<int>& signals) : state_(std::make_unique<State>(signals)) {}
AsioJobLoop::~AsioJobLoop() = default;

asio::io_context& AsioJobLoop::io() { return state_->io; }
void AsioJobLoop::Run() { state_->io.run(); }

void AsioJobLoop::OnNextSignal(std::function<void(int)> on_signal) {
  state_->signals.async_wait([on_signal = std::move(on_signal)](boost::system::error_code ec, int sig) {
    if (!ec) on_signal(sig);
  });
}

SteadyClock::time_point AsioJobLoop::Now() const { return SteadyClock::now(); }

int64_t AsioJobLoop::UnixMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<JobTimer> AsioJobLoop::NewTimer() { return std::make_unique<AsioTimer>(state_->io); }
void AsioJobLoop::Post(std::function<void()> work) { asio::post(state_->io, std::move(work)); }
void AsioJobLoop::Stop() { state_->io.stop(); }

}  // namespace dslaunch::launcher
