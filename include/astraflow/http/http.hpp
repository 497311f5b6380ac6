#pragma once
// HTTP/1.1 on both sides of an inference server: `HttpServer` (what `astraflow serve` listens
// with) and `HttpClient` (what a rollout rank's http backend talks through). Each owns one
// cpp-httplib handle; the library stays behind these two classes, so no other module compiles
// against it. Bodies are strings: the callers own their JSON.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace astraflow {

struct HttpRequest {
  std::string method;  // "GET", "POST"
  std::string path;
  std::string body;
  std::map<std::string, std::string> headers;  // names as sent
};

// Writes one piece of a streamed body; false when the client went away (stop producing).
using HttpChunkWriter = std::function<bool(std::string_view chunk)>;

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // When set, the body is sent chunked as this function writes it (server-sent events); `body`
  // is ignored. It runs on the connection's thread and may block between pieces.
  std::function<void(const HttpChunkWriter& write)> stream;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

// What the server itself enforces before a handler runs.
struct HttpServerLimits {
  std::uint64_t max_body_bytes = std::uint64_t{64} << 20;  // past it: 413 with a JSON error, counted
  double read_timeout_s = 30;  // a request not received within it: the connection is dropped
  double idle_timeout_s = 5;   // an idle keep-alive connection is closed after it
};

class HttpServer {
 public:
  // `threads`: connections served at once (each blocks its thread while a handler waits).
  HttpServer(int threads, const HttpServerLimits& limits);
  ~HttpServer();  // stops and joins the listening thread
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void get(const std::string& path, HttpHandler handler);
  void post(const std::string& path, HttpHandler handler);
  // Answers a path no route matches, or a route asked with another method (`method_allowed`
  // false when the path exists for another method). Default: 404 with a one-line body.
  void onUnmatched(std::function<void(const HttpRequest&, HttpResponse&, bool path_exists)> handler);

  // Binds `host`:`port` (0: any free port) and returns the port; throws Error when it cannot.
  int bind(const std::string& host, int port);
  // Serves on a thread of its own until stop().
  void start();
  void stop();
  bool running() const;
  // Requests answered 413 because their body was over max_body_bytes.
  std::uint64_t bodiesTooLarge() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The outcome of one request: a transport failure (`error` set: refused, timed out, reset) or
// an HTTP answer with any status.
struct HttpResult {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // the answer's, names lower-cased (post() only)
  std::string error;
  bool transportOk() const { return error.empty(); }
  bool ok() const { return error.empty() && status >= 200 && status < 300; }
};

// One keep-alive connection to `base_url` ("http://host:port"); not shared between threads
// (a caller that wants N requests in flight holds N clients).
class HttpClient {
 public:
  HttpClient(const std::string& base_url, std::chrono::milliseconds connect_timeout,
             std::chrono::milliseconds read_timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult get(const std::string& path);
  HttpResult postJson(const std::string& path, const std::string& body);
  // A POST with request headers of the caller's (e.g. a protocol's session id); the answer's
  // headers come back in HttpResult::headers.
  HttpResult post(const std::string& path, const std::string& body, const std::string& content_type,
                  const std::map<std::string, std::string>& headers);
  const std::string& baseUrl() const { return base_url_; }

 private:
  std::string base_url_;
  // A connection idle this long is closed and opened anew before the next request: servers close
  // idle keep-alive connections (uvicorn, which SGLang and vLLM run on, after 5 s; astraflow
  // serve too), and a request written into one the server just closed fails.
  static constexpr std::chrono::seconds kIdleReconnect{4};
  std::chrono::steady_clock::time_point last_used_{};
  void reconnectIfIdle();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace astraflow
