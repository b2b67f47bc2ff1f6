#include "launcher/status/status_client.h"

#include "common/asio.h"  // first: Boost 1.74's Asio under C++20 (common/asio.h)

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

namespace dslaunch::launcher {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<BaseUrl> ParseBaseUrl(const std::string& url) {
  const std::string bad = "status URL '" + url + "': expected http://HOST:PORT/";
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return InvalidArgumentError(bad);
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return InvalidArgumentError(bad);
  BaseUrl out;
  std::string_view host = rest.substr(0, colon);
  if (host.front() == '[') {
    if (host.back() != ']') return InvalidArgumentError(bad);
    host = host.substr(1, host.size() - 2);
  }
  out.host = std::string(host);
  const std::string_view port = rest.substr(colon + 1);
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535) {
    return InvalidArgumentError(bad);
  }
  out.port = static_cast<uint16_t>(value);
  return out;
}

Result<HttpResult> HttpGet(const std::string& url, const std::string& token, const std::string& target,
                           std::chrono::milliseconds timeout) {
  DSLAUNCH_ASSIGN_OR_RETURN(BaseUrl base, ParseBaseUrl(url));
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(base.host, ec);
  if (ec) return InvalidArgumentError("status URL '" + url + "': '" + base.host + "' is not an IP address");
  http::request<http::empty_body> request(http::verb::get, target, 11);
  const std::string host = address.is_v6() ? "[" + base.host + "]" : base.host;
  request.set(http::field::host, host + ":" + std::to_string(base.port));
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  request.set(http::field::user_agent, "dslaunch");
  request.keep_alive(false);
  http::response<http::string_body> response;
  beast::flat_buffer buffer;
  beast::error_code failure;
  const char* stage = "";  // what failed: "reach", "send to", "read from"
  stream.expires_after(timeout);
  auto fail = [&](beast::error_code ec, const char* what) {
    failure = ec;
    stage = what;
  };
  stream.async_connect(tcp::endpoint(address, base.port), [&](beast::error_code c) {
    if (c) return fail(c, "cannot reach");
    http::async_write(stream, request, [&](beast::error_code w, size_t) {
      if (w) return fail(w, "cannot send to");
      http::async_read(stream, buffer, response, [&](beast::error_code r, size_t) {
        if (r) fail(r, "no answer from");
      });
    });
  });
  ioc.run();
  if (failure == beast::error::timeout) {
    return DeadlineExceededError(std::string(stage) + " " + url + " within " + std::to_string(timeout.count()) + " ms");
  }
  if (failure) return UnavailableError(std::string(stage) + " " + url + ": " + failure.message());
  return HttpResult{static_cast<int>(response.result_int()), std::move(response.body())};
}

}  // namespace dslaunch::launcher
