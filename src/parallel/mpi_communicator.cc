// MPI Communicator over MPI_COMM_WORLD or a split of it (runtime.md §6.11): all-gather -> MPI_Allgatherv,
// all-to-all -> MPI_Alltoallv, in units of one row (a contiguous datatype of row_bytes
// bytes), so counts are rows and stay far below INT_MAX.
#include <mpi.h>

#include <time.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
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

// Copies of MPI_COMM_WORLD for the exit barrier, the step header and failure notices, so
// that none of their messages pairs with a collective of the step other ranks may be inside.
MPI_Comm g_exit_comm = MPI_COMM_NULL, g_header_comm = MPI_COMM_NULL, g_fault_comm = MPI_COMM_NULL;
constexpr int kHeaderTag = 1, kFaultTag = 2;
constexpr size_t kMaxNotice = 2000;  // bytes of a failure message sent to the peers

// The job's failure as this process knows it (its own report, or the first notice received).
// Touched only by the thread that communicates (MPI_THREAD_SERIALIZED).
bool g_failed = false;
std::string g_failure;  // "rank N failed: message"
std::string g_notice;   // this rank's message while its sends are in flight

// Takes a failure notice from another rank when one has arrived.
void poll_failures() {
  if (g_failed || g_fault_comm == MPI_COMM_NULL) return;
  int flag = 0;
  MPI_Status st;
  if (MPI_Iprobe(MPI_ANY_SOURCE, kFaultTag, g_fault_comm, &flag, &st) != MPI_SUCCESS || !flag) return;
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string msg(static_cast<size_t>(std::max(n, 0)), '\0');
  MPI_Recv(msg.data(), n, MPI_CHAR, st.MPI_SOURCE, kFaultTag, g_fault_comm, MPI_STATUS_IGNORE);
  g_failed = true;
  g_failure = fmt::format("rank {} failed: {}", st.MPI_SOURCE, msg);
}

Status job_failure(const char* what) { return Status::errorf("{}: the job ended ({})", what, g_failure); }

