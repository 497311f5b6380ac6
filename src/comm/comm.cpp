// Comm, Info and Request: RAII owners of MPI_Comm, MPI_Info and MPI_Request, with the collectives the roles use over
// bytes (gatherBytes, broadcastString, allreduceMax, ...) and spawn / merge for elastic pools.
#include "astraflow/comm/comm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "astraflow/comm/mpi.hpp"
#include "astraflow/core/error.hpp"

namespace astraflow {

Comm Comm::duplicate(MPI_Comm other) {
  MPI_Comm dup = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Comm_dup(other, &dup));
  ASTRA_MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  return Comm(dup);
}

Comm Comm::adopt(MPI_Comm owned, Release release) {
  if (owned != MPI_COMM_NULL) ASTRA_MPI_CHECK(MPI_Comm_set_errhandler(owned, MPI_ERRORS_RETURN));
  return Comm(owned, release);
}

Comm Comm::parent() {
  MPI_Comm p = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Comm_get_parent(&p));
  return adopt(p, Release::Disconnect);
}

Comm Comm::spawn(const std::string& command, const std::vector<std::string>& args, int ranks, std::string& error) {
  Comm self = duplicate(MPI_COMM_SELF);  // errors return, so a failed spawn is a result, not an abort
  std::vector<std::string> owned(args);
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<int> codes(static_cast<std::size_t>(ranks), MPI_SUCCESS);
  MPI_Comm inter = MPI_COMM_NULL;
  const int rc =
      MPI_Comm_spawn(command.c_str(), argv.data(), ranks, MPI_INFO_NULL, 0, self.raw(), &inter, codes.data());
  int started = 0;
  for (const int c : codes) started += c == MPI_SUCCESS;
  if (rc != MPI_SUCCESS || started != ranks) {
    char text[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, text, &len);
    error = rc != MPI_SUCCESS
                ? std::string(text, static_cast<std::size_t>(len))
                : std::to_string(ranks - started) + " of " + std::to_string(ranks) + " ranks did not start";
    // A partial intercommunicator is left alone: disconnecting is collective with ranks that
    // may never have started.
    return Comm();
  }
  return adopt(inter, Release::Disconnect);
}

void Comm::release() {
  if (comm_ == MPI_COMM_NULL) return;
  if (release_ == Release::Disconnect) {
    ASTRA_MPI_CHECK(MPI_Comm_disconnect(&comm_));
  } else {
    ASTRA_MPI_CHECK(MPI_Comm_free(&comm_));
  }
  comm_ = MPI_COMM_NULL;
}

Comm::~Comm() {
  if (comm_ == MPI_COMM_NULL || MpiEnvironment::finalized()) return;
  const int rc = release_ == Release::Disconnect ? MPI_Comm_disconnect(&comm_) : MPI_Comm_free(&comm_);
  if (rc != MPI_SUCCESS)
    spdlog::error(release_ == Release::Disconnect ? "MPI_Comm_disconnect failed" : "MPI_Comm_free failed");
}

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    Comm dying(std::exchange(comm_, std::exchange(o.comm_, MPI_COMM_NULL)),
               std::exchange(release_, std::exchange(o.release_, Release::Free)));
  }
  return *this;
}

Comm Comm::merge(bool high) const {
  MPI_Comm out = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Intercomm_merge(comm_, high ? 1 : 0, &out));
  return adopt(out);
}

Comm Comm::split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
  return adopt(out);
}

int Comm::rank() const {
  int r = 0;
  ASTRA_MPI_CHECK(MPI_Comm_rank(comm_, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  ASTRA_MPI_CHECK(MPI_Comm_size(comm_, &s));
  return s;
}

void Comm::barrier() const { ASTRA_MPI_CHECK(MPI_Barrier(comm_)); }

std::vector<std::vector<std::byte>> Comm::gatherBytes(int root, std::span<const std::byte> mine) const {
  const bool at_root = rank() == root;
  const int n = static_cast<int>(mine.size());
  std::vector<int> sizes(at_root ? size() : 0), offsets(sizes.size(), 0);
  ASTRA_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, comm_));
  int total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    offsets[i] = total;
    total += sizes[i];
  }
  std::vector<std::byte> all(static_cast<std::size_t>(total));
  ASTRA_MPI_CHECK(
      MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, root, comm_));
  std::vector<std::vector<std::byte>> out;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    out.emplace_back(all.begin() + offsets[i], all.begin() + offsets[i] + sizes[i]);
  }
  return out;
}

std::vector<std::byte> Comm::allgatherBytes(std::span<const std::byte> mine) const {
  std::vector<std::byte> all(mine.size() * static_cast<std::size_t>(size()));
  const int n = static_cast<int>(mine.size());
  ASTRA_MPI_CHECK(MPI_Allgather(mine.data(), n, MPI_BYTE, all.data(), n, MPI_BYTE, comm_));
  return all;
}

