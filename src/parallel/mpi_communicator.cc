// MPI Communicator over MPI_COMM_WORLD or a split of it (runtime.md §6.11): all-gather -> MPI_Allgatherv,
// all-to-all -> MPI_Alltoallv, in units of one row (a contiguous datatype of row_bytes
// bytes), so counts are rows and stay far below INT_MAX.
#include <mpi.h>

#include <time.h>

#include <climits>
#include <cstdlib>
#include <utility>
#include <vector>

#include "parallel/communicator.h"

namespace dsv4 {
namespace {

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}

// A copy of MPI_COMM_WORLD for the exit barrier alone, so that it never pairs with a
// collective of the step that other ranks may be inside.
MPI_Comm g_exit_comm = MPI_COMM_NULL;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size)
      : comm_(comm), rank_(rank), size_(size), counts_(2 * size), displs_(2 * size) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& [bytes, type] : types_) MPI_Type_free(&type);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes, void* recv) override {
    if (static_cast<int>(rows.size()) != size_)
      return Status::errorf("all_gather_rows: {} row counts for {} ranks", rows.size(), size_);
    DSV4_RETURN_IF_ERROR(layout("all_gather_rows", rows, counts_.data(), displs_.data()));
    MPI_Datatype row;
    DSV4_RETURN_IF_ERROR(row_type("all_gather_rows", row_bytes, &row));
    const int rc = MPI_Allgatherv(send, counts_[rank_], row, recv, counts_.data(), displs_.data(), row, comm_);
    if (rc != MPI_SUCCESS) return Status::errorf("all_gather_rows: MPI_Allgatherv failed: {}", mpi_error(rc));
    count(Collective::kAllGather, rows[rank_] * row_bytes * (size_ - 1));
    return Status();
  }

  Status all_to_all_rows(const void* send, std::span<const int64_t> send_rows, void* recv,
                         std::span<const int64_t> recv_rows, int64_t row_bytes) override {
    if (static_cast<int>(send_rows.size()) != size_ || static_cast<int>(recv_rows.size()) != size_)
      return Status::errorf("all_to_all_rows: {} / {} row counts for {} ranks", send_rows.size(), recv_rows.size(),
                            size_);
    int* sc = counts_.data();
    int* sd = displs_.data();
    int* rc = counts_.data() + size_;
    int* rd = displs_.data() + size_;
    DSV4_RETURN_IF_ERROR(layout("all_to_all_rows", send_rows, sc, sd));
    DSV4_RETURN_IF_ERROR(layout("all_to_all_rows", recv_rows, rc, rd));
    MPI_Datatype row;
    DSV4_RETURN_IF_ERROR(row_type("all_to_all_rows", row_bytes, &row));
    const int code = MPI_Alltoallv(send, sc, sd, row, recv, rc, rd, row, comm_);
    if (code != MPI_SUCCESS) return Status::errorf("all_to_all_rows: MPI_Alltoallv failed: {}", mpi_error(code));
    int64_t sent = 0;
    for (int p = 0; p < size_; ++p)
      if (p != rank_) sent += send_rows[p] * row_bytes;
    count(Collective::kAllToAll, sent);
    return Status();
  }

  Status broadcast(void* data, int64_t bytes, int root) override {
    if (root < 0 || root >= size_) return Status::errorf("broadcast: root {} outside [0, {})", root, size_);
    if (bytes < 0 || bytes > INT_MAX) return Status::errorf("broadcast: {} bytes outside [0, {}]", bytes, INT_MAX);
    const int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_);
    if (rc != MPI_SUCCESS) return Status::errorf("broadcast: MPI_Bcast failed: {}", mpi_error(rc));
    count(Collective::kBroadcast, rank_ == root ? bytes * (size_ - 1) : 0);
    return Status();
  }

  Result<std::unique_ptr<Communicator>> split(int color, int key) override {
    MPI_Comm sub;
    const int rc = MPI_Comm_split(comm_, color, key, &sub);
    if (rc != MPI_SUCCESS) return Status::errorf("split: MPI_Comm_split failed: {}", mpi_error(rc));
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(sub, &rank);
    MPI_Comm_size(sub, &size);
    return std::unique_ptr<Communicator>(new MpiCommunicator(sub, rank, size));
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(comm_, code);
    std::exit(code);
  }

  Status barrier() override {
    const int rc = MPI_Barrier(comm_);
    if (rc != MPI_SUCCESS) return Status::errorf("barrier: MPI_Barrier failed: {}", mpi_error(rc));
    count(Collective::kBarrier, 0);
    return Status();
  }

 private:
  // int counts and displacements (in rows) from 64-bit row counts.
  Status layout(const char* what, std::span<const int64_t> rows, int* counts, int* displs) const {
    int64_t off = 0;
    for (int p = 0; p < size_; ++p) {
      if (rows[p] < 0 || off + rows[p] > INT_MAX)
        return Status::errorf("{}: row count {} for rank {} outside [0, {}]", what, rows[p], p, INT_MAX - off);
      counts[p] = static_cast<int>(rows[p]);
      displs[p] = static_cast<int>(off);
      off += rows[p];
    }
    return Status();
  }
  // One contiguous datatype per row width, committed on first use and kept: a step uses a
  // handful of widths, so steady-state collectives create no MPI objects.
  Status row_type(const char* what, int64_t row_bytes, MPI_Datatype* t) {
    if (row_bytes < 1 || row_bytes > INT_MAX)
      return Status::errorf("{}: row of {} bytes outside [1, {}]", what, row_bytes, INT_MAX);
    for (const auto& [bytes, type] : types_)
      if (bytes == row_bytes) {
        *t = type;
        return Status();
      }
    MPI_Type_contiguous(static_cast<int>(row_bytes), MPI_BYTE, t);
    MPI_Type_commit(t);
    types_.emplace_back(row_bytes, *t);
    return Status();
  }

  MPI_Comm comm_;
  int rank_, size_;
  std::vector<int> counts_, displs_;  // sized once
  std::vector<std::pair<int64_t, MPI_Datatype>> types_;
};

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

bool wait_for_ranks_at_exit(double seconds) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || g_exit_comm == MPI_COMM_NULL) return false;
  MPI_Request req;
  if (MPI_Ibarrier(g_exit_comm, &req) != MPI_SUCCESS) return false;
  const double deadline = MPI_Wtime() + seconds;
  int done = 0;
  while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && MPI_Wtime() < deadline) {
    timespec pause{0, 1000000};  // 1 ms
    nanosleep(&pause, nullptr);
  }
  return done != 0;
}

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return Status::errorf("MPI_Init_thread failed: {}", mpi_error(rc));
    std::atexit(finalize_at_exit);
    // Errors come back as codes (turned into Status), not as an abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_exit_comm) != MPI_SUCCESS) g_exit_comm = MPI_COMM_NULL;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, rank, size));
}

}  // namespace dsv4