// Waits for a non-blocking operation; a failure notice ends the wait (the failed rank never
// joins). Polls for notices every 16 tests: MPI progresses only inside MPI calls, so the
// loop spins as a blocking call would.
Status wait_request(MPI_Request* req, const char* what) {
  for (int i = 0;; ++i) {
    int done = 0;
    if (const int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      return Status::errorf("{}: MPI_Test failed: {}", what, mpi_error(rc));
    if (done) return Status();
    if (i % 16 == 15) {
      poll_failures();
      if (g_failed) return job_failure(what);
    }
  }
}

// Starts an operation (the MPI_I* call's return code) and waits for it.
Status run_request(int start_rc, MPI_Request* req, const char* what, const char* mpi_name) {
  if (start_rc != MPI_SUCCESS) return Status::errorf("{}: {} failed: {}", what, mpi_name, mpi_error(start_rc));
  return wait_request(req, what);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, int rank, int size)
      : comm_(comm), rank_(rank), size_(size), counts_(2 * size), displs_(2 * size), slots_(kSlots) {
    for (Slot& sl : slots_) {
      sl.counts.resize(static_cast<size_t>(2 * size));
      sl.displs.resize(static_cast<size_t>(2 * size));
    }
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& [bytes, type] : types_) MPI_Type_free(&type);
    for (auto& [key, type] : strided_types_) MPI_Type_free(&type);
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
    if (g_failed) return job_failure("all_gather_rows");
    MPI_Request req;
    DSV4_RETURN_IF_ERROR(run_request(MPI_Iallgatherv(send, counts_[rank_], row, recv, counts_.data(), displs_.data(),
                                                     row, comm_, &req),
                                     &req, "all_gather_rows", "MPI_Iallgatherv"));
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
    if (g_failed) return job_failure("all_to_all_rows");
    MPI_Request req;
    DSV4_RETURN_IF_ERROR(run_request(MPI_Ialltoallv(send, sc, sd, row, recv, rc, rd, row, comm_, &req), &req,
                                     "all_to_all_rows", "MPI_Ialltoallv"));
    int64_t sent = 0;
    for (int p = 0; p < size_; ++p)
      if (p != rank_) sent += send_rows[p] * row_bytes;
    count(Collective::kAllToAll, sent);
    return Status();
  }

  // ---- Non-blocking and strided collectives (overlap, no staging copies): MPI_Iallgatherv /
  // MPI_Ialltoallv, each request with its own count and displacement arrays (MPI reads them
  // until completion).
  Status start_all_gather_rows(const void* send, std::span<const int64_t> rows, int64_t row_bytes, void* recv,
                               PendingCollective* pending) override {
    if (static_cast<int>(rows.size()) != size_)
      return Status::errorf("all_gather_rows: {} row counts for {} ranks", rows.size(), size_);
    Slot* sl = nullptr;
    DSV4_RETURN_IF_ERROR(free_slot("all_gather_rows", &sl));
    DSV4_RETURN_IF_ERROR(layout("all_gather_rows", rows, sl->counts.data(), sl->displs.data()));
    MPI_Datatype row;
    DSV4_RETURN_IF_ERROR(row_type("all_gather_rows", row_bytes, &row));
    if (g_failed) return job_failure("all_gather_rows");
    const int rc = MPI_Iallgatherv(send, sl->counts[rank_], row, recv, sl->counts.data(), sl->displs.data(), row,
                                   comm_, &sl->req);
    if (rc != MPI_SUCCESS) return Status::errorf("all_gather_rows: MPI_Iallgatherv failed: {}", mpi_error(rc));
    sl->what = "all_gather_rows";
    bind_pending(pending, this, static_cast<int>(sl - slots_.data()));
    count(Collective::kAllGather, rows[rank_] * row_bytes * (size_ - 1));
    return Status();
  }

  Status start_all_to_all_rows(const void* send, std::span<const int64_t> send_rows, void* recv,
                               std::span<const int64_t> recv_rows, int64_t row_bytes,
                               PendingCollective* pending) override {
    if (static_cast<int>(send_rows.size()) != size_ || static_cast<int>(recv_rows.size()) != size_)
      return Status::errorf("all_to_all_rows: {} / {} row counts for {} ranks", send_rows.size(), recv_rows.size(),
                            size_);
    Slot* sl = nullptr;
    DSV4_RETURN_IF_ERROR(free_slot("all_to_all_rows", &sl));
    int* sc = sl->counts.data();
    int* sd = sl->displs.data();
    int* rc = sc + size_;
    int* rd = sd + size_;
    DSV4_RETURN_IF_ERROR(layout("all_to_all_rows", send_rows, sc, sd));
    DSV4_RETURN_IF_ERROR(layout("all_to_all_rows", recv_rows, rc, rd));
    MPI_Datatype row;
    DSV4_RETURN_IF_ERROR(row_type("all_to_all_rows", row_bytes, &row));
    if (g_failed) return job_failure("all_to_all_rows");
    const int code = MPI_Ialltoallv(send, sc, sd, row, recv, rc, rd, row, comm_, &sl->req);
    if (code != MPI_SUCCESS) return Status::errorf("all_to_all_rows: MPI_Ialltoallv failed: {}", mpi_error(code));
    sl->what = "all_to_all_rows";
    bind_pending(pending, this, static_cast<int>(sl - slots_.data()));
    int64_t sent = 0;
    for (int p = 0; p < size_; ++p)
      if (p != rank_) sent += send_rows[p] * row_bytes;
    count(Collective::kAllToAll, sent);
    return Status();
  }
  Status all_to_all_strided(const void* send, int64_t n, int64_t row_stride, int64_t peer_offset, void* recv,
                            std::span<const int64_t> recv_rows, int64_t row_bytes) override {
    if (static_cast<int>(recv_rows.size()) != size_)
      return Status::errorf("all_to_all_strided: {} row counts for {} ranks", recv_rows.size(), size_);
    if (n < 0 || n > INT_MAX || row_stride < row_bytes || peer_offset < 0)
      return Status::errorf("all_to_all_strided: {} rows of {} bytes at stride {}", n, row_bytes, row_stride);
    int* sc = counts_.data();
    int* sd = displs_.data();
    int* rc = counts_.data() + size_;
    int* rd = displs_.data() + size_;
    DSV4_RETURN_IF_ERROR(layout("all_to_all_strided", recv_rows, rc, rd));
    MPI_Datatype row, peer;
    DSV4_RETURN_IF_ERROR(row_type("all_to_all_strided", row_bytes, &row));
    DSV4_RETURN_IF_ERROR(strided_type(n, row_bytes, row_stride, peer_offset, &peer));
    for (int p = 0; p < size_; ++p) {
      sc[p] = n > 0 ? 1 : 0;
      sd[p] = p;  // in extents of peer: p·peer_offset bytes
    }
    if (g_failed) return job_failure("all_to_all_strided");
    MPI_Request req;
    DSV4_RETURN_IF_ERROR(run_request(MPI_Ialltoallv(send, sc, sd, peer, recv, rc, rd, row, comm_, &req), &req,
                                     "all_to_all_strided", "MPI_Ialltoallv"));
    count(Collective::kAllToAll, n * row_bytes * (size_ - 1));
    return Status();
  }
  // ---- end of non-blocking and strided collectives ----

  Status broadcast(void* data, int64_t bytes, int root) override {
    if (root < 0 || root >= size_) return Status::errorf("broadcast: root {} outside [0, {})", root, size_);
    if (bytes < 0 || bytes > INT_MAX) return Status::errorf("broadcast: {} bytes outside [0, {}]", bytes, INT_MAX);
    if (g_failed) return job_failure("broadcast");
    MPI_Request req;
    DSV4_RETURN_IF_ERROR(run_request(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_, &req), &req,
                                     "broadcast", "MPI_Ibcast"));
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
    if (g_failed) return job_failure("barrier");
    MPI_Request req;
    DSV4_RETURN_IF_ERROR(run_request(MPI_Ibarrier(comm_, &req), &req, "barrier", "MPI_Ibarrier"));
    count(Collective::kBarrier, 0);
    return Status();
  }

  Status send_header(std::span<const uint8_t> bytes) override {
    if (comm_ != MPI_COMM_WORLD || rank_ != 0) return Status::error("send_header: rank 0 of the world only");
    if (bytes.size() > INT_MAX) return Status::errorf("send_header: {} bytes over {}", bytes.size(), INT_MAX);
    if (g_failed) return job_failure("send_header");
    header_sends_.resize(static_cast<size_t>(size_));
    for (int p = 1; p < size_; ++p) {
      const int rc = MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, p, kHeaderTag, g_header_comm,
                               &header_sends_[static_cast<size_t>(p)]);
      if (rc != MPI_SUCCESS) return Status::errorf("send_header: MPI_Isend failed: {}", mpi_error(rc));
    }
    for (int p = 1; p < size_; ++p)
      DSV4_RETURN_IF_ERROR(wait_request(&header_sends_[static_cast<size_t>(p)], "send_header"));
    count(Collective::kHeader, static_cast<int64_t>(bytes.size()) * (size_ - 1));
    return Status();
  }

  Status receive_header(std::vector<uint8_t>& bytes) override {
    if (comm_ != MPI_COMM_WORLD || rank_ == 0) return Status::error("receive_header: ranks of the world but 0 only");
    const double start = MPI_Wtime();
    long sleep_ns = 20000;
    for (int i = 0;; ++i) {
      int flag = 0;
      MPI_Status st;
      if (const int rc = MPI_Iprobe(0, kHeaderTag, g_header_comm, &flag, &st); rc != MPI_SUCCESS)
        return Status::errorf("receive_header: MPI_Iprobe failed: {}", mpi_error(rc));
      if (flag) {
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        bytes.resize(static_cast<size_t>(n));
        if (const int rc = MPI_Recv(bytes.data(), n, MPI_BYTE, 0, kHeaderTag, g_header_comm, MPI_STATUS_IGNORE);
            rc != MPI_SUCCESS)
          return Status::errorf("receive_header: MPI_Recv failed: {}", mpi_error(rc));
        count(Collective::kHeader, 0);
        return Status();
      }
      if (i % 16 == 15) {  // a failure may wait a little; every poll costs an idle rank CPU
        poll_failures();
        if (g_failed) return job_failure("receive_header");
      }
      if (MPI_Wtime() - start < kHeaderSpinSeconds) continue;
      // Idle: poll with a backoff bounded by kHeaderSleepSeconds (the latency it may add).
      timespec pause{0, sleep_ns};
      nanosleep(&pause, nullptr);
      sleep_ns = std::min(2 * sleep_ns, static_cast<long>(kHeaderSleepSeconds * 1e9));
    }
  }

  void report_failure(const std::string& message) override {
    if (g_failed || g_fault_comm == MPI_COMM_NULL) return;
    int me = 0, n = 1;
    MPI_Comm_rank(g_fault_comm, &me);
    MPI_Comm_size(g_fault_comm, &n);
    g_failed = true;
    g_failure = fmt::format("rank {} failed: {}", me, message);
    g_notice = message.substr(0, kMaxNotice);
    // Small messages go out eagerly; the requests are never waited for (the job ends).
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      MPI_Request req;
      if (MPI_Isend(g_notice.data(), static_cast<int>(g_notice.size()), MPI_CHAR, p, kFaultTag, g_fault_comm,
                    &req) == MPI_SUCCESS)
        MPI_Request_free(&req);
    }
  }

  Status job_status() const override {
    poll_failures();
    return g_failed ? Status::errorf("the job ended ({})", g_failure) : Status();
  }

 protected:
  // Non-blocking slots (overlap). A failure notice ends a wait as in the blocking calls.
  bool test_slot(int i) override {
    Slot& sl = slots_[i];
    int done = 0;
    if (MPI_Test(&sl.req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;  // wait() reports it
    return done != 0;
  }
  Status wait_slot(int i) override { return wait_request(&slots_[i].req, slots_[i].what); }

 private:
  struct Slot {
    MPI_Request req = MPI_REQUEST_NULL;  // MPI_Test / MPI_Wait set it back to null when done
    std::vector<int> counts, displs;     // [2·size], read by MPI until completion
    const char* what = "";
  };
  static constexpr int kSlots = 8;  // outstanding non-blocking collectives per communicator
  Status free_slot(const char* what, Slot** out) {
    for (Slot& sl : slots_)
      if (sl.req == MPI_REQUEST_NULL) {
        *out = &sl;
        return Status();
      }
    return Status::errorf("{}: more than {} non-blocking collectives outstanding", what, kSlots);
  }

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

  // n rows of row_bytes at row_stride, extent peer_offset (the next peer's rows); one per
  // shape, committed on first use and kept (a step's row counts take few values).
  Status strided_type(int64_t n, int64_t row_bytes, int64_t row_stride, int64_t peer_offset, MPI_Datatype* t) {
    const std::array<int64_t, 4> key{n, row_bytes, row_stride, peer_offset};
    for (const auto& [k, type] : strided_types_)
      if (k == key) {
        *t = type;
        return Status();
      }
    MPI_Datatype rows;
    if (MPI_Type_create_hvector(static_cast<int>(std::max<int64_t>(n, 1)), static_cast<int>(row_bytes), row_stride,
                                MPI_BYTE, &rows) != MPI_SUCCESS ||
        MPI_Type_create_resized(rows, 0, peer_offset, t) != MPI_SUCCESS || MPI_Type_commit(t) != MPI_SUCCESS)
      return Status::errorf("all_to_all_strided: no datatype for {} rows of {} bytes", n, row_bytes);
    MPI_Type_free(&rows);
    strided_types_.emplace_back(key, *t);
    return Status();
  }

  MPI_Comm comm_;
  int rank_, size_;
  std::vector<int> counts_, displs_;  // sized once
  std::vector<std::pair<int64_t, MPI_Datatype>> types_;
  std::vector<MPI_Request> header_sends_;  // [size] rank 0's header sends in flight
  std::vector<Slot> slots_;  // kSlots, sized once
  std::vector<std::pair<std::array<int64_t, 4>, MPI_Datatype>> strided_types_;
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

void exit_failed_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

int mpi_thread_level() {
  int initialized = 0, level = -1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Query_thread(&level);
  return level;
}

static_assert(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED && MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED &&
              MPI_THREAD_SERIALIZED == kMpiThreadSerialized);

Status check_mpi_thread_level(int provided) {
  if (provided >= MPI_THREAD_SERIALIZED) return Status();
  return Status::errorf("MPI provides thread level {} ({}); dsv4 needs MPI_THREAD_SERIALIZED: serve and chat "
                        "communicate from their service thread (an MPI library built with thread support, e.g. "
                        "OpenMPI's default build)",
                        provided, provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED");
}

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return Status::errorf("MPI_Init_thread failed: {}", mpi_error(rc));
    std::atexit(finalize_at_exit);
    DSV4_RETURN_IF_ERROR(check_mpi_thread_level(provided));
    // Errors come back as codes (turned into Status), not as an abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (MPI_Comm* c : {&g_exit_comm, &g_header_comm, &g_fault_comm})
      if (MPI_Comm_dup(MPI_COMM_WORLD, c) != MPI_SUCCESS) return Status::error("MPI_Comm_dup of the world failed");
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Communicator>(new MpiCommunicator(MPI_COMM_WORLD, rank, size));
}

}  // namespace dsv4
