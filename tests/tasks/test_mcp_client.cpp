// The MCP client (tasks/mcp_client.hpp) against the example server written with the `mcp` SDK
// (examples/mcp_calculator/server.py: tools listed with their schemas, calls, the tool's own
// error, bad arguments, an unknown tool, the server killed and started again) and against a
// hand-written stdio server that pages its tool list, prints garbage, sends other content
// types, asks the client a question, hangs and dies.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "astraflow/core/error.hpp"
#include "astraflow/tasks/mcp_client.hpp"
#include "io/temp_dir.hpp"
#include "tasks/process_watch.hpp"
#include "tasks/server_process.hpp"

using namespace astraflow;
using json = nlohmann::ordered_json;

namespace mcp_client_tests {

McpServerOptions calculator() {
  const char* python = std::getenv("ASTRAFLOW_PYTHON");
  const char* server = std::getenv("ASTRAFLOW_MCP_EXAMPLE");
  EXPECT_NE(python, nullptr) << "run under ctest";
  EXPECT_NE(server, nullptr) << "run under ctest";
  McpServerOptions o;
  o.name = "calculator";
  o.command = {python ? python : "python3", server ? server : "server.py"};
  o.timeout_seconds = 60;  // the SDK's import takes a few seconds on a busy machine
  return o;
}

TEST(McpClient, TheSdkServersToolsAndCalls) {
  const test::HostSnapshot host;
  {
    McpClient client(calculator());
    ASSERT_EQ(client.tools().size(), 3U);
    EXPECT_EQ(client.tools()[0].name, "add");
    const json schema = client.tools()[0].functionSchema();
    EXPECT_EQ(schema["function"]["description"], "Adds two numbers.");
    EXPECT_EQ(schema["function"]["parameters"]["required"], json::array({"a", "b"}));
    EXPECT_EQ(schema["function"]["parameters"]["properties"]["a"]["type"], "number");

    EXPECT_EQ(client.call("add", {{"a", 2}, {"b", 3.5}}), "5.5");
    EXPECT_EQ(client.call("multiply", {{"a", 6}, {"b", 7}}), "42.0");
    std::string r = client.call("divide", {{"a", 1}, {"b", 0}});
    EXPECT_TRUE(r.starts_with("error: ")) << r;  // the tool's own error
    r = client.call("add", {{"a", "x"}, {"b", 1}});
    EXPECT_TRUE(r.starts_with("error: ") && r.find("valid number") != std::string::npos) << r;  // the SDK's check
    r = client.call("add", {{"a", 1}});
    EXPECT_EQ(r, "error: add needs the argument \"b\"");
    r = client.call("sqrt", {{"x", 4}});
    EXPECT_EQ(r, "error: there is no tool \"sqrt\"; the tools are add, multiply, divide");

    // The server killed between calls: the next call starts it again and is answered.
    // Only this process's child (another test may run the same server at the same time).
    std::vector<int> pids;
    for (const int pid : test::processesWith("mcp_calculator/server.py")) {
      std::ifstream stat(fmt::format("/proc/{}/stat", pid));
      std::string id, comm, state;
      int parent = 0;
      stat >> id >> comm >> state >> parent;
      if (parent == ::getpid()) pids.push_back(pid);
    }
    ASSERT_EQ(pids.size(), 1U);
    ASSERT_TRUE(test::killChildAndWait(pids[0]));
    EXPECT_EQ(client.call("add", {{"a", 1}, {"b", 1}}), "2.0");
    const McpCounters c = client.counters();
    EXPECT_EQ(c.calls, 7U);
    EXPECT_EQ(c.errors, 4U);
    EXPECT_EQ(c.restarts, 1U);
    EXPECT_EQ(c.timeouts, 0U);
  }
  host.expectUnchanged();  // the server killed and reaped with the client
}

// A stdio JSON-RPC server by hand: what the SDK never does.
const char* kRawServer = R"(import json, os, sys, time
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def ok(i, result):
    send({"jsonrpc": "2.0", "id": i, "result": result})
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    i, method, p = m["id"], m.get("method"), m.get("params", {})
    if method == "initialize":
        print("not json at all", flush=True)
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
        ok(i, {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        if p.get("cursor") != "page2":
            ok(i, {"tools": [{"name": "echo", "inputSchema": schema}, {"name": "pic"}], "nextCursor": "page2"})
        else:
            ok(i, {"tools": [{"name": "hang"}, {"name": "die"}, {"name": "rpc_error"}]})
    elif method == "tools/call":
        name, args = p["name"], p.get("arguments", {})
        if name == "echo":
            send({"jsonrpc": "2.0", "id": "server-1", "method": "roots/list"})  # asks the client; needs an answer
            json.loads(sys.stdin.readline())
            ok(i - 1000, {})  # an answer to nobody
            ok(i, {"content": [{"type": "text", "text": args.get("text", "")}]})
        elif name == "pic":
            ok(i, {"content": [{"type": "image", "data": "AA=="}, {"type": "text", "text": "a dot"}], "isError": "no"})
        elif name == "hang":
            time.sleep(1000)
        elif name == "die":
            os._exit(1)
        else:
            send({"jsonrpc": "2.0", "id": i, "error": {"code": -32000, "message": "it went wrong"}})
)";

TEST(McpClient, PagesMessagesAndFailuresOfARawServer) {
  const test::HostSnapshot host;
  test::TempDir dir;
  std::ofstream(dir.file("raw_server.py")) << kRawServer;
  McpServerOptions o;
  o.name = "raw";
  o.command = {"python3", dir.file("raw_server.py")};
  o.timeout_seconds = 5;  // Python's start-up included: restarts happen under load too
  {
    McpClient client(o);
    ASSERT_EQ(client.tools().size(), 5U);  // two pages
    EXPECT_EQ(client.tools()[4].name, "rpc_error");
    EXPECT_EQ(client.call("echo", {{"text", "héllo\nworld"}}), "héllo\nworld");
    EXPECT_EQ(client.call("pic", json::object()), "[image content skipped]\na dot");
    EXPECT_EQ(client.call("rpc_error", json::object()), "error: it went wrong");
    EXPECT_EQ(client.call("hang", json::object()), "error: no answer within 5 s");
    EXPECT_EQ(client.call("echo", {{"text", "back"}}), "back");  // a fresh server
    EXPECT_EQ(client.call("die", json::object()), "error: the server ended");
    EXPECT_EQ(client.call("echo", {{"text", "again"}}), "again");
    EXPECT_EQ(client.call("echo", json::array({1})), "error: the arguments are not a JSON object");
    const McpCounters c = client.counters();
    EXPECT_EQ(c.timeouts, 1U);
    EXPECT_EQ(c.restarts, 2U);
    EXPECT_GE(c.malformed, 3U);  // "not json at all" at each start
    EXPECT_EQ(c.errors, 4U);
  }
  host.expectUnchanged();

  McpServerOptions missing = o;
  missing.command = {"/no/such/server"};
  EXPECT_THROW(McpClient{missing}, Error);
  McpServerOptions silent = o;
  silent.command = {"sleep", "100"};
  try {
    McpClient client(silent);
    FAIL() << "a server that never answers initialize was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MCP server 'raw' (sleep 100) did not initialise"), std::string::npos)
        << e.what();
  }
}

