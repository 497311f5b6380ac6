#pragma once
// RAII communicator: one object owns one MPI_Comm. Constructed by duplicating or splitting
// another communicator; freed by its owner. Error handler set to MPI_ERRORS_RETURN so every
// failure surfaces as an MpiError through ASTRA_MPI_CHECK.
#include <mpi.h>

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace astraflow {

class Comm {
 public:
  // How the owner lets go: MPI_Comm_free, or MPI_Comm_disconnect for an intercommunicator to
  // processes this one spawned or was spawned by (it waits for their pending traffic, and
  // afterwards the two jobs are independent).
  enum class Release { Free, Disconnect };

  Comm() = default;  // null communicator (e.g. this rank is not a member)
  // Collective over `other`: duplicates it.
  static Comm duplicate(MPI_Comm other);
  // Adopts a communicator this process created; releases it later as `release` says.
  static Comm adopt(MPI_Comm owned, Release release = Release::Free);
  // The intercommunicator to this process's parent job (MPI_Comm_get_parent; released by
  // disconnecting), or a null Comm when it was not started by MPI_Comm_spawn.
  static Comm parent();
  // Collective over MPI_COMM_SELF: starts `ranks` processes of `command` with `args` and
  // returns the intercommunicator to them (released by disconnecting). A failed spawn returns
  // a null Comm and says why in `error`; it is not thrown, the caller decides what to do.
  static Comm spawn(const std::string& command, const std::vector<std::string>& args, int ranks, std::string& error);

  ~Comm();
  Comm(Comm&& o) noexcept
      : comm_(std::exchange(o.comm_, MPI_COMM_NULL)), release_(std::exchange(o.release_, Release::Free)) {}
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // Collective over this comm; same order on all ranks. color < 0: not a member (null result).
  Comm split(int color, int key) const;
  // Collective over this intercommunicator: one intracommunicator of both groups, this group's
  // ranks after the other's when `high`.
  Comm merge(bool high) const;
  // Collective over this comm: releases it now (free or disconnect, as adopted).
  void release();
  // Gives the handle up without releasing it, for a communicator with a lost member: freeing
  // or disconnecting is collective and would wait for the dead process forever. The handle is
  // leaked on purpose; the process ends with _exit (docs/architecture.md §9).
  void abandon() noexcept { comm_ = MPI_COMM_NULL; }

  bool valid() const { return comm_ != MPI_COMM_NULL; }
  int rank() const;
  int size() const;
  // Collective over this comm.
  void barrier() const;
  // Collective over this comm: every rank's bytes, in rank order, on `root` (empty elsewhere).
  std::vector<std::vector<std::byte>> gatherBytes(int root, std::span<const std::byte> mine) const;
  // Collective over this comm: every rank's `mine` (the same size on every rank) on every rank,
  // concatenated in rank order.
  std::vector<std::byte> allgatherBytes(std::span<const std::byte> mine) const;
  // Collective over this comm: `root`'s value on every rank (the others' `value` is ignored).
  std::string broadcastString(int root, std::string value) const;
  MPI_Comm raw() const { return comm_; }

 private:
  explicit Comm(MPI_Comm c, Release release = Release::Free) : comm_(c), release_(release) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
  Release release_ = Release::Free;
};

// RAII MPI_Info with string key/values.
class Info {
 public:
  Info();
  ~Info();
  Info(Info&& o) noexcept : info_(std::exchange(o.info_, MPI_INFO_NULL)) {}
  Info& operator=(Info&&) = delete;
  Info(const Info&) = delete;
  Info& operator=(const Info&) = delete;
  Info& set(const char* key, const char* value);
  MPI_Info raw() const { return info_; }

 private:
  MPI_Info info_ = MPI_INFO_NULL;
};

// RAII non-blocking request. Destroying one still pending is a bug: it is logged as an error,
// then the request is waited on so no buffer is released under MPI's feet.
class Request {
 public:
  Request() = default;
  explicit Request(MPI_Request r) : req_(r) {}
  ~Request();
  Request(Request&& o) noexcept : req_(std::exchange(o.req_, MPI_REQUEST_NULL)) {}
  Request& operator=(Request&& o) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  void wait(MPI_Status* status = MPI_STATUS_IGNORE);
  bool test(MPI_Status* status = MPI_STATUS_IGNORE);
  bool pending() const { return req_ != MPI_REQUEST_NULL; }
  MPI_Request* out() { return &req_; }

 private:
  MPI_Request req_ = MPI_REQUEST_NULL;
};

}  // namespace astraflow
