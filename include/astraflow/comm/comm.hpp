#pragma once
// RAII communicator: one object owns one MPI_Comm. Constructed by duplicating or splitting
// another communicator; freed by its owner. Error handler set to MPI_ERRORS_RETURN so every
// failure surfaces as an MpiError through ASTRA_MPI_CHECK.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace astraflow {

// MPI_Wtime: seconds on this process's MPI clock, the run clock's base on every rank.
double mpiSeconds();

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
  // The same for bytes of any length (the size first), and for one plain value (the ranks of a
  // job share one architecture: its bytes as they are).
  std::vector<std::byte> broadcastBytes(int root, std::vector<std::byte> bytes) const;
  template <class T>
  requires std::is_trivially_copyable_v<T> T broadcastValue(int root, T value)
  const {
    broadcastRaw(root, &value, sizeof(T));
    return value;
  }
  // Collective over this comm: the largest of every rank's value (element-wise for a span, in
  // place).
  std::int64_t allreduceMax(std::int64_t value) const;
  std::uint64_t allreduceMax(std::uint64_t value) const;
  void allreduceMax(std::span<std::int64_t> values) const;
  // Collective over this comm: the sum of the values of the ranks before this one (0 on rank 0).
  int exclusiveSum(int value) const;
  // Collective over this comm: the ranks that share this rank's node (its shared memory).
  Comm splitByNode() const;
  // Lets MPI progress one-sided traffic aimed at this rank (an MPI_Iprobe that receives
  // nothing): transports without a progress thread serve remote gets and puts only inside MPI
  // calls, and a rank polling its own window would otherwise starve its readers.
  void driveProgress() const;

  // Collectives and point-to-point transfers over float or double buffers (the trainer's
  // gradients and optimizer state), each buffer at most 2^31 − 1 values (an Error past that).
  // Sums: allreduceSum everywhere; reduceSum on `root` (the others' buffers are left as they
  // were); allgatherInPlace: rank r's block is data's r-th of size() equal parts;
  // reduceScatterBlock: `out` (in's size / size()) gets this rank's part of the sum.
  template <class T>
  void allreduceSum(std::span<T> data) const {
    transfer(Op::AllreduceSum, data.data(), nullptr, data.size(), elementOf<T>(), 0);
  }
  template <class T>
  void reduceSum(std::span<T> data, int root) const {
    transfer(Op::ReduceSum, data.data(), nullptr, data.size(), elementOf<T>(), root);
  }
  template <class T>
  void broadcast(std::span<T> data, int root) const {
    transfer(Op::Broadcast, data.data(), nullptr, data.size(), elementOf<T>(), root);
  }
  template <class T>
  void allgatherInPlace(std::span<T> data) const {
    transfer(Op::AllgatherInPlace, data.data(), nullptr, data.size(), elementOf<T>(), 0);
  }
  template <class T>
  void reduceScatterBlock(std::span<const T> in, std::span<T> out) const {
    transfer(Op::ReduceScatterBlock, const_cast<T*>(in.data()), out.data(), in.size(), elementOf<T>(), 0);
  }
  template <class T>
  void send(std::span<const T> data, int dest, int tag) const {
    transfer(Op::Send, const_cast<T*>(data.data()), nullptr, data.size(), elementOf<T>(), dest, tag);
  }
  template <class T>
  void receive(std::span<T> data, int source, int tag) const {
    transfer(Op::Receive, data.data(), nullptr, data.size(), elementOf<T>(), source, tag);
  }
  MPI_Comm raw() const { return comm_; }

 private:
  enum class Element { Float, Double };
  enum class Op { AllreduceSum, ReduceSum, Broadcast, AllgatherInPlace, ReduceScatterBlock, Send, Receive };
  template <class T>
  static constexpr Element elementOf() {
    static_assert(std::is_same_v<std::remove_const_t<T>, float> || std::is_same_v<std::remove_const_t<T>, double>,
                  "typed collectives take float or double buffers");
    return std::is_same_v<std::remove_const_t<T>, float> ? Element::Float : Element::Double;
  }
  void transfer(Op op, void* data, void* out, std::size_t count, Element element, int peer, int tag = 0) const;
  void broadcastRaw(int root, void* data, std::size_t bytes) const;
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
