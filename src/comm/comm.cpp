#include "astraflow/comm/comm.hpp"

#include <spdlog/spdlog.h>

#include "astraflow/comm/mpi.hpp"

namespace astraflow {

Comm Comm::duplicate(MPI_Comm other) {
  MPI_Comm dup = MPI_COMM_NULL;
  ASTRA_MPI_CHECK(MPI_Comm_dup(other, &dup));
  ASTRA_MPI_CHECK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  return Comm(dup);
}

Comm Comm::adopt(MPI_Comm owned) {
  if (owned != MPI_COMM_NULL) ASTRA_MPI_CHECK(MPI_Comm_set_errhandler(owned, MPI_ERRORS_RETURN));
  return Comm(owned);
}

Comm::~Comm() {
  if (comm_ != MPI_COMM_NULL && !MpiEnvironment::finalized()) {
    if (MPI_Comm_free(&comm_) != MPI_SUCCESS) spdlog::error("MPI_Comm_free failed");
  }
}

Comm& Comm::operator=(Comm&& o) noexcept {
  if (this != &o) {
    Comm dying(std::exchange(comm_, std::exchange(o.comm_, MPI_COMM_NULL)));
  }
  return *this;
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
