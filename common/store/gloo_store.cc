#include "common/store/gloo_store.h"

#include <gloo/common/error.h>

namespace dslaunch {
namespace {

[[noreturn]] void Throw(const Status& status) {
  throw ::gloo::IoException("dslaunch " + status.ToString());
}

}  // namespace

GlooStore::GlooStore(StoreClient& client, std::string prefix, std::chrono::milliseconds timeout)
    : client_(client), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  Status st = client_.Set(prefix_ + key, std::string_view(data.data(), data.size()));
  if (!st.ok()) Throw(st);
}

std::vector<char> GlooStore::get(const std::string& key) {
  auto value = client_.Get(prefix_ + key, timeout_);
  if (!value.ok()) Throw(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& k : keys) prefixed.push_back(prefix_ + k);
  // Gloo passes kNoTimeout (zero) to mean "the default".
  Status st = client_.Wait(prefixed, timeout.count() > 0 ? timeout : timeout_);
  if (!st.ok()) Throw(st);
}

}  // namespace dslaunch