// The streamable HTTP transport against the SDK's own server (examples/mcp_calculator --http):
// messages POSTed to /mcp, answers as event streams, the session id the server gives sent back;
// a server that goes away makes calls answer "error: …", and one that comes back is initialised
// again at the next call.
TEST(McpClient, TheSdkServerOverStreamableHttp) {
  const int port = [] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    ::close(fd);
    return static_cast<int>(ntohs(a.sin_port));
  }();
  test::TempDir dir;
  const McpServerOptions stdio = calculator();
  detail::ProcessSpec spec;
  spec.argv = {stdio.command[0], stdio.command[1], "--http", std::to_string(port)};
  spec.executable = stdio.command[0];
  auto serve = [&] { return std::make_unique<detail::ServerProcess>(spec, dir.file("server.log")); };
  auto server = serve();
  McpServerOptions o;
  o.name = "remote";
  o.url = fmt::format("http://127.0.0.1:{}/mcp", port);
  o.timeout_seconds = 10;
  std::unique_ptr<McpClient> client;
  for (int i = 0; i < 600 && !client; ++i) {  // until the server listens (the SDK's import takes seconds)
    try {
      client = std::make_unique<McpClient>(o);
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(client) << server->logTail();
  ASSERT_EQ(client->tools().size(), 3U);
  EXPECT_EQ(client->tools()[1].name, "multiply");
  EXPECT_EQ(client->call("multiply", {{"a", 6}, {"b", 7}}), "42.0");
  EXPECT_EQ(client->call("add", {{"a", 1}}), "error: add needs the argument \"b\"");
  const std::string divided = client->call("divide", {{"a", 1}, {"b", 0}});
  // The tool's own failure (isError): the SDK's HTTP server words it without the exception's text.
  EXPECT_TRUE(divided.starts_with("error: ") && divided.find("divide") != std::string::npos) << divided;

  server.reset();  // killed
  const std::string gone = client->call("add", {{"a", 1}, {"b", 1}});
  EXPECT_TRUE(gone.starts_with("error: ")) << gone;
  server = serve();
  std::string back;
  for (int i = 0; i < 600 && back != "3.0"; ++i) {
    back = client->call("add", {{"a", 1}, {"b", 2}});
    if (back != "3.0") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(back, "3.0");
  EXPECT_GE(client->counters().restarts, 1U);

  // A server that takes the connection and never answers: a timeout, said as one.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(silent, 4), 0);
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&a), &n);
  o.url = fmt::format("http://127.0.0.1:{}/mcp", ntohs(a.sin_port));
  o.timeout_seconds = 1;
  try {
    McpClient never(o);
    ADD_FAILURE() << "a server that never answers was initialised";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not initialise: no answer within 1 s"), std::string::npos) << e.what();
  }
  ::close(silent);
}

}  // namespace mcp_client_tests
