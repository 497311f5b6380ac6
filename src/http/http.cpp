// HttpServer and HttpClient over cpp-httplib, the only file that includes it: request and response adapters, body-size
// and timeout limits, a raised listen backlog, chunked (server-sent events) replies, and reconnects after idling.
#include "astraflow/http/http.hpp"

#include <fmt/format.h>

#include <httplib.h>
#include <sys/socket.h>
#include <cctype>

#include <atomic>
#include <mutex>
#include <thread>

#include "astraflow/core/error.hpp"

namespace astraflow {

namespace {

HttpRequest requestOf(const httplib::Request& r) {
  HttpRequest out;
  out.method = r.method;
  out.path = r.path;
  out.body = r.body;
  for (const auto& [k, v] : r.headers) out.headers.emplace(k, v);
  return out;
}

void answer(const HttpResponse& ours, httplib::Response& res) {
  res.status = ours.status;
  if (!ours.stream) {
    res.set_content(ours.body, ours.content_type.c_str());
    return;
  }
  // The provider is called once: it writes every piece itself and then ends the body.
  auto stream = ours.stream;
  res.set_chunked_content_provider(ours.content_type, [stream](std::size_t, httplib::DataSink& sink) {
    stream([&sink](std::string_view chunk) {
      if (sink.is_writable && !sink.is_writable()) return false;
      return sink.write(chunk.data(), chunk.size());
    });
    sink.done();
    return true;
  });
}

// cpp-httplib listens with a backlog of 5 (compiled into Debian's library): when a rollout rank
// opens 128 connections at once, the connections past the accept queue are dropped by the kernel
// and their first request fails. listen() again on the bound socket raises the backlog in place.
class BacklogServer : public httplib::Server {
 public:
  void raiseBacklog(int backlog) {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
  }
};

}  // namespace

struct HttpServer::Impl {
  BacklogServer server;
  std::atomic<std::uint64_t> too_large{0};
  std::thread thread;
  std::function<void(const HttpRequest&, HttpResponse&, bool)> unmatched;
  std::map<std::string, std::string> routes;  // path → methods, for 404 vs 405
};

HttpServer::HttpServer(int threads, const HttpServerLimits& limits) : impl_(std::make_unique<Impl>()) {
  const auto n = static_cast<std::size_t>(std::max(1, threads));
  impl_->server.new_task_queue = [n] { return new httplib::ThreadPool(n); };
  impl_->server.set_tcp_nodelay(true);
  // A rollout rank keeps its connections open for the whole run: no closing after a handful of
  // requests (the library's default is 5), and an idle one gives its thread back after 5 s.
  impl_->server.set_keep_alive_max_count(1'000'000);
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(s));
  };
  impl_->server.set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, limits.idle_timeout_s)));
  // Reading the request is bounded (a client that stops halfway gives its thread back); the
  // generation itself is not: the handler runs after the request is read. Streams may pause
  // between pieces for as long as a generation step takes.
  impl_->server.set_read_timeout(seconds(limits.read_timeout_s));
  impl_->server.set_write_timeout(600);
  impl_->server.set_payload_max_length(static_cast<std::size_t>(limits.max_body_bytes));
  impl_->server.set_error_handler([this, limits](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 413) {
      ++impl_->too_large;
      res.set_content(
          fmt::format("{{\"error\": {{\"message\": \"the request body is over {} bytes (--max-body-bytes)\", "
                      "\"type\": \"invalid_request_error\", \"param\": null, \"code\": \"body_too_large\"}}}}",
                      limits.max_body_bytes),
          "application/json");
      return;
    }
    // Only answers cpp-httplib could not route (404): a handler's own 4xx/5xx bodies stand.
    if (res.status != 404 || !res.body.empty()) return;
    HttpResponse ours;
    ours.status = 404;
    ours.body = fmt::format("no route for {} {}", req.method, req.path);
    ours.content_type = "text/plain";
    const bool exists = impl_->routes.count(req.path) > 0;
    if (impl_->unmatched) impl_->unmatched(requestOf(req), ours, exists);
    answer(ours, res);
  });
  impl_->server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    res.status = 500;
    res.set_content(fmt::format("{{\"error\": {{\"message\": \"internal error: {}\", \"type\": \"internal_error\"}}}}",
                                what.substr(0, 200)),
                    "application/json");
  });
}

