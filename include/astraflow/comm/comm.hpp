#pragma once
// RAII communicator: one object owns one MPI_Comm. Constructed by duplicating or splitting
// another communicator; freed by its owner. Error handler set to MPI_ERRORS_RETURN so every
// failure surfaces as an MpiError through ASTRA_MPI_CHECK.
#include <mpi.h>

#include <utility>

namespace astraflow {

class Comm {
 public:
  Comm() = default;  // null communicator (e.g. this rank is not a member)
  // Collective over `other`: duplicates it.
  static Comm duplicate(MPI_Comm other);
  // Adopts a communicator this process created (e.g. from MPI_Comm_spawn); frees it later.
  static Comm adopt(MPI_Comm owned);

  ~Comm();
  Comm(Comm&& o) noexcept : comm_(std::exchange(o.comm_, MPI_COMM_NULL)) {}
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // Collective over this comm; same order on all ranks. color < 0: not a member (null result).
  Comm split(int color, int key) const;

  bool valid() const { return comm_ != MPI_COMM_NULL; }
  int rank() const;
  int size() const;
  // Collective over this comm.
  void barrier() const;
  MPI_Comm raw() const { return comm_; }

 private:
  explicit Comm(MPI_Comm c) : comm_(c) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
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