std::string Comm::broadcastString(int root, std::string value) const {
  // The size first, so receivers size their buffer: one collective pair, any length.
  std::uint64_t n = value.size();
  ASTRA_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_));
  value.resize(n);
  if (n > 0) ASTRA_MPI_CHECK(MPI_Bcast(value.data(), static_cast<int>(n), MPI_CHAR, root, comm_));
  return value;
}

std::vector<std::byte> Comm::broadcastBytes(int root, std::vector<std::byte> bytes) const {
  std::uint64_t n = bytes.size();
  ASTRA_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_));
  bytes.resize(n);
  if (n > 0) broadcastRaw(root, bytes.data(), n);
  return bytes;
}

void Comm::broadcastRaw(int root, void* data, std::size_t bytes) const {
  // MPI counts are int: a large buffer goes in pieces of at most 1 GiB.
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  auto* at = static_cast<std::byte*>(data);
  for (std::size_t done = 0; done < bytes; done += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes - done));
    ASTRA_MPI_CHECK(MPI_Bcast(at + done, n, MPI_BYTE, root, comm_));
  }
}

std::int64_t Comm::allreduceMax(std::int64_t value) const {
  ASTRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_MAX, comm_));
  return value;
}

std::uint64_t Comm::allreduceMax(std::uint64_t value) const {
  ASTRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_UINT64_T, MPI_MAX, comm_));
  return value;
}

void Comm::allreduceMax(std::span<std::int64_t> values) const {
  ASTRA_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_MAX, comm_));
}

int Comm::exclusiveSum(int value) const {
  int before = 0;  // MPI_Exscan leaves rank 0's result undefined
  ASTRA_MPI_CHECK(MPI_Exscan(&value, &before, 1, MPI_INT, MPI_SUM, comm_));
  return rank() == 0 ? 0 : before;
}

void Comm::transfer(Op op, void* data, void* out, std::size_t count, Element element, int peer, int tag) const {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error("a buffer of " + std::to_string(count) + " values for one MPI call: past 2^31 - 1");
  const int n = static_cast<int>(count);
  const MPI_Datatype type = element == Element::Float ? MPI_FLOAT : MPI_DOUBLE;
  switch (op) {
    case Op::AllreduceSum: ASTRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, comm_)); break;
    case Op::ReduceSum:
      ASTRA_MPI_CHECK(rank() == peer ? MPI_Reduce(MPI_IN_PLACE, data, n, type, MPI_SUM, peer, comm_)
                                     : MPI_Reduce(data, nullptr, n, type, MPI_SUM, peer, comm_));
      break;
    case Op::Broadcast: ASTRA_MPI_CHECK(MPI_Bcast(data, n, type, peer, comm_)); break;
    case Op::AllgatherInPlace:
      ASTRA_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, n / size(), type, comm_));
      break;
    case Op::ReduceScatterBlock:
      ASTRA_MPI_CHECK(MPI_Reduce_scatter_block(data, out, n / size(), type, MPI_SUM, comm_));
      break;
    case Op::Send: ASTRA_MPI_CHECK(MPI_Send(data, n, type, peer, tag, comm_)); break;
    case Op::Receive: ASTRA_MPI_CHECK(MPI_Recv(data, n, type, peer, tag, comm_, MPI_STATUS_IGNORE)); break;
  }
}

double mpiSeconds() { return MPI_Wtime(); }

void Comm::driveProgress() const {
  int flag = 0;
  ASTRA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE));
}

Comm Comm::splitByNode() const {
  MPI_Comm node = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank(), MPI_INFO_NULL, &node));
  return adopt(node);
}

Info::Info() { ASTRA_MPI_CHECK(MPI_Info_create(&info_)); }

Info::~Info() {
  if (info_ != MPI_INFO_NULL && !MpiEnvironment::finalized()) MPI_Info_free(&info_);
}

Info& Info::set(const char* key, const char* value) {
  ASTRA_MPI_CHECK(MPI_Info_set(info_, key, value));
  return *this;
}

Request::~Request() {
  if (req_ != MPI_REQUEST_NULL && !MpiEnvironment::finalized()) {
    spdlog::error("an MPI request was destroyed while still pending; waiting for it");
    MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
}

Request& Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    Request dying(std::exchange(req_, std::exchange(o.req_, MPI_REQUEST_NULL)));
  }
  return *this;
}

void Request::wait(MPI_Status* status) {
  if (req_ != MPI_REQUEST_NULL) ASTRA_MPI_CHECK(MPI_Wait(&req_, status));
}

bool Request::test(MPI_Status* status) {
  if (req_ == MPI_REQUEST_NULL) return true;
  int done = 0;
  ASTRA_MPI_CHECK(MPI_Test(&req_, &done, status));
  return done != 0;
}

}  // namespace astraflow