HttpServer::~HttpServer() { stop(); }

namespace {

// Our handler as the library's: its request in, our response back out.
httplib::Server::Handler adapt(HttpHandler handler) {
  return [h = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    HttpResponse ours;
    h(requestOf(req), ours);
    answer(ours, res);
  };
}

}  // namespace

void HttpServer::get(const std::string& path, HttpHandler handler) {
  impl_->routes[path] += "GET ";
  impl_->server.Get(path, adapt(std::move(handler)));
}

void HttpServer::post(const std::string& path, HttpHandler handler) {
  impl_->routes[path] += "POST ";
  impl_->server.Post(path, adapt(std::move(handler)));
}

void HttpServer::onUnmatched(std::function<void(const HttpRequest&, HttpResponse&, bool)> handler) {
  impl_->unmatched = std::move(handler);
}

int HttpServer::bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = impl_->server.bind_to_any_port(host);
    if (bound < 0) throw Error(fmt::format("cannot listen on {} (any port)", host));
  } else if (!impl_->server.bind_to_port(host, port)) {
    throw Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this host)", host, port));
  }
  impl_->server.raiseBacklog(4096);  // the kernel caps it at net.core.somaxconn
  return bound;
}

void HttpServer::start() {
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
}

void HttpServer::stop() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool HttpServer::running() const { return impl_->server.is_running(); }

std::uint64_t HttpServer::bodiesTooLarge() const { return impl_->too_large.load(); }

struct HttpClient::Impl {
  explicit Impl(const std::string& url) : client(url) {}
  httplib::Client client;
};

HttpClient::HttpClient(const std::string& base_url, std::chrono::milliseconds connect_timeout,
                       std::chrono::milliseconds read_timeout)
    : base_url_(base_url), impl_(std::make_unique<Impl>(base_url)) {
  if (!impl_->client.is_valid()) throw Error(fmt::format("'{}' is not an http://host:port address", base_url));
  impl_->client.set_connection_timeout(connect_timeout);
  impl_->client.set_read_timeout(read_timeout);
  impl_->client.set_write_timeout(read_timeout);
  impl_->client.set_keep_alive(true);
  impl_->client.set_tcp_nodelay(true);
}

HttpClient::~HttpClient() = default;

namespace {

HttpResult resultOf(const httplib::Result& r) {
  HttpResult out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  return out;
}

}  // namespace

void HttpClient::reconnectIfIdle() {
  const auto now = std::chrono::steady_clock::now();
  if (last_used_.time_since_epoch().count() != 0 && now - last_used_ > kIdleReconnect) impl_->client.stop();
  last_used_ = now;
}

HttpResult HttpClient::get(const std::string& path) {
  reconnectIfIdle();
  auto r = resultOf(impl_->client.Get(path));
  last_used_ = std::chrono::steady_clock::now();
  return r;
}

HttpResult HttpClient::post(const std::string& path, const std::string& body, const std::string& content_type,
                            const std::map<std::string, std::string>& headers) {
  reconnectIfIdle();
  httplib::Headers sent;
  for (const auto& [name, value] : headers) sent.emplace(name, value);
  const httplib::Result r = impl_->client.Post(path, sent, body, content_type);
  HttpResult out = resultOf(r);
  if (r) {
    for (const auto& [name, value] : r->headers) {
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[lower] = value;
    }
  }
  last_used_ = std::chrono::steady_clock::now();
  return out;
}

HttpResult HttpClient::postJson(const std::string& path, const std::string& body) {
  reconnectIfIdle();
  auto r = resultOf(impl_->client.Post(path, body, "application/json"));
  last_used_ = std::chrono::steady_clock::now();
  return r;
}

}  // namespace astraflow
