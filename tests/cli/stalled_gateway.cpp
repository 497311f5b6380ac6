// A remote site's gateway that stops reading: it joins a home run over UCX like a real gateway
// (hello with the home config's policies and version sizes, credit for tasks), asks for many
// full weight versions at once, then never reads again and never answers. The home dataflow
// rank must not wait on it (docs/cross-site.md, "Slow and stalled sites"). For
// tests/cli/test_site_stall.sh and profiling/site_stall.sh.
//   stalled_gateway <home config> <host> <port> <requests> <seconds to stay>
// The token comes from ASTRAFLOW_SITE_TOKEN, as for a real gateway.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "astraflow/comm/backoff.hpp"
#include "astraflow/comm/ucx.hpp"
#include "astraflow/core/config.hpp"
#include "astraflow/model/model_setup.hpp"
#include "astraflow/text/tokenizer.hpp"
#include "dataflow/site_protocol.hpp"

using namespace astraflow;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: stalled_gateway <home config> <host> <port> <requests> <seconds>\n");
    return 2;
  }
  try {
    const Config cfg = loadConfig(argv[1]);
    const std::string host = argv[2];
    const auto port = static_cast<std::uint16_t>(std::stoi(argv[3]));
    const int requests = std::stoi(argv[4]);
    const double stay = std::stod(argv[5]);

    UcxLinkOptions options;
    options.token = site::resolveToken(cfg.cross_site);
    options.protocol_version = site::kProtocolVersion;
    UcpContext context;
    UcpWorker worker(context);
    UcxConnection home;
    Backoff backoff(std::chrono::milliseconds(200));
    for (const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);;) {
      try {
        home = connectTo(worker, host, port, options, 10.0);
        break;
      } catch (const UcxHandshakeRefused&) {
        throw;
      } catch (const UcxError&) {
        if (std::chrono::steady_clock::now() > give_up) throw;
        backoff.wait();
      }
    }
    site::Hello hello{"stalled", 1, {}};
    const auto tokens = tokenSpecOf(*makeTaskTokenizer());
    for (const auto& p : cfg.policies) hello.policies.push_back({p.name, weightVersionBytes(cfg, tokens, p.name)});
    home.send(site::kHello, site::encode(hello));
    const UcxMessage answer = home.recv(60.0);
    if (answer.kind != site::kWelcome) {
      std::fprintf(stderr, "stalled_gateway: home answered %s\n", site::kindName(answer.kind));
      return 1;
    }
    home.send(site::kCredit, site::encode(site::Credit{16}));
    for (int i = 0; i < requests; ++i) {
      home.send(site::kWeightRequest, site::encode(site::WeightRequest{0, -1, 0, 0, true}));
    }
    std::printf("stalled_gateway: joined, asked for %d full versions, reading nothing from now on\n", requests);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(stay));
    // Leave without closing gracefully: home has declared this site lost by now.
    std::_Exit(0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stalled_gateway: %s\n", e.what());
    return 1;
  }
}
