// The MCP transports (mcp_transport.hpp): stdio over a LineProcess, streamable HTTP over an
// HttpClient (http.hpp).
#include "tasks/mcp_transport.hpp"

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <nlohmann/json.hpp>

#include "astraflow/core/error.hpp"
#include "astraflow/http/http.hpp"
#include "tasks/line_process.hpp"

namespace astraflow::detail {
namespace {

class StdioTransport final : public McpTransport {
 public:
  StdioTransport(const McpServerOptions& o, std::size_t max_bytes) : max_bytes_(max_bytes) {
    ProcessSpec spec;
    spec.argv = o.command;
    spec.env = lineProcessEnvironment(o.env);
    spec.executable = findExecutable(o.command.front());
    process_ = std::make_unique<LineProcess>(spec);
  }
  Status send(const std::string& message, double seconds) override {
    return status(process_->send(message, seconds).outcome);
  }
  Status next(std::string& message, double seconds) override {
    auto line = process_->readLine(seconds, max_bytes_);
    message = std::move(line.line);
    return status(line.outcome);
  }
  bool ended() override { return process_->ended(); }
  std::string diagnostics() override { return process_->stderrTail(); }

 private:
  static Status status(LineProcess::Outcome o) {
    switch (o) {
      case LineProcess::Outcome::Answered: return Status::Ok;
      case LineProcess::Outcome::TimedOut: return Status::TimedOut;
      case LineProcess::Outcome::TooLong: return Status::TooLong;
      case LineProcess::Outcome::Ended: break;
    }
    return Status::Ended;
  }
  std::size_t max_bytes_;
  std::unique_ptr<LineProcess> process_;
};

// The messages of an event stream's `data:` fields, one per event (the fields of an event joined
// by newlines, as the SSE format says).
std::deque<std::string> eventData(const std::string& body) {
  std::deque<std::string> out;
  std::string data;
  bool has_data = false;
  std::size_t at = 0;
  while (at <= body.size()) {
    std::size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (has_data) out.push_back(std::move(data));
      data.clear();
      has_data = false;
    } else if (line.substr(0, 5) == "data:") {
      std::string_view value = line.substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data) data += '\n';
      data += value;
      has_data = true;
    }
    at = end + 1;
  }
  if (has_data) out.push_back(std::move(data));
  return out;
}

class HttpTransport final : public McpTransport {
 public:
  HttpTransport(const McpServerOptions& o, std::size_t max_bytes) : max_bytes_(max_bytes) {
    const std::string_view url = o.url;
    const std::size_t slash = url.find('/', std::string_view("http://").size());
    base_ = std::string(url.substr(0, slash));
    path_ = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
    timeout_ = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_seconds * 1000));
    client_ = std::make_unique<HttpClient>(base_, timeout_, timeout_);
  }

  Status send(const std::string& message, double) override {
    std::map<std::string, std::string> headers = {{"Accept", "application/json, text/event-stream"}};
    if (!session_.empty()) headers["Mcp-Session-Id"] = session_;
    const auto start = std::chrono::steady_clock::now();
    const HttpResult r = client_->post(path_, message, "application/json", headers);
    if (!r.transportOk()) {
      last_ = r.error;
      // cpp-httplib words a read past its timeout as any failed read: the time spent tells them apart.
      return std::chrono::steady_clock::now() - start >= timeout_ * 9 / 10 ? Status::TimedOut : Status::Ended;
    }
    if (r.body.size() > max_bytes_) return Status::TooLong;
    if (const auto it = r.headers.find("mcp-session-id"); it != r.headers.end()) session_ = it->second;
    if (r.status == 202) return Status::Ok;  // a notification or a response: nothing comes back
    const auto type = r.headers.count("content-type") ? r.headers.at("content-type") : std::string();
    if (r.status == 200 && type.find("text/event-stream") != std::string::npos) {
      for (auto& m : eventData(r.body)) inbox_.push_back(std::move(m));
      return Status::Ok;
    }
    if (r.status == 200) {
      const auto body = nlohmann::ordered_json::parse(r.body, nullptr, false);
      if (body.is_array()) {
        for (const auto& m : body) inbox_.push_back(m.dump());
      } else {
        inbox_.push_back(r.body);
      }
      return Status::Ok;
    }
    // 404 with a session: the server forgot it (restarted); any other status: it failed.
    last_ = fmt::format("HTTP {}: {}", r.status, r.body.substr(0, 300));
    return Status::Ended;
  }

  Status next(std::string& message, double) override {
    if (inbox_.empty()) {
      last_ = "the server's answer held no message for the request";
      return Status::Ended;
    }
    message = std::move(inbox_.front());
    inbox_.pop_front();
    return Status::Ok;
  }

  bool ended() override { return false; }
  std::string diagnostics() override { return last_; }

 private:
  std::size_t max_bytes_;
  std::chrono::milliseconds timeout_;
  std::string base_, path_, session_, last_;
  std::unique_ptr<HttpClient> client_;
  std::deque<std::string> inbox_;
};

}  // namespace

std::unique_ptr<McpTransport> openMcpTransport(const McpServerOptions& options, std::size_t max_message_bytes) {
  if (!options.url.empty()) {
    if (options.url.rfind("http://", 0) != 0)
      throw Error(fmt::format("MCP server '{}': url '{}' is not http://host:port/path", options.name, options.url));
    return std::make_unique<HttpTransport>(options, max_message_bytes);
  }
  return std::make_unique<StdioTransport>(options, max_message_bytes);
}

}  // namespace astraflow::detail
