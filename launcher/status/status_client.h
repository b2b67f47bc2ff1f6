// The client side of the status server, for `dslaunch status` and `dslaunch logs`: one HTTP GET
// to a running launcher with the job's token (Boost.Beast inside status_client.cc), and the URL it
// is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace dslaunch::launcher {

// How long `dslaunch status` waits for a launcher's answer: the server answers from memory, so
// anything near this means the launcher's machine is in trouble.
inline constexpr std::chrono::seconds kStatusClientTimeout{10};

// "http://HOST:PORT/" as StatusServer::Url() writes it (HOST may be "[v6]").
struct BaseUrl {
  std::string host;  // without brackets
  uint16_t port = 0;
};

// kInvalidArgument for anything but http://HOST:PORT/ with a port 1-65535.
Result<BaseUrl> ParseBaseUrl(const std::string& url);

struct HttpResult {
  int status = 0;
  std::string body;
};

// GETs `target` ("/api/job") from the server at `url`, with `Host: HOST:PORT` and, unless `token`
// is empty, `Authorization: Bearer TOKEN` (a header, never the URL: the token stays out of every
// message here). kUnavailable when nothing answers there ("cannot reach http://127.0.0.1:8080/:
// Connection refused"), kDeadlineExceeded after `timeout`; a 4xx or 5xx is a result, not an error.
Result<HttpResult> HttpGet(const std::string& url, const std::string& token, const std::string& target,
                           std::chrono::milliseconds timeout = kStatusClientTimeout);

}  // namespace dslaunch::launcher
